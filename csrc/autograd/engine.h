#pragma once
#include <vector>

#include "autograd/node.h"
#include "core/tensor.h"

namespace tp::autograd {

// Installs the recording hook into the dispatcher (idempotent).
void install();
// Tests only: nodes of `op` recorded from now on keep `*forced` instead of what
// OpDef::saved declares (null: back to the declaration).
void set_saved_override(const OpDef& op, const SavedSet* forced);

// Backpropagates from `roots` (with `grad_roots`; undefined = ones for one-element
// roots) into the .grad of the leaves. create_graph records the backward pass
// itself (higher-order derivatives).
// With `inputs`, only their .grad is written (leaves or not).
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots, bool retain_graph,
              bool create_graph = false, const std::vector<Tensor>& inputs = {});
// False while the innermost engine call on this thread is grad() (or
// backward(inputs=)): gradients then flow only to the requested inputs, so a
// node that runs a backward of its own (tp.utils.checkpoint) cannot deliver
// what it computes for other leaves.
bool engine_accumulates();
// Returns d(roots)/d(inputs) without touching .grad (tp.autograd.grad).
std::vector<Tensor> grad(const std::vector<Tensor>& roots, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_roots, bool retain_graph, bool allow_unused,
                         bool create_graph = false);

// Anomaly detection (tp.autograd.detect_anomaly): while on, every backward node's
// gradients are checked and a NaN raises an error naming the node (its forward op).
void set_anomaly_enabled(bool enabled);
bool anomaly_enabled();

void set_requires_grad(const Tensor& t, bool requires_grad);  // leaves only
// t's history (a view's is regenerated first if its memory was written since).
std::shared_ptr<Node> grad_fn(const Tensor& t);
Tensor detach(const Tensor& t);
// `x.data`: detach() with a version counter of its own, so that writes through
// it (p.data.mul_(0.9)) do not invalidate what autograd saved of x.
Tensor data_alias(const Tensor& t);
// `x.data = src`: x takes src's memory, sizes, strides and dtype; its object,
// requires_grad, history and version count stay (later writes to src are not
// counted for x).
void set_data(const Tensor& x, const Tensor& src);
void detach_(const Tensor& t);
void retain_grad(const Tensor& t);
// Tensor.register_hook: returns the id for remove_hook. `post_accumulate` hooks
// (leaves only) run after .grad was updated and receive the leaf.
int64_t register_hook(const Tensor& t, GradHook fn, bool post_accumulate = false);
// The hook holder of a registration (a node or a leaf's meta), kept weakly by handles.
struct HookOwner {
  std::weak_ptr<Node> node;
  std::weak_ptr<AutogradMeta> meta;
};
HookOwner hook_owner(const Tensor& t);
void remove_hook(const HookOwner& owner, int64_t id);

// Gives `outputs` a FunctionNode over `inputs` (tp.autograd.Function.apply);
// non_differentiable[i] leaves output i without history.
std::shared_ptr<Node> record_function(const std::string& name, const std::vector<Tensor>& inputs,
                                      std::vector<Tensor>& outputs, FunctionNode::Fn fn,
                                      const std::vector<bool>& non_differentiable);

// inference_mode: grad mode off, and new tensors are marked as inference tensors
// (which may not take part in autograd later).
bool inference_mode_enabled();
void set_inference_mode(bool enabled);

}  // namespace tp::autograd
