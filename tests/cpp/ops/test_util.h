// Helpers shared by the ops tests: build tensors from values, read any strided
// tensor back in logical (row-major) order.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/blas.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace tp::test {

inline Tensor make(const std::vector<double>& v, const Shape& shape, DType dt = DType::Float32) {
  Tensor t = Tensor::empty(shape, dt);
  EXPECT_EQ(static_cast<int64_t>(v.size()), t.numel());
  TP_DISPATCH_ALL(dt, "make", ([&]<class T>() {
                    T* p = t.data_as<T>();
                    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<T>(v[i]);
                  }));
  return t;
}

inline std::vector<double> values(const Tensor& t) {
  std::vector<double> out;
  const int64_t n = t.numel(), nd = t.dim();
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int64_t d = 0; d < nd; ++d) off += idx[d] * t.strides()[d];
    TP_DISPATCH_ALL(t.dtype(), "values", ([&]<class T>() {
                      out.push_back(static_cast<double>(t.data_as<T>()[off]));
                    }));
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++idx[d] < t.sizes()[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

inline Tensor iota(const Shape& shape, DType dt = DType::Float32, double start = 0, double step = 1) {
  std::vector<double> v(static_cast<size_t>(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + step * static_cast<double>(i);
  return make(v, shape, dt);
}

inline void expect_values(const Tensor& t, const std::vector<double>& want, double tol = 1e-6) {
  auto got = values(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << "element " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(want[i]))) << "element " << i;
    }
  }
}

// Runs `stmt`, expecting exception type E whose message contains every string in `parts`.
#define EXPECT_THROW_MSG(stmt, E, ...)                                                \
  do {                                                                                \
    try {                                                                             \
      stmt;                                                                           \
      ADD_FAILURE() << "expected " #E " from " #stmt;                                 \
    } catch (const E& e_) {                                                           \
      for (const std::string& part_ : std::vector<std::string>{__VA_ARGS__})          \
        EXPECT_NE(std::string(e_.what()).find(part_), std::string::npos)              \
            << "message '" << e_.what() << "' lacks '" << part_ << "'";               \
    } catch (const std::exception& e_) {                                              \
      ADD_FAILURE() << "expected " #E " from " #stmt " but got: " << e_.what();       \
    }                                                                                 \
  } while (0)

// Matmul tests need OpenBLAS. CMake bakes in the library of the scipy-openblas32
// wheel it found (TP_TEST_BLAS_PATH); TP_TEST_BLAS overrides it. A path that
// cannot be loaded is a test failure with the reason, never a silent fallback
// to whatever BLAS the machine happens to have (a hand-installed system
// OpenBLAS once hid a missing path on fresh machines).
inline void load_test_blas() {
  static const std::string error = []() -> std::string {
    const char* env = std::getenv("TP_TEST_BLAS");
#ifdef TP_TEST_BLAS_PATH
    const char* path = env ? env : TP_TEST_BLAS_PATH;
#else
    const char* path = env;
#endif
    if (!path) return "no BLAS for the tests: configure with the scipy-openblas32 wheel installed, or set TP_TEST_BLAS";
    try {
      set_blas_library(path);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }();
  if (!error.empty()) ADD_FAILURE() << error;
}

}  // namespace tp::test
