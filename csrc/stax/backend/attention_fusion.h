// Attention fusion for CUDA regions (issue 12 figure, Proposition 9.1): the
// chain
//   s = matmul(q, kᵀ) [· c | / c] → p = softmax(s, -1) → o = matmul(p, v)
// with every intermediate used only by the next step becomes one internal
// operator `_attention(q, k, v, *, float scale)`, whose CUDA kernel
// (cuda/attention.h) keeps the scores on chip (online softmax) and reads q, k,
// v through their strides: the [B, L, H, D] heads of a projection need no
// compacting copy and the [B, H, L, L] scores never reach memory.
//
// Conditions: float32; q, k, v of rank 3 or 4 with equal batch sizes (no
// broadcasting); kᵀ a transpose/permute of the last two dims of k (k is read
// through it); head dims up to 64; a static graph. A 4-D result is planned in
// the [B, L, H, D] layout (heads inner), so the usual `o.transpose(1, 2)
// .reshape(B, L, H·D)` after it reads memory in order.
//
// Run before decomposition (softmax must still be one node).
// TP_CUDA_FUSED_ATTENTION=0 turns the rewrite off (to measure against it).
// The CPU kernel of `_attention` is the unfused reference (CPU regions never
// produce it).
#pragma once
#include "graph/graph.h"

namespace tp::stax {

// The operator, registered on first use.
const OpDef& attention_op();

// Rewrites every matching chain in g; returns the number rewritten.
int fuse_attention(graph::Graph& g);

}  // namespace tp::stax
