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
// The path (or soname) of the library in use, loading the default one if none
// was set; throws tp::Error naming matmul and the fix when none loads.
std::string blas_library();

namespace blas {
// Row-major C[M,N] = A[M,K] * B[K,N] (beta = 0). trans_a: A is stored as its
// transpose (K x M, leading dimension lda), likewise trans_b.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
          int64_t ldb, float* C, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const double* A, int64_t lda,
          const double* B, int64_t ldb, double* C, int64_t ldc);
}  // namespace blas

}  // namespace tp
