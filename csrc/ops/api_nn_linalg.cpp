// The C++ API of api_nn_linalg.h: each function calls its operator through
// the dispatcher with attributes named as in the operator's schema.
#include "ops/api_nn_linalg.h"
#include "ops/ops.h"

#include "ops/dispatch.h"
#include "ops/registry.h"

// GCC 12 warns falsely about the attribute initializer lists below.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace tp::ops {
namespace {
#define TP_NN_OP(name)                            \
  ([]() -> const OpDef& {                         \
    static const OpDef& op_ = ::tp::get_op(name); \
    return op_;                                   \
  }())
template <class T>
AttrValue opt(const std::optional<T>& v) {
  return v ? AttrValue(*v) : AttrValue(std::monostate{});
}
}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) { return call_op1(TP_NN_OP("mm"), {a, b}); }
Tensor bmm(const Tensor& a, const Tensor& b) { return call_op1(TP_NN_OP("bmm"), {a, b}); }
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  return call_op1(TP_NN_OP("addmm"), {self, a, b}, {{"beta", beta}, {"alpha", alpha}});
}
Tensor baddbmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  return call_op1(TP_NN_OP("baddbmm"), {self, a, b}, {{"beta", beta}, {"alpha", alpha}});
}
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return call_op1(TP_NN_OP("linear"), {x, weight, bias});
}
Tensor dot(const Tensor& a, const Tensor& b) { return call_op1(TP_NN_OP("dot"), {a, b}); }
Tensor outer(const Tensor& a, const Tensor& b) { return call_op1(TP_NN_OP("outer"), {a, b}); }
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  return call_op1(TP_NN_OP("einsum"), operands, {{"equation", equation}});
}

Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, std::optional<DType> dtype) {
  return call_op1(TP_NN_OP("linspace"), {}, {{"start", start}, {"end", end}, {"steps", steps}, {"dtype", opt(dtype)}});
}
Tensor eye(int64_t n, std::optional<int64_t> m, std::optional<DType> dtype) {
  if (m) return call_op1(TP_NN_OP("eye.m"), {}, {{"n", n}, {"m", *m}, {"dtype", opt(dtype)}});
  return call_op1(TP_NN_OP("eye"), {}, {{"n", n}, {"dtype", opt(dtype)}});
}
Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype, int64_t generator) {
  return call_op1(TP_NN_OP("randint.low"), {},
                  {{"low", low}, {"high", high}, {"size", shape}, {"generator", generator}, {"dtype", dtype}});
}
Tensor zeros_like(const Tensor& x, std::optional<DType> dtype) {
  return call_op1(TP_NN_OP("zeros_like"), {x}, {{"dtype", opt(dtype)}});
}
Tensor ones_like(const Tensor& x, std::optional<DType> dtype) {
  return call_op1(TP_NN_OP("ones_like"), {x}, {{"dtype", opt(dtype)}});
}
Tensor full_like(const Tensor& x, const Scalar& value, std::optional<DType> dtype) {
  return call_op1(TP_NN_OP("full_like"), {x}, {{"fill_value", value}, {"dtype", opt(dtype)}});
}

Tensor full_beside(const Tensor& x, const Scalar& value, DType dtype) {
  if (x.device().kind == Device::Kind::CPU) return full(x.sizes(), value, dtype);
  return to_dtype(where(Tensor::scalar_tensor(Scalar(true), DType::Bool), scalar(value), x), dtype);
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Dims& stride, const Dims& padding,
              const Dims& dilation, int64_t groups) {
  return call_op1(TP_NN_OP("conv2d"), {x, weight, bias},
                  {{"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"groups", groups}});
}
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Dims& stride, const std::string& padding,
              const Dims& dilation, int64_t groups) {
  return call_op1(TP_NN_OP("conv2d.padding"), {x, weight, bias},
                  {{"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"groups", groups}});
}
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t padding,
              int64_t dilation, int64_t groups) {
  return call_op1(TP_NN_OP("conv1d"), {x, weight, bias},
                  {{"stride", Dims{stride}}, {"padding", Dims{padding}}, {"dilation", Dims{dilation}}, {"groups", groups}});
}
Tensor max_pool2d(const Tensor& x, const Dims& kernel_size, const Dims& stride, const Dims& padding,
                  const Dims& dilation, bool ceil_mode) {
  return call_op1(TP_NN_OP("max_pool2d"), {x},
                  {{"kernel_size", kernel_size}, {"stride", stride}, {"padding", padding}, {"dilation", dilation},
                   {"ceil_mode", ceil_mode}});
}
Tensor avg_pool2d(const Tensor& x, const Dims& kernel_size, const Dims& stride, const Dims& padding, bool ceil_mode,
                  bool count_include_pad) {
  return call_op1(TP_NN_OP("avg_pool2d"), {x},
                  {{"kernel_size", kernel_size}, {"stride", stride}, {"padding", padding}, {"ceil_mode", ceil_mode},
                   {"count_include_pad", count_include_pad}, {"divisor_override", std::monostate{}}});
}
Tensor adaptive_avg_pool2d(const Tensor& x, const Dims& output_size) {
  return call_op1(TP_NN_OP("adaptive_avg_pool2d"), {x}, {{"output_size", output_size}});
}

Tensor mse_loss(const Tensor& x, const Tensor& target, const std::string& reduction) {
  return call_op1(TP_NN_OP("mse_loss"), {x, target}, {{"reduction", reduction}});
}
Tensor nll_loss(const Tensor& x, const Tensor& target, const Tensor& weight, const std::string& reduction,
                int64_t ignore_index) {
  return call_op1(TP_NN_OP("nll_loss"), {x, target, weight}, {{"reduction", reduction}, {"ignore_index", ignore_index}});
}
Tensor cross_entropy(const Tensor& x, const Tensor& target, const Tensor& weight, const std::string& reduction,
                     int64_t ignore_index, double label_smoothing) {
  return call_op1(TP_NN_OP("cross_entropy"), {x, target, weight},
                  {{"reduction", reduction}, {"ignore_index", ignore_index}, {"label_smoothing", Scalar(label_smoothing)}});
}
Tensor binary_cross_entropy(const Tensor& x, const Tensor& target, const Tensor& weight, const std::string& reduction) {
  return call_op1(TP_NN_OP("binary_cross_entropy"), {x, target, weight}, {{"reduction", reduction}});
}
Tensor binary_cross_entropy_with_logits(const Tensor& x, const Tensor& target, const Tensor& weight,
                                        const Tensor& pos_weight, const std::string& reduction) {
  return call_op1(TP_NN_OP("binary_cross_entropy_with_logits"), {x, target, weight, pos_weight},
                  {{"reduction", reduction}});
}

}  // namespace tp::ops
