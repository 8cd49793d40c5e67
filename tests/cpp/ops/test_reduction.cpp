#include <cmath>
#include <limits>
#include <random>

#include "ops/registry.h"
#include "test_util.h"

namespace tp {
namespace {
using test::expect_values;
using test::iota;
using test::make;
using test::values;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Reference reduction over `dims` (keepdim layout) computed in double.
std::vector<double> ref_reduce(const Tensor& x, const std::vector<bool>& mask, bool is_max) {
  auto v = values(x);
  Shape s = x.sizes();
  Shape os = s;
  for (size_t d = 0; d < s.size(); ++d)
    if (mask[d]) os[d] = 1;
  std::vector<double> out(static_cast<size_t>(numel(os)), is_max ? -INFINITY : 0.0);
  std::vector<int64_t> idx(s.size(), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t o = 0;
    for (size_t d = 0; d < s.size(); ++d) o = o * os[d] + (mask[d] ? 0 : idx[d]);
    if (is_max) out[o] = std::isnan(v[i]) || std::isnan(out[o]) ? kNaN : std::max(out[o], v[i]);
    else out[o] += v[i];
    for (size_t d = s.size(); d-- > 0;) {
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

TEST(Reduction, SumHandComputed) {
  Tensor x = iota({2, 3});  // [[0,1,2],[3,4,5]]
  expect_values(ops::sum(x), {15});
  EXPECT_EQ(ops::sum(x).dim(), 0);
  expect_values(ops::sum(x, {0}), {3, 5, 7});
  expect_values(ops::sum(x, {1}), {3, 12});
  expect_values(ops::sum(x, {-1}), {3, 12});
  Tensor k = ops::sum(x, {1}, true);
  EXPECT_EQ(k.sizes(), (Shape{2, 1}));
  expect_values(ops::sum(x, {0, 1}, true), {15});
  EXPECT_EQ(ops::sum(x, {0, 1}, true).sizes(), (Shape{1, 1}));
}

TEST(Reduction, SumDtypes) {
  Tensor b = make({1, 0, 1, 1}, {4}, DType::Bool);
  EXPECT_EQ(ops::sum(b).dtype(), DType::Int64);
  expect_values(ops::sum(b), {3});
  Tensor i = make({1, 2, 3}, {3}, DType::Int64);
  EXPECT_EQ(ops::sum(i).dtype(), DType::Int64);
  EXPECT_EQ(ops::sum(iota({3}, DType::Float64)).dtype(), DType::Float64);
}

TEST(Reduction, MatchesReferenceOnManyLayouts) {
  std::mt19937 rng(7);
  std::normal_distribution<double> nd;
  const Shape shapes[] = {{5, 7, 3}, {1, 33, 1}, {64, 40}, {3, 1000}, {2000, 3}, {4, 5, 6, 7}};
  for (const Shape& s : shapes) {
    std::vector<double> v(static_cast<size_t>(numel(s)));
    for (auto& e : v) e = nd(rng);
    Tensor x = make(v, s, DType::Float64);
    const int64_t n = static_cast<int64_t>(s.size());
    for (int64_t m = 1; m < (1 << n); ++m) {
      std::vector<int64_t> dims;
      std::vector<bool> mask(s.size(), false);
      for (int64_t d = 0; d < n; ++d)
        if (m & (1 << d)) {
          dims.push_back(d);
          mask[d] = true;
        }
      expect_values(ops::sum(x, dims, true), ref_reduce(x, mask, false), 1e-12);
      expect_values(ops::amax(x, dims, true), ref_reduce(x, mask, true), 0);
      // The same through a permuted (non-contiguous) view.
      std::vector<int64_t> perm(s.size());
      for (int64_t d = 0; d < n; ++d) perm[d] = n - 1 - d;
      Tensor xt = ops::permute(x, perm);
      std::vector<int64_t> tdims;
      std::vector<bool> tmask(s.size(), false);
      for (int64_t d : dims) {
        tdims.push_back(n - 1 - d);
        tmask[n - 1 - d] = true;
      }
      expect_values(ops::sum(xt, tdims, true), ref_reduce(xt, tmask, false), 1e-12);
      expect_values(ops::amax(xt, tdims, true), ref_reduce(xt, tmask, true), 0);
    }
  }
}

TEST(Reduction, LargeParallelPaths) {
  // Few outputs, long reductions: the reduced range is split across threads.
  Tensor x = iota({3, 200000}, DType::Float64, 0, 1e-3);
  auto r = values(ops::sum(x, {1}));
  for (int k = 0; k < 3; ++k) {
    double a = 200000.0 * k * 200000 * 1e-3 + 1e-3 * 199999.0 * 200000 / 2;
    EXPECT_NEAR(r[k], a, 1e-9 * a);
  }
  Tensor y = iota({200000, 3}, DType::Float64);
  auto c = values(ops::sum(y, {0}));
  for (int j = 0; j < 3; ++j) EXPECT_DOUBLE_EQ(c[j], 3.0 * 199999.0 * 200000 / 2 + j * 200000.0);
  Tensor f = ops::full({1 << 22}, Scalar(0.1), DType::Float32);
  // Segmented float summation stays within a few float ulps of the exact sum
  // (a naive running float sum drifts by about 1e-2 relative here).
  EXPECT_NEAR(values(ops::sum(f))[0], 0.1f * double(1 << 22), 2e-6 * 0.1 * double(1 << 22));
  EXPECT_NEAR(values(ops::sum(ops::full({1 << 20, 4}, Scalar(0.1), DType::Float32), {0}))[0], 0.1f * double(1 << 20),
              2e-6 * 0.1 * double(1 << 20));
  expect_values(ops::amax(iota({5, 100000}), {1}), {99999, 199999, 299999, 399999, 499999});
}

TEST(Reduction, AmaxNaNAndErrors) {
  expect_values(ops::amax(make({1, kNaN, 3}, {3})), {kNaN});
  expect_values(ops::amax(make({1, 5, 3, kNaN, 2, 0}, {2, 3}), {1}), {5, kNaN});
  expect_values(ops::amax(make({1, 0, 0}, {3}, DType::Bool)), {1});
  expect_values(ops::amax(make({-5, -3}, {2}, DType::Int64)), {-3});
  EXPECT_THROW_MSG(ops::amax(Tensor::empty({0}, DType::Float32)), IndexError, "amax", "[0]");
  EXPECT_THROW_MSG(ops::amax(Tensor::empty({2, 0}, DType::Float32), {1}), IndexError, "amax");
  EXPECT_EQ(ops::amax(Tensor::empty({0, 3}, DType::Float32), {1}).sizes(), (Shape{0}));
}

TEST(Reduction, EmptyAndZeroDim) {
  expect_values(ops::sum(Tensor::empty({0, 3}, DType::Float32)), {0});
  expect_values(ops::sum(Tensor::empty({0, 3}, DType::Float32), {0}), {0, 0, 0});
  Tensor s = Tensor::scalar_tensor(Scalar(4.0), DType::Float32);
  expect_values(ops::sum(s), {4});
  expect_values(ops::sum(s, {0}), {4});
  expect_values(ops::amax(s, {-1}), {4});
  EXPECT_TRUE(std::isnan(values(ops::mean(Tensor::empty({0}, DType::Float32)))[0]));
}

TEST(Reduction, DimErrors) {
  Tensor x = iota({2, 3});
  EXPECT_THROW_MSG(ops::sum(x, {2}), IndexError, "sum", "out of range");
  EXPECT_THROW_MSG(ops::sum(x, {0, -2}), ValueError, "sum", "multiple");
  EXPECT_THROW_MSG(ops::softmax(x, 3), IndexError, "softmax");
}

TEST(Reduction, Mean) {
  Tensor x = iota({2, 3});
  expect_values(ops::mean(x), {2.5});
  expect_values(ops::mean(x, {0}), {1.5, 2.5, 3.5});
  expect_values(ops::mean(x, {1}, true), {1, 4});
  EXPECT_THROW_MSG(ops::mean(iota({3}, DType::Int64)), TypeError, "mean", "int64");
  const OpDef& op = get_op("mean");
  EXPECT_TRUE(op.has(kComposite));
  ASSERT_TRUE(op.decompose);
  Tensor d = op.decompose({x}, Attrs{{"dim", std::vector<int64_t>{1}}, {"keepdim", false}})[0];
  expect_values(d, {1, 4});
}

TEST(Reduction, Softmax) {
  Tensor x = make({1, 2, 3, 1, 1, 1}, {2, 3});
  Tensor y = ops::softmax(x, -1);
  double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0), s = e1 + e2 + e3;
  expect_values(y, {e1 / s, e2 / s, e3 / s, 1.0 / 3, 1.0 / 3, 1.0 / 3});
  Tensor y0 = ops::softmax(x, 0);
  double a = std::exp(0.0), b = std::exp(1.0), c = std::exp(2.0);
  expect_values(y0, {0.5, b / (1 + b), c / (1 + c), 0.5, 1 / (1 + b), 1 / (1 + c)});
  // Large values do not overflow; a row of -inf gives NaN like PyTorch.
  expect_values(ops::softmax(make({1000, 1000}, {2}), 0), {0.5, 0.5});
  expect_values(ops::softmax(make({-INFINITY, -INFINITY}, {2}), 0), {kNaN, kNaN});
  (void)a;
  EXPECT_THROW_MSG(ops::softmax(iota({3}, DType::Int64), 0), TypeError, "softmax", "int64");
  // A transposed input and a 3-d middle dim, against the decomposition.
  std::mt19937 rng(3);
  std::normal_distribution<double> nd;
  std::vector<double> v(4 * 5 * 300);
  for (auto& e : v) e = nd(rng);
  Tensor z = make(v, {4, 5, 300}, DType::Float64);
  const OpDef& op = get_op("softmax");
  for (int64_t dim : {0, 1, 2}) {
    Tensor ref = op.decompose({z}, Attrs{{"dim", dim}})[0];
    expect_values(ops::softmax(z, dim), values(ref), 1e-12);
    Tensor zt = ops::transpose(z, 0, 2);
    Tensor reft = op.decompose({zt}, Attrs{{"dim", dim}})[0];
    expect_values(ops::softmax(zt, dim), values(reft), 1e-12);
  }
  EXPECT_EQ(ops::softmax(Tensor::empty({0, 4}, DType::Float32), 1).numel(), 0);
  expect_values(ops::softmax(Tensor::scalar_tensor(Scalar(3.0), DType::Float32), 0), {1});
}

TEST(Reduction, SumTo) {
  Tensor g = iota({2, 3});
  expect_values(ops::sum_to(g, {3}), {3, 5, 7});
  expect_values(ops::sum_to(g, {2, 1}), {3, 12});
  expect_values(ops::sum_to(g, {}), {15});
  EXPECT_EQ(ops::sum_to(g, {1, 3}).sizes(), (Shape{1, 3}));
  EXPECT_EQ(ops::sum_to(g, {2, 3}).impl(), g.impl());
  EXPECT_THROW(ops::sum_to(g, {4}), ValueError);
}

}  // namespace
}  // namespace tp
