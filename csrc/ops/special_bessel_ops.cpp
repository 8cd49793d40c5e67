// More functions of tp.special, elementwise over one tensor (integers give
// float32, as in PyTorch), each computed in double and rounded once:
//   special_bessel_j0/j1/y0/y1         Bessel functions of the first and second kind
//   special_modified_bessel_k0/k1      modified Bessel functions of the second kind
//   special_scaled_modified_bessel_k0/k1   e^x K0(x), e^x K1(x)
//   special_i0e/i1e                    e^-|x| I0(x), e^-|x| I1(x)
//   special_spherical_bessel_j0        sin(x)/x
//   special_airy_ai                    the Airy function Ai
//   special_erfcx                      e^(x^2) erfc(x)
//   special_log_ndtr                   log of the standard normal CDF
//   special_ndtri                      its inverse (the normal quantile)
// PyTorch differentiates only i0e, i1e, erfcx, log_ndtr and ndtri; those have
// derivative formulas here, the Bessel functions have none (as in PyTorch a
// gradient through them is an error, not a silent zero).
// Not tagged pointwise: Stax has no scalar code for them, so a compiled region
// calls these eager kernels (CPU only).
#include <cmath>
#include <limits>
#include <string_view>

#include "core/parallel.h"
#include "ops/derivative_util.h"
#include "ops/dispatch.h"
#include "ops/families.h"
#include "ops/kernel_util.h"
#include "ops/registry.h"
#include "ops/special_derivatives.h"

namespace tp {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kEulerGamma = 0.57721566490153286061;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- Bessel J and Y of orders 0 and 1 --------------------------------------
// Three regions, each where its method keeps full double accuracy:
//  |x| <= 2: the power series (terms shrink from the first: no cancellation);
//  2 < |x| <= 25: Miller's backward recurrence for J_m, normalized by
//    J0 + 2 sum J_2k = 1, and Neumann's series for Y0 (A&S 9.1.88) and its
//    derivative for Y1 = -Y0' (J_m are bounded by 1: little cancellation);
//  |x| > 25: Hankel's asymptotic expansion, its terms summed while they shrink
//    (the smallest is below e^-2x); the phase x - (2n+1) pi/4 enters through
//    cos x and sin x of x itself (libm reduces x exactly; x - pi/4 would carry
//    the rounding of the subtraction, ulp(x), into the result).
void hankel(int order, double x, double& j, double& y) {
  const double mu = 4.0 * order * order;
  double p = 0, q = 0, term = 1, prev = kInf;
  for (int k = 0; k < 200; ++k) {
    if (k > 0) term *= (mu - (2.0 * k - 1) * (2.0 * k - 1)) / (k * 8.0 * x);
    if (std::fabs(term) >= prev) break;  // the series diverges past its smallest term
    prev = std::fabs(term);
    const double signed_term = (k / 2) % 2 ? -term : term;
    (k % 2 ? q : p) += signed_term;
    if (prev < 1e-17 * std::fabs(p)) break;
  }
  const double c = std::cos(x), s = std::sin(x), r = std::sqrt(2 / (kPi * x)) / std::sqrt(2.0);
  // order 0: chi = x - pi/4; order 1: chi = x - 3pi/4 (cos/sin of chi from cos x, sin x)
  const double cchi = order == 0 ? (c + s) : (s - c);
  const double schi = order == 0 ? (s - c) : (-s - c);
  j = r * (p * cchi - q * schi);
  y = r * (p * schi + q * cchi);
}

// J0..J_{m} by Miller's recurrence into `jm` (x in (2, 25]); returns the count.
int miller(double x, double* jm, int cap) {
  int top = 2 * static_cast<int>((x + 60) / 2);
  if (top + 2 > cap) top = cap - 2;
  double next = 0, cur = 1e-300;
  jm[top + 1] = 0;
  jm[top] = cur;
  for (int m = top; m > 0; --m) {
    const double prev = 2.0 * m / x * cur - next;
    next = cur;
    cur = prev;
    jm[m - 1] = cur;
    if (std::fabs(cur) > 1e250) {  // rescale everything so far (the ratios are what matter)
      for (int i = m - 1; i <= top + 1; ++i) jm[i] *= 1e-250;
      cur *= 1e-250;
      next *= 1e-250;
    }
  }
  double norm = jm[0];
  for (int k = 2; k <= top; k += 2) norm += 2 * jm[k];
  for (int i = 0; i <= top + 1; ++i) jm[i] /= norm;
  return top + 2;
}

// J0, J1, Y0, Y1 of x >= 0 at once (y only meaningful for x > 0).
void bessel_jy(double x, double& j0, double& j1, double& y0, double& y1) {
  if (x > 25) {
    hankel(0, x, j0, y0);
    hankel(1, x, j1, y1);
    return;
  }
  // log(x) - log 2, not log(x / 2): x / 2 underflows to 0 for the smallest subnormal
  const double log_half_x = std::log(x) - 0.69314718055994530942;
  const double lg = log_half_x + kEulerGamma;
  if (x <= 2) {
    const double q = -0.25 * x * x;
    double t0 = 1, t1 = 0.5 * x, harm = 0;  // (t1 is 0 for the smallest subnormal: J1 rounds to 0 there)
    double s0 = 1, s1 = t1, sy0 = 0, sy1 = (0 + 1.0) * t1;  // sy1: (H_k + H_{k+1}) weights, k = 0
    for (int k = 1; k < 40; ++k) {
      t0 *= q / (static_cast<double>(k) * k);
      t1 *= q / (static_cast<double>(k) * (k + 1));
      harm += 1.0 / k;
      s0 += t0;
      s1 += t1;
      sy0 += harm * t0;
      sy1 += (2 * harm + 1.0 / (k + 1)) * t1;
      if (std::fabs(t0) < 1e-18 && std::fabs(t1) < 1e-18) break;
    }
    j0 = s0;
    j1 = s1;
    // Y0 = (2/pi)[(ln(x/2) + gamma) J0 - sum_k H_k (-x^2/4)^k / k!^2]
    y0 = 2 / kPi * (lg * j0 - sy0);
    // Y1 = -2/(pi x) + (2/pi) ln(x/2) J1 - (1/pi) sum_k (psi(k+1) + psi(k+2)) (-1)^k (x/2)^(2k+1) / (k!(k+1)!),
    // psi(k+1) + psi(k+2) = -2 gamma + 2 H_k + 1/(k+1)
    y1 = -2 / (kPi * x) + 2 / kPi * log_half_x * j1 - (sy1 - 2 * kEulerGamma * s1) / kPi;
    return;
  }
  double jm[160];
  const int count = miller(x, jm, 160);
  j0 = jm[0];
  j1 = jm[1];
  double n0 = 0, n1 = 0;
  for (int k = 1; 2 * k + 1 < count; ++k) {
    const double sign = k % 2 ? -1.0 : 1.0;
    n0 += sign * jm[2 * k] / k;
    n1 += sign * (jm[2 * k - 1] - jm[2 * k + 1]) / k;
  }
  y0 = 2 / kPi * (lg * j0 - 2 * n0);
  // Y1 = -Y0' with J0' = -J1, J_2k' = (J_2k-1 - J_2k+1) / 2
  y1 = 2 / kPi * (lg * j1 - j0 / x + n1);
}

double f_j0(double x) {
  if (std::isnan(x)) return x;
  x = std::fabs(x);
  if (std::isinf(x)) return 0;
  double j0, j1, y0, y1;
  bessel_jy(x, j0, j1, y0, y1);
  return j0;
}
double f_j1(double x) {
  if (std::isnan(x)) return x;
  const double ax = std::fabs(x);
  if (std::isinf(ax)) return 0;
  if (ax == 0) return x;
  double j0, j1, y0, y1;
  bessel_jy(ax, j0, j1, y0, y1);
  return x < 0 ? -j1 : j1;
}
double f_y0(double x) {
  if (std::isnan(x) || x < 0) return kNaN;
  if (x == 0) return -kInf;
  if (std::isinf(x)) return 0;
  double j0, j1, y0, y1;
  bessel_jy(x, j0, j1, y0, y1);
  return y0;
}
double f_y1(double x) {
  if (std::isnan(x) || x < 0) return kNaN;
  if (x == 0) return -kInf;
  if (std::isinf(x)) return 0;
  double j0, j1, y0, y1;
  bessel_jy(x, j0, j1, y0, y1);
  return y1;
}

// ---- modified Bessel K0, K1 (and e^x K) --------------------------------------
// e^x K_v(x) = int_0^inf exp(-2x sinh^2(t/2)) cosh(v t) dt, by the trapezoidal
// rule: the integrand is analytic in a strip around the real axis and decays
// double-exponentially, so the rule's error falls like exp(-2 pi d / h). For
// large x the integrand grows off the axis like exp(x d^2 / 2), so the step
// shrinks with the peak's width 1/sqrt(x) (h = 0.5/sqrt(x): error ~ e^-40).
double scaled_k(double order, double x) {
  if (std::isnan(x) || x < 0) return kNaN;
  if (x == 0) return kInf;
  if (std::isinf(x)) return 0;
  const double h = std::min(0.25, 0.5 / std::sqrt(x));
  double sum = 0.5;  // f(0) / 2
  for (int k = 1; k < 100000; ++k) {
    const double t = k * h;
    const double sh = std::sinh(t / 2);
    const double expo = -2 * x * sh * sh;
    const double f = order == 0 ? std::exp(expo) : std::exp(expo + order * t) * 0.5 + std::exp(expo - order * t) * 0.5;
    sum += f;
    if (f < 1e-18 * sum && expo < -40) break;
  }
  return h * sum;
}
double f_k0e(double x) { return scaled_k(0, x); }
double f_k1e(double x) { return scaled_k(1, x); }
double f_k0(double x) { return x > 0 && !std::isinf(x) ? scaled_k(0, x) * std::exp(-x) : scaled_k(0, x); }
double f_k1(double x) { return x > 0 && !std::isinf(x) ? scaled_k(1, x) * std::exp(-x) : scaled_k(1, x); }

// ---- the Airy function Ai ------------------------------------------------------
// -12 <= x <= 1: the Maclaurin series Ai = c1 f(x) - c2 g(x), summed in quad precision: for x < 0 its
//   terms alternate and reach ~e^zeta (zeta = 2/3 |x|^1.5, 1e12 at x = -12) before they shrink, and
//   113 bits leave more than double's 53 after that cancellation;
// x > 1: Ai(x) = sqrt(x/3)/pi K_1/3(zeta), K from the trapezoidal integral above;
// x < -12: the asymptotic expansion (DLMF 9.7.9), its smallest term below e^-2 zeta < 1e-24.
#if defined(__SIZEOF_FLOAT128__) && (defined(__x86_64__) || defined(__i386__))
using quad = __float128;
#else
using quad = long double;  // 128-bit IEEE quad on aarch64 and ppc64le Linux
#endif

double airy_series(double xd) {
  const quad x = xd, x3 = x * x * x;
  quad f = 1, g = x, tf = 1, tg = x;
  for (int k = 1; k < 400; ++k) {
    // f: prod (3j-2) x^3k / (3k)!, g: prod (3j-1) x^(3k+1) / (3k+1)!
    tf *= x3 / (quad(3 * k - 1) * quad(3 * k));
    tg *= x3 / (quad(3 * k) * quad(3 * k + 1));
    f += tf;
    g += tg;
    const quad af = tf < 0 ? -tf : tf, ag = tg < 0 ? -tg : tg;
    if (af < quad(1e-36) && ag < quad(1e-36)) break;
  }
  // c1 = Ai(0) = 1/(3^(2/3) Gamma(2/3)), c2 = -Ai'(0) = 1/(3^(1/3) Gamma(1/3))
  const quad c1 = 0.355028053887817239260063186004183176L, c2 = 0.258819403792806798405183560189203963L;
  return static_cast<double>(c1 * f - c2 * g);
}

double f_airy_ai(double x) {
  if (std::isnan(x)) return x;
  if (std::isinf(x)) return 0;
  if (x >= -12 && x <= 1) return airy_series(x);
  if (x > 1) {
    if (x > 110) return 0;  // below the smallest subnormal
    const double zeta = 2.0 / 3.0 * x * std::sqrt(x);
    return std::sqrt(x / 3) / kPi * scaled_k(1.0 / 3.0, zeta) * std::exp(-zeta);
  }
  const double y = -x, zeta = 2.0 / 3.0 * y * std::sqrt(y);
  double p = 0, q = 0, u = 1, prev = kInf;
  for (int k = 0; k < 200; ++k) {
    if (k > 0) u *= (6.0 * k - 5) * (6.0 * k - 3) * (6.0 * k - 1) / ((2.0 * k - 1) * 216.0 * k) / zeta;
    if (std::fabs(u) >= prev) break;
    prev = std::fabs(u);
    const double signed_u = (k / 2) % 2 ? -u : u;
    (k % 2 ? q : p) += signed_u;
    if (prev < 1e-17 * std::fabs(p)) break;
  }
  // cos(zeta - pi/4) and sin(zeta - pi/4) from cos and sin of zeta itself
  const double c = std::cos(zeta), s = std::sin(zeta);
  return ((c + s) * p + (s - c) * q) / std::sqrt(2.0) / (std::sqrt(kPi) * std::sqrt(std::sqrt(y)));
}

// ---- e^-|x| I0, e^-|x| I1 ------------------------------------------------------
// The power series times e^-|x| up to |x| = 30 (as i0/i1 in special_math.inc),
// then the asymptotic expansion without its e^|x| factor (no overflow).
double scaled_i(int order, double x) {
  if (std::isnan(x)) return x;
  const double ax = std::fabs(x);
  if (std::isinf(ax)) return order == 1 && x < 0 ? -0.0 : 0.0;
  double r;
  if (ax <= 30) {
    const double q = 0.25 * x * x;
    double term = order == 0 ? 1.0 : 0.5 * ax, sum = term;
    for (int k = 1; k < 500; ++k) {
      term *= q / (static_cast<double>(k) * (k + order));
      sum += term;
      if (term < sum * 1e-17) break;
    }
    r = sum * std::exp(-ax);
  } else {
    const double mu = 4.0 * order * order;
    double term = 1, sum = 1;
    for (int k = 1; k < 60; ++k) {
      const double t = term * -(mu - (2.0 * k - 1) * (2.0 * k - 1)) / (k * 8.0 * ax);
      if (std::fabs(t) >= std::fabs(term)) break;
      term = t;
      sum += term;
    }
    r = sum / std::sqrt(2 * kPi * ax);
  }
  return order == 1 && x < 0 ? -r : r;
}
double f_i0e(double x) { return scaled_i(0, x); }
double f_i1e(double x) { return scaled_i(1, x); }

double f_spherical_j0(double x) {
  if (std::isinf(x)) return 0;
  if (std::fabs(x) < 1e-2) {  // 1 - x^2/6 + x^4/120 - x^6/5040 (the next term is below 1e-21)
    const double z = x * x;
    return 1 - z / 6 * (1 - z / 20 * (1 - z / 42));
  }
  return std::sin(x) / x;
}

// ---- erfcx, log_ndtr, ndtri ----------------------------------------------------
// erfcx: e^(x^2) erfc(x) directly for -26.7 < x <= 4 (erfc is accurate to a few
// ulp relative in its tail; e^(x^2) adds the rounding of x^2, at most 16 ulp),
// Laplace's continued fraction erfc(x) = e^-x^2 / sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))
// for x > 4 (80 levels converge to double precision there), and inf below -26.7
// (where e^(x^2) overflows).
double f_erfcx(double x) {
  if (std::isnan(x)) return x;
  if (x < -26.7) return kInf;
  if (x <= 4) return std::exp(x * x) * std::erfc(x);
  if (std::isinf(x)) return 0;
  double d = x;
  for (int k = 80; k >= 1; --k) d = x + (0.5 * k) / d;
  return 1 / (std::sqrt(kPi) * d);
}

// log Phi(x): log1p(-Phi(-x)) above 0 (Phi near 1), log(erfc(-x/sqrt 2)/2) on
// [-1, 0], and log(erfcx(-x/sqrt 2)/2) - x^2/2 below -1 (erfc would underflow).
double f_log_ndtr(double x) {
  if (std::isnan(x)) return x;
  const double s = x * 0.70710678118654752440;
  if (x > 0) return std::log1p(-0.5 * std::erfc(s));
  if (x >= -1) return std::log(0.5 * std::erfc(-s));
  return std::log(0.5 * f_erfcx(-s)) - 0.5 * x * x;
}

// The normal quantile: Acklam's rational approximation (relative error 1.2e-9)
// polished by two Halley steps on Phi(x) - p (three Newton steps on log Phi(x) - log p in the tail
// p < 0.02425), done in the lower half (p <= 1/2,
// where Phi(x) = erfc(-x/sqrt 2)/2 keeps its relative precision); the upper
// half is -ndtri(1 - p) (1 - p is exact for p >= 1/2).
double ndtri_lower(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  double x;
  if (p < 0.02425) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  if (p < 0.02425) {
    // the tail: Newton on log Phi(x) - log p, whose slope phi/Phi = sqrt(2/pi) / erfcx(-x/sqrt 2) stays
    // finite where Phi(x) itself underflows (p down to the smallest subnormal)
    const double log_p = std::log(p);
    for (int it = 0; it < 3; ++it)
      x -= (f_log_ndtr(x) - log_p) * f_erfcx(-x * 0.70710678118654752440) / std::sqrt(2 / kPi);
    return x;
  }
  for (int it = 0; it < 2; ++it) {
    const double e = 0.5 * std::erfc(-x * 0.70710678118654752440) - p;
    const double u = e * std::sqrt(2 * kPi) * std::exp(0.5 * x * x);
    x = x - u / (1 + 0.5 * x * u);
  }
  return x;
}
double f_ndtri(double p) {
  if (std::isnan(p) || p < 0 || p > 1) return kNaN;
  if (p == 0) return -kInf;
  if (p == 1) return kInf;
  return p <= 0.5 ? ndtri_lower(p) : -ndtri_lower(1 - p);
}

// ---- the operators ----------------------------------------------------------------
// Floating inputs keep their dtype (16-bit ones compute in float32 and round once, as PyTorch's i0e
// does); integers and bool give float32.
DType float_of(DType d) { return is_floating(d) ? d : DType::Float32; }

std::vector<TensorMeta> unary_infer(const OpDef&, const std::vector<TensorMeta>& in, const Attrs&) {
  return {TensorMeta::contiguous(in[0].sizes, float_of(in[0].dtype))};
}

template <double (*F)(double)>
std::vector<Tensor> unary_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs&,
                              const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  if (out.numel() == 0) return {out};
  const bool narrow = om[0].dtype != DType::Float64 && om[0].dtype != DType::Float32;
  const DType compute = narrow ? DType::Float32 : om[0].dtype;
  const Tensor x = as_contiguous(convert(in[0], compute));
  Tensor res = narrow ? alloc_out(TensorMeta::contiguous(om[0].sizes, compute)) : out;
  TP_DISPATCH_FLOATING(x.dtype(), op.name, ([&]<class T>() {
    const T* px = x.data_as<T>();
    T* po = res.data_as<T>();
    parallel_for(0, x.numel(), 1024, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) po[i] = static_cast<T>(F(static_cast<double>(px[i])));
    });
  }));
  if (narrow) copy_into(out, res);
  return {out};
}

Tensor op1(const char* name, const Tensor& x) { return call_op1(get_op(name), {x}); }
Tensor scalar_like(const Tensor& x, double v) { return ops::full_like(x, Scalar(v)); }
Tensor sign_of(const Tensor& x) {
  return ops::sub(ops::to_dtype(ops::gt(x, ops::zeros_like(x)), x.dtype()),
                  ops::to_dtype(ops::lt(x, ops::zeros_like(x)), x.dtype()));
}
bool skip(const BackwardArgs& a) { return !a.needs_grad[0] || !a.grad_outputs[0].defined(); }

Tensor unary_backward(const BackwardArgs& a, const char* op) {
  return ops::mul(a.grad_outputs[0], special_unary_derivative(op, a.inputs[0], a.outputs[0]));
}
std::vector<Tensor> i0e_backward(const BackwardArgs& a) {
  return {skip(a) ? Tensor() : unary_backward(a, "special_i0e")};
}
std::vector<Tensor> i1e_backward(const BackwardArgs& a) {
  return {skip(a) ? Tensor() : unary_backward(a, "special_i1e")};
}
std::vector<Tensor> erfcx_backward(const BackwardArgs& a) {
  return {skip(a) ? Tensor() : unary_backward(a, "special_erfcx")};
}
std::vector<Tensor> log_ndtr_backward(const BackwardArgs& a) {
  return {skip(a) ? Tensor() : unary_backward(a, "special_log_ndtr")};
}
std::vector<Tensor> ndtri_backward(const BackwardArgs& a) {
  return {skip(a) ? Tensor() : unary_backward(a, "special_ndtri")};
}

}  // namespace

Tensor special_unary_derivative(const char* op, const Tensor& x, const Tensor& y) {
  const std::string_view name(op);
  if (name == "special_i0e")  // i0e' = i1e - sign(x) i0e
    return ops::sub(op1("special_i1e", x), ops::mul(sign_of(x), y));
  if (name == "special_i1e") {  // i1e' = i0e - i1e (sign(x) + 1/x), 1/2 at 0
    Tensor zero = ops::eq(x, ops::zeros_like(x));
    Tensor safe = ops::where(zero, ops::ones_like(x), x);
    Tensor d = ops::sub(op1("special_i0e", x), ops::mul(y, ops::add(sign_of(x), ops::div(ops::ones_like(x), safe))));
    return ops::where(zero, scalar_like(x, 0.5), d);
  }
  if (name == "special_erfcx")  // erfcx' = 2 x erfcx - 2/sqrt(pi)
    return ops::sub(ops::mul(ops::mul(scalar_like(x, 2.0), x), y), scalar_like(x, 2 / std::sqrt(kPi)));
  if (name == "special_log_ndtr") {  // phi(x) / Phi(x) = sqrt(2/pi) / erfcx(-x/sqrt 2): no 0/0 in either tail
    Tensor e = op1("special_erfcx", ops::mul(x, scalar_like(x, -0.70710678118654752440)));
    return ops::div(scalar_like(x, std::sqrt(2 / kPi)), e);
  }
  TP_CHECK(name == "special_ndtri", ValueError, "special_unary_derivative: no derivative for ", op);
  // ndtri' = sqrt(2 pi) exp(ndtri(p)^2 / 2)
  return ops::mul(scalar_like(y, std::sqrt(2 * kPi)), ops::exp(ops::mul(ops::mul(y, y), scalar_like(y, 0.5))));
}

void register_special_bessel_ops() {
  struct Def {
    const char* name;
    const char* schema;
    KernelFn cpu;
    BackwardFn backward;
  };
  const Def defs[] = {
      {"special_bessel_j0", "special_bessel_j0(Tensor self) -> Tensor", &unary_cpu<f_j0>, nullptr},
      {"special_bessel_j1", "special_bessel_j1(Tensor self) -> Tensor", &unary_cpu<f_j1>, nullptr},
      {"special_bessel_y0", "special_bessel_y0(Tensor self) -> Tensor", &unary_cpu<f_y0>, nullptr},
      {"special_bessel_y1", "special_bessel_y1(Tensor self) -> Tensor", &unary_cpu<f_y1>, nullptr},
      {"special_modified_bessel_k0", "special_modified_bessel_k0(Tensor self) -> Tensor", &unary_cpu<f_k0>,
       nullptr},
      {"special_modified_bessel_k1", "special_modified_bessel_k1(Tensor self) -> Tensor", &unary_cpu<f_k1>,
       nullptr},
      {"special_scaled_modified_bessel_k0", "special_scaled_modified_bessel_k0(Tensor self) -> Tensor",
       &unary_cpu<f_k0e>, nullptr},
      {"special_scaled_modified_bessel_k1", "special_scaled_modified_bessel_k1(Tensor self) -> Tensor",
       &unary_cpu<f_k1e>, nullptr},
      {"special_spherical_bessel_j0", "special_spherical_bessel_j0(Tensor self) -> Tensor",
       &unary_cpu<f_spherical_j0>, nullptr},
      {"special_airy_ai", "special_airy_ai(Tensor self) -> Tensor", &unary_cpu<f_airy_ai>, nullptr},
      {"special_i0e", "special_i0e(Tensor self) -> Tensor", &unary_cpu<f_i0e>, &i0e_backward},
      {"special_i1e", "special_i1e(Tensor self) -> Tensor", &unary_cpu<f_i1e>, &i1e_backward},
      {"special_erfcx", "special_erfcx(Tensor self) -> Tensor", &unary_cpu<f_erfcx>, &erfcx_backward},
      {"special_log_ndtr", "special_log_ndtr(Tensor self) -> Tensor", &unary_cpu<f_log_ndtr>, &log_ndtr_backward},
      {"special_ndtri", "special_ndtri(Tensor self) -> Tensor", &unary_cpu<f_ndtri>, &ndtri_backward},
  };
  for (const Def& d : defs)
    register_op({.name = d.name, .schema = d.schema, .infer = &unary_infer, .cpu = d.cpu, .backward = d.backward});
}

}  // namespace tp
