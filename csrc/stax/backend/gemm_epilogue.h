// GEMM epilogues for CUDA regions (issue 12 item 6): a matrix product whose
// result only feeds a bias add and/or an activation cuBLASLt can apply in the
// GEMM's own epilogue becomes one `_gemm_epilogue` call, so the product is
// written once, already transformed, instead of being written, read back and
// written again by a pointwise kernel.
//
// Patterns (2-D operands, float32/float16/bfloat16, every intermediate used
// only by the next step):
//   addmm(bias, a, b) [beta = alpha = 1]            -> act
//   mm/matmul(a, b) -> add(., bias) [alpha = 1]      -> act (optional)
//   mm/matmul(a, b)                                  -> act
// with `bias` a 1-D row of the result's width and act relu or
// gelu(approximate='tanh'). cuBLASLt's GELU is the tanh approximation: the
// exact (erf) gelu is not fused (it differs by up to 4.7e-4 absolute, outside
// float32's error model), nor is an addmm with nothing after it (the eager
// CUDA addmm already adds its bias in the epilogue).
//
// `_gemm_epilogue(Tensor? bias, Tensor a, Tensor b, *, str act)` is an internal
// operator: act(a @ b + bias), act one of "none", "relu", "gelu_tanh". Its CUDA
// kernel is csrc/cuda/matmul.cpp (one cuBLASLt call); its CPU kernel computes
// the same from mm/add/relu/gelu (a reference; CPU regions never produce it).
#pragma once
#include "graph/graph.h"

namespace tp::stax {

// The operator, registered on first use.
const OpDef& gemm_epilogue_op();

// Backward epilogues (training regions): a product reading a gradient G whose
// column sum is also computed (a linear layer's weight and bias gradients:
// x^T @ G or G^T @ x beside sum(G, dim=0)) becomes one
// `_gemm_bgrad(a, b, *, act, keepdim) -> (a @ b, bias gradient)`, act
// "bias_grad_b" (the sum of b over its rows) or "bias_grad_a" (of a over its
// columns): cuBLASLt's BGRADA / BGRADB epilogues (csrc/cuda/matmul.cpp), so
// G is read once for both. A weight gradient x^T @ G used only transposed is
// rewritten G^T @ x^T (BGRADB with op(B) = x^T: the form the library serves).
// TP_CUDA_BACKWARD_EPILOGUES=0 turns these off.
const OpDef& gemm_bgrad_op();
int fuse_bias_gradients(graph::Graph& g);
// The tanh-GELU pair: in the forward, a product (with bias) whose gelu is taken
// and which is itself kept for the backward is one `_gemm_epilogue(..., act =
// "gelu_tanh_aux") -> (gelu(y), y)` (GELU_AUX(_BIAS)); in the backward,
// (g @ w) * gelu_tanh'(h), h the saved pre-activation (the derivative formula's
// pointwise nodes, recognised by evaluating them at probe points), is one
// `_gemm_dgelu(g, w, h)` (DGELU with h as the auxiliary input).
const OpDef& gemm_dgelu_op();
int fuse_gelu_gradients(graph::Graph& g);
int fuse_gelu_aux(graph::Graph& g);
bool backward_epilogues_enabled();

// Rewrites every matching pattern in g (before decomposition: gelu must still
// be one node), the backward ones above included; returns the number of GEMMs
// that took an epilogue.
int fuse_gemm_epilogues(graph::Graph& g);

}  // namespace tp::stax
