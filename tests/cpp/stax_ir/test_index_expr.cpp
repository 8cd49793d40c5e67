// Tests for the symbolic index-expression algebra (csrc/stax/ir/index_expr.h).
#include <gtest/gtest.h>

#include <climits>
#include <random>
#include <unordered_set>

#include "core/error.h"
#include "stax/ir/index_expr.h"

namespace tp::stax::ir {
namespace {

using Op = IndexOp;

IndexExpr add(std::vector<IndexExpr> ops) { return IndexExpr::make(Op::Add, std::move(ops)); }
IndexExpr mul(std::vector<IndexExpr> ops) { return IndexExpr::make(Op::Mul, std::move(ops)); }

class IndexExprTest : public ::testing::Test {
 protected:
  IndexExpr i = var(0, "i");
  IndexExpr j = var(1, "j");
  IndexExpr k = var(2, "k");
  IndexExpr o = var(3, "o");
};

// ---- construction, printing, equality, hashing -----------------------------------

TEST_F(IndexExprTest, LeavesAndAccessors) {
  IndexExpr zero;
  EXPECT_TRUE(zero.is_const());
  EXPECT_EQ(zero.const_value(), 0);
  IndexExpr c = 42;
  EXPECT_EQ(c.op(), Op::Const);
  EXPECT_EQ(c.const_value(), 42);
  EXPECT_TRUE(i.is_var());
  EXPECT_EQ(i.var_id(), 0);
  EXPECT_EQ(i.var_name(), "i");
  EXPECT_TRUE(i.operands().empty());
  EXPECT_THROW(i.const_value(), ValueError);
  EXPECT_THROW(c.var_id(), ValueError);
  IndexExpr e = i * 4 + 1;
  EXPECT_EQ(e.op(), Op::Add);
  ASSERT_EQ(e.operands().size(), 2u);
  EXPECT_EQ(e.operands()[0].op(), Op::Mul);
  EXPECT_EQ(e.operands()[1].const_value(), 1);
}

TEST_F(IndexExprTest, MakeChecksArity) {
  EXPECT_THROW(IndexExpr::make(Op::FloorDiv, {i}), ValueError);
  EXPECT_THROW(IndexExpr::make(Op::Mod, {i, j, k}), ValueError);
  EXPECT_THROW(IndexExpr::make(Op::Add, {i}), ValueError);
  EXPECT_THROW(IndexExpr::make(Op::Const, {}), ValueError);
  EXPECT_EQ(add({i, j, k}).operands().size(), 3u);
}

TEST_F(IndexExprTest, ToString) {
  IndexExpr i0 = var(0, "i0"), r0 = var(5, "r0");
  EXPECT_EQ((i0 * 2048 + r0).to_string(), "((i0 * 2048) + r0)");
  EXPECT_EQ(floordiv(i0, 4).to_string(), "(i0 // 4)");
  EXPECT_EQ(mod(i0, 4).to_string(), "(i0 % 4)");
  EXPECT_EQ(min(i0, 7).to_string(), "min(i0, 7)");
  EXPECT_EQ(max(i0, r0).to_string(), "max(i0, r0)");
  EXPECT_EQ((i0 - 1).to_string(), "(i0 - 1)");
  EXPECT_EQ((i0 - r0).to_string(), "(i0 - r0)");
  EXPECT_EQ(add({i0, mul({r0, -3}), -2}).to_string(), "(i0 - (r0 * 3) - 2)");
  EXPECT_EQ((-i0).to_string(), "(i0 * -1)");
  EXPECT_EQ(IndexExpr(-5).to_string(), "-5");
  EXPECT_EQ(var(7, "").to_string(), "v7");
}

TEST_F(IndexExprTest, StructuralEqualityAndHash) {
  EXPECT_EQ(i * 4 + j, i * 4 + j);
  EXPECT_NE(i * 4 + j, j + i * 4);  // structural, not semantic
  EXPECT_NE(floordiv(i, 4), mod(i, 4));
  EXPECT_NE(IndexExpr(3), IndexExpr(4));
  EXPECT_EQ(var(9, "a"), var(9, "b"));  // identity is the id
  EXPECT_NE(var(9, "a"), var(10, "a"));
  EXPECT_EQ((i * 4 + j).hash(), (i * 4 + j).hash());
  EXPECT_EQ(IndexExprHash()(floordiv(i, 3)), floordiv(i, 3).hash());
  std::unordered_set<IndexExpr, IndexExprHash> set{i + j, i + j, j + i, mod(k, 2)};
  EXPECT_EQ(set.size(), 3u);
  EXPECT_EQ(IndexExpr(), IndexExpr(0));
}

TEST_F(IndexExprTest, IdenticalAlsoComparesTheSpelling) {
  EXPECT_TRUE(identical(var(9, "a") * 4 + 1, var(9, "a") * 4 + 1));
  EXPECT_FALSE(identical(var(9, "a") * 4 + 1, var(9, "b") * 4 + 1));  // == holds, the print differs
  EXPECT_FALSE(identical(var(9, "a"), var(10, "a")));
  EXPECT_FALSE(identical(i * 4 + j, j + i * 4));
  EXPECT_TRUE(identical(mod(size_var(0) + i, 3), mod(size_var(0) + i, 3)));
  EXPECT_TRUE(identical(IndexExpr(7), IndexExpr(7)));
}

TEST_F(IndexExprTest, CompareIsATotalOrderByLeadingVariable) {
  EXPECT_EQ(compare(i + j, i + j), 0);
  EXPECT_LT(compare(i, j), 0);
  EXPECT_GT(compare(j, i), 0);
  EXPECT_LT(compare(floordiv(i, 4), j), 0);  // leading variable first
  EXPECT_LT(compare(j, IndexExpr(3)), 0);     // constants last
  EXPECT_LT(compare(floordiv(i, 4), mod(i, 4)), 0);
}

TEST_F(IndexExprTest, SubstituteAndDependsOn) {
  IndexExpr e = i * 8 + floordiv(j, 2);
  IndexExpr s = substitute(e, {{1, k + 1}});
  EXPECT_EQ(s, i * 8 + floordiv(k + 1, 2));
  EXPECT_EQ(substitute(e, {{7, k}}), e);
  EXPECT_TRUE(depends_on(e, 0));
  EXPECT_TRUE(depends_on(e, 1));
  EXPECT_FALSE(depends_on(e, 2));
  EXPECT_TRUE(depends_on(s, 2));
  EXPECT_FALSE(depends_on(s, 1));
}

TEST_F(IndexExprTest, EvaluateUsesFloorSemantics) {
  std::unordered_map<int, int64_t> at{{0, -7}, {1, 2}, {2, -2}};
  EXPECT_EQ(evaluate(floordiv(i, j), at), -4);
  EXPECT_EQ(evaluate(mod(i, j), at), 1);
  EXPECT_EQ(evaluate(floordiv(i, k), at), 3);
  EXPECT_EQ(evaluate(mod(i, k), at), -1);
  EXPECT_EQ(evaluate(mod(7, k), at), -1);
  EXPECT_EQ(evaluate(floordiv(7, k), at), -4);
  EXPECT_EQ(evaluate(min(i, j) + max(i, j) * 10, at), 13);
  EXPECT_THROW(evaluate(floordiv(i, j - 2), at), ValueError);
  EXPECT_THROW(evaluate(mod(i, 0), at), ValueError);
  EXPECT_THROW(evaluate(var(9, "z"), at), ValueError);
  EXPECT_THROW(evaluate(IndexExpr(INT64_MAX) + 1, at), ValueError);
}

// ---- simplifier: exact forms -------------------------------------------------------

TEST_F(IndexExprTest, ConstantFolding) {
  EXPECT_EQ(simplify(IndexExpr(3) + 4), IndexExpr(7));
  EXPECT_EQ(simplify(IndexExpr(3) - 10), IndexExpr(-7));
  EXPECT_EQ(simplify(IndexExpr(6) * -7), IndexExpr(-42));
  EXPECT_EQ(simplify(floordiv(-7, 2)), IndexExpr(-4));
  EXPECT_EQ(simplify(floordiv(7, -2)), IndexExpr(-4));
  EXPECT_EQ(simplify(floordiv(-7, -2)), IndexExpr(3));
  EXPECT_EQ(simplify(mod(-7, 2)), IndexExpr(1));
  EXPECT_EQ(simplify(mod(7, -3)), IndexExpr(-2));
  EXPECT_EQ(simplify(mod(-7, -3)), IndexExpr(-1));
  EXPECT_EQ(simplify(min(3, -5)), IndexExpr(-5));
  EXPECT_EQ(simplify(max(3, -5)), IndexExpr(3));
  EXPECT_EQ(simplify(floordiv(IndexExpr(10) * 3 + 2, mod(17, 5))), IndexExpr(16));
  // Division by a constant zero is left alone (undefined), not folded.
  EXPECT_EQ(simplify(floordiv(IndexExpr(4), 0)), floordiv(IndexExpr(4), 0));
}

TEST_F(IndexExprTest, CanonicalAffineSums) {
  EXPECT_EQ(simplify(i * 2 + i * 3), mul({i, 5}));
  EXPECT_EQ(simplify(i * 2 + i * 3).to_string(), "(i * 5)");
  EXPECT_EQ(simplify(i * 1), i);
  EXPECT_EQ(simplify(i * 0), IndexExpr(0));
  EXPECT_EQ(simplify(i + 0), i);
  EXPECT_EQ(simplify(i - i), IndexExpr(0));
  EXPECT_EQ(simplify((i + 2) * 3), add({mul({i, 3}), 6}));
  EXPECT_EQ(simplify((i + 2) * 3).to_string(), "((i * 3) + 6)");
  EXPECT_EQ(simplify(IndexExpr(3) * (2 + i)), add({mul({i, 3}), 6}));
  // Constants last, terms ordered by variable id, nested sums flattened.
  EXPECT_EQ(simplify(5 + (k + (j + i))), add({i, j, k, 5}));
  EXPECT_EQ(simplify(5 + (k + (j + i))).to_string(), "(i + j + k + 5)");
  EXPECT_EQ(simplify((k * 2 + 1) + (i * 3 - 1) + j * 4), add({mul({i, 3}), mul({j, 4}), mul({k, 2})}));
  // Equal expressions print identically whatever the construction order.
  EXPECT_EQ(simplify((k + j * 2) + i).to_string(), simplify(i + (j + k + j)).to_string());
  EXPECT_EQ(simplify(i - j * 2 - 3).to_string(), "(i - (j * 2) - 3)");
  // Nested products flatten; constants multiply and go last.
  EXPECT_EQ(simplify((i * 2) * (j * 3)), mul({i, j, 6}));
  EXPECT_EQ(simplify(j * i), mul({i, j}));
  EXPECT_EQ(simplify((i + 1) * 2 * 4 - i * 8), IndexExpr(8));
}

TEST_F(IndexExprTest, DivModByRange) {
  RangeMap r{{0, {0, 3}}, {1, {0, 7}}, {2, {-4, -1}}};
  EXPECT_EQ(simplify(floordiv(i, 4), r), IndexExpr(0));
  EXPECT_EQ(simplify(mod(i, 4), r), i);
  EXPECT_EQ(simplify(floordiv(i + 4, 4), r), IndexExpr(1));
  EXPECT_EQ(simplify(mod(i + 4, 4), r), i);
  EXPECT_EQ(simplify(floordiv(k, 4), r), IndexExpr(-1));  // floor, not truncation
  EXPECT_EQ(simplify(mod(k, 4), r), k + 4);
  EXPECT_NE(simplify(floordiv(j, 4), r), IndexExpr(0));  // j reaches 7
  EXPECT_EQ(simplify(floordiv(j, 4), r), floordiv(j, 4));
  EXPECT_EQ(simplify(floordiv(j, 8), r), IndexExpr(0));
}

TEST_F(IndexExprTest, DivModSplitsMultiples) {
  // (a*c + b) // c -> a + b // c  and  (a*c + b) % c -> b % c, for any b.
  EXPECT_EQ(simplify(floordiv(i * 4 + j, 4)), i + floordiv(j, 4));
  EXPECT_EQ(simplify(mod(i * 4 + j, 4)), mod(j, 4));
  EXPECT_EQ(simplify(floordiv(i * 8 + j * 4 + 6, 4)), add({mul({i, 2}), j, 1}));
  EXPECT_EQ(simplify(mod(i * 8 + j * 4 + 6, 4)), IndexExpr(2));
  // With b's range in [0, c) the remainder division vanishes.
  RangeMap r{{1, {0, 3}}};
  EXPECT_EQ(simplify(floordiv(i * 4 + j, 4), r), i);
  EXPECT_EQ(simplify(mod(i * 4 + j, 4), r), j);
  EXPECT_EQ(simplify(floordiv(i * 4 + j + 5, 4), r).to_string(), "(i + ((j + 1) // 4) + 1)");
  // Common factors cancel: (2i + 2) // 4 == (i + 1) // 2.
  EXPECT_EQ(simplify(floordiv(i * 2 + 2, 4)), floordiv(i + 1, 2));
  EXPECT_EQ(simplify(floordiv(i * 6 + 2, 4)).to_string(), "(i + ((i + 1) // 2))");
  // Negative coefficients split toward zero, keeping // and % in step.
  EXPECT_EQ(simplify(floordiv(i * -5 + 1, 4)).to_string(), "((i * -1) + (((i * -1) + 1) // 4))");
  EXPECT_EQ(simplify(mod(i * -5 + 1, 4)).to_string(), "(((i * -1) + 1) % 4)");
}

TEST_F(IndexExprTest, DivModDropsAPartBelowTheCommonFactor) {
  // A view merging dims of a view: (1024*i + j) // 131072 with j in [0, 1024)
  // is i // 128, so the digits recombine into the flat index again.
  RangeMap r{{0, {0, 2047}}, {1, {0, 1023}}};
  EXPECT_EQ(simplify(floordiv(i * 1024 + j, 131072), r), floordiv(i, 128));
  EXPECT_EQ(simplify(mod(i * 1024 + j, 131072), r), add({mul({mod(i, 128), 1024}), j}));
  IndexExpr flat = i * 1024 + j;
  EXPECT_EQ(simplify(floordiv(flat, 131072) * 131072 + mod(floordiv(flat, 1024), 128) * 1024 + mod(flat, 1024), r),
            simplify(flat));
  // Not when the small part can reach the factor (j up to 1024 here).
  RangeMap wide{{0, {0, 2047}}, {1, {0, 1024}}};
  EXPECT_EQ(simplify(floordiv(i * 1024 + j, 131072), wide), floordiv(i * 1024 + j, 131072));
  // Nor when it can be negative.
  RangeMap neg{{0, {0, 2047}}, {1, {-1, 10}}};
  EXPECT_EQ(simplify(floordiv(i * 1024 + j, 131072), neg), floordiv(i * 1024 + j, 131072));
}

TEST_F(IndexExprTest, NestedDivMod) {
  EXPECT_EQ(simplify(floordiv(floordiv(i, 4), 8)), floordiv(i, 32));
  EXPECT_EQ(simplify(floordiv(mod(i, 12), 4)), mod(floordiv(i, 4), 3));
  EXPECT_EQ(simplify(mod(mod(i, 12), 4)), mod(i, 4));
  EXPECT_EQ(simplify(mod(mod(i, 12), 5)), mod(mod(i, 12), 5));  // 12 not a multiple of 5
  EXPECT_EQ(simplify(floordiv(mod(i, 4), 4)), IndexExpr(0));
  EXPECT_EQ(simplify(mod(mod(i, 4), 8)), mod(i, 4));
  EXPECT_EQ(simplify(floordiv(i, 1)), i);
  EXPECT_EQ(simplify(mod(i, 1)), IndexExpr(0));
}

TEST_F(IndexExprTest, DivModRecombinationUndoesFlattening) {
  // The key rule, no ranges needed: (x // c) * c + x % c == x.
  EXPECT_EQ(simplify(floordiv(o, 7) * 7 + mod(o, 7)), o);
  EXPECT_EQ(simplify(mod(o, 7) + floordiv(o, 7) * 7), o);
  // Strided: (x // c) * (c*k) + (x % c) * k == x * k.
  EXPECT_EQ(simplify(floordiv(o, 4) * 12 + mod(o, 4) * 3), mul({o, 3}));
  EXPECT_EQ(simplify(floordiv(o, 4) * -12 - mod(o, 4) * 3 + 1), add({mul({o, -3}), 1}));
  // x is itself a sum.
  IndexExpr x = i * 3 + j;
  EXPECT_EQ(simplify(floordiv(x, 4) * 4 + mod(x, 4)), simplify(x));
  // Not recombinable: coefficients do not match.
  IndexExpr partial = simplify(floordiv(o, 4) * 3 + mod(o, 4));
  EXPECT_EQ(partial, add({mul({floordiv(o, 4), 3}), mod(o, 4)}));
}

TEST_F(IndexExprTest, FlattenedLoopsSimplifyBackToTheFlatVariable) {
  // 2-D [M, N] loop flattened into o: i0 = o // N, i1 = o % N.
  const int64_t N = 2048;
  IndexExpr i0 = var(10, "i0"), i1 = var(11, "i1");
  IndexExpr offset = i0 * N + i1;
  IndexExpr flat = substitute(offset, {{10, floordiv(o, N)}, {11, mod(o, N)}});
  EXPECT_EQ(simplify(flat), o);
  EXPECT_EQ(simplify(flat, {{3, {0, 64 * N - 1}}}), o);
  // 3-D [2, 3, 4], index digits written the two usual ways.
  IndexExpr i2 = var(12, "i2");
  IndexExpr off3 = i0 * 12 + i1 * 4 + i2;
  IndexExpr a = substitute(off3, {{10, floordiv(o, 12)}, {11, floordiv(mod(o, 12), 4)}, {12, mod(o, 4)}});
  IndexExpr b = substitute(off3, {{10, floordiv(o, 12)}, {11, mod(floordiv(o, 4), 3)}, {12, mod(o, 4)}});
  EXPECT_EQ(simplify(a), o);
  EXPECT_EQ(simplify(b), o);
  EXPECT_EQ(simplify(a, {{3, {0, 23}}}), o);
  // Strided (every element doubled): offset 2*(flat index) + base.
  IndexExpr strided = substitute(i0 * 24 + i1 * 8 + i2 * 2 + 5,
                                 {{10, floordiv(o, 12)}, {11, floordiv(mod(o, 12), 4)}, {12, mod(o, 4)}});
  EXPECT_EQ(simplify(strided), add({mul({o, 2}), 5}));
  // A transposed view does not collapse, but keeps its value (randomized test).
  IndexExpr transposed = simplify(substitute(i1 * 2 + i0, {{10, floordiv(o, 3)}, {11, mod(o, 3)}}));
  EXPECT_TRUE(depends_on(transposed, 3));
  EXPECT_NE(transposed, o);
}

TEST_F(IndexExprTest, MinMaxFolding) {
  RangeMap r{{0, {0, 3}}, {1, {4, 9}}, {2, {0, 100}}};
  EXPECT_EQ(simplify(min(i, j), r), i);
  EXPECT_EQ(simplify(max(i, j), r), j);
  EXPECT_EQ(simplify(min(j, i), r), i);
  EXPECT_EQ(simplify(min(i, 3), r), i);   // hi == other's lo is enough
  EXPECT_EQ(simplify(max(i, 3), r), IndexExpr(3));
  EXPECT_EQ(simplify(min(k, 50), r), min(k, 50));
  EXPECT_EQ(simplify(min(k, k + 1)), k);  // through the difference, no ranges
  EXPECT_EQ(simplify(max(k * 2 + 3, k * 2 - 1)), add({mul({k, 2}), 3}));
  EXPECT_EQ(simplify(min(min(k, 50), min(o, 7))), IndexExpr::make(Op::Min, {k, o, 7}));
  EXPECT_EQ(simplify(min(min(k, 50), min(o, 7))).to_string(), "min(k, o, 7)");
  EXPECT_EQ(simplify(min(k, k)), k);
  EXPECT_EQ(simplify(max(o, k)), max(k, o));  // sorted operands
}

TEST_F(IndexExprTest, PointRangeVariableIsAConstant) {
  EXPECT_EQ(simplify(i * 8 + j, {{0, {2, 2}}}), j + 16);
}

TEST_F(IndexExprTest, SimplifyIsIdempotentOnTheExamples) {
  std::vector<IndexExpr> es = {
      floordiv(o, 7) * 7 + mod(o, 7), floordiv(i * 6 + 2, 4), mod(floordiv(mod(o, 24), 4), 3) * 5 + k,
      min(i + 1, j) * 2 + max(k, 3), floordiv(floordiv(i * 12 + j, 3), 2) - mod(i * 5 + j, 6)};
  for (const IndexExpr& e : es) {
    IndexExpr s = simplify(e);
    EXPECT_EQ(simplify(s), s) << e.to_string() << " -> " << s.to_string();
  }
}

// ---- simplifier: randomized semantic equivalence -------------------------------------

struct RandomExprs {
  std::mt19937_64 rng{12345};
  std::vector<IndexExpr> vars{var(0, "a"), var(1, "b"), var(2, "c"), var(3, "d")};
  // d is a positive divisor variable; a, b, c span zero.
  RangeMap ranges{{0, {0, 15}}, {1, {-7, 7}}, {2, {0, 63}}, {3, {1, 5}}};

  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }

  IndexExpr leaf() {
    if (uniform(0, 2) == 0) return IndexExpr(uniform(-8, 8));
    return vars[uniform(0, 2)];
  }

  IndexExpr divisor() {
    switch (uniform(0, 5)) {
      case 0: return IndexExpr(uniform(-4, -1));
      case 1: return vars[3];
      default: return IndexExpr(uniform(1, 8));
    }
  }

  IndexExpr gen(int depth) {
    if (depth == 0 || uniform(0, 5) == 0) return leaf();
    IndexExpr a = gen(depth - 1);
    switch (uniform(0, 9)) {
      case 0: return a + gen(depth - 1);
      case 1: return a - gen(depth - 1);
      case 2: return a * uniform(-4, 4);
      case 3: return a * gen(depth - 1);
      case 4: return floordiv(a, divisor());
      case 5: return mod(a, divisor());
      case 6: return min(a, gen(depth - 1));
      case 7: return max(a, gen(depth - 1));
      case 8: {  // flatten idiom on a random subexpression
        int64_t c = uniform(1, 6);
        return floordiv(a, c) * (c * 2) + mod(a, c) * 2;
      }
      default: return floordiv(a, uniform(1, 4)) * uniform(1, 4) + gen(depth - 1);
    }
  }

  std::unordered_map<int, int64_t> point() {
    std::unordered_map<int, int64_t> p;
    for (const auto& [id, r] : ranges) p[id] = uniform(r.lo, r.hi);
    return p;
  }
};

TEST(IndexSimplifyRandom, PreservesValueIsIdempotentAndRangesAreSound) {
  RandomExprs g;
  int checked_points = 0, changed = 0;
  for (int n = 0; n < 4000; ++n) {
    IndexExpr e = g.gen(4);
    // Half the cases use the ranges, half simplify without any.
    bool use_ranges = n % 2 == 0;
    IndexExpr s = use_ranges ? simplify(e, g.ranges) : simplify(e);
    ASSERT_EQ(use_ranges ? simplify(s, g.ranges) : simplify(s), s)
        << "not idempotent: " << e.to_string() << " -> " << s.to_string();
    changed += !(s == e);
    Interval re = range_of(e, g.ranges), rs = range_of(s, g.ranges);
    for (int p = 0; p < 16; ++p) {
      auto at = g.point();
      int64_t want;
      try {
        want = evaluate(e, at);
      } catch (const ValueError&) {
        continue;  // undefined at this point (division by a zero-valued expression)
      }
      int64_t got = evaluate(s, at);
      ASSERT_EQ(got, want) << e.to_string() << " -> " << s.to_string() << " at a=" << at[0]
                           << " b=" << at[1] << " c=" << at[2] << " d=" << at[3];
      ASSERT_TRUE(re.lo <= want && want <= re.hi) << "range_of unsound for " << e.to_string();
      ASSERT_TRUE(rs.lo <= got && got <= rs.hi) << "range_of unsound for " << s.to_string();
      ++checked_points;
    }
  }
  EXPECT_GT(checked_points, 30000);
  EXPECT_GT(changed, 2000);  // the generator exercises the simplifier
}

// Random shapes, flattened and unflattened: contiguous offsets always collapse
// back to the flat variable; permuted strides keep their value.
TEST(IndexSimplifyRandom, FlattenRoundTrip) {
  std::mt19937_64 rng(7);
  IndexExpr o = var(100, "o");
  for (int n = 0; n < 300; ++n) {
    int rank = std::uniform_int_distribution<int>(1, 4)(rng);
    std::vector<int64_t> shape(rank);
    for (auto& s : shape) s = std::uniform_int_distribution<int64_t>(1, 6)(rng);
    std::vector<int64_t> strides(rank);
    int64_t numel = 1;
    for (int d = rank - 1; d >= 0; --d) {
      strides[d] = numel;
      numel *= shape[d];
    }
    // Digits of o, written as (o // stride) % size (outermost: o // stride).
    IndexExpr offset, permuted;
    std::vector<int> perm(rank);
    for (int d = 0; d < rank; ++d) perm[d] = d;
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int d = 0; d < rank; ++d) {
      IndexExpr digit = d == 0 ? floordiv(o, strides[d]) : mod(floordiv(o, strides[d]), shape[d]);
      if (d > 0 && n % 2) digit = floordiv(mod(o, strides[d] * shape[d]), strides[d]);
      offset = offset + digit * strides[d];
      permuted = permuted + digit * strides[perm[d]];
    }
    RangeMap r{{100, {0, numel - 1}}};
    EXPECT_EQ(simplify(offset, r), numel == 1 ? IndexExpr(0) : o) << offset.to_string();
    EXPECT_EQ(simplify(offset * 3 + 1), simplify(o * 3 + 1)) << offset.to_string();
    IndexExpr sp = simplify(permuted, r);
    EXPECT_EQ(simplify(sp, r), sp);
    for (int64_t v = 0; v < numel; ++v) {
      ASSERT_EQ(evaluate(sp, {{100, v}}), evaluate(permuted, {{100, v}})) << permuted.to_string();
    }
  }
}

// ---- range analysis --------------------------------------------------------------------

TEST_F(IndexExprTest, RangeOfExamples) {
  RangeMap r{{0, {0, 511}}};
  Interval m = range_of(mod(i * 3 + 5, 128), r);
  EXPECT_EQ(m.lo, 0);
  EXPECT_EQ(m.hi, 127);
  Interval d = range_of(floordiv(i, 4) - 1, r);
  EXPECT_EQ(d.lo, -1);
  EXPECT_EQ(d.hi, 126);
}

TEST_F(IndexExprTest, RangeOfNegativeAndMixedRanges) {
  RangeMap r{{0, {-10, 5}}, {1, {3, 6}}, {2, {-6, -3}}};
  auto check = [&](const IndexExpr& e, int64_t lo, int64_t hi) {
    Interval got = range_of(e, r);
    EXPECT_EQ(got.lo, lo) << e.to_string();
    EXPECT_EQ(got.hi, hi) << e.to_string();
  };
  check(i * -3, -15, 30);
  check(i * j, -60, 30);
  check(floordiv(i, 4), -3, 1);
  check(floordiv(i, -4), -2, 2);
  check(mod(i, 4), 0, 3);
  check(mod(i, -4), -3, 0);
  check(mod(i + 10, 16), 0, 15);  // [0, 15]: one period
  check(mod(j, 8), 3, 6);
  check(floordiv(i, j), -4, 1);   // divisor range [3, 6]
  check(floordiv(i, k), -2, 3);   // divisor range [-6, -3]
  check(mod(i, j), 0, 5);
  check(mod(i, k), -5, 0);
  check(min(i, j), -10, 5);
  check(max(i, j) - k, 6, 12);
  check(floordiv(i, i - i), -10, 10);  // divisor [-15, 15]: zero has no value, +-1 bound it
  check(mod(i, i - i), -14, 14);
  check(floordiv(i, 0), INT64_MIN, INT64_MAX);  // never defined
  check(mod(i, 0), INT64_MIN, INT64_MAX);
}

TEST_F(IndexExprTest, RangeOfUnboundedAndSaturating) {
  RangeMap r{{0, {0, 1000000000000000000}}, {1, {0, INT64_MAX}}};
  Interval u = range_of(k + 5, r);  // k has no range
  EXPECT_EQ(u.lo, INT64_MIN);
  EXPECT_EQ(u.hi, INT64_MAX);
  Interval big = range_of(i * 100, r);
  EXPECT_EQ(big.lo, 0);
  EXPECT_EQ(big.hi, INT64_MAX);
  Interval half = range_of(j + 1, r);  // unbounded above stays unbounded, bounded below
  EXPECT_EQ(half.lo, 1);
  EXPECT_EQ(half.hi, INT64_MAX);
  Interval neg = range_of(i * -100 - 7, r);
  EXPECT_EQ(neg.lo, INT64_MIN);
  EXPECT_EQ(neg.hi, -7);
  Interval md = range_of(mod(k, 10), r);
  EXPECT_EQ(md.lo, 0);
  EXPECT_EQ(md.hi, 9);
  Interval fd = range_of(floordiv(j, 4), r);
  EXPECT_EQ(fd.lo, 0);
  EXPECT_EQ(fd.hi, INT64_MAX);
  Interval c = range_of(IndexExpr(-12), r);
  EXPECT_EQ(c.lo, -12);
  EXPECT_EQ(c.hi, -12);
}

// ---- affine views -------------------------------------------------------------------------

TEST_F(IndexExprTest, AsAffine) {
  auto f = as_affine(j * 2 + 5 + i * 3 + j);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->constant, 5);
  ASSERT_EQ(f->terms.size(), 2u);
  EXPECT_EQ(f->terms[0], (std::pair<int, int64_t>{0, 3}));
  EXPECT_EQ(f->terms[1], (std::pair<int, int64_t>{1, 3}));
  auto g = as_affine((i + 1) * 2 - 2 + j - j);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->constant, 0);
  ASSERT_EQ(g->terms.size(), 1u);
  EXPECT_EQ(g->terms[0], (std::pair<int, int64_t>{0, 2}));
  auto c = as_affine(IndexExpr(7));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->constant, 7);
  EXPECT_TRUE(c->terms.empty());
  EXPECT_TRUE(as_affine(floordiv(i * 8, 4)).has_value());  // simplified first: i * 2
  EXPECT_FALSE(as_affine(floordiv(i, 4)).has_value());
  EXPECT_FALSE(as_affine(mod(i, 4) + j).has_value());
  EXPECT_FALSE(as_affine(i * j).has_value());
  EXPECT_FALSE(as_affine(min(i, 3)).has_value());
  EXPECT_TRUE(as_affine(floordiv(o, 4) * 4 + mod(o, 4)).has_value());
}

TEST_F(IndexExprTest, CoefficientOf) {
  IndexExpr i0 = var(10, "i0"), r0 = var(11, "r0");
  IndexExpr e = i0 * 2048 + r0;
  EXPECT_EQ(coefficient_of(e, 11), 1);
  EXPECT_EQ(coefficient_of(e, 10), 2048);
  EXPECT_EQ(coefficient_of(e, 99), 0);
  EXPECT_EQ(coefficient_of((r0 + 3) * 4 - r0, 11), 3);
  // Non-affine parts elsewhere are fine as long as they do not mention the var.
  IndexExpr mixed = i0 * 2048 + floordiv(r0, 4) * 16 + mod(r0, 4);
  EXPECT_EQ(coefficient_of(mixed, 10), 2048);
  EXPECT_EQ(coefficient_of(mixed, 11), std::nullopt);
  EXPECT_EQ(coefficient_of(floordiv(o, 4) * 8 + mod(o, 4), 3), std::nullopt);
  EXPECT_EQ(coefficient_of(floordiv(o, 4) * 4 + mod(o, 4), 3), 1);  // recombined first
  EXPECT_EQ(coefficient_of(i0 * r0, 10), std::nullopt);
  EXPECT_EQ(coefficient_of(min(i0, 5) + r0, 11), 1);
  // Range-dependent forms: simplify with the ranges first.
  IndexExpr tiled = floordiv(i0 * 4 + r0, 4);
  EXPECT_EQ(coefficient_of(tiled, 11), std::nullopt);
  EXPECT_EQ(coefficient_of(simplify(tiled, {{11, {0, 3}}}), 11), 0);
  EXPECT_EQ(coefficient_of(simplify(tiled, {{11, {0, 3}}}), 10), 1);
}

// ---- C printing -----------------------------------------------------------------------------

TEST_F(IndexExprTest, ToCUsesPlainDivisionOnlyWhenProvablyNonNegative) {
  IndexExpr i0 = var(10, "i0"), r0 = var(11, "r0");
  RangeMap nonneg{{10, {0, 511}}, {11, {0, 63}}};
  RangeMap signed_r{{10, {-4, 511}}, {11, {0, 63}}};
  EXPECT_EQ(to_c(floordiv(i0, 4), nonneg), "(i0 / 4)");
  EXPECT_EQ(to_c(mod(i0, 4), nonneg), "(i0 % 4)");
  EXPECT_EQ(to_c(floordiv(i0, 4), {}), "tp_floordiv(i0, 4)");
  EXPECT_EQ(to_c(mod(i0, 4), {}), "tp_mod(i0, 4)");
  EXPECT_EQ(to_c(floordiv(i0, 4), signed_r), "tp_floordiv(i0, 4)");
  EXPECT_EQ(to_c(mod(i0 - 1, 4), nonneg), "tp_mod((i0 - 1), 4)");
  EXPECT_EQ(to_c(floordiv(i0, r0), nonneg), "tp_floordiv(i0, r0)");  // r0 may be 0
  EXPECT_EQ(to_c(floordiv(i0, r0 + 1), nonneg), "(i0 / (r0 + 1))");
  EXPECT_EQ(to_c(floordiv(i0, -4), nonneg), "tp_floordiv(i0, -4)");
  EXPECT_EQ(to_c(simplify(i0 * 2048 + r0 - 3), nonneg), "((i0 * 2048) + r0 - 3)");
  EXPECT_EQ(to_c(i0 * 4294967296, nonneg), "(i0 * 4294967296LL)");
  EXPECT_EQ(to_c(IndexExpr(3) * 1000000000 + i0, nonneg), "((3LL * 1000000000LL) + i0)");
  EXPECT_EQ(to_c(IndexExpr(INT64_MIN), nonneg), "(-9223372036854775807LL - 1)");
  EXPECT_EQ(to_c(min(i0, 7), nonneg), "(i0 < 7 ? i0 : 7)");
  EXPECT_EQ(to_c(max(i0 + 1, r0), nonneg),
            "([](long long x_, long long y_) { return x_ > y_ ? x_ : y_; }((i0 + 1), r0))");
  EXPECT_NE(index_c_prelude().find("tp_floordiv"), std::string::npos);
  EXPECT_NE(index_c_prelude().find("tp_mod"), std::string::npos);
}


// ---- Size variables ------------------------------------------------------------

TEST(IndexSize, IsALeafWithItsOwnIdAndPrinting) {
  IndexExpr s0 = size_var(0), s1 = size_var(1);
  EXPECT_TRUE(s1.is_size());
  EXPECT_FALSE(s1.is_var());
  EXPECT_EQ(s1.size_index(), 1);
  EXPECT_EQ(s1.op(), Op::Size);
  EXPECT_TRUE(size_var(1) == s1);
  EXPECT_FALSE(s0 == s1);
  EXPECT_EQ(s1.to_string(), "s1");
  EXPECT_EQ(to_c(s1, {}), "tp_size1");
  EXPECT_THROW(size_var(-1), ValueError);
  EXPECT_THROW(IndexExpr::make(Op::Size, {}), ValueError);
  EXPECT_THROW(var(0, "i").size_index(), ValueError);
  std::vector<int> used;
  collect_sizes(var(0, "i") * s1 + s0 * 4 + s1, used);
  EXPECT_EQ(used, (std::vector<int>{1, 0}));
}

TEST(IndexSize, IsNonNegativeUnlessTheRangesSayMore) {
  IndexExpr s0 = size_var(0);
  Interval r = range_of(s0 * 4 + 1, {});
  EXPECT_EQ(r.lo, 1);
  EXPECT_EQ(r.hi, INT64_MAX);
  RangeMap m{{size_var_id(0), {2, 10}}};
  r = range_of(s0 * 4 + 1, m);
  EXPECT_EQ(r.lo, 9);
  EXPECT_EQ(r.hi, 41);
  // A size known to be one value folds to it.
  RangeMap one{{size_var_id(0), {7, 7}}};
  EXPECT_EQ(simplify(s0 * 3, one), IndexExpr(21));
}

TEST(IndexSize, SimplifiesSubstitutesAndEvaluatesLikeAVariable) {
  IndexExpr s1 = size_var(1), i = var(0, "i"), j = var(1, "j");
  EXPECT_EQ(simplify(s1 * 2 + s1), simplify(s1 * 3));
  IndexExpr flat = i * s1 + j;
  EXPECT_TRUE(depends_on(flat, size_var_id(1)));
  EXPECT_FALSE(depends_on(flat, size_var_id(0)));
  EXPECT_EQ(coefficient_of(flat, 1), 1);               // contiguous in j whatever the size
  EXPECT_FALSE(coefficient_of(flat, 0).has_value());   // i's stride is symbolic
  EXPECT_EQ(evaluate(flat, {{0, 2}, {1, 3}, {size_var_id(1), 10}}), 23);
  EXPECT_THROW(evaluate(flat, {{0, 2}, {1, 3}}), ValueError);
  // Binding every size specializes fully: the static expression comes back.
  IndexExpr bound = simplify(substitute(flat, {{size_var_id(1), IndexExpr(10)}}));
  EXPECT_EQ(bound, simplify(i * 10 + j));
  // Division by a size: not provably positive, so the exact helper is printed.
  RangeMap loops{{0, {0, 100}}};
  EXPECT_NE(to_c(simplify(floordiv(i, s1), loops), loops).find("tp_floordiv"), std::string::npos);
  RangeMap positive{{0, {0, 100}}, {size_var_id(1), {1, INT64_MAX}}};
  EXPECT_EQ(to_c(simplify(floordiv(i, s1), positive), positive), "(i / tp_size1)");
}
}  // namespace
}  // namespace tp::stax::ir
