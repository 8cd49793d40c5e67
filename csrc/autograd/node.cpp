#include "autograd/node.h"

#include "autograd/forward_ad.h"
#include "autograd/views.h"

#include <atomic>
#include <cctype>

#include "core/grad_mode.h"
#include "ops/ops.h"

namespace tp::autograd {

int64_t next_hook_id() {
  static std::atomic<int64_t> id{0};
  return ++id;
}

AutogradMeta& meta(const Tensor& t) {
  auto& m = t.impl()->autograd_meta;
  if (!m) m = std::make_shared<AutogradMeta>();
  return *m;
}

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
  impl->own_counter = src.own_counter;  // detach() shares the version counter
  // An alias of an inference tensor is one too (PyTorch: detach keeps the kind).
  if (is_inference(t)) meta(Tensor(impl)).inference = true;
  return Tensor(std::move(impl));
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined()) return {};
  TensorImpl* impl = t.impl();
  if (!impl->requires_grad) return {};
  if (impl->grad_fn && impl->grad_fn->is_view()) refresh_view_history(t);
  if (impl->grad_fn) return {impl->grad_fn, impl->output_nr};
  if (impl->requires_grad_from_base) return {};  // a no_grad view: the gradient stops here
  // One AccumulateGrad per leaf while a graph uses it, so that hooks and
  // autograd.grad see a single node for every use of the leaf.
  AutogradMeta& m = meta(t);
  std::shared_ptr<Node> acc = m.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    m.grad_accumulator = acc;
  }
  return {acc, 0};
}

void set_history(const Tensor& t, const std::shared_ptr<Node>& node, uint32_t nr) {
  TensorImpl* impl = t.impl();
  impl->requires_grad = true;
  impl->grad_fn = node;
  impl->output_nr = nr;
}

Tensor fit_grad(const Tensor& g, const Shape& shape, DType dtype, const std::string& who) {
  Tensor r = g;
  if (r.sizes() != shape) {
    bool expandable = false;
    try {
      expandable = broadcast_shapes(shape, r.sizes(), "backward") == r.sizes();
    } catch (const Error&) {
    }
    TP_CHECK(expandable, ValueError, who, ": got a gradient of shape ", shape_str(r.sizes()),
             " for a tensor of shape ", shape_str(shape));
    r = ops::sum_to(r, shape);
  }
  if (r.dtype() != dtype && is_floating(dtype)) r = ops::to_dtype(r, dtype);
  return r;
}

Node::~Node() {
  std::vector<std::shared_ptr<Node>> stack;
  for (auto& e : next_edges)
    if (e.fn) stack.push_back(std::move(e.fn));
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    if (n.use_count() == 1) n->release_children(stack);
    // n dies here with nothing left below it
  }
}

void Node::release_children(std::vector<std::shared_ptr<Node>>& out) {
  for (auto& e : next_edges)
    if (e.fn) out.push_back(std::move(e.fn));
}

void SavedTensor::release_history(std::vector<std::shared_ptr<Node>>& out) {
  if (data_.defined() && data_.impl_ptr().use_count() == 1 && data_.impl()->grad_fn)
    out.push_back(std::move(data_.impl()->grad_fn));
}

OpNode::~OpNode() {
  // The saved tensors die after this body; hand their histories to ~Node's loop.
  std::vector<std::shared_ptr<Node>> held;
  for (auto* v : {&saved_inputs, &saved_outputs})
    for (auto& s : *v) s.release_history(held);
  for (auto& n : held) next_edges.push_back({std::move(n), 0});
}

void OpNode::release_children(std::vector<std::shared_ptr<Node>>& out) {
  Node::release_children(out);
  for (auto* v : {&saved_inputs, &saved_outputs})
    for (auto& s : *v) s.release_history(out);
}

void Node::run_pre_hooks(std::vector<Tensor>& g) {
  for (auto& [nr, h] : pre_hooks) {
    if (nr >= g.size() || !g[nr].defined()) continue;
    Tensor r = h.fn(g[nr]);
    if (!r.defined()) continue;
    TP_CHECK(r.sizes() == g[nr].sizes(), ValueError, "hook registered on an output of ", name(),
             " returned a gradient of shape ", shape_str(r.sizes()), " but the gradient has shape ",
             shape_str(g[nr].sizes()));
    g[nr] = r;
  }
  for (auto& [nr, w] : retained) {
    auto impl = w.lock();
    if (!impl || nr >= g.size() || !g[nr].defined()) continue;
    Tensor gi = GradMode::is_enabled() ? g[nr] : detached(g[nr]);
    impl->grad = impl->grad ? ops::add(Tensor(impl->grad), gi).impl_ptr() : ops::clone(gi).impl_ptr();
    drop_grad_wrapper(*impl);
  }
}

SavedTensor::SavedTensor(const Tensor& t, bool is_output, bool hold) : is_output_(is_output) {
  if (!t.defined()) return;
  version_ = t.autograd_version();
  if (!hold) {
    placeholder_ = true;
    meta_ = t.meta();
    offset_ = t.offset();
    output_nr_ = is_output ? t.impl()->output_nr : 0;
    return;
  }
  if (is_output) {
    // The output's grad_fn is the node saving it: keep no history (no cycle).
    data_ = detached(t);
    output_nr_ = t.impl()->output_nr;
    requires_grad_ = t.requires_grad();
  } else {
    data_ = t;
  }
  // A Python number lifted to a 0-d tensor is not a tensor the user saved: not packed.
  if (SavedHooks* hooks = current_saved_hooks(); hooks && !data_.is_wrapped_number()) {
    packed_ = hooks->pack(data_);
    data_ = Tensor();
  }
}

namespace {
// Shared by all placeholders of a device (no data; the tag marks them).
std::shared_ptr<StorageImpl> unkept_storage(Device device) {
  if (device.kind == Device::Kind::CPU) {
    static const std::shared_ptr<StorageImpl> cpu = StorageImpl::wrap(&unkept_tag, 0, [] {}, Device::cpu());
    return cpu;
  }
  return StorageImpl::wrap(&unkept_tag, 0, [] {}, device);
}

// The formula OpNode::apply is running on this thread, for unkept_error.
struct ApplyContext {
  const OpNode* node;
  const std::vector<Tensor>* ins;
  const std::vector<Tensor>* outs;
};
thread_local const ApplyContext* t_apply = nullptr;
}  // namespace

std::string unkept_error(const OpDef& op, const Tensor& t) {
  std::string what = "a saved value";
  std::string node = "a backward node", decl = "its operator";
  if (const ApplyContext* c = t_apply) {
    node = c->node->name();
    decl = c->node->op().name;
    for (auto [v, kind] : {std::pair{c->ins, "input "}, std::pair{c->outs, "output "}})
      for (size_t i = 0; i < v->size(); ++i)
        if ((*v)[i].defined() && (*v)[i].impl() == t.impl()) what = str(kind, i);
  }
  return str("internal error: the derivative formula of ", node, " passed its ", what, " [", dtype_name(t.dtype()),
             " ", shape_str(t.sizes()), "] to ", op.name, ", but the saved-values declaration of '", decl,
             "' (OpDef::saved) says the formula does not read it, so autograd did not keep it; fix the declaration");
}

Tensor SavedTensor::unpack(const std::shared_ptr<Node>& owner) const {
  if (placeholder_) {
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = unkept_storage(meta_.device);
    impl->sizes = meta_.sizes;
    impl->strides = meta_.strides;
    impl->offset = offset_;  // as_strided's formula reads it
    impl->dtype = meta_.dtype;
    impl->wrapped_number = meta_.wrapped_number;
    return Tensor(std::move(impl));
  }
  if (packed_) {
    Tensor t = packed_->unpack();
    if (is_output_ && requires_grad_ && GradMode::is_enabled()) {
      t = detached(t);
      set_history(t, owner, output_nr_);
    }
    return t;
  }
  if (!data_.defined()) return data_;
  if (data_.autograd_version() != version_) {
    // Raised by the dispatcher only if the formula really uses this tensor.
    Tensor t = detached(data_);
    meta(t).stale_error =
        str("one of the variables needed for gradient computation has been modified by an inplace operation: [",
            dtype_name(t.dtype()), " ", shape_str(t.sizes()), "] is at version ", data_.autograd_version(),
            "; expected version ", version_, " instead (", owner->name(),
            " saved it; clone() it before the in-place write, or write out of place)");
    return t;
  }
  if (is_output_ && requires_grad_ && GradMode::is_enabled()) {
    Tensor t = detached(data_);
    set_history(t, owner, output_nr_);
    // Forward-over-reverse with create_graph (jvp of grad of a tensor that
    // requires grad): the alias stands for the saved result, tangent included.
    forward_ad::copy_tangent(data_, t);
    return t;
  }
  return data_;
}

// "add" -> "AddBackward0", "max.dim" -> "MaxBackward0", "add_" -> "AddBackward0"
std::string OpNode::name() const {
  std::string n, src = op_.name;
  src = src.substr(0, src.find('.'));
  bool up = true;
  for (char c : src) {
    if (c == '_') { up = true; continue; }
    n += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  return n + "Backward0";
}

namespace {
void check_not_released(bool released, const std::string& name) {
  TP_CHECK(!released, Error, "Trying to backward through the graph a second time: ", name,
           " has already freed the values it saved for backward. Pass retain_graph=True to the first "
           "backward()/autograd.grad() call to go through the same graph again.");
}
}  // namespace

std::vector<Tensor> OpNode::apply(const std::vector<Tensor>& grad_outputs) {
  check_not_released(released_, name());
  auto self = shared_from_this();
  std::vector<Tensor> ins, outs;
  ins.reserve(saved_inputs.size());
  for (auto& s : saved_inputs) ins.push_back(s.unpack(self));
  for (auto& s : saved_outputs) outs.push_back(s.unpack(self));
  std::vector<bool> needs(next_edges.size());
  for (size_t i = 0; i < next_edges.size(); ++i) needs[i] = next_edges[i].fn != nullptr;
  BackwardArgs args{ins, outs, grad_outputs, attrs_, needs};
  const ApplyContext ctx{this, &ins, &outs};
  struct Restore {
    const ApplyContext* prev;
    ~Restore() { t_apply = prev; }
  } restore{t_apply};
  t_apply = &ctx;
  std::vector<Tensor> grads = fn_(args);
  grads.resize(next_edges.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!needs[i]) grads[i] = Tensor();
    if (!grads[i].defined()) continue;
    // A gradient has its input's shape and dtype (broadcast and promotion undone).
    grads[i] = fit_grad(grads[i], input_shapes[i], input_dtypes[i], name());
  }
  return grads;
}

void OpNode::release_saved() {
  saved_inputs.clear();
  saved_outputs.clear();
  released_ = true;
}

std::vector<Tensor> FunctionNode::apply(const std::vector<Tensor>& grad_outputs) {
  check_not_released(released_, name());
  std::vector<Tensor> grads = fn_(grad_outputs);
  TP_CHECK(grads.size() == next_edges.size(), Error, name(), ": backward returned ", grads.size(),
           " gradients for ", next_edges.size(), " tensor inputs");
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!next_edges[i].fn) grads[i] = Tensor();
    if (grads[i].defined()) grads[i] = fit_grad(grads[i], input_shapes[i], input_dtypes[i], name());
  }
  return grads;
}

void AccumulateGrad::run_pre_hooks(std::vector<Tensor>& g) {
  auto leaf = leaf_.lock();
  if (!leaf || !leaf->autograd_meta || g.empty() || !g[0].defined()) return;
  auto hooks = leaf->autograd_meta->hooks;  // a hook may remove itself
  for (auto& h : hooks) {
    Tensor r = h.fn(g[0]);
    if (!r.defined()) continue;
    TP_CHECK(r.sizes() == g[0].sizes(), ValueError, "hook returned a gradient of shape ", shape_str(r.sizes()),
             " for a tensor of shape ", shape_str(g[0].sizes()));
    g[0] = r;
  }
}

std::vector<Tensor> AccumulateGrad::apply(const std::vector<Tensor>& grad_outputs) {
  auto leaf = leaf_.lock();
  if (!leaf || grad_outputs.empty() || !grad_outputs[0].defined()) return {};
  accumulate_grad(leaf, grad_outputs[0]);
  return {};
}

void accumulate_grad(const std::shared_ptr<TensorImpl>& leaf, const Tensor& grad) {
  // With create_graph the accumulated gradient keeps its history (higher order).
  const bool keep_graph = GradMode::is_enabled();
  Tensor g = keep_graph ? grad : detached(grad);
  g = fit_grad(g, leaf->sizes, leaf->dtype, "AccumulateGrad");
  if (!leaf->grad) {
    // Own the memory: later in-place accumulation must not write into a tensor the user holds.
    leaf->grad = ops::clone(g).impl_ptr();
  } else if (keep_graph || leaf->grad->requires_grad) {
    leaf->grad = ops::add(Tensor(leaf->grad), g).impl_ptr();
    drop_grad_wrapper(*leaf);
  } else {
    Tensor acc(leaf->grad);
    ops::add_(acc, g);
  }
  if (leaf->autograd_meta) {
    Tensor t(leaf);
    auto hooks = leaf->autograd_meta->post_accumulate_hooks;  // a hook may remove itself
    for (auto& h : hooks) h.fn(t);
  }
}

}  // namespace tp::autograd
