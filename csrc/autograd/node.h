// The backward graph: one Node per differentiable operator call, pointing at
// the Nodes that produced its inputs (edges). Leaves that require grad end in
// their AccumulateGrad node, which writes .grad.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/saved_hooks.h"
#include "ops/registry.h"

namespace tp::autograd {

class Node;
struct Edge {
  std::shared_ptr<Node> fn;  // null: this input needs no gradient
  uint32_t input_nr = 0;     // which output of `fn` this edge feeds
};

// A tensor hook: sees the gradient of a tensor and may return a replacement
// (an undefined result keeps the gradient as it is).
using GradHook = std::function<Tensor(const Tensor&)>;
struct HookEntry {
  int64_t id;
  GradHook fn;
};
int64_t next_hook_id();

// The autograd state of a tensor that needs more than requires_grad/grad_fn;
// allocated on demand (TensorImpl::autograd_meta).
struct AutogradMeta {
  std::vector<HookEntry> hooks;                    // leaf tensors: run before accumulation
  std::vector<HookEntry> post_accumulate_hooks;    // leaf tensors: run after .grad was updated
  std::weak_ptr<Node> grad_accumulator;            // leaf tensors: the one AccumulateGrad
  bool inference = false;                          // created under inference_mode
  // A view made in grad mode: the tensor owning the memory (held, like PyTorch's
  // `_base`), so that a write through the view can give the base its history.
  Tensor view_base;
  // A saved tensor that was modified in place after it was saved carries the
  // error to raise when a derivative formula actually uses it.
  std::string stale_error;
  // The binding's Python object for this tensor's .grad (opaque here), so that
  // reading .grad twice gives the same object while .grad is the same tensor.
  // Dropped whenever .grad is replaced (drop_grad_wrapper), not to keep the old
  // gradient's memory alive.
  std::shared_ptr<void> grad_wrapper;
};
AutogradMeta& meta(const Tensor& t);  // creates it if missing
inline const AutogradMeta* meta_if(const Tensor& t) { return t.defined() ? t.impl()->autograd_meta.get() : nullptr; }
inline void drop_grad_wrapper(TensorImpl& impl) {
  if (impl.autograd_meta) impl.autograd_meta->grad_wrapper.reset();
}
inline bool is_inference(const Tensor& t) {
  auto* m = meta_if(t);
  return m && m->inference;
}

class Node : public std::enable_shared_from_this<Node> {
 public:
  // Frees the graph below iteratively: a chain of 10^5+ nodes would otherwise
  // overflow the stack with nested destructors.
  virtual ~Node();
  // Moves out every node this one keeps alive (edges, histories of saved tensors
  // only it holds), so that destroying it recurses no further.
  virtual void release_children(std::vector<std::shared_ptr<Node>>& out);
  // grads w.r.t. this node's outputs -> grads w.r.t. its inputs (one per edge)
  virtual std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) = 0;
  virtual std::string name() const = 0;
  virtual void release_saved() {}
  // Whether the outputs alias input 0 (a view op): their history is regenerated
  // when the shared memory is written (views.h).
  virtual bool is_view() const { return false; }
  std::vector<Edge> next_edges;
  uint32_t num_outputs = 1;
  // Hooks of non-leaf tensors this node produced, per output (Tensor.register_hook).
  std::vector<std::pair<uint32_t, HookEntry>> pre_hooks;
  // Non-leaf tensors that asked for retain_grad(), per output.
  std::vector<std::pair<uint32_t, std::weak_ptr<TensorImpl>>> retained;
  // Runs the hooks and retain_grad for the incoming gradients (before apply).
  virtual void run_pre_hooks(std::vector<Tensor>& grad_outputs);
  // Before the pre-hooks: `captured` are the outputs whose gradient autograd.grad
  // returns. A node whose outputs' gradients are not all they are in eager (a
  // compiled region: the gradient of one result computed from another does not
  // pass through it) refuses to let them be observed.
  virtual void check_observed(const std::vector<Tensor>& /*grad_outputs*/, const std::vector<uint32_t>& /*captured*/) {}
};

// The storage of every placeholder for a value autograd did not keep
// (OpDef::saved): zero bytes at this tag's address. The dispatcher hook refuses
// such a tensor as an operator argument (unkept_error names the node and value).
inline char unkept_tag = 0;
inline bool is_unkept(const Tensor& t) {
  const StorageImpl* s = t.impl()->storage.get();
  return s && s->data() == &unkept_tag;
}
std::string unkept_error(const OpDef& op, const Tensor& t);

// A tensor saved for backward. Inputs are held as themselves (so a formula run
// with create_graph=True connects to their history); outputs of the node that
// saves them are held without history (to avoid a cycle) and get it back on
// unpack. The version at save time detects later in-place writes.
// A value the formula does not read (OpDef::saved) is not held: only its
// metadata is kept, and unpack gives a storage-less placeholder whose sizes,
// strides, dtype and device are right and which the dispatcher refuses as an
// operator argument (is_unkept), naming the declaration.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, bool is_output, bool hold = true);
  Tensor unpack(const std::shared_ptr<Node>& owner) const;
  void reset() {
    data_ = Tensor();
    packed_.reset();
  }
  bool defined() const { return data_.defined() || packed_; }
  bool held() const { return data_.defined() || packed_; }
  bool is_placeholder() const { return placeholder_; }  // a defined value kept as metadata only
  const Tensor& raw() const { return data_; }  // no version check, no history restored; undefined if not held
  void release_history(std::vector<std::shared_ptr<Node>>& out);  // see Node::release_children
  uint64_t version() const { return version_; }  // when saved

 private:
  Tensor data_;
  bool is_output_ = false;
  bool placeholder_ = false;
  uint32_t output_nr_ = 0;
  bool requires_grad_ = false;
  uint64_t version_ = 0;
  // Placeholders only: the value's metadata.
  TensorMeta meta_;
  int64_t offset_ = 0;
  // Saved-tensor hooks were installed at save time (saved_hooks.h): the packed
  // value stands for data_, which is not kept; no version check is possible.
  std::shared_ptr<PackedSaved> packed_;
};

// Backward of a registry operator: calls its OpDef::backward. For an in-place
// operator the formula is that of its out-of-place twin, and inputs[0] is the
// value before the write (saved as a copy).
class OpNode : public Node {
 public:
  OpNode(const OpDef& op, const BackwardFn fn, Attrs attrs) : op_(op), fn_(fn), attrs_(std::move(attrs)) {}
  ~OpNode() override;
  void release_children(std::vector<std::shared_ptr<Node>>& out) override;
  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) override;
  std::string name() const override;
  void release_saved() override;
  const OpDef& op() const { return op_; }
  bool is_view() const override { return op_.has(kView); }
  bool released() const { return released_; }
  std::vector<SavedTensor> saved_inputs, saved_outputs;
  std::vector<Shape> input_shapes;
  std::vector<DType> input_dtypes;

 private:
  const OpDef& op_;
  BackwardFn fn_;
  Attrs attrs_;
  bool released_ = false;
};

// Backward of a user-defined tp.autograd.Function (or any callable).
class FunctionNode : public Node {
 public:
  using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  FunctionNode(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) override;
  std::string name() const override { return name_; }
  void release_saved() override { released_ = true; }
  std::vector<Shape> input_shapes;
  std::vector<DType> input_dtypes;

 private:
  std::string name_;
  Fn fn_;
  bool released_ = false;
};

class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf_(leaf) {}
  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) override;
  std::string name() const override { return "AccumulateGrad"; }
  void run_pre_hooks(std::vector<Tensor>& grad_outputs) override;  // the leaf's tensor hooks
  std::weak_ptr<TensorImpl> leaf_;
};

// Adds `grad` into t.grad (what AccumulateGrad and backward(inputs=) do), then
// runs the post-accumulate hooks.
void accumulate_grad(const std::shared_ptr<TensorImpl>& t, const Tensor& grad);
// Detached alias: same storage, no autograd history.
Tensor detached(const Tensor& t);
// The edge a tensor contributes as an input of a new Node.
Edge gradient_edge(const Tensor& t);
// Gives `t` (a result of `node`'s output `nr`) its history.
void set_history(const Tensor& t, const std::shared_ptr<Node>& node, uint32_t nr);
// Checks a gradient for `t`'s shape and casts it to t's dtype.
Tensor fit_grad(const Tensor& g, const Shape& shape, DType dtype, const std::string& who);

}  // namespace tp::autograd
