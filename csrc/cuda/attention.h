// Fused attention on CUDA (issue 12, Section 9 / Proposition 9.1): the kernel
// of the internal operator `_attention(q, k, v, *, scale)` that Stax's CUDA
// regions put in place of matmul(q, kᵀ) · scale → softmax → matmul(·, v)
// (stax/backend/attention_fusion.h). One block computes 64 query rows of one
// (batch, head) against every key with the online softmax: running row
// maximum m and sum l, the partial output rescaled by exp(m_old − m_new) when
// the maximum grows, divided by l once at the end. The scores never reach
// memory, and q, k, v are read through their strides, so the heads of a
// [B, T, H, D] projection need no compacting copy. float32 on CUDA cores
// (FMA, no TF32); head dims up to 64. Anything else (another dtype, a wider
// head, an empty key range) runs the unfused operators.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ops/registry.h"

namespace tp::cuda {

bool attention_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                      const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);

// The widest head dim the fused kernel takes (q/k and v alike).
constexpr int64_t kAttentionMaxHeadDim = 64;

// Both variants of the kernel's source (scalar and 128-bit loads), for the
// tests' NVRTC compile without a GPU.
std::vector<std::pair<std::string, std::string>> attention_kernel_sources();

}  // namespace tp::cuda
