#include "ops/blas.h"

#include <dlfcn.h>

#include <climits>
#include <mutex>

#include "core/error.h"

namespace tp {
namespace {

using sgemm_fn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                          int);
using dgemm_fn = void (*)(int, int, int, int, int, int, double, const double*, int, const double*, int, double,
                          double*, int);
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

struct Blas {
  std::mutex mu;
  void* handle = nullptr;
  std::string path;
  sgemm_fn sgemm = nullptr;
  dgemm_fn dgemm = nullptr;
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
  b.handle = h;
  b.path = path;
  b.sgemm = s;
  b.dgemm = d;
  return true;
}

struct Fns {
  sgemm_fn sgemm;
  dgemm_fn dgemm;
  std::string path;
};

// The functions in use (copied under the lock: set_blas_library may swap them).
Fns loaded() {
  Blas& b = lib();
  std::lock_guard<std::mutex> lock(b.mu);
  if (!b.handle)
    for (const char* name : {"libscipy_openblas.so", "libopenblas.so.0", "libopenblas.so"})
      if (try_load(b, name, nullptr)) break;
  if (b.handle) return {b.sgemm, b.dgemm, b.path};
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

std::string blas_library() { return loaded().path; }

namespace blas {
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
          int64_t ldb, float* C, int64_t ldc) {
  loaded().sgemm(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, to_int(M), to_int(N), to_int(K), 1.0f,
                 A, to_int(lda), B, to_int(ldb), 0.0f, C, to_int(ldc));
}
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B,
          int64_t ldb, double* C, int64_t ldc) {
  loaded().dgemm(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, to_int(M), to_int(N), to_int(K), 1.0,
                 A, to_int(lda), B, to_int(ldb), 0.0, C, to_int(ldc));
}
}  // namespace blas

}  // namespace tp
