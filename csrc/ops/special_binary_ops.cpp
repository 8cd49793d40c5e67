// Two-argument functions of tp.special, elementwise with broadcasting (the
// operands promote as in PyTorch; integers give float32), computed in double
// and rounded once:
//   special_zeta(x, q)                 Hurwitz zeta, sum_k (q + k)^-x
//   special_gammainc(a, x), special_gammaincc(a, x)   regularized incomplete gamma P and Q
//   special_{chebyshev_polynomial_t,u,v,w}, their shifted_ forms (argument 2x - 1),
//   special_hermite_polynomial_h/he, special_laguerre_polynomial_l,
//   special_legendre_polynomial_p (x, n)   orthogonal polynomials of degree n
//     (n rounded toward zero; 0 for n < 0), by their three-term recurrences.
// Edge values (poles, x or a at 0, infinities, out-of-domain) are PyTorch's.
// PyTorch differentiates only gammainc/gammaincc, and only in x; so do these
// (a gradient for a raises). Not tagged pointwise: compiled regions call the
// eager kernel.
#include <cmath>
#include <limits>

#include "core/parallel.h"
#include "core/shape.h"
#include "ops/derivative_util.h"
#include "ops/dispatch.h"
#include "ops/families.h"
#include "ops/kernel_util.h"
#include "ops/ops.h"
#include "ops/registry.h"
#include "ops/special_derivatives.h"
#include "ops/type_promotion.h"

namespace tp {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- Hurwitz zeta ------------------------------------------------------------------
// Direct terms until q + N >= 20, then the Euler-Maclaurin tail
// a^(1-x)/(x-1) + a^-x/2 + sum_k B_2k/(2k)! x(x+1)...(x+2k-2) a^(-x-2k+1).
double f_zeta(double x, double q) {
  if (x == 1) return kInf;
  if (x < 1) return kNaN;
  if (q <= 0) {
    if (q == std::floor(q)) return kInf;
    if (x != std::floor(x)) return kNaN;  // (negative)^-x is not real
  }
  if (std::isnan(x) || std::isnan(q)) return kNaN;
  // the limit (PyTorch's series gives NaN here): 1 at q = 1, 0 for q > 1, inf for 0 < q < 1
  if (std::isinf(x)) return q == 1 ? 1.0 : (q < 1 ? kInf : 0.0);
  double sum = 0, a = q;
  while (a < 20) {
    sum += std::pow(a, -x);
    a += 1;
  }
  static const double b2k_over_fact[] = {1.0 / 12, -1.0 / 720, 1.0 / 30240, -1.0 / 1209600, 1.0 / 47900160,
                                         -691.0 / 1307674368000.0, 1.0 / 74724249600.0};
  const double ax = std::pow(a, -x);
  double tail = a * ax / (x - 1) + 0.5 * ax;
  double rising = x, apow = ax / a;  // x (x+1)...(x+2k-2), a^(-x-2k+1)
  for (int k = 0; k < 7; ++k) {
    const double t = b2k_over_fact[k] * rising * apow;
    tail += t;
    if (std::fabs(t) < 1e-17 * std::fabs(sum + tail)) break;
    rising *= (x + 2 * k + 1) * (x + 2 * k + 2);
    apow /= a * a;
  }
  return sum + tail;
}

// ---- regularized incomplete gamma ---------------------------------------------------
// The series for P when x < a + 1, Legendre's continued fraction for Q
// otherwise (modified Lentz); the other is the complement. The prefactor
// x^a e^-x / Gamma(a) is taken through its logarithm.
void incomplete_gamma(double a, double x, double& p, double& q) {
  // The reference's order of checks; a NaN fails every comparison and flows through to the end.
  if (a < 0 || x < 0) {
    p = q = kNaN;
    return;
  }
  if (a == 0) {
    if (x > 0) {
      p = 1;
      q = 0;
    } else {
      p = q = kNaN;
    }
    return;
  }
  if (x == 0) {
    p = 0;
    q = 1;
    return;
  }
  if (std::isinf(a)) {
    if (std::isinf(x)) {
      p = q = kNaN;
    } else {
      p = 0;
      q = 1;
    }
    return;
  }
  if (std::isinf(x)) {
    p = 1;
    q = 0;
    return;
  }
  const double log_pre = a * std::log(x) - x - std::lgamma(a);
  if (x < a + 1) {
    double term = 1 / a, sum = term, ap = a;
    for (int n = 0; n < 100000; ++n) {
      ap += 1;
      term *= x / ap;
      sum += term;
      if (term < sum * 1e-17) break;
    }
    p = sum * std::exp(log_pre);
    q = 1 - p;
    return;
  }
  const double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 100000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < 1e-16) break;
  }
  q = std::exp(log_pre) * h;
  p = 1 - q;
}
double f_gammainc(double a, double x) {
  double p, q;
  incomplete_gamma(a, x, p, q);
  return p;
}
double f_gammaincc(double a, double x) {
  double p, q;
  incomplete_gamma(a, x, p, q);
  return q;
}

// ---- orthogonal polynomials ---------------------------------------------------------
// The degree arrives as a float of the promoted type; PyTorch truncates it to an
// integer. Checks on n come first (n < 0 gives 0 and n = 0 gives 1 even for a NaN x, as in
// PyTorch); the recurrences stop early once the value is NaN (it stays NaN).
bool degree(double n_in, int64_t& n) {
  if (std::isnan(n_in)) return false;
  n = n_in >= 9.2e18 ? INT64_MAX : (n_in <= -9.2e18 ? INT64_MIN : static_cast<int64_t>(n_in));
  return true;
}

// Chebyshev of the first kind: cos(n acos x) inside (-1, 1) for n > 6 (PyTorch's choice), else the recurrence.
double f_cheb_t(double x, double nf) {
  int64_t n;
  if (!degree(nf, n)) return kNaN;
  if (n < 0) return 0;
  if (std::fabs(x) == 1) return (x > 0 || n % 2 == 0) ? 1 : -1;
  if (n > 6 && std::fabs(x) < 1) return std::cos(n * std::acos(x));
  if (n == 0) return 1;
  double p = 1, q = x;
  for (int64_t k = 1; k < n && !std::isnan(q); ++k) {
    const double r = (x + x) * q - p;
    p = q;
    q = r;
  }
  return q;
}
double f_cheb_u(double x, double nf) {
  int64_t n;
  if (!degree(nf, n)) return kNaN;
  if (n < 0) return 0;
  if (std::fabs(x) == 1) return (x > 0 || n % 2 == 0) ? double(n + 1) : -double(n + 1);
  if (n > 8 && std::fabs(x) < 1) {
    const double t = std::acos(x);
    if (std::sin(t) != 0) return std::sin((n + 1) * t) / std::sin(t);
    return (n + 1) * std::cos((n + 1) * t) * x;
  }
  if (n == 0) return 1;
  double p = 1, q = x + x;
  for (int64_t k = 1; k < n && !std::isnan(q); ++k) {
    const double r = (x + x) * q - p;
    p = q;
    q = r;
  }
  return q;
}
double f_cheb_v(double x, double nf) {
  int64_t n;
  if (!degree(nf, n)) return kNaN;
  if (n < 0) return 0;
  if (std::fabs(x) == 1) {
    if (x > 0) return 1;
    return n % 2 == 0 ? double(n + n + 1) : -double(n + n + 1);
  }
  if (n > 8 && std::fabs(x) < 1) {
    const double t = std::acos(x);
    if (std::sin(t / 2) != 1) return std::cos((n + 0.5) * t) / std::cos(t / 2);
    return n % 2 == 0 ? double(n + n + 1) : -double(n + n + 1);
  }
  if (n == 0) return 1;
  double p = 1, q = x + x - 1;
  for (int64_t k = 1; k < n && !std::isnan(q); ++k) {
    const double r = (x + x) * q - p;
    p = q;
    q = r;
  }
  return q;
}
double f_cheb_w(double x, double nf) {
  int64_t n;
  if (!degree(nf, n)) return kNaN;
  if (n < 0) return 0;
  if (std::fabs(x) == 1) {
    if (x > 0) return double(n + n + 1);
    return n % 2 == 0 ? 1 : -1;
  }
  if (n > 8 && std::fabs(x) < 1) {
    const double t = std::acos(x);
    if (std::cos(t / 2) != 1) return std::sin((n + 0.5) * t) / std::sin(t / 2);
    if (x > 0) return double(n + n + 1);
    return n % 2 == 0 ? 1 : -1;
  }
  if (n == 0) return 1;
  double p = 1, q = x + x + 1;
  for (int64_t k = 1; k < n && !std::isnan(q); ++k) {
    const double r = (x + x) * q - p;
    p = q;
    q = r;
  }
  return q;
}
double f_shifted_t(double x, double n) { return f_cheb_t(x + x - 1, n); }
double f_shifted_u(double x, double n) { return f_cheb_u(x + x - 1, n); }
double f_shifted_v(double x, double n) { return f_cheb_v(x + x - 1, n); }
double f_shifted_w(double x, double n) { return f_cheb_w(x + x - 1, n); }

// Hermite (physicists'): H_k+1 = 2x H_k - 2k H_k-1.
double f_hermite_h(double x, double nf) {
  int64_t n;
  if (!degree(nf, n)) return kNaN;
  if (n < 0) return 0;
  if (n == 0) return 1;
  double p = 1, q = x + x;
  for (int64_t k = 1; k < n && !std::isnan(q); ++k) {
    const double r = (x + x) * q - 2.0 * k * p;
    p = q;
    q = r;
  }
  return q;
}
// Hermite (probabilists'): He_k+1 = x He_k - k He_k-1.
double f_hermite_he(double x, double nf) {
  int64_t n;
  if (!degree(nf, n)) return kNaN;
  if (n < 0) return 0;
  if (n == 0) return 1;
  double p = 1, q = x;
  for (int64_t k = 1; k < n && !std::isnan(q); ++k) {
    const double r = x * q - double(k) * p;
    p = q;
    q = r;
  }
  return q;
}
// Laguerre: (k+1) L_k+1 = (2k + 1 - x) L_k - k L_k-1.
double f_laguerre_l(double x, double nf) {
  int64_t n;
  if (!degree(nf, n)) return kNaN;
  if (n < 0) return 0;
  if (x == 0 || n == 0) return 1;
  double p = 1, q = 1 - x;
  for (int64_t k = 1; k < n && !std::isnan(q); ++k) {
    const double r = ((2.0 * k + 1 - x) * q - double(k) * p) / double(k + 1);
    p = q;
    q = r;
  }
  return q;
}
// Legendre: (k+1) P_k+1 = (2k + 1) x P_k - k P_k-1.
double f_legendre_p(double x, double nf) {
  int64_t n;
  if (!degree(nf, n)) return kNaN;
  if (n < 0) return 0;
  if (std::fabs(x) == 1) return (x > 0 || n % 2 == 0) ? 1 : -1;
  if (n == 0) return 1;
  double p = 1, q = x;
  for (int64_t k = 1; k < n && !std::isnan(q); ++k) {
    const double r = ((2.0 * k + 1) * x * q - double(k) * p) / double(k + 1);
    p = q;
    q = r;
  }
  return q;
}

// ---- the operators ----------------------------------------------------------------
std::vector<TensorMeta> binary_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  Shape shape = broadcast_shapes(in[0].sizes, in[1].sizes, op.name);
  DType d = result_type(in);
  if (d != DType::Float64) d = DType::Float32;  // integers, bool and 16-bit floats compute in float32
  return {TensorMeta::contiguous(shape, d)};
}

template <double (*F)(double, double)>
std::vector<Tensor> binary_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs&,
                               const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  if (out.numel() == 0) return {out};
  // both operands broadcast into contiguous buffers of the output's shape and type
  Tensor a = alloc_out(om[0]), b = alloc_out(om[0]);
  copy_into(a, in[0]);
  copy_into(b, in[1]);
  TP_DISPATCH_FLOATING(out.dtype(), op.name, ([&]<class T>() {
    const T* pa = a.data_as<T>();
    const T* pb = b.data_as<T>();
    T* po = out.data_as<T>();
    parallel_for(0, out.numel(), 512, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i)
        po[i] = static_cast<T>(F(static_cast<double>(pa[i]), static_cast<double>(pb[i])));
    });
  }));
  return {out};
}

// d/dx P(a, x) = x^(a-1) e^-x / Gamma(a) = -d/dx Q(a, x); no formula in a (as in PyTorch).
std::vector<Tensor> incomplete_gamma_backward(const BackwardArgs& args, bool upper, const char* name) {
  TP_CHECK(!args.needs_grad[0], NotImplementedError, name,
           ": the derivative with respect to the first argument (a) is not implemented");
  if (!args.needs_grad[1] || !args.grad_outputs[0].defined()) return {Tensor(), Tensor()};
  const Tensor& x = args.inputs[1];
  Tensor d = incomplete_gamma_x_derivative(args.inputs[0], x, upper, args.outputs[0].dtype());
  return {Tensor(), ops::reduce_grad(ops::mul(args.grad_outputs[0], d), x)};
}
std::vector<Tensor> gammainc_backward(const BackwardArgs& a) { return incomplete_gamma_backward(a, false, "gammainc"); }
std::vector<Tensor> gammaincc_backward(const BackwardArgs& a) {
  return incomplete_gamma_backward(a, true, "gammaincc");
}

}  // namespace

Tensor incomplete_gamma_x_derivative(const Tensor& a, const Tensor& x, bool upper, DType dtype) {
  Tensor af = ops::to_dtype(a, dtype), xf = ops::to_dtype(x, dtype);
  Tensor log_d = ops::sub(ops::sub(ops::mul(ops::sub(af, ops::ones_like(af)), ops::log(xf)), xf),
                          call_op1(get_op("lgamma"), {af}));
  Tensor d = ops::exp(log_d);
  return upper ? ops::neg(d) : d;
}

void register_special_binary_ops() {
  struct Def {
    const char* name;
    const char* schema;
    KernelFn cpu;
    BackwardFn backward;
  };
  const Def defs[] = {
      {"special_zeta", "special_zeta(Tensor self, Tensor other) -> Tensor", &binary_cpu<f_zeta>, nullptr},
      {"special_gammainc", "special_gammainc(Tensor self, Tensor other) -> Tensor", &binary_cpu<f_gammainc>,
       &gammainc_backward},
      {"special_gammaincc", "special_gammaincc(Tensor self, Tensor other) -> Tensor", &binary_cpu<f_gammaincc>,
       &gammaincc_backward},
      {"special_chebyshev_polynomial_t", "special_chebyshev_polynomial_t(Tensor x, Tensor n) -> Tensor",
       &binary_cpu<f_cheb_t>, nullptr},
      {"special_chebyshev_polynomial_u", "special_chebyshev_polynomial_u(Tensor x, Tensor n) -> Tensor",
       &binary_cpu<f_cheb_u>, nullptr},
      {"special_chebyshev_polynomial_v", "special_chebyshev_polynomial_v(Tensor x, Tensor n) -> Tensor",
       &binary_cpu<f_cheb_v>, nullptr},
      {"special_chebyshev_polynomial_w", "special_chebyshev_polynomial_w(Tensor x, Tensor n) -> Tensor",
       &binary_cpu<f_cheb_w>, nullptr},
      {"special_shifted_chebyshev_polynomial_t",
       "special_shifted_chebyshev_polynomial_t(Tensor x, Tensor n) -> Tensor", &binary_cpu<f_shifted_t>, nullptr},
      {"special_shifted_chebyshev_polynomial_u",
       "special_shifted_chebyshev_polynomial_u(Tensor x, Tensor n) -> Tensor", &binary_cpu<f_shifted_u>, nullptr},
      {"special_shifted_chebyshev_polynomial_v",
       "special_shifted_chebyshev_polynomial_v(Tensor x, Tensor n) -> Tensor", &binary_cpu<f_shifted_v>, nullptr},
      {"special_shifted_chebyshev_polynomial_w",
       "special_shifted_chebyshev_polynomial_w(Tensor x, Tensor n) -> Tensor", &binary_cpu<f_shifted_w>, nullptr},
      {"special_hermite_polynomial_h", "special_hermite_polynomial_h(Tensor x, Tensor n) -> Tensor",
       &binary_cpu<f_hermite_h>, nullptr},
      {"special_hermite_polynomial_he", "special_hermite_polynomial_he(Tensor x, Tensor n) -> Tensor",
       &binary_cpu<f_hermite_he>, nullptr},
      {"special_laguerre_polynomial_l", "special_laguerre_polynomial_l(Tensor x, Tensor n) -> Tensor",
       &binary_cpu<f_laguerre_l>, nullptr},
      {"special_legendre_polynomial_p", "special_legendre_polynomial_p(Tensor x, Tensor n) -> Tensor",
       &binary_cpu<f_legendre_p>, nullptr},
  };
  for (const Def& d : defs)
    register_op({.name = d.name, .schema = d.schema, .num_inputs = 2, .infer = &binary_infer, .cpu = d.cpu,
                 .backward = d.backward});
}

}  // namespace tp
