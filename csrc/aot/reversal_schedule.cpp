#include "aot/reversal_schedule.h"

#include <algorithm>
#include <functional>

#include "core/error.h"

namespace tp::aot {
namespace {

// Both recurrences with their minimizing split, memoized per (l, s).
struct Tables {
  int L, S;
  std::vector<int64_t> c, t;  // (l, s) at l * (S + 1) + s
  std::vector<int> cj, tj;
  Tables(int l, int s) : L(l), S(s) {
    size_t n = static_cast<size_t>(l + 1) * static_cast<size_t>(s + 1);
    c.assign(n, -1);
    t.assign(n, -1);
    cj.assign(n, 0);
    tj.assign(n, 0);
  }
  size_t at(int l, int s) const { return static_cast<size_t>(l) * static_cast<size_t>(S + 1) + static_cast<size_t>(s); }
  int64_t C(int l, int s) {
    if (l <= 1) return l;
    if (s == 0) return int64_t{l} * (l + 1) / 2;
    s = std::min(s, l - 1);
    size_t i = at(l, s);
    if (c[i] >= 0) return c[i];
    int64_t best = INT64_MAX;
    for (int j = 1; j < l; ++j) {
      int64_t v = j + C(l - j, s - 1) + C(j, s);
      if (v < best) best = v, cj[i] = j;
    }
    return c[i] = best;
  }
  int64_t T(int l, int s) {
    if (l <= 1) return l;
    if (s == 0) return C(l, 0);
    s = std::min(s, l - 1);
    size_t i = at(l, s);
    if (t[i] >= 0) return t[i];
    int64_t best = INT64_MAX;
    for (int j = 1; j < l; ++j) {
      int64_t v = T(l - j, s - 1) + C(j, s);
      if (v < best) best = v, tj[i] = j;
    }
    return t[i] = best;
  }
  int split_c(int l, int s) {
    s = std::min(s, l - 1);
    C(l, s);
    return cj[at(l, s)];
  }
  int split_t(int l, int s) {
    s = std::min(s, l - 1);
    T(l, s);
    return tj[at(l, s)];
  }
};

}  // namespace

int64_t reversal_cost(int l, int s) {
  TP_CHECK(l >= 0 && s >= 0, ValueError, "reversal_cost: negative length or slots");
  Tables tb(l, std::min(s, std::max(l - 1, 0)));
  return tb.C(l, std::min(s, std::max(l - 1, 0)));
}

int64_t reversal_cost_after_forward(int l, int s) {
  TP_CHECK(l >= 0 && s >= 0, ValueError, "reversal_cost_after_forward: negative length or slots");
  Tables tb(l, std::min(s, std::max(l - 1, 0)));
  return tb.T(l, std::min(s, std::max(l - 1, 0)));
}

ReversalPlan plan_reversal(int l, int s) {
  TP_CHECK(l >= 1 && s >= 0, ValueError, "plan_reversal: a chain of ", l, " steps with ", s, " slots");
  s = std::min(s, l - 1);
  Tables tb(l, s);
  ReversalPlan plan;
  plan.steps = l;
  plan.slots = s;
  auto& out = plan.backward;
  // Reverse steps a+1..a+n with x_a at hand and `free` slots.
  std::function<void(int, int, int)> reverse = [&](int a, int n, int free) {
    if (n == 1) {
      out.push_back({ReversalAction::Reverse, a, a + 1});
      return;
    }
    if (free == 0) {
      for (int k = a + n; k > a; --k) {
        if (k - 1 > a) out.push_back({ReversalAction::Advance, a, k - 1});
        out.push_back({ReversalAction::Reverse, k - 1, k});
      }
      return;
    }
    int j = tb.split_c(n, free);
    out.push_back({ReversalAction::Advance, a, a + j});
    reverse(a + j, n - j, free - 1);
    reverse(a, j, free);
  };
  // The forward has passed every state; it keeps x_{a+j} at each top-level split.
  std::function<void(int, int, int)> top = [&](int a, int n, int free) {
    if (n == 1 || free == 0) {
      reverse(a, n, 0);
      return;
    }
    int j = tb.split_t(n, free);
    plan.forward_saves.push_back(a + j);
    top(a + j, n - j, free - 1);
    reverse(a, j, free);
  };
  top(0, l, s);
  plan.evaluations = tb.T(l, s);
  return plan;
}

}  // namespace tp::aot
