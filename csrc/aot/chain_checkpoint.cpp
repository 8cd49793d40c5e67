// Binomial checkpointing of a chain under an activation memory budget
// (Theorem 5.4), the budgeted partition where the forward side is a chain.
//
// A chain: in the forward's node order there are states x_1 < ... < x_m such
// that, right after each, it is the only non-input value the rest of the
// forward still reads (a layer's output feeding the next layer's GEMM). Step k
// is the nodes after x_{k-1} up to x_k (step 1 starts from the inputs, the
// last step ends with the results). The budget buys s = budget / (largest
// state) slots; the forward keeps the states plan_reversal names, and the
// backward graph is emitted in the plan's order: an Advance copies the nodes
// of the steps from the state at hand (new nodes: recomputation), a Reverse
// copies one step's nodes (its tape) and then the tangent-side nodes that
// belong to that step, reading the tape. A tangent-side node belongs to the
// smallest step among the forward values it reads and the nodes it reads
// (gradients flow from the last step to the first, so this is a topological
// order). The same operators run on the same values, so the gradients are
// bit-identical to the unconstrained partition's.
#include <algorithm>
#include <functional>
#include <unordered_set>

#include "aot/partition_detail.h"
#include "aot/reversal_schedule.h"

namespace tp::aot::detail {

using graph::Node;
using graph::Opcode;

namespace {
// A longer chain is planned by the greedy cut (the DP is O(l^2 s)).
constexpr int kMaxChainSteps = 512;
}  // namespace

std::optional<Partition> chain_checkpoint_partition(const JointGraph& joint, int64_t budget) {
  const graph::Graph& g = *joint.graph;
  const Node* out = g.output_node();
  // Tangent-dependent nodes (the backward side), as in the cut.
  const JointSides sides = joint_sides(joint);
  const std::unordered_set<const Node*>& bwd = sides.bwd;
  const std::vector<const Node*>& tangents = sides.tangents;
  const std::vector<const Node*>& primals = sides.primals;

  // The forward side in order; every node must be recomputable from its inputs.
  // The chain is sought among the nodes the results need (`core`); the other
  // tangent-independent values (1 - tanh(h)^2 of a formula) join the step of
  // their latest input.
  std::unordered_set<const Node*> core;
  {
    std::function<void(const Node*)> mark = [&](const Node* n) {
      if (!n || n->opcode != Opcode::CallFunction || bwd.count(n) || !core.insert(n).second) return;
      for (const Node* in : n->input_nodes()) mark(in);
    };
    for (int i = 0; i < joint.num_outputs; ++i)
      if (auto* q = std::get_if<Node*>(&out->args[static_cast<size_t>(i)])) mark(*q);
  }
  std::vector<const Node*> order, all_forward;
  std::unordered_map<const Node*, int> pos;
  for (auto& up : g.nodes()) {
    const Node* n = up.get();
    if (n->opcode != Opcode::CallFunction || bwd.count(n)) continue;
    if (n->target->has(kRandom) || n->target->has(kNondeterministicShape)) return std::nullopt;
    all_forward.push_back(n);
    if (!core.count(n)) continue;
    pos[n] = static_cast<int>(order.size());
    order.push_back(n);
  }
  const int N = static_cast<int>(order.size());
  if (N < 3) return std::nullopt;
  // Last forward position reading each value; results live to the end.
  std::vector<int> last(static_cast<size_t>(N));
  for (int p = 0; p < N; ++p) last[static_cast<size_t>(p)] = p;
  for (int p = 0; p < N; ++p)
    for (const Node* in : order[static_cast<size_t>(p)]->input_nodes()) {
      auto it = pos.find(in);
      if (it != pos.end()) last[static_cast<size_t>(it->second)] = std::max(last[static_cast<size_t>(it->second)], p);
    }
  for (int i = 0; i < joint.num_outputs; ++i)
    if (auto* q = std::get_if<Node*>(&out->args[static_cast<size_t>(i)]); q && *q && pos.count(*q))
      last[static_cast<size_t>(pos.at(*q))] = N;
  // live[p]: values defined at or before p and read after it.
  std::vector<int> live(static_cast<size_t>(N) + 1, 0);
  for (int p = 0; p < N; ++p)
    if (last[static_cast<size_t>(p)] > p) {
      live[static_cast<size_t>(p)] += 1;
      live[static_cast<size_t>(last[static_cast<size_t>(p)])] -= 1;
    }
  for (int p = 1; p < N; ++p) live[static_cast<size_t>(p)] += live[static_cast<size_t>(p - 1)];
  // States: the only live value after them, read later by something the cut
  // would not recompute (a layer boundary: the next GEMM's operand).
  std::vector<const Node*> states;
  for (int p = 0; p < N; ++p) {
    const Node* n = order[static_cast<size_t>(p)];
    if (live[static_cast<size_t>(p)] != 1 || last[static_cast<size_t>(p)] <= p || last[static_cast<size_t>(p)] == N ||
        !n->output_metas.empty())
      continue;
    bool feeds_library_op = false;
    for (int q = p + 1; q <= last[static_cast<size_t>(p)] && !feeds_library_op; ++q) {
      const Node* u = order[static_cast<size_t>(q)];
      if (recomputable(u)) continue;
      for (const Node* in : u->input_nodes()) feeds_library_op = feeds_library_op || in == n;
    }
    if (feeds_library_op) states.push_back(n);
  }
  const int L = static_cast<int>(states.size()) + 1;
  if (L < 3 || L > kMaxChainSteps) return std::nullopt;
  // step(v) for forward values: 1 + number of states before it.
  std::unordered_map<const Node*, int> step;
  {
    int k = 1;
    for (const Node* n : order) {
      step[n] = k;
      if (k - 1 < static_cast<int>(states.size()) && n == states[static_cast<size_t>(k - 1)]) ++k;
    }
    for (const Node* n : all_forward) {
      if (step.count(n)) continue;
      int ks = 1;
      for (const Node* in : n->input_nodes())
        if (auto it = step.find(in); it != step.end()) ks = std::max(ks, it->second);
      step[n] = ks;
    }
  }
  order = all_forward;  // steps are copied in the joint graph's (topological) order
  int64_t state_bytes = 0;
  for (const Node* s : states) state_bytes = std::max(state_bytes, bytes_of(s->meta));
  int slots = state_bytes == 0 ? L - 1 : static_cast<int>(std::min<int64_t>(L - 1, budget / state_bytes));
  ReversalPlan plan = plan_reversal(L, slots);

  Partition p;
  std::vector<const Node*> saved_act;
  for (int k : plan.forward_saves) saved_act.push_back(states[static_cast<size_t>(k - 1)]);
  p.forward = build_forward(joint, saved_act);

  // The backward, drafted with every primal as an input, then compacted.
  graph::Graph draft;
  std::unordered_map<const Node*, Node*> global;  // primals, constants, tangents, tangent-side nodes
  int idx = 0;
  auto input = [&](const Node* s) {
    Node* ph = draft.placeholder(s->name, TensorMeta::contiguous(s->meta.sizes, s->meta.dtype), idx++);
    ph->sym_sizes = s->sym_sizes;  // dynamic shapes: the joint's symbols (the plan itself is made at the hints)
    return ph;
  };
  for (const Node* s : saved_act) input(s);
  std::vector<Node*> saved_in(draft.placeholders());
  for (const Node* s : primals) global[s] = input(s);
  for (const Node* t : tangents) global[t] = input(t);
  std::unordered_map<const Node*, Node*> latest;  // the most recent copy of each forward value
  std::unordered_map<int, Node*> state_at;        // x_k at hand (k >= 1)
  for (size_t i = 0; i < saved_act.size(); ++i) {
    latest[saved_act[i]] = saved_in[i];
    state_at[step.at(saved_act[i])] = saved_in[i];
  }
  std::unordered_set<std::string> recomputed_names;
  // Any node's value in the draft: a global, the latest copy, or (a result the
  // plan never computed, e.g. a gradient that does not depend on a tangent)
  // recomputed from its inputs.
  std::function<Node*(const Node*)> value = [&](const Node* n) -> Node* {
    if (!n) return nullptr;
    if (auto it = global.find(n); it != global.end()) return it->second;
    if (auto it = latest.find(n); it != latest.end()) return it->second;
    if (n->opcode == Opcode::GetAttr) return global[n] = draft.get_attr(n->name, n->constant);
    std::unordered_map<const Node*, Node*> m;
    for (const Node* in : n->input_nodes())
      if (in) m[in] = value(in);
    Node* c = copy_node(draft, n, m);
    (bwd.count(n) ? global : latest)[n] = c;
    if (!bwd.count(n)) recomputed_names.insert(n->name);
    return c;
  };
  // Copies of steps first..last from the state x_{first-1} at hand.
  auto run_steps = [&](int first, int last_step) {
    for (const Node* n : order) {
      int k = step.at(n);
      if (k < first || k > last_step) continue;
      std::unordered_map<const Node*, Node*> m;
      for (const Node* in : n->input_nodes()) {
        if (!in) continue;
        auto s = step.find(in);
        if (first >= 2 && s != step.end() && s->second == first - 1 && in == states[static_cast<size_t>(first - 2)]) {
          m[in] = state_at.at(first - 1);  // the state at hand, not a later copy
        } else {
          m[in] = value(in);
        }
      }
      latest[n] = copy_node(draft, n, m);
      recomputed_names.insert(n->name);
      if (k - 1 < static_cast<int>(states.size()) && n == states[static_cast<size_t>(k - 1)]) state_at[k] = latest[n];
    }
  };
  // Tangent-side nodes by step (the minimum over what they read; L + 1 = only tangents).
  std::unordered_map<const Node*, int> bstep;
  std::vector<std::vector<const Node*>> by_step(static_cast<size_t>(L) + 2);
  for (auto& up : g.nodes()) {
    const Node* n = up.get();
    if (!bwd.count(n) || n->opcode != Opcode::CallFunction) continue;
    int k = L + 1;
    for (const Node* in : n->input_nodes()) {
      if (!in) continue;
      if (auto s = step.find(in); s != step.end()) k = std::min(k, s->second);
      if (auto s = bstep.find(in); s != bstep.end()) k = std::min(k, s->second);
    }
    bstep[n] = k;
    by_step[static_cast<size_t>(k)].push_back(n);
  }
  auto emit_backward_of = [&](int k) {
    for (const Node* n : by_step[static_cast<size_t>(k)]) value(n);
  };
  emit_backward_of(L + 1);
  for (const ReversalAction& a : plan.backward) {
    if (a.kind == ReversalAction::Advance) {
      run_steps(a.from + 1, a.to);
    } else {
      run_steps(a.to, a.to);  // the tape of step a.to
      emit_backward_of(a.to);
    }
  }
  std::vector<graph::Arg> outs;
  for (size_t i = static_cast<size_t>(joint.num_outputs); i < out->args.size(); ++i) {
    const graph::Arg& a = out->args[i];
    auto* q = std::get_if<Node*>(&a);
    outs.push_back(q ? graph::Arg(value(*q)) : a);
  }
  draft.output(outs);

  // Compact: only what the grads need, primals that are read, renumbered.
  std::unordered_set<const Node*> need;
  std::function<void(const Node*)> mark = [&](const Node* n) {
    if (!n || !need.insert(n).second) return;
    for (const Node* in : n->input_nodes()) mark(in);
  };
  mark(draft.output_node());
  // Dynamic shapes: the backward reads each symbol from an input dim that is
  // exactly that symbol; where no input it keeps has one, the primal the joint
  // read it from is kept too (by reference: no memory).
  std::vector<std::pair<const Node*, int>> carrier(g.symbols.size(), {nullptr, -1});
  if (g.is_symbolic()) {
    auto scan = [&](const Node* ph) {
      for (size_t d = 0; d < ph->sym_sizes.size(); ++d)
        if (ph->sym_sizes[d].is_size()) {
          auto& c = carrier.at(static_cast<size_t>(ph->sym_sizes[d].size_index()));
          if (!c.first) c = {ph, static_cast<int>(d)};
        }
    };
    for (Node* ph : draft.placeholders())
      if (need.count(ph)) scan(ph);
    for (size_t k = 0; k < carrier.size(); ++k) {
      if (carrier[k].first) continue;
      for (size_t i = 0; i < primals.size(); ++i)
        if (primals[i]->input_index == g.symbols[k].input_index) {
          Node* ph = global.at(primals[i]);
          need.insert(ph);
          scan(ph);
        }
      TP_CHECK(carrier[k].first, Error, "internal: AOT checkpointing: no input carries the size ", g.symbols[k].origin);
    }
  }
  auto bg = std::make_shared<graph::Graph>();
  std::unordered_map<const Node*, Node*> m;
  int next = 0;
  std::vector<const Node*> saved_primal;
  for (Node* ph : draft.placeholders()) {
    int i = ph->input_index;
    bool is_primal = i >= static_cast<int>(saved_act.size()) && i < static_cast<int>(saved_act.size() + primals.size());
    if (is_primal && !need.count(ph)) continue;
    m[ph] = bg->placeholder(ph->name, ph->meta, next++);
    m[ph]->sym_sizes = ph->sym_sizes;
    if (is_primal) saved_primal.push_back(primals[static_cast<size_t>(i) - saved_act.size()]);
  }
  for (auto& up : draft.nodes()) {
    const Node* n = up.get();
    if (!need.count(n) || n->opcode == Opcode::Placeholder || n->opcode == Opcode::Output) continue;
    copy_node(*bg, n, m);
  }
  std::vector<graph::Arg> bouts;
  for (auto& a : draft.output_node()->args) {
    auto* q = std::get_if<Node*>(&a);
    bouts.push_back(q ? graph::Arg(*q ? m.at(*q) : static_cast<Node*>(nullptr)) : a);
  }
  p.num_grads = static_cast<int>(bouts.size());
  bg->output(std::move(bouts));
  bg->symbols = g.symbols;
  for (size_t k = 0; k < bg->symbols.size(); ++k) {
    bg->symbols[k].input_index = m.at(carrier[k].first)->input_index;
    bg->symbols[k].input_dim = carrier[k].second;
  }
  p.backward = bg;

  for (const Node* s : saved_act) {
    p.saved.push_back({s->name, s->meta, bytes_of(s->meta), -1});
    p.saved_bytes += bytes_of(s->meta);
  }
  for (const Node* s : saved_primal) p.saved.push_back({s->name, s->meta, bytes_of(s->meta), s->input_index});
  p.num_saved_activations = static_cast<int>(saved_act.size());
  for (const Node* n : order) {
    if (!recomputed_names.count(n->name)) continue;
    p.recomputed.push_back(n->name);
    if (!recomputable(n)) p.checkpointed.push_back(n->name);
  }
  p.num_tangents = static_cast<int>(tangents.size());
  p.budget_bytes = budget;
  p.chain = {L, plan.slots, plan.evaluations};
  return p;
}

}  // namespace tp::aot::detail
