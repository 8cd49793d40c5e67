// Constant tensors the AOT layer makes itself — example tangents for the joint
// trace, example inputs for compiling the backward ahead, zeros for a result
// whose gradient is absent — must live on the device of the values they stand
// beside. The C++ factories build on the host; a CPU example beside CUDA values
// makes the joint trace mix devices, and a backward compiled from CPU examples
// is a CPU region that later receives device memory.
//
// The device comes from the region's real input values, not from graph metas:
// nodes that passes build (decompositions traced in meta mode, rewritten
// products) carried the CPU in their metas whatever device the values live on.
// Those two now keep the device, but the metas are still not enough: taking
// each constant's device from its node's meta instead (tried with issue 12
// item 1) failed every compiled-training test on an H200 — a tangent made on
// the CPU ("mul: Expected all tensors to be on the same device, ... cuda:0
// and cpu") and backward regions compiled for the CPU that then read device
// memory (segfaults) — so some node on that path still says "cpu".
#pragma once
#include <vector>

#include "core/tensor.h"

namespace tp::aot {

// The device of a region's values: that of its first input not on the CPU
// (a region runs on one device; 0-d CPU tensors beside it are numbers), else the CPU.
Device region_device(const std::vector<Tensor>& inputs);

Tensor zeros_on(const Shape& sizes, DType dtype, Device device);
Tensor ones_on(const Shape& sizes, DType dtype, Device device);

}  // namespace tp::aot
