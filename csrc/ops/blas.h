// GEMM through OpenBLAS, loaded at run time with dlopen: the package builds and
// imports without a BLAS at link time. The Python package points us at the
// library of the PyPI package scipy-openblas32 (symbols scipy_cblas_sgemm /
// scipy_cblas_dgemm, 32-bit integers); without that we try the usual names.
#pragma once
#include <cstdint>
#include <string>

namespace tp {

// Loads the BLAS shared library at `path` (throws tp::Error if it cannot be
// loaded or lacks sgemm/dgemm). Later matmuls use it.
void set_blas_library(const std::string& path);
// Names the library to load at the first GEMM (tried before the usual names;
// nothing is loaded now). The package's import uses this: loading OpenBLAS
// starts its worker threads, which spin for ~0.1 s of CPU that a process
// without a GEMM (a first compile, a short script) would pay for nothing.
void prefer_blas_library(const std::string& path);
// The path (or soname) of the library in use, loading the default one if none
// was set; throws tp::Error naming matmul and the fix when none loads.
std::string blas_library();
// The address of `name` in the BLAS library in use (loading the default one
// first), or null when it lacks it. The LAPACK routines of linalg live in the
// same library (ops/linalg_lapack.cpp): one library, one thread setting.
void* blas_symbol(const char* name);

namespace blas {
// Row-major C[M,N] = alpha * A[M,K] * B[K,N] + beta * C (C is not read when
// beta == 0). trans_a: A is stored as its transpose (K x M, leading dimension
// lda), likewise trans_b. BLAS itself runs on one thread; a large product is
// split into blocks of C across tp::num_threads() OpenMP threads (one thread
// pool in the process, so tp.set_num_threads governs it). On a CPU with
// AVX-512, float32 products that are not thin run TensorPlay's own kernel
// (ops/vec/sgemm_avx512.cpp) instead of the library's; TP_GEMM=blas keeps the
// library's.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
          const double* B, int64_t ldb, double beta, double* C, int64_t ldc);
// Which kernel runs float32 products that are not thin: "avx512" (TensorPlay's
// own) or "blas" (the library's). Throws tp::Error for a bad TP_GEMM.
const char* float32_gemm_kernel();
// Call before a parallel region whose threads each run GEMMs or LAPACK
// routines: BLAS then runs one thread per call (its thread count is global, so
// it cannot be set from inside the region). LAPACK's count returns to
// tp::num_threads() at its next call outside a region.
void use_one_thread();
// A GEMM this small runs on one BLAS thread anyway (OpenBLAS switches to one
// thread below about 2^18 multiply-adds), so callers may run several at once.
inline bool is_small(int64_t M, int64_t N, int64_t K) { return M * N * K <= (int64_t{1} << 18); }

// How a BLAS reads a rows x cols matrix whose elements lie at strides (sr, sc):
// row-major with leading dimension ld, or `trans` (stored as its transpose,
// column-major). !ok: neither (a step in both dims) and a compact copy is
// needed. The stride of a size-1 dim never matters. Shared by the CPU GEMM
// and the cuBLASLt one (cuda/matmul.cpp).
struct MatrixLayout {
  bool ok = false, trans = false;
  int64_t ld = 0;
};
inline MatrixLayout matrix_layout(int64_t rows, int64_t cols, int64_t sr, int64_t sc) {
  const int64_t r_sr = rows == 1 ? (cols > 1 ? cols : 1) : sr, r_sc = cols == 1 ? 1 : sc;
  if (r_sc == 1 && r_sr >= (cols > 1 ? cols : 1)) return {true, false, r_sr};
  const int64_t c_sr = rows == 1 ? 1 : sr, c_sc = cols == 1 ? (rows > 1 ? rows : 1) : sc;
  if (c_sr == 1 && c_sc >= (rows > 1 ? rows : 1)) return {true, true, c_sc};
  return {};
}
}  // namespace blas

}  // namespace tp
