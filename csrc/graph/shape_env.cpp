#include "graph/shape_env.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace tp::graph {

using stax::ir::IndexOp;
using stax::ir::size_var;
using stax::ir::size_var_id;

bool guards_logged() {
  static const bool on = [] {
    const char* v = std::getenv("TP_LOGS");
    if (!v) return false;
    std::string s = std::string(",") + v + ",";
    return s.find(",guards,") != std::string::npos || s.find(",all,") != std::string::npos;
  }();
  return on;
}

std::string describe_sym(const SymDim& e, const std::vector<SymbolInfo>& symbols) {
  switch (e.op()) {
    case IndexOp::Const: return std::to_string(e.const_value());
    case IndexOp::Size: {
      int k = e.size_index();
      if (k >= 0 && k < static_cast<int>(symbols.size()) && !symbols[k].origin.empty()) return symbols[k].origin;
      std::string s = "s";
      s += std::to_string(k);
      return s;
    }
    case IndexOp::Var: return e.var_name();
    default: break;
  }
  const auto& ops = e.operands();
  auto join = [&](const char* sep) {
    std::string s = "(";
    for (size_t i = 0; i < ops.size(); ++i) {
      if (i) s += sep;
      s += describe_sym(ops[i], symbols);
    }
    s += ")";
    return s;
  };
  switch (e.op()) {
    case IndexOp::Add: return join(" + ");
    case IndexOp::Mul: return join(" * ");
    case IndexOp::FloorDiv: return join(" // ");
    case IndexOp::Mod: return join(" % ");
    case IndexOp::Min: return std::string("min").append(join(", "));
    case IndexOp::Max: return std::string("max").append(join(", "));
    default: return e.to_string();
  }
}

std::unordered_map<int, int64_t> hint_values(const std::vector<SymbolInfo>& symbols) {
  std::unordered_map<int, int64_t> v;
  for (size_t k = 0; k < symbols.size(); ++k) v[size_var_id(static_cast<int>(k))] = symbols[k].hint;
  return v;
}

int64_t eval_at_hints(const SymDim& e, const std::vector<SymbolInfo>& symbols) {
  if (e.is_const()) return e.const_value();
  return stax::ir::evaluate(e, hint_values(symbols));
}

stax::ir::RangeMap symbol_ranges(const std::vector<SymbolInfo>& symbols) {
  stax::ir::RangeMap r;
  for (size_t k = 0; k < symbols.size(); ++k)
    r[size_var_id(static_cast<int>(k))] = {symbols[k].min, symbols[k].max};
  return r;
}

static bool rel_holds(int64_t v, GuardRel rel) {
  switch (rel) {
    case GuardRel::Eq: return v == 0;
    case GuardRel::Ne: return v != 0;
    case GuardRel::Ge: return v >= 0;
  }
  return false;
}

bool ShapeGuard::holds(const std::unordered_map<int, int64_t>& values) const {
  return rel_holds(stax::ir::evaluate(expr, values), rel);
}

std::string ShapeGuard::describe(const std::vector<SymbolInfo>& symbols) const {
  // Print `a >= b` / `a == b` with the constant moved to the right: "x.size(0) >= 2".
  SymDim lhs = expr;
  int64_t c = 0;
  if (expr.op() == IndexOp::Add && expr.operands().back().is_const()) {
    c = -expr.operands().back().const_value();
    std::vector<SymDim> rest(expr.operands().begin(), expr.operands().end() - 1);
    lhs = rest.size() == 1 ? rest[0] : SymDim::make(IndexOp::Add, rest);
  }
  const char* op = rel == GuardRel::Eq ? " == " : rel == GuardRel::Ne ? " != " : " >= ";
  // -a >= -c reads better as a <= c.
  if (lhs.op() == IndexOp::Mul && lhs.operands().size() == 2 && lhs.operands()[1].is_const() &&
      lhs.operands()[1].const_value() == -1) {
    lhs = lhs.operands()[0];
    c = -c;
    op = rel == GuardRel::Ge ? " <= " : op;
  }
  std::string s = describe_sym(lhs, symbols);
  s += op;
  s += std::to_string(c);
  if (!where.empty()) {
    s += " (at ";
    s += where;
    s += ")";
  }
  return s;
}

int64_t ShapeEnv::hint(const SymDim& e) const {
  if (e.is_const()) return e.const_value();
  SymDim r = resolve(e);
  return r.is_const() ? r.const_value() : stax::ir::evaluate(r, hints_);
}

int ShapeEnv::new_symbol(int64_t hint, int64_t min, int64_t max, std::string origin, int input_index, int input_dim) {
  SymbolInfo s;
  s.hint = hint;
  s.min = min;
  s.max = max;
  s.origin = std::move(origin);
  s.input_index = input_index;
  s.input_dim = input_dim;
  symbols_.push_back(std::move(s));
  const int k = static_cast<int>(symbols_.size()) - 1;
  ranges_[size_var_id(k)] = {symbols_[k].min, symbols_[k].max};
  hints_[size_var_id(k)] = hint;
  return k;
}

SymDim ShapeEnv::resolve(const SymDim& e) const {
  if (e.is_const() || (e.is_size() && !replacements_.count(e.node().var_id))) return e;
  SymDim r = replacements_.empty() ? e : stax::ir::substitute(e, replacements_);
  return stax::ir::simplify(r, ranges());
}

void ShapeEnv::add_replacement(int k, const SymDim& by) {
  // Keep the map closed: earlier replacements that mention k now use `by`.
  std::unordered_map<int, SymDim> one{{size_var_id(k), by}};
  for (auto& kv : replacements_) kv.second = stax::ir::simplify(stax::ir::substitute(kv.second, one));
  replacements_[size_var_id(k)] = by;
}

bool ShapeEnv::decide(const SymDim& e0, GuardRel rel, const std::string& where) {
  SymDim e = resolve(e0);
  const int64_t v = e.is_const() ? e.const_value() : stax::ir::evaluate(e, hints_);
  const bool outcome = rel_holds(v, rel);
  if (e.is_const()) return outcome;
  // Record what held: the relation or its negation.
  SymDim g = e;
  GuardRel r = rel;
  if (!outcome) {
    if (rel == GuardRel::Eq) r = GuardRel::Ne;
    else if (rel == GuardRel::Ne) r = GuardRel::Eq;
    else g = stax::ir::simplify(SymDim(-1) - e, ranges());  // not (e >= 0)  <=>  -e - 1 >= 0
  }
  // Implied by the declared ranges: nothing to check.
  stax::ir::Interval iv = stax::ir::range_of(g, ranges());
  if ((r == GuardRel::Ge && iv.lo >= 0) || (r == GuardRel::Eq && iv.lo == 0 && iv.hi == 0) ||
      (r == GuardRel::Ne && (iv.lo > 0 || iv.hi < 0)))
    return outcome;
  if (r == GuardRel::Eq || r == GuardRel::Ne) {
    // s * a == s * b with s >= 1 (every symbol is): the same as a == b.
    if (g.op() == IndexOp::Add || g.op() == IndexOp::Mul) {
      std::vector<int> ks;
      stax::ir::collect_sizes(g, ks);
      for (int k : ks) {
        if (symbols_[k].min < 1) continue;
        // Divide every term of the sum by s_k, if each has it as a factor.
        std::vector<SymDim> terms = g.op() == IndexOp::Add ? g.operands() : std::vector<SymDim>{g};
        std::vector<SymDim> q;
        bool all = true;
        for (auto& t : terms) {
          std::vector<SymDim> f = t.op() == IndexOp::Mul ? t.operands() : std::vector<SymDim>{t};
          auto it = std::find(f.begin(), f.end(), size_var(k));
          if (it == f.end()) {
            all = false;
            break;
          }
          f.erase(it);
          q.push_back(f.empty() ? SymDim(1) : f.size() == 1 ? f[0] : SymDim::make(IndexOp::Mul, f));
        }
        if (!all) continue;
        SymDim rest = q.size() == 1 ? q[0] : SymDim::make(IndexOp::Add, q);
        decide(rest, r, where);  // same truth value: s_k >= 1
        return outcome;
      }
    }
  }
  if (r == GuardRel::Eq) {
    // An equation with one symbol of coefficient +-1 fixes it; s_a - s_b == 0 identifies two.
    if (auto af = stax::ir::as_affine(g)) {
      if (af->terms.size() == 1 && (af->terms[0].second == 1 || af->terms[0].second == -1)) {
        const int k = -2 - af->terms[0].first;
        add_replacement(k, SymDim(af->terms[0].second == 1 ? -af->constant : af->constant));
        guards_.push_back({g, r, where});
        return outcome;
      }
      if (af->terms.size() == 2 && af->constant == 0 && af->terms[0].second == -af->terms[1].second &&
          (af->terms[0].second == 1 || af->terms[0].second == -1)) {
        // Keep the symbol of the earlier input (larger var id = smaller k under size_var_id).
        int k0 = -2 - af->terms[0].first, k1 = -2 - af->terms[1].first;
        int keep = std::min(k0, k1), drop = std::max(k0, k1);
        SymbolInfo& s = symbols_[keep];
        s.min = std::max(s.min, symbols_[drop].min);
        s.max = std::min(s.max, symbols_[drop].max);
        ranges_[size_var_id(keep)] = {s.min, s.max};
        add_replacement(drop, size_var(keep));
        guards_.push_back({g, r, where});
        return outcome;
      }
    }
  }
  guards_.push_back({g, r, where});
  return outcome;
}

int64_t ShapeEnv::specialize(const SymDim& e, const std::string& where) {
  SymDim r = resolve(e);
  const int64_t h = r.is_const() ? r.const_value() : stax::ir::evaluate(r, hints_);
  if (!r.is_const() && guards_logged())
    std::fprintf(stderr, "[tp.compile] specializing %s to %lld%s%s\n", describe_sym(r, symbols_).c_str(),
                 static_cast<long long>(h), where.empty() ? "" : " at ", where.c_str());
  if (!r.is_const()) {
    std::vector<int> ks;
    stax::ir::collect_sizes(r, ks);
    if (r.is_size()) {
      decide(r - SymDim(h), GuardRel::Eq, where);
    } else {
      // A compound expression taken as an int: fix every symbol in it (sound, and
      // the input check then reads plain constants).
      for (int k : ks) decide(size_var(k) - SymDim(symbols_[k].hint), GuardRel::Eq, where);
    }
  }
  return h;
}

bool ShapeEnv::require_equal(const SymDim& a, const SymDim& b, const std::string& where) {
  return decide(a - b, GuardRel::Eq, where);
}

SymDim ShapeEnv::finalize(const SymDim& e) const {
  if (e.is_const()) return e;
  SymDim r = resolve(e);
  if (r.is_const()) return r;
  if (!renumbered_) return r;
  if (r.is_size()) return renum_.at(r.node().var_id);
  return stax::ir::simplify(stax::ir::substitute(r, renum_), live_ranges_);
}

std::vector<ShapeGuard> ShapeEnv::finish(Graph& g) {
  // Live symbols, renumbered densely in order.
  std::unordered_map<int, SymDim>& renum = renum_;
  std::vector<SymbolInfo>& live = live_;
  renum.clear();
  live.clear();
  renumbered_ = false;
  for (size_t k = 0; k < symbols_.size(); ++k) {
    int id = size_var_id(static_cast<int>(k));
    if (replacements_.count(id)) continue;
    renumbered_ |= static_cast<int>(live.size()) != static_cast<int>(k);
    renum[id] = size_var(static_cast<int>(live.size()));
    live.push_back(symbols_[k]);
  }
  live_ranges_ = symbol_ranges(live);
  auto fix = [&](const SymDim& e) { return finalize(e); };
  std::vector<ShapeGuard> out;
  if (live.empty()) {
    for (auto& n : g.nodes()) {
      n->sym_sizes.clear();
      n->output_sym_sizes.clear();
      n->sym_attrs.clear();
    }
    g.symbols.clear();
    return out;
  }
  for (auto& n : g.nodes()) {
    if (n->sym_sizes.empty() && n->opcode != Opcode::Output)
      for (int64_t s : n->meta.sizes) n->sym_sizes.push_back(SymDim(s));
    for (auto& d : n->sym_sizes) d = fix(d);
    for (auto& sh : n->output_sym_sizes)
      for (auto& d : sh) d = fix(d);
    for (auto& kv : n->sym_attrs)
      for (auto& d : kv.second) d = fix(d);
    // Attributes that became constants need no symbolic form.
    for (auto it = n->sym_attrs.begin(); it != n->sym_attrs.end();)
      it = std::all_of(it->second.begin(), it->second.end(), [](const SymDim& d) { return d.is_const(); })
               ? n->sym_attrs.erase(it)
               : std::next(it);
  }
  g.symbols = live;
  for (auto& gd : guards_) {
    ShapeGuard r{fix(gd.expr), gd.rel, gd.where};
    if (r.expr.is_const()) continue;  // decided by a replacement
    stax::ir::Interval iv = stax::ir::range_of(r.expr, live_ranges_);
    if ((r.rel == GuardRel::Ge && iv.lo >= 0) || (r.rel == GuardRel::Ne && (iv.lo > 0 || iv.hi < 0))) continue;
    bool dup = false;
    for (auto& o : out) dup |= o.rel == r.rel && o.expr == r.expr;
    if (!dup) out.push_back(std::move(r));
  }
  return out;
}

}  // namespace tp::graph

