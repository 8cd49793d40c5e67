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

constexpr double kPi = 3.14159265358979323846;

// psi(x) by the recurrence psi(x) = psi(x+1) - 1/x up to x >= 10, then the
// asymptotic series in 1/x^2 (Bernoulli numbers); reflection for x < 0.
double digamma(double x) {
  if (x == 0) return std::signbit(x) ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  if (x < 0) {
    if (x == std::floor(x)) return std::numeric_limits<double>::quiet_NaN();
    return digamma(1 - x) - kPi / std::tan(kPi * x);
  }
  double r = 0;
  while (x < 10) {
    r -= 1 / x;
    x += 1;
  }
  const double z = 1 / (x * x);
  const double series = z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 - z * (1.0 / 132)))));
  return r + std::log(x) - 0.5 / x - series;
}

// psi^(n)(x) = (-1)^(n+1) n! zeta(n+1, x): the Hurwitz zeta by direct terms
// until x + N >= 20, then its Euler-Maclaurin tail.
double polygamma(int64_t n, double x) {
  if (n == 0) return digamma(x);
  if (x <= 0 && x == std::floor(x)) return std::numeric_limits<double>::infinity();
  const double s = static_cast<double>(n + 1);
  double zeta = 0;
  while (x < 20) {
    zeta += std::pow(x, -s);
    x += 1;
  }
  // tail: x^(1-s)/(s-1) + x^-s/2 + sum_k B_2k/(2k)! * s(s+1)...(s+2k-2) x^(-s-2k+1)
  static const double b2k[] = {1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6};
  double tail = std::pow(x, 1 - s) / (s - 1) + 0.5 * std::pow(x, -s);
  double rising = s, fact = 2;  // s(s+1)...(s+2k-2), (2k)!
  double xp = std::pow(x, -s - 1);
  for (int k = 1; k <= 7; ++k) {
    tail += b2k[k - 1] / fact * rising * xp;
    rising *= (s + 2 * k - 1) * (s + 2 * k);
    fact *= (2 * k + 1) * (2 * k + 2);
    xp /= x * x;
  }
  zeta += tail;
  const double nfact = std::tgamma(s);
  return (n % 2 == 1 ? 1.0 : -1.0) * nfact * zeta;
}

// Modified Bessel functions of the first kind, orders 0 and 1: the power
// series for |x| <= 30 (all terms positive: no cancellation), else the
// asymptotic expansion e^|x| / sqrt(2 pi |x|) * (1 - (4v^2-1)/(8x) + ...).
double bessel_i(int order, double x) {
  const double ax = std::abs(x);
  if (ax <= 30) {
    const double q = 0.25 * x * x;
    double term = order == 0 ? 1.0 : 0.5 * x, sum = term;
    for (int k = 1; k < 500; ++k) {
      term *= q / (static_cast<double>(k) * (k + order));
      sum += term;
      if (std::abs(term) < std::abs(sum) * 1e-17) break;
    }
    return sum;
  }
  const double mu = 4.0 * order * order;
  double term = 1, sum = 1;
  for (int k = 1; k < 30; ++k) {
    const double t = term * -(mu - (2.0 * k - 1) * (2.0 * k - 1)) / (k * 8.0 * ax);
    if (std::abs(t) >= std::abs(term)) break;
    term = t;
    sum += term;
  }
  const double r = std::exp(ax) / std::sqrt(2 * kPi * ax) * sum;
  return order == 1 && x < 0 ? -r : r;
}

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
double f_digamma(int64_t, double x) { return digamma(x); }
double f_polygamma(int64_t n, double x) { return polygamma(n, x); }
double f_i0(int64_t, double x) { return bessel_i(0, x); }
double f_i1(int64_t, double x) { return bessel_i(1, x); }

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
