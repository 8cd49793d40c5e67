// scatter_reduce on CUDA (cuda/scatter_reduce.cpp): sum, prod, mean, amax and
// amin of the src elements landing on each position, with or without the
// position's own value (include_self). As on the CPU the values are reduced in
// the compute dtype (16-bit floats in float32, narrow integers in int64) and
// converted back once. Every src element is folded in by one atomic update:
// float32/64 sums by atomicAdd, int64 sums by the unsigned 64-bit add (it
// wraps like the CPU's), products and amax/amin by a compare-and-swap loop
// that applies the CPU's rule (a NaN wins and stays; a position already
// holding the result is not written); bool folds as or (sum, mean, amax) or
// and (prod, amin), which are plain stores. mean is the sum divided by the
// count (self's own value counted when included; integers floor-divide).
// The order of the updates is not fixed: float sums and products may differ
// from the CPU's in the last bits; amax, amin and integers are exact. With
// tp.use_deterministic_algorithms(True) float sum, mean and prod sort the
// positions and fold each position's run in index order instead: the CPU's
// bits, on every run. An index
// out of range is recorded in the device status and raised as IndexError
// (cuda/device_status.h). A call it does not cover returns false.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ops/registry.h"

namespace tp::cuda {

bool scatter_reduce_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                           const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);

// Every source above, as (kernel name, source), for NVRTC checks without a GPU.
std::vector<std::pair<std::string, std::string>> scatter_reduce_kernel_sources();

}  // namespace tp::cuda
