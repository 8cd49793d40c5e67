// Eager's own float32 erfc (ops/vec/erfc_f32.inc, used by the AVX2 and
// AVX-512 tables): its error against erfc computed in float64, on a dense
// sample of all float bit patterns plus the special values and the edges
// (±0, ±inf, NaN, subnormals, the underflow boundary near 10.054, the
// saturation at 2 below -3.9). The exhaustive check over all 2^32 inputs
// runs when TP_ERFC_EXHAUSTIVE=1 (about a minute per ISA on a quiet core).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "ops/vec/vec_kernels.h"

namespace tp {
namespace {

using vec::Params;
using vec::UnaryFn;

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
int64_t bits_of(float f) {
  int32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
// The ulp of the float nearest to y (2^-149 below the normal range).
double ulp_at(double y) {
  const float f = std::fabs(static_cast<float>(y));
  if (f < std::numeric_limits<float>::min()) return std::ldexp(1.0, -149);
  int e;
  std::frexp(f, &e);
  return std::ldexp(1.0, e - 24);
}

struct Errors {
  double max_ulp = 0;        // |got - erfc(x)| in ulps of the result
  int64_t max_steps = 0;     // float steps between got and erfc(x) rounded to float
  float worst = 0;
  int64_t nan_mismatches = 0;
  int64_t count = 0;
};

void check(const vec::Table& t, const std::vector<float>& x, Errors& e) {
  std::vector<float> y(x.size());
  t.unary_f32[static_cast<int>(UnaryFn::Erfc)](x.data(), y.data(), static_cast<int64_t>(x.size()), Params{});
  for (size_t i = 0; i < x.size(); ++i) {
    ++e.count;
    const double want = std::erfc(static_cast<double>(x[i]));
    if (std::isnan(want) || std::isnan(y[i])) {
      e.nan_mismatches += std::isnan(want) != std::isnan(y[i]);
      continue;
    }
    const double u = std::fabs(y[i] - want) / ulp_at(want);
    const int64_t steps = std::llabs(bits_of(y[i]) - bits_of(static_cast<float>(want)));  // results are >= 0
    if (u > e.max_ulp) {
      e.max_ulp = u;
      e.worst = x[i];
    }
    if (steps > e.max_steps) e.max_steps = steps;
  }
}

std::vector<float> edge_values() {
  std::vector<float> v = {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                          from_bits(0x7f800001u),  // signalling NaN
                          std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::min(), -std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                          10.125f, 10.2f, 26.0f, -3.9f, -3.92f, -4.0f, -10.0f, 0.5f, 1.0f, 2.0f, 9.194f};
  // Consecutive floats around the underflow boundary (erfc(x) ~ 2^-150 at x ~ 10.0541)
  // and around the start of the subnormal results (x ~ 9.19), and small subnormal inputs.
  for (float c : {10.0541f, 9.1945f, -3.9192f})
    for (int k = -300; k <= 300; ++k) v.push_back(from_bits(static_cast<uint32_t>(bits_of(c) + k)));
  for (uint32_t b = 1; b < 2000; b += 7) {
    v.push_back(from_bits(b));
    v.push_back(from_bits(b | 0x80000000u));
  }
  return v;
}

TEST(ErfcF32, DenseSampleAndEdgesWithinTwoUlp) {
  int tested = 0;
  for (const char* isa : {"avx2", "avx512"}) {
    const vec::Table* t = vec::table_for(isa);
    if (!t) continue;  // the CPU or the build lacks it
    ++tested;
    Errors e;
    // Every 4093rd bit pattern (~1M inputs, both signs, all exponents), in blocks
    // whose lengths leave vector tails.
    std::vector<float> x;
    for (uint64_t b = 0; b < (1ull << 32); b += 4093) {
      x.push_back(from_bits(static_cast<uint32_t>(b)));
      if (x.size() == 65537) {
        check(*t, x, e);
        x.clear();
      }
    }
    check(*t, x, e);
    check(*t, edge_values(), e);
    EXPECT_EQ(e.nan_mismatches, 0) << isa;
    // The contract: at most 2 float steps from erfc rounded to float. Measured
    // over all inputs: 1.71 ulp from the exact value (see erfc_f32.inc).
    EXPECT_LE(e.max_steps, 2) << isa << " worst x = " << e.worst;
    EXPECT_LT(e.max_ulp, 1.75) << isa << " worst x = " << e.worst;
  }
  if (!tested) GTEST_SKIP() << "no AVX2 / AVX-512 table on this CPU";
}

TEST(ErfcF32, SpecialValuesExactly) {
  for (const char* isa : {"avx2", "avx512"}) {
    const vec::Table* t = vec::table_for(isa);
    if (!t) continue;
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> x = {0.0f, -0.0f, inf, -inf, 10.06f, 30.0f, -4.0f, -1e30f, std::nanf(""), 1e-30f, -1e-30f};
    std::vector<float> y(x.size());
    t->unary_f32[static_cast<int>(UnaryFn::Erfc)](x.data(), y.data(), static_cast<int64_t>(x.size()), Params{});
    EXPECT_EQ(y[0], 1.0f) << isa;
    EXPECT_EQ(y[1], 1.0f) << isa;
    EXPECT_EQ(y[2], 0.0f) << isa;
    EXPECT_EQ(y[3], 2.0f) << isa;
    EXPECT_EQ(y[4], 0.0f) << isa;  // erfc(10.06) < 2^-150: rounds to 0
    EXPECT_EQ(y[5], 0.0f) << isa;
    EXPECT_EQ(y[6], 2.0f) << isa;
    EXPECT_EQ(y[7], 2.0f) << isa;
    EXPECT_TRUE(std::isnan(y[8])) << isa;
    EXPECT_EQ(y[9], 1.0f) << isa;
    EXPECT_EQ(y[10], 1.0f) << isa;
  }
}

// All 2^32 inputs (TP_ERFC_EXHAUSTIVE=1): the result recorded in ARCHITECTURE.md.
TEST(ErfcF32, Exhaustive) {
  const char* env = std::getenv("TP_ERFC_EXHAUSTIVE");
  if (!env || std::string(env) != "1") GTEST_SKIP() << "set TP_ERFC_EXHAUSTIVE=1 to run all 2^32 inputs";
  for (const char* isa : {"avx2", "avx512"}) {
    const vec::Table* t = vec::table_for(isa);
    if (!t) continue;
    Errors e;
    std::vector<float> x(1 << 20);
    for (uint64_t b = 0; b < (1ull << 32); b += x.size()) {
      for (size_t i = 0; i < x.size(); ++i) x[i] = from_bits(static_cast<uint32_t>(b + i));
      check(*t, x, e);
    }
    EXPECT_EQ(e.count, int64_t{1} << 32);
    EXPECT_EQ(e.nan_mismatches, 0) << isa;
    EXPECT_LE(e.max_steps, 2) << isa;
    std::printf("[%s] all 2^32 floats: max %.4f ulp from erfc (at x = %.9g), max %lld steps from erfc rounded\n", isa,
                e.max_ulp, static_cast<double>(e.worst), static_cast<long long>(e.max_steps));
  }
}

}  // namespace
}  // namespace tp
