// Integer-indexed row movement on CUDA (cuda/index_kernels.cpp): embedding,
// index_select, gather, and index_put / index_put_ with one index tensor on the first
// dim (accumulate=True is embedding's gradient: rows scattered with atomic
// adds). Rows move as raw bits (any dtype of 1, 2, 4 or 8 bytes); only the
// accumulating scatter needs float32/float64. An index out of range is caught
// on the device (the position clamped, never read or written outside the
// buffer) and raised as IndexError after the kernel, as the CPU raises it: the
// flag's read-back synchronizes the device, the price of eager's checked
// indices. A call it does not cover returns false, and the dispatcher then
// tries Stax's generated operators or raises NotImplementedError naming the
// operator and the device.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ops/registry.h"

namespace tp::cuda {

bool index_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                  const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);

// Every source above, as (kernel name, source), for NVRTC checks without a GPU.
std::vector<std::pair<std::string, std::string>> index_kernel_sources();

}  // namespace tp::cuda
