// The index-expression simplifier, plus the affine views built on it.
//
// Canonical form (what simplify returns):
//  * A sum is a flat Add of terms sorted by compare() on their "atoms", with
//    the constant last; like terms are merged and zero terms dropped.
//  * A term is an atom times a coefficient: the atom itself when the
//    coefficient is 1, else Mul(atom factors..., coef) with the constant last.
//    Atoms are variables, products of non-constant factors, //, %, min, max.
//  * Constant factors are distributed over sums: (i + 2) * 3 -> i*3 + 6.
//  * x // c and x % c (c > 0) have every multiple of c in x's coefficients
//    moved out (x % c: dropped), so // and % of the same x stay recognizable.
//  * min/max are flat, sorted, deduplicated and free of operands the others
//    provably dominate.
// Every rewrite is an identity for all integers (or for all points inside the
// given ranges, where a range is consulted). Arithmetic on coefficients is
// overflow-checked: when it would overflow, the rewrite is skipped.
#include <algorithm>
#include <map>
#include <numeric>

#include "stax/ir/index_expr.h"

namespace tp::stax::ir {

namespace {

// ---- Linear view of an expression --------------------------------------------------

// constant + sum(coef * atom). `overflow` marks that some coefficient
// arithmetic overflowed; such a Sum must not be turned back into an expression.
struct Sum {
  std::vector<std::pair<IndexExpr, int64_t>> terms;  // (atom, coefficient)
  int64_t constant = 0;
  bool overflow = false;
};

void add_constant(Sum& s, int64_t c) {
  s.overflow = __builtin_add_overflow(s.constant, c, &s.constant) || s.overflow;
}

void add_term(Sum& s, const IndexExpr& atom, int64_t coef) {
  if (coef != 0) s.terms.emplace_back(atom, coef);
}

// dst += scale * src
void add_scaled(Sum& dst, const Sum& src, int64_t scale) {
  int64_t c;
  dst.overflow = __builtin_mul_overflow(src.constant, scale, &c) || dst.overflow || src.overflow;
  add_constant(dst, c);
  for (const auto& [atom, coef] : src.terms) {
    int64_t k;
    dst.overflow = __builtin_mul_overflow(coef, scale, &k) || dst.overflow;
    add_term(dst, atom, k);
  }
}

// Splits a (simplified) expression into its linear view. Constant factors of a
// product become the coefficient; everything else is an atom.
Sum to_sum(const IndexExpr& e) {
  Sum s;
  switch (e.op()) {
    case IndexOp::Const:
      s.constant = e.const_value();
      return s;
    case IndexOp::Add:
      for (const IndexExpr& o : e.operands()) add_scaled(s, to_sum(o), 1);
      return s;
    case IndexOp::Mul: {
      int64_t coef = 1;
      std::vector<IndexExpr> factors;
      for (const IndexExpr& f : e.operands()) {
        if (f.is_const()) {
          s.overflow = __builtin_mul_overflow(coef, f.const_value(), &coef) || s.overflow;
        } else {
          factors.push_back(f);
        }
      }
      if (factors.empty()) {
        s.constant = coef;
      } else {
        add_term(s, factors.size() == 1 ? factors[0] : IndexExpr::make(IndexOp::Mul, factors), coef);
      }
      return s;
    }
    default:
      add_term(s, e, 1);
      return s;
  }
}

// Sorts terms canonically, merges like terms and drops zero coefficients.
void normalize(Sum& s) {
  std::stable_sort(s.terms.begin(), s.terms.end(),
                   [](const auto& a, const auto& b) { return compare(a.first, b.first) < 0; });
  std::vector<std::pair<IndexExpr, int64_t>> merged;
  for (auto& t : s.terms) {
    if (!merged.empty() && merged.back().first == t.first) {
      s.overflow = __builtin_add_overflow(merged.back().second, t.second, &merged.back().second) ||
                   s.overflow;
    } else {
      merged.push_back(std::move(t));
    }
  }
  std::erase_if(merged, [](const auto& t) { return t.second == 0; });
  s.terms = std::move(merged);
}

IndexExpr term_expr(const IndexExpr& atom, int64_t coef) {
  if (coef == 1) return atom;
  std::vector<IndexExpr> factors;
  if (atom.op() == IndexOp::Mul) {
    factors = atom.operands();
  } else {
    factors.push_back(atom);
  }
  factors.emplace_back(coef);
  return IndexExpr::make(IndexOp::Mul, std::move(factors));
}

// Expression of a normalized, overflow-free Sum.
IndexExpr from_sum(const Sum& s) {
  std::vector<IndexExpr> parts;
  for (const auto& [atom, coef] : s.terms) parts.push_back(term_expr(atom, coef));
  if (s.constant != 0 || parts.empty()) parts.emplace_back(s.constant);
  if (parts.size() == 1) return parts[0];
  return IndexExpr::make(IndexOp::Add, std::move(parts));
}

std::optional<int64_t> positive_const(const IndexExpr& e) {
  if (e.is_const() && e.const_value() > 0) return e.const_value();
  return std::nullopt;
}

bool bounded(const Interval& r) { return r.lo != INT64_MIN && r.hi != INT64_MAX; }

// The single value of floor(x / c) over a bounded range, if there is one.
std::optional<int64_t> single_quotient(const Interval& r, int64_t c) {
  if (!bounded(r)) return std::nullopt;
  int64_t q = detail::floor_div(r.lo, c);
  if (detail::floor_div(r.hi, c) != q) return std::nullopt;
  return q;
}

// ---- The simplifier ---------------------------------------------------------------

class Simplifier {
 public:
  explicit Simplifier(const RangeMap& ranges) : ranges_(ranges) {}

  // Bottom-up: operands first, then the node's own rules on canonical operands.
  IndexExpr mutate(const IndexExpr& e) {
    switch (e.op()) {
      case IndexOp::Const:
        return e;
      case IndexOp::Var:
      case IndexOp::Size: {
        // A loop of trip count 1 (a size known to be one value) is a constant.
        Interval r = range(e);
        if (r.lo == r.hi && bounded(r)) return IndexExpr(r.lo);
        return e;
      }
      case IndexOp::Add: {
        // Flatten the raw chain first: `e = e + t` in a loop builds a deep
        // left-leaning tree, which would otherwise be re-canonicalized per level.
        std::vector<IndexExpr> leaves;
        collect_addends(e, leaves);
        std::vector<IndexExpr> ops = mutate_all(leaves);
        Sum s;
        for (const IndexExpr& o : ops) add_scaled(s, to_sum(o), 1);
        if (auto r = build_sum(std::move(s))) return *r;
        return IndexExpr::make(IndexOp::Add, std::move(ops));
      }
      case IndexOp::Mul:
        return build_mul(mutate_all(e.operands()));
      case IndexOp::FloorDiv:
        return build_floordiv(mutate(e.operands()[0]), mutate(e.operands()[1]));
      case IndexOp::Mod:
        return build_mod(mutate(e.operands()[0]), mutate(e.operands()[1]));
      case IndexOp::Min:
      case IndexOp::Max:
        return build_min_max(e.op(), mutate_all(e.operands()));
    }
    return e;
  }

 private:
  Interval range(const IndexExpr& e) const { return range_of(e, ranges_); }

  static void collect_addends(const IndexExpr& e, std::vector<IndexExpr>& out) {
    if (e.op() != IndexOp::Add) {
      out.push_back(e);
      return;
    }
    for (const IndexExpr& o : e.operands()) collect_addends(o, out);
  }

  std::vector<IndexExpr> mutate_all(const std::vector<IndexExpr>& es) {
    std::vector<IndexExpr> out;
    out.reserve(es.size());
    for (const IndexExpr& e : es) out.push_back(mutate(e));
    return out;
  }

  // ---- sums ----

  // Canonical expression of a sum of canonical parts; nullopt on overflow.
  std::optional<IndexExpr> build_sum(Sum s) {
    normalize(s);
    if (s.overflow) return std::nullopt;
    while (recombine_div_mod(s)) {
    }
    return from_sum(s);
  }

  // The key rule, undoing index flattening:  k*(y % c) + k*c*(y // c) -> k*y.
  // (Valid for every y and c != 0: y == (y // c)*c + y % c.) y // c is taken in
  // canonical form, so (o // 4) % 3 pairs with o // 12. Each application
  // removes a % term and replaces it by the smaller y, so this terminates.
  bool recombine_div_mod(Sum& s) {
    for (const auto& [atom, k] : s.terms) {
      if (atom.op() != IndexOp::Mod) continue;
      const IndexExpr& y = atom.operands()[0];
      std::optional<int64_t> c = positive_const(atom.operands()[1]);
      int64_t kc;
      if (!c || __builtin_mul_overflow(k, *c, &kc)) continue;
      Sum quotient = to_sum(build_floordiv(y, *c));
      if (quotient.terms.empty() || !contains_scaled(s, quotient, kc)) continue;
      Sum next = s;
      add_term(next, atom, -k);
      add_scaled(next, quotient, -kc);
      add_scaled(next, to_sum(y), k);
      normalize(next);
      if (next.overflow) continue;
      s = std::move(next);
      return true;
    }
    return false;
  }

  // Whether every term of scale*part occurs in s with exactly that coefficient.
  static bool contains_scaled(const Sum& s, const Sum& part, int64_t scale) {
    for (const auto& [atom, coef] : part.terms) {
      int64_t want;
      if (__builtin_mul_overflow(coef, scale, &want)) return false;
      auto it = std::find_if(s.terms.begin(), s.terms.end(),
                             [&](const auto& t) { return t.first == atom; });
      if (it == s.terms.end() || it->second != want) return false;
    }
    return true;
  }

  // ---- products ----

  IndexExpr build_mul(const std::vector<IndexExpr>& operands) {
    std::vector<IndexExpr> factors;  // non-constant, flattened
    std::vector<IndexExpr> all;      // everything, flattened (fallback on overflow)
    int64_t c = 1;
    bool overflow = false;
    for (const IndexExpr& o : operands) {
      const std::vector<IndexExpr> single{o};
      for (const IndexExpr& f : o.op() == IndexOp::Mul ? o.operands() : single) {
        all.push_back(f);
        if (!f.is_const()) {
          factors.push_back(f);
        } else {
          overflow = __builtin_mul_overflow(c, f.const_value(), &c) || overflow;
        }
      }
    }
    if (overflow) return IndexExpr::make(IndexOp::Mul, std::move(all));
    if (c == 0 || factors.empty()) return IndexExpr(c);
    if (factors.size() == 1) {
      if (c == 1) return factors[0];
      if (factors[0].op() == IndexOp::Add) {  // distribute the constant over the sum
        Sum s;
        add_scaled(s, to_sum(factors[0]), c);
        if (auto r = build_sum(std::move(s))) return *r;
      }
    }
    std::stable_sort(factors.begin(), factors.end(),
                     [](const IndexExpr& a, const IndexExpr& b) { return compare(a, b) < 0; });
    if (c != 1) factors.emplace_back(c);
    return IndexExpr::make(IndexOp::Mul, std::move(factors));
  }

  // ---- floor division ----

  IndexExpr build_floordiv(const IndexExpr& a, const IndexExpr& b) {
    IndexExpr raw = IndexExpr::make(IndexOp::FloorDiv, {a, b});
    if (!b.is_const() || b.const_value() == 0) return raw;
    int64_t c = b.const_value();
    if (a.is_const()) {
      if (a.const_value() == INT64_MIN && c == -1) return raw;  // would overflow
      return IndexExpr(detail::floor_div(a.const_value(), c));
    }
    if (c == 1) return a;
    if (c == -1) return build_mul({a, IndexExpr(-1)});
    if (c < 0) return raw;  // negative divisors do not occur in addressing; fold constants only
    if (auto q = single_quotient(range(a), c)) return IndexExpr(*q);
    // (y // d) // c -> y // (d*c)
    if (a.op() == IndexOp::FloorDiv) {
      int64_t dc;
      if (auto d = positive_const(a.operands()[1]); d && !__builtin_mul_overflow(*d, c, &dc)) {
        return build_floordiv(a.operands()[0], IndexExpr(dc));
      }
    }
    // (y % (c*m)) // c -> (y // c) % m: the canonical digit extraction.
    if (a.op() == IndexOp::Mod) {
      if (auto m = positive_const(a.operands()[1]); m && *m % c == 0) {
        return build_mod(build_floordiv(a.operands()[0], IndexExpr(c)), IndexExpr(*m / c));
      }
    }
    if (auto r = floordiv_of_sum(a, c)) return *r;
    return raw;
  }

  // (c*A + B) // c -> A + B // c, with every coefficient (and the constant)
  // split as k = c*q + r, |r| < c. Then divides out a common factor:
  // (g*B) // (g*c) -> B // c.
  std::optional<IndexExpr> floordiv_of_sum(const IndexExpr& a, int64_t c) {
    Sum s = to_sum(a);
    Sum quot, rem;
    for (const auto& [atom, k] : s.terms) {
      add_term(quot, atom, k / c);
      add_term(rem, atom, k % c);
    }
    quot.constant = s.constant / c;
    rem.constant = s.constant % c;
    if (s.overflow) return std::nullopt;
    if (!quot.terms.empty() || quot.constant != 0) {
      std::optional<IndexExpr> r = build_sum(rem);
      if (!r) return std::nullopt;
      add_scaled(quot, to_sum(build_floordiv(*r, IndexExpr(c))), 1);
      return build_sum(std::move(quot));
    }
    if (auto split = split_small_part(s, c)) {
      std::optional<IndexExpr> big = build_sum(std::move(split->big));
      if (big) return build_floordiv(*big, IndexExpr(c / split->d));
    }
    int64_t g = std::gcd(c, rem.constant);
    for (const auto& t : rem.terms) g = std::gcd(g, t.second);
    if (g <= 1) return std::nullopt;
    Sum reduced;
    for (const auto& [atom, k] : rem.terms) add_term(reduced, atom, k / g);
    reduced.constant = rem.constant / g;
    std::optional<IndexExpr> r = build_sum(std::move(reduced));
    if (!r) return std::nullopt;
    return build_floordiv(*r, IndexExpr(c / g));
  }

  // (d*A + B) // (d*m) -> A // m  and  (d*A + B) % (d*m) -> d*(A % m) + B
  // where every point has 0 <= B < d (B: the terms d does not divide, and the
  // constant's remainder). This is a view merging dims: 1024*r + o with o in
  // [0, 1024) over 131072 = 1024*128 is r // 128, so that a reshape of a
  // reshape reads the flat index again. d runs over gcd(k, c) of the terms,
  // largest first; `big` is A (already divided by d).
  struct SmallSplit {
    int64_t d;
    Sum big, small;
  };
  std::optional<SmallSplit> split_small_part(const Sum& s, int64_t c) {
    if (s.overflow || s.terms.size() < 2) return std::nullopt;
    std::vector<int64_t> ds;
    for (const auto& t : s.terms) {
      int64_t g = std::gcd(t.second, c);
      if (g > 1 && g < c) ds.push_back(g);
    }
    std::sort(ds.rbegin(), ds.rend());
    ds.erase(std::unique(ds.begin(), ds.end()), ds.end());
    for (int64_t d : ds) {
      SmallSplit sp{d, {}, {}};
      for (const auto& [atom, k] : s.terms) {
        if (k % d == 0) add_term(sp.big, atom, k / d);
        else add_term(sp.small, atom, k);
      }
      sp.big.constant = detail::floor_div(s.constant, d);
      sp.small.constant = detail::floor_mod(s.constant, d);
      if (sp.big.terms.empty() || sp.small.terms.empty()) continue;
      std::optional<IndexExpr> b = build_sum(Sum(sp.small));
      if (!b) continue;
      Interval r = range(*b);
      if (bounded(r) && r.lo >= 0 && r.hi < d) return sp;
    }
    return std::nullopt;
  }

  // ---- modulo ----

  IndexExpr build_mod(const IndexExpr& a, const IndexExpr& b) {
    IndexExpr raw = IndexExpr::make(IndexOp::Mod, {a, b});
    if (!b.is_const() || b.const_value() == 0) return raw;
    int64_t c = b.const_value();
    if (a.is_const()) return IndexExpr(detail::floor_mod(a.const_value(), c));
    if (c == 1 || c == -1) return IndexExpr(0);
    if (c < 0) return raw;
    // All of a within one period [q*c, q*c + c): a % c == a - q*c.
    if (auto q = single_quotient(range(a), c)) {
      Sum s = to_sum(a);
      int64_t qc;
      if (__builtin_mul_overflow(*q, c, &qc)) return raw;
      add_constant(s, -qc);
      if (auto r = build_sum(std::move(s))) return *r;
      return raw;
    }
    // (y % (c*m)) % c -> y % c
    if (a.op() == IndexOp::Mod) {
      if (auto m = positive_const(a.operands()[1]); m && *m % c == 0) {
        return build_mod(a.operands()[0], b);
      }
    }
    if (auto r = mod_of_sum(a, c)) return *r;
    if (auto split = split_small_part(to_sum(a), c)) {
      std::optional<IndexExpr> big = build_sum(std::move(split->big));
      if (!big) return raw;
      Sum out = split->small;
      add_term(out, build_mod(*big, IndexExpr(c / split->d)), split->d);
      if (auto r = build_sum(std::move(out))) return *r;
    }
    return raw;
  }

  // (c*A + B) % c -> B % c: reduces every coefficient and the constant to its
  // remainder k % c (same split as floordiv_of_sum, so y // c and y % c keep
  // matching operands).
  std::optional<IndexExpr> mod_of_sum(const IndexExpr& a, int64_t c) {
    Sum s = to_sum(a);
    if (s.overflow) return std::nullopt;
    Sum rem;
    bool changed = s.constant % c != s.constant;
    for (const auto& [atom, k] : s.terms) {
      add_term(rem, atom, k % c);
      changed = changed || k % c != k;
    }
    rem.constant = s.constant % c;
    if (!changed) return std::nullopt;
    std::optional<IndexExpr> r = build_sum(std::move(rem));
    if (!r) return std::nullopt;
    return build_mod(*r, IndexExpr(c));
  }

  // ---- min / max ----

  IndexExpr build_min_max(IndexOp op, const std::vector<IndexExpr>& operands) {
    bool is_min = op == IndexOp::Min;
    std::vector<IndexExpr> ops;  // flattened: min(min(a, b), c) -> min(a, b, c)
    for (const IndexExpr& o : operands) {
      if (o.op() == op) {
        ops.insert(ops.end(), o.operands().begin(), o.operands().end());
      } else {
        ops.push_back(o);
      }
    }
    std::stable_sort(ops.begin(), ops.end(),
                     [](const IndexExpr& a, const IndexExpr& b) { return compare(a, b) < 0; });
    ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
    // Drop an operand when a kept one is always at least as good. Dropping in
    // sequence is sound: each dropped operand is dominated by one still kept
    // when it is dropped, and dominance is transitive.
    std::vector<bool> dropped(ops.size(), false);
    for (size_t j = 0; j < ops.size(); ++j) {
      for (size_t i = 0; i < ops.size(); ++i) {
        if (i != j && !dropped[i] && (is_min ? always_le(ops[i], ops[j]) : always_le(ops[j], ops[i]))) {
          dropped[j] = true;
          break;
        }
      }
    }
    std::vector<IndexExpr> kept;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!dropped[i]) kept.push_back(ops[i]);
    }
    if (kept.size() == 1) return kept[0];
    return IndexExpr::make(op, std::move(kept));
  }

  // a <= b at every point: by their ranges, or by the range of a - b (which
  // sees through shared terms, e.g. i <= i + 1).
  bool always_le(const IndexExpr& a, const IndexExpr& b) {
    if (range(a).hi <= range(b).lo) return true;
    Sum d = to_sum(a);
    add_scaled(d, to_sum(b), -1);
    std::optional<IndexExpr> diff = build_sum(std::move(d));
    return diff && range(*diff).hi <= 0;
  }

  const RangeMap& ranges_;
};

}  // namespace

IndexExpr simplify(const IndexExpr& e, const RangeMap& ranges) {
  Simplifier s(ranges);
  IndexExpr cur = s.mutate(e);
  // A rewrite can expose a match higher up that the bottom-up pass has already
  // passed; repeat to a fixed point so that simplify is idempotent. The bound
  // is a safety net; canonical forms converge in one or two passes.
  for (int pass = 0; pass < 16; ++pass) {
    IndexExpr next = s.mutate(cur);
    if (next == cur) break;
    cur = next;
  }
  return cur;
}

// ---- Affine views -------------------------------------------------------------------

namespace {

// Linear walk over a simplified expression; false when it is not affine.
bool affine_rec(const IndexExpr& e, int64_t scale, std::map<int, int64_t>& coefs, int64_t& constant) {
  switch (e.op()) {
    case IndexOp::Const: {
      int64_t v;
      return !__builtin_mul_overflow(e.const_value(), scale, &v) &&
             !__builtin_add_overflow(constant, v, &constant);
    }
    case IndexOp::Var:
    case IndexOp::Size: {
      int64_t& c = coefs[e.node().var_id];
      return !__builtin_add_overflow(c, scale, &c);
    }
    case IndexOp::Add:
      for (const IndexExpr& o : e.operands()) {
        if (!affine_rec(o, scale, coefs, constant)) return false;
      }
      return true;
    case IndexOp::Mul: {
      const IndexExpr* inner = nullptr;  // the one allowed non-constant factor
      for (const IndexExpr& f : e.operands()) {
        if (f.is_const()) {
          if (__builtin_mul_overflow(scale, f.const_value(), &scale)) return false;
        } else if (inner) {
          return false;  // var * var
        } else {
          inner = &f;
        }
      }
      return inner ? affine_rec(*inner, scale, coefs, constant)
                   : !__builtin_add_overflow(constant, scale, &constant);
    }
    default:
      return false;
  }
}

std::optional<int64_t> coefficient_rec(const IndexExpr& e, int var_id) {
  if (!depends_on(e, var_id)) return 0;
  switch (e.op()) {
    case IndexOp::Var:
    case IndexOp::Size:
      return 1;
    case IndexOp::Add: {
      int64_t total = 0;
      for (const IndexExpr& o : e.operands()) {
        std::optional<int64_t> c = coefficient_rec(o, var_id);
        if (!c || __builtin_add_overflow(total, *c, &total)) return std::nullopt;
      }
      return total;
    }
    case IndexOp::Mul: {
      // Exactly one factor may mention var; the others must be constants.
      int64_t product = 1;
      std::optional<int64_t> inner;
      for (const IndexExpr& f : e.operands()) {
        if (f.is_const()) {
          if (__builtin_mul_overflow(product, f.const_value(), &product)) return std::nullopt;
        } else if (depends_on(f, var_id) && !inner) {
          inner = coefficient_rec(f, var_id);
          if (!inner) return std::nullopt;
        } else {
          return std::nullopt;  // var * var, or var times a symbolic factor
        }
      }
      int64_t r;
      if (__builtin_mul_overflow(*inner, product, &r)) return std::nullopt;
      return r;
    }
    default:
      return std::nullopt;  // var under //, %, min or max
  }
}

}  // namespace

std::optional<AffineForm> as_affine(const IndexExpr& e) {
  std::map<int, int64_t> coefs;  // ordered: terms come out sorted by var id
  AffineForm form;
  if (!affine_rec(simplify(e), 1, coefs, form.constant)) return std::nullopt;
  for (const auto& [id, coef] : coefs) {
    if (coef != 0) form.terms.emplace_back(id, coef);
  }
  return form;
}

std::optional<int64_t> coefficient_of(const IndexExpr& e, int var_id) {
  return coefficient_rec(simplify(e), var_id);
}

}  // namespace tp::stax::ir
