// unique / unique_consecutive on CUDA (cuda/unique_kernels.cpp), dim=None or
// dim=k, with values, inverse indices and counts equal to the CPU operator's
// (ops/sort_ops.cpp) and PyTorch's.
//
// Entries are the elements (dim=None) or the slices along dim (rows of L
// elements). Steps, all on the device:
//   1. keys: each element converted to an exact compute type (16-bit floats
//      to float32, bool and integers to int64; float32/float64 as they are),
//      rows laid out one after another;
//   2. unique only: the stable order of the rows — one sort of the keys
//      (dim=None), or for rows of L > 1 elements L stable sorts, last column
//      first, each carrying the previous order (a least-significant-first
//      lexicographic sort) — through the CUDA sort kernel (cuda/scan_sort.*);
//      unique_consecutive keeps input order;
//   3. a row starts a group where it differs from the row before (compared as
//      keys, so NaN never equals NaN: each NaN is a value of its own, as on
//      PyTorch's CPU and CUDA; -0.0 equals 0.0); one launch counts each
//      block's group starts, the host reads the counts (the one
//      synchronization: the result's size is the data's, as in PyTorch);
//   4. a second launch ranks the starts (blocks before + warp ballots), which
//      gives each row its group (the inverse index) and each group its first
//      sorted row; a third copies each group's first row (the input's own
//      bits, so the first of equal values is kept, as on the CPU) into the
//      values and computes the counts from consecutive group starts.
// Empty inputs take the CPU operator on an empty host tensor (no data moves).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ops/registry.h"

namespace tp::cuda {

bool unique_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                   const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);

// Every source above, as (kernel name, source), for NVRTC checks without a GPU.
std::vector<std::pair<std::string, std::string>> unique_kernel_sources();

}  // namespace tp::cuda
