// LAPACK routines for tp.linalg, taken from the BLAS library the package
// already loads (scipy-openblas32 exports them as scipy_<name>_, a plain
// OpenBLAS as <name>_): no new dependency, looked up on first use. Fortran
// interface: column-major matrices, 32-bit integers, every argument by pointer.
#pragma once
#include <cstdint>

namespace tp::lapack {

// Each returns LAPACK's `info` (0: success, < 0: bad argument, > 0: the
// routine-specific failure: a zero pivot, a minor that is not positive, no
// convergence). Work arrays are allocated inside.
template <class T> int getrf(int m, int n, T* a, int lda, int* ipiv);
template <class T> int getrs(int n, int nrhs, const T* a, int lda, const int* ipiv, T* b, int ldb);  // 'N'
template <class T> int potrf(char uplo, int n, T* a, int lda);
// QR: on return `a` holds R above the diagonal and the reflectors below; `tau` min(m, n).
template <class T> int geqrf(int m, int n, T* a, int lda, T* tau);
// Forms the first n columns of Q (m x n) from k reflectors left by geqrf.
template <class T> int orgqr(int m, int n, int k, T* a, int lda, const T* tau);
// Symmetric eigen-decomposition ('V': vectors too); w ascending.
template <class T> int syevd(char jobz, char uplo, int n, T* a, int lda, T* w);
// SVD by divide and conquer; jobz 'S' (reduced), 'A' (complete) or 'N' (values).
template <class T> int gesdd(char jobz, int m, int n, T* a, int lda, T* s, T* u, int ldu, T* vt, int ldvt);

// Least squares min ||A X - B|| over the columns of B (m x nrhs in an ldb >= max(m, n)
// buffer; the solution is left in its first n rows). gels: QR/LQ, A of full rank
// ('N'). gelsy: complete orthogonal factorization with column pivoting, rank by
// rcond (minimum-norm solution). gelsd / gelss: SVD (divide and conquer / plain),
// singular values to `s` (min(m, n)), those <= rcond * s[0] treated as zero.
template <class T> int gels(int m, int n, int nrhs, T* a, int lda, T* b, int ldb);
template <class T> int gelsy(int m, int n, int nrhs, T* a, int lda, T* b, int ldb, T rcond, int* rank);
template <class T> int gelsd(int m, int n, int nrhs, T* a, int lda, T* b, int ldb, T* s, T rcond, int* rank);
template <class T> int gelss(int m, int n, int nrhs, T* a, int lda, T* b, int ldb, T* s, T rcond, int* rank);

}  // namespace tp::lapack
