// The erf gelu's derivative as one operation in CPU kernels.
//
// The derivative formula (ops/unary_math_ops.cpp, d_gelu) is written with
// primitive operators so every backend and the joint graph see it:
//   erfc(x * -1/sqrt2) * 0.5 + x * (exp(x * x * -0.5) * 1/sqrt(2 pi)).
// erfc computes exp(-(x/sqrt2)^2) internally, so the separate exp repeats
// most of that work (about a quarter of Example 5.1's backward kernel). On
// float32 bodies this pass replaces the sum by CallOp::GeluGrad, whose
// prelude function (codegen/cpp/prelude.cpp, tp_gelu_grad) reuses erfc's exp.
// Only the CPU printer knows the call, and only with 32- or 64-byte vectors
// (erfc's own polynomial needs FMA); the CUDA path never runs this pass.
#pragma once
#include "stax/ir/loop_ir.h"

namespace tp::stax {

// Rewrites every ComputeNode body of `program` in place; returns the number
// of sums replaced.
int fuse_gelu_grad(ir::LoopProgram& program);

}  // namespace tp::stax
