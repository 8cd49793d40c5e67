// The C++ API of api_reduction.h: each function is one dispatcher call.
#include "ops/api_reduction.h"

#include "ops/dispatch.h"

// GCC 12 warns falsely about the attribute initializer lists below.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace tp::ops {
namespace {
const OpDef& op(const char* name) { return get_op(name); }
template <class T>
AttrValue opt(const std::optional<T>& v) {
  return v ? AttrValue(*v) : AttrValue(std::monostate{});
}
std::tuple<Tensor, Tensor> pair(const std::vector<Tensor>& v) { return {v[0], v[1]}; }
Attrs var_attrs(const std::optional<Dims>& dims, double correction, bool keepdim) {
  return {{"dim", opt(dims)}, {"correction", Scalar(correction)}, {"keepdim", keepdim}};
}
}  // namespace

Tensor sum(const Tensor& x, const Dims& dims, bool keepdim, std::optional<DType> dtype) {
  return call_op1(op("sum"), {x}, {{"dim", dims}, {"keepdim", keepdim}, {"dtype", opt(dtype)}});
}
Tensor mean(const Tensor& x, const Dims& dims, bool keepdim, std::optional<DType> dtype) {
  return call_op1(op("mean"), {x}, {{"dim", dims}, {"keepdim", keepdim}, {"dtype", opt(dtype)}});
}
Tensor prod(const Tensor& x, std::optional<int64_t> dim, bool keepdim, std::optional<DType> dtype) {
  return call_op1(op("prod"), {x}, {{"dim", opt(dim)}, {"keepdim", keepdim}, {"dtype", opt(dtype)}});
}
Tensor amin(const Tensor& x, const Dims& dims, bool keepdim) {
  return call_op1(op("amin"), {x}, {{"dim", dims}, {"keepdim", keepdim}});
}
Tensor max(const Tensor& x) { return call_op1(op("max"), {x}); }
Tensor min(const Tensor& x) { return call_op1(op("min"), {x}); }
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return pair(call_op(op("max.dim"), {x}, {{"dim", dim}, {"keepdim", keepdim}}));
}
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return pair(call_op(op("min.dim"), {x}, {{"dim", dim}, {"keepdim", keepdim}}));
}
Tensor max(const Tensor& x, const Tensor& other) { return call_op1(op("max.other"), {x, other}); }
Tensor min(const Tensor& x, const Tensor& other) { return call_op1(op("min.other"), {x, other}); }
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return call_op1(op("argmax"), {x}, {{"dim", opt(dim)}, {"keepdim", keepdim}});
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return call_op1(op("argmin"), {x}, {{"dim", opt(dim)}, {"keepdim", keepdim}});
}
Tensor all(const Tensor& x, std::optional<Dims> dims, bool keepdim) {
  return call_op1(op("all"), {x}, {{"dim", opt(dims)}, {"keepdim", keepdim}});
}
Tensor any(const Tensor& x, std::optional<Dims> dims, bool keepdim) {
  return call_op1(op("any"), {x}, {{"dim", opt(dims)}, {"keepdim", keepdim}});
}
Tensor var(const Tensor& x, std::optional<Dims> dims, double correction, bool keepdim) {
  return call_op1(op("var"), {x}, var_attrs(dims, correction, keepdim));
}
Tensor std_dev(const Tensor& x, std::optional<Dims> dims, double correction, bool keepdim) {
  return call_op1(op("std"), {x}, var_attrs(dims, correction, keepdim));
}
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, std::optional<Dims> dims, double correction, bool keepdim) {
  return pair(call_op(op("var_mean"), {x}, var_attrs(dims, correction, keepdim)));
}
std::tuple<Tensor, Tensor> std_mean(const Tensor& x, std::optional<Dims> dims, double correction, bool keepdim) {
  return pair(call_op(op("std_mean"), {x}, var_attrs(dims, correction, keepdim)));
}
Tensor norm(const Tensor& x, const Scalar& p, std::optional<Dims> dims, bool keepdim) {
  return call_op1(op("norm"), {x}, {{"p", p}, {"dim", opt(dims)}, {"keepdim", keepdim}});
}
Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim) {
  return call_op1(op("logsumexp"), {x}, {{"dim", dims}, {"keepdim", keepdim}});
}
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return call_op1(op("cumsum"), {x}, {{"dim", dim}, {"dtype", opt(dtype)}});
}
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return call_op1(op("cumprod"), {x}, {{"dim", dim}, {"dtype", opt(dtype)}});
}
Tensor cumprod_backward(const Tensor& grad, const Tensor& x, int64_t dim) {
  return call_op1(op("_cumprod_backward"), {grad, x}, {{"dim", dim}});
}

Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return call_op1(op("softmax"), {x}, {{"dim", dim}, {"dtype", opt(dtype)}});
}
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return call_op1(op("log_softmax"), {x}, {{"dim", dim}, {"dtype", opt(dtype)}});
}
std::vector<Tensor> native_layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                                      const Tensor& bias, double eps) {
  return call_op(op("native_layer_norm"), {x, weight, bias},
                 {{"normalized_shape", Dims(normalized_shape.begin(), normalized_shape.end())}, {"eps", Scalar(eps)}});
}
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  return call_op1(op("layer_norm"), {x, weight, bias},
                  {{"normalized_shape", Dims(normalized_shape.begin(), normalized_shape.end())}, {"eps", Scalar(eps)}});
}
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, std::optional<double> eps) {
  return call_op1(op("rms_norm"), {x, weight},
                  {{"normalized_shape", Dims(normalized_shape.begin(), normalized_shape.end())},
                   {"eps", eps ? AttrValue(Scalar(*eps)) : AttrValue(std::monostate{})}});
}
std::vector<Tensor> native_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                      const Tensor& running_mean, const Tensor& running_var, bool training,
                                      double momentum, double eps) {
  return call_op(op("native_batch_norm"), {x, weight, bias, running_mean, running_var},
                 {{"training", training}, {"momentum", Scalar(momentum)}, {"eps", Scalar(eps)}});
}
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  return call_op1(op("batch_norm"), {x, running_mean, running_var, weight, bias},
                  {{"training", training}, {"momentum", Scalar(momentum)}, {"eps", Scalar(eps)}});
}
std::vector<Tensor> native_dropout(const Tensor& x, double p, bool train) {
  return call_op(op("native_dropout"), {x}, {{"p", Scalar(p)}, {"train", train}});
}
Tensor dropout(const Tensor& x, double p, bool train) {
  return call_op1(op("dropout"), {x}, {{"p", Scalar(p)}, {"train", train}});
}

}  // namespace tp::ops
