#include "ops/blas.h"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <mutex>

#include "core/error.h"
#include "core/parallel.h"
#include "ops/vec/vec_kernels.h"

namespace tp {
namespace {

using sgemm_fn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                          int);
using dgemm_fn = void (*)(int, int, int, int, int, int, double, const double*, int, const double*, int, double,
                          double*, int);
using set_threads_fn = void (*)(int);
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

struct Blas {
  std::mutex mu;
  void* handle = nullptr;
  std::string path;
  std::string preferred;  // prefer_blas_library's choice, loaded at the first GEMM
  sgemm_fn sgemm = nullptr;
  dgemm_fn dgemm = nullptr;
  set_threads_fn set_threads = nullptr;  // absent in some builds: then BLAS keeps its own count
  int threads = 0;                       // the count last set (0: never)
};
Blas& lib() {
  static Blas b;
  return b;
}

// Tries one library; on success installs it (caller holds the lock).
bool try_load(Blas& b, const std::string& path, std::string* why) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    if (why) *why = dlerror();
    return false;
  }
  auto s = reinterpret_cast<sgemm_fn>(dlsym(h, "scipy_cblas_sgemm"));
  auto d = reinterpret_cast<dgemm_fn>(dlsym(h, "scipy_cblas_dgemm"));
  if (!s || !d) {  // a plain OpenBLAS
    s = reinterpret_cast<sgemm_fn>(dlsym(h, "cblas_sgemm"));
    d = reinterpret_cast<dgemm_fn>(dlsym(h, "cblas_dgemm"));
  }
  if (!s || !d) {
    if (why) *why = "the library has no cblas_sgemm/cblas_dgemm symbols";
    dlclose(h);
    return false;
  }
  auto t = reinterpret_cast<set_threads_fn>(dlsym(h, "scipy_openblas_set_num_threads"));
  if (!t) t = reinterpret_cast<set_threads_fn>(dlsym(h, "openblas_set_num_threads"));
  b.handle = h;
  b.path = path;
  b.sgemm = s;
  b.dgemm = d;
  b.set_threads = t;
  b.threads = 0;
  return true;
}

struct Fns {
  sgemm_fn sgemm;
  dgemm_fn dgemm;
  std::string path;
};

// LAPACK's thread count: TensorPlay's outside our parallel regions, one inside
// (BLAS must not start threads of its own there). GEMMs always run BLAS on one
// thread (see gemm below).
int lapack_threads() { return in_parallel_region() ? 1 : std::max(1, num_threads()); }

// Loads the preferred library, else the usual names, at first use (caller
// holds the lock); false: none loads.
bool ensure_loaded(Blas& b) {
  if (!b.handle && !b.preferred.empty()) try_load(b, b.preferred, nullptr);
  if (!b.handle)
    for (const char* name : {"libscipy_openblas.so", "libopenblas.so.0", "libopenblas.so"})
      if (try_load(b, name, nullptr)) break;
  return b.handle != nullptr;
}

// The functions in use (copied under the lock: set_blas_library may swap them),
// with BLAS's global thread count set to `want`.
Fns loaded(int want) {
  Blas& b = lib();
  std::lock_guard<std::mutex> lock(b.mu);
  if (ensure_loaded(b)) {
    // Changing the count is costly in OpenBLAS (it may start or park threads): only on change.
    if (b.set_threads && want != b.threads && !in_parallel_region()) {
      b.set_threads(want);
      b.threads = want;
    }
    return {b.sgemm, b.dgemm, b.path};
  }
  throw Error(
      "matmul: no BLAS library is loaded. Install the PyPI package scipy-openblas32 (the tensorplay package "
      "loads it at import), or call tp::set_blas_library(\"/path/to/libscipy_openblas.so\") / put "
      "libopenblas.so.0 on the library path");
}

int to_int(int64_t v) {
  TP_CHECK(v >= 0 && v <= INT_MAX, ValueError, "matmul: dimension ", v,
           " is too large for the 32-bit integer BLAS interface");
  return static_cast<int>(v);
}

}  // namespace

void set_blas_library(const std::string& path) {
  Blas& b = lib();
  std::lock_guard<std::mutex> lock(b.mu);
  if (b.handle && b.path == path) return;
  std::string why;
  // A previous library stays loaded: a matmul on another thread may still be inside it.
  TP_CHECK(try_load(b, path, &why), Error, "set_blas_library: cannot load BLAS library '", path, "': ", why);
}

void prefer_blas_library(const std::string& path) {
  Blas& b = lib();
  std::lock_guard<std::mutex> lock(b.mu);
  b.preferred = path;
}

std::string blas_library() { return loaded(1).path; }

void* blas_symbol(const char* name) {
  loaded(lapack_threads());  // loads the library (or throws naming the fix) and sets LAPACK's thread count
  Blas& b = lib();
  std::lock_guard<std::mutex> lock(b.mu);
  return dlsym(b.handle, name);
}

namespace blas {
namespace {
// One product, split across TensorPlay's OpenMP threads; each part is one
// single-threaded BLAS call. OpenBLAS's own threads are a second pool beside
// ours: after a GEMM its workers spin-wait, as ours do after a parallel
// region, and on a machine with as many cores as threads each pool's spinners
// take the cores the other's work needs (a transformer step at 2 threads ran
// 1.6x slower than at 1). With one pool, waiting threads are only ever ours.
// The larger of M and N is cut into row (or column) blocks of C, a multiple of
// 16 wide (the kernels' register tile), one per thread; each part packs the
// other operand again, which costs O(K * N) against the part's O(M * N * K / t).
template <class T, class Call>
void split_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B, int64_t ldb,
                T* C, int64_t ldc, Call call) {
  constexpr int64_t kMinMacs = int64_t{1} << 20, kTile = 16;
  const bool by_rows = M >= N;
  const int64_t D = by_rows ? M : N;
  const int64_t parts = std::min<int64_t>(num_threads(), D / kTile);
  if (parts < 2 || in_parallel_region() || M * N * K < kMinMacs) return call(M, N, A, B, C);
  parallel_for(0, parts, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t lo = D * p / parts / kTile * kTile, hi = p + 1 == parts ? D : D * (p + 1) / parts / kTile * kTile;
      if (by_rows)
        call(hi - lo, N, A + (ta ? lo : lo * lda), B, C + lo * ldc);
      else
        call(M, hi - lo, A, B + (tb ? lo * ldb : lo), C + lo);
    }
  });
}

// The BLAS call (sgemm or dgemm), range-checked once, run by split_gemm.
template <class T, class Fn>
void blas_gemm(Fn f, bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
               int64_t ldb, T beta, T* C, int64_t ldc) {
  (void)to_int(M);
  (void)to_int(N);
  const int k = to_int(K), ia = to_int(lda), ib = to_int(ldb), ic = to_int(ldc);
  split_gemm(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, [&](int64_t m, int64_t n, const T* a, const T* b, T* c) {
    f(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, static_cast<int>(m), static_cast<int>(n), k, alpha,
      a, ia, b, ib, beta, c, ic);
  });
}
}  // namespace

namespace {
// TensorPlay's own float32 kernel (AVX-512 CPUs; vec::table() picks it, so
// TP_VEC_ISA=avx2 turns it off, as does TP_GEMM=blas), or null: the BLAS library.
vec::GemmF32 native_sgemm() {
  static const vec::GemmF32 f = [] {
    const char* env = std::getenv("TP_GEMM");
    if (env && *env) {
      const std::string v = env;
      TP_CHECK(v == "blas" || v == "native", ValueError, "TP_GEMM='", v, "' is not a GEMM choice (blas, native)");
      if (v == "blas") return vec::GemmF32{nullptr};
    }
    return vec::table().sgemm;
  }();
  return f;
}
}  // namespace

const char* float32_gemm_kernel() { return native_sgemm() ? "avx512" : "blas"; }

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  // Thin products (a row or a few columns, a short K) leave most of the
  // kernel's 14 x 32 register tile empty or spend their time packing; the BLAS
  // library's GEMV-like paths are faster there.
  if (const vec::GemmF32 f = native_sgemm(); f && M >= 16 && N >= 32 && K >= 16) {
    split_gemm(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, [&](int64_t m, int64_t n, const float* a, const float* b, float* c) {
      f(ta, tb, m, n, K, alpha, a, lda, b, ldb, beta, c, ldc);
    });
    return;
  }
  blas_gemm(loaded(1).sgemm, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
          const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  blas_gemm(loaded(1).dgemm, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void use_one_thread() {
  Blas& b = lib();
  std::lock_guard<std::mutex> lock(b.mu);
  // Loaded here if no GEMM ran yet: the region's GEMMs must find one thread set.
  if (ensure_loaded(b) && b.set_threads && b.threads != 1) {
    b.set_threads(1);
    b.threads = 1;
  }
}
}  // namespace blas

}  // namespace tp
