// The copy family: conversions (to, clone) and the in-place operators
// (add_, sub_, mul_, div_, fill_, copy_). In-place operators return input 0
// itself; the dispatcher bumps its version counter (they are tagged kInplace).
#include "ops/derivative_util.h"
#include "ops/families.h"
#include "ops/kernel_util.h"
#include "ops/pointwise_kernels.h"
#include "ops/registry.h"
#include "ops/type_promotion.h"

namespace tp {
namespace {

// ---- to / clone ----
std::vector<TensorMeta> to_infer(const OpDef&, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  return {TensorMeta::contiguous(in[0].sizes, attrs.get<DType>("dtype"))};
}

std::vector<TensorMeta> clone_infer(const OpDef&, const std::vector<TensorMeta>& in, const Attrs&) {
  return {TensorMeta::contiguous(in[0].sizes, in[0].dtype)};
}

std::vector<Tensor> copy_to_new_cpu(const OpDef&, const std::vector<Tensor>& in, const Attrs&,
                                    const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  copy_into(out, in[0]);
  return {out};
}

std::vector<Tensor> to_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  return {ops::to_dtype(g, a.inputs[0].dtype())};
}

std::vector<Tensor> clone_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  return {g};
}

// ---- in-place ----
// Writing through a stride-0 (expanded) dim would write one element from
// several places (and race between threads).
void check_writable(const TensorMeta& self, const char* op) {
  for (size_t d = 0; d < self.sizes.size(); ++d)
    TP_CHECK(self.sizes[d] <= 1 || self.strides[d] != 0, Error, op,
             ": unsupported operation: more than one element of the written-to tensor (shape ",
             shape_str(self.sizes), ", strides ", shape_str(self.strides),
             ") refers to a single memory location; clone() it first");
}

void check_broadcasts_to(const TensorMeta& self, const TensorMeta& src, const char* op) {
  Shape b = broadcast_shapes(self.sizes, src.sizes, op);
  TP_CHECK(b == self.sizes, ValueError, op, ": output with shape ", shape_str(self.sizes),
           " doesn't match the broadcast shape ", shape_str(b));
}

bool same_view(const Tensor& a, const Tensor& b) {
  return a.impl()->storage == b.impl()->storage && a.offset() == b.offset() && a.sizes() == b.sizes() &&
         a.strides() == b.strides() && a.dtype() == b.dtype();
}

// The operand read by an in-place write, copied first if it shares memory with
// the destination in any way other than being the same view.
Tensor read_safely(const Tensor& dst, const Tensor& src) {
  return may_overlap(dst, src) && !same_view(dst, src) ? contiguous_copy(src) : src;
}

template <BinaryOp K>
DType inplace_compute_dtype(DType promoted) {
  return K == BinaryOp::Div && !is_floating(promoted) ? default_float_dtype() : promoted;
}

template <BinaryOp K>
std::vector<TensorMeta> inplace_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  const TensorMeta& self = in[0];
  check_broadcasts_to(self, in[1], op.name);
  if constexpr (K == BinaryOp::Sub)
    TP_CHECK(in[0].dtype != DType::Bool && in[1].dtype != DType::Bool, TypeError, op.name,
             ": subtraction, the `-` operator, with a bool tensor is not supported (got dtypes ",
             dtype_name(in[0].dtype), " and ", dtype_name(in[1].dtype), ")");
  DType ct = inplace_compute_dtype<K>(result_type(in));
  TP_CHECK(can_cast(ct, self.dtype), TypeError, op.name, ": result type ", dtype_name(ct),
           " can't be cast to the desired output type ", dtype_name(self.dtype));
  check_writable(self, op.name);
  return {self};
}

template <BinaryOp K>
std::vector<Tensor> inplace_cpu(const OpDef&, const std::vector<Tensor>& in, const Attrs&,
                                const std::vector<TensorMeta>&) {
  const Tensor& self = in[0];
  Tensor other = read_safely(self, in[1]);
  DType ct = inplace_compute_dtype<K>(result_type(in));
  if (ct == self.dtype()) {
    binary_kernel(K, self, self, convert(other, ct));
  } else {
    Tensor tmp = Tensor::empty(self.sizes(), ct);
    binary_kernel(K, tmp, convert(self, ct), convert(other, ct));
    copy_into(self, tmp);
  }
  return {self};
}

std::vector<TensorMeta> fill_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_scalar_fits(attrs.get<Scalar>("value"), in[0].dtype, op.name);
  check_writable(in[0], op.name);
  return {in[0]};
}

std::vector<Tensor> fill_cpu(const OpDef&, const std::vector<Tensor>& in, const Attrs& attrs,
                             const std::vector<TensorMeta>&) {
  fill(in[0], attrs.get<Scalar>("value"));
  return {in[0]};
}

std::vector<TensorMeta> copy_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  check_broadcasts_to(in[0], in[1], op.name);
  check_writable(in[0], op.name);
  return {in[0]};
}

std::vector<Tensor> copy_cpu(const OpDef&, const std::vector<Tensor>& in, const Attrs&,
                             const std::vector<TensorMeta>&) {
  if (!same_view(in[0], in[1])) copy_into(in[0], read_safely(in[0], in[1]));
  return {in[0]};
}

void register_copy(const char* name, uint32_t tags, int num_inputs, InferFn infer, KernelFn cpu,
                   BackwardFn backward, const char* schema = "") {
  register_op({.name = name, .schema = schema, .tags = tags, .num_inputs = num_inputs, .infer = infer,
               .cpu = cpu, .backward = backward});
}

}  // namespace

void register_copy_ops() {
  register_copy("to", kAllDTypes, 1, &to_infer, &copy_to_new_cpu, &to_backward);
  register_copy("clone", kAllDTypes, 1, &clone_infer, &copy_to_new_cpu, &clone_backward, "clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor");
  // add_/sub_/mul_/div_ (with alpha / rounding_mode) are registered by ops/pointwise_ops.cpp.
  register_copy("fill_", kInplace | kAllDTypes, 1, &fill_infer, &fill_cpu, nullptr, "fill_(Tensor(a!) self, Scalar value) -> Tensor");
  register_copy("copy_", kInplace | kAllDTypes, 2, &copy_infer, &copy_cpu, nullptr,
                "copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor");
}

}  // namespace tp
