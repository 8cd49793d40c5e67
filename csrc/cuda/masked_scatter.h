// masked_scatter / masked_scatter_ on CUDA (cuda/masked_scatter.cpp; the
// operator and its CPU kernel are ops/masked_scatter_ops.cpp).
//
// A stream compaction in reverse, in two launches over one partition of the
// result's elements into blocks (as nonzero's in cuda/mask_kernels.cpp): the
// first counts each block's true mask positions; the host reads the counts
// (one synchronization) to check that source is long enough, raising the
// operator's error naming the sizes before anything is written; the second
// gives each true position its rank (the true positions of the blocks before,
// plus a warp ballot inside the block) and writes source's element of that
// rank there, self's element elsewhere. self, mask and source are read
// through their strides (broadcast: stride 0) as raw bits, so every dtype
// takes the same kernel of its element size; the result is written through
// its own strides (self's, in place).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ops/registry.h"

namespace tp::cuda {

bool masked_scatter_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                           const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);

// Every source above, as (kernel name, source), for NVRTC checks without a GPU.
std::vector<std::pair<std::string, std::string>> masked_scatter_kernel_sources();

}  // namespace tp::cuda
