// Reductions and normalizations of issue 3 through the C++ API, hand-computed
// values (the Python tests compare against NumPy and PyTorch at large).
#include <cmath>
#include <limits>

#include "ops/registry.h"
#include "test_util.h"

namespace tp {
namespace {
using test::expect_values;
using test::iota;
using test::make;
using test::values;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(ReductionExtra, SchemasAreRegistered) {
  for (const char* name : {"sum", "mean", "prod", "amax", "amin", "max", "max.dim", "max.other", "min", "min.dim",
                           "min.other", "argmax", "argmin", "var", "var.dim", "std", "std.dim", "var_mean",
                           "std_mean", "norm", "norm.str", "logsumexp", "all", "any", "cumsum", "cumprod", "softmax",
                           "log_softmax", "layer_norm", "native_layer_norm", "rms_norm", "batch_norm",
                           "native_batch_norm", "dropout", "native_dropout"}) {
    const OpDef* op = find_op(name);
    ASSERT_NE(op, nullptr) << name;
    EXPECT_NE(std::string(op->schema), "") << name;
  }
}

TEST(ReductionExtra, SumDtypeAndProd) {
  Tensor b = make({1, 0, 1, 1}, {2, 2}, DType::Bool);
  Tensor s = ops::sum(b, {1}, false);
  EXPECT_EQ(s.dtype(), DType::Int64);
  expect_values(s, {1, 2});
  Tensor f = ops::sum(iota({2, 3}, DType::Int64), {}, false, DType::Float64);
  EXPECT_EQ(f.dtype(), DType::Float64);
  expect_values(f, {15});
  expect_values(ops::prod(iota({2, 3}, DType::Float32, 1), 1), {6, 120});
  expect_values(ops::prod(iota({2, 3}, DType::Int64, 1)), {720});
  EXPECT_THROW_MSG(ops::mean(iota({3}, DType::Int64)), TypeError, "mean");
  expect_values(ops::mean(iota({3}, DType::Int64), {}, false, DType::Float32), {1});
}

TEST(ReductionExtra, ExtremaAndIndices) {
  Tensor x = make({1, 5, 5, 2, kNaN, 0}, {2, 3});
  expect_values(ops::amin(x, {1}), {1, kNaN});
  expect_values(ops::max(x), {kNaN});
  auto [v, i] = ops::max(x, 1);
  expect_values(v, {5, kNaN});
  expect_values(i, {1, 1});
  expect_values(ops::argmax(x, 1), {1, 1});
  expect_values(ops::argmin(make({3, 1, 1, 2}, {4})), {1});
  expect_values(ops::max(make({1, 4}, {2}), make({3, 2}, {2})), {3, 4});
  EXPECT_THROW_MSG(ops::amax(Tensor::empty({0, 2}, DType::Float32), {0}), IndexError, "amax");
  EXPECT_THROW_MSG(ops::argmax(Tensor::empty({0}, DType::Float32)), IndexError, "argmax");
}

TEST(ReductionExtra, VarStdNormLogsumexp) {
  Tensor x = make({1, 2, 3, 4}, {4}, DType::Float64);
  expect_values(ops::var(x), {5.0 / 3});
  expect_values(ops::var(x, std::nullopt, 0), {1.25});
  expect_values(ops::std_dev(x), {std::sqrt(5.0 / 3)});
  expect_values(ops::norm(x), {std::sqrt(30.0)});
  expect_values(ops::norm(x, Scalar(1.0)), {10});
  expect_values(ops::norm(x, Scalar(INFINITY)), {4});
  expect_values(ops::logsumexp(x, {0}), {std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(4.0))},
                1e-12);
  expect_values(ops::all(make({1, 0, 1, 1}, {2, 2}), std::vector<int64_t>{1}), {0, 1});
  expect_values(ops::any(make({0, 0, kNaN, 0}, {2, 2}), std::vector<int64_t>{1}), {0, 1});
}

TEST(ReductionExtra, Cumulative) {
  Tensor x = iota({2, 3}, DType::Float32, 1);  // [[1,2,3],[4,5,6]]
  expect_values(ops::cumsum(x, 1), {1, 3, 6, 4, 9, 15});
  expect_values(ops::cumsum(x, 0), {1, 2, 3, 5, 7, 9});
  expect_values(ops::cumprod(x, 1), {1, 2, 6, 4, 20, 120});
  Tensor c = ops::cumsum(make({1, 1, 0}, {3}, DType::Bool), 0);
  EXPECT_EQ(c.dtype(), DType::Int64);
  expect_values(c, {1, 2, 2});
  // d cumprod / dx with a zero: x = [2, 0, 3], g = 1.
  expect_values(ops::cumprod_backward(ops::ones({3}), make({2, 0, 3}, {3}), 0), {1, 2 + 6, 0});
}

TEST(ReductionExtra, Normalizations) {
  Tensor x = make({1, 2, 3, 4, 4, 4}, {2, 3});
  Tensor ln = ops::layer_norm(x, {3});
  const double s = 1 / std::sqrt(2.0 / 3 + 1e-5);
  expect_values(ln, {-s, 0, s, 0, 0, 0}, 1e-5);
  Tensor ls = ops::log_softmax(x, 1);
  double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  expect_values(ls, {1 - lse, 2 - lse, 3 - lse, -std::log(3.0), -std::log(3.0), -std::log(3.0)}, 1e-6);
  Tensor rm = ops::zeros({3}), rv = ops::ones({3});
  Tensor bn = ops::batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.5, 0);
  expect_values(bn, {-1, -1, -1, 1, 1, 1}, 1e-6);
  expect_values(rm, {1.25, 1.5, 1.75}, 1e-6);      // 0.5 * 0 + 0.5 * mean
  expect_values(rv, {0.5 + 0.5 * 4.5, 0.5 + 0.5 * 2, 0.5 + 0.5 * 0.5}, 1e-6);  // unbiased batch var
  Tensor d = ops::dropout(ops::ones({1000}), 1.0);
  expect_values(ops::sum(d), {0});
  expect_values(ops::sum(ops::dropout(ops::ones({1000}), 0.0)), {1000});
}

}  // namespace
}  // namespace tp
