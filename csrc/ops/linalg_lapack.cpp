#include "ops/linalg_lapack.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "ops/blas.h"

namespace tp::lapack {
namespace {

// The routine `name` ("dgetrf") of the loaded BLAS library, looked up once.
void* lookup(const char* name) {
  void* f = blas_symbol(("scipy_" + std::string(name) + "_").c_str());
  if (!f) f = blas_symbol((std::string(name) + "_").c_str());
  TP_CHECK(f != nullptr, Error, "linalg: the BLAS library '", blas_library(), "' has no LAPACK routine ", name,
           " (scipy-openblas32 has them)");
  return f;
}

template <class F>
F fn(const char* name) {
  return reinterpret_cast<F>(lookup(name));
}

template <class T>
constexpr const char* pick(const char* s, const char* d) {
  return sizeof(T) == 4 ? s : d;
}

// The optimal work size a LAPACK query (lwork = -1) wrote as a float.
template <class T>
int work_size(T w) {
  return std::max(1, static_cast<int>(w) + 1);
}

}  // namespace

template <class T>
int getrf(int m, int n, T* a, int lda, int* ipiv) {
  using F = void (*)(const int*, const int*, T*, const int*, int*, int*);
  static F f = fn<F>(pick<T>("sgetrf", "dgetrf"));
  int info = 0;
  f(&m, &n, a, &lda, ipiv, &info);
  return info;
}

template <class T>
int getrs(int n, int nrhs, const T* a, int lda, const int* ipiv, T* b, int ldb) {
  using F = void (*)(const char*, const int*, const int*, const T*, const int*, const int*, T*, const int*, int*,
                     size_t);
  static F f = fn<F>(pick<T>("sgetrs", "dgetrs"));
  int info = 0;
  const char trans = 'N';
  f(&trans, &n, &nrhs, a, &lda, ipiv, b, &ldb, &info, 1);
  return info;
}

template <class T>
int potrf(char uplo, int n, T* a, int lda) {
  using F = void (*)(const char*, const int*, T*, const int*, int*, size_t);
  static F f = fn<F>(pick<T>("spotrf", "dpotrf"));
  int info = 0;
  f(&uplo, &n, a, &lda, &info, 1);
  return info;
}

template <class T>
int geqrf(int m, int n, T* a, int lda, T* tau) {
  using F = void (*)(const int*, const int*, T*, const int*, T*, T*, const int*, int*);
  static F f = fn<F>(pick<T>("sgeqrf", "dgeqrf"));
  int info = 0, lwork = -1;
  T q{};
  f(&m, &n, a, &lda, tau, &q, &lwork, &info);
  lwork = work_size(q);
  std::vector<T> work(static_cast<size_t>(lwork));
  f(&m, &n, a, &lda, tau, work.data(), &lwork, &info);
  return info;
}

template <class T>
int orgqr(int m, int n, int k, T* a, int lda, const T* tau) {
  using F = void (*)(const int*, const int*, const int*, T*, const int*, const T*, T*, const int*, int*);
  static F f = fn<F>(pick<T>("sorgqr", "dorgqr"));
  int info = 0, lwork = -1;
  T q{};
  f(&m, &n, &k, a, &lda, tau, &q, &lwork, &info);
  lwork = work_size(q);
  std::vector<T> work(static_cast<size_t>(lwork));
  f(&m, &n, &k, a, &lda, tau, work.data(), &lwork, &info);
  return info;
}

template <class T>
int syevd(char jobz, char uplo, int n, T* a, int lda, T* w) {
  using F = void (*)(const char*, const char*, const int*, T*, const int*, T*, T*, const int*, int*, const int*,
                     int*, size_t, size_t);
  static F f = fn<F>(pick<T>("ssyevd", "dsyevd"));
  int info = 0, lwork = -1, liwork = -1, iq = 0;
  T q{};
  f(&jobz, &uplo, &n, a, &lda, w, &q, &lwork, &iq, &liwork, &info, 1, 1);
  lwork = work_size(q);
  liwork = std::max(1, iq);
  std::vector<T> work(static_cast<size_t>(lwork));
  std::vector<int> iwork(static_cast<size_t>(liwork));
  f(&jobz, &uplo, &n, a, &lda, w, work.data(), &lwork, iwork.data(), &liwork, &info, 1, 1);
  return info;
}

template <class T>
int gesdd(char jobz, int m, int n, T* a, int lda, T* s, T* u, int ldu, T* vt, int ldvt) {
  using F = void (*)(const char*, const int*, const int*, T*, const int*, T*, T*, const int*, T*, const int*, T*,
                     const int*, int*, int*, size_t);
  static F f = fn<F>(pick<T>("sgesdd", "dgesdd"));
  int info = 0, lwork = -1;
  std::vector<int> iwork(static_cast<size_t>(8 * std::max(1, std::min(m, n))));
  T q{};
  f(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, &q, &lwork, iwork.data(), &info, 1);
  lwork = work_size(q);
  std::vector<T> work(static_cast<size_t>(lwork));
  f(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work.data(), &lwork, iwork.data(), &info, 1);
  return info;
}

template <class T>
int gels(int m, int n, int nrhs, T* a, int lda, T* b, int ldb) {
  using F = void (*)(const char*, const int*, const int*, const int*, T*, const int*, T*, const int*, T*, const int*,
                     int*, size_t);
  static F f = fn<F>(pick<T>("sgels", "dgels"));
  int info = 0, lwork = -1;
  const char trans = 'N';
  T q{};
  f(&trans, &m, &n, &nrhs, a, &lda, b, &ldb, &q, &lwork, &info, 1);
  lwork = work_size(q);
  std::vector<T> work(static_cast<size_t>(lwork));
  f(&trans, &m, &n, &nrhs, a, &lda, b, &ldb, work.data(), &lwork, &info, 1);
  return info;
}

template <class T>
int gelsy(int m, int n, int nrhs, T* a, int lda, T* b, int ldb, T rcond, int* rank) {
  using F = void (*)(const int*, const int*, const int*, T*, const int*, T*, const int*, int*, const T*, int*, T*,
                     const int*, int*);
  static F f = fn<F>(pick<T>("sgelsy", "dgelsy"));
  int info = 0, lwork = -1;
  std::vector<int> jpvt(static_cast<size_t>(std::max(1, n)), 0);  // 0: every column free to move
  T q{};
  f(&m, &n, &nrhs, a, &lda, b, &ldb, jpvt.data(), &rcond, rank, &q, &lwork, &info);
  lwork = work_size(q);
  std::vector<T> work(static_cast<size_t>(lwork));
  f(&m, &n, &nrhs, a, &lda, b, &ldb, jpvt.data(), &rcond, rank, work.data(), &lwork, &info);
  return info;
}

template <class T>
int gelsd(int m, int n, int nrhs, T* a, int lda, T* b, int ldb, T* s, T rcond, int* rank) {
  using F = void (*)(const int*, const int*, const int*, T*, const int*, T*, const int*, T*, const T*, int*, T*,
                     const int*, int*, int*);
  static F f = fn<F>(pick<T>("sgelsd", "dgelsd"));
  int info = 0, lwork = -1, iq = 0;
  T q{};
  f(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, &q, &lwork, &iq, &info);
  lwork = work_size(q);
  std::vector<T> work(static_cast<size_t>(lwork));
  std::vector<int> iwork(static_cast<size_t>(std::max(1, iq)));
  f(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, work.data(), &lwork, iwork.data(), &info);
  return info;
}

template <class T>
int gelss(int m, int n, int nrhs, T* a, int lda, T* b, int ldb, T* s, T rcond, int* rank) {
  using F = void (*)(const int*, const int*, const int*, T*, const int*, T*, const int*, T*, const T*, int*, T*,
                     const int*, int*);
  static F f = fn<F>(pick<T>("sgelss", "dgelss"));
  int info = 0, lwork = -1;
  T q{};
  f(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, &q, &lwork, &info);
  lwork = work_size(q);
  std::vector<T> work(static_cast<size_t>(lwork));
  f(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, work.data(), &lwork, &info);
  return info;
}

#define TP_LAPACK_INSTANTIATE(T)                                                                   \
  template int getrf<T>(int, int, T*, int, int*);                                                  \
  template int getrs<T>(int, int, const T*, int, const int*, T*, int);                             \
  template int potrf<T>(char, int, T*, int);                                                       \
  template int geqrf<T>(int, int, T*, int, T*);                                                    \
  template int orgqr<T>(int, int, int, T*, int, const T*);                                         \
  template int syevd<T>(char, char, int, T*, int, T*);                                             \
  template int gesdd<T>(char, int, int, T*, int, T*, T*, int, T*, int);                           \
  template int gels<T>(int, int, int, T*, int, T*, int);                                           \
  template int gelsy<T>(int, int, int, T*, int, T*, int, T, int*);                                 \
  template int gelsd<T>(int, int, int, T*, int, T*, int, T*, T, int*);                             \
  template int gelss<T>(int, int, int, T*, int, T*, int, T*, T, int*);
TP_LAPACK_INSTANTIATE(float)
TP_LAPACK_INSTANTIATE(double)
#undef TP_LAPACK_INSTANTIATE

}  // namespace tp::lapack
