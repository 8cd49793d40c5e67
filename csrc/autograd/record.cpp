// The dispatcher hook: every eager operator call passes here. It decides whether
// the call is recorded (grad mode on and an input requires grad), attaches the
// backward Node to the results, handles in-place writes (rebasing the written
// tensor's history, or its base's when it is a view), and enforces the rules of
// inference tensors and of saved tensors modified in place.
#include <unordered_map>

#include "autograd/engine.h"
#include "autograd/forward_ad.h"
#include "autograd/node.h"
#include "autograd/views.h"
#include "core/grad_mode.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace tp::autograd {
namespace {

thread_local bool t_inference = false;

// Rules that hold whether or not the call is recorded.
void check_input_meta(const OpDef& op, const std::vector<Tensor>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const AutogradMeta* m = meta_if(inputs[i]);
    if (!m) continue;
    if (!m->stale_error.empty()) throw Error(m->stale_error);
    TP_CHECK(!(m->inference && i == 0 && op.has(kInplace) && !t_inference), Error, op.name,
             ": in-place update of an inference tensor (created under tp.inference_mode) is only allowed "
             "inside inference_mode");
  }
}

// Results made under inference_mode are inference tensors; a write keeps the kind
// of the tensor written; a view has the kind of its base, in or out of
// inference_mode (a view of an inference tensor is one too: otherwise writing
// through `x[1:]` outside inference_mode would slip past the rule above).
void mark_inference(const OpDef& op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  if (op.has(kInplace)) return;
  const bool inference = op.has(kView) ? !inputs.empty() && is_inference(inputs[0]) : t_inference;
  if (!inference) return;
  for (auto& o : outputs)
    if (o.defined()) meta(o).inference = true;
}

// Test hook (tp._C._set_saved_override): a forced SavedSet per operator, to
// check that a wrong declaration raises instead of giving a wrong gradient.
std::unordered_map<const OpDef*, SavedSet>& saved_overrides() {
  static std::unordered_map<const OpDef*, SavedSet> m;
  return m;
}

constexpr SavedSet kKeepAll{~uint64_t{0}, ~uint64_t{0}};

// What the node keeps alive for `fn_op`'s formula (OpDef::saved; everything when undeclared).
// `needs[i]`: input i gets a gradient (its edge has a node, as OpNode::apply tells the formula).
SavedSet saved_set(const OpDef& op, const OpDef* fn_op, const std::vector<bool>& needs) {
  auto& ov = saved_overrides();
  if (!ov.empty()) {
    auto it = ov.find(&op);
    if (it != ov.end()) return it->second;
  }
  if (!fn_op || !fn_op->saved) return kKeepAll;
  return fn_op->saved(needs);
}

// ---- out-of-place ops ----
std::vector<Tensor> record(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  std::vector<Tensor> out = run_kernel(op, inputs, attrs);
  link_views(op, inputs[0], out);
  if (op.has(kView)) note_view_base(inputs[0], out);
  if (!op.backward) return out;  // non-differentiable (comparisons, argmax, ...)
  auto node = std::make_shared<OpNode>(op, op.backward, attrs);
  node->num_outputs = static_cast<uint32_t>(out.size());
  std::vector<bool> needs(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    node->next_edges.push_back(gradient_edge(inputs[i]));
    needs[i] = node->next_edges[i].fn != nullptr;
  }
  const SavedSet keep = saved_set(op, &op, needs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    node->saved_inputs.emplace_back(t, false, keep.input(i));
    node->input_shapes.push_back(t.defined() ? t.sizes() : Shape{});
    node->input_dtypes.push_back(t.defined() ? t.dtype() : DType::Float32);
  }
  for (uint32_t i = 0; i < out.size(); ++i) {
    Tensor& o = out[i];
    if (o.defined() && is_floating(o.dtype())) {
      // A kernel handing back an input unchanged must not rebase that input.
      for (auto& t : inputs)
        if (t.defined() && t.impl() == o.impl()) o = detached(o);
      set_history(o, node, i);
    }
    node->saved_outputs.emplace_back(o, true, keep.output(i));
  }
  return out;
}

// ---- in-place ops ----
std::vector<Tensor> copy_backward(const BackwardArgs& a) {
  const Tensor& g = a.grad_outputs[0];
  if (!g.defined()) return {Tensor(), Tensor()};
  return {Tensor(), a.needs_grad[1] ? g : Tensor()};  // the old value of self is overwritten: no gradient
}

std::vector<Tensor> overwrite_backward(const BackwardArgs& a) {  // fill_, random fills
  return std::vector<Tensor>(a.inputs.size());
}

// The derivative of an in-place op, written for the value of self before the
// write; `decl` is the operator whose saved-values declaration describes it
// (the op itself, else its out-of-place twin; null: the formula reads nothing).
BackwardFn inplace_formula(const OpDef& op, const OpDef*& decl) {
  std::string name = op.name;
  decl = nullptr;
  if (name == "copy_") return &copy_backward;
  if (name == "fill_" || name == "zero_" || op.has(kRandom)) return &overwrite_backward;
  std::string twin = name.substr(0, name.find('.'));
  if (!twin.empty() && twin.back() == '_') twin.pop_back();
  const OpDef* t = find_op(twin + name.substr(std::min(name.size(), name.find('.'))));
  if (!t) t = find_op(twin);
  if (op.backward) {
    // The twin's declaration holds only if the in-place op runs the twin's formula.
    decl = op.saved || !t || t->backward != op.backward ? &op : t;
    return op.backward;
  }
  decl = t;
  return t ? t->backward : nullptr;
}

std::vector<Tensor> record_inplace(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  const Tensor& self = inputs[0];
  TP_CHECK(!(self.requires_grad() && !self.impl()->grad_fn), Error, op.name,
           ": a leaf Variable that requires grad is being used in an in-place operation (shape ",
           shape_str(self.sizes()), "); do it under tp.no_grad() or on a clone()");
  Tensor base = view_base(self);
  TP_CHECK(!base.defined() || base.impl()->grad_fn || !base.requires_grad(), Error, op.name,
           ": a view of a leaf Variable that requires grad is being used in an in-place operation (view shape ",
           shape_str(self.sizes()), ", leaf shape ", shape_str(base.sizes()), ")");
  const OpDef* decl = nullptr;
  BackwardFn fn = inplace_formula(op, decl);
  const bool differentiable = fn && is_floating(self.dtype());
  // Through a view the base takes the history (CopySlices), whether or not it required grad.
  const bool through_view = base.defined();
  // What the formula will read decides, before the write, whether the old self is copied.
  SavedSet keep;
  if (differentiable && fn != &copy_backward && fn != &overwrite_backward) {
    std::vector<bool> needs(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& src = i == 0 && through_view ? base : inputs[i];
      needs[i] = src.defined() && src.requires_grad();  // gradient_edge(src) will have a node
    }
    keep = saved_set(op, decl, needs);
  }
  // The value before the write, recorded as a clone so that create_graph can differentiate
  // through it; only if the formula reads self (or an input aliasing it) by value.
  bool needs_old = false;
  for (size_t i = 0; differentiable && i < inputs.size(); ++i)
    needs_old |= keep.input(i) && inputs[i].defined() && inputs[i].impl() == self.impl();
  Tensor old_self = needs_old ? ops::clone(self) : Tensor();
  std::vector<Tensor> out = run_kernel(op, inputs, attrs);
  if (!is_floating(self.dtype())) return out;
  if (!fn) {  // not differentiable: the written tensor loses its history
    if (self.impl()->grad_fn) detach_(self);
    return out;
  }
  std::shared_ptr<OpNode> node = through_view ? std::make_shared<CopySlices>(op, fn, attrs, base, self)
                                              : std::make_shared<OpNode>(op, fn, attrs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const Tensor& src = i == 0 && through_view ? base : t;
    node->next_edges.push_back(gradient_edge(src));
    bool aliases_self = t.defined() && t.impl() == self.impl();
    if (aliases_self && !keep.input(i)) {
      // Not read: only the metadata of the value before the write (self's, unchanged by the write).
      node->saved_inputs.emplace_back(t, false, false);
    } else {
      node->saved_inputs.emplace_back(aliases_self ? old_self : t, false, keep.input(i));
    }
    node->input_shapes.push_back(t.defined() ? t.sizes() : Shape{});
    node->input_dtypes.push_back(t.defined() ? t.dtype() : DType::Float32);
  }
  node->num_outputs = 1;
  if (through_view) {
    node->input_shapes[0] = self.sizes();  // the formula's self is the view's region
    set_history(base, node, 0);
    set_view_history(self, base);
  } else {
    std::shared_ptr<Node> old = self.impl()->grad_fn;
    set_history(self, node, 0);
    if (self.impl()->retains_grad && old) {  // retain_grad follows the tensor to its new history
      auto& r = old->retained;
      std::erase_if(r, [&](auto& p) { return p.second.lock().get() == self.impl(); });
      node->retained.push_back({0, self.impl_ptr()});
    }
  }
  node->saved_outputs.emplace_back(self, true, keep.output(0));
  return out;
}

bool on_cpu(const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs)
    if (t.defined() && t.device().kind != Device::Kind::CPU) return false;
  return true;
}

std::vector<Tensor> reverse_hook(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  bool wants_grad = false;
  bool has_meta = false;
  for (auto& t : inputs) {
    if (!t.defined()) continue;
    wants_grad |= t.impl()->requires_grad;
    has_meta |= t.impl()->autograd_meta != nullptr;
    if (is_unkept(t)) throw Error(unkept_error(op, t));  // a wrong OpDef::saved declaration
  }
  const bool grad_mode = GradMode::is_enabled();
  if (has_meta) {
    check_input_meta(op, inputs);
    if (grad_mode && !wants_grad) wants_grad = adopt_base_history(inputs);
  }
  if (grad_mode && op.has(kInplace) && inputs[0].defined() && inputs[0].impl()->no_grad_view &&
      (wants_grad || inputs[0].impl()->no_grad_view == 2))
    throw Error(str(op.name, ": the tensor written [", dtype_name(inputs[0].dtype()), " ", shape_str(inputs[0].sizes()),
                    "] is a view made under no_grad, and the in-place write runs with grad mode on: whether it "
                    "should be recorded is ambiguous; make the view and the write both inside no_grad (not "
                    "recorded) or both outside it (recorded)"));
  if (!wants_grad || !grad_mode) {
    std::vector<Tensor> out = run_kernel(op, inputs, attrs);
    if (t_inference || (has_meta && op.has(kView))) mark_inference(op, inputs, out);
    if (op.has(kView)) {
      note_view_base(inputs[0], out);
      if (grad_mode) link_views(op, inputs[0], out);
      else if (!t_inference) mark_no_grad_views(inputs[0], out);
    }
    return out;
  }
  if (has_meta)
    for (auto& t : inputs)
      TP_CHECK(!is_inference(t), Error, op.name,
               ": an inference tensor (created under tp.inference_mode) cannot be used in an operation "
               "recorded for autograd; clone() it outside inference_mode to get a normal tensor");
  // Under forward AD the saved outputs would carry no tangents into a backward
  // that is differentiated forward (jacfwd of grad): record the op itself. On
  // the CPU only: the recorded forms' extra outputs are Welford statistics,
  // which the generated CUDA eager kernels do not print.
  if (op.recorded_as && !forward_ad::active() && on_cpu(inputs)) {
    std::vector<Tensor> out = record(get_op(op.recorded_as), inputs, attrs);
    out.resize(1);
    return out;
  }
  return op.has(kInplace) ? record_inplace(op, inputs, attrs) : record(op, inputs, attrs);
}

// While a dual level is open, calls with a dual input also get their tangents (forward_ad.h).
std::vector<Tensor> hook(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  if (forward_ad::active()) return forward_ad::dispatch(op, inputs, attrs, &reverse_hook);
  return reverse_hook(op, inputs, attrs);
}

}  // namespace

void install() { set_autograd_hook(&hook); }

void set_saved_override(const OpDef& op, const SavedSet* forced) {
  if (forced) saved_overrides()[&op] = *forced;
  else saved_overrides().erase(&op);
}

bool inference_mode_enabled() { return t_inference; }
void set_inference_mode(bool enabled) { t_inference = enabled; }

}  // namespace tp::autograd
