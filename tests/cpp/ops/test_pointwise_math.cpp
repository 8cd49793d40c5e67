// The math operators through the C++ API (api_math.h): values, dtype rules,
// in-place variants and errors. Broad value coverage is in
// tests/python/test_ops_pointwise.py (against NumPy and PyTorch).
#include <cmath>
#include <limits>

#include "ops/registry.h"
#include "test_util.h"

namespace tp {
namespace {
using test::expect_values;
using test::make;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(PointwiseMath, UnaryValuesAndPromotion) {
  Tensor x = make({0, 0.5, -1}, {3});
  expect_values(ops::sin(x), {0, std::sin(0.5), std::sin(-1.0)});
  expect_values(ops::erfinv(make({0, 0.5, 1}, {3})), {0, 0.4769362762044699, kInf}, 1e-6);
  expect_values(ops::gelu(x, "tanh"), {0, 0.34571400982514394, -0.15880800939172324}, 1e-6);
  Tensor i = make({1, 4}, {2}, DType::Int64);
  EXPECT_EQ(ops::sqrt(i).dtype(), DType::Float32);
  EXPECT_EQ(ops::floor(i).dtype(), DType::Int64);
  EXPECT_EQ(ops::isnan(make({kNaN, 1}, {2})).dtype(), DType::Bool);
  expect_values(ops::isnan(make({kNaN, 1}, {2})), {1, 0});
}

TEST(PointwiseMath, BinaryAndTernary) {
  Tensor a = make({7, -7}, {2}, DType::Int64), b = make({2, 2}, {2}, DType::Int64);
  expect_values(ops::floor_divide(a, b), {3, -4});
  expect_values(ops::remainder(a, b), {1, 1});
  expect_values(ops::fmod(a, b), {1, -1});
  expect_values(ops::div(a, b, std::optional<std::string>("trunc")), {3, -3});
  expect_values(ops::add(a, b, Scalar(int64_t{3})), {13, -1});
  Tensor x = make({-2, 0.25, 3}, {3});
  expect_values(ops::clamp(x, Scalar(-1.0), Scalar(1.0)), {-1, 0.25, 1});
  expect_values(ops::clamp(x, std::nullopt, Scalar(0.0)), {-2, 0, 0});
  expect_values(ops::lerp(x, make({0, 0, 0}, {3}), Scalar(0.5)), {-1, 0.125, 1.5});
  expect_values(ops::pow(x, ops::scalar(Scalar(2.0))), {4, 0.0625, 9});
  expect_values(ops::pow(ops::scalar(Scalar(2.0)), x), {0.25, std::pow(2.0, 0.25), 8}, 1e-6);
}

TEST(PointwiseMath, InplaceVariants) {
  Tensor x = make({0, 1}, {2});
  const auto v0 = x.version();
  ops::inplace("exp_", x);
  expect_values(x, {1, std::exp(1.0)});
  EXPECT_GT(x.version(), v0);
  ops::inplace("clamp_", x, {ops::scalar(Scalar(0.0)), ops::scalar(Scalar(2.0))});
  expect_values(x, {1, 2});
  Tensor i = make({1, 2}, {2}, DType::Int64);
  EXPECT_THROW_MSG(ops::inplace("sqrt_", i), TypeError, "sqrt_", "float32", "int64", "can't be cast");
}

TEST(PointwiseMath, Errors) {
  Tensor i = make({1, 2}, {2}, DType::Int64), z = make({1, 0}, {2}, DType::Int64);
  EXPECT_THROW_MSG(ops::remainder(i, z), Error, "ZeroDivisionError", "remainder");
  Tensor f = make({1, 2}, {2});
  EXPECT_THROW_MSG(ops::bitwise_and(f, f), TypeError, "bitwise_and", "float32");
  EXPECT_THROW_MSG(ops::atan2(make({1, 2, 3}, {3}), f), ValueError, "atan2", "[3]", "[2]");
  EXPECT_THROW_MSG(ops::silu(i), TypeError, "silu", "int64");
}

TEST(PointwiseMath, SchemasAndTags) {
  for (const char* name : {"exp", "add", "div", "pow", "clamp", "where", "gelu", "exp_", "add_", "clamp_"}) {
    const OpDef& op = get_op(name);
    EXPECT_STRNE(op.schema, "") << name;
  }
  EXPECT_TRUE(get_op("exp_").has(kInplace));
  EXPECT_TRUE(get_op("hypot").has(kPointwise));
  EXPECT_NE(std::string(get_op("add").schema).find("Scalar alpha=1"), std::string::npos);
}

}  // namespace
}  // namespace tp
