// The per-ISA copies of the float pointwise kernels (ops/vec) must agree:
// every table this CPU can run is compared with the baseline one on random
// inputs, special values and lengths that leave vector tails.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ops/vec/vec_kernels.h"

namespace tp {
namespace {

using vec::BinaryFn;
using vec::Params;
using vec::Table;
using vec::UnaryFn;

std::vector<float> inputs(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = d(g);
  const float specials[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  for (size_t i = 0; i < n && i < 8; ++i) x[i * 3 % n] = specials[i];
  return x;
}

// Within a few float32 ulps of each other, or both NaN.
void expect_close(float a, float b, const char* what, int fn, size_t i) {
  if (std::isnan(a) || std::isnan(b)) {
    EXPECT_TRUE(std::isnan(a) && std::isnan(b)) << what << " fn " << fn << " at " << i << ": " << a << " vs " << b;
    return;
  }
  if (std::isinf(a) || std::isinf(b)) {
    EXPECT_EQ(a, b) << what << " fn " << fn << " at " << i;
    return;
  }
  const float tol = 8 * std::numeric_limits<float>::epsilon() * std::max(1.0f, std::fabs(b));
  EXPECT_NEAR(a, b, tol) << what << " fn " << fn << " at " << i;
}

Params params_for(UnaryFn f) {
  Params p;
  if (f == UnaryFn::Logit) p.a = -1;
  if (f == UnaryFn::Softplus) { p.a = 1; p.b = 20; }
  if (f == UnaryFn::Elu) p.a = 1;
  if (f == UnaryFn::LeakyRelu) p.a = 0.01;
  if (f == UnaryFn::Hardtanh) { p.a = -1; p.b = 1; }
  return p;
}

TEST(PointwiseIsa, UnaryTablesAgreeWithBaseline) {
  const Table* base = vec::table_for("base");
  ASSERT_NE(base, nullptr);
  for (const char* isa : {"avx2", "avx512"}) {
    const Table* t = vec::table_for(isa);
    if (!t) continue;  // the CPU lacks it
    for (size_t n : {1u, 5u, 16u, 31u, 257u}) {
      std::vector<float> x = inputs(n, static_cast<unsigned>(n)), ya(n), yb(n);
      for (int f = 0; f < static_cast<int>(UnaryFn::Count); ++f) {
        const Params p = params_for(static_cast<UnaryFn>(f));
        t->unary_f32[f](x.data(), ya.data(), static_cast<int64_t>(n), p);
        base->unary_f32[f](x.data(), yb.data(), static_cast<int64_t>(n), p);
        for (size_t i = 0; i < n; ++i) expect_close(ya[i], yb[i], isa, f, i);
      }
    }
  }
}

TEST(PointwiseIsa, BinaryTablesAgreeWithBaselineAllStrides) {
  const Table* base = vec::table_for("base");
  for (const char* isa : {"avx2", "avx512"}) {
    const Table* t = vec::table_for(isa);
    if (!t) continue;
    const size_t n = 77;
    std::vector<float> a = inputs(n, 1), b = inputs(n, 2), ya(n), yb(n);
    Params p;
    p.a = 1;
    for (int f = 0; f < static_cast<int>(BinaryFn::Count); ++f)
      for (int sa : {0, 1})
        for (int sb : {0, 1}) {
          t->binary_f32[f](a.data() + 3, sa, b.data() + 5, sb, ya.data(), 70, p);
          base->binary_f32[f](a.data() + 3, sa, b.data() + 5, sb, yb.data(), 70, p);
          for (size_t i = 0; i < 70; ++i) expect_close(ya[i], yb[i], isa, f, i);
        }
  }
}

TEST(PointwiseIsa, Float32MatchesDoublePrecisionReference) {
  const Table& t = vec::table();
  std::vector<float> x(1000), y(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -8.0f + 16.0f * static_cast<float>(i) / 1000.0f;
  struct Case { UnaryFn f; double (*ref)(double); };
  const Case cases[] = {{UnaryFn::Exp, [](double v) { return std::exp(v); }},
                        {UnaryFn::Sin, [](double v) { return std::sin(v); }},
                        {UnaryFn::Tanh, [](double v) { return std::tanh(v); }},
                        {UnaryFn::Erf, [](double v) { return std::erf(v); }},
                        {UnaryFn::Atan, [](double v) { return std::atan(v); }},
                        {UnaryFn::Sigmoid, [](double v) { return 1 / (1 + std::exp(-v)); }}};
  for (const auto& c : cases) {
    t.unary_f32[static_cast<int>(c.f)](x.data(), y.data(), 1000, {});
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = c.ref(x[i]);
      EXPECT_NEAR(y[i], want, 4 * std::numeric_limits<float>::epsilon() * std::max(1e-3, std::fabs(want)))
          << "fn " << static_cast<int>(c.f) << " x " << x[i];
    }
  }
}

TEST(PointwiseIsa, TableNamesTheChosenIsa) {
  const std::string name = vec::table().isa;
  EXPECT_TRUE(name == "avx512" || name == "avx2" || name == "base") << name;
}

}  // namespace
}  // namespace tp
