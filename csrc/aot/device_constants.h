// Constant tensors the AOT layer makes itself — example tangents for the joint
// trace, example inputs for compiling the backward ahead, zeros for a result
// whose gradient is absent — must live on the device of the values they stand
// beside. The C++ factories build on the host; a CPU example beside CUDA values
// makes the joint trace mix devices, and a backward compiled from CPU examples
// is a CPU region that later receives device memory.
//
// The device is the one the graph's metas give the value they stand beside:
// every node keeps its device through the passes (decompositions and
// rewritten products copy the replaced node's, tests/cpp/graph/test_pass_metas).
#pragma once

#include "core/tensor.h"

namespace tp::aot {

Tensor zeros_on(const Shape& sizes, DType dtype, Device device);
Tensor ones_on(const Shape& sizes, DType dtype, Device device);

}  // namespace tp::aot
