// Contiguous-array kernels of the float pointwise operators, compiled once per
// vector ISA (vec_avx512.cpp, vec_avx2.cpp, vec_base.cpp all include
// vec_impl.h) and chosen at run time by cpuid (vec_dispatch.cpp). PyTorch
// does the same with its per-ISA kernel copies; here the transcendental
// functions come from glibc's libmvec (SIMD exp/log/sin/erf/... with a few
// ulp of error), and the float64 tables use libm (full accuracy).
//
// This header is the only one the rest of the code includes: it holds plain
// function-pointer tables, so no inline function compiled with AVX-512 can
// leak into code that runs on an older CPU.
#pragma once
#include <cstdint>

namespace tp::vec {

enum class UnaryFn : int {
  Exp, Exp2, Expm1, Log, Log2, Log10, Log1p, Sqrt, Rsqrt,
  Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Tanh, Asinh, Acosh, Atanh,
  Erf, Erfc, Erfinv, Sigmoid, Logit, Relu, Gelu, GeluTanh, Silu, Mish, Softplus, Elu,
  LeakyRelu, Hardtanh, Abs, Neg, Sign, Floor, Ceil, Round, Trunc, Frac, Reciprocal, Square,
  Count
};

// Operator parameters: logit a=eps (<0: none); softplus a=beta b=threshold;
// elu a=alpha; leaky_relu a=slope; hardtanh a=min b=max; round a=10^|decimals|
// b=sign(decimals) (0: plain round half to even).
struct Params {
  double a = 0, b = 0;
};

enum class BinaryFn : int {
  Add, Sub, Mul, Div, DivTrunc, DivFloor, Remainder, Fmod, Pow, Atan2, Hypot, Maximum, Minimum, Count
};

// Float classifiers with bool results.
enum class PredFn : int { IsNan, IsInf, IsFinite, LogicalNot, Count };

// y[i] = f(x[i]) for i < n (contiguous; y may equal x).
using UnaryF32 = void (*)(const float* x, float* y, int64_t n, const Params& p);
using UnaryF64 = void (*)(const double* x, double* y, int64_t n, const Params& p);
// y[i] = f(a[i*sa], b[i*sb]), sa and sb each 0 (broadcast) or 1. Add/Sub: p.a = alpha.
using BinaryF32 = void (*)(const float* a, int64_t sa, const float* b, int64_t sb, float* y, int64_t n,
                           const Params& p);
using BinaryF64 = void (*)(const double* a, int64_t sa, const double* b, int64_t sb, double* y, int64_t n,
                           const Params& p);

using PredF32 = void (*)(const float* x, bool* y, int64_t n);

// Row-major C[M,N] = alpha * op(A) op(B) + beta * C on the calling thread, as
// blas::gemm defines it (ta/tb: A/B stored transposed). Only the AVX-512 table
// has one (sgemm_avx512.cpp); ops/blas.cpp falls back to the BLAS library.
using GemmF32 = void (*)(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                         const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

struct Table {
  const char* isa;
  UnaryF32 unary_f32[static_cast<int>(UnaryFn::Count)];
  UnaryF64 unary_f64[static_cast<int>(UnaryFn::Count)];
  BinaryF32 binary_f32[static_cast<int>(BinaryFn::Count)];
  BinaryF64 binary_f64[static_cast<int>(BinaryFn::Count)];
  PredF32 pred_f32[static_cast<int>(PredFn::Count)];
  GemmF32 sgemm = nullptr;
};

// The table for the best ISA of this CPU (TP_VEC_ISA=avx512|avx2|base lowers it).
const Table& table();
// Per-ISA tables (nullptr where the build or the CPU lacks the ISA); for tests.
const Table* table_for(const char* isa);

template <class T>
inline auto unary_fn(UnaryFn f) {
  if constexpr (sizeof(T) == 4) return table().unary_f32[static_cast<int>(f)];
  else return table().unary_f64[static_cast<int>(f)];
}
template <class T>
inline auto binary_fn(BinaryFn f) {
  if constexpr (sizeof(T) == 4) return table().binary_f32[static_cast<int>(f)];
  else return table().binary_f64[static_cast<int>(f)];
}

}  // namespace tp::vec
