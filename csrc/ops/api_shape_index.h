// C++ API of the shape and indexing operators (ops/view_ops.cpp,
// ops/shape_ops.cpp, ops/index_ops.cpp). Every function calls through the
// dispatcher. Negative dims wrap; out-of-range indices throw IndexError naming
// the operator, the index and the size.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tp::ops {

// ---- views (share storage and version counter) ----
Tensor as_strided(const Tensor& x, const Shape& size, const Shape& stride,
                  std::optional<int64_t> storage_offset = std::nullopt);
Tensor diagonal(const Tensor& x, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
Tensor view_dtype(const Tensor& x, DType dtype);  // same bits, dtype of equal itemsize
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes);
Tensor t(const Tensor& x);
Tensor squeeze_dims(const Tensor& x, const std::vector<int64_t>& dims);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor expand_as(const Tensor& x, const Tensor& other);
Tensor movedim(const Tensor& x, const std::vector<int64_t>& source, const std::vector<int64_t>& destination);
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

// ---- copies (every dtype moves natively) ----
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);  // promotes dtypes
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor flip(const Tensor& x, const std::vector<int64_t>& dims);
Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims = {});
Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats);
Tensor tile(const Tensor& x, const std::vector<int64_t>& dims);
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);

// ---- indexing ----
// Advanced indexing x[i0, i1, ...]: one entry per leading dim, undefined = the
// whole dim (a `:`). Integer tensors broadcast together; a bool tensor is a
// mask over as many dims as it has (expanded with nonzero() first).
Tensor index(const Tensor& x, const std::vector<Tensor>& indices);
Tensor& index_put_(Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate = false);
Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate = false);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// reduce: "" (assign), "add" or "multiply"
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce = "");
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value, const std::string& reduce = "");
Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce = "");
Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, const Scalar& value, const std::string& reduce = "");
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// reduce: "sum", "prod", "mean", "amax" or "amin"; include_self=false ignores x at the scattered positions.
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                      bool include_self = true);
Tensor& scatter_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha = Scalar(int64_t{1}));
Tensor& index_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                   const Scalar& alpha = Scalar(int64_t{1}));
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value);  // value: 0-d
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Scalar& value);
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Tensor& value);
Tensor masked_select(const Tensor& x, const Tensor& mask);
Tensor nonzero(const Tensor& x);                   // [n, ndim] int64
std::vector<Tensor> nonzero_tuple(const Tensor& x);  // one 1-D int64 tensor per dim
std::vector<Tensor> where(const Tensor& condition);  // = nonzero_tuple
Tensor embedding(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx = std::nullopt);
Tensor one_hot(const Tensor& x, int64_t num_classes = -1);  // int64 result

}  // namespace tp::ops
