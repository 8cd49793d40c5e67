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
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(Pointwise, BinaryArithmetic) {
  Tensor a = make({1, 2, 3, 4}, {2, 2}), b = make({10, 20, 30, 40}, {2, 2});
  expect_values(ops::add(a, b), {11, 22, 33, 44});
  expect_values(ops::sub(a, b), {-9, -18, -27, -36});
  expect_values(ops::mul(a, b), {10, 40, 90, 160});
  expect_values(ops::div(a, b), {0.1, 0.1, 0.1, 0.1});
  Tensor r = ops::add(a, b);
  EXPECT_EQ(r.sizes(), (Shape{2, 2}));
  EXPECT_TRUE(r.is_contiguous());
}

TEST(Pointwise, Broadcasting) {
  Tensor a = iota({2, 3}), row = make({10, 20, 30}, {3}), col = make({100, 200}, {2, 1});
  expect_values(ops::add(a, row), {10, 21, 32, 13, 24, 35});
  expect_values(ops::add(a, col), {100, 101, 102, 203, 204, 205});
  Tensor outer = ops::mul(col, row);  // [2,1] x [3] -> [2,3]
  EXPECT_EQ(outer.sizes(), (Shape{2, 3}));
  expect_values(outer, {1000, 2000, 3000, 2000, 4000, 6000});
  expect_values(ops::add(a, ops::scalar(1.5)), {1.5, 2.5, 3.5, 4.5, 5.5, 6.5});
  expect_values(ops::sub(ops::scalar(Scalar(int64_t{10})), a), {10, 9, 8, 7, 6, 5});
}

TEST(Pointwise, BroadcastErrorNamesOpAndShapes) {
  Tensor a = iota({2, 3}), b = iota({4});
  EXPECT_THROW_MSG(ops::add(a, b), ValueError, "add", "[2, 3]", "[4]");
  EXPECT_THROW_MSG(ops::where(make({1, 0}, {2}, DType::Bool), a, a), ValueError, "where");
}

TEST(Pointwise, StridedAndTransposedInputs) {
  Tensor a = iota({3, 4});
  Tensor at = ops::transpose(a, 0, 1);  // [4, 3], strides (1, 4)
  Tensor b = iota({4, 3}, DType::Float32, 100);
  Tensor r = ops::add(at, b);
  std::vector<double> want;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) want.push_back(a.data_as<float>()[j * 4 + i] + 100 + i * 3 + j);
  expect_values(r, want);
  Tensor s = ops::slice(a, 1, 0, 4, 2);  // [3, 2], stride 2 columns
  expect_values(ops::mul(s, s), {0, 4, 16, 36, 64, 100});
  Tensor e = ops::expand(make({1, 2, 3}, {3, 1}), {3, 4});
  expect_values(ops::add(e, iota({4})), {1, 2, 3, 4, 2, 3, 4, 5, 3, 4, 5, 6});
}

TEST(Pointwise, LargeTensorsRunInParallelAndMatchSerial) {
  const int64_t n = 3 * 100003;
  Tensor a = iota({3, 100003}, DType::Float64, 0, 0.5), b = iota({100003}, DType::Float64, 1, 2);
  Tensor r = ops::add(a, b);
  auto v = values(r);
  for (int64_t i = 0; i < n; i += 9973) {
    double want = 0.5 * i + 1 + 2 * (i % 100003);
    ASSERT_DOUBLE_EQ(v[i], want);
  }
}

TEST(Pointwise, ZeroSizeAndZeroDim) {
  Tensor e = Tensor::empty({0, 3}, DType::Float32);
  Tensor r = ops::add(e, make({1, 2, 3}, {3}));
  EXPECT_EQ(r.sizes(), (Shape{0, 3}));
  EXPECT_EQ(ops::exp(e).numel(), 0);
  Tensor s = Tensor::scalar_tensor(Scalar(2.0), DType::Float32);
  Tensor q = ops::mul(s, s);
  EXPECT_EQ(q.dim(), 0);
  EXPECT_EQ(q.item().to_double(), 4.0);
  EXPECT_EQ(ops::add(s, iota({2, 2})).sizes(), (Shape{2, 2}));
}

TEST(Pointwise, IntegerAndBoolSemantics) {
  Tensor i = make({7, -7, 3}, {3}, DType::Int64), j = make({2, 2, 4}, {3}, DType::Int64);
  Tensor d = ops::div(i, j);
  EXPECT_EQ(d.dtype(), DType::Float32);
  expect_values(d, {3.5, -3.5, 0.75});
  EXPECT_EQ(ops::add(i, j).dtype(), DType::Int64);
  expect_values(ops::mul(i, j), {14, -14, 12});
  // Integer overflow wraps instead of being undefined.
  Tensor big = make({0}, {1}, DType::Int64);
  big.data_as<int64_t>()[0] = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(values(ops::add(big, ops::scalar(Scalar(int64_t{1}))))[0], static_cast<double>(std::numeric_limits<int64_t>::min()));
  Tensor b = make({1, 0, 1, 0}, {4}, DType::Bool), c = make({1, 1, 0, 0}, {4}, DType::Bool);
  expect_values(ops::add(b, c), {1, 1, 1, 0});
  expect_values(ops::mul(b, c), {1, 0, 0, 0});
  expect_values(ops::maximum(b, c), {1, 1, 1, 0});
  EXPECT_THROW_MSG(ops::sub(b, c), TypeError, "sub", "bool");
  expect_values(ops::div(b, ops::scalar(Scalar(int64_t{2}))), {0.5, 0, 0.5, 0});
}

TEST(Pointwise, Comparisons) {
  Tensor a = make({1, 2, 3, kNaN}, {4}), b = make({2, 2, 2, 2}, {4});
  struct Case {
    Tensor (*fn)(const Tensor&, const Tensor&);
    std::vector<double> want;
  } cases[] = {{ops::eq, {0, 1, 0, 0}}, {ops::ne, {1, 0, 1, 1}}, {ops::lt, {1, 0, 0, 0}},
               {ops::le, {1, 1, 0, 0}}, {ops::gt, {0, 0, 1, 0}}, {ops::ge, {0, 1, 1, 0}}};
  for (auto& c : cases) {
    Tensor r = c.fn(a, b);
    EXPECT_EQ(r.dtype(), DType::Bool);
    expect_values(r, c.want);
  }
  // Mixed dtypes compare in the promoted dtype.
  Tensor i = make({1, 2, 3}, {3}, DType::Int64);
  expect_values(ops::lt(i, ops::scalar(2.5)), {1, 1, 0});
  expect_values(ops::eq(i, make({1, 2.5, 3}, {3}, DType::Float64)), {1, 0, 1});
}

TEST(Pointwise, MaximumMinimumPropagateNaN) {
  Tensor a = make({1, kNaN, 3, -kInf}, {4}), b = make({2, 0, kNaN, 5}, {4});
  expect_values(ops::maximum(a, b), {2, kNaN, kNaN, 5});
  expect_values(ops::minimum(a, b), {1, kNaN, kNaN, -kInf});
  Tensor i = make({1, 5}, {2}, DType::Int64), j = make({3, 2}, {2}, DType::Int64);
  expect_values(ops::maximum(i, j), {3, 5});
  expect_values(ops::minimum(i, j), {1, 2});
}

TEST(Pointwise, UnaryMath) {
  Tensor x = make({-2, -0.5, 0, 0.5, 2}, {5}, DType::Float64);
  auto v = values(x);
  auto check = [&](Tensor (*fn)(const Tensor&), double (*ref)(double)) {
    auto got = values(fn(x));
    for (size_t k = 0; k < v.size(); ++k) EXPECT_NEAR(got[k], ref(v[k]), 1e-12);
  };
  check(ops::neg, [](double t) { return -t; });
  check(ops::relu, [](double t) { return t > 0 ? t : 0.0; });
  check(ops::abs, [](double t) { return std::fabs(t); });
  check(ops::exp, [](double t) { return std::exp(t); });
  check(ops::tanh, [](double t) { return std::tanh(t); });
  check(ops::sigmoid, [](double t) { return 1 / (1 + std::exp(-t)); });
  Tensor p = make({0.25, 1, 4}, {3}, DType::Float64);
  expect_values(ops::log(p), {std::log(0.25), 0, std::log(4.0)}, 1e-12);
  expect_values(ops::sqrt(p), {0.5, 1, 2}, 1e-12);
  expect_values(ops::log(make({0, -1}, {2})), {-kInf, kNaN});
}

TEST(Pointwise, Float32ExpIsAccurate) {
  std::vector<double> xs;
  for (double t = -90; t <= 88; t += 0.37) xs.push_back(t);
  xs.push_back(-kInf);
  xs.push_back(kInf);
  xs.push_back(kNaN);
  xs.push_back(-200);
  xs.push_back(200);
  Tensor x = make(xs, {static_cast<int64_t>(xs.size())});
  auto got = values(ops::exp(x));
  auto sig = values(ops::sigmoid(x));
  for (size_t i = 0; i < xs.size(); ++i) {
    float xf = static_cast<float>(xs[i]);
    double ref = std::exp(static_cast<double>(xf));
    if (std::isnan(xf)) {
      EXPECT_TRUE(std::isnan(got[i]));
      EXPECT_TRUE(std::isnan(sig[i]));
      continue;
    }
    if (static_cast<float>(ref) == 0 || std::isinf(static_cast<float>(ref))) {
      EXPECT_EQ(static_cast<float>(got[i]), static_cast<float>(ref)) << xs[i];
    } else if (ref > 1e-37) {
      EXPECT_NEAR(got[i], ref, 2.5e-7 * ref) << xs[i];
    }
    EXPECT_NEAR(sig[i], 1 / (1 + std::exp(-static_cast<double>(xf))), 3e-7) << xs[i];
  }
}

TEST(Pointwise, UnaryDtypes) {
  Tensor i = make({-1, 0, 4}, {3}, DType::Int64);
  EXPECT_EQ(ops::exp(i).dtype(), DType::Float32);
  EXPECT_EQ(ops::sqrt(i).dtype(), DType::Float32);
  expect_values(ops::sqrt(i), {kNaN, 0, 2});
  EXPECT_EQ(ops::neg(i).dtype(), DType::Int64);
  expect_values(ops::abs(i), {1, 0, 4});
  expect_values(ops::relu(i), {0, 0, 4});
  Tensor b = make({1, 0}, {2}, DType::Bool);
  EXPECT_EQ(ops::sigmoid(b).dtype(), DType::Float32);
  EXPECT_THROW_MSG(ops::neg(b), TypeError, "neg", "bool");
  EXPECT_THROW_MSG(ops::abs(b), TypeError, "abs", "bool");
}

TEST(Pointwise, ReluKeepsNaN) {
  expect_values(ops::relu(make({kNaN, -1, 2}, {3})), {kNaN, 0, 2});
}

TEST(Pointwise, Where) {
  Tensor c = make({1, 0, 1}, {3}, DType::Bool);
  Tensor a = make({1, 2, 3}, {3}), b = make({10, 20, 30}, {3}, DType::Float64);
  Tensor r = ops::where(c, a, b);
  EXPECT_EQ(r.dtype(), DType::Float64);
  expect_values(r, {1, 20, 3});
  Tensor rb = ops::where(make({1, 0}, {2, 1}, DType::Bool), a, ops::scalar(0.0));  // [2,1] x [3] -> [2,3]
  EXPECT_EQ(rb.dtype(), DType::Float32);
  expect_values(rb, {1, 2, 3, 0, 0, 0});
  EXPECT_THROW_MSG(ops::where(make({1, 0, 1}, {3}, DType::Int64), a, a), TypeError, "where", "int64");
}

TEST(Pointwise, RegistryEntries) {
  for (const char* name : {"add", "sub", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
                           "neg", "relu", "abs", "exp", "log", "sqrt", "tanh", "sigmoid", "where"}) {
    const OpDef& op = get_op(name);
    EXPECT_TRUE(op.has(kPointwise)) << name;
    EXPECT_STREQ(op.pointwise_fn, name);
  }
  EXPECT_EQ(get_op("add").num_inputs, 2);
  EXPECT_EQ(get_op("where").num_inputs, 3);
  // Inference needs no data.
  auto m = get_op("add").infer(get_op("add"), {TensorMeta::contiguous({4, 1}, DType::Int64),
                                               TensorMeta::contiguous({3}, DType::Float32)}, {});
  EXPECT_EQ(m[0].sizes, (Shape{4, 3}));
  EXPECT_EQ(m[0].dtype, DType::Float32);
}

}  // namespace
}  // namespace tp
