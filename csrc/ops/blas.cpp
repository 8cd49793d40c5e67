#include "ops/blas.h"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <mutex>

#include "core/error.h"
#include "core/parallel.h"

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

// Inside one of our parallel regions BLAS must not start threads of its own.
int wanted_threads() { return in_parallel_region() ? 1 : std::max(1, num_threads()); }

// Loads the preferred library, else the usual names, at first use (caller
// holds the lock); false: none loads.
bool ensure_loaded(Blas& b) {
  if (!b.handle && !b.preferred.empty()) try_load(b, b.preferred, nullptr);
  if (!b.handle)
    for (const char* name : {"libscipy_openblas.so", "libopenblas.so.0", "libopenblas.so"})
      if (try_load(b, name, nullptr)) break;
  return b.handle != nullptr;
}

// The functions in use (copied under the lock: set_blas_library may swap them).
Fns loaded() {
  Blas& b = lib();
  std::lock_guard<std::mutex> lock(b.mu);
  if (ensure_loaded(b)) {
    // Changing the count is costly in OpenBLAS (it may start or park threads): only on change.
    const int want = wanted_threads();
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

std::string blas_library() { return loaded().path; }

void* blas_symbol(const char* name) {
  loaded();  // loads the library (or throws naming the fix) and sets the thread count
  Blas& b = lib();
  std::lock_guard<std::mutex> lock(b.mu);
  return dlsym(b.handle, name);
}

namespace blas {
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  loaded().sgemm(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, to_int(M), to_int(N), to_int(K), alpha,
                 A, to_int(lda), B, to_int(ldb), beta, C, to_int(ldc));
}
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
          const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  loaded().dgemm(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, to_int(M), to_int(N), to_int(K), alpha,
                 A, to_int(lda), B, to_int(ldb), beta, C, to_int(ldc));
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
