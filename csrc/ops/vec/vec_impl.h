// The float pointwise kernels, written once and compiled once per ISA: each of
// vec_avx512.cpp / vec_avx2.cpp / vec_base.cpp defines
//   TP_VEC_NS     the namespace of its copy (avx512, avx2, base),
//   TP_VEC_BYTES  the vector width in bytes (64, 32, 16),
//   TP_MVEC(f) / TP_MVEC2(f)  the libmvec names of the one/two-argument
//                 float function f at that width (e.g. _ZGVeN16v_expf),
// then includes this file. Only this file's own code is compiled under the
// ISA flags: everything here has internal linkage except the table getter,
// and it includes no header with inline functions (<cmath>, <cstring>, ...)
// whose out-of-line copies the linker could pick for the baseline code.
//
// Two loop shapes: `simple` operators (add, abs, floor, relu, ...) are plain
// element loops that GCC vectorizes itself; operators that need a
// transcendental function run on explicit vectors (GCC vector extensions) and
// call libmvec for float32, libm element by element for float64 (full
// accuracy). Composite operators (sigmoid, gelu, mish, erfinv, ...) are written
// once as generic code over V = vf (float32 vectors) or double.
#include <cstdint>
#include <utility>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>  // always-inline intrinsics only: nothing out of line to leak
#endif

#include "ops/vec/vec_kernels.h"

#ifndef TP_HAVE_LIBMVEC
#define TP_HAVE_LIBMVEC 0
#endif

namespace tp::vec::TP_VEC_NS {
namespace {

constexpr int W = TP_VEC_BYTES / 4;  // float lanes
typedef float vf __attribute__((vector_size(TP_VEC_BYTES)));
typedef int32_t vi __attribute__((vector_size(TP_VEC_BYTES)));

template <class V> struct elem { using type = V; };
template <> struct elem<vf> { using type = float; };
template <class V> using E = typename elem<V>::type;
template <class V> inline V splat(E<V> s) { return V{} + s; }

// ---- elementary functions: vf -> libmvec, double -> libm ----
#if TP_HAVE_LIBMVEC
#define TP_VFN1(name, fn)                                      \
  extern "C" vf TP_MVEC(fn##f)(vf);                            \
  inline vf name(vf x) { return TP_MVEC(fn##f)(x); }           \
  inline double name(double x) { return __builtin_##fn(x); }
#define TP_VFN2(name, fn)                                              \
  extern "C" vf TP_MVEC2(fn##f)(vf, vf);                               \
  inline vf name(vf x, vf y) { return TP_MVEC2(fn##f)(x, y); }         \
  inline double name(double x, double y) { return __builtin_##fn(x, y); }
#else  // no libmvec (non-glibc or non-x86): lane by lane through libm
#define TP_VFN1(name, fn)                                            \
  inline vf name(vf x) {                                             \
    vf r;                                                            \
    for (int k = 0; k < W; ++k) r[k] = __builtin_##fn##f(x[k]);      \
    return r;                                                        \
  }                                                                  \
  inline double name(double x) { return __builtin_##fn(x); }
#define TP_VFN2(name, fn)                                                     \
  inline vf name(vf x, vf y) {                                                \
    vf r;                                                                     \
    for (int k = 0; k < W; ++k) r[k] = __builtin_##fn##f(x[k], y[k]);         \
    return r;                                                                 \
  }                                                                           \
  inline double name(double x, double y) { return __builtin_##fn(x, y); }
#endif

TP_VFN1(v_exp, exp)
TP_VFN1(v_exp2, exp2)
TP_VFN1(v_expm1, expm1)
TP_VFN1(v_log, log)
TP_VFN1(v_log2, log2)
TP_VFN1(v_log10, log10)
TP_VFN1(v_log1p, log1p)
TP_VFN1(v_sin, sin)
TP_VFN1(v_cos, cos)
TP_VFN1(v_tan, tan)
TP_VFN1(v_asin, asin)
TP_VFN1(v_acos, acos)
TP_VFN1(v_atan, atan)
TP_VFN1(v_sinh, sinh)
TP_VFN1(v_cosh, cosh)
TP_VFN1(v_tanh, tanh)
TP_VFN1(v_asinh, asinh)
TP_VFN1(v_acosh, acosh)
TP_VFN1(v_atanh, atanh)
TP_VFN1(v_erf, erf)
#if (TP_VEC_BYTES == 64 && defined(__AVX512F__)) || (TP_VEC_BYTES == 32 && defined(__FMA__))
// float32 erfc: our own (erfc_f32.inc, at most 1.71 ulp, ~1.4x libmvec's
// speed), shared with the Stax prelude so compiled gelu' computes these bits.
inline vf tp_erfc_splat(float v) { return splat<vf>(v); }
inline vf tp_erfc_fma(vf a, vf b, vf c) {
#if TP_VEC_BYTES == 64
  return (vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#else
  return (vf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#endif
}
#define TP_ERFC_SOURCE(...) __VA_ARGS__
#include "ops/vec/erfc_f32.inc"
#undef TP_ERFC_SOURCE
inline vf v_erfc(vf x) { return tp_erfc_v(x); }
inline double v_erfc(double x) { return __builtin_erfc(x); }
#else
TP_VFN1(v_erfc, erfc)
#endif
TP_VFN2(v_pow, pow)
TP_VFN2(v_atan2, atan2)
TP_VFN2(v_hypot, hypot)

// Lane loops that GCC turns into single instructions (sqrtps, andps).
inline vf v_sqrt(vf x) {
  vf r;
  for (int k = 0; k < W; ++k) r[k] = __builtin_sqrtf(x[k]);
  return r;
}
inline double v_sqrt(double x) { return __builtin_sqrt(x); }
inline vf v_abs(vf x) { return (vf)((vi)x & 0x7fffffff); }
inline double v_abs(double x) { return __builtin_fabs(x); }
inline float v_abs(float x) { return __builtin_fabsf(x); }
inline vf v_copysign(vf mag, vf sgn) {
  return (vf)(((vi)mag & 0x7fffffff) | ((vi)sgn & (vi{} + int32_t(0x80000000u))));
}
inline double v_copysign(double m, double s) { return __builtin_copysign(m, s); }

// trunc and c - a*b with a single rounding, as single instructions where the ISA has them.
inline vf v_trunc(vf x) {
#if TP_VEC_BYTES == 64 && defined(__AVX512F__)
  // The masked form with every lane selected: the unmasked intrinsic passes an
  // undefined vector that GCC 12 reports as maybe-uninitialized.
  return (vf)_mm512_mask_roundscale_ps((__m512)x, (__mmask16)0xFFFF, (__m512)x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
#elif TP_VEC_BYTES == 32 && defined(__AVX2__)
  return (vf)_mm256_round_ps((__m256)x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
#else
  vf r;
  for (int k = 0; k < W; ++k) r[k] = __builtin_truncf(x[k]);
  return r;
#endif
}
inline vf v_fnmadd(vf a, vf b, vf c) {
#if TP_VEC_BYTES == 64 && defined(__AVX512F__)
  return (vf)_mm512_fnmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif TP_VEC_BYTES == 32 && defined(__FMA__)
  return (vf)_mm256_fnmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
  vf r;
  for (int k = 0; k < W; ++k) r[k] = __builtin_fmaf(-a[k], b[k], c[k]);
  return r;
#endif
}

const float kInf = __builtin_inff();
const float kNaN = __builtin_nanf("");

// pow(|x|, y) for float32 as 2^(y * log2|x|) evaluated in double precision
// with short polynomials (libmvec's powf is ten times slower than its expf):
// log2 from the double's exponent and 2*atanh((m-1)/(m+1)) on
// m in [sqrt(1/2), sqrt(2)), 2^f on |f| <= 1/2 by its Taylor series, both to
// about 2^-35, well below a float ulp. The IEEE special cases that this form
// gets wrong (x = 0 or inf, y = 0, |x| = 1 against NaN or inf) are selected.
typedef double vd __attribute__((vector_size(TP_VEC_BYTES)));
typedef int64_t vl __attribute__((vector_size(TP_VEC_BYTES)));

inline vd log2_d(vd x) {  // x finite and > 0 (also float denormals: normal in double)
  const vl bits = (vl)x;
  vd e = __builtin_convertvector(((bits >> 52) & 0x7ff) - 1023, vd);
  vd m = (vd)((bits & 0x000fffffffffffffLL) | 0x3ff0000000000000LL);  // [1, 2)
  const vl big = m > 1.4142135623730951;
  m = big ? m * 0.5 : m;
  e = big ? e + 1.0 : e;
  const vd s = (m - 1.0) / (m + 1.0), s2 = s * s;
  vd p = vd{} + 2.0 / 15;
  p = p * s2 + 2.0 / 13;
  p = p * s2 + 2.0 / 11;
  p = p * s2 + 2.0 / 9;
  p = p * s2 + 2.0 / 7;
  p = p * s2 + 2.0 / 5;
  p = p * s2 + 2.0 / 3;
  p = p * s2 + 2.0;
  return e + p * s * 1.4426950408889634;  // ln(m) / ln 2
}

inline vd exp2_d(vd t) {  // |t| clamped to 300: beyond that the float result is 0 or inf anyway
  t = t > 300.0 ? 300.0 : t;
  t = t < -300.0 ? -300.0 : t;
  const double kMagic = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
  const vd tm = t + kMagic;
  const vd n = tm - kMagic;
  const vd f = (t - n) * 0.6931471805599453;  // |f| <= ln2 / 2
  vd p = vd{} + 1.0 / 362880;
  p = p * f + 1.0 / 40320;
  p = p * f + 1.0 / 5040;
  p = p * f + 1.0 / 720;
  p = p * f + 1.0 / 120;
  p = p * f + 1.0 / 24;
  p = p * f + 1.0 / 6;
  p = p * f + 0.5;
  p = p * f + 1.0;
  p = p * f + 1.0;
  const vl ni = (vl)tm - (vl)(tm - tm + kMagic);
  return p * (vd)((ni + 1023) << 52);
}

typedef float vfh __attribute__((vector_size(TP_VEC_BYTES / 2)));  // half a vf, widened to a vd

inline vf pow_abs(vf ax, vf y) {
  vf r;
  for (int h = 0; h < 2; ++h) {
    vfh xh, yh;
    __builtin_memcpy(&xh, reinterpret_cast<const char*>(&ax) + h * sizeof xh, sizeof xh);
    __builtin_memcpy(&yh, reinterpret_cast<const char*>(&y) + h * sizeof yh, sizeof yh);
    const vd xd = __builtin_convertvector(xh, vd), yd = __builtin_convertvector(yh, vd);
    const vd safe = (xd > 0.0) & (xd < 1e300) ? xd : vd{} + 1.0;
    const vfh rh = __builtin_convertvector(exp2_d(yd * log2_d(safe)), vfh);
    __builtin_memcpy(reinterpret_cast<char*>(&r) + h * sizeof rh, &rh, sizeof rh);
  }
  const vf zero_or_inf = (ax == 0.0f) != (y > 0.0f) ? splat<vf>(kInf) : splat<vf>(0.0f);  // 0^y, inf^y
  r = (ax == 0.0f) | (ax == kInf) ? zero_or_inf : r;
  r = (ax != ax) | (y != y) ? ax + y : r;  // NaN in, NaN out ...
  return (y == 0.0f) | (ax == 1.0f) ? splat<vf>(1.0f) : r;  // ... except these
}

// ---- domain guards ----
// libmvec computes in-domain lanes in vector registers but sends every lane
// outside a function's domain (log of a negative, asin of 2, ...) through a
// scalar fallback, which makes such inputs ten times slower; data like
// randn() hits that on half of the lanes. The guarded forms feed those lanes a
// harmless interior value and write the IEEE result themselves. double (libm, one
// element at a time) needs none of this, so the guards are identity there.

template <class Fn>
inline vf guarded(vf x, vi ok, float safe, Fn fn, vf special) {
  const vf r = fn(ok ? x : splat<vf>(safe));
  return ok ? r : special;
}
// log, log2, log10: x < 0 -> NaN, x == 0 -> -inf, NaN -> NaN.
template <class Fn>
inline vf guard_log(vf x, Fn fn) {
  return guarded(x, x > 0.0f, 2.0f, fn, x == 0.0f ? splat<vf>(-kInf) : x + kNaN);
}
template <class Fn>
inline double guard_log(double x, Fn fn) { return fn(x); }
template <class V>
inline V g_log(V x) { return guard_log(x, [](auto v) { return v_log(v); }); }
template <class V>
inline V g_log2(V x) { return guard_log(x, [](auto v) { return v_log2(v); }); }
template <class V>
inline V g_log10(V x) { return guard_log(x, [](auto v) { return v_log10(v); }); }
inline vf g_log1p(vf x) {
  return guarded(x, x > -1.0f, 1.0f, [](vf v) { return v_log1p(v); }, x == -1.0f ? splat<vf>(-kInf) : x + kNaN);
}
inline double g_log1p(double x) { return v_log1p(x); }
inline vf g_asin(vf x) { return guarded(x, v_abs(x) <= 1.0f, 0.5f, [](vf v) { return v_asin(v); }, x + kNaN); }
inline double g_asin(double x) { return v_asin(x); }
inline vf g_acos(vf x) { return guarded(x, v_abs(x) <= 1.0f, 0.5f, [](vf v) { return v_acos(v); }, x + kNaN); }
inline double g_acos(double x) { return v_acos(x); }
inline vf g_acosh(vf x) { return guarded(x, x >= 1.0f, 2.0f, [](vf v) { return v_acosh(v); }, x + kNaN); }
inline double g_acosh(double x) { return v_acosh(x); }
inline vf g_atanh(vf x) {
  const vf edge = v_abs(x) == 1.0f ? v_copysign(splat<vf>(kInf), x) : x + kNaN;
  return guarded(x, v_abs(x) < 1.0f, 0.5f, [](vf v) { return v_atanh(v); }, edge);
}
inline double g_atanh(double x) { return v_atanh(x); }
// pow with a negative base: |x|^y with the sign of an odd integer exponent,
// NaN for a non-integer one (so libmvec never sees a negative base).
inline vf g_pow(vf x, vf y) {
  vf fy;
  for (int k = 0; k < W; ++k) fy[k] = __builtin_floorf(y[k]);
  const vi is_int = fy == y;
  vf half;
  for (int k = 0; k < W; ++k) half[k] = __builtin_floorf(y[k] * 0.5f);
  const vi odd = is_int & (half * 2.0f != y) & (v_abs(y) < 16777216.0f);
  const vf r = pow_abs(v_abs(x), y);
  const vi neg = x < 0.0f;
  const vf signed_r = odd ? -r : r;
  const vf neg_r = is_int ? signed_r : (x == -kInf ? r : splat<vf>(kNaN));  // (-inf)^0.5 = inf
  return neg ? neg_r : (x == 0.0f ? (odd ? v_copysign(r, x) : r) : r);
}
inline double g_pow(double x, double y) { return v_pow(x, y); }

// ---- the operators ----
// Simple operators are applied element by element in loops GCC vectorizes.
constexpr bool is_simple(UnaryFn f) {
  switch (f) {
    case UnaryFn::Sqrt: case UnaryFn::Rsqrt: case UnaryFn::Relu: case UnaryFn::LeakyRelu:
    case UnaryFn::Hardtanh: case UnaryFn::Abs: case UnaryFn::Neg: case UnaryFn::Sign:
    case UnaryFn::Floor: case UnaryFn::Ceil: case UnaryFn::Round: case UnaryFn::Trunc:
    case UnaryFn::Frac: case UnaryFn::Reciprocal: case UnaryFn::Square:
      return true;
    default:
      return false;
  }
}

// Rounding on plain scalars (used by the simple loops only).
inline float s_floor(float x) { return __builtin_floorf(x); }
inline double s_floor(double x) { return __builtin_floor(x); }
inline float s_ceil(float x) { return __builtin_ceilf(x); }
inline double s_ceil(double x) { return __builtin_ceil(x); }
inline float s_trunc(float x) { return __builtin_truncf(x); }
inline double s_trunc(double x) { return __builtin_trunc(x); }
inline float s_rint(float x) { return __builtin_rintf(x); }  // half to even
inline double s_rint(double x) { return __builtin_rint(x); }
inline float s_sqrt(float x) { return __builtin_sqrtf(x); }
inline double s_sqrt(double x) { return __builtin_sqrt(x); }

// erfinv: Giles' single-precision approximation ("Approximating the erfinv
// function", GPU Computing Gems, 2011), two regions in w = -log(1 - x^2).
template <class V>
V erfinv_giles(V x) {
  using T = E<V>;
  const V w = -v_log((T(1) - x) * (T(1) + x));
  V a = w - T(2.5);
  V p = splat<V>(T(2.81022636e-08));
  p = T(3.43273939e-07) + p * a;
  p = T(-3.5233877e-06) + p * a;
  p = T(-4.39150654e-06) + p * a;
  p = T(0.00021858087) + p * a;
  p = T(-0.00125372503) + p * a;
  p = T(-0.00417768164) + p * a;
  p = T(0.246640727) + p * a;
  p = T(1.50140941) + p * a;
  V b = v_sqrt(w) - T(3);
  V q = splat<V>(T(-0.000200214257));
  q = T(0.000100950558) + q * b;
  q = T(0.00134934322) + q * b;
  q = T(-0.00367342844) + q * b;
  q = T(0.00573950773) + q * b;
  q = T(-0.0076224613) + q * b;
  q = T(0.00943887047) + q * b;
  q = T(1.00167406) + q * b;
  q = T(2.83297682) + q * b;
  return (w < T(5) ? p : q) * x;
}

// erfinv in float32: the approximation (a few ulp) on |x| < 1 (other lanes
// get a harmless 0.5, so log never sees a negative), then the edges.
inline vf erfinv_v(vf x) {
  const vf ax = v_abs(x);
  const vf r = erfinv_giles(ax < 1.0f ? ax : splat<vf>(0.5f));
  const vf edge = ax == 1.0f ? splat<vf>(kInf) : splat<vf>(kNaN);
  return v_copysign(ax < 1.0f ? r : edge, x);
}

// erfinv in float64: two Newton steps from the float estimate (on erfc where
// |x| > 0.5, so the residual keeps its relative accuracy next to 1).
inline double erfinv_d(double x) {
  const double ax = __builtin_fabs(x);
  if (!(ax < 1.0)) return ax == 1.0 ? __builtin_copysign(__builtin_inf(), x) : __builtin_nan("");
  if (ax == 0.0) return x;
  double r = erfinv_giles(static_cast<double>(static_cast<float>(ax)));
  if (!(r < 1e300)) r = 6.0;  // float estimate overflowed: start from the tail
  for (int it = 0; it < 3; ++it) {
    const double d = 1.1283791670955126 * __builtin_exp(-r * r);
    const double f = ax > 0.5 ? (1.0 - ax) - __builtin_erfc(r) : __builtin_erf(r) - ax;
    if (d == 0.0) break;
    r -= f / d;
  }
  return __builtin_copysign(r, x);
}

template <UnaryFn F, class V>
inline V unary_apply(V x, E<V> a, E<V> b) {
  using T = E<V>;
  if constexpr (F == UnaryFn::Exp) return v_exp(x);
  else if constexpr (F == UnaryFn::Exp2) return v_exp2(x);
  else if constexpr (F == UnaryFn::Expm1) return v_expm1(x);
  else if constexpr (F == UnaryFn::Log) return g_log(x);
  else if constexpr (F == UnaryFn::Log2) return g_log2(x);
  else if constexpr (F == UnaryFn::Log10) return g_log10(x);
  else if constexpr (F == UnaryFn::Log1p) return g_log1p(x);
  else if constexpr (F == UnaryFn::Sin) return v_sin(x);
  else if constexpr (F == UnaryFn::Cos) return v_cos(x);
  else if constexpr (F == UnaryFn::Tan) return v_tan(x);
  else if constexpr (F == UnaryFn::Asin) return g_asin(x);
  else if constexpr (F == UnaryFn::Acos) return g_acos(x);
  else if constexpr (F == UnaryFn::Atan) return v_atan(x);
  else if constexpr (F == UnaryFn::Sinh) return v_sinh(x);
  else if constexpr (F == UnaryFn::Cosh) return v_cosh(x);
  else if constexpr (F == UnaryFn::Tanh) return v_tanh(x);
  else if constexpr (F == UnaryFn::Asinh) return v_asinh(x);
  else if constexpr (F == UnaryFn::Acosh) return g_acosh(x);
  else if constexpr (F == UnaryFn::Atanh) return g_atanh(x);
  else if constexpr (F == UnaryFn::Erf) return v_erf(x);
  else if constexpr (F == UnaryFn::Erfc) return v_erfc(x);
  else if constexpr (F == UnaryFn::Erfinv) {
    if constexpr (sizeof(T) == 4) return erfinv_v(x);
    else return erfinv_d(x);
  } else if constexpr (F == UnaryFn::Sigmoid) {
    return T(1) / (T(1) + v_exp(-x));
  } else if constexpr (F == UnaryFn::Logit) {
    if (a >= T(0)) {  // clamp to [eps, 1 - eps]; NaN stays NaN
      x = x < a ? splat<V>(a) : x;
      x = x > T(1) - a ? splat<V>(T(1) - a) : x;
    }
    return g_log(x / (T(1) - x));
  } else if constexpr (F == UnaryFn::Gelu) {
    // Phi(x) = erfc(-x / sqrt 2) / 2: 1 + erf(x / sqrt 2) would cancel for negative x (17% off at -5).
    return T(0.5) * x * v_erfc(x * T(-0.70710678118654752440));
  } else if constexpr (F == UnaryFn::GeluTanh) {
    const V inner = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
    return T(0.5) * x * (T(1) + v_tanh(inner));
  } else if constexpr (F == UnaryFn::Silu) {
    return x / (T(1) + v_exp(-x));
  } else if constexpr (F == UnaryFn::Mish) {
    return x * v_tanh(v_log1p(v_exp(x)));
  } else if constexpr (F == UnaryFn::Softplus) {  // a = beta, b = threshold
    const V bx = x * a;
    return bx > b ? x : v_log1p(v_exp(bx)) / a;
  } else if constexpr (F == UnaryFn::Elu) {
    return x > T(0) ? x : a * v_expm1(x);
  }
  // ---- simple operators (plain scalars) ----
  else if constexpr (F == UnaryFn::Sqrt) return s_sqrt(x);
  else if constexpr (F == UnaryFn::Rsqrt) return T(1) / s_sqrt(x);
  else if constexpr (F == UnaryFn::Relu) return x < T(0) ? T(0) : x;
  else if constexpr (F == UnaryFn::LeakyRelu) return x > T(0) ? x : x * a;
  else if constexpr (F == UnaryFn::Hardtanh) {  // min(max(x, a), b): NaN passes, a > b gives b
    const T lo = x < a ? a : x;
    return lo > b ? b : lo;
  }
  else if constexpr (F == UnaryFn::Abs) return v_abs(x);
  else if constexpr (F == UnaryFn::Neg) return -x;
  else if constexpr (F == UnaryFn::Sign) return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
  else if constexpr (F == UnaryFn::Floor) return s_floor(x);
  else if constexpr (F == UnaryFn::Ceil) return s_ceil(x);
  else if constexpr (F == UnaryFn::Round) {  // a = 10^|decimals|, b = sign of decimals
    if (b == T(0)) return s_rint(x);
    return b > T(0) ? s_rint(x * a) / a : s_rint(x / a) * a;
  } else if constexpr (F == UnaryFn::Trunc) return s_trunc(x);
  else if constexpr (F == UnaryFn::Frac) return x - s_trunc(x);
  else if constexpr (F == UnaryFn::Reciprocal) return T(1) / x;
  else return x * x;  // Square
}

// ---- loops ----
template <class T, class Fn>
void map_scalar(const T* __restrict x, T* y, int64_t n, Fn f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

inline vf load(const float* p) {
  vf v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, vf v) { __builtin_memcpy(p, &v, sizeof v); }

// W lanes at a time; the tail is padded with its last element (a value of the
// input, so no special-case slow path is triggered that the data did not ask for).
template <class Fn>
void map_vec(const float* x, float* y, int64_t n, Fn f) {
  int64_t i = 0;
  for (; i + W <= n; i += W) store(y + i, f(load(x + i)));
  if (i < n) {
    vf v;
    for (int k = 0; k < W; ++k) v[k] = x[i + (i + k < n ? k : n - 1 - i)];
    v = f(v);
    for (int k = 0; i + k < n; ++k) y[i + k] = v[k];
  }
}

template <UnaryFn F>
void unary_f32(const float* x, float* y, int64_t n, const Params& p) {
  const float a = static_cast<float>(p.a), b = static_cast<float>(p.b);
  if constexpr (is_simple(F)) map_scalar(x, y, n, [a, b](float v) { return unary_apply<F, float>(v, a, b); });
  else map_vec(x, y, n, [a, b](vf v) { return unary_apply<F, vf>(v, a, b); });
}

template <UnaryFn F>
void unary_f64(const double* x, double* y, int64_t n, const Params& p) {
  map_scalar(x, y, n, [a = p.a, b = p.b](double v) { return unary_apply<F, double>(v, a, b); });
}

// ---- binary operators ----
constexpr bool is_vector_binary(BinaryFn f) {
  return f == BinaryFn::Pow || f == BinaryFn::Atan2 || f == BinaryFn::Hypot;
}

template <BinaryFn F, class T>
inline T binary_apply(T x, T y, T alpha) {
  if constexpr (F == BinaryFn::Add) return x + alpha * y;
  else if constexpr (F == BinaryFn::Sub) return x - alpha * y;
  else if constexpr (F == BinaryFn::Mul) return x * y;
  else if constexpr (F == BinaryFn::Div) return x / y;
  else if constexpr (F == BinaryFn::DivTrunc) return s_trunc(x / y);
  else if constexpr (F == BinaryFn::Maximum) return (x > y || x != x) ? x : y;  // NaN propagates
  else if constexpr (F == BinaryFn::Minimum) return (x < y || x != x) ? x : y;
  else if constexpr (F == BinaryFn::Pow) return g_pow(x, y);
  else if constexpr (F == BinaryFn::Atan2) return v_atan2(x, y);
  else return v_hypot(x, y);
}

template <BinaryFn F, class T, int SA, int SB>
void binary_simple(const T* __restrict a, const T* __restrict b, T* y, int64_t n, T alpha) {
  if (alpha == T(1) && (F == BinaryFn::Add || F == BinaryFn::Sub)) {  // exact x + y, no multiply
    for (int64_t i = 0; i < n; ++i) y[i] = F == BinaryFn::Add ? a[i * SA] + b[i * SB] : a[i * SA] - b[i * SB];
    return;
  }
  for (int64_t i = 0; i < n; ++i) y[i] = binary_apply<F, T>(a[i * SA], b[i * SB], alpha);
}

template <BinaryFn F, int SA, int SB>
void binary_vec(const float* a, const float* b, float* y, int64_t n) {
  auto get = [](const float* p, int64_t i, int64_t n) -> vf {  // a padded tail
    vf v;
    for (int k = 0; k < W; ++k) v[k] = p[(i + k < n ? i + k : n - 1)];
    return v;
  };
  int64_t i = 0;
  const vf as = SA == 0 ? splat<vf>(*a) : vf{}, bs = SB == 0 ? splat<vf>(*b) : vf{};
  for (; i + W <= n; i += W) {
    const vf va = SA ? load(a + i) : as, vb = SB ? load(b + i) : bs;
    store(y + i, binary_apply<F, vf>(va, vb, vf{}));
  }
  if (i < n) {
    const vf va = SA ? get(a, i, n) : as, vb = SB ? get(b, i, n) : bs;
    const vf r = binary_apply<F, vf>(va, vb, vf{});
    for (int k = 0; i + k < n; ++k) y[i + k] = r[k];
  }
}

// fmod in float32 without libm's exact bit loop: q = trunc(a/b) in float is
// the true quotient or one too large in magnitude (the division can round up
// onto the next integer, never down past one) while |a/b| < 2^23; a - q*b by
// one fma is then exact, and a result of the wrong sign means one b too many.
// Lanes outside that range (huge quotients, b = 0 or inf, NaN) are redone
// with fmodf.
inline vf fmod_v(vf x, vf d, vi& bad) {
  const vf q = x / d;
  const vi ok = (v_abs(q) < 8388608.0f) & (v_abs(d) < kInf);
  vf r = v_fnmadd(v_trunc(q), d, x);
  const vi wrong = (r != 0.0f) & ((r < 0.0f) != (x < 0.0f));
  r = wrong ? r + v_copysign(d, x) : r;
  bad |= ~ok;
  return v_copysign(ok ? r : splat<vf>(0.0f), x);
}

template <int SA, int SB>
void fmod_f32(const float* a, const float* b, float* y, int64_t n) {
  constexpr int64_t kBlock = 512;
  auto get = [n](const float* p, int S, int64_t i) -> vf {  // broadcast, full or padded vector
    if (S == 0) return splat<vf>(*p);
    if (i + W <= n) return load(p + i);
    vf v;
    for (int k = 0; k < W; ++k) v[k] = p[i + k < n ? i + k : n - 1];
    return v;
  };
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t m = n - i0 < kBlock ? n - i0 : kBlock;
    vi bad{};
    for (int64_t i = i0; i < i0 + m; i += W) {
      const vf r = fmod_v(get(a, SA, i), get(b, SB, i), bad);
      if (i + W <= n) store(y + i, r);
      else
        for (int k = 0; i + k < n; ++k) y[i + k] = r[k];
    }
    int any = 0;
    for (int k = 0; k < W; ++k) any |= bad[k];
    if (any)
      for (int64_t i = i0; i < i0 + m; ++i) {
        const float x = a[i * SA], d = b[i * SB];
        if (!(__builtin_fabsf(x / d) < 8388608.0f && __builtin_fabsf(d) < kInf)) y[i] = __builtin_fmodf(x, d);
      }
  }
}

template <int SA, int SB>
void fmod_f64(const double* a, const double* b, double* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = __builtin_fmod(a[i * SA], b[i * SB]);
}

template <class T, int SA, int SB>
void fmod_any(const T* a, const T* b, T* y, int64_t n) {
  if constexpr (sizeof(T) == 4) fmod_f32<SA, SB>(a, b, y, n);
  else fmod_f64<SA, SB>(a, b, y, n);
}

// remainder (sign of the divisor, Python's %) and floor division, both from
// fmod (PyTorch and NumPy derive them the same way, so results agree exactly).
template <BinaryFn F, class T, int SA, int SB>
void floor_family(const T* a, const T* b, T* y, int64_t n) {
  constexpr int64_t kBlock = 512;
  T mod[kBlock];
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t m = n - i0 < kBlock ? n - i0 : kBlock;
    const T* pa = a + i0 * SA;
    const T* pb = b + i0 * SB;
    fmod_any<T, SA, SB>(pa, pb, mod, m);
    T* py = y + i0;
    for (int64_t i = 0; i < m; ++i) {
      const T x = pa[i * SA], d = pb[i * SB], r = mod[i];
      const bool adjust = r != T(0) && ((d < T(0)) != (r < T(0)));
      if constexpr (F == BinaryFn::Remainder) {
        py[i] = adjust ? r + d : r;
      } else {  // DivFloor
        T q = (x - r) / d;
        q = adjust ? q - T(1) : q;
        const T fq = s_floor(q);
        const T rounded = q - fq > T(0.5) ? fq + T(1) : fq;
        const T zero = __builtin_copysign(T(0), x / d);
        py[i] = d == T(0) ? x / d : (q != T(0) ? rounded : zero);
      }
    }
  }
}

template <BinaryFn F, class T, int SA, int SB>
void binary_dispatch_fixed(const T* a, const T* b, T* y, int64_t n, T alpha) {
  if constexpr (F == BinaryFn::Fmod) fmod_any<T, SA, SB>(a, b, y, n);
  else if constexpr (F == BinaryFn::Remainder || F == BinaryFn::DivFloor) floor_family<F, T, SA, SB>(a, b, y, n);
  else if constexpr (is_vector_binary(F) && sizeof(T) == 4) binary_vec<F, SA, SB>(a, b, y, n);
  else binary_simple<F, T, SA, SB>(a, b, y, n, alpha);
}

template <BinaryFn F, class T>
void binary_kernel(const T* a, int64_t sa, const T* b, int64_t sb, T* y, int64_t n, const Params& p) {
  const T alpha = static_cast<T>(p.a);
  if (sa && sb) binary_dispatch_fixed<F, T, 1, 1>(a, b, y, n, alpha);
  else if (sa) binary_dispatch_fixed<F, T, 1, 0>(a, b, y, n, alpha);
  else if (sb) binary_dispatch_fixed<F, T, 0, 1>(a, b, y, n, alpha);
  else binary_dispatch_fixed<F, T, 0, 0>(a, b, y, n, alpha);
}

// Bool-valued classifiers: compare-to-mask loops GCC vectorizes.
template <PredFn P>
void pred_f32(const float* __restrict x, bool* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if constexpr (P == PredFn::IsNan) y[i] = v != v;
    else if constexpr (P == PredFn::IsInf) y[i] = __builtin_fabsf(v) == kInf;
    else if constexpr (P == PredFn::IsFinite) y[i] = __builtin_fabsf(v) < kInf;
    else y[i] = v == 0.0f;
  }
}

template <int... I>
Table make_table(std::integer_sequence<int, I...>) {
  Table t{};
  t.isa = TP_VEC_NAME;
  ((t.unary_f32[I] = &unary_f32<static_cast<UnaryFn>(I)>), ...);
  ((t.unary_f64[I] = &unary_f64<static_cast<UnaryFn>(I)>), ...);
  return t;
}
template <int... I>
void fill_binary(Table& t, std::integer_sequence<int, I...>) {
  ((t.binary_f32[I] = &binary_kernel<static_cast<BinaryFn>(I), float>), ...);
  ((t.binary_f64[I] = &binary_kernel<static_cast<BinaryFn>(I), double>), ...);
}

}  // namespace

const Table& get_table() {
  static const Table t = [] {
    Table r = make_table(std::make_integer_sequence<int, static_cast<int>(UnaryFn::Count)>());
    fill_binary(r, std::make_integer_sequence<int, static_cast<int>(BinaryFn::Count)>());
    r.pred_f32[0] = &pred_f32<PredFn::IsNan>;
    r.pred_f32[1] = &pred_f32<PredFn::IsInf>;
    r.pred_f32[2] = &pred_f32<PredFn::IsFinite>;
    r.pred_f32[3] = &pred_f32<PredFn::LogicalNot>;
#ifdef TP_VEC_SGEMM
    r.sgemm = &TP_VEC_SGEMM;
#endif
    return r;
  }();
  return t;
}

}  // namespace tp::vec::TP_VEC_NS
