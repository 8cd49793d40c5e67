#include "stax/scheduler/schedule.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "stax/ir/expr_visitor.h"

namespace tp::stax {
using namespace tp::stax::ir;

namespace {

bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }
// The dtypes C++ vectors hold in float lanes.
bool half_lanes(DType t) { return t == DType::Float32 || is_half(t); }
// The bytes of one vector lane: a 16-bit float is widened to a float lane in C++ vectors.
int lane_bytes(DType t, bool cpp_vectors) { return cpp_vectors && is_half(t) ? 4 : static_cast<int>(itemsize(t)); }
// Whether a nest reads or writes a 16-bit buffer (no masked accesses for those).
bool touches_half(const LoopNest& nest, const LoopProgram& p) {
  struct Find : ExprVisitor {
    bool found = false;
    void visit_load(const ExprNode& e) override { found = found || is_half(e.dtype); }
  } f;
  f.visit(nest.body);
  bool side = false;
  for (const SideStore& ss : nest.side_stores) side = side || is_half(p.buffers[ss.buffer].dtype);
  return f.found || side || is_half(p.buffers[p.nodes[nest.node].out_buffer].dtype);
}

using VarMap = std::unordered_map<int, IndexExpr>;

// Rebuilds an expression with every load index substituted and simplified.
class ExprRewriter : public ExprMutator {
 public:
  ExprRewriter(const VarMap& map, const RangeMap& ranges) : map_(map), ranges_(ranges) {}
  Expr operator()(const Expr& e) { return mutate(e); }

 protected:
  Expr mutate_load(const Expr& e, std::vector<Expr> args) override {
    IndexExpr idx = simplify(substitute(e->index, map_), ranges_);
    return args.empty() ? load(e->buffer, idx, e->dtype) : load_indirect(e->buffer, idx, args[0], e->dtype);
  }
  Expr mutate_index(const Expr& e) override { return index_value(simplify(substitute(e->index, map_), ranges_)); }

 private:
  const VarMap& map_;
  const RangeMap& ranges_;
};

const ComputeNode* producer_of(const LoopProgram& p, const std::vector<int>& members, int buffer) {
  for (int m : members)
    if (p.nodes[m].writes(buffer)) return &p.nodes[m];
  return nullptr;
}

bool starts_with(const Shape& s, const Shape& prefix) {
  return s.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), s.begin());
}

// Canonical names for the first k vars of a node, so indices of two nodes can be compared.
VarMap canonical_outer(const ComputeNode& n, size_t k) {
  VarMap m;
  for (size_t d = 0; d < k && d < n.vars.size(); ++d) {
    if (!n.vars[d].is_var()) continue;
    std::string name = "c";  // appended, not operator+: GCC 12 warns falsely (-Wrestrict) on "c" + to_string
    name += std::to_string(d);
    m[n.vars[d].var_id()] = var(1000000 + static_cast<int>(d), name);
  }
  return m;
}

RangeMap canonical_ranges(const std::vector<IndexExpr>& outer) {
  RangeMap r;
  for (size_t d = 0; d < outer.size(); ++d) r[1000000 + static_cast<int>(d)] = loop_interval(outer[d]);
  return r;
}

// The first `count` ranges of a node (constants when static).
std::vector<IndexExpr> range_exprs(const ComputeNode& n, size_t count) {
  std::vector<IndexExpr> out;
  for (size_t d = 0; d < count && d < n.ranges.size(); ++d) out.push_back(n.range(d));
  return out;
}

}  // namespace

Interval loop_interval(const IndexExpr& extent) {
  if (extent.is_const()) return {0, extent.const_value() - 1};
  return {0, INT64_MAX - 1};
}

Interval outer_interval(const KernelPlan& k) {
  if (k.symbolic) return loop_interval(k.outer_count);
  return {0, std::max<int64_t>(k.outer_extent - 1, 0)};  // a zero-size space keeps a valid range
}

static bool hands_over_per_outer(const ComputeNode& n, size_t outer_dims) {
  if (n.is_reduction()) return !n.scan;
  return n.ranges.size() == outer_dims;
}

// A pointwise node's output buffer of the same element that a pointwise
// reader of the same iteration space loads: handed over through memory inside
// one outer iteration (the producer's nest stores the row before the reader's
// nest runs). Only for an output buffer, which every plan stores.
static bool hands_over_stored(const LoopProgram& p, const ComputeNode& prod, const ComputeNode& n,
                              const ExprNode& load) {
  if (prod.is_reduction() || n.is_reduction() || prod.scan || prod.out_buffer != load.buffer ||
      p.buffers[load.buffer].kind != BufferKind::Output || !(range_exprs(n, n.ranges.size()) == range_exprs(prod, prod.ranges.size())))
    return false;
  RangeMap ranges = canonical_ranges(range_exprs(n, n.ranges.size()));
  IndexExpr read = simplify(substitute(load.index, canonical_outer(n, n.vars.size())), ranges);
  return read == simplify(substitute(prod.store_index, canonical_outer(prod, prod.vars.size())), ranges);
}

bool can_fuse(const LoopProgram& p, const std::vector<int>& members, const Shape& outer, int node,
              bool stored_handover) {
  const ComputeNode& n = p.nodes[node];
  if (n.is_reduction() ? n.ranges != outer : !starts_with(n.ranges, outer)) return false;
  // Symbolic extents must be the same expressions, not only equal example sizes.
  std::vector<IndexExpr> outer_exprs(outer.begin(), outer.end());
  if (!members.empty()) outer_exprs = range_exprs(p.nodes[members[0]], outer.size());
  if (!(range_exprs(n, outer.size()) == outer_exprs)) return false;
  RangeMap ranges = canonical_ranges(outer_exprs);
  VarMap n_map = canonical_outer(n, outer.size());
  for (const ExprNode* l : loads_of(n.body)) {
    const ComputeNode* prod = producer_of(p, members, l->buffer);
    if (!prod) continue;
    // Only a per-outer-iteration result can be handed over inside a kernel: a
    // reduction's, or a pointwise node's without inner loop (layer_norm's rstd
    // per row); a pointwise producer with an inner loop would need it all first.
    if (!l->args.empty()) return false;
    if (!hands_over_per_outer(*prod, outer.size())) {
      if (stored_handover && hands_over_stored(p, *prod, n, *l)) continue;
      return false;
    }
    IndexExpr read = simplify(substitute(l->index, n_map), ranges);
    IndexExpr wrote = simplify(substitute(prod->store_index, canonical_outer(*prod, outer.size())), ranges);
    if (!(read == wrote)) return false;  // dependence distance != 0
  }
  return true;
}

namespace {

// Independent static float reductions whose every read is contiguous or
// invariant along the last kept dim and strided along the last reduced one
// (what vectorizable_along(outer) accepts and the inner vectorizer refuses).
bool column_reductions(const LoopProgram& p, const std::vector<int>& members, const Shape& outer) {
  if (members.size() < 2 || outer.empty()) return false;
  for (int m : members) {
    const ComputeNode& n = p.nodes[m];
    if (!n.is_reduction() || n.scan || !n.is_static() || n.rvars.empty() || !is_floating(n.body->dtype) ||
        numel(n.ranges) == 0 || numel(n.reduce_ranges) == 0)
      return false;
    const int o = n.vars.back().var_id(), r = n.rvars.back().var_id();
    RangeMap ranges;
    for (size_t d = 0; d < n.vars.size(); ++d) ranges[n.vars[d].var_id()] = {0, n.ranges[d] - 1};
    for (size_t d = 0; d < n.rvars.size(); ++d) ranges[n.rvars[d].var_id()] = {0, n.reduce_ranges[d] - 1};
    auto c = coefficient_of(simplify(n.store_index, ranges), o);
    if (!c || *c != 1) return false;
    bool strided = false;
    for (const ExprNode* l : loads_of(n.body)) {
      if (producer_of(p, members, l->buffer) || !l->args.empty()) return false;
      IndexExpr index = simplify(l->index, ranges);
      auto co = coefficient_of(index, o), cr = coefficient_of(index, r);
      if (!co || (*co != 0 && *co != 1) || !cr) return false;
      strided = strided || (*co == 1 && *cr != 0 && *cr != 1);
    }
    if (!strided) return false;
  }
  return true;
}

// Can `nest` run with vector lanes along loop variable j (extent `extent`)?
// Every load must be contiguous or invariant in j, every value of one float
// type; `store_in_lanes`: the store index must be contiguous in j too.
// `cpp_vectors` (the C++ printer's vector code) allows more: a bool buffer
// read as a where's condition (widened to lane masks: a backward's saved relu
// mask would otherwise make every kernel that reads it scalar), values that do
// not move with the lanes, of any type (scalar code, splatted), and in float
// lanes double arithmetic (+ - * / neg) on float values widened by a cast,
// rounded back to float by a cast: eager's `add(alpha=)` forms
// t + alpha * other in double, and an optimizer step lifted to tensors (SGD,
// Adam) repeats it per element, so without them a compiled optimizer step ran
// scalar code at a third of eager's speed. The printer gives those values
// double vectors of as many lanes (two registers).
bool vectorizable_along(const LoopNest& nest, const LoopProgram& p, const std::set<int>& locals, int vector_bytes,
                        int j, int64_t extent, bool store_in_lanes, bool cpp_vectors) {
  const ComputeNode& n = p.nodes[nest.node];
  DType lane = n.body->dtype;
  // int32: CUDA regions only (int4 accesses); the C++ printer keeps integers scalar.
  if (!is_floating(lane) && (lane != DType::Int32 || cpp_vectors)) return false;
  // 16-bit floats in C++ vectors: float lanes (vf), loads widen and stores
  // round lane by lane (tp_load_bf16, tp_store_bf16), where a 16-bit value and
  // a float32 one are the same register type. Pointwise nests and plain
  // sum/prod/max/min along the inner loop (float accumulators, the result
  // rounded at its store); not column reductions (their printer's lanes are
  // float32 or float64 code) nor Welford / pair reductions.
  const bool plain = !n.is_reduction() || (!store_in_lanes && (n.reduce == ReduceOp::Sum || n.reduce == ReduceOp::Prod ||
                                                               n.reduce == ReduceOp::Max || n.reduce == ReduceOp::Min));
  const bool f32_lanes = cpp_vectors && plain && half_lanes(lane);
  if (cpp_vectors && is_half(lane) && !f32_lanes) return false;
  int lanes = vector_bytes / (f32_lanes ? 4 : static_cast<int>(itemsize(lane)));
  if (extent < lanes) return false;
  if (store_in_lanes) {
    auto c = coefficient_of(nest.store_index, j);
    if (!c || *c != 1) return false;
  }
  // Every value is of the lane type, except masks straight out of a comparison.
  struct LaneCheck : ExprVisitor {
    DType lane;
    int j;
    const std::set<int>& locals;
    bool cpp_vectors;
    bool f32_lanes;
    bool ok = true;
    LaneCheck(DType l, int var, const std::set<int>& loc, bool cpp, bool f32)
        : lane(l), j(var), locals(loc), cpp_vectors(cpp), f32_lanes(f32) {}
    // A value of the lanes' register type (16-bit floats are float registers).
    bool of_lane(DType t) const { return t == lane || (f32_lanes && half_lanes(t)); }
    // A double value inside float lanes (see above).
    bool wide(DType t) const { return cpp_vectors && lane == DType::Float32 && t == DType::Float64; }
    // A bool load is a mask only as a where's condition: every other use of a
    // bool value (a cast, a logical op, a stored bool) fails its own check.
    bool mask_load(const ExprNode& e) const {
      return cpp_vectors && e.op == ExprOp::Load && e.dtype == DType::Bool && is_floating(lane) && e.args.empty() &&
             !locals.count(e.buffer);
    }
    // C++ vectors: a value that does not move with the lanes (a constant, a
    // load at a position independent of j, a local, a position, and any
    // operation on such values, of any type) is scalar code, splatted where a
    // lane value reads it. Adam's bias corrections 1 - beta^step, in double,
    // made the parameter's nest scalar (and were computed per element).
    std::unordered_set<const ExprNode*> uniform;
    bool lift(const ExprNode& e) {
      if (!cpp_vectors) return false;
      for (auto& a : e.args)
        if (!uniform.count(a.get())) return false;
      uniform.insert(&e);
      return true;
    }
    void visit_const(const ExprNode& e) override {
      if (!lift(e)) ok = ok && of_lane(e.dtype);
    }
    void visit_load(const ExprNode& e) override {
      if (!e.args.empty()) { ok = false; return; }  // no gathers in vector code
      auto c = coefficient_of(e.index, j);
      if ((locals.count(e.buffer) || (c && *c == 0)) && lift(e)) return;
      if (!of_lane(e.dtype) && !mask_load(e)) { ok = false; return; }
      if (locals.count(e.buffer)) return;
      ok = ok && c && (*c == 0 || *c == 1);
    }
    void visit_call(const ExprNode& e) override {
      if (is_random(e.fn)) { ok = false; return; }  // the prelude's Philox draws are scalar functions
      if (lift(e)) return;
      if (is_comparison(e.fn)) {
        for (auto& a : e.args) ok = ok && of_lane(a->dtype);
        return;
      }
      // (a uniform argument of another type cannot be splatted)
      for (auto& a : e.args) ok = ok && (a->dtype == e.dtype || (of_lane(a->dtype) && of_lane(e.dtype)));
      if (wide(e.dtype))
        ok = ok && (e.fn == CallOp::Add || e.fn == CallOp::Sub || e.fn == CallOp::Mul || e.fn == CallOp::Div ||
                    e.fn == CallOp::Neg);
      else
        ok = ok && of_lane(e.dtype);
    }
    void visit_where(const ExprNode& e) override {
      if (lift(e)) return;
      const ExprNode& c = *e.args[0];
      ok = ok && ((c.op == ExprOp::Call && is_comparison(c.fn)) || mask_load(c) || uniform.count(&c)) &&
           of_lane(e.dtype) && of_lane(e.args[1]->dtype) && of_lane(e.args[2]->dtype);
    }
    void visit_cast(const ExprNode& e) override {
      if (lift(e)) return;
      const DType from = e.args[0]->dtype;
      ok = ok && ((wide(e.dtype) && from == lane) || (e.dtype == lane && wide(from)) ||
                  (f32_lanes && of_lane(e.dtype) && of_lane(from)));
    }
    // A position that does not move with the lanes (a symbolic size such as
    // 256 * s0, batch_norm's element count); no vector iota yet.
    void visit_index(const ExprNode& e) override {
      if (!cpp_vectors || depends_on(e.index, j)) ok = false;
      else uniform.insert(&e);
    }
    // A check of one flag for every lane (_value_check) is scalar code inside
    // the vector loop; a per-element check (an index in range) is not vectorized.
    void visit_guard(const ExprNode& e) override {
      ok = ok && cpp_vectors && uniform.count(e.args[0].get()) && of_lane(e.dtype) &&
           (e.args.size() < 3 || uniform.count(e.args[2].get()));
    }
  } check(lane, j, locals, cpp_vectors, f32_lanes);
  check.visit(nest.body);
  return check.ok;
}

bool vectorizable(const LoopNest& nest, const LoopProgram& p, const std::set<int>& locals, int vector_bytes,
                  bool cpp_vectors) {
  if (nest.inner_vars.empty() || p.nodes[nest.node].scan) return false;  // a scan's steps depend on each other
  const ComputeNode& n = p.nodes[nest.node];
  if (n.reduce == ReduceOp::ArgMax || n.reduce == ReduceOp::ArgMin) {
    // Vector lanes carry positions position(j) + lane: the position must move
    // with the vector loop by 1, and fit the lanes' int32 for float values.
    if (!nest.position || nest.position->op != ExprOp::Index) return false;
    auto c = coefficient_of(nest.position->index, nest.inner_vars.back().var_id());
    if (!c || *c != 1) return false;
    if (n.body->dtype == DType::Float32 && numel(n.ranges) * numel(n.reduce_ranges) >= (int64_t{1} << 31)) return false;
  }
  bool reduction = n.is_reduction();
  return vectorizable_along(nest, p, locals, vector_bytes, nest.inner_vars.back().var_id(), nest.inner_ranges.back(),
                            !reduction, cpp_vectors);
}

// Merges adjacent inner loops while every access stays affine in the merged
// variable (Proposition 6.3): fewer, longer loops vectorize and amortize better.
void coalesce_inner(LoopNest& nest, RangeMap& ranges, LoopProgram& scratch_ids) {
  // An empty loop stays as it is (and no index may divide by a zero extent).
  for (int64_t r : nest.inner_ranges)
    if (r == 0) return;
  // A symbolic extent would need a division by a size variable: not worth it.
  for (const IndexExpr& e : nest.inner_extents)
    if (!e.is_const()) return;
  while (nest.inner_vars.size() >= 2) {
    size_t d = nest.inner_vars.size() - 2;
    int64_t a = nest.inner_ranges[d], b = nest.inner_ranges[d + 1];
    IndexExpr m = scratch_ids.new_var("j");
    RangeMap r = ranges;
    r[m.var_id()] = {0, a * b - 1};
    VarMap sub{{nest.inner_vars[d].var_id(), floordiv(m, b)}, {nest.inner_vars[d + 1].var_id(), mod(m, b)}};
    ExprRewriter rw(sub, r);
    Expr body = rw(nest.body);
    IndexExpr store = simplify(substitute(nest.store_index, sub), r);
    bool affine = coefficient_of(store, m.var_id()).has_value();
    for (const ExprNode* l : loads_of(body)) affine = affine && coefficient_of(l->index, m.var_id()).has_value();
    if (!affine) return;
    nest.body = body;
    nest.store_index = store;
    nest.inner_vars.pop_back();
    nest.inner_vars.back() = m;
    nest.inner_ranges.pop_back();
    nest.inner_ranges.back() = a * b;
    nest.inner_extents.pop_back();
    nest.inner_extents.back() = a * b;
    ranges = r;
  }
}

bool is_expensive(const ExprNode* e, std::unordered_map<const ExprNode*, bool>& memo) {
  if (auto it = memo.find(e); it != memo.end()) return it->second;
  bool out = e->op == ExprOp::Call && info(e->fn).expensive;
  for (auto& a : e->args) out = out || is_expensive(a.get(), memo);
  memo[e] = out;
  return out;
}

struct PairHash {
  size_t operator()(const std::pair<const ExprNode*, const ExprNode*>& p) const {
    return std::hash<const void*>()(p.first) * 31 + std::hash<const void*>()(p.second);
  }
};
using SameMemo = std::unordered_map<std::pair<const ExprNode*, const ExprNode*>, bool, PairHash>;

// Does r (a subexpression of another nest, whose inner variable maps to p's by
// r_to_p) compute the same value as p at every point?
// Memoized on the pair of nodes: both sides are DAGs.
bool same_value(const ExprNode* p, const ExprNode* r, const VarMap& r_to_p, const RangeMap& ranges, SameMemo& memo) {
  if (p->op != r->op || p->dtype != r->dtype || p->args.size() != r->args.size()) return false;
  auto key = std::make_pair(p, r);
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  bool out = true;
  switch (p->op) {
    case ExprOp::Const:  // interned: one node per value's bits (0.0 is not -0.0)
    case ExprOp::Guard: out = p == r; break;
    case ExprOp::Load:
    case ExprOp::Index:
      out = p->buffer == r->buffer && simplify(substitute(r->index, r_to_p), ranges) == p->index;
      break;
    case ExprOp::Call: out = p->fn == r->fn; break;
    default: break;
  }
  for (size_t i = 0; out && i < p->args.size(); ++i)
    out = same_value(p->args[i].get(), r->args[i].get(), r_to_p, ranges, memo);
  memo[key] = out;
  return out;
}

// Replaces one node of a DAG (every path to it) by another expression.
class ReplaceNode : public ExprMutator {
 public:
  ReplaceNode(const ExprNode* target, Expr with) : target_(target), with_(std::move(with)) {}

 protected:
  Expr mutate_const(const Expr& e) override { return e.get() == target_ ? with_ : e; }
  Expr mutate_load(const Expr& e, std::vector<Expr> a) override { return pick(e, std::move(a)); }
  Expr mutate_call(const Expr& e, std::vector<Expr> a) override { return pick(e, std::move(a)); }
  Expr mutate_where(const Expr& e, std::vector<Expr> a) override { return pick(e, std::move(a)); }
  Expr mutate_cast(const Expr& e, std::vector<Expr> a) override { return pick(e, std::move(a)); }
  Expr mutate_index(const Expr& e) override { return e.get() == target_ ? with_ : e; }
  Expr mutate_guard(const Expr& e, std::vector<Expr> a) override { return pick(e, std::move(a)); }

 private:
  Expr pick(const Expr& e, std::vector<Expr> a) { return e.get() == target_ ? with_ : rebuild(e, std::move(a)); }
  const ExprNode* target_;
  Expr with_;
};

// Within one kernel, a later pointwise nest often recomputes a costly value an
// earlier nest already computed over the same inner loop (softmax: exp(x - m)
// in the sum and again in the division). The earlier nest then also stores the
// value into the later nest's output, at the index the later nest writes, and
// the later nest reads it back: one exp per element instead of two, and the
// re-read hits a row still in cache (Section 6.6: materialize when it pays).
void share_expensive_values(KernelPlan& k, const LoopProgram& program) {
  for (size_t b = 1; b < k.nests.size(); ++b) {
    LoopNest& P = k.nests[b];
    if (program.nodes[P.node].is_reduction() || P.inner_vars.size() != 1 || !P.store_to_memory) continue;
    const Buffer& out = program.buffers[program.nodes[P.node].out_buffer];
    int pj = P.inner_vars[0].var_id();
    RangeMap ranges;
    ranges[k.outer_var.var_id()] = outer_interval(k);
    ranges[pj] = loop_interval(P.inner_extents[0]);
    bool done = false;
    for (size_t a = 0; a < b && !done; ++a) {
      LoopNest& R = k.nests[a];
      if (program.nodes[R.node].has_pair_result()) continue;  // their printers store no side values
      if (R.inner_vars.size() != 1 || R.inner_ranges != P.inner_ranges || !(R.inner_extents == P.inner_extents) ||
          R.vectorize != P.vectorize)
        continue;
      int rj = R.inner_vars[0].var_id();
      VarMap r_to_p{{rj, P.inner_vars[0]}};
      std::vector<const ExprNode*> r_nodes = preorder(R.body);
      std::unordered_map<const ExprNode*, bool> expensive;
      SameMemo same;
      for (const ExprNode* e : preorder(P.body)) {  // largest subexpressions first
        if (e == P.body.get() || e->dtype != out.dtype || !is_expensive(e, expensive)) continue;
        const ExprNode* match = nullptr;
        for (const ExprNode* r : r_nodes)
          if (same_value(e, r, r_to_p, ranges, same)) { match = r; break; }
        if (!match) continue;
        // Keep the node of R's own body so the code generator emits it once.
        Expr value;
        std::vector<Expr> stack{R.body};
        std::unordered_set<const ExprNode*> seen;
        while (!stack.empty() && !value) {
          Expr x = stack.back();
          stack.pop_back();
          if (!seen.insert(x.get()).second) continue;
          if (x.get() == match) value = x;
          for (auto& c : x->args) stack.push_back(c);
        }
        RangeMap r_ranges = ranges;
        r_ranges[rj] = loop_interval(R.inner_extents[0]);
        VarMap p_to_r{{pj, R.inner_vars[0]}};
        R.side_stores.push_back({value, out.id, simplify(substitute(P.store_index, p_to_r), r_ranges)});
        P.body = ReplaceNode(e, load(out.id, P.store_index, out.dtype)).mutate(P.body);
        done = true;
        break;
      }
    }
  }
}

// "fused_<operators>_<index>": the distinct operators the kernel fuses, in
// order, as a C identifier of bounded length (a profiler or a reader of the
// generated code sees what a kernel does; the index keeps names unique).
std::string kernel_name(const std::string& origin, size_t g, size_t max_len) {
  std::vector<std::string> ops;
  std::string cur;
  auto flush = [&]() {
    if (!cur.empty() && std::find(ops.begin(), ops.end(), cur) == ops.end()) ops.push_back(cur);
    cur.clear();
  };
  for (char c : origin) {
    if (std::isalnum(static_cast<unsigned char>(c))) cur += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (c == '_' && !cur.empty()) cur += c;
    else flush();
  }
  flush();
  // Appended piecewise, not with operator+: GCC 12 warns falsely (-Wrestrict).
  std::string name = "fused";
  size_t len = 0;
  for (const std::string& op : ops) {
    if (len > 0 && len + 1 + op.size() > max_len) break;
    name += '_';
    name.append(op, 0, max_len);
    len += 1 + std::min(op.size(), max_len);
  }
  if (len == 0) name = "kernel";
  name += '_';
  name += std::to_string(g);
  return name;
}

int cascade_levels_for(int64_t blocks) {
  int levels = 1;
  while (levels < 62 && (int64_t{1} << levels) <= blocks) ++levels;
  return levels;
}

// A vectorized nest whose last loop leaves a partial vector (1000 floats:
// 62 vectors + 8) runs those iterations as one masked vector step instead of
// a scalar loop, when the target has masked loads (options.masked_tails), the
// extent is static and the body computes a costly function (exp, log, tanh,
// sigmoid, sqrt): then one vector step replaces up to lanes-1 scalar calls
// (exp of 16384x1000, one thread: 4.0 -> 3.3 ms). A cheap body's scalar tail
// costs a few cycles, and the masked step's mask and blend made it slower
// (sum(-1) 1.25 -> 1.34 ms; a masked max inside softmax 6.9 -> 7.3 ms), so it
// stays scalar. Not in a cascaded sum (the tail belongs to the last block
// only) nor in the pair reductions (their printers keep scalar tails).
void plan_tail(LoopNest& nest, const ComputeNode& node, int64_t span, const ScheduleOptions& o) {
  nest.tail = TailMode::Scalar;
  // A plain reduction over a symbolic extent: what its W-vector loop leaves
  // (fewer than W vectors) runs as a loop of masked vector steps into
  // accumulator 0, one printed body where the one-vector loop and the scalar
  // tail were two; g++ compiled Example 1.1 with both dims symbolic ~20% fewer
  // instructions (its kernel time is in the W-vector loop, unchanged).
  if (o.masked_tails && nest.vectorize && !nest.inner_extents.empty() && !nest.inner_extents.back().is_const() &&
      node.is_reduction() && !node.scan && !node.has_pair_result() && node.reduce != ReduceOp::Welford) {
    nest.tail = TailMode::MaskedLoop;
    return;
  }
  if (!o.masked_tails || !nest.vectorize || nest.inner_extents.empty() || nest.block > 0 || node.has_pair_result())
    return;
  if (!nest.inner_extents.back().is_const() || span % nest.lanes == 0) return;
  // A side store's value is read back by a later nest of the kernel right
  // away, and a masked store cannot forward to those loads: softmax 16384x1000
  // went 7.0 -> 7.4 ms with its exp tail masked (8 of 1000), 1000x77 0.062 ->
  // 0.044 ms (13 of 77). Masked there only when the tail is >= 1/16 of the row.
  if (!nest.side_stores.empty() && (span % nest.lanes) * 16 < span) return;
  std::unordered_map<const ExprNode*, bool> memo;
  if (!is_expensive(nest.body.get(), memo)) return;
  nest.tail = TailMode::Masked;
}

// The loop policy of one nest whose last inner loop runs at most `span`
// elements per entry (its whole range, or one chunk).
void plan_nest_policy(LoopNest& nest, const LoopProgram& p, int64_t span, const ScheduleOptions& o) {
  const ComputeNode& node = p.nodes[nest.node];
  const DType dt = node.body->dtype;
  const size_t nd = nest.inner_vars.size();
  bool symbolic = false;
  for (const IndexExpr& e : nest.inner_extents) symbolic = symbolic || !e.is_const();
  nest.lanes = nest.vectorize ? o.vector_bytes / lane_bytes(dt, o.cpp_vector_code) : 1;
  nest.tail = TailMode::Scalar;
  nest.accumulators = node.is_reduction() && nest.vectorize ? o.accumulators : 1;
  nest.block = 0;
  nest.cascade_levels = 0;
  nest.wide_scalar_acc = false;
  nest.welford = WelfordMode::OnePass;
  if (!node.is_reduction()) {
    // (16-bit buffers have no masked vector loads/stores in the C++ prelude)
    if (!(o.cpp_vector_code && touches_half(nest, p))) plan_tail(nest, node, span, o);
    return;
  }
  if (node.reduce == ReduceOp::Welford) {
    // One pass reads the row once and keeps (count, mean, M2) in double: at
    // least as accurate as eager's double two-pass, and half the memory
    // traffic of two passes once the row no longer stays in cache. A short row
    // read twice from L1 is cheaper (no per-step division or double lanes).
    const int64_t limit = o.welford_two_pass_max >= 0
                              ? o.welford_two_pass_max
                              : int64_t{std::max(1, o.accumulators)} * (o.vector_bytes / static_cast<int>(itemsize(dt))) *
                                    o.vector_block_steps;
    // A symbolic row takes two passes only when its declared range keeps it
    // short (one loop form for every size: the two-pass sums are not cascaded).
    const int64_t longest = symbolic && nd == 1 ? range_of(nest.inner_extents[0], o.size_ranges).hi : span;
    if (nd == 1 && longest <= limit) nest.welford = WelfordMode::TwoPass;
    return;
  }
  if (node.has_pair_result()) return;
  // A block is 64 steps of each vector accumulator (256 scalar steps): short
  // enough that a block's float sum stays accurate, long enough that the
  // per-block push costs nothing. A reduction no longer than one block (a
  // 2048-float row) is not blocked at all.
  const int64_t block = nest.vectorize ? int64_t{nest.accumulators} * nest.lanes * o.vector_block_steps : o.scalar_block;
  // A symbolic span is blocked unless its declared range keeps it within one
  // block (its block sums then go serially into a double total, no stack).
  int64_t sym_blocks = 1;
  if (symbolic && nd > 0) {
    auto longest = [&](const IndexExpr& e) { return std::max<int64_t>(range_of(e, o.size_ranges).hi, 0); };
    const int64_t most = longest(nest.inner_extents.back());
    sym_blocks = most / block + (most % block != 0);
    for (size_t d = 0; d + 1 < nd; ++d) {
      const int64_t n = longest(nest.inner_extents[d]);
      sym_blocks = n != 0 && sym_blocks > INT64_MAX / n ? INT64_MAX : sym_blocks * n;
    }
  }
  if (node.reduce == ReduceOp::Sum && is_floating(dt) && nd > 0 && (symbolic ? sym_blocks > 1 : span > block)) {
    nest.block = block;
    int64_t blocks = (span + block - 1) / block;
    for (size_t d = 0; d + 1 < nd; ++d) blocks *= nest.inner_ranges[d];
    // A symbolic extent adds its block sums into the double total one after the
    // other (no stack: cascade_levels 0, see LoopNest::block).
    nest.cascade_levels = symbolic ? 0 : cascade_levels_for(blocks);
  }
  nest.wide_scalar_acc = node.reduce == ReduceOp::Sum && dt == DType::Float32 && !nest.vectorize;
  if (!(o.cpp_vector_code && touches_half(nest, p))) plan_tail(nest, node, span, o);
}

// Do every loop bound and every subexpression of every index of the kernel
// lie within +-2^30 (Proposition 6.4: the interval analysis is sound)?
bool fits_index32(const KernelPlan& k, const ScheduleOptions& o) {
  constexpr int64_t kLimit = int64_t{1} << 30;  // half of int32: room for block ends, vector steps, chunk ends
  if (!k.symbolic && k.outer_extent > kLimit) return false;
  // A symbolic kernel: over the declared ranges of its sizes (absent: unbounded, never fits).
  auto loop_range = [&](const IndexExpr& extent) -> Interval {
    if (!k.symbolic) return loop_interval(extent);
    const Interval e = range_of(extent, o.size_ranges);
    return {0, e.hi == INT64_MAX ? INT64_MAX - 1 : std::max<int64_t>(e.hi - 1, 0)};
  };
  std::function<bool(const IndexExpr&, const RangeMap&)> fits = [&](const IndexExpr& e, const RangeMap& r) {
    Interval i = range_of(e, r);
    if (i.lo < -kLimit || i.hi > kLimit) return false;
    for (const IndexExpr& o : e.operands())
      if (!fits(o, r)) return false;
    return true;
  };
  for (const LoopNest& n : k.nests) {
    for (int64_t r : n.inner_ranges)
      if (r > kLimit) return false;
    RangeMap r = k.symbolic ? o.size_ranges : RangeMap{};
    r[k.outer_var.var_id()] = k.symbolic ? loop_range(k.outer_count) : outer_interval(k);
    for (size_t d = 0; d < n.inner_vars.size(); ++d) r[n.inner_vars[d].var_id()] = loop_range(n.inner_extents[d]);
    for (const IndexExpr& e : n.inner_extents)
      if (range_of(e, r).hi > kLimit) return false;
    if (range_of(k.outer_count, r).hi > kLimit) return false;
    if (!fits(n.store_index, r)) return false;
    for (const SideStore& ss : n.side_stores)
      if (!fits(ss.index, r)) return false;
    for (const ExprNode* l : loads_of(n.body))
      if (!fits(l->index, r)) return false;
  }
  return true;
}

// One loop long enough to split across threads (at least two grains).
bool splittable(const LoopNest& nest, const LoopProgram&, const ScheduleOptions& o) {
  return nest.inner_vars.size() == 1 && nest.inner_ranges[0] >= 2 * o.parallel_grain;
}

// A static kernel of a few outer iterations (at most split_rows_max) whose
// first nest reduces a row of at least two grains and whose other nests have
// no inner loop (mean's division): its rows are split into chunks
// (KernelPlan::phased with outer_extent > 1).
bool split_rows(const KernelPlan& k, const LoopProgram& p, const ScheduleOptions& o) {
  if (k.symbolic || k.vectorize_outer || k.outer_extent < 2 || k.outer_extent > o.split_rows_max) return false;
  const ComputeNode& n = p.nodes[k.nests[0].node];
  if (!n.is_reduction() || n.scan || n.has_pair_result() || !splittable(k.nests[0], p, o)) return false;
  for (size_t i = 1; i < k.nests.size(); ++i)
    if (!k.nests[i].inner_vars.empty() || p.nodes[k.nests[i].node].is_reduction()) return false;
  return true;
}

// The chunk of a split loop: a reduction's is a function of its extent alone
// (at most 64 partials, none below the grain), a pointwise loop's is fixed;
// whole vectors either way. A symbolic reduction: the least chunk (the
// printer sizes it from the extent at run time).
int64_t chunk_of(const LoopNest& nest, const LoopProgram& p, const ScheduleOptions& o, bool symbolic) {
  const bool reduction = p.nodes[nest.node].is_reduction();
  const int64_t extent = nest.inner_ranges[0];
  int64_t chunk = reduction ? std::max<int64_t>(o.parallel_grain, (extent + 63) / 64) : o.pointwise_chunk;
  if (symbolic && reduction) chunk = o.parallel_grain;
  return (chunk + 63) / 64 * 64;
}

// Loop policy of a kernel, after fusion, vectorization and parallelization.
void plan_kernel_policy(KernelPlan& k, const LoopProgram& p, const ScheduleOptions& o) {
  k.index_bits = o.index32 && fits_index32(k, o) ? 32 : 64;
  k.size_ranges = o.size_ranges;
  if (k.phased) {
    for (LoopNest& nest : k.nests) {
      const ComputeNode& node = p.nodes[nest.node];
      if (nest.chunk == 0) {
        plan_nest_policy(nest, p, nest.inner_vars.empty() ? 1 : nest.inner_ranges.back(), o);
        continue;
      }
      const bool sym = !nest.inner_extents[0].is_const();
      nest.chunks = sym ? (node.is_reduction() ? 64 : 0) : (nest.inner_ranges[0] + nest.chunk - 1) / nest.chunk;
      nest.partials_in_double = node.reduce == ReduceOp::Sum && is_floating(node.body->dtype);
      plan_nest_policy(nest, p, nest.chunk_first ? nest.inner_ranges.back() : nest.chunk, o);
    }
    return;
  }
  if (k.chunk > 0) {
    LoopNest& nest = k.nests[0];
    const ComputeNode& node = p.nodes[nest.node];
    // A symbolic extent: the printer computes the count at run time; a
    // reduction's chunks then grow with the extent so that there are at most 64.
    k.chunks = k.symbolic ? (node.is_reduction() ? 64 : 0) : (nest.inner_ranges[0] + k.chunk - 1) / k.chunk;
    k.combine = ChunkCombine::PairwiseTree;
    k.partials_in_double = node.reduce == ReduceOp::Sum && is_floating(node.body->dtype);
    plan_nest_policy(nest, p, k.chunk, o);
    return;
  }
  for (LoopNest& nest : k.nests)
    plan_nest_policy(nest, p, nest.inner_vars.empty() ? 1 : nest.inner_ranges.back(), o);
  if (!k.vectorize_outer) return;
  const LoopNest& nest = k.nests[0];
  const ComputeNode& node = p.nodes[nest.node];
  OuterVectorPlan& v = k.outer_vector;
  v.lanes = o.vector_bytes / static_cast<int>(itemsize(node.body->dtype));
  // Widest group of vectors (up to max_outer_unroll, 8 = 512 bytes of a float
  // row) that divides the outer extent, so at most lanes-1 outputs are left over.
  // A symbolic outer extent: the widest group the example fills; the printer
  // computes the number of whole groups at run time (the rest is the scalar tail).
  v.unroll = o.max_outer_unroll;
  while (v.unroll > 1 && ((!k.symbolic && k.outer_extent % (v.unroll * v.lanes) != 0) ||
                          k.outer_extent < v.unroll * v.lanes))
    v.unroll /= 2;
  v.groups = k.outer_extent / (int64_t{v.unroll} * v.lanes);
  const size_t nd = nest.inner_vars.size();
  v.block_rows = 0;
  v.cascade_levels = 0;
  bool symbolic_rows = false;
  for (const IndexExpr& e : nest.inner_extents) symbolic_rows = symbolic_rows || !e.is_const();
  if (node.reduce == ReduceOp::Sum && nd > 0 && symbolic_rows) {
    // Blocked unless the declared ranges keep the rows within one block.
    int64_t blocks = 1;
    for (size_t d = 0; d < nd; ++d) {
      const int64_t n = std::max<int64_t>(range_of(nest.inner_extents[d], o.size_ranges).hi, 0);
      const int64_t b = d + 1 == nd ? n / o.outer_block_rows + (n % o.outer_block_rows != 0) : n;
      blocks = b != 0 && blocks > INT64_MAX / b ? INT64_MAX : blocks * b;
    }
    if (blocks > 1) {
      v.block_rows = o.outer_block_rows;
      v.cascade_levels = cascade_levels_for(blocks);
    }
  } else if (node.reduce == ReduceOp::Sum && nd > 0 && nest.inner_ranges.back() > o.outer_block_rows) {
    v.block_rows = o.outer_block_rows;
    int64_t blocks = (nest.inner_ranges.back() + v.block_rows - 1) / v.block_rows;
    for (size_t d = 0; d + 1 < nd; ++d) blocks *= nest.inner_ranges[d];
    v.cascade_levels = cascade_levels_for(blocks);
  }
  v.tail = nest;  // the remaining outputs, one at a time (already scalar)
  v.tail.vectorize = false;
  plan_nest_policy(v.tail, p, v.tail.inner_vars.empty() ? 1 : v.tail.inner_ranges.back(), o);
}

}  // namespace

// Should `node` stay out of the kernel of `members` although it could join?
// When it is large and shares no large buffer with them (reads none they read
// or write) while one of them is large too: one kernel would interleave their
// rows, each row a few more memory streams, and no value is reused. An SGD
// step over an MLP's parameters (4.7M floats, every weight's rows in one
// kernel with its momentum buffer's) ran 5.2 ms that way, a kernel per weight
// ~3 ms. Small ones (biases) still join: one parallel loop fewer.
bool apart(const LoopProgram& p, const std::vector<int>& members, int node) {
  constexpr int64_t kLarge = int64_t{1} << 16;  // elements
  auto work = [&](const ComputeNode& n) { return numel(n.ranges) * std::max<int64_t>(numel(n.reduce_ranges), 1); };
  const ComputeNode& n = p.nodes[node];
  if (work(n) < kLarge) return false;
  std::set<int> touched;
  bool large = false;
  for (int m : members) {
    const ComputeNode& o = p.nodes[m];
    large = large || work(o) >= kLarge;
    touched.insert(o.out_buffer);
    if (o.aux_buffer >= 0) touched.insert(o.aux_buffer);
    for (const ExprNode* l : loads_of(o.body)) touched.insert(l->buffer);
  }
  if (!large) return false;
  for (const ExprNode* l : loads_of(n.body))  // (a shared scalar such as the learning rate does not count)
    if (touched.count(l->buffer) && numel(p.buffers[l->buffer].sizes) >= kLarge) return false;
  return true;
}

Schedule schedule(const LoopProgram& program, const ScheduleOptions& options) {
  // 1. Fusion: greedy grouping in dependence order.
  std::vector<std::vector<int>> groups;
  std::vector<Shape> outers;
  // Extern calls split the node list: no kernel spans one.
  std::set<int> extern_boundary;
  for (auto& e : program.externs) extern_boundary.insert(e.before_node);
  // A node joins the latest kernel it can fuse with, looking back past kernels
  // it does not read from (it moves ahead of them: they come first in node
  // order, so none reads it either) but never across an extern call. The
  // outputs are lowered last, so SGD's parameter updates came after all the
  // momentum buffers they read (of several shapes), and only the last kernel
  // was tried: two passes over memory instead of one.
  size_t segment = 0;  // first group after the last extern call
  for (int i = 0; i < static_cast<int>(program.nodes.size()); ++i) {
    if (extern_boundary.count(i)) segment = groups.size();
    int joined = -1;
    for (size_t g = groups.size(); options.fuse && g-- > segment;) {
      if (apart(program, groups[g], i)) continue;
      if (can_fuse(program, groups[g], outers[g], i, options.stored_handover)) {
        joined = static_cast<int>(g);
        break;
      }
      bool reads_g = false;
      for (const ExprNode* l : loads_of(program.nodes[i].body)) reads_g = reads_g || producer_of(program, groups[g], l->buffer);
      if (reads_g) break;
    }
    if (joined >= 0) {
      groups[joined].push_back(i);
      continue;
    }
    const ComputeNode& n = program.nodes[i];
    groups.push_back({i});
    outers.push_back(n.is_reduction() || n.ranges.empty() ? n.ranges : Shape(n.ranges.begin(), n.ranges.end() - 1));
  }

  // Sibling column reductions (sums over a strided dim, e.g. a LayerNorm's
  // weight and bias gradients over the rows) fused into one kernel run as
  // scalar strided loops: only a kernel of one reduction gets the plan that
  // vectorizes across neighbouring outputs. Such a group is split, each
  // reduction recomputing what it reads (they share no values by memory).
  {
    std::vector<std::vector<int>> split_groups;
    std::vector<Shape> split_outers;
    for (size_t g = 0; g < groups.size(); ++g) {
      if (column_reductions(program, groups[g], outers[g])) {
        for (int m : groups[g]) {
          split_groups.push_back({m});
          split_outers.push_back(outers[g]);
        }
      } else {
        split_groups.push_back(groups[g]);
        split_outers.push_back(outers[g]);
      }
    }
    groups.swap(split_groups);
    outers.swap(split_outers);
  }

  // Which buffers are read outside the kernel that writes them.
  std::unordered_map<int, int> group_of_buffer;
  for (size_t g = 0; g < groups.size(); ++g)
    for (int m : groups[g]) {
      group_of_buffer[program.nodes[m].out_buffer] = static_cast<int>(g);
      if (program.nodes[m].aux_buffer >= 0) group_of_buffer[program.nodes[m].aux_buffer] = static_cast<int>(g);
    }
  std::set<int> read_elsewhere;
  for (size_t g = 0; g < groups.size(); ++g)
    for (int m : groups[g])
      for (const ExprNode* l : loads_of(program.nodes[m].body)) {
        auto it = group_of_buffer.find(l->buffer);
        if (it != group_of_buffer.end() && it->second != static_cast<int>(g)) read_elsewhere.insert(l->buffer);
      }
  for (auto& e : program.externs)  // an extern call reads its operands from memory
    for (auto& o : e.inputs)
      if (o.kind == ExternOperand::Kind::Buffer) read_elsewhere.insert(o.buffer);

  LoopProgram ids;  // fresh variable ids for the kernels' loops
  ids.next_var_id = program.next_var_id;
  Schedule s;
  s.vector_bytes = options.vector_bytes;
  for (size_t g = 0; g < groups.size(); ++g) {
    KernelPlan k;
    k.nodes = groups[g];
    k.outer_ranges = outers[g];
    k.outer_extent = numel(k.outer_ranges);
    k.outer_extents = range_exprs(program.nodes[k.nodes[0]], k.outer_ranges.size());
    k.outer_count = 1;
    for (const IndexExpr& e : k.outer_extents) {
      k.outer_count = simplify(k.outer_count * e);
      k.symbolic = k.symbolic || !e.is_const();
    }
    for (int m : k.nodes) k.symbolic = k.symbolic || !program.nodes[m].is_static();
    k.outer_var = ids.new_var("o");
    RangeMap ranges;
    ranges[k.outer_var.var_id()] = outer_interval(k);
    // Outer dims flattened into one loop variable: dim d = (o // inner_size) % size.
    std::vector<IndexExpr> outer_idx;
    int64_t inner_size = k.outer_extent;
    for (size_t d = 0; d < k.outer_ranges.size(); ++d) {
      if (k.symbolic) {  // the same with expressions (a zero size: the loop never runs)
        IndexExpr inner_sym = 1;
        for (size_t e = d + 1; e < k.outer_extents.size(); ++e) inner_sym = inner_sym * k.outer_extents[e];
        IndexExpr e = floordiv(k.outer_var, simplify(inner_sym));
        outer_idx.push_back(d == 0 ? e : mod(e, k.outer_extents[d]));
        continue;
      }
      if (k.outer_extent == 0) {  // zero-size output: the loop never runs
        outer_idx.push_back(0);
        continue;
      }
      inner_size /= k.outer_ranges[d];
      IndexExpr e = floordiv(k.outer_var, inner_size);
      outer_idx.push_back(d == 0 ? e : mod(e, k.outer_ranges[d]));
    }
    for (int m : k.nodes) {
      const ComputeNode& n = program.nodes[m];
      if (hands_over_per_outer(n, k.outer_ranges.size())) {
        k.local_buffers.insert(n.out_buffer);
        if (n.aux_buffer >= 0) k.local_buffers.insert(n.aux_buffer);
      }
      k.origin += (k.origin.empty() ? "" : "; ") + n.origin;
    }
    int64_t work = 0;
    for (int m : k.nodes) {
      const ComputeNode& n = program.nodes[m];
      LoopNest nest;
      nest.node = m;
      VarMap sub;
      for (size_t d = 0; d < k.outer_ranges.size(); ++d) sub[n.vars[d].var_id()] = outer_idx[d];
      RangeMap r = ranges;
      const auto& ivars = n.is_reduction() ? n.rvars : n.vars;
      const auto& iranges = n.is_reduction() ? n.reduce_ranges : n.ranges;
      size_t first = n.is_reduction() ? 0 : k.outer_ranges.size();
      for (size_t d = first; d < ivars.size(); ++d) {
        nest.inner_vars.push_back(ivars[d]);
        nest.inner_ranges.push_back(iranges[d]);
        nest.inner_extents.push_back(n.is_reduction() ? n.reduce_range(d) : n.range(d));
        r[ivars[d].var_id()] = loop_interval(nest.inner_extents.back());
      }
      ExprRewriter rw(sub, r);
      nest.body = rw(n.body);
      nest.store_index = simplify(substitute(n.store_index, sub), r);
      if (n.position) nest.position = rw(n.position);
      else coalesce_inner(nest, r, ids);  // (an arg reduction keeps its loops: its position expression is not rewritten)
      auto stored = [&](int b) {
        return b >= 0 && (program.buffers[b].kind == BufferKind::Output || read_elsewhere.count(b));
      };
      nest.store_to_memory = stored(n.out_buffer);
      nest.store_aux_to_memory = stored(n.aux_buffer);
      nest.vectorize = vectorizable(nest, program, k.local_buffers, options.vector_bytes, options.cpp_vector_code);
      work = std::max(work, numel(nest.inner_ranges));
      k.nests.push_back(std::move(nest));
    }
    share_expensive_values(k, program);
    // Scans and pair reductions (Welford, arg) get neither chunks nor outer vectors.
    const bool scan = program.nodes[k.nodes[0]].scan || program.nodes[k.nodes[0]].has_pair_result();
    if (k.nests.size() == 1 && !k.nests[0].vectorize && program.nodes[k.nodes[0]].is_reduction() && !scan)
      k.vectorize_outer = vectorizable_along(k.nests[0], program, k.local_buffers, options.vector_bytes,
                                             k.outer_var.var_id(), k.outer_extent, /*store_in_lanes=*/true,
                                             options.cpp_vector_code);
    k.parallel = k.outer_extent >= 2 && k.outer_extent * work >= options.parallel_grain;
    const bool one_outer = k.outer_count.is_const() && k.outer_count.const_value() == 1;
    if (!scan && one_outer && k.nests.size() == 1 && splittable(k.nests[0], program, options)) {
      // One long loop: split it across threads. A reduction is split into a
      // fixed number of partial results combined in order afterwards, so the
      // result does not depend on the thread count.
      k.chunk = chunk_of(k.nests[0], program, options, k.symbolic);
      k.parallel = true;
    } else if (options.phased_chunks && one_outer && !k.vectorize_outer) {
      // Several nests over one outer iteration (mean = sum + division): each
      // long nest is split on its own (see KernelPlan::phased).
      for (LoopNest& nest : k.nests) {
        const ComputeNode& n = program.nodes[nest.node];
        bool static_loops = true;
        for (const IndexExpr& e : nest.inner_extents) static_loops = static_loops && e.is_const();
        if (!n.is_reduction() && static_loops && nest.inner_vars.size() >= 2 && nest.inner_ranges[0] >= 2 &&
            numel(nest.inner_ranges) >= 2 * options.parallel_grain) {
          nest.parallel_first = true;
          k.phased = k.parallel = true;
          continue;
        }
        if (n.is_reduction() && !n.scan && !n.has_pair_result() && static_loops && nest.inner_vars.size() >= 2 &&
            nest.inner_ranges[0] >= 2 && numel(nest.inner_ranges) >= 2 * options.parallel_grain) {
          // Chunks of whole first-loop iterations: at most 64, each at least a grain of elements.
          const int64_t per = numel(nest.inner_ranges) / nest.inner_ranges[0];
          nest.chunk = std::max((nest.inner_ranges[0] + 63) / 64, (options.parallel_grain + per - 1) / per);
          nest.chunk_first = true;
          k.phased = k.parallel = true;
          continue;
        }
        if (n.scan || n.has_pair_result() || !splittable(nest, program, options)) continue;
        nest.chunk = chunk_of(nest, program, options, !nest.inner_extents[0].is_const());
        k.phased = k.parallel = true;
      }
    } else if (options.phased_chunks && split_rows(k, program, options)) {
      // A few long rows (sum(-1) of 3 x 1M): the outer loop alone would leave
      // threads idle (or one row to one thread), so every row is split too.
      k.nests[0].chunk = chunk_of(k.nests[0], program, options, false);
      k.phased = k.parallel = true;
    }
    plan_kernel_policy(k, program, options);
    k.name = kernel_name(k.origin, g, options.max_kernel_name);
    s.kernels.push_back(std::move(k));
  }
  // Execution order: each extern call before the first kernel whose nodes come after it.
  size_t next_extern = 0;
  for (size_t g = 0; g < s.kernels.size(); ++g) {
    while (next_extern < program.externs.size() && program.externs[next_extern].before_node <= groups[g].front())
      s.steps.push_back({true, static_cast<int>(next_extern++)});
    s.steps.push_back({false, static_cast<int>(g)});
  }
  while (next_extern < program.externs.size()) s.steps.push_back({true, static_cast<int>(next_extern++)});
  return s;
}

}  // namespace tp::stax
