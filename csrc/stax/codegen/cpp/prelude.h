// The prelude of every generated CPU kernel: the text that goes at the top of
// the one C++ translation unit Stax compiles per region. It includes no headers
// (a TU including <immintrin.h> costs ~1 s of g++ time, the prelude ~0.1 s):
// everything is GCC vector extensions and __builtin_* functions, and only the
// helper groups a kernel asks for are emitted.
//
// What the text defines (all `static inline`, names fixed, the code generator
// prints calls to them):
//   typedef long long i64;  vector types vf (float), vd (double), vi (int32,
//   as wide as vf: mask type of vf comparisons), vl (long long, as wide as vd:
//   mask type of vd comparisons and the i64 vector), each vector_bytes wide;
//   enum constants TP_LF / TP_LD: lanes of vf / vd.
//   tp_load(const float*|const double*|const i64*) -> vf|vd|vl (unaligned),
//   tp_store(p, v), tp_splat_vf(float), tp_splat_vd(double), tp_splat_vl(i64).
//   tp_neg, tp_abs, tp_relu, tp_max, tp_min (NaN-propagating like
//   torch.maximum), tp_where(mask, a, b) (bool mask for scalars, vi / vl mask
//   for vectors): float, double, i64, vf, vd, vl. tp_sqrt: float, double, vf,
//   vd (one vsqrtps / vsqrtpd). Vector comparisons are the plain operators
//   (`a < b` is a vi / vl mask); vector (op) scalar works for + - * / < etc.
//   tp_hsum / tp_hmax / tp_hmin (vf) -> float, (vd) -> double, (vl) -> i64:
//   pairwise tree over the lanes (hmax/hmin NaN-propagating).
//   need_exp:      tp_exp      (float, double, vf, vd)
//   need_log:      tp_log      (float, double, vf, vd)
//   need_tanh:     tp_tanh     (float, double, vf, vd)   (pulls in exp)
//   need_sigmoid:  tp_sigmoid  (float, double, vf, vd)   (pulls in exp)
//   need_welford:  tp_wstep(m, q, x, r), tp_wmerge(na, ma, qa, nb, mb, qb),
//                  tp_wlanes(n, vd m, vd q, double* m, double* q): Welford
//                  (count, mean, M2) states on double / vd, see prelude.cpp
//   need_masked:   tp_load_m(p, unsigned mask) -> vf|vd (dead lanes 0),
//                  tp_store_m(p, v, mask), tp_lanes_below(vf{}|vd{}, n) -> vi|vl
//                  (lanes < n true): AVX-512 masked moves, vector_bytes 64 only
//   need_floordiv: tp_floordiv(i64, i64), tp_mod(i64, i64) (Python semantics)
//   need_gelu_grad: tp_gelu_grad(x) = Phi(x) + x phi(x), the derivative of the
//                  erf gelu (float, double, vf, vd; 32- and 64-byte vectors):
//                  the float form reuses erfc's internal exp(-x^2/2), see prelude.cpp
//   need_philox:   tp_philox_uniform_f32 / _f64, tp_philox_normal_f32 / _f64
//                  (i64 key, i64 first counter, i64 flat index) -> float / double:
//                  element i of eager's rand / randn (scalar only)
//   libm (each name listed, see libm_function): tp_<name> on float, double, vf,
//     vd: sin cos tan asin acos atan sinh cosh asinh acosh atanh exp2 log2 log10
//     erfc floor ceil trunc round (half to even) frac (x - trunc x); binary
//     atan2 hypot fmod remainder (the divisor's sign) pow. Scalars call the GCC
//     builtin (a libm call the loaded kernel resolves from the process); the
//     vector forms apply it lane by lane for now (no own polynomial yet).
//     Float erfc at 32 / 64 bytes: ops/vec/erfc_f32.inc (eager's own float
//     erfc, bit for bit; the scalar float form is its lane 0).
// Scalar transcendental overloads call libm (__builtin_expf etc.); the vector
// ones are own range reduction + polynomial code, identical on every ISA up to
// FMA contraction (measured: exp/log/tanh within 1 ulp of the correctly
// rounded result, sigmoid within 2; libm's special values; gradual underflow).
#pragma once
#include <map>
#include <set>
#include <string>

namespace tp::stax::codegen {

struct PreludeRequest {
  int vector_bytes = 64;  // 16 (SSE2 baseline), 32 (avx2) or 64 (avx512)
  bool need_exp = false, need_log = false, need_tanh = false, need_sigmoid = false;
  bool need_masked = false;    // tp_load_m / tp_store_m / tp_lanes_below (masked tails; vector_bytes 64 only)
  bool need_welford = false;   // tp_wstep / tp_wmerge / tp_wlanes (ReduceOp::Welford)
  bool need_floordiv = false;  // tp_floordiv / tp_mod on long long, Python floor semantics
  bool need_philox = false;    // tp_philox_{uniform,normal}_{f32,f64}(key, first, i): scalar, see prelude_philox.cpp
  bool need_gelu_grad = false; // tp_gelu_grad (float, double, vf, vd): vector_bytes 32 or 64 only (pulls in exp, erfc)
  std::set<std::string> libm;  // libm-backed functions used (names as in the IR's Call fn)
  // Of those, the ones whose float vector form calls libmvec at this width:
  // name -> symbol (e.g. "sin" -> "_ZGVeN16v_sinf"); the others loop over lanes.
  std::map<std::string, std::string> libmvec;
};

// Is `fn` (an IR Call name) one of the prelude's libm-backed functions? `arity`
// receives its number of arguments.
bool libm_function(const std::string& fn, int* arity = nullptr);
// The libmvec symbol of fn's float form at this vector width, when eager's
// float32 kernels call libmvec for it too (so both agree); "" otherwise.
std::string libmvec_symbol(const std::string& fn, int vector_bytes);

// The Philox group of the prelude (prelude_philox.cpp), self-contained.
const char* philox_prelude();

// The prelude text; throws tp::ValueError for a vector_bytes other than 16/32/64.
std::string cpp_prelude(const PreludeRequest& req);

// Lanes of vf / vd / vl for a given vector_bytes.
int lanes_f32(int vector_bytes);
int lanes_f64(int vector_bytes);
int lanes_i64(int vector_bytes);

}  // namespace tp::stax::codegen
