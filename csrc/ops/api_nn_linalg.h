// C++ API of the matrix, neural-network and extra factory operators
// (calls through the dispatcher, so C++ callers are traced and differentiated
// like Python ones).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tp::ops {
using Dims = std::vector<int64_t>;
}

namespace tp::ops {

// ---- matrix products (ops/matmul_ops.cpp, ops/linalg_ops.cpp) ----
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta = Scalar(int64_t{1}),
             const Scalar& alpha = Scalar(int64_t{1}));
Tensor baddbmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta = Scalar(int64_t{1}),
               const Scalar& alpha = Scalar(int64_t{1}));
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
Tensor dot(const Tensor& a, const Tensor& b);
Tensor outer(const Tensor& a, const Tensor& b);
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

// ---- factories (ops/factory_extra_ops.cpp); generator 0 = the default one ----
Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, std::optional<DType> dtype = std::nullopt);
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, std::optional<DType> dtype = std::nullopt);
Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype = DType::Int64, int64_t generator = 0);
// *_like follow x's device, as PyTorch's do (dtype: x's unless given).
Tensor zeros_like(const Tensor& x, std::optional<DType> dtype = std::nullopt);
Tensor ones_like(const Tensor& x, std::optional<DType> dtype = std::nullopt);
Tensor full_like(const Tensor& x, const Scalar& value, std::optional<DType> dtype = std::nullopt);
// For composites and derivative formulas, whose constants must live where their
// operands do (the dispatcher refuses a host tensor with dims beside a CUDA one):
// a tensor of `shape` filled with `value` on `like`'s device, and 0..n-1 (int64)
// on `like`'s device. Plain host factories on the CPU; never recorded for autograd.
Tensor full_on(const Tensor& like, const Shape& shape, const Scalar& value, DType dtype);
Tensor arange_on(const Tensor& like, int64_t n);
// The n x n identity in `dtype` on `like`'s device.
Tensor eye_on(const Tensor& like, int64_t n, DType dtype);

// ---- convolution and pooling (ops/conv_ops.cpp, ops/pool_ops.cpp, ops/nn_ops.cpp) ----
// Lists of one element broadcast; an empty pooling stride means kernel_size.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), const Dims& stride = {1},
              const Dims& padding = {0}, const Dims& dilation = {1}, int64_t groups = 1);
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Dims& stride,
              const std::string& padding, const Dims& dilation = {1}, int64_t groups = 1);  // "same" / "valid"
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), int64_t stride = 1,
              int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);
Tensor max_pool2d(const Tensor& x, const Dims& kernel_size, const Dims& stride = {}, const Dims& padding = {0},
                  const Dims& dilation = {1}, bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& x, const Dims& kernel_size, const Dims& stride = {}, const Dims& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& x, const Dims& output_size);

// ---- losses; reduction is "none", "mean" or "sum" ----
Tensor mse_loss(const Tensor& x, const Tensor& target, const std::string& reduction = "mean");
Tensor nll_loss(const Tensor& x, const Tensor& target, const Tensor& weight = Tensor(),
                const std::string& reduction = "mean", int64_t ignore_index = -100);
Tensor cross_entropy(const Tensor& x, const Tensor& target, const Tensor& weight = Tensor(),
                     const std::string& reduction = "mean", int64_t ignore_index = -100,
                     double label_smoothing = 0.0);
Tensor binary_cross_entropy(const Tensor& x, const Tensor& target, const Tensor& weight = Tensor(),
                            const std::string& reduction = "mean");
Tensor binary_cross_entropy_with_logits(const Tensor& x, const Tensor& target, const Tensor& weight = Tensor(),
                                        const Tensor& pos_weight = Tensor(), const std::string& reduction = "mean");

}  // namespace tp::ops
