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

TEST(Copy, ToAndClone) {
  Tensor x = make({1.5, -2.7, 0, 3}, {4});
  Tensor i = ops::to_dtype(x, DType::Int64);
  EXPECT_EQ(i.dtype(), DType::Int64);
  expect_values(i, {1, -2, 0, 3});
  expect_values(ops::to_dtype(x, DType::Bool), {1, 1, 0, 1});
  EXPECT_EQ(ops::to_dtype(x, DType::Float32).impl(), x.impl());
  Tensor t = ops::transpose(iota({2, 3}), 0, 1);
  Tensor c = ops::clone(t);
  EXPECT_TRUE(c.is_contiguous());
  expect_values(c, {0, 3, 1, 4, 2, 5});
  EXPECT_NE(c.impl()->storage, t.impl()->storage);
  // NaN / out-of-range to int is defined (INT64_MIN, like x86), never UB.
  Tensor bad = make({NAN, INFINITY, 1e30}, {3}, DType::Float64);
  for (double v : values(ops::to_dtype(bad, DType::Int64))) EXPECT_EQ(v, static_cast<double>(INT64_MIN));
}

TEST(Copy, LargeTransposeCopy) {
  Tensor x = iota({300, 517}, DType::Float64);
  Tensor c = ops::contiguous(ops::transpose(x, 0, 1));
  auto v = values(c);
  for (int i = 0; i < 517; i += 13)
    for (int j = 0; j < 300; j += 7) ASSERT_EQ(v[i * 300 + j], j * 517 + i);
  Tensor b = iota({3, 40, 50});
  Tensor cb = ops::contiguous(ops::permute(b, {0, 2, 1}));
  auto vb = values(cb);
  for (int k = 0; k < 3; ++k)
    for (int i = 0; i < 50; ++i)
      for (int j = 0; j < 40; ++j) ASSERT_EQ(vb[(k * 50 + i) * 40 + j], k * 2000 + j * 50 + i);
  Tensor conv = ops::to_dtype(ops::transpose(x, 0, 1), DType::Float32);
  EXPECT_EQ(values(conv)[517 * 0 + 1 * 300 + 2], 2 * 517 + 1);
}

TEST(Copy, InPlaceArithmetic) {
  Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3});
  uint64_t v0 = x.version();
  Tensor& r = ops::add_(x, make({10, 20, 30}, {3}));
  EXPECT_EQ(&r, &x);
  EXPECT_GT(x.version(), v0);
  expect_values(x, {11, 22, 33, 14, 25, 36});
  ops::mul_(x, ops::scalar(2.0));
  expect_values(x, {22, 44, 66, 28, 50, 72});
  ops::sub_(x, ops::scalar(Scalar(int64_t{2})));
  ops::div_(x, make({2}, {1}));
  expect_values(x, {10, 21, 32, 13, 24, 35});
  // A view written in place changes its base.
  Tensor base = iota({3, 3});
  Tensor col = ops::select(base, 1, 1);
  ops::fill_(col, Scalar(-1.0));
  expect_values(base, {0, -1, 2, 3, -1, 5, 6, -1, 8});
  Tensor tb = ops::transpose(base, 0, 1);
  ops::add_(tb, ops::scalar(Scalar(int64_t{1})));
  expect_values(base, {1, 0, 3, 4, 0, 6, 7, 0, 9});
  // self + self
  ops::add_(base, base);
  expect_values(base, {2, 0, 6, 8, 0, 12, 14, 0, 18});
}

TEST(Copy, InPlaceDtypeRules) {
  Tensor i = make({1, 2}, {2}, DType::Int64);
  EXPECT_THROW_MSG(ops::add_(i, make({0.5, 0.5}, {2})), TypeError, "add_", "float32", "int64");
  EXPECT_THROW_MSG(ops::div_(i, make({2, 2}, {2}, DType::Int64)), TypeError, "div_", "float32", "int64");
  EXPECT_THROW_MSG(ops::add_(i, make({1, 2, 3}, {3}, DType::Int64)), ValueError, "add_");
  EXPECT_THROW_MSG(ops::add_(i, make({1, 2, 3, 4}, {2, 2}, DType::Int64)), ValueError, "add_", "[2]", "[2, 2]");
  Tensor f = make({1, 2}, {2});
  ops::add_(f, make({0.25, 0.25}, {2}, DType::Float64));  // float64 result cast back to float32
  EXPECT_EQ(f.dtype(), DType::Float32);
  expect_values(f, {1.25, 2.25});
  ops::add_(i, make({1, 0}, {2}, DType::Bool));
  expect_values(i, {2, 2});
  Tensor b = make({1, 0}, {2}, DType::Bool);
  EXPECT_THROW(ops::add_(b, make({1, 1}, {2}, DType::Int64)), TypeError);
  Tensor e = ops::expand(make({1}, {1}), {3});
  EXPECT_THROW_MSG(ops::add_(e, e), Error, "add_", "single memory location");
}

TEST(Copy, CopyAndFill) {
  Tensor d = Tensor::empty({2, 3}, DType::Float64);
  ops::copy_(d, make({1, 2, 3}, {3}, DType::Int64));
  expect_values(d, {1, 2, 3, 1, 2, 3});
  EXPECT_THROW_MSG(ops::copy_(d, iota({2})), ValueError, "copy_");
  ops::zero_(d);
  expect_values(d, {0, 0, 0, 0, 0, 0});
  Tensor i = Tensor::empty({2}, DType::Int64);
  ops::fill_(i, Scalar(2.7));
  expect_values(i, {2, 2});
  // Overlapping source and destination: read before written.
  Tensor x = iota({6});
  Tensor lo = ops::slice(x, 0, 0, 5, 1), hi = ops::slice(x, 0, 1, 6, 1);
  ops::copy_(hi, lo);
  expect_values(x, {0, 0, 1, 2, 3, 4});
  Tensor e = Tensor::empty({0}, DType::Float32);
  ops::copy_(e, Tensor::empty({0}, DType::Float64));
  ops::fill_(e, Scalar(1.0));
}

TEST(Factory, Basics) {
  expect_values(ops::zeros({2, 2}), {0, 0, 0, 0});
  expect_values(ops::ones({3}, DType::Int64), {1, 1, 1});
  EXPECT_EQ(ops::ones({3}, DType::Int64).dtype(), DType::Int64);
  EXPECT_EQ(ops::empty({4, 0}).numel(), 0);
  Tensor f = ops::full({2}, Scalar(int64_t{7}));
  EXPECT_EQ(f.dtype(), DType::Int64);
  EXPECT_EQ(ops::full({2}, Scalar(true)).dtype(), DType::Bool);
  EXPECT_EQ(ops::full({2}, Scalar(0.5)).dtype(), DType::Float32);
  expect_values(ops::full({2}, Scalar(0.5), DType::Float64), {0.5, 0.5});
  EXPECT_THROW_MSG(ops::zeros({2, -1}), ValueError, "zeros", "[2, -1]");
  EXPECT_THROW_MSG(ops::full({-3}, Scalar(1.0)), ValueError, "full");
  EXPECT_EQ(ops::zeros({}).dim(), 0);
  EXPECT_TRUE(get_op("zeros").has(kFactory));
  EXPECT_EQ(get_op("zeros").num_inputs, 0);
}

TEST(Factory, Arange) {
  Tensor a = ops::arange(Scalar(int64_t{0}), Scalar(int64_t{5}), Scalar(int64_t{1}));
  EXPECT_EQ(a.dtype(), DType::Int64);
  expect_values(a, {0, 1, 2, 3, 4});
  Tensor b = ops::arange(Scalar(0.0), Scalar(1.0), Scalar(0.3));
  EXPECT_EQ(b.dtype(), DType::Float32);
  expect_values(b, {0, 0.3, 0.6, 0.9});
  expect_values(ops::arange(Scalar(int64_t{10}), Scalar(int64_t{0}), Scalar(int64_t{-3})), {10, 7, 4, 1});
  EXPECT_EQ(ops::arange(Scalar(int64_t{3}), Scalar(int64_t{3}), Scalar(int64_t{1})).numel(), 0);
  expect_values(ops::arange(Scalar(int64_t{0}), Scalar(int64_t{3}), Scalar(int64_t{1}), DType::Float64), {0, 1, 2});
  EXPECT_THROW_MSG(ops::arange(Scalar(int64_t{0}), Scalar(int64_t{5}), Scalar(int64_t{0})), ValueError, "arange",
                   "nonzero");
  EXPECT_THROW_MSG(ops::arange(Scalar(int64_t{0}), Scalar(int64_t{5}), Scalar(int64_t{-1})), ValueError, "arange",
                   "sign");
  EXPECT_THROW(ops::arange(Scalar(0.0), Scalar(INFINITY), Scalar(1.0)), ValueError);
  EXPECT_THROW(ops::arange(Scalar(0.0), Scalar(1e300), Scalar(1e-300)), ValueError);
}

TEST(Factory, RandomIsSeededAndWellDistributed) {
  ops::manual_seed(123);
  Tensor a = ops::randn({1000, 100});
  Tensor u = ops::rand({100000}, DType::Float64);
  ops::manual_seed(123);
  Tensor b = ops::randn({1000, 100});
  EXPECT_EQ(values(a), values(b));
  Tensor c = ops::randn({1000, 100});
  EXPECT_NE(values(a), values(c));
  auto v = values(a);
  double m = 0, s = 0;
  for (double e : v) m += e;
  m /= v.size();
  for (double e : v) s += (e - m) * (e - m);
  s = std::sqrt(s / v.size());
  EXPECT_NEAR(m, 0, 0.02);
  EXPECT_NEAR(s, 1, 0.02);
  for (double e : v) ASSERT_TRUE(std::isfinite(e));
  auto uv = values(u);
  double um = 0, umin = 1, umax = 0;
  for (double e : uv) {
    um += e;
    umin = std::min(umin, e);
    umax = std::max(umax, e);
  }
  EXPECT_NEAR(um / uv.size(), 0.5, 0.01);
  EXPECT_GE(umin, 0.0);
  EXPECT_LT(umax, 1.0);
  // Odd sizes (tail of a Philox block) and double normals.
  Tensor d = ops::randn({7}, DType::Float64);
  for (double e : values(d)) EXPECT_TRUE(std::isfinite(e));
  EXPECT_THROW_MSG(ops::randn({3}, DType::Int64), TypeError, "randn", "int64");
  EXPECT_TRUE(get_op("randn").has(kRandom));
  EXPECT_EQ(ops::rand({0}).numel(), 0);
}

}  // namespace
}  // namespace tp
