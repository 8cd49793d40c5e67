#include "graph/custom_function.h"

#include <memory>
#include <mutex>
#include <unordered_map>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/grad_mode.h"

namespace tp::graph {
namespace {

struct BackwardRegistry {
  std::mutex mu;
  int64_t next = 0;
  std::unordered_map<int64_t, std::shared_ptr<const CustomBackward>> fns;
};
BackwardRegistry& registry() {
  static auto* r = new BackwardRegistry;  // never destroyed: entries may hold Python objects
  return *r;
}

std::shared_ptr<const CustomBackward> lookup(int64_t id) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.fns.find(id);
  TP_CHECK(it != r.fns.end(), Error, "internal: custom_function backward ", id, " is not registered");
  return it->second;
}

struct Layout {
  size_t outputs, inputs;
};
Layout layout(const Attrs& attrs, size_t nargs) {
  Layout l{static_cast<size_t>(attrs.get_int("num_outputs")), static_cast<size_t>(attrs.get_int("num_inputs"))};
  TP_CHECK(l.outputs >= 1 && l.outputs + l.inputs <= nargs, Error, "internal: custom_function with ", nargs,
           " arguments for ", l.outputs, " outputs and ", l.inputs, " inputs");
  return l;
}

std::vector<TensorMeta> infer(const OpDef&, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const Layout l = layout(attrs, in.size());
  return std::vector<TensorMeta>(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(l.outputs));
}

std::vector<Tensor> kernel(const OpDef&, const std::vector<Tensor>& in, const Attrs& attrs,
                           const std::vector<TensorMeta>&) {
  return custom_function_results(in, attrs);
}

// The user's backward on (grads of the results, results, saved values); one
// gradient per argument, defined only for the Function's inputs that need one.
std::vector<Tensor> call_backward(const std::vector<Tensor>& args, const std::vector<Tensor>& grad_outputs,
                                  const Attrs& attrs, const std::vector<bool>& needs) {
  const Layout l = layout(attrs, args.size());
  std::vector<Tensor> grads = grad_outputs;
  grads.resize(l.outputs);
  const std::vector<Tensor> outs(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(l.outputs));
  const std::vector<Tensor> saved(args.begin() + static_cast<std::ptrdiff_t>(l.outputs + l.inputs), args.end());
  std::vector<Tensor> gin = (*lookup(attrs.get_int("fn")))(grads, outs, saved);
  TP_CHECK(gin.size() == l.inputs, Error, "internal: the backward of ", attrs.get_str("name"), " gave ", gin.size(),
           " gradients for ", l.inputs, " inputs");
  std::vector<Tensor> out(args.size());
  for (size_t i = 0; i < l.inputs; ++i)
    if (needs.at(l.outputs + i)) out[l.outputs + i] = gin[i];
  return out;
}

std::vector<Tensor> formula(const BackwardArgs& a) {
  return call_backward(a.inputs, a.grad_outputs, a.attrs, a.needs_grad);
}

}  // namespace

int64_t register_custom_backward(CustomBackward fn) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const int64_t id = r.next++;
  r.fns.emplace(id, std::make_shared<const CustomBackward>(std::move(fn)));
  return id;
}

const OpDef& custom_function_op() {
  static const OpDef op{.name = "custom_function", .tags = kAllDTypes, .num_inputs = -1, .infer = &infer,
                        .cpu = &kernel, .backward = &formula};
  return op;
}

bool is_custom_function(const OpDef& op) { return &op == &custom_function_op(); }

std::vector<Tensor> custom_function_results(const std::vector<Tensor>& args, const Attrs& attrs) {
  const Layout l = layout(attrs, args.size());
  std::vector<Tensor> out;
  for (size_t k = 0; k < l.outputs; ++k) out.push_back(autograd::detached(args[k]));
  return out;
}

std::vector<Tensor> run_custom_function(const std::vector<Tensor>& args, const Attrs& attrs) {
  std::vector<Tensor> outs = custom_function_results(args, attrs);
  const Layout l = layout(attrs, args.size());
  const auto first_in = args.begin() + static_cast<std::ptrdiff_t>(l.outputs);
  const std::vector<Tensor> inputs(first_in, first_in + static_cast<std::ptrdiff_t>(l.inputs));
  bool any = false;
  for (const Tensor& t : inputs) any |= t.defined() && t.requires_grad();
  if (!GradMode::is_enabled() || !any) return outs;
  // The node keeps history-free aliases (a result holding its own node would be a cycle).
  std::vector<Tensor> kept;
  std::vector<uint64_t> versions;
  std::vector<bool> needs(args.size(), false);
  for (size_t i = 0; i < args.size(); ++i) {
    kept.push_back(autograd::detached(args[i]));
    versions.push_back(args[i].defined() ? args[i].autograd_version() : 0);
    needs[i] = i >= l.outputs && i < l.outputs + l.inputs && args[i].defined() && args[i].requires_grad();
  }
  auto backward = [kept, versions, attrs, needs, l](const std::vector<Tensor>& grads) {
    // As ctx.saved_tensors in eager: a saved value written in place since the call.
    for (size_t i = l.outputs + l.inputs; i < kept.size(); ++i)
      if (kept[i].defined() && kept[i].autograd_version() != versions[i])
        throw Error(str("one of the variables needed for gradient computation has been modified by an inplace "
                        "operation: [", dtype_name(kept[i].dtype()), " ", shape_str(kept[i].sizes()),
                        "] is at version ", kept[i].autograd_version(), "; expected version ", versions[i],
                        " instead (saved by ", attrs.get_str("name"), " with ctx.save_for_backward; clone() it "
                        "before the in-place write)"));
    std::vector<Tensor> all = call_backward(kept, grads, attrs, needs);
    return std::vector<Tensor>(all.begin() + static_cast<std::ptrdiff_t>(l.outputs),
                               all.begin() + static_cast<std::ptrdiff_t>(l.outputs + l.inputs));
  };
  autograd::record_function(attrs.get_str("name") + "Backward", inputs, outs, backward, {});
  return outs;
}

}  // namespace tp::graph
