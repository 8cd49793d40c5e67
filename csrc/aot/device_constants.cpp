#include "aot/device_constants.h"

#include "cuda/copy.h"
#include "ops/ops.h"

namespace tp::aot {
namespace {

Tensor place(Tensor host, Device device) {
  return device.kind == Device::Kind::CPU ? host : cuda::to_device(host, device.index);
}

}  // namespace

Tensor zeros_on(const Shape& sizes, DType dtype, Device device) { return place(ops::zeros(sizes, dtype), device); }

Tensor ones_on(const Shape& sizes, DType dtype, Device device) { return place(ops::ones(sizes, dtype), device); }

}  // namespace tp::aot
