// Binomial checkpointing (Theorem 5.4): the reversal plans are valid (every
// step is reversed once, last to first, from a state at hand, never holding
// more states than the slots) and reach Griewank's minimum.
#include <gtest/gtest.h>

#include <set>

#include "aot/reversal_schedule.h"

namespace tp::aot {
namespace {

int64_t binom(int n, int k) {
  int64_t r = 1;
  for (int i = 1; i <= k; ++i) r = r * (n - k + i) / i;
  return r;
}

// Runs a plan: returns the evaluations it makes; fails the test when it is invalid.
int64_t simulate(const ReversalPlan& p) {
  std::set<int> held(p.forward_saves.begin(), p.forward_saves.end());
  held.insert(0);  // the inputs
  EXPECT_LE(static_cast<int>(p.forward_saves.size()), p.slots);
  int64_t evals = 0;
  int next_reverse = p.steps;
  int transient = -1;  // a state advanced to only to be reversed from at once: the working state, not a slot
  for (size_t i = 0; i < p.backward.size(); ++i) {
    const ReversalAction& a = p.backward[i];
    EXPECT_TRUE(held.count(a.from) || a.from == transient) << "state " << a.from << " is not at hand";
    if (a.kind == ReversalAction::Advance) {
      EXPECT_GT(a.to, a.from);
      evals += a.to - a.from;
      const bool next_reverses_it = i + 1 < p.backward.size() && p.backward[i + 1].kind == ReversalAction::Reverse &&
                                    p.backward[i + 1].from == a.to;
      if (next_reverses_it) transient = a.to;
      else held.insert(a.to);
    } else {
      EXPECT_EQ(a.to, a.from + 1);
      EXPECT_EQ(a.to, next_reverse) << "steps must be reversed last to first";
      --next_reverse;
      evals += 1;
      // States at or after a reversed step are never needed again.
      for (auto it = held.begin(); it != held.end();) it = *it >= a.from && *it != 0 ? held.erase(it) : std::next(it);
    }
    EXPECT_LE(static_cast<int>(held.size()) - 1, p.slots) << "more states held than slots";
  }
  EXPECT_EQ(next_reverse, 0);
  return evals;
}

TEST(ReversalSchedule, PlansAreValidAndCountTheirEvaluations) {
  for (int l = 1; l <= 40; ++l)
    for (int s = 0; s <= 8; ++s) {
      ReversalPlan p = plan_reversal(l, s);
      EXPECT_EQ(simulate(p), p.evaluations) << "l=" << l << " s=" << s;
      EXPECT_EQ(p.evaluations, reversal_cost_after_forward(l, s));
    }
}

TEST(ReversalSchedule, EndsOfTheRange) {
  EXPECT_EQ(reversal_cost(10, 0), 55);               // each step again from the start: 1 + 2 + ... + 10
  EXPECT_EQ(reversal_cost_after_forward(10, 9), 10);  // every state kept: each step taped once
  EXPECT_EQ(reversal_cost_after_forward(10, 100), 10);
  EXPECT_EQ(plan_reversal(10, 100).slots, 9);
  EXPECT_EQ(reversal_cost_after_forward(1, 0), 1);
}

TEST(ReversalSchedule, ReachesGriewanksBinomialMinimum) {
  // With c checkpoints (the state at hand is one of them) and at most t
  // evaluations of a step before its reversal, beta(c, t) = C(c+t, c) steps can
  // be reversed, with t*l - beta(c+1, t-1) advances at the least (Griewank
  // and Walther); here every step's tape is one more evaluation.
  for (int c = 1; c <= 5; ++c)
    for (int t = 1; t <= 5; ++t) {
      int l = static_cast<int>(binom(c + t, c));
      int64_t advances = reversal_cost(l, c - 1) - l;
      EXPECT_EQ(advances, t * l - binom(c + t, c + 1)) << "c=" << c << " t=" << t;
    }
}

TEST(ReversalSchedule, RejectsAnEmptyChain) { EXPECT_ANY_THROW(plan_reversal(0, 1)); }

}  // namespace
}  // namespace tp::aot
