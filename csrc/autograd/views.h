// Autograd for writes through views. A tensor's memory may be shared by a base
// and its views; an in-place write through a view changes the base, so the
// base's history is rebased onto a CopySlices node, and every view's history
// is regenerated from the base (ViewOfBaseNode) the next time it is used.
#pragma once
#include "autograd/node.h"

namespace tp::autograd {

// Where a view lies in its storage.
struct Geometry {
  Shape sizes, strides;
  int64_t offset = 0;
  static Geometry of(const Tensor& t) { return {t.sizes(), t.strides(), t.offset()}; }
};

// d(view)/d(base): the view's gradient placed into its region of a zero tensor shaped like the base.
class ViewOfBaseNode : public Node {
 public:
  ViewOfBaseNode(Tensor base, Geometry view, uint64_t version);
  std::vector<Tensor> apply(const std::vector<Tensor>& g) override;
  std::string name() const override { return "AsStridedBackward0"; }
  bool is_view() const override { return true; }
  ~ViewOfBaseNode() override;
  void release_children(std::vector<std::shared_ptr<Node>>& out) override;
  Tensor base_;
  uint64_t version_;  // of the storage when this history was made

 private:
  Geometry geo_, view_;
};

// The base's history after an in-place op wrote through a view: the view's
// region of the gradient goes through the op's derivative, the rest passes.
class CopySlices : public OpNode {
 public:
  CopySlices(const OpDef& op, BackwardFn fn, Attrs attrs, const Tensor& base, const Tensor& view)
      : OpNode(op, fn, std::move(attrs)), base_(Geometry::of(base)), view_(Geometry::of(view)) {}
  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) override;
  std::string name() const override { return "CopySlices"; }
  bool is_view() const override { return false; }

 private:
  Geometry base_, view_;
};

// The tensor whose memory view `t` reads (undefined if t is no view made in grad mode).
inline Tensor view_base(const Tensor& t) {
  const AutogradMeta* m = meta_if(t);
  return m ? m->view_base : Tensor();
}
// Remembers the base of each output of view op `op` (called in grad mode).
void link_views(const OpDef& op, const Tensor& input, const std::vector<Tensor>& outputs);
// Tensor._base of each output of view op `op` that shares the input's memory
// (every dtype and grad mode): the input's own base, or the input.
void note_view_base(const Tensor& input, const std::vector<Tensor>& outputs);
// Views made with grad mode off: marked (TensorImpl::no_grad_view) so that an
// in-place write through them with grad mode on raises, as in PyTorch (whether
// the write should be recorded, and for which base, is ambiguous).
void mark_no_grad_views(const Tensor& input, const std::vector<Tensor>& outputs);
// A view of a base that gained history after the view was made takes it up;
// returns whether any input now requires grad.
bool adopt_base_history(const std::vector<Tensor>& inputs);
// Gives view `t` the history "region of `base`".
void set_view_history(const Tensor& t, const Tensor& base);
// If the storage of view `t` was written since its history was made, regenerates it from its base.
void refresh_view_history(const Tensor& t);

}  // namespace tp::autograd
