// The backward engine: runs the graph from given roots, each node once all the
// nodes that feed it have run, and either accumulates into .grad (backward) or
// captures the gradients of chosen tensors (grad).
#include "autograd/engine.h"

#include "ops/autocast.h"

#include <algorithm>
#include <atomic>
#include <unordered_map>
#include <unordered_set>

#include "autograd/views.h"
#include "core/grad_mode.h"
#include "core/profiler.h"
#include "ops/ops.h"

namespace tp::autograd {
namespace {

// Every node reachable from `roots`, parents before children (Kahn's order).
std::vector<Node*> topological(const std::vector<Edge>& roots) {
  std::vector<Node*> stack, seen_order;
  std::unordered_set<Node*> seen;
  for (auto& e : roots)
    if (e.fn && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  while (!stack.empty()) {  // explicit DFS: graphs can be deep
    Node* n = stack.back();
    stack.pop_back();
    seen_order.push_back(n);
    for (auto& e : n->next_edges)
      if (e.fn && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  }
  std::unordered_map<Node*, int> indeg;
  for (Node* n : seen_order)
    for (auto& e : n->next_edges)
      if (e.fn) indeg[e.fn.get()]++;
  std::vector<Node*> order;
  for (Node* n : seen_order)
    if (!indeg[n]) order.push_back(n);
  for (size_t i = 0; i < order.size(); ++i)
    for (auto& e : order[i]->next_edges)
      if (e.fn && --indeg[e.fn.get()] == 0) order.push_back(e.fn.get());
  return order;
}

void accumulate(std::vector<Tensor>& slots, uint32_t nr, const Tensor& g) {
  if (slots.size() <= nr) slots.resize(nr + 1);
  Tensor& slot = slots[nr];
  slot = slot.defined() ? ops::add(slot, g) : g;
}

// Process-wide, as in PyTorch (set_detect_anomaly affects every thread).
std::atomic<bool> g_anomaly{false};

// Anomaly mode: a NaN in a node's result is reported at the node that produced it
// (its name is the forward operator's: "DivBackward0"), not where it surfaces later.
void check_anomaly(const Node& n, const std::vector<Tensor>& out) {
  for (size_t i = 0; i < out.size(); ++i) {
    const Tensor& g = out[i];
    if (!g.defined() || !is_floating(g.dtype()) || g.numel() == 0) continue;
    TP_CHECK(!ops::any(ops::isnan(g)).item().to_bool(), Error, "Function '", n.name(), "' returned nan values in its ",
             i, "th output (the gradient for input ", i, " of the forward operation; detect_anomaly)");
  }
}

bool all_undefined(const std::vector<Tensor>& v) {
  return std::none_of(v.begin(), v.end(), [](const Tensor& t) { return t.defined(); });
}

// Runs the backward graph from `roots`. Without `capture` every reachable node
// runs and leaves accumulate into .grad. With it, only nodes leading to a
// captured edge run, AccumulateGrad never does, and (*captured)[i] receives the
// gradient flowing into (*capture)[i].
// Per thread, whether each engine call running (innermost last) accumulates
// into .grad (backward) or captures gradients (grad / backward(inputs=)).
thread_local std::vector<bool> t_running_accumulates;
struct RunningCall {
  explicit RunningCall(bool accumulates) { t_running_accumulates.push_back(accumulates); }
  ~RunningCall() { t_running_accumulates.pop_back(); }
};

void run(const std::vector<Edge>& roots, const std::vector<Tensor>& grads, bool keep_graph, bool create_graph,
         const std::vector<Edge>* capture, std::vector<Tensor>* captured) {
  RunningCall running(capture == nullptr);
  AutoGradMode mode(create_graph);
  // Derivative formulas run in the dtypes the forward chose (the gradient of an
  // autocast cast is a cast back), whether or not backward() is called inside
  // an autocast region; casting them again would change the gradients' dtypes.
  AutocastSuspend no_autocast;
  std::vector<Node*> order = topological(roots);
  std::unordered_set<Node*> active(order.begin(), order.end());
  if (capture) {
    std::unordered_set<Node*> targets;
    for (auto& e : *capture)
      if (e.fn) targets.insert(e.fn.get());
    active.clear();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {  // children first
      Node* n = *it;
      bool need = targets.count(n) > 0;
      for (auto& e : n->next_edges) need = need || (e.fn && active.count(e.fn.get()));
      if (need) active.insert(n);
    }
  }
  std::unordered_map<Node*, int> deps;
  for (Node* n : order) {
    if (!active.count(n)) continue;
    for (auto& e : n->next_edges)
      if (e.fn && active.count(e.fn.get())) deps[e.fn.get()]++;
  }
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::vector<std::shared_ptr<Node>> ready;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Edge& e = roots[i];
    if (!e.fn || !active.count(e.fn.get())) continue;
    accumulate(buffers[e.fn.get()], e.input_nr, grads[i]);
    if (deps[e.fn.get()] == 0 && std::find(ready.begin(), ready.end(), e.fn) == ready.end()) ready.push_back(e.fn);
  }
  while (!ready.empty()) {
    std::shared_ptr<Node> n = ready.back();
    ready.pop_back();
    std::vector<Tensor> in = std::move(buffers[n.get()]);
    buffers.erase(n.get());
    in.resize(std::max<size_t>(n->num_outputs, in.size()));
    {
      std::vector<uint32_t> observed;
      if (capture)
        for (const Edge& e : *capture)
          if (e.fn == n) observed.push_back(e.input_nr);
      n->check_observed(in, observed);
    }
    n->run_pre_hooks(in);
    std::vector<Tensor> out;
    // grad() runs a node only if it leads to a captured tensor; it never writes .grad.
    bool runs = !capture;
    if (capture) {
      for (auto& e : n->next_edges) runs = runs || (e.fn && active.count(e.fn.get()));
      for (size_t i = 0; i < capture->size(); ++i) {
        const Edge& e = (*capture)[i];
        if (e.fn == n && e.input_nr < in.size() && in[e.input_nr].defined()) (*captured)[i] = in[e.input_nr];
      }
    }
    if (runs && !all_undefined(in)) {
      if (profiler::active()) [[unlikely]] {
        profiler::Range range("backward", "autograd::" + n->name());
        range.set_inputs(in);
        out = n->apply(in);
      } else {
        out = n->apply(in);
      }
      if (g_anomaly.load(std::memory_order_relaxed)) check_anomaly(*n, out);
      if (!keep_graph) n->release_saved();
    }
    for (size_t i = 0; i < n->next_edges.size(); ++i) {
      const Edge& e = n->next_edges[i];
      if (!e.fn || !active.count(e.fn.get())) continue;
      if (i < out.size() && out[i].defined()) accumulate(buffers[e.fn.get()], e.input_nr, out[i]);
      if (--deps[e.fn.get()] == 0) ready.push_back(e.fn);
    }
  }
}

std::vector<Tensor> root_grads(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots) {
  TP_CHECK(grad_roots.empty() || grad_roots.size() == roots.size(), ValueError, "backward: got ",
           grad_roots.size(), " gradients for ", roots.size(), " tensors");
  std::vector<Tensor> grads;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    TP_CHECK(r.defined() && r.requires_grad(), Error, "element ", i,
             " of tensors does not require grad and does not have a grad_fn");
    if (i < grad_roots.size() && grad_roots[i].defined()) {
      const Tensor& g = grad_roots[i];
      TP_CHECK(g.sizes() == r.sizes(), ValueError, "backward: gradient ", i, " has shape ", shape_str(g.sizes()),
               " but output ", i, " has shape ", shape_str(r.sizes()));
      grads.push_back(g.dtype() == r.dtype() ? g : ops::to_dtype(g, r.dtype()));
    } else {
      TP_CHECK(r.numel() == 1, Error, "grad can be implicitly created only for scalar outputs, but output ", i,
               " has shape ", shape_str(r.sizes()), "; pass gradient= (a tensor of that shape) to backward()");
      // The seed lives on the root's device (ones_like follows it): a CPU seed
      // would be expanded by the first backward step into a CPU tensor beside CUDA ones.
      AutoGradMode no_grad(false);
      grads.push_back(ops::ones_like(r));
    }
  }
  return grads;
}

std::vector<Edge> edges_of(const std::vector<Tensor>& ts) {
  std::vector<Edge> edges;
  for (auto& t : ts) edges.push_back(gradient_edge(t));
  return edges;
}

}  // namespace

bool engine_accumulates() { return t_running_accumulates.empty() || t_running_accumulates.back(); }

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots, bool retain_graph,
              bool create_graph, const std::vector<Tensor>& inputs) {
  if (!inputs.empty()) {
    std::vector<Tensor> gs = grad(roots, inputs, grad_roots, retain_graph, true, create_graph);
    AutoGradMode mode(create_graph);
    for (size_t i = 0; i < inputs.size(); ++i)
      if (gs[i].defined()) accumulate_grad(inputs[i].impl_ptr(), gs[i]);
    return;
  }
  std::vector<Tensor> grads = root_grads(roots, grad_roots);
  run(edges_of(roots), grads, retain_graph || create_graph, create_graph, nullptr, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& roots, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_roots, bool retain_graph, bool allow_unused,
                         bool create_graph) {
  std::vector<Tensor> grads = root_grads(roots, grad_roots);
  for (size_t i = 0; i < inputs.size(); ++i)
    TP_CHECK(inputs[i].defined() && inputs[i].requires_grad(), Error, "autograd.grad: input ", i,
             " does not require grad (set requires_grad=True on it before computing the outputs)");
  std::vector<Edge> capture = edges_of(inputs);
  std::vector<Tensor> result(inputs.size());
  run(edges_of(roots), grads, retain_graph || create_graph, create_graph, &capture, &result);
  for (size_t i = 0; i < inputs.size(); ++i)
    TP_CHECK(result[i].defined() || allow_unused, Error, "autograd.grad: input ", i,
             " was not used to compute the outputs (its gradient would be None); "
             "pass allow_unused=True if that is expected");
  return result;
}

void set_requires_grad(const Tensor& t, bool requires_grad) {
  TP_CHECK(!t.impl()->grad_fn || requires_grad, Error,
           "you can only change requires_grad flags of leaf variables; use detach() to get a tensor without history");
  TP_CHECK(!requires_grad || is_floating(t.dtype()), TypeError,
           "only Tensors of floating point dtype can require gradients (got ", dtype_name(t.dtype()), ")");
  TP_CHECK(!requires_grad || !is_inference(t), Error,
           "requires_grad_: an inference tensor (created under tp.inference_mode) cannot require grad; clone() it "
           "outside inference_mode first");
  t.impl()->requires_grad = requires_grad;
  t.impl()->requires_grad_from_base = false;
}

std::shared_ptr<Node> grad_fn(const Tensor& t) {
  auto& fn = t.impl()->grad_fn;
  if (fn && fn->is_view()) refresh_view_history(t);
  return t.impl()->grad_fn;
}

Tensor detach(const Tensor& t) { return detached(t); }

Tensor data_alias(const Tensor& t) {
  Tensor d = detached(t);
  if (d.defined()) d.impl()->own_counter = std::make_shared<VersionCounter>();
  return d;
}

void set_data(const Tensor& x, const Tensor& src) {
  TensorImpl* impl = x.impl();
  const uint64_t v = impl->autograd_version();
  impl->storage = src.impl()->storage;
  impl->sizes = src.sizes();
  impl->strides = src.strides();
  impl->offset = src.offset();
  impl->dtype = src.dtype();
  impl->own_counter = std::make_shared<VersionCounter>(v);
}

void detach_(const Tensor& t) {
  TensorImpl* impl = t.impl();
  impl->grad_fn = nullptr;
  impl->output_nr = 0;
  impl->requires_grad = false;
}

void retain_grad(const Tensor& t) {
  TP_CHECK(t.requires_grad(), Error, "can't retain_grad on a Tensor that has requires_grad=False");
  TensorImpl* impl = t.impl();
  if (!impl->grad_fn || impl->retains_grad) return;  // leaves keep their grad anyway
  impl->retains_grad = true;
  impl->grad_fn->retained.push_back({impl->output_nr, t.impl_ptr()});
}

int64_t register_hook(const Tensor& t, GradHook fn, bool post_accumulate) {
  TP_CHECK(t.requires_grad(), Error, "cannot register a hook on a tensor that doesn't require gradient");
  int64_t id = next_hook_id();
  TensorImpl* impl = t.impl();
  if (post_accumulate) {
    TP_CHECK(!impl->grad_fn, Error, "post accumulate grad hooks cannot be registered on non-leaf tensors");
    meta(t).post_accumulate_hooks.push_back({id, std::move(fn)});
  } else if (impl->grad_fn) {
    impl->grad_fn->pre_hooks.push_back({impl->output_nr, {id, std::move(fn)}});
  } else {
    meta(t).hooks.push_back({id, std::move(fn)});
  }
  return id;
}

HookOwner hook_owner(const Tensor& t) {
  if (t.impl()->grad_fn) return {t.impl()->grad_fn, {}};
  meta(t);
  return {{}, t.impl()->autograd_meta};
}

void remove_hook(const HookOwner& owner, int64_t id) {
  if (auto n = owner.node.lock()) {
    auto& v = n->pre_hooks;
    v.erase(std::remove_if(v.begin(), v.end(), [id](auto& p) { return p.second.id == id; }), v.end());
  }
  if (auto m = owner.meta.lock()) {
    for (auto* v : {&m->hooks, &m->post_accumulate_hooks})
      v->erase(std::remove_if(v->begin(), v->end(), [id](auto& h) { return h.id == id; }), v->end());
  }
}

void set_anomaly_enabled(bool enabled) { g_anomaly.store(enabled); }
bool anomaly_enabled() { return g_anomaly.load(); }

std::shared_ptr<Node> record_function(const std::string& name, const std::vector<Tensor>& inputs,
                                      std::vector<Tensor>& outputs, FunctionNode::Fn fn,
                                      const std::vector<bool>& non_differentiable) {
  auto node = std::make_shared<FunctionNode>(name, std::move(fn));
  for (auto& t : inputs) {
    node->next_edges.push_back(gradient_edge(t));
    node->input_shapes.push_back(t.defined() ? t.sizes() : Shape{});
    node->input_dtypes.push_back(t.defined() ? t.dtype() : DType::Float32);
  }
  node->num_outputs = static_cast<uint32_t>(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& o = outputs[i];
    if (!o.defined() || !is_floating(o.dtype())) continue;
    if (i < non_differentiable.size() && non_differentiable[i]) continue;
    set_history(o, node, static_cast<uint32_t>(i));
  }
  return node;
}

}  // namespace tp::autograd
