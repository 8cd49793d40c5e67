// tp::compile from C++: a lambda is captured by the same dispatcher mechanism
// as Python functions, compiled by Stax into one kernel, and cached.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>

#include "autograd/engine.h"
#include "compile/compiled_function.h"
#include "compile/metrics.h"
#include "ops/blas.h"
#include "ops/ops.h"

namespace tp::compile {
namespace {

class CompileCpp : public ::testing::Test {
 protected:
  void SetUp() override {
    autograd::install();
    dir_ = std::filesystem::temp_directory_path() / ("tp_compile_test_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    ::setenv("TP_CACHE_DIR", dir_.c_str(), 1);
    reset();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

UserFn example11() {
  return [](const std::vector<ArgValue>& a) {
    const Tensor& x = std::get<Tensor>(a[0]);
    const Tensor& w = std::get<Tensor>(a[1]);
    return std::vector<Tensor>{ops::sum(ops::mul(ops::relu(ops::add(x, w)), ops::scalar(2.0)), {-1})};
  };
}

TEST_F(CompileCpp, LambdaCompilesToOneKernelAndMatchesEager) {
  CompiledFunction cf(example11(), CompileOptions{.strict_native = true}, {"x", "w"}, 2);
  Tensor x = ops::randn({64, 128}), w = ops::randn({64, 128});
  Tensor y = cf.call({x, w})[0];
  Tensor ref = example11()({x, w})[0];
  EXPECT_EQ(metrics().generated_kernel_count.load(), 1);
  EXPECT_EQ(metrics().cache_misses.load(), 1);
  for (int64_t i = 0; i < 64; ++i) {
    double r = ref.data_as<float>()[i];
    EXPECT_NEAR(y.data_as<float>()[i], r, 1e-5 * (1 + std::abs(r)));
  }
  // Same tensors again: the first-level entry.
  cf.call({x, w});
  EXPECT_EQ(metrics().first_level_hits.load(), 1);
  // An in-place write bumps the version: the specialization cache answers and the result is fresh.
  ops::add_(x, ops::scalar(1.0));
  Tensor y2 = cf.call({x, w})[0];
  EXPECT_EQ(metrics().specialization_hits.load(), 1);
  Tensor ref2 = example11()({x, w})[0];
  EXPECT_NEAR(y2.data_as<float>()[0], ref2.data_as<float>()[0], 1e-4 * (1 + std::abs(ref2.data_as<float>()[0])));
  EXPECT_EQ(metrics().compile_count.load(), 1);
}

TEST_F(CompileCpp, StrictNativeRunsMatmulAsAnExternAndNamesAnOperatorThatCannotRun) {
#ifdef TP_TEST_BLAS_PATH
  set_blas_library(TP_TEST_BLAS_PATH);
#else
  GTEST_SKIP() << "scipy-openblas32 not installed: matmul has no BLAS here";
#endif
  // matmul is an extern call inside the region (a GEMM, then the relu kernel).
  UserFn mm = [](const std::vector<ArgValue>& a) {
    return std::vector<Tensor>{ops::relu(ops::matmul(std::get<Tensor>(a[0]), std::get<Tensor>(a[1])))};
  };
  Tensor a = ops::randn({4, 4}), b = ops::randn({4, 4});
  CompiledFunction strict(mm, CompileOptions{.strict_native = true}, {}, 2);
  Tensor y = strict.call({a, b})[0];
  EXPECT_EQ(metrics().fallback_count.load(), 0);
  Tensor ref = ops::relu(ops::matmul(a, b));
  for (int64_t i = 0; i < 16; ++i) EXPECT_NEAR(y.data_as<float>()[i], ref.data_as<float>()[i], 1e-5);
  // A result whose shape depends on the data cannot have a planned buffer.
  UserFn nz = [](const std::vector<ArgValue>& a) {
    return std::vector<Tensor>{ops::nonzero(ops::relu(std::get<Tensor>(a[0])))};
  };
  CompiledFunction strict_nz(nz, CompileOptions{.strict_native = true}, {}, 1);
  try {
    strict_nz.call({a});
    FAIL() << "expected BackendError";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("nonzero"), std::string::npos) << e.what();
  }
  CompiledFunction lenient(nz, CompileOptions{}, {}, 1);
  Tensor z = lenient.call({a})[0];
  EXPECT_EQ(metrics().fallback_count.load(), 1);
  EXPECT_EQ(z.sizes(), ops::nonzero(ops::relu(a)).sizes());
}

TEST_F(CompileCpp, CapturedTensorIsAnInputReadAtEveryCall) {
  // A tensor the lambda captured is a free tensor: a graph input (not a frozen
  // constant), so an in-place update between calls is seen.
  Tensor w = ops::ones({4});
  UserFn f = [w](const std::vector<ArgValue>& a) {
    return std::vector<Tensor>{ops::mul(std::get<Tensor>(a[0]), w)};
  };
  CompiledFunction cf(f, CompileOptions{.strict_native = true}, {"x"}, 1);
  Tensor x = ops::full({4}, 2.0);
  EXPECT_EQ(cf.call({x})[0].data_as<float>()[0], 2.0f);
  Tensor w2 = w;
  ops::mul_(w2, ops::full({4}, 3.0));
  EXPECT_EQ(cf.call({x})[0].data_as<float>()[0], 6.0f);
  EXPECT_EQ(cf.last_graph()->placeholders().size(), 2u);
}

TEST_F(CompileCpp, ResultThatIsAnInputIsThatTensorAndSimplifiedResultIsACopy) {
  UserFn same = [](const std::vector<ArgValue>& a) { return std::vector<Tensor>{std::get<Tensor>(a[0])}; };
  UserFn plus0 = [](const std::vector<ArgValue>& a) {
    return std::vector<Tensor>{ops::add(std::get<Tensor>(a[0]), ops::scalar(0.0))};
  };
  Tensor x = ops::ones({3});
  for (const char* backend : {"eager", "stax"}) {
    CompileOptions o;
    o.backend = backend;
    CompiledFunction a(same, o, {"x"}, 1), b(plus0, o, {"x"}, 1);
    EXPECT_EQ(a.call({x})[0].impl(), x.impl()) << backend;
    Tensor y = b.call({x})[0];
    EXPECT_NE(y.impl()->storage, x.impl()->storage) << backend;
  }
}

TEST_F(CompileCpp, WrongArgumentCountIsATypeError) {
  CompiledFunction cf(example11(), CompileOptions{}, {"x", "w"}, 2);
  EXPECT_THROW(cf.call({ops::randn({2})}), TypeError);
}

}  // namespace
}  // namespace tp::compile
