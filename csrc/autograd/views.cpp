#include "autograd/views.h"

#include <algorithm>

#include "ops/ops.h"

namespace tp::autograd {
namespace {

// A view operator call (not Tensor::as_strided): with create_graph the write of
// the gradient into the region is recorded through the view (buf gets the
// history), and under forward AD (jacfwd of grad) buf gets the tangent written
// into the region, as with any write through a view.
Tensor region_of(const Tensor& buf, const Geometry& base, const Geometry& view) {
  return ops::as_strided(buf, view.sizes, view.strides, buf.offset() + view.offset - base.offset);
}

bool is_stale(const Tensor& t) {
  Node* n = t.impl()->grad_fn.get();
  if (auto* v = dynamic_cast<ViewOfBaseNode*>(n)) return v->version_ != t.autograd_version();
  auto* o = dynamic_cast<OpNode*>(n);
  return o && !o->released() && !o->saved_inputs.empty() && o->saved_inputs[0].version() != t.autograd_version();
}

}  // namespace

ViewOfBaseNode::ViewOfBaseNode(Tensor base, Geometry view, uint64_t version)
    : base_(std::move(base)), version_(version), geo_(Geometry::of(base_)), view_(std::move(view)) {}

ViewOfBaseNode::~ViewOfBaseNode() {
  std::vector<std::shared_ptr<Node>> held;
  release_children(held);
  for (auto& n : held) next_edges.push_back({std::move(n), 0});
}

void ViewOfBaseNode::release_children(std::vector<std::shared_ptr<Node>>& out) {
  Node::release_children(out);
  if (base_.defined() && base_.impl_ptr().use_count() == 1 && base_.impl()->grad_fn)
    out.push_back(std::move(base_.impl()->grad_fn));
}

std::vector<Tensor> ViewOfBaseNode::apply(const std::vector<Tensor>& g) {
  Tensor buf = Tensor::empty_strided(geo_.sizes, geo_.strides, g[0].dtype());
  ops::zero_(buf);
  Tensor r = region_of(buf, geo_, view_);
  ops::copy_(r, g[0]);
  return {buf};
}

std::vector<Tensor> CopySlices::apply(const std::vector<Tensor>& grad_outputs) {
  const Tensor& g = grad_outputs[0];
  Tensor buf = Tensor::empty_strided(base_.sizes, base_.strides, g.dtype());
  ops::copy_(buf, g);
  Tensor region = region_of(buf, base_, view_);
  std::vector<Tensor> inner = OpNode::apply({ops::clone(region)});
  if (inner[0].defined()) ops::copy_(region, inner[0]);
  else ops::zero_(region);
  inner[0] = buf;
  return inner;
}

void link_views(const OpDef& op, const Tensor& input, const std::vector<Tensor>& outputs) {
  if (!op.has(kView) || !input.defined()) return;
  Tensor base = view_base(input);
  if (!base.defined()) base = input;
  for (auto& o : outputs)
    if (o.defined() && is_floating(o.dtype()) && o.impl() != input.impl()) {
      meta(o).view_base = base;
      o.impl()->no_grad_view = input.impl()->no_grad_view;  // a view of such a view is one too
    }
}

void note_view_base(const Tensor& input, const std::vector<Tensor>& outputs) {
  if (!input.defined()) return;
  TensorImpl* in = input.impl();
  const std::shared_ptr<TensorImpl>& base = in->view_base ? in->view_base : input.impl_ptr();
  for (auto& o : outputs)
    // view(dtype) to another dtype is no view for PyTorch's _base (None there)
    if (o.defined() && o.impl() != in && o.impl() != base.get() && o.impl()->storage == in->storage &&
        !o.impl()->view_base && o.dtype() == input.dtype()) {
      o.impl()->view_base = base;
      if (in->view_base) o.impl()->base_py = in->base_py;  // the root's Python object, when known
    }
}

void mark_no_grad_views(const Tensor& input, const std::vector<Tensor>& outputs) {
  if (!input.defined()) return;
  const uint8_t kind = std::max<uint8_t>(input.impl()->no_grad_view, input.requires_grad() ? 2 : 1);
  const bool from_base = input.requires_grad();
  for (auto& o : outputs)
    if (o.defined() && is_floating(o.dtype()) && o.impl() != input.impl()) {
      o.impl()->no_grad_view = kind;
      if (from_base && !o.impl()->requires_grad) {
        o.impl()->requires_grad = true;
        o.impl()->requires_grad_from_base = true;
      }
    }
}

bool adopt_base_history(const std::vector<Tensor>& inputs) {
  bool any = false;
  for (auto& t : inputs) {
    const AutogradMeta* m = meta_if(t);
    if (m && m->view_base.defined() && !t.requires_grad() && m->view_base.requires_grad())
      set_view_history(t, m->view_base);
    any = any || (t.defined() && t.requires_grad());
  }
  return any;
}

void set_view_history(const Tensor& t, const Tensor& base) {
  auto node = std::make_shared<ViewOfBaseNode>(base, Geometry::of(t), t.autograd_version());
  node->next_edges.push_back(gradient_edge(base));
  set_history(t, node, 0);
}

void refresh_view_history(const Tensor& t) {
  if (!is_stale(t)) return;
  Tensor base = view_base(t);
  if (base.defined() && base.requires_grad()) set_view_history(t, base);
}

}  // namespace tp::autograd
