// Pieces shared by the derivative formulas of the reduction operators,
// written with the C++ operator API only (so a traced backward records plain
// operator calls).
#pragma once
#include <vector>

#include "ops/derivative_util.h"
#include "ops/kernel_util.h"

namespace tp::ops {

// `t` (a reduction result over `mask`) with the reduced dims restored as size
// 1, so it broadcasts against the input.
inline Tensor as_keepdim(const Tensor& t, const Tensor& x, const std::vector<bool>& mask, bool keepdim) {
  if (keepdim) return t;
  return reshape(t, reduced_shape(x.sizes(), mask, true));
}

// The number of elements each reduction over `mask` combines, as a tensor
// (float64, the reduced dims kept as size 1) instead of a number: a sum of
// ones broadcast to x's sizes, so a graph traced with symbolic sizes computes
// it at every call (exact below 2^53). For the symbolic derivative formulas
// (OpDef::symbolic_backward). The C++ factories build on the host: for a
// device x the ones are where(true, 1, x), an operator of x on x's device (its
// values never read), so a CUDA joint trace records them as a function of x.
inline Tensor count_tensor(const Tensor& x, const std::vector<bool>& mask) {
  Tensor one = x.device().kind == Device::Kind::CPU
                   ? expand(ones(Shape(static_cast<size_t>(x.dim()), 1), DType::Float64), x.sizes())
                   : to_dtype(where(Tensor::scalar_tensor(Scalar(true), DType::Bool), scalar(Scalar(1.0)), x),
                              DType::Float64);
  std::vector<int64_t> dims;
  for (size_t d = 0; d < mask.size(); ++d)
    if (mask[d]) dims.push_back(static_cast<int64_t>(d));
  return sum(one, dims, true);
}

// The gradient of an extremum (max/min/amax/amin): it flows to every position
// equal to the result, split evenly between ties, so the gradient sums to the
// incoming one whichever tie a subgradient would pick.
inline Tensor extremum_grad(const Tensor& g, const Tensor& x, const Tensor& result, const std::vector<bool>& mask,
                            bool keepdim) {
  Tensor gk = as_keepdim(g, x, mask, keepdim);
  Tensor hit = to_dtype(eq(x, as_keepdim(result, x, mask, keepdim)), g.dtype());
  std::vector<int64_t> dims;
  for (size_t d = 0; d < mask.size(); ++d)
    if (mask[d]) dims.push_back(static_cast<int64_t>(d));
  Tensor count = dims.empty() ? ops::ones({}, g.dtype()) : sum(hit, dims, true);
  return reduce_grad(mul(div(gk, count), hit), x);
}

}  // namespace tp::ops
