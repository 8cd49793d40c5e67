// The C++ API of api_nn_linalg.h: each function calls its operator through
// the dispatcher with attributes named as in the operator's schema.
#include "ops/api_nn_linalg.h"
#include "core/grad_mode.h"
#include "ops/api_math.h"
#include "ops/api_reduction.h"
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

Tensor full_on(const Tensor& like, const Shape& shape, const Scalar& value, DType dtype) {
  if (like.device().kind == Device::Kind::CPU) return full(shape, value, dtype);
  // Ops cannot allocate on a device by themselves: the value comes out of
  // where(cond, v, v) with cond a bool tensor on like's device and v a host 0-d
  // tensor of dtype (no type promotion: both branches are dtype). Of like's
  // shape, cond is like itself converted, so a trace with symbolic sizes
  // records no concrete size; another shape starts from a 0-d element of like
  // (a view, nothing read) and is broadcast and copied.
  AutoGradMode no_grad(false);
  const Tensor v = Tensor::scalar_tensor(value, dtype);
  if (shape == like.sizes()) return where(to_dtype(like, DType::Bool), v, v);
  Tensor x0 = like;
  if (like.numel() > 0) {
    while (x0.dim() > 0) x0 = select(x0, 0, 0);
  } else {
    x0 = sum(like);  // 0-d, on like's device
  }
  const Tensor v0 = where(to_dtype(x0, DType::Bool), v, v);
  if (shape.empty()) return v0;
  return contiguous(expand(v0, shape));
}
Tensor arange_on(const Tensor& like, int64_t n) {
  if (like.device().kind == Device::Kind::CPU)
    return arange(Scalar(int64_t{0}), Scalar(n), Scalar(int64_t{1}), DType::Int64);
  AutoGradMode no_grad(false);
  return sub(cumsum(full_on(like, {n}, Scalar(int64_t{1}), DType::Int64), 0), Tensor::scalar_tensor(Scalar(int64_t{1}), DType::Int64));
}
Tensor eye_on(const Tensor& like, int64_t n, DType dtype) {
  if (like.device().kind == Device::Kind::CPU) return eye(n, n, dtype);
  AutoGradMode no_grad(false);
  const Tensor r = arange_on(like, n);
  return to_dtype(eq(unsqueeze(r, 1), unsqueeze(r, 0)), dtype);
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
