// _value_check(failed, self, message): self's value, unless `failed` (a 0-d
// bool computed from the data by the caller) is true, when it raises
// ValueError(message). It is how an operator's data-dependent argument check
// (binary_cross_entropy's "input between 0 and 1") survives compilation:
// the check is ordinary graph nodes (a reduction to `failed`) plus this node,
// which Stax lowers to a Guard over that flag (stax/lowering/pointwise.cpp),
// so a compiled region raises the same error eager does instead of returning
// the NaN the unchecked formula gives. The result is a new tensor (never an
// alias of self), so autograd and the tracer treat it like clone; its
// derivative passes the gradient through to self.
#include "ops/families.h"
#include "ops/kernel_util.h"
#include "ops/registry.h"

namespace tp {
namespace {

std::vector<TensorMeta> value_check_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  TP_CHECK(in[0].defined && in[0].dtype == DType::Bool && in[0].sizes.empty(), TypeError, op.name,
           ": the failure flag must be a 0-d bool tensor");
  return {TensorMeta::contiguous(in[1].sizes, in[1].dtype)};
}

std::vector<Tensor> value_check_cpu(const OpDef&, const std::vector<Tensor>& in, const Attrs& attrs,
                                    const std::vector<TensorMeta>& om) {
  if (in[0].item().to<bool>()) throw ValueError(attrs.get_str("message"));
  Tensor out = alloc_out(om[0]);
  copy_into(out, in[1]);
  return {out};
}

std::vector<Tensor> value_check_backward(const BackwardArgs& a) {
  if (a.grad_outputs.empty() || !a.grad_outputs[0].defined() || !a.needs_grad[1]) return {Tensor(), Tensor()};
  return {Tensor(), a.grad_outputs[0]};
}

}  // namespace

void register_value_check_ops() {
  register_op({.name = "_value_check", .tags = kAllDTypes, .num_inputs = 2, .infer = &value_check_infer,
               .cpu = &value_check_cpu, .backward = &value_check_backward});
}

}  // namespace tp
