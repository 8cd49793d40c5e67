// Special functions of tp.special (and their top-level names): lgamma, digamma,
// polygamma, i0 and special_i1, elementwise, with derivatives
// (lgamma' = digamma, digamma' = polygamma(1), polygamma(n)' = polygamma(n+1),
// i0' = i1, i1' = i0 - i1/x). Integer inputs give float32, as in PyTorch.
// They are not tagged pointwise: Stax has no scalar code for them, so a
// compiled region calls the eager kernel.
#include <cmath>
#include <limits>

#include "core/parallel.h"
#include "ops/derivative_util.h"
#include "ops/dispatch.h"
#include "ops/families.h"
#include "ops/kernel_util.h"
#include "ops/registry.h"

namespace tp {
namespace {

// The scalar algorithms, shared with the CUDA kernels (cuda/special_kernels.cpp).
using std::exp;
using std::fabs;
using std::floor;
using std::log;
using std::pow;
using std::round;
using std::sqrt;
using std::tan;
using std::tgamma;
inline double tp_sf_inf() { return std::numeric_limits<double>::infinity(); }
inline double tp_sf_nan() { return std::numeric_limits<double>::quiet_NaN(); }
#define TP_SF inline
#define TP_SPECIAL_SOURCE(...) __VA_ARGS__
#include "ops/special_math.inc"
#undef TP_SPECIAL_SOURCE
#undef TP_SF

DType float_of(DType d) { return d == DType::Float64 || d == DType::Float32 ? d : DType::Float32; }

std::vector<TensorMeta> special_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  if (attrs.has("n"))
    TP_CHECK(attrs.get_int("n") >= 0, ValueError, "polygamma: n must be non-negative, but got ", attrs.get_int("n"));
  return {TensorMeta::contiguous(in[0].sizes, float_of(in[0].dtype))};
}

template <double (*F)(int64_t, double)>
std::vector<Tensor> special_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  if (out.numel() == 0) return {out};
  const Tensor x = as_contiguous(convert(in[0], om[0].dtype));
  const int64_t n = attrs.has("n") ? attrs.get_int("n") : 0;
  TP_DISPATCH_FLOATING(x.dtype(), op.name, ([&]<class T>() {
    const T* px = x.data_as<T>();
    T* po = out.data_as<T>();
    parallel_for(0, x.numel(), 2048, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) po[i] = static_cast<T>(F(n, static_cast<double>(px[i])));
    });
  }));
  return {out};
}

double f_lgamma(int64_t, double x) { return std::lgamma(x); }
double f_digamma(int64_t, double x) { return tp_digamma(x); }
double f_polygamma(int64_t n, double x) { return tp_polygamma(n, x); }
double f_i0(int64_t, double x) { return tp_bessel_i(0, x); }
double f_i1(int64_t, double x) { return tp_bessel_i(1, x); }

Tensor poly(int64_t n, const Tensor& x) {
  Attrs at;
  at.set("n", n);
  return call_op1(TP_OP("polygamma"), {x}, at);
}

std::vector<Tensor> lgamma_backward(const BackwardArgs& a) {
  if (!a.needs_grad[0] || !a.grad_outputs[0].defined()) return {Tensor()};
  return {ops::mul(a.grad_outputs[0], call_op1(TP_OP("digamma"), {a.inputs[0]}))};
}
std::vector<Tensor> digamma_backward(const BackwardArgs& a) {
  if (!a.needs_grad[0] || !a.grad_outputs[0].defined()) return {Tensor()};
  return {ops::mul(a.grad_outputs[0], poly(1, a.inputs[0]))};
}
std::vector<Tensor> polygamma_backward(const BackwardArgs& a) {
  if (!a.needs_grad[0] || !a.grad_outputs[0].defined()) return {Tensor()};
  return {ops::mul(a.grad_outputs[0], poly(a.attrs.get_int("n") + 1, a.inputs[0]))};
}
std::vector<Tensor> i0_backward(const BackwardArgs& a) {
  if (!a.needs_grad[0] || !a.grad_outputs[0].defined()) return {Tensor()};
  return {ops::mul(a.grad_outputs[0], call_op1(TP_OP("special_i1"), {a.inputs[0]}))};
}
// i1'(x) = i0(x) - i1(x)/x, and 1/2 at x = 0.
std::vector<Tensor> i1_backward(const BackwardArgs& a) {
  if (!a.needs_grad[0] || !a.grad_outputs[0].defined()) return {Tensor()};
  const Tensor& x = a.inputs[0];
  Tensor zero = ops::eq(x, ops::zeros_like(x));
  Tensor safe = ops::where(zero, ops::ones_like(x), x);
  Tensor d = ops::sub(call_op1(TP_OP("i0"), {x}), ops::div(a.outputs[0], safe));
  d = ops::where(zero, ops::full_like(x, Scalar(0.5)), d);
  return {ops::mul(a.grad_outputs[0], d)};
}

}  // namespace

void register_special_ops() {
  auto reg = [](OpDef d) { register_op(d); };
  reg({.name = "lgamma", .schema = "lgamma(Tensor self) -> Tensor", .infer = &special_infer,
       .cpu = &special_cpu<f_lgamma>, .backward = &lgamma_backward});
  reg({.name = "digamma", .schema = "digamma(Tensor self) -> Tensor", .infer = &special_infer,
       .cpu = &special_cpu<f_digamma>, .backward = &digamma_backward});
  reg({.name = "polygamma", .schema = "polygamma(int n, Tensor self) -> Tensor", .infer = &special_infer,
       .cpu = &special_cpu<f_polygamma>, .backward = &polygamma_backward});
  reg({.name = "i0", .schema = "i0(Tensor self) -> Tensor", .infer = &special_infer, .cpu = &special_cpu<f_i0>,
       .backward = &i0_backward});
  reg({.name = "special_i1", .schema = "special_i1(Tensor self) -> Tensor", .infer = &special_infer,
       .cpu = &special_cpu<f_i1>, .backward = &i1_backward});
}

}  // namespace tp
