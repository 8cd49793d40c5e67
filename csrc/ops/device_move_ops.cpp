// `_to_device`: Tensor.to(device) / .cuda() / .cpu() as an operator of a
// captured graph. Eager moves do not go through it (python/src/cuda.cpp records
// them for autograd itself); a capture records a move of a value that depends
// on the call with it, so the compiled program moves the call's value instead
// of replaying the copy it made at capture. The kernel is the CUDA layer's copy
// (`move_to_device`); the derivative moves the gradient back to the input's
// device. No compiled region holds it (kDeviceMove: a region's buffers live on
// one device): a graph with a move is split there (compile/device_split.h).
#include "ops/dispatch.h"
#include "ops/families.h"
#include "ops/registry.h"

namespace tp {
namespace {

// The attribute `device`: -1 the CPU, k >= 0 CUDA device k.
Device device_of(const Attrs& attrs) {
  const int64_t d = attrs.get_int("device");
  return d < 0 ? Device::cpu() : Device{Device::Kind::CUDA, static_cast<int16_t>(d)};
}

std::vector<TensorMeta> to_device_infer(const OpDef&, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  TensorMeta m = TensorMeta::contiguous(in[0].sizes, in[0].dtype);
  m.device = device_of(attrs);
  return {m};
}

std::vector<Tensor> to_device_kernel(const OpDef&, const std::vector<Tensor>& in, const Attrs& attrs,
                                     const std::vector<TensorMeta>&) {
  return {move_to_device(in[0], device_of(attrs))};
}

std::vector<Tensor> to_device_backward(const BackwardArgs& a) {
  const Tensor& g = a.grad_outputs[0];
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  return {to_device(g, a.inputs[0].device())};
}

int64_t device_attr(Device d) { return d.kind == Device::Kind::CPU ? -1 : d.index; }

}  // namespace

Tensor to_device(const Tensor& t, Device target) {
  return call_op1(TP_OP("_to_device"), {t}, Attrs{{"device", device_attr(target)}});
}

void register_device_move_ops() {
  register_op({.name = "_to_device", .tags = kAllDTypes | kDeviceMove, .num_inputs = 1,
               .infer = &to_device_infer, .cpu = &to_device_kernel, .backward = &to_device_backward,
               .saved = [](const std::vector<bool>&) { return SavedSet{}; }});
}

}  // namespace tp
