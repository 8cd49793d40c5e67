#include "aot/training_region.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "aot/device_constants.h"
#include "aot/region_node.h"
#include "core/warning.h"
#include "core/grad_mode.h"
#include "ops/ops.h"

namespace tp::aot {
namespace {

// The backward region, compiled once, at the first backward that needs it
// (shared by every call of the artifact).
struct LazyBackward {
  std::shared_ptr<const graph::Graph> graph;
  RegionCompiler compile;
  std::once_flag once;
  RegionFn fn;
  RegionFn get(const std::vector<Tensor>& examples) {
    std::call_once(once, [&] { fn = compile(graph, examples, "backward"); });
    return fn;
  }
};

std::vector<Tensor> zeros_for(const graph::Graph& g, Device device) {
  std::vector<Tensor> r;
  for (graph::Node* p : g.placeholders()) {
    if (r.size() <= static_cast<size_t>(p->input_index)) r.resize(static_cast<size_t>(p->input_index) + 1);
    // With moves between devices the values are not on one device: each
    // placeholder's own (graph/graph.h, has_device_moves).
    const Device on = graph::has_device_moves(g) ? p->meta.device : device;
    r[static_cast<size_t>(p->input_index)] = zeros_on(p->meta.sizes, p->meta.dtype, on);
  }
  return r;
}

// Per primal: the tangents (by index) its gradient in the joint graph reads,
// directly or through other nodes.
std::vector<std::vector<int>> tangents_read_by_grads(const JointGraph& joint) {
  std::vector<std::vector<int>> res(static_cast<size_t>(joint.num_primals));
  const graph::Graph& g = *joint.graph;
  const size_t nt = static_cast<size_t>(std::count(joint.differentiable.begin(), joint.differentiable.end(), true));
  if (nt == 0) return res;
  std::unordered_map<const graph::Node*, std::vector<bool>> reads;
  for (const auto& up : g.nodes()) {
    const graph::Node* n = up.get();
    if (n->opcode == graph::Opcode::Output) break;
    std::vector<bool> r(nt, false);
    if (n->opcode == graph::Opcode::Placeholder) {
      const int t = n->input_index - joint.num_primals;
      if (t >= 0 && static_cast<size_t>(t) < nt) r[static_cast<size_t>(t)] = true;
    }
    for (const graph::Node* a : n->input_nodes())
      if (auto it = reads.find(a); it != reads.end())
        for (size_t t = 0; t < nt; ++t)
          if (it->second[t]) r[t] = true;
    reads.emplace(n, std::move(r));
  }
  const graph::Node* out = g.output_node();
  for (size_t i = 0; i < res.size() && i < joint.grad_output.size(); ++i) {
    const int gi = joint.grad_output[i];
    if (gi < 0 || static_cast<size_t>(gi) >= out->args.size()) continue;
    const auto* np = std::get_if<graph::Node*>(&out->args[static_cast<size_t>(gi)]);
    if (!np || !*np) continue;
    auto it = reads.find(*np);
    if (it == reads.end()) continue;
    for (size_t t = 0; t < nt; ++t)
      if (it->second[t]) res[i].push_back(static_cast<int>(t));
  }
  return res;
}

}  // namespace

std::vector<std::vector<int>> results_computed_from_results(const graph::Graph& g) {
  const graph::Node* out = g.output_node();
  const size_t nout = out->args.size();
  std::vector<std::vector<int>> res(nout);
  std::unordered_map<const graph::Node*, std::vector<int>> results_at;  // node -> the results it is
  for (size_t o = 0; o < nout; ++o)
    if (const auto* np = std::get_if<graph::Node*>(&out->args[o]); np && *np) results_at[*np].push_back(static_cast<int>(o));
  if (results_at.empty()) return res;
  // node -> the results it is computed from
  std::unordered_map<const graph::Node*, std::vector<int>> from;
  for (const auto& up : g.nodes()) {
    const graph::Node* n = up.get();
    if (n->opcode == graph::Opcode::Output) break;
    if (n->opcode != graph::Opcode::CallFunction || !n->grad_enabled || n->is_op("detach") ||
        !is_floating(n->meta.dtype))
      continue;
    std::vector<int> f;
    for (const graph::Node* a : n->input_nodes()) {
      if (!a) continue;
      if (auto it = results_at.find(a); it != results_at.end()) f.insert(f.end(), it->second.begin(), it->second.end());
      if (auto it = from.find(a); it != from.end()) f.insert(f.end(), it->second.begin(), it->second.end());
    }
    if (f.empty()) continue;
    std::sort(f.begin(), f.end());
    f.erase(std::unique(f.begin(), f.end()), f.end());
    from.emplace(n, std::move(f));
  }
  for (const auto& [n, ks] : results_at) {
    auto it = from.find(n);
    if (it == from.end()) continue;
    for (int o : it->second)
      for (int k : ks)
        if (std::find(ks.begin(), ks.end(), o) == ks.end())
          res[static_cast<size_t>(o)].push_back(k);
  }
  return res;
}

std::vector<std::vector<int>> results_eager_reads(const graph::Graph& g, const std::vector<bool>& input_requires_grad) {
  using graph::Node;
  const Node* out = g.output_node();
  const size_t nout = out->args.size();
  std::vector<std::vector<int>> res(nout);
  std::unordered_map<const Node*, std::vector<int>> results_at;
  for (size_t o = 0; o < nout; ++o)
    if (const auto* np = std::get_if<Node*>(&out->args[o]); np && *np) results_at[*np].push_back(static_cast<int>(o));
  if (results_at.empty()) return res;
  // Which values eager records (they have history): as the eager dispatcher decides.
  std::unordered_map<const Node*, bool> rg;
  auto has_history = [&](const Node* n) { auto it = rg.find(n); return it != rg.end() && it->second; };
  auto recorded_op = [](const Node* n) -> const OpDef* {
    if (n->opcode != graph::Opcode::CallFunction || !n->target || n->is_getitem()) return nullptr;
    const OpDef* op = n->target;
    if (op->recorded_as)
      if (const OpDef* r = find_op(op->recorded_as)) op = r;
    return op;
  };
  std::vector<const Node*> order;
  for (const auto& up : g.nodes()) {
    const Node* n = up.get();
    if (n->opcode == graph::Opcode::Output) break;
    order.push_back(n);
    bool r = false;
    if (n->opcode == graph::Opcode::Placeholder) {
      r = n->input_index >= 0 && static_cast<size_t>(n->input_index) < input_requires_grad.size() &&
          input_requires_grad[static_cast<size_t>(n->input_index)];
    } else if (n->is_getitem()) {
      const auto ins = n->input_nodes();
      r = !ins.empty() && ins[0] && has_history(ins[0]);
    } else if (const OpDef* op = recorded_op(n); op && n->grad_enabled && op->backward) {
      for (const Node* a : n->input_nodes()) r = r || (a && has_history(a));
    }
    rg[n] = r && is_floating(n->meta.dtype);
    if (r && !n->is_getitem() && n->opcode == graph::Opcode::CallFunction) rg[n] = true;  // multi-result parents
  }
  // Per node: the results whose gradient reaches it (the results it is, and
  // those computed from it through recorded operators).
  std::unordered_map<const Node*, std::vector<int>> reach;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Node* n = *it;
    std::vector<int> r;
    if (auto ra = results_at.find(n); ra != results_at.end()) r = ra->second;
    for (const Node* u : n->users) {
      if (!has_history(u)) continue;
      if (auto ru = reach.find(u); ru != reach.end()) r.insert(r.end(), ru->second.begin(), ru->second.end());
    }
    std::sort(r.begin(), r.end());
    r.erase(std::unique(r.begin(), r.end()), r.end());
    reach[n] = std::move(r);
  }
  // Views share their base's version counter: a write into any of them is seen
  // by what any of them saved.
  auto base_of = [](const Node* n) {
    while (n->opcode == graph::Opcode::CallFunction && n->target && n->target->has(kView)) {
      const auto ins = n->input_nodes();
      if (ins.empty() || !ins[0]) break;
      n = ins[0];
    }
    return n;
  };
  std::unordered_map<const Node*, std::vector<const Node*>> group;
  for (const Node* n : order) group[base_of(n)].push_back(n);
  // Per node: the results whose gradient makes eager read it in the backward
  // (its producer's formula saves it, or a recorded user's does).
  auto readers = [&](const Node* m) {
    std::vector<int> t;
    auto add = [&](const Node* via) {
      auto r = reach.find(via);
      if (r != reach.end()) t.insert(t.end(), r->second.begin(), r->second.end());
    };
    if (has_history(m)) {
      const Node* prod = m;
      size_t out_nr = 0;
      if (m->is_getitem()) {
        const auto ins = m->input_nodes();
        prod = ins.empty() ? nullptr : ins[0];
        out_nr = static_cast<size_t>(m->getitem_index());
      }
      if (const OpDef* op = prod ? recorded_op(prod) : nullptr) {
        std::vector<bool> needs;
        for (const Node* a : prod->input_nodes()) needs.push_back(a && has_history(a));
        needs.resize(std::max(needs.size(), prod->args.size()));
        // Undeclared: eager keeps everything but raises only for what the formula
        // reads, unknown here: no watch rather than a refusal eager would not make.
        const SavedSet keep = op->saved ? op->saved(needs) : SavedSet{};
        if (keep.output(out_nr)) add(m);
      }
    }
    for (const Node* u : m->users) {
      const OpDef* op = recorded_op(u);
      if (!op || !u->grad_enabled || !op->backward || !has_history(u)) continue;
      std::vector<bool> needs;
      for (const auto& a : u->args) {
        const auto* np = std::get_if<Node*>(&a);
        needs.push_back(np && *np && has_history(*np));
      }
      // Undeclared: eager keeps everything but raises only for what the formula
        // reads, unknown here: no watch rather than a refusal eager would not make.
        const SavedSet keep = op->saved ? op->saved(needs) : SavedSet{};
      for (size_t i = 0; i < u->args.size(); ++i) {
        const auto* np = std::get_if<Node*>(&u->args[i]);
        if (np && *np == m && keep.input(i)) add(u);
      }
    }
    return t;
  };
  for (const auto& [n, os] : results_at) {
    std::vector<int> t;
    for (const Node* m : group[base_of(n)]) {
      std::vector<int> r = readers(m);
      t.insert(t.end(), r.begin(), r.end());
    }
    std::sort(t.begin(), t.end());
    t.erase(std::unique(t.begin(), t.end()), t.end());
    for (int o : os) res[static_cast<size_t>(o)] = t;
  }
  return res;
}

AotResult compile_training_region(std::shared_ptr<const graph::Graph> g, const std::vector<Tensor>& inputs,
                                  const RegionCompiler& compile, const AotOptions& options) {
  std::vector<bool> needs(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) needs[i] = inputs[i].defined() && inputs[i].requires_grad();
  JointGraph joint = options.joint ? std::move(*options.joint) : trace_joint(*g, inputs, needs);
  const Device device = region_device(inputs);
  const bool symbolic = joint.graph->is_symbolic();
  AotResult res;
  res.joint_code = joint.graph->code();
  res.partition = min_cut_partition(joint, options.partition);
  const Partition& p = res.partition;
  if (options.log)
    std::fprintf(stderr, "[tp.compile] AOT joint graph of %s:\n%s\n[tp.compile] AOT min cut of %s:\n%s"
                         "[tp.compile] AOT forward graph:\n%s\n[tp.compile] AOT backward graph:\n%s\n",
                 options.region.c_str(), res.joint_code.c_str(), options.region.c_str(), p.report().c_str(),
                 p.forward->code().c_str(), p.backward->code().c_str());

  auto lazy = std::make_shared<LazyBackward>();
  lazy->graph = p.backward;
  lazy->compile = compile;
  RegionFn forward;
  if (options.backward_first) {
    // Both regions warn at this call now (a fallback of each): the same
    // message once, as for one region.
    std::vector<std::string> said;
    auto flush = [&](DeferredWarnings& d) {
      for (std::string& m : d.take())
        if (std::find(said.begin(), said.end(), m) == said.end()) said.push_back(std::move(m));
    };
    std::exception_ptr failed;
    {
      DeferredWarnings d;
      try {
        lazy->get(zeros_for(*p.backward, device));
        forward = compile(p.forward, inputs, "forward");
      } catch (...) {
        failed = std::current_exception();
      }
      flush(d);
    }
    for (const std::string& m : said) warn(m);  // here, no longer deferred
    if (failed) std::rethrow_exception(failed);
  } else {
    forward = compile(p.forward, inputs, "forward");
  }
  if (options.backward_ahead) lazy->get(zeros_for(*p.backward, device));

  // What the node needs to know, shared by every call.
  struct Plan {
    size_t num_results;
    std::vector<int> saved_primal;  // input index of each saved primal
    std::vector<bool> copy_primal;  // per saved primal: the caller writes into it after the call
    size_t num_act;
    std::vector<TensorMeta> tangent_metas;
    std::vector<int> tangent_of_output;
    std::vector<int> grad_of_input;
    std::vector<std::vector<int>> tangents_of_input;
    std::vector<std::vector<int>> downstream_of_output;
    std::vector<std::vector<int>> watched_triggers;  // per result: results whose gradient makes eager read it
    std::string region;
    std::string backward_error;  // AotOptions::backward_error
    bool symbolic = false;  // results change size with the call: tangent metas are per call
  };
  auto plan = std::make_shared<Plan>();
  plan->num_results = static_cast<size_t>(joint.num_outputs);
  plan->num_act = static_cast<size_t>(p.num_saved_activations);
  for (auto& s : p.saved)
    if (s.primal >= 0) {
      plan->saved_primal.push_back(s.primal);
      const auto& w = options.written_inputs;
      plan->copy_primal.push_back(std::find(w.begin(), w.end(), s.primal) != w.end());
    }
  const graph::Node* out = g->output_node();
  int k = 0;
  for (size_t o = 0; o < joint.differentiable.size(); ++o) {
    plan->tangent_of_output.push_back(joint.differentiable[o] ? k++ : -1);
    if (joint.differentiable[o]) {
      TensorMeta m = std::get<graph::Node*>(out->args[o])->meta;
      m.device = device;  // zeros for an absent gradient go where the region runs
      plan->tangent_metas.push_back(m);
    }
  }
  for (int gi : joint.grad_output) plan->grad_of_input.push_back(gi < 0 ? -1 : gi - joint.num_outputs);
  plan->tangents_of_input = tangents_read_by_grads(joint);
  if (options.results_from_results) {
    // Only between results that carry a gradient.
    const auto& d = joint.differentiable;
    auto diff = [&](int o) { return o >= 0 && static_cast<size_t>(o) < d.size() && d[static_cast<size_t>(o)]; };
    plan->downstream_of_output.resize(d.size());
    for (size_t o = 0; o < d.size() && o < options.results_from_results->size(); ++o)
      if (diff(static_cast<int>(o)))
        for (int k : (*options.results_from_results)[o])
          if (diff(k)) plan->downstream_of_output[o].push_back(k);
  }
  if (options.results_eager_reads) {
    const auto& d = joint.differentiable;
    for (size_t o = 0; o < d.size() && o < options.results_eager_reads->size(); ++o)
      if (d[o] && !(*options.results_eager_reads)[o].empty()) {
        if (plan->watched_triggers.size() < d.size()) plan->watched_triggers.resize(d.size());
        plan->watched_triggers[o] = (*options.results_eager_reads)[o];
      }
  }
  if (std::all_of(plan->downstream_of_output.begin(), plan->downstream_of_output.end(),
                  [](const std::vector<int>& d) { return d.empty(); }))
    plan->downstream_of_output.clear();
  plan->region = options.region;
  plan->symbolic = symbolic;
  plan->backward_error = options.backward_error;

  res.run = [forward, lazy, plan](const std::vector<Tensor>& in) {
    std::vector<Tensor> r;
    {
      AutoGradMode no_grad(false);
      r = forward(in);
    }
    TP_CHECK(r.size() == plan->num_results + plan->num_act, Error, "compiled region ", plan->region,
             ": the forward returned ", r.size(), " values, expected ", plan->num_results + plan->num_act);
    auto node = std::make_shared<CompiledRegionNode>(plan->region, [lazy](const std::vector<Tensor>& x) {
      RegionFn bwd = lazy->get(x);
      AutoGradMode no_grad(false);
      return bwd(x);
    });
    for (size_t i = plan->num_results; i < r.size(); ++i) node->saved.push_back(autograd::detached(r[i]));
    for (size_t k = 0; k < plan->saved_primal.size(); ++k) {
      Tensor t = autograd::detached(in.at(static_cast<size_t>(plan->saved_primal[k])));
      if (plan->copy_primal[k]) {
        AutoGradMode no_grad(false);
        t = ops::clone(t);
      }
      node->saved.push_back(t);
    }
    for (auto& s : node->saved) node->saved_versions.push_back(s.autograd_version());
    if (autograd::SavedHooks* hooks = autograd::current_saved_hooks()) {
      for (auto& s : node->saved) {
        node->packed_metas.push_back(s.meta());
        node->packed_saved.push_back(hooks->pack(s));
      }
      node->saved.clear();
      node->saved_versions.clear();
    }
    node->tangent_metas = plan->tangent_metas;
    node->backward_error = plan->backward_error;
    if (plan->symbolic)  // a result's gradient absent: zeros of this call's size
      for (size_t o = 0; o < plan->num_results; ++o)
        if (int k = plan->tangent_of_output[o]; k >= 0 && r[o].defined()) {
          TensorMeta& m = node->tangent_metas[static_cast<size_t>(k)];
          m = TensorMeta::contiguous(r[o].sizes(), m.dtype);
          m.device = r[o].device();
        }
    node->tangent_of_output = plan->tangent_of_output;
    node->grad_of_input = plan->grad_of_input;
    node->tangents_of_input = plan->tangents_of_input;
    node->downstream_of_output = plan->downstream_of_output;
    for (auto& t : in) node->next_edges.push_back(autograd::gradient_edge(t));
    r.resize(plan->num_results);
    node->num_outputs = static_cast<uint32_t>(r.size());
    for (size_t o = 0; o < plan->watched_triggers.size() && o < r.size(); ++o)
      if (!plan->watched_triggers[o].empty() && r[o].defined()) {
        Tensor t = autograd::detached(r[o]);
        node->watched_results.push_back({t, t.autograd_version(), plan->watched_triggers[o]});
      }
    for (size_t o = 0; o < r.size(); ++o) {
      if (plan->tangent_of_output[o] < 0 || !r[o].defined()) continue;
      // A fresh alias: the backend may hand back an input object, whose own
      // history must stay (the caller restores eager's aliasing afterwards).
      r[o] = autograd::detached(r[o]);
      autograd::set_history(r[o], node, static_cast<uint32_t>(o));
    }
    return r;
  };
  return res;
}

}  // namespace tp::aot
