// Binomial checkpointing (Theorem 5.4): the order in which a chain of l steps
// x_0 -> x_1 -> ... -> x_l is reversed when at most s intermediate states may be
// held at any time (x_0, the region's inputs, is always at hand and free).
//
// Reversing step k needs x_{k-1}: the step is computed again from it (its
// "tape") and its derivative applied. With s slots the fewest step evaluations
// obey the recurrence (a state x_a at hand, l steps after it):
//   C(1, s) = 1,  C(l, 0) = l(l+1)/2   (each step from x_a again),
//   C(l, s) = min_j  j + C(l - j, s - 1) + C(j, s)
// (advance j steps, keep x_{a+j} in a slot, reverse the tail with one slot
// less, then the head with all of them). The forward pass computes every state
// once anyway, so the first advances cost nothing there:
//   T(l, s) = min_j  T(l - j, s - 1) + C(j, s),  T(1, s) = 1,  T(l, 0) = C(l, 0),
// and the states it passes at those split points are the ones it saves. The
// minimum is reached by splits at binomial positions; the number of steps that
// s slots reverse with at most t evaluations per step is beta(s, t) = C(s+t, s)
// (Griewank), which the unit tests check against this recurrence.
#pragma once
#include <cstdint>
#include <vector>

namespace tp::aot {

struct ReversalAction {
  enum Kind {
    Advance,  // compute states from+1..to from x_from (the state at hand), keep x_to
    Reverse,  // tape step `to` (= from + 1) from x_from and apply its derivative
  } kind;
  int from = 0, to = 0;
};

struct ReversalPlan {
  int steps = 0, slots = 0;
  std::vector<int> forward_saves;        // states the forward keeps (ascending indices in 1..steps-1)
  std::vector<ReversalAction> backward;  // in order; Reverse actions run steps..1
  int64_t evaluations = 0;               // step evaluations in the backward (tapes included)
};

// Steps 1..l, at most s saved states (s is capped at l - 1: more never helps).
ReversalPlan plan_reversal(int l, int s);

// C(l, s) and T(l, s) of the recurrences above.
int64_t reversal_cost(int l, int s);
int64_t reversal_cost_after_forward(int l, int s);

}  // namespace tp::aot
