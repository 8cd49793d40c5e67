// masked_scatter(self, mask, source) / masked_scatter_: the result is self
// (broadcast with mask) where mask is false, and source's elements, taken in
// row-major order, at the true positions (the k-th true position receives
// source's k-th element; source is read flattened, whatever its shape, and
// its elements past the k-th are unused). The output shape follows from the
// input shapes alone, so the operator is an ordinary node for Stax; only the
// check that source is long enough reads the mask.
//
// Out of place, self and mask broadcast to one shape; in place, mask must
// broadcast to self's shape. The CUDA kernel is cuda/masked_scatter.cpp.
#include <algorithm>
#include <cstring>

#include "ops/byte_move.h"
#include "ops/derivative_util.h"
#include "ops/dispatch.h"
#include "ops/families.h"
#include "ops/kernel_util.h"
#include "ops/registry.h"

namespace tp {
namespace {

std::vector<TensorMeta> masked_scatter_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  TP_CHECK(in[1].dtype == DType::Bool, TypeError, op.name, ": expected a bool mask, got mask of dtype ",
           dtype_name(in[1].dtype));
  TP_CHECK(in[2].dtype == in[0].dtype, TypeError, op.name,
           ": expected self and source to have the same dtype, got self of dtype ", dtype_name(in[0].dtype),
           " and source of dtype ", dtype_name(in[2].dtype));
  const Shape b = broadcast_shapes(in[0].sizes, in[1].sizes, op.name);
  if (op.has(kInplace)) {
    TP_CHECK(b == in[0].sizes, ValueError, op.name, ": mask of shape ", shape_str(in[1].sizes),
             " does not broadcast to self of shape ", shape_str(in[0].sizes));
    check_no_internal_overlap(in[0].sizes, in[0].strides, op.name);
    return {in[0]};
  }
  return {TensorMeta::contiguous(b, in[0].dtype)};
}

std::vector<Tensor> masked_scatter_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs&,
                                       const std::vector<TensorMeta>& om) {
  const Tensor& self = in[0];
  const Shape& shape = om[0].sizes;
  // The mask as a contiguous bool array of the result's shape (row-major order
  // is the order in which source is consumed).
  Tensor mask = Tensor::empty(shape, DType::Bool);
  move_elements(mask, in[1]);
  const bool* m = mask.data_as<bool>();
  const int64_t n = mask.numel();
  const int64_t hits = std::count(m, m + n, true);
  const Tensor src = contiguous_bits(in[2]);
  TP_CHECK(hits <= src.numel(), Error, op.name, ": source has ", src.numel(), " elements (shape ",
           shape_str(src.sizes()), ") but the mask (shape ", shape_str(in[1].sizes()), ", broadcast to ",
           shape_str(shape), ") has ", hits, " true positions; source needs at least as many elements");
  // Written into a contiguous buffer first: source may alias self (x.masked_scatter_(m, x)).
  Tensor r = Tensor::empty(shape, self.dtype());
  move_elements(r, self);
  const int64_t size = itemsize(self.dtype());
  char* o = static_cast<char*>(r.data());
  const char* s = static_cast<const char*>(src.data());
  for (int64_t i = 0, k = 0; i < n; ++i)
    if (m[i]) std::memcpy(o + i * size, s + (k++) * size, static_cast<size_t>(size));
  if (op.has(kInplace)) {
    move_elements(self, r);
    return {self};
  }
  return {r};
}

// d/dself: the gradient where mask is false (summed over self's broadcast
// dims). d/dsource: the k-th element gets the gradient at the k-th true
// position; source elements past the last true position get zero.
std::vector<Tensor> masked_scatter_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  std::vector<Tensor> grads(a.inputs.size());
  if (!g.defined()) return grads;
  const Tensor& mask = a.inputs[1];
  if (a.needs_grad[0]) grads[0] = ops::reduce_grad(ops::masked_fill(g, mask, Scalar(0.0)), a.inputs[0]);
  if (a.needs_grad[2]) {
    const Tensor& source = a.inputs[2];
    Tensor taken = ops::masked_select(g, mask);  // one entry per true position, row-major
    const int64_t n = source.numel(), k = taken.numel();
    if (k < n) {
      // Zeros on source's device (zeros_like builds on the host): source's
      // unused elements times 0, with the NaN of inf * 0 and NaN * 0 cleared.
      Tensor rest = ops::narrow(ops::reshape(ops::to_dtype(source, g.dtype()), {-1}), 0, k, n - k);
      rest = ops::mul(rest, ops::scalar(Scalar(0.0)));
      rest = ops::masked_fill(rest, ops::isnan(rest), Scalar(0.0));
      taken = ops::cat({taken, rest}, 0);
    }
    grads[2] = ops::reduce_grad(ops::reshape(taken, source.sizes()), source);
  }
  return grads;
}

}  // namespace

void register_masked_scatter_ops() {
  register_op({.name = "masked_scatter",
               .schema = "masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor",
               .tags = kAllDTypes, .num_inputs = 3, .infer = &masked_scatter_infer, .cpu = &masked_scatter_cpu,
               .backward = &masked_scatter_backward});
  register_op({.name = "masked_scatter_",
               .schema = "masked_scatter_(Tensor(a!) self, Tensor mask, Tensor source) -> Tensor(a!)",
               .tags = kInplace | kAllDTypes, .num_inputs = 3, .infer = &masked_scatter_infer,
               .cpu = &masked_scatter_cpu, .backward = &masked_scatter_backward});
}

}  // namespace tp
