#include "aot/partition.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "aot/max_flow.h"
#include "aot/partition_detail.h"

namespace tp::aot {
namespace detail {

using graph::Node;
using graph::Opcode;

int64_t bytes_of(const TensorMeta& m) { return numel(m.sizes) * itemsize(m.dtype); }

// Values the backward may compute again: cheap, deterministic, and of the
// size of their inputs (pointwise math, views, getitem of a saved tuple,
// constant factories). GEMMs, reductions, random and data-dependent operators
// are computed once, in the forward (U of Section 5.4).
bool recomputable(const Node* n) {
  if (n->opcode != Opcode::CallFunction) return false;
  if (n->is_getitem()) return true;
  const OpDef& op = *n->target;
  if (op.has(kRandom) || op.has(kNondeterministicShape) || !n->output_metas.empty()) return false;
  return op.has(kPointwise) || op.has(kView) || op.has(kFactory);
}

bool is_gemm_name(const std::string& name) {
  return name == "mm" || name == "matmul" || name == "bmm" || name == "addmm" || name == "linear" ||
         name == "baddbmm";
}
bool is_gemm(const Node* n) { return n->opcode == Opcode::CallFunction && is_gemm_name(n->target->name); }

// Work to compute `n` again, in multiply-adds (GEMMs) or elements touched (the rest).
int64_t recompute_cost(const Node* n) {
  std::string name = n->target->name;
  int64_t out = n->output_metas.empty() ? numel(n->meta.sizes) : 0;
  for (auto& m : n->output_metas) out += numel(m.sizes);
  std::vector<Node*> ins = n->input_nodes();
  bool gemm = is_gemm_name(name) || name.rfind("conv", 0) == 0;
  if (gemm && !ins.empty() && ins[0] && !ins[0]->meta.sizes.empty()) {
    // out elements x reduction length (conv: channels x kernel from the weight)
    int64_t k = ins[0]->meta.sizes.back();
    if (name.rfind("conv", 0) == 0 && ins.size() > 1 && ins[1]) k = numel(ins[1]->meta.sizes) / std::max<int64_t>(1, ins[1]->meta.sizes[0]);
    return std::max<int64_t>(1, out * k);
  }
  int64_t touched = out;
  for (Node* in : ins)
    if (in) touched += numel(in->meta.sizes);
  return std::max<int64_t>(1, touched);
}

JointSides joint_sides(const JointGraph& joint) {
  JointSides j;
  for (auto& up : joint.graph->nodes()) {
    const Node* n = up.get();
    if (n->opcode == Opcode::Placeholder) {
      if (n->input_index >= joint.num_primals) {
        j.bwd.insert(n);
        j.tangents.push_back(n);
      } else {
        j.primals.push_back(n);
      }
      continue;
    }
    if (n->opcode != Opcode::CallFunction) continue;
    for (const Node* in : n->input_nodes())
      if (j.bwd.count(in)) {
        j.bwd.insert(n);
        break;
      }
  }
  auto by_index = [](const Node* a, const Node* b) { return a->input_index < b->input_index; };
  std::sort(j.tangents.begin(), j.tangents.end(), by_index);
  std::sort(j.primals.begin(), j.primals.end(), by_index);
  return j;
}

std::shared_ptr<graph::Graph> build_forward(const JointGraph& joint, const std::vector<const Node*>& saved_act) {
  const graph::Graph& g = *joint.graph;
  const Node* out = g.output_node();
  auto fwd = std::make_shared<graph::Graph>();
  std::unordered_set<const Node*> need;
  std::function<void(const Node*)> mark = [&](const Node* n) {
    if (!n || !need.insert(n).second) return;
    for (const Node* in : n->input_nodes()) mark(in);
  };
  for (int i = 0; i < joint.num_outputs; ++i)
    if (auto* q = std::get_if<Node*>(&out->args[static_cast<size_t>(i)])) mark(*q);
  for (const Node* s : saved_act) mark(s);
  std::unordered_map<const Node*, Node*> m;
  for (auto& up : g.nodes()) {
    const Node* n = up.get();
    if (n->opcode == Opcode::Placeholder && n->input_index < joint.num_primals) {
      m[n] = fwd->placeholder(n->name, n->meta, n->input_index);
      m[n]->sym_sizes = n->sym_sizes;
    } else if (need.count(n) && n->opcode != Opcode::Placeholder && n->opcode != Opcode::Output) {
      copy_node(*fwd, n, m);
    }
  }
  std::vector<graph::Arg> outs;
  for (int i = 0; i < joint.num_outputs; ++i) {
    const graph::Arg& a = out->args[static_cast<size_t>(i)];
    auto* q = std::get_if<Node*>(&a);
    outs.push_back(q ? graph::Arg(*q ? m.at(*q) : static_cast<Node*>(nullptr)) : a);
  }
  for (const Node* s : saved_act) outs.push_back(m.at(s));
  fwd->output(std::move(outs));
  // The primals keep their input positions: each symbol is read where the joint read it.
  fwd->symbols = g.symbols;
  return fwd;
}

}  // namespace detail

using namespace detail;

Partition min_cut_partition(const JointGraph& joint, const PartitionOptions& options) {
  const graph::Graph& g = *joint.graph;
  const Node* out = g.output_node();
  const JointSides sides = joint_sides(joint);
  const std::unordered_set<const Node*>& bwd = sides.bwd;
  const std::vector<const Node*>& tangents = sides.tangents;
  auto forward_side = [&](const Node* n) {
    return n && !bwd.count(n) && (n->opcode == Opcode::Placeholder || n->opcode == Opcode::CallFunction);
  };

  // Among cuts of equal bytes, prefer saving a value the backward hands to a
  // GEMM (through views): recomputing it there means writing it to memory for
  // the library call and reading it back, not a value fused into a loop (a ReLU
  // layer saves relu(h), which its weight gradient reads, rather than h). Bytes
  // are scaled by more than the number of such values, and each preferred
  // value's capacity is one less, so this only breaks ties.
  std::unordered_set<const Node*> gemm_operand;
  for (auto& up : g.nodes()) {
    const Node* n = up.get();
    if (!bwd.count(n) || n->opcode != Opcode::CallFunction || recomputable(n) || !is_gemm(n)) continue;
    for (const Node* in : n->input_nodes()) {
      while (forward_side(in) && in->opcode == Opcode::CallFunction && in->target->has(kView) &&
             !in->input_nodes().empty())
        in = in->input_nodes()[0];
      if (forward_side(in) && in->opcode == Opcode::CallFunction) gemm_operand.insert(in);
    }
  }
  const int64_t tie_scale = static_cast<int64_t>(gemm_operand.size()) + 1;

  // The rematerialization network; `relaxed` are values of U the activation
  // budget allows the backward to recompute.
  struct Cut {
    std::vector<const Node*> act, primal;
    int64_t bytes = 0;
  };
  auto solve_cut = [&](const std::unordered_set<const Node*>& relaxed) {
    MaxFlow net(2);
    const int src = 0, sink = 1;
    std::unordered_map<const Node*, int> vin;  // v_out = vin + 1
    for (auto& up : g.nodes()) {
      const Node* n = up.get();
      if (!forward_side(n)) continue;
      int a = net.add_vertex();
      net.add_vertex();
      vin[n] = a;
      // Saving a primal costs no new memory (the caller's tensor is kept by
      // reference), so the cut prefers recomputing from inputs over saving
      // activations of the same size (LayerNorm saves x and its two statistics,
      // not x - mean).
      int64_t cap = n->opcode == Opcode::Placeholder ? 0
                    : n->output_metas.empty()          ? bytes_of(n->meta) * tie_scale - (gemm_operand.count(n) ? 1 : 0)
                                                       : MaxFlow::kInfinite;
      if (cap < 0) cap = 0;
      net.add_edge(a, a + 1, cap);
      if (n->opcode == Opcode::Placeholder || (!recomputable(n) && !relaxed.count(n)))
        net.add_edge(src, a, MaxFlow::kInfinite);
      for (const Node* in : n->input_nodes())
        if (forward_side(in)) net.add_edge(vin.at(in) + 1, a, MaxFlow::kInfinite);
    }
    auto needed_by_backward = [&](const Node* in) {
      if (forward_side(in)) net.add_edge(vin.at(in) + 1, sink, MaxFlow::kInfinite);
    };
    for (auto& up : g.nodes())
      if (bwd.count(up.get()))
        for (const Node* in : up->input_nodes()) needed_by_backward(in);
    for (size_t i = static_cast<size_t>(joint.num_outputs); i < out->args.size(); ++i)
      if (auto* p = std::get_if<Node*>(&out->args[i])) needed_by_backward(*p);
    int64_t flow = net.solve(src, sink);
    TP_CHECK(flow < MaxFlow::kInfinite, Error, "AOT partition: no finite cut (a value the backward reads cannot be "
                                               "saved or recomputed)");
    Cut c;
    for (auto& up : g.nodes()) {
      const Node* n = up.get();
      auto it = vin.find(n);
      if (it == vin.end()) continue;
      if (net.on_source_side(it->second) && !net.on_source_side(it->second + 1))
        (n->opcode == Opcode::Placeholder ? c.primal : c.act).push_back(n);
    }
    // Zero-capacity edges (primals, empty tensors) may be cut without need: keep
    // only the saved values the backward reads.
    std::unordered_set<const Node*> stop(c.act.begin(), c.act.end()), used, seen;
    stop.insert(c.primal.begin(), c.primal.end());
    std::function<void(const Node*)> walk = [&](const Node* n) {
      if (!n || !seen.insert(n).second) return;
      if (stop.count(n)) {
        used.insert(n);
        return;
      }
      for (const Node* in : n->input_nodes()) walk(in);
    };
    for (size_t i = static_cast<size_t>(joint.num_outputs); i < out->args.size(); ++i)
      if (auto* q = std::get_if<Node*>(&out->args[i])) walk(*q);
    auto unused = [&](const Node* n) { return !used.count(n); };
    c.act.erase(std::remove_if(c.act.begin(), c.act.end(), unused), c.act.end());
    c.primal.erase(std::remove_if(c.primal.begin(), c.primal.end(), unused), c.primal.end());
    for (const Node* n : c.act) c.bytes += bytes_of(n->meta);
    return c;
  };

  Partition p;
  std::unordered_set<const Node*> relaxed;
  Cut cut = solve_cut(relaxed);
  p.default_saved_bytes = cut.bytes;
  int64_t budget = options.budget_bytes;
  if (options.budget_fraction >= 0) budget = static_cast<int64_t>(options.budget_fraction * static_cast<double>(cut.bytes));
  if (budget >= 0 && cut.bytes > budget) {
    // A chain of layers: binomial checkpointing (Theorem 5.4) holds at most
    // budget / state bytes states at any time, with the fewest recomputations.
    if (std::optional<Partition> chain = chain_checkpoint_partition(joint, budget)) {
      chain->default_saved_bytes = p.default_saved_bytes;
      return std::move(*chain);
    }
  }
  if (budget >= 0) {
    // Activation checkpointing under a memory budget: let the backward
    // recompute values of U too, one at a time, each time the one that frees
    // the most saved bytes per unit of recomputation (greedy knapsack over the
    // min cut), until the saved bytes fit.
    while (cut.bytes > budget) {
      const Node* best = nullptr;
      Cut best_cut;
      double best_ratio = 0;
      for (auto& up : g.nodes()) {
        const Node* n = up.get();
        if (!forward_side(n) || n->opcode != Opcode::CallFunction || recomputable(n) || relaxed.count(n) ||
            n->target->has(kRandom))
          continue;
        relaxed.insert(n);
        Cut c = solve_cut(relaxed);
        relaxed.erase(n);
        double ratio = static_cast<double>(cut.bytes - c.bytes) / static_cast<double>(recompute_cost(n));
        if (c.bytes < cut.bytes && ratio > best_ratio) {
          best = n;
          best_ratio = ratio;
          best_cut = std::move(c);
        }
      }
      if (!best) break;  // nothing more can be recomputed: the budget cannot be met
      relaxed.insert(best);
      cut = std::move(best_cut);
    }
    p.budget_bytes = budget;
  }
  std::vector<const Node*> saved_act = cut.act, saved_primal = cut.primal;
  // Dynamic shapes: the backward reads each symbol from an input dim that is
  // exactly that symbol. Where no saved value or tangent has one, the primal the
  // joint read it from is saved too (by reference: no memory).
  std::vector<std::pair<const Node*, int>> carrier(g.symbols.size(), {nullptr, -1});
  if (g.is_symbolic()) {
    auto scan = [&](const Node* s) {
      const graph::SymShape& ss = s->sym_sizes;
      for (size_t d = 0; d < ss.size(); ++d)
        if (ss[d].is_size()) {
          auto& c = carrier.at(static_cast<size_t>(ss[d].size_index()));
          if (!c.first) c = {s, static_cast<int>(d)};
        }
    };
    for (const Node* s : saved_act) scan(s);
    for (const Node* s : saved_primal) scan(s);
    for (const Node* t : tangents) scan(t);
    for (size_t k = 0; k < carrier.size(); ++k) {
      if (carrier[k].first) continue;
      const graph::SymbolInfo& si = g.symbols[k];
      const Node* p = nullptr;
      for (const Node* q : sides.primals)
        if (q->input_index == si.input_index) p = q;
      TP_CHECK(p, Error, "internal: AOT partition: no input carries the size ", si.origin);
      saved_primal.push_back(p);
      scan(p);
    }
  }

  // Forward graph: the results and the saved activations, from the primals.
  auto fwd = build_forward(joint, saved_act);

  // Backward graph: the grads from the saved values and the tangents; every
  // other forward-side value it reads is recomputed.
  auto bg = std::make_shared<graph::Graph>();
  {
    std::unordered_map<const Node*, Node*> m;
    int idx = 0;
    // Contiguous inputs: the forward's backend may hand back other strides than
    // the joint trace saw, and incoming gradients are often expanded; the node
    // makes every input contiguous, so a backend may specialize on it.
    auto input = [&](const Node* s) {
      m[s] = bg->placeholder(s->name, TensorMeta::contiguous(s->meta.sizes, s->meta.dtype), idx++);
      m[s]->sym_sizes = s->sym_sizes;
    };
    for (const Node* s : saved_act) input(s);
    for (const Node* s : saved_primal) input(s);
    for (const Node* t : tangents) input(t);
    std::unordered_set<const Node*> need;
    std::function<void(const Node*)> mark = [&](const Node* n) {
      if (!n || m.count(n) || !need.insert(n).second) return;
      TP_CHECK(n->opcode != Opcode::Placeholder, Error, "AOT partition: the backward reads primal '", n->name,
               "' that the cut did not save");
      for (const Node* in : n->input_nodes()) mark(in);
    };
    for (size_t i = static_cast<size_t>(joint.num_outputs); i < out->args.size(); ++i)
      if (auto* q = std::get_if<Node*>(&out->args[i])) mark(*q);
    for (auto& up : g.nodes()) {
      const Node* n = up.get();
      if (!need.count(n)) continue;
      copy_node(*bg, n, m);
      if (!bwd.count(n) && n->opcode == Opcode::CallFunction) p.recomputed.push_back(n->name);
    }
    std::vector<graph::Arg> outs;
    for (size_t i = static_cast<size_t>(joint.num_outputs); i < out->args.size(); ++i) {
      const graph::Arg& a = out->args[i];
      auto* q = std::get_if<Node*>(&a);
      outs.push_back(q ? graph::Arg(*q ? m.at(*q) : static_cast<Node*>(nullptr)) : a);
    }
    p.num_grads = static_cast<int>(outs.size());
    bg->output(std::move(outs));
    bg->symbols = g.symbols;
    for (size_t k = 0; k < bg->symbols.size(); ++k) {
      bg->symbols[k].input_index = m.at(carrier[k].first)->input_index;
      bg->symbols[k].input_dim = carrier[k].second;
    }
  }
  for (const Node* s : saved_act) {
    p.saved.push_back({s->name, s->meta, bytes_of(s->meta), -1});
    p.saved_bytes += bytes_of(s->meta);
  }
  for (const Node* s : saved_primal) p.saved.push_back({s->name, s->meta, bytes_of(s->meta), s->input_index});
  p.num_saved_activations = static_cast<int>(saved_act.size());
  for (auto& up : g.nodes())
    if (relaxed.count(up.get())) p.checkpointed.push_back(up->name);
  p.num_tangents = static_cast<int>(tangents.size());
  p.forward = fwd;
  p.backward = bg;
  return p;
}

std::string Partition::report() const {
  std::string s = "saved for backward (" + std::to_string(saved_bytes) + " bytes of activations):\n";
  for (auto& v : saved)
    s += str("  ", v.name, ": ", dtype_name(v.meta.dtype), shape_str(v.meta.sizes), " ", v.bytes, " bytes",
             v.primal >= 0 ? " (input, by reference)" : "", "\n");
  if (chain.steps > 0) {
    s += str("activation memory budget ", budget_bytes, " bytes (", default_saved_bytes,
             " without it): binomial checkpointing of a chain of ", chain.steps, " steps, ", chain.slots,
             " states held, ", chain.evaluations, " step evaluations in the backward (", chain.steps,
             " without a budget)\n");
  } else if (budget_bytes >= 0) {
    s += str("activation memory budget ", budget_bytes, " bytes (", default_saved_bytes,
             " without it); recomputed although in U:");
    if (checkpointed.empty()) s += " (none)";
    for (auto& c : checkpointed) s += " " + c;
    s += saved_bytes > budget_bytes ? " -- the budget cannot be met\n" : "\n";
  }
  s += "recomputed in backward:";
  if (recomputed.empty()) s += " (none)";
  for (auto& r : recomputed) s += " " + r;
  return s + "\n";
}

}  // namespace tp::aot
