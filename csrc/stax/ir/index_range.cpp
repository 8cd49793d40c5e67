// Interval range analysis. Sound: every value an expression takes for
// variables inside their ranges lies in the result. Interval ends of
// INT64_MIN / INT64_MAX mean "unbounded" on that side; all arithmetic is done
// in 128 bits with explicit infinities and saturated back, so a bound is never
// wrong because of overflow.
#include <algorithm>
#include <initializer_list>

#include "stax/ir/index_expr.h"

namespace tp::stax::ir {

namespace {

using Wide = __int128;
// Stands for infinity. Finite ends are int64 (|v| <= 2^63), so kInf is beyond
// all of them, sums of two ends cannot overflow 128 bits, and products of two
// finite ends (<= 2^126) are exact before saturating.
constexpr Wide kInf = Wide(1) << 100;

bool is_inf(Wide v) { return v >= kInf || v <= -kInf; }

// An interval with explicit infinities.
struct WideInterval {
  Wide lo, hi;
};

WideInterval widen(Interval r) {
  return {r.lo == INT64_MIN ? -kInf : Wide(r.lo), r.hi == INT64_MAX ? kInf : Wide(r.hi)};
}

int64_t saturate(Wide v) {
  if (v <= Wide(INT64_MIN)) return INT64_MIN;
  if (v >= Wide(INT64_MAX)) return INT64_MAX;
  return static_cast<int64_t>(v);
}

Interval narrow(WideInterval r) { return {saturate(r.lo), saturate(r.hi)}; }

Wide mul(Wide a, Wide b) {
  if (a == 0 || b == 0) return 0;  // 0 * inf: the finite factor really is 0
  if (is_inf(a) || is_inf(b)) return ((a < 0) != (b < 0)) ? -kInf : kInf;
  return a * b;  // |a|, |b| <= 2^63, so the product fits
}

Wide floor_div_wide(Wide a, Wide b) {
  Wide q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

// floor(a / b) for b > 0 (b may be +inf), a possibly infinite. Values at
// infinite ends are limits, which is what the corner rule below needs.
Wide div_pos(Wide a, Wide b) {
  if (is_inf(b)) {
    if (is_inf(a)) return a > 0 ? 0 : -1;
    return a >= 0 ? 0 : -1;  // |a| / huge -> 0 from above or below
  }
  if (is_inf(a)) return a;
  return floor_div_wide(a, b);
}

WideInterval hull(std::initializer_list<Wide> values) {
  return {std::min(values), std::max(values)};
}

WideInterval join(WideInterval a, WideInterval b) {
  return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)};
}

WideInterval negate(WideInterval a) { return {-a.hi, -a.lo}; }

// x // y for y >= 1. floor(x / y) is monotone in x and, for fixed x, in y, so
// the extremes are at the corners.
WideInterval div_positive(WideInterval x, WideInterval y) {
  return hull({div_pos(x.lo, y.lo), div_pos(x.lo, y.hi), div_pos(x.hi, y.lo), div_pos(x.hi, y.hi)});
}

WideInterval range_floordiv(WideInterval x, WideInterval y) {
  // Only non-zero divisors matter (division by zero has no value); split the
  // divisor into its positive and negative parts. x // y == (-x) // (-y).
  bool has_pos = y.hi >= 1, has_neg = y.lo <= -1;
  if (!has_pos && !has_neg) return {-kInf, kInf};
  std::optional<WideInterval> r;
  if (has_pos) r = div_positive(x, {std::max<Wide>(y.lo, 1), y.hi});
  if (has_neg) {
    WideInterval n = div_positive(negate(x), negate(WideInterval{y.lo, std::min<Wide>(y.hi, -1)}));
    r = r ? join(*r, n) : n;
  }
  return *r;
}

// x % y for y in [lo, hi] with lo >= 1: the result is in [0, hi - 1], is at
// most x when x >= 0, and is exactly x - q*c when the divisor is a constant c
// and all of x lies in one period [q*c, q*c + c).
WideInterval mod_positive(WideInterval x, WideInterval y) {
  if (y.lo == y.hi && !is_inf(x.lo) && !is_inf(x.hi)) {
    Wide q = floor_div_wide(x.lo, y.lo);
    if (floor_div_wide(x.hi, y.lo) == q) return {x.lo - q * y.lo, x.hi - q * y.lo};
  }
  WideInterval r{0, is_inf(y.hi) ? kInf : y.hi - 1};
  if (x.lo >= 0) r.hi = std::min(r.hi, x.hi);
  return r;
}

WideInterval range_mod(WideInterval x, WideInterval y) {
  // Python: the result has the divisor's sign; x % y == -((-x) % (-y)).
  bool has_pos = y.hi >= 1, has_neg = y.lo <= -1;
  if (!has_pos && !has_neg) return {-kInf, kInf};
  std::optional<WideInterval> r;
  if (has_pos) r = mod_positive(x, {std::max<Wide>(y.lo, 1), y.hi});
  if (has_neg) {
    WideInterval n =
        negate(mod_positive(negate(x), negate(WideInterval{y.lo, std::min<Wide>(y.hi, -1)})));
    r = r ? join(*r, n) : n;
  }
  return *r;
}

WideInterval range_wide(const IndexExpr& e, const RangeMap& ranges) {
  switch (e.op()) {
    case IndexOp::Const:
      return {e.const_value(), e.const_value()};
    case IndexOp::Var: {
      auto it = ranges.find(e.var_id());
      return it == ranges.end() ? WideInterval{-kInf, kInf} : widen(it->second);
    }
    case IndexOp::Size: {  // an extent: never negative
      auto it = ranges.find(e.node().var_id);
      return it == ranges.end() ? WideInterval{0, kInf} : widen(it->second);
    }
    default:
      break;
  }
  // Each operand's interval is saturated back to int64 first, so every finite
  // end stays within int64 and the 128-bit arithmetic below cannot overflow.
  std::vector<WideInterval> ops;
  for (const IndexExpr& o : e.operands()) ops.push_back(widen(narrow(range_wide(o, ranges))));
  WideInterval acc = ops[0];
  for (size_t i = 1; i < ops.size(); ++i) {
    const WideInterval& b = ops[i];
    switch (e.op()) {
      case IndexOp::Add: acc = {acc.lo + b.lo, acc.hi + b.hi}; break;
      case IndexOp::Mul:
        acc = hull({mul(acc.lo, b.lo), mul(acc.lo, b.hi), mul(acc.hi, b.lo), mul(acc.hi, b.hi)});
        break;
      case IndexOp::FloorDiv: acc = range_floordiv(acc, b); break;
      case IndexOp::Mod: acc = range_mod(acc, b); break;
      case IndexOp::Min: acc = {std::min(acc.lo, b.lo), std::min(acc.hi, b.hi)}; break;
      case IndexOp::Max: acc = {std::max(acc.lo, b.lo), std::max(acc.hi, b.hi)}; break;
      default: break;
    }
    acc = widen(narrow(acc));  // saturate between steps of an n-ary op
  }
  return acc;
}

}  // namespace

Interval range_of(const IndexExpr& e, const RangeMap& ranges) {
  return narrow(range_wide(e, ranges));
}

}  // namespace tp::stax::ir
