// C++ API of the reduction and normalization operators added for issue 3
// (calls through the dispatcher). sum/amax/mean/softmax without dtype= are
// declared in ops.h.
#pragma once
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/tensor.h"

namespace tp::ops {

using Dims = std::vector<int64_t>;

// ---- reductions (empty dims = all dims) ----
Tensor sum(const Tensor& x, const Dims& dims, bool keepdim, std::optional<DType> dtype);
Tensor mean(const Tensor& x, const Dims& dims, bool keepdim, std::optional<DType> dtype);
Tensor prod(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);
Tensor amin(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor max(const Tensor& x);  // over all elements
Tensor min(const Tensor& x);
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);  // values, indices
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x, const Tensor& other);  // maximum
Tensor min(const Tensor& x, const Tensor& other);  // minimum
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor all(const Tensor& x, std::optional<Dims> dims = std::nullopt, bool keepdim = false);
Tensor any(const Tensor& x, std::optional<Dims> dims = std::nullopt, bool keepdim = false);
// dims nullopt = all; divides by max(0, N - correction).
Tensor var(const Tensor& x, std::optional<Dims> dims = std::nullopt, double correction = 1, bool keepdim = false);
Tensor std_dev(const Tensor& x, std::optional<Dims> dims = std::nullopt, double correction = 1, bool keepdim = false);
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, std::optional<Dims> dims = std::nullopt, double correction = 1,
                                    bool keepdim = false);
std::tuple<Tensor, Tensor> std_mean(const Tensor& x, std::optional<Dims> dims = std::nullopt, double correction = 1,
                                    bool keepdim = false);
Tensor norm(const Tensor& x, const Scalar& p = Scalar(2.0), std::optional<Dims> dims = std::nullopt,
            bool keepdim = false);
Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim = false);
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
// The derivative of cumprod (exact with zeros), used by its backward formula.
Tensor cumprod_backward(const Tensor& grad, const Tensor& x, int64_t dim);

// ---- normalization ----
Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype);
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
// (output, mean, 1/std); mean and 1/std keep the normalized dims as size 1.
std::vector<Tensor> native_layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                                      const Tensor& bias, double eps);
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);
// (output, mean, 1/std) per channel; aten's argument order (weight and bias before the running stats).
std::vector<Tensor> native_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                      const Tensor& running_mean, const Tensor& running_var, bool training,
                                      double momentum, double eps);
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5);
std::vector<Tensor> native_dropout(const Tensor& x, double p, bool train);  // (output, keep mask)
Tensor dropout(const Tensor& x, double p = 0.5, bool train = true);

}  // namespace tp::ops
