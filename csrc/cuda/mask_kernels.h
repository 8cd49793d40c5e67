// Indexing whose result size depends on the data, on CUDA
// (cuda/mask_kernels.cpp): nonzero (and through it argwhere, nonzero_tuple,
// where(cond), bool masks in x[...] and masked_select, which the frontend
// expands into index tensors) and advanced indexing with several index
// tensors: index (x[i, j], x[:, i, j], x[i, :, j], x[mask] for a mask of
// rank > 1) and index_put(_) with accumulate true or false.
//
// nonzero is a stream compaction in two launches over the same partition of
// the elements into blocks: one counts each block's hits, the host reads the
// counts (a synchronization: the result's size is the data's, as on every
// framework), and the second writes each hit's coordinates at its block's
// offset plus its rank inside the block, so the order is the CPU's
// (row-major) and the result equal to it bit for bit. Several index tensors
// broadcast to one shape B; one launch per indexed dim adds its checked
// index times self's stride into one offset per position of B (negative
// indices count from the end; an index out of range is recorded in the
// device status, cuda/device_status.h, and raised as IndexError naming the
// operator, the index, the dim and its size), then one launch moves the
// elements between self (any strides) and the result / the values (any
// strides, broadcast). index_put with accumulate adds atomically (as
// cuda/index_kernels.h does: repeated positions add up in no fixed order);
// without it, a position named twice keeps one of its values (the CPU keeps
// the last). With tp.use_deterministic_algorithms(True) both take the sorted
// form of cuda/index_kernels.h: float sums fold each position's run in index
// order (the CPU's bits), puts write the last occurrence. A call it does not cover returns false (NotImplementedError
// naming the operator and device, unless Stax generates it).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ops/registry.h"

namespace tp::cuda {

bool mask_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                 const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);

// Every source above, as (kernel name, source), for NVRTC checks without a GPU.
std::vector<std::pair<std::string, std::string>> mask_kernel_sources();

}  // namespace tp::cuda
