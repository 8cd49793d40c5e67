#include "autograd/node.h"

#include "core/grad_mode.h"
#include "ops/ops.h"

namespace tp::autograd {

Tensor detached(const Tensor& t) {
  if (!t.defined()) return t;
  auto impl = std::make_shared<TensorImpl>();
  const TensorImpl& src = *t.impl();
  impl->storage = src.storage;
  impl->sizes = src.sizes;
  impl->strides = src.strides;
  impl->offset = src.offset;
  impl->dtype = src.dtype;
  impl->wrapped_number = src.wrapped_number;
  return Tensor(std::move(impl));
}

Edge gradient_edge(const Tensor& t) {
  TensorImpl* impl = t.impl();
  if (!impl->requires_grad) return {};
  if (impl->grad_fn) return {impl->grad_fn, impl->output_nr};
  // A leaf: one AccumulateGrad per leaf, kept alive by the graph that uses it.
  return {std::make_shared<AccumulateGrad>(t.impl_ptr()), 0};
}

std::vector<Tensor> OpNode::apply(const std::vector<Tensor>& grad_outputs) {
  TP_CHECK(!released_, Error, "Trying to backward through the graph a second time (", name(),
           "); specify retain_graph=True if you need to backward twice");
  std::vector<bool> needs(next_edges.size());
  for (size_t i = 0; i < next_edges.size(); ++i) needs[i] = next_edges[i].fn != nullptr;
  BackwardArgs args{saved_inputs, saved_outputs, grad_outputs, attrs_, needs};
  std::vector<Tensor> grads = op_.backward(args);
  grads.resize(next_edges.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined() || !needs[i]) continue;
    // A gradient has its input's shape and dtype (broadcast and promotion undone).
    if (grads[i].sizes() != input_shapes[i]) grads[i] = ops::sum_to(grads[i], input_shapes[i]);
    if (grads[i].dtype() != input_dtypes[i] && is_floating(input_dtypes[i]))
      grads[i] = ops::to_dtype(grads[i], input_dtypes[i]);
  }
  return grads;
}

void OpNode::release_saved() {
  saved_inputs.clear();
  saved_outputs.clear();
  released_ = true;
}

std::vector<Tensor> AccumulateGrad::apply(const std::vector<Tensor>& grad_outputs) {
  auto leaf = leaf_.lock();
  if (!leaf || !grad_outputs[0].defined()) return {};
  Tensor g = detached(grad_outputs[0]);
  if (!leaf->grad) {
    // Own the memory: later in-place accumulation must not write into a tensor the user holds.
    leaf->grad = ops::clone(g).impl_ptr();
  } else {
    Tensor acc(leaf->grad);
    ops::add_(acc, g);
  }
  return {};
}

}  // namespace tp::autograd
