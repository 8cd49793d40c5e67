#include "ops/dispatch.h"

#include "core/grad_mode.h"

namespace tp {
namespace {
thread_local DispatchInterceptor* t_interceptor = nullptr;
AutogradHook g_autograd_hook = nullptr;

std::string describe_inputs(const std::vector<Tensor>& in) {
  std::string s;
  for (size_t i = 0; i < in.size(); ++i) {
    if (i) s += ", ";
    s += in[i].defined() ? str(dtype_name(in[i].dtype()), shape_str(in[i].sizes())) : "None";
  }
  return s;
}
}  // namespace

DispatchInterceptor* current_interceptor() { return t_interceptor; }
ScopedInterceptor::ScopedInterceptor(DispatchInterceptor* i) : prev_(t_interceptor) { t_interceptor = i; }
ScopedInterceptor::~ScopedInterceptor() { t_interceptor = prev_; }
void set_autograd_hook(AutogradHook h) { g_autograd_hook = h; }

std::vector<Tensor> run_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  if (op.num_inputs >= 0 && static_cast<int>(inputs.size()) != op.num_inputs)
    throw TypeError(str(op.name, ": expected ", op.num_inputs, " tensor arguments but got ", inputs.size()));
  std::vector<TensorMeta> in_meta;
  in_meta.reserve(inputs.size());
  for (auto& t : inputs) {
    if (t.defined()) {
      in_meta.push_back(t.meta());
    } else {  // an absent optional argument; infer and the kernel decide if that is allowed
      TensorMeta m;
      m.defined = false;
      in_meta.push_back(m);
    }
  }
  std::vector<TensorMeta> out_meta = op.infer(op, in_meta, attrs);
  TP_CHECK(op.cpu, Error, op.name, ": no CPU kernel for inputs (", describe_inputs(inputs), ")");
  std::vector<Tensor> out = op.cpu(op, inputs, attrs, out_meta);
  if (op.has(kInplace)) inputs[0].bump_version();
  return out;
}

std::vector<Tensor> call_op(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  // Implicit composites run as their parts, each through this dispatcher.
  if (op.is_implicit_composite()) return op.decompose(inputs, attrs);
  if (t_interceptor) return t_interceptor->intercept(op, inputs, attrs);
  if (g_autograd_hook) return g_autograd_hook(op, inputs, attrs);
  return run_kernel(op, inputs, attrs);
}

Tensor call_op1(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  return call_op(op, inputs, attrs)[0];
}

}  // namespace tp
