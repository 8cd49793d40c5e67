// The C++ API of TensorPlay operators. Every function goes through the
// dispatcher (ops/dispatch.h), so C++ callers are traced and differentiated
// exactly like Python callers. The Python binding calls these.
#pragma once
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace tp::ops {

using Dims = std::vector<int64_t>;

// ---- pointwise (broadcasting, PyTorch type promotion; Python numbers become wrapped scalars) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);  // true division: integers -> float32
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);  // comparisons -> bool
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);  // integer inputs promote to float32
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// ---- reductions (dims empty = all dims; negative dims wrap) ----
Tensor sum(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor amax(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor softmax(const Tensor& x, int64_t dim);
// Sums a broadcast gradient back down to `shape` (used by derivative formulas).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- linear algebra (OpenBLAS, loaded at run time) ----
Tensor matmul(const Tensor& a, const Tensor& b);

// ---- views: share storage and version counter ----
Tensor view(const Tensor& x, const Shape& shape);  // one -1 allowed; errors if strides incompatible
Tensor reshape(const Tensor& x, const Shape& shape);  // view when possible, else a copy
Tensor permute(const Tensor& x, const Dims& dims);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor expand(const Tensor& x, const Shape& shape);  // -1 keeps a size
Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor squeeze(const Tensor& x, std::optional<int64_t> dim = std::nullopt);

// ---- copies and conversions ----
Tensor to_dtype(const Tensor& x, DType dtype);  // returns x itself if already that dtype
Tensor clone(const Tensor& x);                  // contiguous copy
Tensor contiguous(const Tensor& x);             // x itself if already contiguous

// ---- in-place (bump the version counter) ----
Tensor& add_(Tensor& x, const Tensor& y);
Tensor& sub_(Tensor& x, const Tensor& y);
Tensor& mul_(Tensor& x, const Tensor& y);
Tensor& div_(Tensor& x, const Tensor& y);
Tensor& fill_(Tensor& x, const Scalar& v);
Tensor& zero_(Tensor& x);
Tensor& copy_(Tensor& dst, const Tensor& src);  // broadcasts src, converts dtype

// ---- factories ----
Tensor empty(const Shape& shape, DType dtype = DType::Float32);
Tensor zeros(const Shape& shape, DType dtype = DType::Float32);
Tensor ones(const Shape& shape, DType dtype = DType::Float32);
Tensor full(const Shape& shape, const Scalar& value, std::optional<DType> dtype = std::nullopt);
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, std::optional<DType> dtype = std::nullopt);
Tensor randn(const Shape& shape, DType dtype = DType::Float32);
Tensor rand(const Shape& shape, DType dtype = DType::Float32);
void manual_seed(uint64_t seed);

// Binary operators with a Python number on one side.
inline Tensor scalar(const Scalar& s) { return Tensor::wrapped_scalar(s); }

}  // namespace tp::ops

// Issue 3 families: one header per owner.
#include "ops/api_math.h"
#include "ops/api_nn_linalg.h"
#include "ops/api_reduction.h"
#include "ops/api_shape_index.h"
