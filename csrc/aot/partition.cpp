#include "aot/partition.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "aot/max_flow.h"

namespace tp::aot {
namespace {

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

// Copies `n` into `dst`, its node arguments mapped through `m`.
Node* copy_node(graph::Graph& dst, const Node* n, std::unordered_map<const Node*, Node*>& m) {
  if (n->opcode == Opcode::GetAttr) return m[n] = dst.get_attr(n->name, n->constant);
  std::vector<graph::Arg> args;
  for (auto& a : n->args) {
    if (auto* p = std::get_if<Node*>(&a)) {
      args.push_back(*p ? m.at(*p) : static_cast<Node*>(nullptr));
    } else {
      args.push_back(a);
    }
  }
  Node* c = dst.call(*n->target, std::move(args), n->attrs, n->meta);
  c->output_metas = n->output_metas;
  return m[n] = c;
}

}  // namespace

Partition min_cut_partition(const JointGraph& joint) {
  const graph::Graph& g = *joint.graph;
  const Node* out = g.output_node();
  // Tangent-dependent nodes: the backward side.
  std::unordered_set<const Node*> bwd;
  std::vector<const Node*> tangents;
  for (auto& up : g.nodes()) {
    const Node* n = up.get();
    if (n->opcode == Opcode::Placeholder) {
      if (n->input_index >= joint.num_primals) {
        bwd.insert(n);
        tangents.push_back(n);
      }
      continue;
    }
    if (n->opcode != Opcode::CallFunction) continue;
    for (const Node* in : n->input_nodes())
      if (bwd.count(in)) {
        bwd.insert(n);
        break;
      }
  }
  std::sort(tangents.begin(), tangents.end(),
            [](const Node* a, const Node* b) { return a->input_index < b->input_index; });
  auto forward_side = [&](const Node* n) {
    return n && !bwd.count(n) && (n->opcode == Opcode::Placeholder || n->opcode == Opcode::CallFunction);
  };

  // The rematerialization network.
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
                  : n->output_metas.empty()          ? bytes_of(n->meta)
                                                     : MaxFlow::kInfinite;
    net.add_edge(a, a + 1, cap);
    if (n->opcode == Opcode::Placeholder || !recomputable(n)) net.add_edge(src, a, MaxFlow::kInfinite);
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

  Partition p;
  std::vector<const Node*> saved_act, saved_primal;
  for (auto& up : g.nodes()) {
    const Node* n = up.get();
    auto it = vin.find(n);
    if (it == vin.end()) continue;
    if (net.on_source_side(it->second) && !net.on_source_side(it->second + 1)) {
      (n->opcode == Opcode::Placeholder ? saved_primal : saved_act).push_back(n);
    }
  }
  {
    // Zero-capacity edges (primals, empty tensors) may be cut without need: keep
    // only the saved values the backward reads.
    std::unordered_set<const Node*> stop(saved_act.begin(), saved_act.end()), used;
    stop.insert(saved_primal.begin(), saved_primal.end());
    std::unordered_set<const Node*> seen;
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
    saved_act.erase(std::remove_if(saved_act.begin(), saved_act.end(), unused), saved_act.end());
    saved_primal.erase(std::remove_if(saved_primal.begin(), saved_primal.end(), unused), saved_primal.end());
  }

  // Forward graph: the results and the saved activations, from the primals.
  auto fwd = std::make_shared<graph::Graph>();
  {
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
  }

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
  }
  for (const Node* s : saved_act) {
    p.saved.push_back({s->name, s->meta, bytes_of(s->meta), -1});
    p.saved_bytes += bytes_of(s->meta);
  }
  for (const Node* s : saved_primal) p.saved.push_back({s->name, s->meta, bytes_of(s->meta), s->input_index});
  p.num_saved_activations = static_cast<int>(saved_act.size());
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
  s += "recomputed in backward:";
  if (recomputed.empty()) s += " (none)";
  for (auto& r : recomputed) s += " " + r;
  return s + "\n";
}

}  // namespace tp::aot
