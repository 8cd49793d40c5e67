#include "autograd/engine.h"

#include <unordered_map>
#include <unordered_set>

#include "autograd/node.h"
#include "core/grad_mode.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace tp::autograd {
namespace {

// Called by the dispatcher after an operator ran with grad mode on and at least
// one input requiring grad.
void record(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs, std::vector<Tensor>& outputs) {
  if (!op.backward) {
    // Non-differentiable (comparisons, factories): results simply do not require grad.
    return;
  }
  if (op.has(kInplace)) {
    throw Error(str(op.name, ": in-place operation on a tensor that requires grad is not supported"));
  }
  auto node = std::make_shared<OpNode>(op, attrs);
  node->num_outputs = static_cast<uint32_t>(outputs.size());
  for (auto& t : inputs) {
    if (!t.defined()) {  // an absent optional argument (Tensor? in the schema)
      node->next_edges.push_back(Edge{});
      node->saved_inputs.push_back(Tensor());
      node->input_shapes.push_back({});
      node->input_dtypes.push_back(DType::Float32);
      continue;
    }
    node->next_edges.push_back(gradient_edge(t));
    node->saved_inputs.push_back(detached(t));
    node->input_shapes.push_back(t.sizes());
    node->input_dtypes.push_back(t.dtype());
  }
  for (uint32_t i = 0; i < outputs.size(); ++i) {
    node->saved_outputs.push_back(detached(outputs[i]));
    // Outputs of views alias the input's storage but get their own autograd identity.
    auto* impl = outputs[i].impl();
    if (!is_floating(impl->dtype)) continue;
    impl->requires_grad = true;
    impl->grad_fn = node;
    impl->output_nr = i;
  }
}

// Every node reachable from `roots`, each once (explicit DFS: graphs can be deep).
std::vector<Node*> reachable(const std::vector<Edge>& roots) {
  std::vector<Node*> order, stack;
  std::unordered_set<Node*> seen;
  for (auto& e : roots)
    if (e.fn && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    order.push_back(n);
    for (auto& e : n->next_edges)
      if (e.fn && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  }
  return order;
}

struct GraphTask {
  std::unordered_map<Node*, int> dependencies;
  std::unordered_map<Node*, std::vector<Tensor>> input_buffers;
};

void accumulate(std::vector<Tensor>& slot_list, uint32_t nr, const Tensor& g) {
  if (slot_list.size() <= nr) slot_list.resize(nr + 1);
  Tensor& slot = slot_list[nr];
  slot = slot.defined() ? ops::add(slot, g) : g;
}

// Runs the backward graph from the given root edges. `capture` (optional) maps
// nodes whose incoming grads should be returned instead of applied (autograd.grad).
void run(const std::vector<Edge>& roots, const std::vector<Tensor>& grads, bool retain_graph,
         std::unordered_map<Node*, Tensor>* capture) {
  AutoGradMode no_grad(false);
  GraphTask task;
  for (Node* n : reachable(roots))
    for (auto& e : n->next_edges)
      if (e.fn) task.dependencies[e.fn.get()]++;
  std::vector<std::shared_ptr<Node>> ready;
  for (size_t i = 0; i < roots.size(); ++i) {
    if (!roots[i].fn) continue;
    accumulate(task.input_buffers[roots[i].fn.get()], roots[i].input_nr, grads[i]);
  }
  for (auto& e : roots)
    if (e.fn && task.dependencies[e.fn.get()] == 0) {
      bool dup = false;
      for (auto& r : ready) dup |= r == e.fn;
      if (!dup) ready.push_back(e.fn);
    }
  while (!ready.empty()) {
    std::shared_ptr<Node> n = ready.back();
    ready.pop_back();
    std::vector<Tensor> in = std::move(task.input_buffers[n.get()]);
    task.input_buffers.erase(n.get());
    in.resize(n->num_outputs);
    std::vector<Tensor> out;
    if (capture && capture->count(n.get())) {
      (*capture)[n.get()] = in.empty() ? Tensor() : in[0];
    } else {
      out = n->apply(in);
      if (!retain_graph) n->release_saved();
    }
    for (size_t i = 0; i < n->next_edges.size(); ++i) {
      const Edge& e = n->next_edges[i];
      if (!e.fn) continue;
      if (i < out.size() && out[i].defined()) accumulate(task.input_buffers[e.fn.get()], e.input_nr, out[i]);
      if (--task.dependencies[e.fn.get()] == 0) ready.push_back(e.fn);
    }
  }
}

std::vector<Tensor> root_grads(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots) {
  std::vector<Tensor> grads;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    TP_CHECK(r.requires_grad(), Error,
             "element ", i, " of tensors does not require grad and does not have a grad_fn");
    if (i < grad_roots.size() && grad_roots[i].defined()) {
      TP_CHECK(grad_roots[i].sizes() == r.sizes(), ValueError, "backward: gradient has shape ",
               shape_str(grad_roots[i].sizes()), " but the output has shape ", shape_str(r.sizes()));
      grads.push_back(grad_roots[i]);
    } else {
      TP_CHECK(r.numel() == 1, Error, "grad can be implicitly created only for scalar outputs (got shape ",
               shape_str(r.sizes()), ")");
      grads.push_back(ops::ones(r.sizes(), r.dtype()));
    }
  }
  return grads;
}

}  // namespace

void install() { set_autograd_recorder(&record); }

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots, bool retain_graph) {
  std::vector<Tensor> grads = root_grads(roots, grad_roots);
  std::vector<Edge> edges;
  for (auto& r : roots) edges.push_back(gradient_edge(r));
  run(edges, grads, retain_graph, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& roots, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_roots, bool retain_graph, bool allow_unused) {
  std::vector<Tensor> grads = root_grads(roots, grad_roots);
  std::vector<Edge> edges;
  for (auto& r : roots) edges.push_back(gradient_edge(r));
  // Leaves get a fresh AccumulateGrad each time gradient_edge is called, so
  // capture grads of inputs by intercepting the nodes their uses point at.
  std::unordered_map<Node*, Tensor> capture;
  std::vector<std::vector<Node*>> input_nodes(inputs.size());
  // Find the AccumulateGrad nodes of each leaf input.
  for (Node* n : reachable(edges)) {
    if (auto* acc = dynamic_cast<AccumulateGrad*>(n)) {
      auto leaf = acc->leaf_.lock();
      for (size_t i = 0; i < inputs.size(); ++i)
        if (leaf.get() == inputs[i].impl()) { input_nodes[i].push_back(n); capture[n] = Tensor(); }
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    TP_CHECK(inputs[i].impl()->grad_fn == nullptr, Error,
             "autograd.grad: only leaf tensors are supported as inputs in this version");
  run(edges, grads, retain_graph, &capture);
  std::vector<Tensor> result(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (Node* n : input_nodes[i]) {
      const Tensor& g = capture[n];
      if (g.defined()) result[i] = result[i].defined() ? ops::add(result[i], g) : g;
    }
    TP_CHECK(result[i].defined() || allow_unused, Error,
             "One of the differentiated Tensors appears to not have been used in the graph. "
             "Set allow_unused=True if this is the desired behavior.");
  }
  return result;
}

void set_requires_grad(const Tensor& t, bool requires_grad) {
  TP_CHECK(!t.impl()->grad_fn || requires_grad, Error,
           "you can only change requires_grad flags of leaf variables");
  TP_CHECK(!requires_grad || is_floating(t.dtype()), TypeError,
           "only Tensors of floating point dtype can require gradients (got ", dtype_name(t.dtype()), ")");
  t.impl()->requires_grad = requires_grad;
}

Tensor detach(const Tensor& t) { return detached(t); }

}  // namespace tp::autograd
