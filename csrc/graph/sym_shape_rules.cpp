#include "graph/sym_shape_rules.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <tuple>

#include "graph/custom_function.h"

namespace tp::graph {
namespace {

using stax::ir::IndexOp;

bool is_const_dim(const SymDim& d) { return d.is_const(); }

SymShape arg_shape(const Node& n, size_t i) {
  const Arg& a = n.args.at(i);
  if (auto* p = std::get_if<Node*>(&a)) return *p ? sym_shape_of(**p) : SymShape{};
  return {};  // a Python number: 0-d
}

bool name_is(const Node& n, std::initializer_list<const char*> names) {
  for (const char* s : names)
    if (std::strcmp(n.target->name, s) == 0) return true;
  return false;
}

int64_t wrap(int64_t d, size_t nd) { return d < 0 ? d + static_cast<int64_t>(nd) : d; }

struct Ctx {
  Node& n;
  ShapeEnv& env;
  bool part;
  const UserCall* call;
  const std::string& where() const {
    static const std::string empty;
    return call ? call->where() : empty;
  }
  // A part's int attribute that the user did not write: computed from sizes.
  bool derived(int64_t v) const { return part && v >= 2 && !(call && call->is_literal(v)); }
  // A signed int (a bound or index counting from the end): the user's -2 is a literal too.
  bool derived_signed(int64_t v) const { return derived(v < 0 ? -v : v) && !(call && call->is_literal(v)); }
  const std::vector<SymDim>* sym_attr(const char* name) const {
    auto it = n.sym_attrs.find(name);
    return it == n.sym_attrs.end() ? nullptr : &it->second;
  }
};

// Broadcasting: right-aligned; a dim of size 1 stretches, all others must be equal.
bool rule_broadcast(Ctx& c) {
  std::vector<SymShape> ins;
  for (size_t i = 0; i < c.n.args.size(); ++i) {
    const Arg& a = c.n.args[i];
    if (auto* p = std::get_if<Node*>(&a); p && *p) ins.push_back(sym_shape_of(**p));
  }
  size_t nd = c.n.meta.sizes.size();
  SymShape out(nd, SymDim(1));
  for (size_t j = 0; j < nd; ++j) {
    std::optional<SymDim> pick;
    for (auto& s : ins) {
      if (s.size() + j < nd) continue;
      const SymDim& d = s[s.size() - nd + j];
      if (d.is_const() && d.const_value() == 1) continue;
      if (!pick) pick = d;
      else if (!(*pick == d)) c.env.require_equal(*pick, d, c.where());
    }
    if (pick) out[j] = c.env.resolve(*pick);
  }
  c.n.sym_sizes = out;
  return true;
}

bool rule_same_as_input0(Ctx& c) {
  if (c.n.args.empty()) return false;
  c.n.sym_sizes = arg_shape(c.n, 0);
  return true;
}

std::vector<bool> reduced_dims(const Node& n, size_t nd) {
  std::vector<bool> red(nd, false);
  const AttrValue* v = n.attrs.find("dim");
  if (!v || std::holds_alternative<std::monostate>(*v)) {
    red.assign(nd, true);
  } else if (auto* i = std::get_if<int64_t>(v)) {
    if (nd) red.at(static_cast<size_t>(wrap(*i, nd))) = true;
  } else if (auto* l = std::get_if<std::vector<int64_t>>(v)) {
    if (l->empty()) red.assign(nd, true);
    for (int64_t d : *l)
      if (nd) red.at(static_cast<size_t>(wrap(d, nd))) = true;
  } else {
    red.assign(nd, true);
  }
  return red;
}

bool rule_reduction(Ctx& c) {
  SymShape in = arg_shape(c.n, 0);
  std::vector<bool> red = reduced_dims(c.n, in.size());
  bool keep = c.n.attrs.get_or<bool>("keepdim", false);
  SymShape out;
  for (size_t d = 0; d < in.size(); ++d) {
    if (!red[d]) out.push_back(in[d]);
    else if (keep) out.push_back(SymDim(1));
  }
  c.n.sym_sizes = out;
  if (!c.n.output_metas.empty()) c.n.output_sym_sizes.assign(c.n.output_metas.size(), out);
  return true;
}

bool rule_permute(Ctx& c) {
  SymShape in = arg_shape(c.n, 0);
  const auto& dims = c.n.attrs.get<std::vector<int64_t>>("dims");
  SymShape out;
  for (int64_t d : dims) out.push_back(in.at(static_cast<size_t>(wrap(d, in.size()))));
  c.n.sym_sizes = out;
  return true;
}

SymDim product(const SymShape& s, size_t a, size_t b) {
  SymDim p(1);
  for (size_t i = a; i < b; ++i) p = p * s[i];
  return p;
}

// view(size): dims the user gave (constants, SymInts) are known; -1 and, in a
// composite's part, numbers the user did not write are solved from the element
// count, chunk by chunk (groups of input and output dims with equal products).
bool rule_view(Ctx& c) {
  SymShape in = arg_shape(c.n, 0);
  const Shape& oh = c.n.meta.sizes;
  const auto& size = c.n.attrs.get<std::vector<int64_t>>("size");
  if (size.size() != oh.size()) return false;
  Shape ih;
  for (auto& d : in) ih.push_back(c.env.hint(d));
  if (numel(ih) == 0) return false;
  const std::vector<SymDim>* sa = c.sym_attr("size");
  std::vector<std::optional<SymDim>> known(oh.size());
  for (size_t j = 0; j < oh.size(); ++j) {
    if (sa && j < sa->size()) {
      const SymDim& e = (*sa)[j];
      if (!(e.is_const() && e.const_value() == -1)) known[j] = e;
    } else if (size[j] != -1 && !c.derived(size[j])) {
      known[j] = SymDim(size[j]);
    }
  }
  SymShape out(oh.size());
  size_t i = 0, j = 0;
  while (i < in.size() || j < oh.size()) {
    size_t i0 = i, j0 = j;
    int64_t pi = 1, pj = 1;
    if (i < in.size()) pi = ih[i++];
    if (j < oh.size()) pj = oh[j++];
    while (pi != pj) {
      if (pi < pj && i < in.size()) pi *= ih[i++];
      else if (pj < pi && j < oh.size()) pj *= oh[j++];
      else return false;
    }
    // Trailing size-1 dims join the chunk on either side.
    while (i < in.size() && ih[i] == 1 && (j >= oh.size() || oh[j] != 1)) ++i;
    while (j < oh.size() && oh[j] == 1 && (i >= in.size() || ih[i] != 1) && !known[j]) known[j] = SymDim(1), ++j;
    SymDim P = product(in, i0, i);
    std::vector<size_t> unknown;
    SymDim K(1);
    for (size_t q = j0; q < j; ++q) {
      if (known[q]) K = K * *known[q];
      else unknown.push_back(q);
    }
    if (unknown.size() > 1) {
      // Several dims a composite computed from sizes in one chunk (linear's view back to
      // the batch dims: [s0*s1, 32] -> [8, 3, 32]): each must be one factor of the chunk's
      // product, told apart by its hint; ambiguous hints or a leftover factor: no solution.
      std::vector<SymDim> factors;
      SymDim Pr = c.env.resolve(P);
      for (auto& f : Pr.op() == IndexOp::Mul ? Pr.operands() : std::vector<SymDim>{Pr}) factors.push_back(f);
      for (size_t q = j0; q < j; ++q)
        if (known[q]) {  // a known dim takes its own factor out first
          auto it = std::find(factors.begin(), factors.end(), *known[q]);
          if (it != factors.end()) factors.erase(it);
        }
      bool solved = factors.size() == unknown.size();
      for (size_t a = 0; solved && a < factors.size(); ++a)
        for (size_t b = a + 1; b < factors.size(); ++b)
          if (c.env.hint(factors[a]) == c.env.hint(factors[b]) && !(factors[a] == factors[b])) solved = false;
      std::vector<SymDim> pick;
      for (size_t u = 0; solved && u < unknown.size(); ++u) {
        auto it = std::find_if(factors.begin(), factors.end(),
                               [&](const SymDim& f) { return c.env.hint(f) == oh[unknown[u]]; });
        if (it == factors.end()) solved = false;
        else pick.push_back(*it), factors.erase(it);
      }
      if (solved) {
        for (size_t u = 0; u < unknown.size(); ++u) known[unknown[u]] = pick[u];
        unknown.clear();
      }
    }
    if (unknown.size() > 1) {
      // No unique solution: fix the symbols.
      std::vector<int> ks;
      stax::ir::collect_sizes(c.env.resolve(P), ks);
      for (int k : ks) c.env.specialize(stax::ir::size_var(k), c.where());
      for (size_t q : unknown) known[q] = SymDim(oh[q]), K = K * SymDim(oh[q]);
      unknown.clear();
    }
    if (unknown.empty()) {
      c.env.require_equal(P, K, c.where());
    } else {
      SymDim Pr = c.env.resolve(P), Kr = c.env.resolve(K);
      if (!(Kr.is_const() && Kr.const_value() == 1)) c.env.decide(stax::ir::mod(Pr, Kr), GuardRel::Eq, c.where());
      known[unknown[0]] = c.env.resolve(stax::ir::floordiv(Pr, Kr));
    }
    for (size_t q = j0; q < j; ++q) out[q] = c.env.resolve(*known[q]);
  }
  c.n.sym_sizes = out;
  if (!std::all_of(out.begin(), out.end(), is_const_dim)) c.n.sym_attrs["size"] = out;
  else c.n.sym_attrs.erase("size");
  return true;
}

bool rule_expand(Ctx& c) {
  SymShape in = arg_shape(c.n, 0);
  const auto& size = c.n.attrs.get<std::vector<int64_t>>("size");
  const std::vector<SymDim>* sa = c.sym_attr("size");
  const size_t nout = size.size();
  if (nout < in.size()) return false;
  SymShape out(nout);
  for (size_t j = 0; j < nout; ++j) {
    const int64_t k = static_cast<int64_t>(j) - static_cast<int64_t>(nout - in.size());
    std::optional<SymDim> given;
    if (sa && j < sa->size() && !((*sa)[j].is_const() && (*sa)[j].const_value() == -1)) given = (*sa)[j];
    if (size[j] == -1 && !given) {
      if (k < 0) return false;
      out[j] = in[static_cast<size_t>(k)];
      continue;
    }
    if (k >= 0) {
      const SymDim& d = in[static_cast<size_t>(k)];
      const bool one = d.is_const() && d.const_value() == 1;
      if (!one) {
        if (!given && !d.is_const() && c.derived(size[j])) {
          out[j] = d;  // the composite copied the input's size
          continue;
        }
        c.env.require_equal(d, given ? *given : SymDim(size[j]), c.where());
        out[j] = c.env.resolve(d);
        continue;
      }
    }
    if (!given && c.derived(size[j])) return false;  // a new dim sized from elsewhere
    out[j] = given ? c.env.resolve(*given) : SymDim(size[j]);
  }
  c.n.sym_sizes = out;
  if (!std::all_of(out.begin(), out.end(), is_const_dim)) c.n.sym_attrs["size"] = out;
  else c.n.sym_attrs.erase("size");
  return true;
}

// A bound of slice/select, normalized and clamped into [0, L] by decisions at the hints.
SymDim clamp_bound(Ctx& c, SymDim b, const SymDim& L) {
  if (c.env.hint(b) < 0) b = b + L;
  if (!c.env.decide(b, GuardRel::Ge, c.where())) return SymDim(0);
  if (!c.env.decide(L - b, GuardRel::Ge, c.where())) return L;
  return c.env.resolve(b);
}

// The composite the user called when its parts' bounds along `dim` depend on
// that dim's size only (split with an int size, chunk, unbind): its name, else "".
std::string split_family(const Ctx& c, size_t dim, size_t nd) {
  if (!c.part || !c.call || !c.call->op) return "";
  const char* name = c.call->op->name;
  if (std::strcmp(name, "split") && std::strcmp(name, "chunk") && std::strcmp(name, "unbind")) return "";
  const AttrValue* d = c.call->attrs.find("dim");
  const int64_t cd = d && std::holds_alternative<int64_t>(*d) ? std::get<int64_t>(*d) : 0;
  if (wrap(cd, nd) != static_cast<int64_t>(dim)) return "";
  if (!std::strcmp(name, "split")) {
    const AttrValue* k = c.call->attrs.find("split_size");
    if (!k || !std::holds_alternative<int64_t>(*k)) return "";
  }
  return name;
}

// A piece [start, end) of split / chunk along a symbolic dim L, the bounds
// as expressions valid for every size the recorded guards admit:
//  * chunk(n) when L % n == 0 at the hint: the guard L % n == 0, piece i is
//    [i * (L / n), (i + 1) * (L / n)) (so every piece has the size L / n);
//  * split(k): the number of pieces ceil(L / k) is guarded ((c - 1) k < L <= c k),
//    every piece but the last is [i k, (i + 1) k), the last ends at L.
// Otherwise (chunk with L % n != 0: the piece size and count depend on L in
// ways a guard on L % n cannot hold) L alone is specialized, the other dims
// of the input stay symbolic. Returns false when the node is not such a piece.
bool split_piece_bounds(Ctx& c, const std::string& family, const SymDim& L, SymDim* start, SymDim* end) {
  const int64_t Lh = c.env.hint(L);
  const int64_t s = c.n.attrs.get_optional_int("start").value_or(0);
  const int64_t e = std::min(c.n.attrs.get_optional_int("end").value_or(Lh), Lh);
  if (c.n.attrs.get_int("step") != 1 || s < 0 || e < s) return false;
  if (family == "chunk") {
    const int64_t n = c.call->attrs.get_int("chunks");
    if (n >= 1 && Lh % n == 0 && Lh / n >= 1 && s % (Lh / n) == 0 &&
        c.env.decide(mod(L, SymDim(n)), GuardRel::Eq, c.where())) {
      const SymDim piece = c.env.resolve(floordiv(L, SymDim(n)));
      const int64_t i = s / (Lh / n);
      *start = c.env.resolve(SymDim(i) * piece);
      *end = c.env.resolve(SymDim(i + 1) * piece);  // the last: n * (L / n) = L, every piece L / n long
      return true;
    }
  } else if (family == "split") {
    const int64_t k = c.call->attrs.get_int("split_size");
    if (k >= 1 && s % k == 0) {
      const int64_t count = (Lh + k - 1) / k;
      c.env.decide(L - SymDim((count - 1) * k + 1), GuardRel::Ge, c.where());
      c.env.decide(SymDim(count * k) - L, GuardRel::Ge, c.where());
      *start = SymDim(s);
      *end = e == Lh ? L : SymDim(e);
      return true;
    }
  }
  c.env.specialize(L, c.where());
  *start = SymDim(s);
  *end = SymDim(e);
  return true;
}

// slice's (and slice_scatter's) start and end along a dim of size L, clamped.
// A bound needs a symbolic attribute only when it came from a SymInt, from a
// derivative formula's size expression, or from a composite's "to the end" (a
// constant, negative ones included, reads the same at every size: the kernel
// normalizes and clamps it as the rule did). False: a bound a composite
// computed from sizes that the trace cannot follow.
bool slice_bounds(Ctx& c, const SymDim& L, SymDim* s, SymDim* e, bool* sym_start, bool* sym_end) {
  auto bound = [&](const char* name, int64_t dflt, SymDim* out, bool* symbolic) -> bool {
    if (const std::vector<SymDim>* sa = c.sym_attr(name)) {
      *out = clamp_bound(c, sa->at(0), L);
      *symbolic = true;
      return true;
    }
    std::optional<int64_t> v = c.n.attrs.get_optional_int(name);
    int64_t x = v ? *v : dflt;
    if (x >= (int64_t{1} << 62)) {  // an open end
      *out = L;
      return true;
    }
    if (!L.is_const() && c.derived_signed(x)) {
      if (x == c.env.hint(L)) {  // the composite's "to the end"
        *out = L;
        *symbolic = true;
        return true;
      }
      return false;
    }
    *out = clamp_bound(c, SymDim(x), L);
    return true;
  };
  return bound("start", 0, s, sym_start) && bound("end", int64_t{1} << 62, e, sym_end);
}

SymDim slice_length(Ctx& c, const SymDim& s, const SymDim& e, int64_t step) {
  return c.env.decide(e - s, GuardRel::Ge, c.where()) ? c.env.resolve(floordiv(e - s + SymDim(step - 1), SymDim(step)))
                                                      : SymDim(0);
}

// The bounds the node keeps: symbolic ones as attributes evaluated per call,
// the others (and symbolic ones that resolved to a number) as plain ints.
// A symbolic one's int is set to its value at the hints, normalized and
// clamped as the expression is (x[-(n // 2):] keeps start = n - n // 2), so a
// derivative formula that passes the int on (slice's gradient) passes the
// number the expression has.
void keep_slice_bounds(Ctx& c, SymDim s, SymDim e, bool sym_start, bool sym_end) {
  for (auto [name, v, symbolic] : {std::tuple{"start", s, sym_start}, std::tuple{"end", e, sym_end}}) {
    if (symbolic && !v.is_const()) c.n.sym_attrs[name] = {v};
    else c.n.sym_attrs.erase(name);
    if (symbolic) c.n.attrs.set(name, c.env.hint(v));
  }
}

// A part of narrow(dim, start, length) (slice(start', start' + length), start'
// = start, or start + L when negative): its bounds from the user's start and
// length (SymInts or literals), which slice's rule cannot tell from sizes.
void narrow_bounds(Ctx& c, const SymDim& L) {
  if (!c.part || !c.call || !c.call->op || std::strcmp(c.call->op->name, "narrow") != 0) return;
  auto arg = [&](const char* name) -> std::optional<SymDim> {
    if (auto it = c.call->sym_attrs.find(name); it != c.call->sym_attrs.end() && it->second.size() == 1)
      return it->second[0];
    if (std::optional<int64_t> v = c.call->attrs.get_optional_int(name)) return SymDim(*v);
    return std::nullopt;
  };
  std::optional<SymDim> start = arg("start"), length = arg("length");
  if (!start || !length) return;
  if (c.env.hint(*start) < 0) start = *start + L;
  const SymDim end = c.env.resolve(*start + *length);
  start = c.env.resolve(*start);
  if (c.n.attrs.get_optional_int("start") != c.env.hint(*start) || c.n.attrs.get_optional_int("end") != c.env.hint(end))
    return;
  c.n.sym_attrs["start"] = {*start};
  c.n.sym_attrs["end"] = {end};
  c.call->consumed = true;
}

bool rule_slice(Ctx& c) {
  SymShape in = arg_shape(c.n, 0);
  const size_t dim = static_cast<size_t>(wrap(c.n.attrs.get_int("dim"), in.size()));
  const SymDim L = in.at(dim);
  const int64_t step = c.n.attrs.get_int("step");
  if (step < 1) return false;
  if (const std::string family = split_family(c, dim, in.size());
      !family.empty() && family != "unbind" && !L.is_const() && !c.sym_attr("start") && !c.sym_attr("end")) {
    SymDim s, e;
    if (!split_piece_bounds(c, family, L, &s, &e)) return false;
    SymShape out = in;
    for (auto& d : out) d = c.env.resolve(d);
    out[dim] = c.env.resolve(e - s);
    c.n.sym_sizes = out;
    for (auto [name, v] : {std::pair{"start", s}, std::pair{"end", e}}) {
      v = c.env.resolve(v);
      if (!v.is_const()) c.n.sym_attrs[name] = {v};
      else {
        c.n.sym_attrs.erase(name);
        c.n.attrs.set(name, v.const_value());
      }
    }
    return true;
  }
  narrow_bounds(c, L);
  SymDim s, e;
  bool sym_start = false, sym_end = false;
  if (!slice_bounds(c, L, &s, &e, &sym_start, &sym_end)) return false;
  SymShape out = in;
  out[dim] = slice_length(c, s, e, step);
  c.n.sym_sizes = out;
  keep_slice_bounds(c, s, e, sym_start, sym_end);
  return true;
}

// unfold(self, dimension, size, step): the dim becomes (L - size) // step + 1
// windows (guarded L >= size, which eager checked), the window a new last dim.
bool rule_unfold(Ctx& c) {
  SymShape in = arg_shape(c.n, 0);
  if (in.empty()) return false;
  const size_t dim = static_cast<size_t>(wrap(c.n.attrs.get_int("dimension"), in.size()));
  // A SymInt window size or step (an int argument of a compiled function made
  // symbolic) is read as its number below: fixed to it (Stax's loop rule bakes
  // it in; kept symbolic, another value ran the first one's windows).
  for (const char* name : {"size", "step"})
    if (auto it = c.n.sym_attrs.find(name); it != c.n.sym_attrs.end()) {
      for (const SymDim& d : it->second) c.env.specialize(d, c.where());
      c.n.sym_attrs.erase(it);
    }
  const int64_t size = c.n.attrs.get_int("size"), step = c.n.attrs.get_int("step");
  if (step < 1 || size < 0) return false;
  const SymDim rest = in[dim] - SymDim(size);
  if (!c.env.decide(rest, GuardRel::Ge, c.where())) return false;
  for (auto& d : in) d = c.env.resolve(d);
  in[dim] = c.env.resolve(floordiv(rest, SymDim(step)) + SymDim(1));
  in.push_back(SymDim(size));
  c.n.sym_sizes = in;
  return true;
}

// slice_scatter(self, src, dim, start, end, step): self's shape, src filling
// the slice (its sizes equal the slice's, recorded). slice's gradient makes
// one with the forward slice's bounds, as symbolic attributes where the
// forward computed them from sizes.
bool rule_slice_scatter(Ctx& c) {
  SymShape in = arg_shape(c.n, 0), src = arg_shape(c.n, 1);
  if (in.empty() || src.size() != in.size()) return false;
  const size_t dim = static_cast<size_t>(wrap(c.n.attrs.get_int("dim"), in.size()));
  const int64_t step = c.n.attrs.get_or<int64_t>("step", 1);
  if (step < 1) return false;
  SymDim s, e;
  bool sym_start = false, sym_end = false;
  if (!slice_bounds(c, in[dim], &s, &e, &sym_start, &sym_end)) return false;
  const SymDim len = slice_length(c, s, e, step);
  for (size_t d = 0; d < in.size(); ++d) c.env.require_equal(src[d], d == dim ? len : in[d], c.where());
  for (auto& d : in) d = c.env.resolve(d);
  c.n.sym_sizes = in;
  keep_slice_bounds(c, s, e, sym_start, sym_end);
  return true;
}

// select's (and select_scatter's) index along a dim of size L, normalized
// (a negative one counts from the end) and checked in range by decisions at
// the hints. A symbolic index (x[n - 1], select's gradient of it) is kept as
// an attribute evaluated per call, its int set to the normalized hint.
bool select_index(Ctx& c, SymShape* in, size_t dim) {
  SymDim L = in->at(dim);
  const int64_t idx = c.n.attrs.get_int("index");
  if (const std::vector<SymDim>* sa = c.sym_attr("index")) {
    SymDim i = sa->at(0);
    if (c.env.hint(i) < 0) i = i + L;
    c.env.decide(i, GuardRel::Ge, c.where());
    c.env.decide(L - i - SymDim(1), GuardRel::Ge, c.where());
    i = c.env.resolve(i);
    if (i.is_const()) c.n.sym_attrs.erase("index");
    else c.n.sym_attrs["index"] = {i};
    c.n.attrs.set("index", c.env.hint(i));
    return true;
  }
  // unbind: the number of pieces is the size, so that size alone is fixed.
  if (!L.is_const() && split_family(c, dim, in->size()) == "unbind") {
    c.env.specialize(L, c.where());
    *in = arg_shape(c.n, 0);
    for (auto& d : *in) d = c.env.resolve(d);
    L = in->at(dim);
  } else if (!L.is_const() && c.derived_signed(idx)) {
    return false;
  }
  if (idx >= 0) c.env.decide(L - SymDim(idx + 1), GuardRel::Ge, c.where());
  else c.env.decide(L + SymDim(idx), GuardRel::Ge, c.where());
  return true;
}

bool rule_select(Ctx& c) {
  SymShape in = arg_shape(c.n, 0);
  const size_t dim = static_cast<size_t>(wrap(c.n.attrs.get_int("dim"), in.size()));
  if (!select_index(c, &in, dim)) return false;
  SymShape out;
  for (size_t d = 0; d < in.size(); ++d)
    if (d != dim) out.push_back(c.env.resolve(in[d]));
  c.n.sym_sizes = out;
  return true;
}

// select_scatter(self, src, dim, index): self's shape, src the selected slice
// (its sizes equal self's without dim, recorded).
bool rule_select_scatter(Ctx& c) {
  SymShape in = arg_shape(c.n, 0), src = arg_shape(c.n, 1);
  if (in.empty() || src.size() + 1 != in.size()) return false;
  const size_t dim = static_cast<size_t>(wrap(c.n.attrs.get_int("dim"), in.size()));
  if (!select_index(c, &in, dim)) return false;
  for (size_t d = 0, k = 0; d < in.size(); ++d)
    if (d != dim) c.env.require_equal(src[k++], in[d], c.where());
  for (auto& d : in) d = c.env.resolve(d);
  c.n.sym_sizes = in;
  return true;
}

bool rule_matmul(Ctx& c, bool add_bias) {
  const size_t a0 = add_bias ? 1 : 0;
  SymShape a = arg_shape(c.n, a0), b = arg_shape(c.n, a0 + 1);
  if (a.empty() || b.empty()) return false;
  SymShape out;
  if (a.size() == 1 && b.size() == 1) {
    c.env.require_equal(a[0], b[0], c.where());
  } else if (a.size() >= 1 && b.size() >= 1) {
    const SymDim& ka = a.back();
    const SymDim& kb = b.size() == 1 ? b[0] : b[b.size() - 2];
    c.env.require_equal(ka, kb, c.where());
    // Batch dims broadcast.
    SymShape ba(a.begin(), a.end() - std::min<size_t>(a.size(), 2));
    SymShape bb(b.begin(), b.end() - std::min<size_t>(b.size(), 2));
    size_t nb = std::max(ba.size(), bb.size());
    for (size_t j = 0; j < nb; ++j) {
      std::optional<SymDim> pick;
      for (auto* s : {&ba, &bb}) {
        if (s->size() + j < nb) continue;
        const SymDim& d = (*s)[s->size() - nb + j];
        if (d.is_const() && d.const_value() == 1) continue;
        if (!pick) pick = d;
        else c.env.require_equal(*pick, d, c.where());
      }
      out.push_back(pick ? c.env.resolve(*pick) : SymDim(1));
    }
    if (a.size() >= 2) out.push_back(a[a.size() - 2]);
    if (b.size() >= 2) out.push_back(b.back());
  }
  if (add_bias) {
    SymShape bias = arg_shape(c.n, 0);
    for (size_t j = 0; j < bias.size() && j < out.size(); ++j) {
      const SymDim& d = bias[bias.size() - 1 - j];
      if (!(d.is_const() && d.const_value() == 1)) c.env.require_equal(d, out[out.size() - 1 - j], c.where());
    }
  }
  for (auto& d : out) d = c.env.resolve(d);
  c.n.sym_sizes = out;
  return true;
}

bool rule_cat(Ctx& c) {
  std::vector<SymShape> ins;
  for (auto& a : c.n.args)
    if (auto* p = std::get_if<Node*>(&a); p && *p) ins.push_back(sym_shape_of(**p));
  const size_t nd = c.n.meta.sizes.size();
  const size_t dim = static_cast<size_t>(wrap(c.n.attrs.get_int("dim"), nd));
  SymShape out;
  bool first = true;
  for (auto& s : ins) {
    if (s.size() == 1 && s[0].is_const() && s[0].const_value() == 0 && nd != 1) continue;  // legacy empty
    if (s.size() != nd) return false;
    if (first) {
      out = s;
      first = false;
      continue;
    }
    for (size_t d = 0; d < nd; ++d) {
      if (d == dim) out[d] = out[d] + s[d];
      else c.env.require_equal(out[d], s[d], c.where());
    }
  }
  if (first) return false;
  for (auto& d : out) d = c.env.resolve(d);
  c.n.sym_sizes = out;
  return true;
}

// repeat(repeats): leading new dims of the repeat counts, then each dim times
// its count. The counts are the user's (a composite's counts computed from
// sizes: no rule).
bool rule_repeat(Ctx& c) {
  SymShape in = arg_shape(c.n, 0);
  const auto& reps = c.n.attrs.get<std::vector<int64_t>>("repeats");
  if (reps.size() < in.size()) return false;
  const size_t lead = reps.size() - in.size();
  SymShape out;
  for (size_t j = 0; j < reps.size(); ++j) {
    if (c.derived(reps[j])) return false;
    out.push_back(j < lead ? SymDim(reps[j]) : c.env.resolve(in[j - lead] * SymDim(reps[j])));
  }
  c.n.sym_sizes = out;
  return true;
}

bool rule_factory(Ctx& c) {
  const AttrValue* v = c.n.attrs.find("size");
  if (!v || !std::holds_alternative<std::vector<int64_t>>(*v)) return false;
  const auto& size = std::get<std::vector<int64_t>>(*v);
  const std::vector<SymDim>* sa = c.sym_attr("size");
  SymShape out;
  for (size_t j = 0; j < size.size(); ++j) {
    if (sa && j < sa->size()) out.push_back(c.env.resolve((*sa)[j]));
    else if (c.derived(size[j])) return false;
    else out.push_back(SymDim(size[j]));
  }
  c.n.sym_sizes = out;
  return true;
}

bool rule_layer_norm(Ctx& c) {
  SymShape in = arg_shape(c.n, 0);
  const auto& ns = c.n.attrs.get<std::vector<int64_t>>("normalized_shape");
  if (ns.size() > in.size()) return false;
  SymShape stat(in.begin(), in.end() - static_cast<std::ptrdiff_t>(ns.size()));
  for (size_t i = 0; i < ns.size(); ++i) {
    c.env.require_equal(in[stat.size() + i], SymDim(ns[i]), c.where());
    stat.push_back(SymDim(1));
  }
  c.n.sym_sizes = in;
  c.n.output_sym_sizes = {in, stat, stat};
  return true;
}

// layer_norm / rms_norm: the input's shape, its trailing dims equal to normalized_shape (a guard).
// Without it a version captured at [*, 5, 7] normalized a [*, 6, 8] input over the wrong extent
// without the error eager raises.
bool rule_norm_over_trailing(Ctx& c) {
  SymShape in = arg_shape(c.n, 0);
  if (const AttrValue* v = c.n.attrs.find("normalized_shape")) {
    const auto* ns = std::get_if<std::vector<int64_t>>(v);
    if (!ns || ns->size() > in.size()) return false;
    const std::vector<SymDim>* sa = c.sym_attr("normalized_shape");
    if (sa && sa->size() != ns->size()) sa = nullptr;
    for (size_t i = 0; i < ns->size(); ++i) {
      if (!sa && c.derived((*ns)[i])) return false;
      const SymDim want = sa ? c.env.resolve((*sa)[i]) : SymDim((*ns)[i]);
      c.env.require_equal(in[in.size() - ns->size() + i], want, c.where());
    }
    for (auto& d : in) d = c.env.resolve(d);
  }
  c.n.sym_sizes = in;
  return true;
}

// Indexing by a tensor of indices: the result's shape comes from the index.
bool rule_index_select(Ctx& c) {
  SymShape in = arg_shape(c.n, 0), idx = arg_shape(c.n, 1);
  if (in.empty() || idx.size() > 1) return false;
  const size_t dim = static_cast<size_t>(wrap(c.n.attrs.get_int("dim"), in.size()));
  in.at(dim) = idx.empty() ? SymDim(1) : idx[0];
  c.n.sym_sizes = in;
  return true;
}

// x[i0, i1, ...] with index tensors (an undefined one skips its dim): the
// indices broadcast together (B); adjacent indexed dims are replaced by B in
// place, otherwise B comes first; the other dims are kept.
bool rule_index(Ctx& c) {
  SymShape self = arg_shape(c.n, 0);
  std::vector<size_t> indexed, kept;
  std::vector<SymShape> idx;
  for (size_t d = 0; d < self.size(); ++d) {
    const size_t a = d + 1;
    const Node* in = a < c.n.args.size() && std::holds_alternative<Node*>(c.n.args[a]) ? std::get<Node*>(c.n.args[a]) : nullptr;
    if (!in) {
      kept.push_back(d);
      continue;
    }
    indexed.push_back(d);
    idx.push_back(sym_shape_of(*in));
  }
  if (indexed.empty() || c.n.args.size() > self.size() + 1) return false;
  size_t nb = 0;
  for (auto& s : idx) nb = std::max(nb, s.size());
  SymShape b(nb, SymDim(1));
  for (size_t j = 0; j < nb; ++j) {
    std::optional<SymDim> pick;
    for (auto& s : idx) {
      if (s.size() + j < nb) continue;
      const SymDim& d = s[s.size() - nb + j];
      if (d.is_const() && d.const_value() == 1) continue;
      if (!pick) pick = d;
      else if (!(*pick == d)) c.env.require_equal(*pick, d, c.where());
    }
    if (pick) b[j] = c.env.resolve(*pick);
  }
  const bool adjacent = indexed.back() - indexed.front() + 1 == indexed.size();
  const size_t pos = adjacent ? indexed.front() : 0;
  SymShape out;
  for (size_t d : kept)
    if (adjacent && d < pos) out.push_back(self[d]);
  out.insert(out.end(), b.begin(), b.end());
  for (size_t d : kept)
    if (!adjacent || d > pos) out.push_back(self[d]);
  for (auto& d : out) d = c.env.resolve(d);
  c.n.sym_sizes = out;
  return true;
}

// sort: values and indices of the input's shape. topk(k): the dim becomes k
// (the user's; a computed k: no rule), guarded k <= its size.
bool rule_sort_topk(Ctx& c) {
  SymShape in = arg_shape(c.n, 0);
  if (c.n.output_metas.size() != 2) return false;
  if (name_is(c.n, {"topk"})) {
    if (in.empty()) return false;
    const int64_t k = c.n.attrs.get_int("k");
    if (c.derived(k)) return false;
    // A k computed from sizes (`x.topk(x.size(1) - 1)`) is the user's SymInt: the dim is that
    // expression (reading the constant gave the hint's size at every length: "extern topk result
    // has shape [3, 4], planned [3, 3]").
    const std::vector<SymDim>* sk = c.sym_attr("k");
    const SymDim kd = sk && sk->size() == 1 ? c.env.resolve((*sk)[0]) : SymDim(k);
    const size_t dim = static_cast<size_t>(wrap(c.n.attrs.get_int("dim"), in.size()));
    c.env.decide(in[dim] - kd, GuardRel::Ge, c.where());
    for (auto& d : in) d = c.env.resolve(d);
    in[dim] = kd;
  }
  c.n.sym_sizes = in;
  c.n.output_sym_sizes = {in, in};
  return true;
}

bool rule_gather(Ctx& c) {
  c.n.sym_sizes = arg_shape(c.n, 1);
  return true;
}

bool rule_embedding(Ctx& c) {
  SymShape idx = arg_shape(c.n, 0), w = arg_shape(c.n, 1);
  if (w.size() != 2) return false;
  idx.push_back(w[1]);
  c.n.sym_sizes = idx;
  return true;
}

// conv2d, pooling, batch norm: only the batch dim (0) stays symbolic (the others
// are specialized); it passes through to every result of the same rank.
bool rule_batch_passthrough(Ctx& c) {
  SymShape in = arg_shape(c.n, 0);
  if (in.empty()) return false;
  // Channels and spatial dims are fixed (the output sizes are not derived symbolically yet).
  for (size_t d = 1; d < in.size(); ++d)
    if (!in[d].is_const()) c.env.specialize(in[d], c.where());
  // Unbatched (a 3-D input of a 2-D conv/pool): dim 0 is channels, fixed too.
  const size_t batched_rank = name_is(c.n, {"native_batch_norm"}) ? 2 : 4;
  if (in.size() < batched_rank) c.env.specialize(in[0], c.where());
  // The other tensors (a weight, a bias, running statistics) fix the result's
  // channels: static too (a weight passed as an input under dynamic=True was
  // left symbolic, and a version was reused for another number of channels).
  for (size_t i = 1; i < c.n.args.size(); ++i)
    for (auto& d : arg_shape(c.n, i))
      if (!d.is_const()) c.env.specialize(d, c.where());
  for (auto& d : in) d = c.env.resolve(d);
  auto out_of = [&](const TensorMeta& m) {
    SymShape o;
    for (size_t d = 0; d < m.sizes.size(); ++d)
      o.push_back(d == 0 && m.sizes.size() == in.size() ? in[0] : SymDim(m.sizes[d]));
    return o;
  };
  c.n.sym_sizes = out_of(c.n.meta);
  c.n.output_sym_sizes.clear();
  for (auto& m : c.n.output_metas) c.n.output_sym_sizes.push_back(out_of(m));
  return true;
}

// The gradient operators of conv2d and pooling (conv2d_input_grad,
// conv2d_weight_grad, max_pool2d_grad, avg_pool2d_grad, adaptive_avg_pool2d_grad):
// the result is exactly the `size` attribute, which the derivative formula
// took from the forward input's (or weight's) sizes; symbolic where the
// tracer matched it to that tensor's symbolic shape (the extern call then
// evaluates it per call). A static size against symbolic operands is what
// the joint trace's check at other sizes refuses.
bool rule_grad_of_size(Ctx& c) {
  if (const std::vector<SymDim>* sym = c.sym_attr("size")) {
    c.n.sym_sizes = *sym;
    return true;
  }
  // conv_transpose1d/2d, which the user called, are conv2d_input_grad of a size they computed
  // from the input's sizes at their hints: no rule, so those symbols are specialized. The static
  // size was taken as the result at every size: a dynamic version returned the first capture's
  // spatial size (and batch) for other inputs, silently. (Only these composites: the derivative
  // formulas traced for training reach here under other user calls, and the joint trace's check
  // at other sizes handles their static sizes.)
  if (c.call && c.call->op && c.call->op != c.n.target &&
      std::strncmp(c.call->op->name, "conv_transpose", 14) == 0)
    return false;
  const AttrValue* v = c.n.attrs.find("size");
  if (!v || !std::holds_alternative<std::vector<int64_t>>(*v)) return false;
  c.n.sym_sizes.clear();
  for (int64_t d : std::get<std::vector<int64_t>>(*v)) c.n.sym_sizes.push_back(SymDim(d));
  return true;
}

bool rule_nll_loss(Ctx& c) {
  SymShape in = arg_shape(c.n, 0);
  // The target has the input's dims without the class dim (dim 1; none for a
  // 1-D input): equal sizes, recorded (a composite's part whose input was made
  // at the example's sizes, label smoothing's `full(x.sizes())`, then fixes the
  // symbol instead of failing at another size).
  SymShape tg = arg_shape(c.n, 1);
  if (in.size() >= 2 && tg.size() + 1 == in.size())
    for (size_t k = 0; k < tg.size(); ++k) {
      const SymDim& d = in[k == 0 ? 0 : k + 1];
      if (!(d == tg[k])) c.env.require_equal(d, tg[k], c.where());
    }
  const AttrValue* r = c.n.attrs.find("reduction");
  const bool none = r && std::holds_alternative<std::string>(*r) && std::get<std::string>(*r) == "none";
  if (!none) {
    c.n.sym_sizes = {};
    return true;
  }
  if (in.empty()) return false;
  c.n.sym_sizes = {in[0]};
  return true;
}

// An operator of one tensor input and no int attribute besides `dim`, whose
// result has its input's shape at the hints (activations, unary math, ...):
// the same shape at every size. Not when two input dims have equal hints and
// one is symbolic (a transposing operator could not be told apart).
bool rule_generic_same_shape(Ctx& c) {
  const Node& n = c.n;
  if (n.target->has(kNondeterministicShape) || !n.output_metas.empty()) return false;
  int tensors = 0;
  for (auto& a : n.args)
    if (auto* p = std::get_if<Node*>(&a); p && *p) ++tensors;
  if (tensors != 1 || !std::holds_alternative<Node*>(n.args.at(0))) return false;
  for (auto& [name, v] : n.attrs.items()) {
    if (std::holds_alternative<std::vector<int64_t>>(v)) return false;
    if (std::holds_alternative<int64_t>(v) && std::strcmp(name, "dim") != 0) return false;
  }
  SymShape in = arg_shape(n, 0);
  if (in.size() != n.meta.sizes.size()) return false;
  for (size_t i = 0; i < in.size(); ++i) {
    if (c.env.hint(in[i]) != n.meta.sizes[i]) return false;
    for (size_t j = i + 1; j < in.size(); ++j)
      if ((!in[i].is_const() || !in[j].is_const()) && !(in[i] == in[j]) && c.env.hint(in[i]) == c.env.hint(in[j]))
        return false;
  }
  c.n.sym_sizes = in;
  return true;
}

bool has_int_attr_from_sizes(const Ctx& c) {
  // A part's int attribute the user did not write (a dim count computed by the
  // composite) may depend on sizes: only rules that understand it may read it.
  for (auto& [name, v] : c.n.attrs.items()) {
    if (!std::strcmp(name, "dim") || !std::strcmp(name, "dims") || !std::strcmp(name, "keepdim")) continue;
    if (auto* i = std::get_if<int64_t>(&v); i && c.derived_signed(*i)) return true;
    if (auto* l = std::get_if<std::vector<int64_t>>(&v))
      for (int64_t x : *l)
        if (c.derived_signed(x)) return true;
  }
  return false;
}

}  // namespace

const std::string& UserCall::where() const {
  if (!where_known_) {
    where_known_ = true;
    if (where_fn) where_ = where_fn();
  }
  return where_;
}

bool UserCall::is_literal(int64_t v) const {
  return std::find(literals.begin(), literals.end(), v) != literals.end();
}

SymShape sym_shape_of(const Node& n) {
  if (!n.sym_sizes.empty() || n.meta.sizes.empty()) return n.sym_sizes;
  SymShape s;
  for (int64_t d : n.meta.sizes) s.push_back(SymDim(d));
  return s;
}

bool apply_sym_rule(Node& n, ShapeEnv& env, bool part, const UserCall* call) {
  Ctx c{n, env, part, call};
  if (n.is_getitem()) {
    const Node* src = std::get<Node*>(n.args.at(0));
    size_t i = static_cast<size_t>(n.getitem_index());
    if (i >= src->output_sym_sizes.size()) return false;
    n.sym_sizes = src->output_sym_sizes[i];
    return true;
  }
  const OpDef& op = *n.target;
  if (is_custom_function(op)) {
    // Its results are its first arguments (graph/custom_function.h).
    const size_t k = static_cast<size_t>(n.attrs.get_int("num_outputs"));
    if (n.output_metas.empty()) {
      n.sym_sizes = arg_shape(n, 0);
      return true;
    }
    n.output_sym_sizes.clear();
    for (size_t i = 0; i < k; ++i) n.output_sym_sizes.push_back(arg_shape(n, i));
    n.sym_sizes = n.output_sym_sizes.at(0);
    return true;
  }
  if (name_is(n, {"view", "_unsafe_view"})) return rule_view(c);
  if (name_is(n, {"expand"})) return rule_expand(c);
  if (name_is(n, {"permute"})) return rule_permute(c);
  if (name_is(n, {"slice"})) return rule_slice(c);
  if (name_is(n, {"unfold"})) return rule_unfold(c);
  if (name_is(n, {"select"})) return rule_select(c);
  if (name_is(n, {"matmul", "mm", "bmm"})) return rule_matmul(c, false);
  if (name_is(n, {"addmm", "baddbmm"})) return rule_matmul(c, true);
  if (name_is(n, {"cat"})) return rule_cat(c);
  if (name_is(n, {"repeat"})) return rule_repeat(c);
  if (name_is(n, {"native_layer_norm"})) return rule_layer_norm(c);
  if (name_is(n, {"layer_norm", "rms_norm"})) return rule_norm_over_trailing(c);
  if (name_is(n, {"group_norm"})) return rule_same_as_input0(c);
  if (name_is(n, {"nll_loss"})) return rule_nll_loss(c);
  if (name_is(n, {"nll_loss_grad"})) {  // (grad, self, target, weight) -> self's shape
    if (n.args.size() < 2) return false;
    n.sym_sizes = arg_shape(n, 1);
    return true;
  }
  if (name_is(n, {"conv2d_input_grad", "conv2d_weight_grad", "max_pool2d_grad", "avg_pool2d_grad",
                  "adaptive_avg_pool2d_grad"}))
    return rule_grad_of_size(c);
  if (name_is(n, {"conv2d", "max_pool2d_with_indices", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
                  "native_batch_norm"}))
    return rule_batch_passthrough(c);
  if (name_is(n, {"index_select"})) return rule_index_select(c);
  if (name_is(n, {"gather"})) return rule_gather(c);
  if (name_is(n, {"index"})) return rule_index(c);
  if (name_is(n, {"sort", "topk"})) return rule_sort_topk(c);
  if (name_is(n, {"embedding"})) return rule_embedding(c);
  if (name_is(n, {"full", "zeros", "ones", "empty", "philox_random"})) return rule_factory(c);
  if (name_is(n, {"slice_scatter"})) return rule_slice_scatter(c);
  if (name_is(n, {"select_scatter"})) return rule_select_scatter(c);
  if (has_int_attr_from_sizes(c)) return false;
  if (name_is(n, {"index_put", "scatter", "scatter.src",
                  "scatter_add", "index_copy", "index_fill", "masked_scatter", "index_add"}))
    return rule_same_as_input0(c);
  // cumprod's gradient operator (grad, x): x's shape.
  if (name_is(n, {"_cumprod_backward"})) return rule_broadcast(c);
  // max(self)/min(self) have no dim or keepdim: every dim reduced, a 0-d result.
  if (op.has(kReduction) && (n.attrs.has("keepdim") || name_is(n, {"max", "min"}))) return rule_reduction(c);
  if (op.has(kPointwise) || name_is(n, {"where", "masked_fill", "masked_fill.Scalar", "masked_fill.Tensor", "lerp",
                                        "addcmul", "addcdiv", "clamp", "clamp.Tensor"}))
    return rule_broadcast(c);
  if (name_is(n, {"clone", "contiguous", "to", "softmax", "log_softmax", "cumsum", "cumprod", "logcumsumexp",
                  "tril", "triu", "flip", "roll", "relu", "gelu", "silu", "sigmoid", "tanh", "neg", "abs", "exp",
                  "log", "sqrt", "rsqrt", "_softmax", "_log_softmax", "dropout", "alias", "detach",
                  "softmax_backward", "log_softmax_backward"}))
    return rule_same_as_input0(c);
  if (name_is(n, {"_value_check"})) {  // (failed flag, self): self's shape
    c.n.sym_sizes = arg_shape(c.n, 1);
    return true;
  }
  return rule_generic_same_shape(c);
}

bool propagate_sym_shapes(Graph& g, std::string* why) {
  if (!g.is_symbolic()) return true;
  ShapeEnv env;
  for (auto& s : g.symbols) env.new_symbol(s.hint, s.min, s.max, s.origin, s.input_index, s.input_dim);
  for (auto& up : g.nodes()) {
    Node* n = up.get();
    if (n->opcode == Opcode::Output) continue;
    if (n->opcode != Opcode::CallFunction) {
      if (n->sym_sizes.empty())
        for (int64_t d : n->meta.sizes) n->sym_sizes.push_back(SymDim(d));
      continue;
    }
    const bool missing = n->sym_sizes.size() != n->meta.sizes.size() ||
                         (!n->output_metas.empty() && n->output_sym_sizes.size() != n->output_metas.size());
    if (!missing) continue;
    bool ok = false;
    try {
      ok = apply_sym_rule(*n, env, false, nullptr);
    } catch (const Error&) {
      ok = false;
    }
    ok = ok && n->sym_sizes.size() == n->meta.sizes.size();
    for (size_t i = 0; ok && i < n->sym_sizes.size(); ++i) ok = env.hint(n->sym_sizes[i]) == n->meta.sizes[i];
    if (!ok || env.num_decisions() != 0) {
      if (why) *why = str("the new node ", n->name, " (", n->target->name, ") has ",
                          ok ? "a shape that needs a new guard" : "no symbolic shape rule");
      return false;
    }
  }
  return true;
}

void make_static(Graph& g) {
  for (auto& n : g.nodes()) {
    n->sym_sizes.clear();
    n->output_sym_sizes.clear();
    n->sym_attrs.clear();
  }
  g.symbols.clear();
}

}  // namespace tp::graph
