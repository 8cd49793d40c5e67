// The launch-configuration search (stax/backend/launch_search.h) on synthetic
// cost functions: no GPU, no timing — the costs are formulas and the clock is
// a counter, so every result below is exact and reproducible.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <stdexcept>

#include "stax/backend/launch_search.h"

namespace tp::stax {
namespace {

SearchParam param(const std::string& name, int n, int default_index = 0) {
  SearchParam p;
  p.name = name;
  for (int i = 0; i < n; ++i) p.values.push_back(i);
  p.default_index = default_index;
  return p;
}

SearchSpace space(int params, int values) {
  SearchSpace s;
  for (int i = 0; i < params; ++i) s.params.push_back(param("p" + std::to_string(i), values));
  return s;
}

// Every call is logged: the search must never pay twice for one point.
struct Logged {
  std::function<double(const SearchPoint&)> f;
  std::vector<SearchPoint> calls;
  double operator()(const SearchPoint& p) {
    calls.push_back(p);
    return f(p);
  }
};

TEST(LaunchSearch, SeparableBowlReachesTheMinimumByDescentAlone) {
  // Minimum at (7, 2, 5); each parameter's best value does not depend on the others.
  const int target[] = {7, 2, 5};
  Logged cost{[&](const SearchPoint& p) {
    double c = 1;
    for (int i = 0; i < 3; ++i) c += (p[i] - target[i]) * (p[i] - target[i]);
    return c;
  }};
  SearchOptions o;
  o.random_points = 0;
  SearchResult r = launch_search(space(3, 10), std::ref(cost), o);
  EXPECT_EQ(r.best, (SearchPoint{7, 2, 5}));
  EXPECT_DOUBLE_EQ(r.best_cost, 1);
  EXPECT_DOUBLE_EQ(r.default_cost, 1 + 49 + 4 + 25);
  EXPECT_TRUE(r.found);
  EXPECT_FALSE(r.budget_exhausted);
  EXPECT_EQ(r.invalid, 0);
  // One sweep finds it, a second confirms: far fewer than the 1000 points of the product.
  EXPECT_EQ(r.evaluated, static_cast<int>(cost.calls.size()));
  EXPECT_LE(r.evaluated, 1 + 2 * 3 * 9);
  EXPECT_EQ(std::set<SearchPoint>(cost.calls.begin(), cost.calls.end()).size(), cost.calls.size());
  EXPECT_EQ(cost.calls.front(), (SearchPoint{0, 0, 0}));  // the default point first
}

TEST(LaunchSearch, DescentStartsFromTheDefaultIndex) {
  SearchSpace s;
  s.params.push_back(param("block", 4, 2));
  Logged cost{[](const SearchPoint& p) { return 1.0 + p[0]; }};
  SearchResult r = launch_search(s, std::ref(cost), SearchOptions{});
  EXPECT_EQ(cost.calls.front(), SearchPoint{2});
  EXPECT_EQ(r.best, SearchPoint{0});
  EXPECT_DOUBLE_EQ(r.default_cost, 3);
}

// Two basins: the default's, where a one-parameter move only climbs, and a far
// one (both parameters >= 4) that only pays off when both move together;
// inside it the cost is a bowl with its minimum at (6, 6).
double two_basins(const SearchPoint& p) {
  const int64_t a = p[0], b = p[1];
  if (a >= 4 && b >= 4) return 1.0 + static_cast<double>((a - 6) * (a - 6) + (b - 6) * (b - 6));
  return 5.0 + static_cast<double>(a + b);
}

TEST(LaunchSearch, RandomPointsFindTheValleyDescentCannotReach) {
  SearchOptions o;
  o.random_points = 0;
  SearchResult alone = launch_search(space(2, 8), two_basins, o);
  EXPECT_EQ(alone.best, (SearchPoint{0, 0}));  // every single move from (0, 0) climbs
  EXPECT_DOUBLE_EQ(alone.best_cost, 5);

  o.random_points = 8;
  o.seed = 1;
  SearchResult r = launch_search(space(2, 8), two_basins, o);
  // A random draw lands in the far basin, and descent from there reaches its bottom.
  EXPECT_EQ(r.best, (SearchPoint{6, 6}));
  EXPECT_DOUBLE_EQ(r.best_cost, 1);
  EXPECT_DOUBLE_EQ(r.default_cost, 5);
}

TEST(LaunchSearch, SameSeedSameSearchOtherSeedOtherDraws) {
  auto run = [](uint64_t seed) {
    Logged cost{two_basins};
    SearchOptions o;
    o.random_points = 6;
    o.seed = seed;
    SearchResult r = launch_search(space(2, 8), std::ref(cost), o);
    return std::make_pair(cost.calls, r);
  };
  auto [calls1, r1] = run(7);
  auto [calls2, r2] = run(7);
  EXPECT_EQ(calls1, calls2);
  EXPECT_EQ(r1.best, r2.best);
  EXPECT_EQ(r1.evaluated, r2.evaluated);
  auto [calls3, r3] = run(8);
  EXPECT_NE(calls1, calls3);  // the descent part is the same, the draws are not
}

TEST(LaunchSearch, InvalidPointsAreSkippedNeverChosen) {
  // Odd values of p1 are refused by the "compiler"; the formula's minimum (5, 3) is among them.
  Logged cost{[](const SearchPoint& p) {
    if (p[1] % 2) throw std::runtime_error("too many registers");
    return 1.0 + static_cast<double>((p[0] - 5) * (p[0] - 5) + (p[1] - 3) * (p[1] - 3));
  }};
  SearchOptions o;
  o.random_points = 4;
  SearchResult r = launch_search(space(2, 8), std::ref(cost), o);
  EXPECT_EQ(r.best[0], 5);
  EXPECT_TRUE(r.best[1] == 2 || r.best[1] == 4) << r.best[1];
  EXPECT_DOUBLE_EQ(r.best_cost, 2);
  EXPECT_GT(r.invalid, 0);
  EXPECT_EQ(r.evaluated, static_cast<int>(cost.calls.size()));  // invalid points count as evaluated
  EXPECT_TRUE(r.found);
}

TEST(LaunchSearch, AnInvalidDefaultStillFindsAValidPoint) {
  SearchResult r = launch_search(space(2, 4), [](const SearchPoint& p) -> double {
    if (p[0] == 0) throw std::runtime_error("the default does not launch");
    return 1.0 + static_cast<double>(p[0] + p[1]);
  }, SearchOptions{});
  EXPECT_TRUE(std::isinf(r.default_cost));
  EXPECT_TRUE(r.found);
  EXPECT_EQ(r.best, (SearchPoint{1, 0}));
}

TEST(LaunchSearch, NothingValidReturnsTheDefaultNotFound) {
  SearchResult r = launch_search(space(2, 3), [](const SearchPoint&) -> double { throw std::runtime_error("no"); },
                                 SearchOptions{});
  EXPECT_FALSE(r.found);
  EXPECT_EQ(r.best, (SearchPoint{0, 0}));
  EXPECT_EQ(r.invalid, r.evaluated);
  EXPECT_EQ(r.evaluated, 9);  // the whole space, once each
}

TEST(LaunchSearch, EvaluationBudgetIsRespected) {
  Logged cost{[](const SearchPoint& p) { return 100.0 - static_cast<double>(p[0] + p[1] + p[2]); }};
  SearchOptions o;
  o.max_evaluations = 5;
  SearchResult r = launch_search(space(3, 10), std::ref(cost), o);
  EXPECT_EQ(cost.calls.size(), 5u);
  EXPECT_EQ(r.evaluated, 5);
  EXPECT_TRUE(r.budget_exhausted);
  // The best of what was seen in the first parameter's sweep is kept.
  EXPECT_EQ(r.best, (SearchPoint{4, 0, 0}));
  EXPECT_DOUBLE_EQ(r.best_cost, 96);
}

TEST(LaunchSearch, TimeBudgetIsRespected) {
  // A fake clock: each evaluation takes one "second".
  double now = 100;
  Logged cost{[&](const SearchPoint& p) {
    now += 1;
    return 100.0 - static_cast<double>(p[0]);
  }};
  SearchOptions o;
  o.max_seconds = 3.5;
  o.clock = [&] { return now; };
  SearchResult r = launch_search(space(2, 10), std::ref(cost), o);
  EXPECT_EQ(cost.calls.size(), 4u);  // started at t = 0, 1, 2, 3; refused at 4
  EXPECT_TRUE(r.budget_exhausted);
  EXPECT_EQ(r.best, (SearchPoint{3, 0}));
}

TEST(LaunchSearch, ZeroBudgetEvaluatesNothing) {
  SearchOptions o;
  o.max_evaluations = 0;
  SearchResult r = launch_search(space(1, 3), [](const SearchPoint&) { return 1.0; }, o);
  EXPECT_EQ(r.evaluated, 0);
  EXPECT_FALSE(r.found);
  EXPECT_TRUE(r.budget_exhausted);
  EXPECT_EQ(r.best, SearchPoint{0});
}

TEST(LaunchSearch, MinGainKeepsTheDefaultAgainstNoise) {
  // Every other point is 1 % faster: below a 3 % threshold, so no move.
  auto noise = [](const SearchPoint& p) { return p == SearchPoint{0, 0} ? 1.0 : 0.99; };
  SearchOptions o;
  o.min_gain = 0.03;
  SearchResult r = launch_search(space(2, 4), noise, o);
  EXPECT_EQ(r.best, (SearchPoint{0, 0}));
  EXPECT_DOUBLE_EQ(r.best_cost, 1);
  o.min_gain = 0;
  EXPECT_NE(launch_search(space(2, 4), noise, o).best, (SearchPoint{0, 0}));
  o.min_gain = 1;
  EXPECT_THROW(launch_search(space(2, 4), noise, o), std::invalid_argument);
}

TEST(LaunchSearch, DescribeAndParseRoundTrip) {
  SearchSpace s;
  SearchParam a;
  a.name = "row_block";
  a.values = {0, 64, 128, 256};
  SearchParam b;
  b.name = "rows_per_block";
  b.values = {1, 2, 4};
  s.params = {a, b};
  const SearchPoint p{128, 4};
  EXPECT_EQ(s.describe(p), "row_block=128 rows_per_block=4");
  EXPECT_EQ(s.parse(s.describe(p)), p);
  EXPECT_EQ(s.parse("rows_per_block=4 row_block=128"), p);  // order does not matter
  EXPECT_EQ(s.parse("row_block=128"), std::nullopt);          // one missing
  EXPECT_EQ(s.parse("row_block=100 rows_per_block=4"), std::nullopt);  // not a candidate
  EXPECT_EQ(s.parse("row_block=128 rows_per_block=4 x=1"), std::nullopt);
  EXPECT_EQ(s.parse("row_block=128 row_block=128 rows_per_block=4"), std::nullopt);
  EXPECT_EQ(s.parse("row_block=12x rows_per_block=4"), std::nullopt);
  EXPECT_EQ(s.parse("256"), std::nullopt);
  EXPECT_EQ(s.size(), 12);
}

TEST(LaunchSearch, MalformedSpacesAreRefused) {
  SearchSpace s = space(2, 3);
  s.params[1].name = "p0";
  EXPECT_THROW(launch_search(s, [](const SearchPoint&) { return 1.0; }, SearchOptions{}), std::invalid_argument);
  s = space(1, 3);
  s.params[0].values = {1, 1};
  EXPECT_THROW(s.validate(), std::invalid_argument);
  s = space(1, 3);
  s.params[0].default_index = 3;
  EXPECT_THROW(s.validate(), std::invalid_argument);
  s = space(1, 3);
  s.params[0].name = "a b";
  EXPECT_THROW(s.validate(), std::invalid_argument);
  s = space(1, 3);
  s.params[0].values.clear();
  EXPECT_THROW(s.validate(), std::invalid_argument);
}

}  // namespace
}  // namespace tp::stax
