#include "stax/codegen/cpp/prelude.h"

#include "core/error.h"

namespace tp::stax::codegen {

namespace {

// Always emitted: memory, elementwise helpers that need no constants.
// Templates cover scalar and vector types at once (a vector comparison is an
// integer vector and `m ? a : b` is a lane select), so max/min/relu/where work
// for float, double, i64, vf, vd, vl alike.
constexpr const char* kCore = R"TP(
static inline vf tp_load(const float* p) { vf v; __builtin_memcpy(&v, p, sizeof v); return v; }
static inline vd tp_load(const double* p) { vd v; __builtin_memcpy(&v, p, sizeof v); return v; }
static inline vl tp_load(const i64* p) { vl v; __builtin_memcpy(&v, p, sizeof v); return v; }
static inline void tp_store(float* p, vf v) { __builtin_memcpy(p, &v, sizeof v); }
static inline void tp_store(double* p, vd v) { __builtin_memcpy(p, &v, sizeof v); }
static inline void tp_store(i64* p, vl v) { __builtin_memcpy(p, &v, sizeof v); }
static inline vf tp_splat_vf(float x) { return x - vf{}; }
static inline vd tp_splat_vd(double x) { return x - vd{}; }
static inline vl tp_splat_vl(i64 x) { return x - vl{}; }
template <class M, class T> static inline T tp_where(M m, T a, T b) { return m ? a : b; }
template <class T> static inline T tp_neg(T x) { return -x; }
template <class T> static inline T tp_relu(T x) { return x < T{} ? T{} : x; }
// NaN-propagating (torch.maximum/minimum): take a when a wins or a is NaN.
template <class T> static inline T tp_max(T a, T b) { return (a > b) | (a != a) ? a : b; }
template <class T> static inline T tp_min(T a, T b) { return (a < b) | (a != a) ? a : b; }
static inline float tp_abs(float x) { return __builtin_fabsf(x); }
static inline double tp_abs(double x) { return __builtin_fabs(x); }
static inline i64 tp_abs(i64 x) { return x < 0 ? -x : x; }
static inline vf tp_abs(vf x) { return (vf)((vi)x & 0x7fffffff); }
static inline vd tp_abs(vd x) { return (vd)((vl)x & 0x7fffffffffffffffLL); }
static inline vl tp_abs(vl x) { return x < 0 ? -x : x; }
static inline float tp_sqrt(float x) { return __builtin_sqrtf(x); }
static inline double tp_sqrt(double x) { return __builtin_sqrt(x); }
// GCC vectorizes these lane loops to one vsqrtps / vsqrtpd.
static inline vf tp_sqrt(vf x) { for (int i = 0; i < TP_LF; ++i) x[i] = __builtin_sqrtf(x[i]); return x; }
static inline vd tp_sqrt(vd x) { for (int i = 0; i < TP_LD; ++i) x[i] = __builtin_sqrt(x[i]); return x; }
)TP";

// Welford states (Section 6.5): (n, m, q) = count, mean and M2 (the sum of
// squared deviations) of the values seen. The count is a scalar double even
// for a vector state: every lane of a vector accumulator takes one value per
// step, so all lanes have seen the same number. tp_wstep adds x with r = 1/n
// (n counted before the call, shared by the step's accumulators: one division
// per step, not per lane). tp_wmerge merges b into a by Chan, Golub and
// LeVeque's formula; tp_wlanes merges a vector's lanes pairwise (a fixed
// tree, so the result does not depend on anything but the data).
constexpr const char* kWelford = R"TP(
template <class V> static inline void tp_wstep(V& m, V& q, V x, double r) {
  V d = x - m;
  m = m + d * r;
  q = q + d * (x - m);
}
template <class V> static inline void tp_wmerge(double& na, V& ma, V& qa, double nb, V mb, V qb) {
  if (nb == 0) return;
  const double n = na + nb, f = nb / n;
  V d = mb - ma;
  ma = ma + d * f;
  qa = qa + qb + d * d * (na * f);
  na = n;
}
static inline void tp_wlanes(double n, vd m, vd q, double* mo, double* qo) {
  double mm[TP_LD], qq[TP_LD];
  for (int i = 0; i < TP_LD; ++i) { mm[i] = m[i]; qq[i] = q[i]; }
  for (int w = TP_LD / 2; w >= 1; w /= 2, n *= 2)
    for (int i = 0; i < w; ++i) {
      const double d = mm[i + w] - mm[i];
      mm[i] = mm[i] + d * 0.5;
      qq[i] = qq[i] + qq[i + w] + d * d * (n * 0.5);
    }
  *mo = mm[0];
  *qo = qq[0];
}
)TP";

// Masked tails (AVX-512F): the first bits of `m` select the live lanes.
// GCC's x86 builtins are not known not to throw: inside an OpenMP region (a
// must-not-throw region) one made the unit reference __gxx_personality_v0, and
// resolving it cost the link ~35M instructions (Example 1.1's symbolic unit at
// 8192x2048: ld 98M -> 133M). `nothrow` on the wrappers says they do not.
constexpr const char* kMasked = R"TP(
#define TP_NT __attribute__((nothrow))
static inline TP_NT vf tp_load_m(const float* p, unsigned m) { return __builtin_ia32_loadups512_mask(p, vf{}, (unsigned short)m); }
static inline TP_NT vd tp_load_m(const double* p, unsigned m) { return __builtin_ia32_loadupd512_mask(p, vd{}, (unsigned char)m); }
static inline TP_NT void tp_store_m(float* p, vf v, unsigned m) { __builtin_ia32_storeups512_mask(p, v, (unsigned short)m); }
static inline TP_NT void tp_store_m(double* p, vd v, unsigned m) { __builtin_ia32_storeupd512_mask(p, v, (unsigned char)m); }
// A mask's lanes under bit mask m only (the bytes past a tail are not read).
static inline vi tp_load_mask_m(const bool* p, unsigned m, vf) { vi v{}; for (int i = 0; i < TP_LF; ++i) if (m >> i & 1) v[i] = p[i] ? -1 : 0; return v; }
static inline vl tp_load_mask_m(const bool* p, unsigned m, vd) { vl v{}; for (int i = 0; i < TP_LD; ++i) if (m >> i & 1) v[i] = p[i] ? -1 : 0; return v; }
static inline vi tp_lanes_below(vf, i64 n) { vi io; for (int i = 0; i < TP_LF; ++i) io[i] = i; return io < (int)n; }
static inline vl tp_lanes_below(vd, i64 n) { vl io; for (int i = 0; i < TP_LD; ++i) io[i] = i; return io < n; }
// The same as a bit mask (0 <= n < 2^31), and a blend by one: m ? a : b per lane.
static inline TP_NT unsigned tp_mask_below(vf, i64 n) { return __builtin_ia32_cmpd512_mask(vi{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, (int)n - vi{}, 1, 0xffff); }
static inline TP_NT unsigned tp_mask_below(vd, i64 n) { return __builtin_ia32_cmpq512_mask(vl{0, 1, 2, 3, 4, 5, 6, 7}, n - vl{}, 1, 0xff); }
static inline TP_NT vf tp_sel_m(vf a, vf b, unsigned m) { return __builtin_ia32_blendmps_512_mask(b, a, (unsigned short)m); }
static inline TP_NT vd tp_sel_m(vd a, vd b, unsigned m) { return __builtin_ia32_blendmpd_512_mask(b, a, (unsigned char)m); }
)TP";

// vf: x = 2^k * e^r, |r| <= ln2/2 (Cody-Waite), Cephes expf polynomial. The
// scale 2^k is applied as two factors so results in the denormal range round
// once (gradual underflow) and k = 128 still overflows to inf.
// vd: same reduction, degree-13 Taylor polynomial (truncation < 2^-57).
constexpr const char* kExp = R"TP(
static inline float tp_exp(float x) { return __builtin_expf(x); }
static inline double tp_exp(double x) { return __builtin_exp(x); }
static inline vf tp_exp(vf x) {
  x = x < -104.0f ? -104.0f : x;  // exp(-104) < 2^-150 rounds to 0; NaN passes
  x = x > 89.0f ? 89.0f : x;      // exp(89) > FLT_MAX
  vf t = x * 1.44269504088896341f + 12582912.0f;  // 1.5*2^23: round to integer
  vf n = t - 12582912.0f;
  vi k = (vi)t - 0x4b400000;
  vf r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  vf p = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
           4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  vi h = k >> 1;
  return p * (vf)((h + 127) << 23) * (vf)((k - h + 127) << 23);
}
static inline vd tp_exp(vd x) {
  x = x < -746.0 ? -746.0 : x;
  x = x > 710.0 ? 710.0 : x;
  vd t = x * 1.4426950408889634 + 6755399441055744.0;  // 1.5*2^52
  vd n = t - 6755399441055744.0;
  vl k = (vl)t - 0x4338000000000000LL;
  vd r = x - n * 6.93145751953125e-1;
  r = r - n * 1.42860682030941723212e-6;
  vd p = 1.6059043836821613e-10 * r + 2.08767569878681e-09;
  p = p * r + 2.505210838544172e-08; p = p * r + 2.755731922398589e-07;
  p = p * r + 2.7557319223985893e-06; p = p * r + 2.48015873015873e-05;
  p = p * r + 1.984126984126984e-04; p = p * r + 1.388888888888889e-03;
  p = p * r + 8.333333333333333e-03; p = p * r + 4.1666666666666664e-02;
  p = p * r + 1.6666666666666666e-01; p = p * r + 0.5;
  p = p * (r * r) + r + 1.0;
  vl h = k >> 1;
  return p * (vd)((h + 1023) << 52) * (vd)((k - h + 1023) << 52);
}
)TP";

// x = 2^e * m, m in [sqrt(1/2), sqrt(2)) by integer arithmetic on the bits
// (denormals pre-scaled), then log(m) by polynomial (Cephes logf for vf,
// fdlibm log for vd) + e*ln2 in two parts; special values fixed up at the end.
constexpr const char* kLog = R"TP(
static inline float tp_log(float x) { return __builtin_logf(x); }
static inline double tp_log(double x) { return __builtin_log(x); }
static inline vf tp_log(vf x) {
  vi den = x < 1.17549435e-38f;
  vi b = (vi)(den ? x * 8388608.0f : x) - 0x3f3504f3;  // bits(sqrt(1/2))
  vf e = __builtin_convertvector((b >> 23) - (den & 23), vf);
  vf f = (vf)((b & 0x007fffff) + 0x3f3504f3) - 1.0f;
  vf z = f * f;
  vf p = ((((((((7.0376836292e-2f * f - 1.1514610310e-1f) * f + 1.1676998740e-1f) * f -
               1.2420140846e-1f) * f + 1.4249322787e-1f) * f - 1.6668057665e-1f) * f +
            2.0000714765e-1f) * f - 2.4999993993e-1f) * f + 3.3333331174e-1f) * f * z;
  p = p + e * -2.12194440e-4f - 0.5f * z;
  vf r = f + p + e * 0.693359375f;
  r = x == __builtin_inff() ? x : r;
  r = x == 0.0f ? -__builtin_inff() : r;
  return x >= 0.0f ? r : __builtin_nanf("");
}
static inline vd tp_log(vd x) {
  vl den = x < 2.2250738585072014e-308;
  vl b = (vl)(den ? x * 18014398509481984.0 : x) - 0x3fe6a09e667f3bcdLL;  // 2^54
  vd e = __builtin_convertvector((b >> 52) - (den & 54), vd);
  vd f = (vd)((b & 0x000fffffffffffffLL) + 0x3fe6a09e667f3bcdLL) - 1.0;
  vd hf = 0.5 * f * f, s = f / (2.0 + f), z = s * s, w = z * z;
  vd R = z * (6.666666666666735130e-01 + w * (2.857142874366239149e-01 +
              w * (1.818357216161805012e-01 + w * 1.479819860511658591e-01))) +
         w * (3.999999999940941908e-01 + w * (2.222219843214978396e-01 +
              w * 1.531383769920937332e-01));
  vd r = e * 6.93147180369123816490e-01 - ((hf - (s * (hf + R) + e * 1.90821492927058770002e-10)) - f);
  r = x == __builtin_inf() ? x : r;
  r = x == 0.0 ? -__builtin_inf() : r;
  return x >= 0.0 ? r : __builtin_nan("");
}
)TP";

// |x| < 0.625: odd polynomial / rational (Cephes), accurate near 0;
// otherwise 1 - 2/(exp(2|x|) + 1) with the sign of x (saturates to +-1).
constexpr const char* kTanh = R"TP(
static inline float tp_tanh(float x) { return __builtin_tanhf(x); }
static inline double tp_tanh(double x) { return __builtin_tanh(x); }
static inline vf tp_tanh(vf x) {
  vf a = tp_abs(x), z = a * a;
  vf r = a + a * z * ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
                       1.33314422036e-1f) * z - 3.33332819422e-1f);
  r = a < 0.625f ? r : 1.0f - 2.0f / (tp_exp(a + a) + 1.0f);
  return (vf)((vi)r | ((vi)x & (-0x7fffffff - 1)));  // sign of x (tanh(-0) = -0)
}
static inline vd tp_tanh(vd x) {
  vd a = tp_abs(x), z = a * a;
  vd P = (-9.64399179425052238628e-1 * z - 9.92877231001918586564e1) * z - 1.61468768441708447952e3;
  vd Q = ((z + 1.12811678491632931402e2) * z + 2.23548839060100448583e3) * z + 4.84406305325125486048e3;
  vd r = a + a * z * (P / Q);
  r = a < 0.625 ? r : 1.0 - 2.0 / (tp_exp(a + a) + 1.0);
  return (vd)((vl)r | ((vl)x & (-0x7fffffffffffffffLL - 1)));
}
)TP";

// e = exp(-|x|) never overflows: sigmoid = (x < 0 ? e : 1) / (1 + e).
constexpr const char* kSigmoid = R"TP(
static inline float tp_sigmoid(float x) { float e = __builtin_expf(-__builtin_fabsf(x)); return (x < 0.0f ? e : 1.0f) / (1.0f + e); }
static inline double tp_sigmoid(double x) { double e = __builtin_exp(-__builtin_fabs(x)); return (x < 0.0 ? e : 1.0) / (1.0 + e); }
static inline vf tp_sigmoid(vf x) { vf e = tp_exp(-tp_abs(x)); return (x < 0.0f ? e : 1.0f) / (1.0f + e); }
static inline vd tp_sigmoid(vd x) { vd e = tp_exp(-tp_abs(x)); return (x < 0.0 ? e : 1.0) / (1.0 + e); }
)TP";

// float erfc (tp_erfc on float and vf): ops/vec/erfc_f32.inc, the text eager's
// AVX2 / AVX-512 kernels compile too, so compiled and eager erfc agree bit for
// bit (the scalar float form is lane 0 of the vector one, as eager pads its
// tails into a vector). The file needs one-rounding FMAs: 32- and 64-byte
// vectors only; 16-byte kernels keep libmvec / libm like the other functions.
#define TP_ERFC_SOURCE(...) #__VA_ARGS__
constexpr const char* kErfcF32 =
#include "ops/vec/erfc_f32.inc"
    ;
#undef TP_ERFC_SOURCE

void emit_erfc(std::string& s, int vector_bytes) {
  s += vector_bytes == 64
           ? "static inline vf tp_erfc_fma(vf a, vf b, vf c) { return __builtin_ia32_vfmaddps512_mask(a, b, c, "
             "(unsigned short)-1, 4); }\n"
           : "static inline vf tp_erfc_fma(vf a, vf b, vf c) { return __builtin_ia32_vfmaddps256(a, b, c); }\n";
  s += "static inline vf tp_erfc_splat(float v) { return tp_splat_vf(v); }\n";
  s += kErfcF32;
  s += "\nstatic inline vf tp_erfc(vf x) { return tp_erfc_v(x); }\n"
       "static inline float tp_erfc(float x) { return tp_erfc_v(tp_splat_vf(x))[0]; }\n"
       "static inline double tp_erfc(double x) { return __builtin_erfc(x); }\n"
       "static inline vd tp_erfc(vd v) { for (int i = 0; i < TP_LD; ++i) v[i] = __builtin_erfc(v[i]); return v; }\n";
}

// The erf gelu's derivative, Phi(x) + x phi(x) = erfc(-x/sqrt2)/2 + x e^(-x^2/2)/sqrt(2 pi),
// in one function (CallOp::GeluGrad, formed by stax/backend/gelu_grad_fusion.cpp
// from the ops the derivative formula emits). erfc's argument is the same
// rounded product the unfused formula computes, so the Phi part has the same
// bits. erfc already computes exp(-a^2) = 2^-n (1 + em1) for a = |fl(x c)|,
// c = fl(1/sqrt2); a^2 differs from x^2/2 by d = x^2/2 - a^2 (~2^-22 relative),
// taken exactly from both squares' FMA remainders, and e^-d = 1 - d to 2^-40
// (|d| < 3e-5 where erfc does not clamp). So phi costs a few FMAs instead of
// a second exp. Where erfc clamps (|a| > 10.125, |x| > 14.3, where x phi(x) is
// subnormal or 0) and for infinities, the block takes the unfused formula's
// exact sequence of roundings instead (a branch, rarely taken on real data).
void emit_gelu_grad(std::string& s, int vector_bytes) {
  s += vector_bytes == 64
           ? "static inline int tp_gg_any_gt(vf a, float b) { return __builtin_ia32_cmpps512_mask(a, tp_splat_vf(b), "
             "14, (unsigned short)-1, 4) != 0; }\n"
           : "static inline int tp_gg_any_gt(vf a, float b) { return __builtin_ia32_movmskps256((vf)(a > b)) != 0; "
             "}\n";
  s += R"TP(static inline vf tp_gelu_grad(vf x) {
  vf y = x * -0.707106769f;
  __asm__("" : "+v"(y));
  vf em1, kf;
  const vf cdf2 = tp_erfc_ex(y, em1, kf);
  const vf a = tp_abs(y);
  const vf u = a * a, ul = tp_erfc_fma(a, a, -u);
  vf xx = x * x;
  __asm__("" : "+v"(xx));
  const vf xl = tp_erfc_fma(x, x, -xx);
  const vf d = (0.5f * xx - u) + (0.5f * xl - ul);
  const vf e = 1.0f + em1;
  vf pdf = (x * 0.398942292f) * tp_erfc_fma(-e, d, e);
  pdf = pdf * (vf)((191 - ((vi)kf - 0x4b400000)) << 23);
  __asm__("" : "+v"(pdf));
  pdf = pdf * 5.42101086e-20f;
  __asm__("" : "+v"(pdf));
  if (__builtin_expect(tp_gg_any_gt(a, 10.125f), 0)) {
    vf q = tp_exp(xx * -0.5f) * 0.398942292f;
    __asm__("" : "+v"(q));
    q = x * q;
    __asm__("" : "+v"(q));
    pdf = a > 10.125f ? q : pdf;
  }
  return cdf2 * 0.5f + pdf;
}
static inline float tp_gelu_grad(float x) { return tp_gelu_grad(tp_splat_vf(x))[0]; }
static inline double tp_gelu_grad(double x) {
  return __builtin_erfc(x * -0.70710678118654752440) * 0.5 + x * (__builtin_exp(x * x * -0.5) * 0.39894228040143267794);
}
static inline vd tp_gelu_grad(vd v) { for (int i = 0; i < TP_LD; ++i) v[i] = tp_gelu_grad(v[i]); return v; }
)TP";
}

// 16-bit floats in memory (the printer keeps them in float registers): exact
// widening, and rounding to nearest even in integer arithmetic, so neither
// the compiler's _Float16/__bf16 nor F16C is needed. bfloat16 is the top half
// of a float (a NaN stays a quiet NaN of its sign). float16: normal results
// rebias the exponent and round the 13 dropped bits; |x| < 2^-14 (subnormal
// or zero) rounds by one float addition of 0.5, whose ulp 2^-24 is the half's
// subnormal step (round-to-nearest-even by the FPU); >= 65520 overflows to inf.
constexpr const char* kHalf16 = R"TP(
typedef unsigned short tp_bf16;
typedef unsigned short tp_half;
static inline unsigned tp_f2u(float f) { unsigned u; __builtin_memcpy(&u, &f, 4); return u; }
static inline float tp_u2f(unsigned u) { float f; __builtin_memcpy(&f, &u, 4); return f; }
static inline float tp_from_bf16(tp_bf16 h) { return tp_u2f((unsigned)h << 16); }
static inline tp_bf16 tp_to_bf16(float f) {
  unsigned u = tp_f2u(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (tp_bf16)((u >> 16) | 0x40u);
  return (tp_bf16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static inline float tp_round_bf16(float f) { return tp_from_bf16(tp_to_bf16(f)); }
static inline float tp_from_half(tp_half h) {
  const unsigned sign = (unsigned)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return tp_u2f(sign | 0x7f800000u | (m << 13));
  if (e) return tp_u2f(sign | ((e + 112u) << 23) | (m << 13));
  const float f = (float)m * 5.9604644775390625e-8f;  // m * 2^-24, exact
  return sign ? -f : f;
}
static inline tp_half tp_to_half(float f) {
  const unsigned u = tp_f2u(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (tp_half)(sign | 0x7e00u | ((a >> 13) & 0x1ffu));
  if (a >= 0x477ff000u) return (tp_half)(sign | 0x7c00u);
  if (a < 0x38800000u) {
    float r = tp_u2f(a) + 0.5f;
    __asm__("" : "+v"(r));  // the addition must round here, not be folded away
    return (tp_half)(sign | (tp_f2u(r) - 0x3f000000u));
  }
  const unsigned m = a - 0x38000000u;
  return (tp_half)(sign | ((m + 0xfffu + ((m >> 13) & 1u)) >> 13));
}
static inline float tp_round_half(float f) { return tp_from_half(tp_to_half(f)); }
// Vector forms (float lanes, vf): bfloat16 as whole-vector integer operations,
// float16 lane by lane through the scalar conversions.
typedef unsigned tp_vu __attribute__((vector_size(sizeof(vf))));
typedef unsigned short tp_vh __attribute__((vector_size(sizeof(vf) / 2)));
static inline vf tp_load_bf16(const tp_bf16* p) {
  tp_vh h;
  __builtin_memcpy(&h, p, sizeof h);
  return (vf)(__builtin_convertvector(h, tp_vu) << 16);
}
static inline vf tp_round_bf16(vf x) {
  const tp_vu u = (tp_vu)x, r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  const tp_vu nan = (tp_vu)((u & 0x7fffffffu) > 0x7f800000u);
  return (vf)((r & ~nan) | (((u & 0xffff0000u) | 0x400000u) & nan));
}
static inline void tp_store_bf16(tp_bf16* p, vf x) {
  const tp_vh h = __builtin_convertvector((tp_vu)tp_round_bf16(x) >> 16, tp_vh);
  __builtin_memcpy(p, &h, sizeof h);
}
static inline vf tp_load_half(const tp_half* p) { vf v; for (int i = 0; i < TP_LF; ++i) v[i] = tp_from_half(p[i]); return v; }
static inline vf tp_round_half(vf x) { for (int i = 0; i < TP_LF; ++i) x[i] = tp_round_half(x[i]); return x; }
static inline void tp_store_half(tp_half* p, vf x) { for (int i = 0; i < TP_LF; ++i) p[i] = tp_to_half(x[i]); }
)TP";

// Python // and % (floor division; the remainder takes the divisor's sign).
// b == -1 is special-cased so INT64_MIN // -1 wraps instead of trapping.
constexpr const char* kFloorDiv = R"TP(
static inline i64 tp_floordiv(i64 a, i64 b) {
  if (b == -1) return (i64)(0ULL - (unsigned long long)a);
  i64 q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline i64 tp_mod(i64 a, i64 b) {
  if (b == -1) return 0;
  i64 r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
)TP";

// One horizontal reduction: a butterfly over the lanes (lane i meets lane
// i ^ w for w = lanes/2 .. 1), i.e. a balanced pairwise tree.
void horizontal(std::string& s, const char* scalar, const char* name, const char* vt,
                const char* mt, int lanes, const char* combine) {
  // "+" and "*" combine with the vector operator, anything else is a function.
  const bool infix = combine[0] == '+' || combine[0] == '*';
  s.append("static inline ").append(scalar).append(" ").append(name).append("(").append(vt);
  s.append(" v) {");
  for (int w = lanes / 2; w >= 1; w /= 2) {
    if (infix) s.append(" v = v ").append(combine).append(" ");
    else s.append(" v = ").append(combine).append("(v, ");
    s.append("__builtin_shuffle(v, ").append(mt).append("{");
    for (int i = 0; i < lanes; ++i) s.append(i ? "," : "").append(std::to_string(i ^ w));
    s.append(infix ? "});" : "}));");
  }
  s.append(" return v[0]; }\n");
}

}  // namespace

namespace {

// Scalar bodies of the libm-backed functions: `F` is the builtin's suffix
// ("f" for float, "" for double), T the type. x (and y) are the arguments.
struct LibmFn {
  const char* name;
  int arity;
  const char* body;  // an expression
};
constexpr LibmFn kLibm[] = {
    {"sin", 1, "__builtin_sin@(x)"},     {"cos", 1, "__builtin_cos@(x)"},     {"tan", 1, "__builtin_tan@(x)"},
    {"asin", 1, "__builtin_asin@(x)"},   {"acos", 1, "__builtin_acos@(x)"},   {"atan", 1, "__builtin_atan@(x)"},
    {"sinh", 1, "__builtin_sinh@(x)"},   {"cosh", 1, "__builtin_cosh@(x)"},   {"asinh", 1, "__builtin_asinh@(x)"},
    {"acosh", 1, "__builtin_acosh@(x)"}, {"atanh", 1, "__builtin_atanh@(x)"}, {"exp2", 1, "__builtin_exp2@(x)"},
    {"log2", 1, "__builtin_log2@(x)"},   {"log10", 1, "__builtin_log10@(x)"}, {"erfc", 1, "__builtin_erfc@(x)"},
    {"floor", 1, "__builtin_floor@(x)"}, {"ceil", 1, "__builtin_ceil@(x)"},   {"trunc", 1, "__builtin_trunc@(x)"},
    // rint in the default rounding mode (to nearest, ties to even), as eager.
    {"round", 1, "__builtin_rint@(x)"},
    {"frac", 1, "x - __builtin_trunc@(x)"},
    {"atan2", 2, "__builtin_atan2@(x, y)"}, {"hypot", 2, "__builtin_hypot@(x, y)"},
    {"fmod", 2, "__builtin_fmod@(x, y)"}, {"pow", 2, "__builtin_pow@(x, y)"},
    // fmod's result moved to the divisor's sign (PyTorch / Python %).
    {"remainder", 2, "__extension__({ __typeof__(x) r = __builtin_fmod@(x, y); "
                     "(r != 0 && ((r < 0) != (y < 0))) ? r + y : r; })"},
};

const LibmFn* find_libm(const std::string& fn) {
  for (auto& f : kLibm)
    if (fn == f.name) return &f;
  return nullptr;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

void emit_libm(std::string& s, const LibmFn& f, const std::string& mvec) {
  const std::string name = std::string("tp_") + f.name;
  for (int dbl = 0; dbl < 2; ++dbl) {
    const std::string t = dbl ? "double" : "float", vt = dbl ? "vd" : "vf", lanes = dbl ? "TP_LD" : "TP_LF";
    const std::string body = replace_all(f.body, "@", dbl ? "" : "f");
    const std::string params = f.arity == 1 ? t + " x" : t + " x, " + t + " y";
    s += "static inline " + t + " " + name + "(" + params + ") { return " + body + "; }\n";
    if (!dbl && !mvec.empty()) {  // float vectors: libmvec, as eager's float32 kernels
      const std::string vparams = f.arity == 1 ? "vf a" : "vf a, vf b";
      s += "extern \"C\" vf " + mvec + "(" + (f.arity == 1 ? "vf" : "vf, vf") + ");\n";
      s += "static inline vf " + name + "(" + vparams + ") { return " + mvec + (f.arity == 1 ? "(a)" : "(a, b)") +
           "; }\n";
    } else if (f.arity == 1)
      s += "static inline " + vt + " " + name + "(" + vt + " v) { for (int i = 0; i < " + lanes + "; ++i) v[i] = " +
           name + "(v[i]); return v; }\n";
    else
      s += "static inline " + vt + " " + name + "(" + vt + " a, " + vt + " b) { for (int i = 0; i < " + lanes +
           "; ++i) a[i] = " + name + "(a[i], b[i]); return a; }\n";
  }
}

}  // namespace

bool libm_function(const std::string& fn, int* arity) {
  const LibmFn* f = find_libm(fn);
  if (f && arity) *arity = f->arity;
  return f != nullptr;
}

std::string libmvec_symbol(const std::string& fn, int vector_bytes) {
  // Eager's float32 vector kernels call libmvec for these (csrc/ops/vec); pow
  // has its own polynomial there, and the rounding functions are instructions.
  static const char* const kUnary[] = {"sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
                                       "asinh", "acosh", "atanh", "exp2", "log2", "log10", "erfc"};
  static const char* const kBinary[] = {"atan2", "hypot"};
  if (fn == "erfc" && vector_bytes >= 32) return "";  // own polynomial (emit_erfc), as eager's
  const char isa = vector_bytes == 64 ? 'e' : vector_bytes == 32 ? 'd' : 'b';
  const std::string prefix = std::string("_ZGV") + isa + "N" + std::to_string(vector_bytes / 4);
  for (const char* u : kUnary)
    if (fn == u) return prefix + "v_" + fn + "f";
  for (const char* b : kBinary)
    if (fn == b) return prefix + "vv_" + fn + "f";
  return "";
}

int lanes_f32(int vector_bytes) { return vector_bytes / 4; }
int lanes_f64(int vector_bytes) { return vector_bytes / 8; }
int lanes_i64(int vector_bytes) { return vector_bytes / 8; }

namespace {

// A saved bool mask (where(mask, a, b) in a backward reads relu's `x > 0`) as
// the lane masks a vector comparison gives (all bits set where true); the
// unused argument picks the selected values' type. Exactly one byte per lane is
// read (the last vector of a buffer ends at its last byte). GCC 12 widens a
// byte vector with __builtin_convertvector byte by byte through general
// registers, so AVX2 / AVX-512 use the zero-extending move (vpmovzxbd/bq).
void emit_mask_load(std::string& s, int vb) {
  s += "typedef char tp_qb __attribute__((vector_size(16)));\n"
       "typedef long long tp_q2 __attribute__((vector_size(16)));\n"
       "typedef int tp_d4 __attribute__((vector_size(16)));\n"
       "static inline tp_qb tp_mask_bytes16(const bool* p) { tp_qb b; __builtin_memcpy(&b, p, 16); return b; }\n"
       "static inline tp_qb tp_mask_bytes8(const bool* p) { i64 x; __builtin_memcpy(&x, p, 8); return (tp_qb)(tp_q2){x, 0}; }\n"
       "static inline tp_qb tp_mask_bytes4(const bool* p) { int x; __builtin_memcpy(&x, p, 4); return (tp_qb)(tp_d4){x, 0, 0, 0}; }\n";
  if (vb == 64) {
    s += "static inline vi tp_load_mask(const bool* p, vf) { return __builtin_ia32_pmovzxbd512_mask(tp_mask_bytes16(p), vi{}, 0xffff) != 0; }\n"
         "static inline vl tp_load_mask(const bool* p, vd) { return __builtin_ia32_pmovzxbq512_mask(tp_mask_bytes8(p), vl{}, 0xff) != 0; }\n";
  } else if (vb == 32) {
    s += "static inline vi tp_load_mask(const bool* p, vf) { return __builtin_ia32_pmovzxbd256(tp_mask_bytes8(p)) != 0; }\n"
         "static inline vl tp_load_mask(const bool* p, vd) { return __builtin_ia32_pmovzxbq256(tp_mask_bytes4(p)) != 0; }\n";
  } else {  // SSE2 only: no zero-extending move
    s += "static inline vi tp_load_mask(const bool* p, vf) { vi m; for (int i = 0; i < TP_LF; ++i) m[i] = p[i]; return m != 0; }\n"
         "static inline vl tp_load_mask(const bool* p, vd) { vl m; for (int i = 0; i < TP_LD; ++i) m[i] = p[i]; return m != 0; }\n";
  }
}

// vdw: the double values of float lanes (arithmetic on floats widened to
// double, as eager's add(alpha=) does), as many doubles as a vf has floats:
// two vd registers. A struct of the two, not one twice-wide GCC vector (vd2):
// GCC kept those on the stack, and no asm operand takes two registers. tp_keep
// makes a product opaque, as the empty asm does for one register. The
// conversions go through vd2 all the same: GCC 12 converts one whole vf to vd2
// in two instructions, a half vf to a vd in four.
void emit_wide_double(std::string& s, int vb) {
  const int ld = lanes_f64(vb);
  auto indices = [](int from, int count) {  // appended, not operator+: GCC 12 warns falsely (-Wrestrict)
    std::string out;
    for (int i = 0; i < count; ++i) {
      if (i) out += ", ";
      out += std::to_string(from + i);
    }
    return out;
  };
  const std::string lo = indices(0, ld), hi = indices(ld, ld), all = indices(0, 2 * ld);
  s += "typedef double vd2 __attribute__((vector_size(" + std::to_string(2 * vb) + ")));\n"
       "struct vdw { vd lo, hi; };\n"
       "static inline vdw operator+(vdw a, vdw b) { return {a.lo + b.lo, a.hi + b.hi}; }\n"
       "static inline vdw operator-(vdw a, vdw b) { return {a.lo - b.lo, a.hi - b.hi}; }\n"
       "static inline vdw operator*(vdw a, vdw b) { return {a.lo * b.lo, a.hi * b.hi}; }\n"
       "static inline vdw operator/(vdw a, vdw b) { return {a.lo / b.lo, a.hi / b.hi}; }\n"
       "static inline vdw operator-(vdw a) { return {-a.lo, -a.hi}; }\n"
       "static inline vdw tp_splat_vdw(double x) { return {x - vd{}, x - vd{}}; }\n"
       "static inline void tp_keep(vdw* x) { __asm__(\"\" : \"+v\"(x->lo), \"+v\"(x->hi)); }\n"
       "static inline vdw tp_widen(vf x) {\n"
       "  vd2 w = __builtin_convertvector(x, vd2);\n"
       "  return {__builtin_shufflevector(w, w, " + lo + "), __builtin_shufflevector(w, w, " + hi + ")};\n"
       "}\n"
       "static inline vf tp_narrow(vdw x) { return __builtin_convertvector(__builtin_shufflevector(x.lo, x.hi, " + all +
           "), vf); }\n";
}

}  // namespace

std::string cpp_prelude(const PreludeRequest& req) {
  const int vb = req.vector_bytes;
  TP_CHECK(vb == 16 || vb == 32 || vb == 64, ValueError,
           "cpp_prelude: vector_bytes must be 16, 32 or 64, got ", vb);
  const std::string n = std::to_string(vb);
  std::string s;
  s.reserve(8192);
  s += "// Stax kernel prelude (vector_bytes = " + n + ")\n";
  s += "typedef long long i64;\n";
  s += "typedef float vf __attribute__((vector_size(" + n + ")));\n";
  s += "typedef double vd __attribute__((vector_size(" + n + ")));\n";
  s += "typedef int vi __attribute__((vector_size(" + n + ")));\n";
  s += "typedef long long vl __attribute__((vector_size(" + n + ")));\n";

  s += "enum { TP_LF = " + std::to_string(lanes_f32(vb)) +
       ", TP_LD = " + std::to_string(lanes_f64(vb)) + " };";
  s += kCore;
  s += kHalf16;
  emit_wide_double(s, vb);
  emit_mask_load(s, vb);
  const int lf = lanes_f32(vb), ld = lanes_f64(vb);
  horizontal(s, "float", "tp_hsum", "vf", "vi", lf, "+");
  horizontal(s, "float", "tp_hprod", "vf", "vi", lf, "*");
  horizontal(s, "float", "tp_hmax", "vf", "vi", lf, "tp_max");
  horizontal(s, "float", "tp_hmin", "vf", "vi", lf, "tp_min");
  horizontal(s, "double", "tp_hsum", "vd", "vl", ld, "+");
  horizontal(s, "double", "tp_hprod", "vd", "vl", ld, "*");
  horizontal(s, "double", "tp_hmax", "vd", "vl", ld, "tp_max");
  horizontal(s, "double", "tp_hmin", "vd", "vl", ld, "tp_min");
  horizontal(s, "i64", "tp_hsum", "vl", "vl", ld, "+");
  horizontal(s, "i64", "tp_hprod", "vl", "vl", ld, "*");
  horizontal(s, "i64", "tp_hmax", "vl", "vl", ld, "tp_max");
  horizontal(s, "i64", "tp_hmin", "vl", "vl", ld, "tp_min");
  if (req.need_exp || req.need_tanh || req.need_sigmoid || req.need_gelu_grad) s += kExp;
  if (req.need_log) s += kLog;
  if (req.need_tanh) s += kTanh;
  if (req.need_sigmoid) s += kSigmoid;
  if (req.need_welford) s += kWelford;
  if (req.need_masked) {
    TP_CHECK(vb == 64, ValueError, "cpp_prelude: masked vector tails need vector_bytes 64 (AVX-512), got ", vb);
    s += kMasked;
  }
  if (req.need_floordiv) s += kFloorDiv;
  if (req.need_philox) s += philox_prelude();
  if (req.need_gelu_grad)
    TP_CHECK(vb >= 32, ValueError, "cpp_prelude: tp_gelu_grad needs vector_bytes 32 or 64 (FMA), got ", vb);
  bool have_erfc = false;
  for (auto& fn : req.libm)
    if (const LibmFn* f = find_libm(fn)) {
      if (fn == "erfc" && vb >= 32) {
        emit_erfc(s, vb);
        have_erfc = true;
        continue;
      }
      auto m = req.libmvec.find(fn);
      emit_libm(s, *f, m == req.libmvec.end() ? std::string() : m->second);
    }
  if (req.need_gelu_grad) {
    if (!have_erfc) emit_erfc(s, vb);
    emit_gelu_grad(s, vb);
  }
  return s;
}

}  // namespace tp::stax::codegen
