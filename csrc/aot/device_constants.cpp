#include "aot/device_constants.h"

#include "cuda/copy.h"
#include "ops/ops.h"

namespace tp::aot {
namespace {

Tensor place(Tensor host, Device device) {
  return device.kind == Device::Kind::CPU ? host : cuda::to_device(host, device.index);
}

}  // namespace

Device region_device(const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs)
    if (t.defined() && t.device().kind != Device::Kind::CPU) return t.device();
  return Device::cpu();
}

Tensor zeros_on(const Shape& sizes, DType dtype, Device device) { return place(ops::zeros(sizes, dtype), device); }

Tensor ones_on(const Shape& sizes, DType dtype, Device device) { return place(ops::ones(sizes, dtype), device); }

}  // namespace tp::aot
