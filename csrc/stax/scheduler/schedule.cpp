#include "stax/scheduler/schedule.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "stax/ir/expr_visitor.h"

namespace tp::stax {
using namespace tp::stax::ir;

namespace {

using VarMap = std::unordered_map<int, IndexExpr>;

// Rebuilds an expression with every load index substituted and simplified.
class ExprRewriter : public ExprMutator {
 public:
  ExprRewriter(const VarMap& map, const RangeMap& ranges) : map_(map), ranges_(ranges) {}
  Expr operator()(const Expr& e) { return mutate(e); }

 protected:
  Expr mutate_load(const Expr& e, std::vector<Expr>) override {
    return load(e->buffer, simplify(substitute(e->index, map_), ranges_), e->dtype);
  }

 private:
  const VarMap& map_;
  const RangeMap& ranges_;
};

const ComputeNode* producer_of(const LoopProgram& p, const std::vector<int>& members, int buffer) {
  for (int m : members)
    if (p.nodes[m].out_buffer == buffer) return &p.nodes[m];
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

RangeMap canonical_ranges(const Shape& outer) {
  RangeMap r;
  for (size_t d = 0; d < outer.size(); ++d) r[1000000 + static_cast<int>(d)] = {0, outer[d] - 1};
  return r;
}

}  // namespace

bool can_fuse(const LoopProgram& p, const std::vector<int>& members, const Shape& outer, int node) {
  const ComputeNode& n = p.nodes[node];
  if (n.is_reduction() ? n.ranges != outer : !starts_with(n.ranges, outer)) return false;
  RangeMap ranges = canonical_ranges(outer);
  VarMap n_map = canonical_outer(n, outer.size());
  for (const ExprNode* l : loads_of(n.body)) {
    const ComputeNode* prod = producer_of(p, members, l->buffer);
    if (!prod) continue;
    // Only a reduction's per-outer-iteration result can be handed over inside
    // a kernel; a pointwise producer would need its whole inner loop first.
    if (!prod->is_reduction()) return false;
    IndexExpr read = simplify(substitute(l->index, n_map), ranges);
    IndexExpr wrote = simplify(substitute(prod->store_index, canonical_outer(*prod, outer.size())), ranges);
    if (!(read == wrote)) return false;  // dependence distance != 0
  }
  return true;
}

namespace {

// Can `nest` run with vector lanes along loop variable j (extent `extent`)?
// Every load must be contiguous or invariant in j, every value of one float
// type; `store_in_lanes`: the store index must be contiguous in j too.
bool vectorizable_along(const LoopNest& nest, const LoopProgram& p, const std::set<int>& locals, int vector_bytes,
                        int j, int64_t extent, bool store_in_lanes) {
  const ComputeNode& n = p.nodes[nest.node];
  DType lane = n.body->dtype;
  if (!is_floating(lane)) return false;
  int lanes = vector_bytes / static_cast<int>(itemsize(lane));
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
    bool ok = true;
    LaneCheck(DType l, int var, const std::set<int>& loc) : lane(l), j(var), locals(loc) {}
    void visit_const(const ExprNode& e) override { ok = ok && e.dtype == lane; }
    void visit_load(const ExprNode& e) override {
      if (e.dtype != lane) { ok = false; return; }
      if (locals.count(e.buffer)) return;
      auto c = coefficient_of(e.index, j);
      ok = ok && c && (*c == 0 || *c == 1);
    }
    void visit_call(const ExprNode& e) override {
      if (is_comparison(e.fn)) {
        for (auto& a : e.args) ok = ok && a->dtype == lane;
      } else {
        ok = ok && e.dtype == lane;
      }
    }
    void visit_where(const ExprNode& e) override {
      ok = ok && e.args[0]->op == ExprOp::Call && is_comparison(e.args[0]->fn) && e.dtype == lane;
    }
    void visit_cast(const ExprNode&) override { ok = false; }
  } check(lane, j, locals);
  check.visit(nest.body);
  return check.ok;
}

bool vectorizable(const LoopNest& nest, const LoopProgram& p, const std::set<int>& locals, int vector_bytes) {
  if (nest.inner_vars.empty()) return false;
  bool reduction = p.nodes[nest.node].is_reduction();
  return vectorizable_along(nest, p, locals, vector_bytes, nest.inner_vars.back().var_id(), nest.inner_ranges.back(),
                            !reduction);
}

// Merges adjacent inner loops while every access stays affine in the merged
// variable (Proposition 6.3): fewer, longer loops vectorize and amortize better.
void coalesce_inner(LoopNest& nest, RangeMap& ranges, LoopProgram& scratch_ids) {
  // An empty loop stays as it is (and no index may divide by a zero extent).
  for (int64_t r : nest.inner_ranges)
    if (r == 0) return;
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
    case ExprOp::Const: out = p == r; break;  // interned: one node per value's bits (0.0 is not -0.0)
    case ExprOp::Load:
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
    ranges[k.outer_var.var_id()] = {0, std::max<int64_t>(k.outer_extent - 1, 0)};
    ranges[pj] = {0, P.inner_ranges[0] - 1};
    bool done = false;
    for (size_t a = 0; a < b && !done; ++a) {
      LoopNest& R = k.nests[a];
      if (R.inner_vars.size() != 1 || R.inner_ranges != P.inner_ranges || R.vectorize != P.vectorize) continue;
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
        r_ranges[rj] = {0, R.inner_ranges[0] - 1};
        VarMap p_to_r{{pj, R.inner_vars[0]}};
        R.side_stores.push_back({value, out.id, simplify(substitute(P.store_index, p_to_r), r_ranges)});
        P.body = ReplaceNode(e, load(out.id, P.store_index, out.dtype)).mutate(P.body);
        done = true;
        break;
      }
    }
  }
}

}  // namespace

Schedule schedule(const LoopProgram& program, const ScheduleOptions& options) {
  // 1. Fusion: greedy grouping in dependence order.
  std::vector<std::vector<int>> groups;
  std::vector<Shape> outers;
  // Extern calls split the node list: no kernel spans one.
  std::set<int> extern_boundary;
  for (auto& e : program.externs) extern_boundary.insert(e.before_node);
  for (int i = 0; i < static_cast<int>(program.nodes.size()); ++i) {
    if (!groups.empty() && !extern_boundary.count(i) && can_fuse(program, groups.back(), outers.back(), i)) {
      groups.back().push_back(i);
      continue;
    }
    const ComputeNode& n = program.nodes[i];
    groups.push_back({i});
    outers.push_back(n.is_reduction() || n.ranges.empty() ? n.ranges : Shape(n.ranges.begin(), n.ranges.end() - 1));
  }

  // Which buffers are read outside the kernel that writes them.
  std::unordered_map<int, int> group_of_buffer;
  for (size_t g = 0; g < groups.size(); ++g)
    for (int m : groups[g]) group_of_buffer[program.nodes[m].out_buffer] = static_cast<int>(g);
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
  for (size_t g = 0; g < groups.size(); ++g) {
    KernelPlan k;
    k.name = "kernel" + std::to_string(g);
    k.nodes = groups[g];
    k.outer_ranges = outers[g];
    k.outer_extent = numel(k.outer_ranges);
    k.outer_var = ids.new_var("o");
    RangeMap ranges;
    ranges[k.outer_var.var_id()] = {0, std::max<int64_t>(k.outer_extent - 1, 0)};
    // Outer dims flattened into one loop variable: dim d = (o // inner_size) % size.
    std::vector<IndexExpr> outer_idx;
    int64_t inner_size = k.outer_extent;
    for (size_t d = 0; d < k.outer_ranges.size(); ++d) {
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
      if (n.is_reduction()) k.local_buffers.insert(n.out_buffer);
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
        r[ivars[d].var_id()] = {0, iranges[d] - 1};
      }
      ExprRewriter rw(sub, r);
      nest.body = rw(n.body);
      nest.store_index = simplify(substitute(n.store_index, sub), r);
      coalesce_inner(nest, r, ids);
      const Buffer& out = program.buffers[n.out_buffer];
      nest.store_to_memory = out.kind == BufferKind::Output || read_elsewhere.count(n.out_buffer);
      nest.vectorize = vectorizable(nest, program, k.local_buffers, options.vector_bytes);
      work = std::max(work, numel(nest.inner_ranges));
      k.nests.push_back(std::move(nest));
    }
    share_expensive_values(k, program);
    if (k.nests.size() == 1 && !k.nests[0].vectorize && program.nodes[k.nodes[0]].is_reduction())
      k.vectorize_outer = vectorizable_along(k.nests[0], program, k.local_buffers, options.vector_bytes,
                                             k.outer_var.var_id(), k.outer_extent, /*store_in_lanes=*/true);
    k.parallel = k.outer_extent >= 2 && k.outer_extent * work >= options.parallel_grain;
    if (k.outer_extent == 1 && k.nests.size() == 1 && k.nests[0].inner_vars.size() == 1 &&
        k.nests[0].inner_ranges[0] >= 2 * options.parallel_grain) {
      // One long loop: split it across threads. A reduction is split into a
      // fixed number of partial results combined in order afterwards, so the
      // result does not depend on the thread count.
      bool reduction = program.nodes[k.nodes[0]].is_reduction();
      int64_t extent = k.nests[0].inner_ranges[0];
      k.chunk = reduction ? std::max<int64_t>(options.parallel_grain, (extent + 63) / 64) : 16384;
      k.chunk = (k.chunk + 63) / 64 * 64;  // whole vectors per chunk
      k.parallel = true;
    }
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
