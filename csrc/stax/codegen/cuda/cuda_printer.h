// CUDA code generation (Section 8, issue 12 item 4): the KernelPrinter for
// NVIDIA GPUs. A LoopProgram -> one CUDA translation unit (NVRTC) with one
// `extern "C" __global__` kernel per compute node, launched in order by the
// host; every kernel takes all buffers of the region as pointers, in buffer
// order (PrintedUnit::slot_buffer). Pointwise nodes are grid-stride loops, one
// element per thread; reductions give one block per output element (a row)
// and combine the threads' partials with warp shuffles, accumulating float32
// in float32 and float64 in float64. First step: scans, guards, indirect
// loads, extern calls, symbolic sizes and random draws raise
// NotImplementedError (the region falls back, or raises under strict_native).
#pragma once
#include "stax/codegen/kernel_printer.h"

namespace tp::stax::codegen {

class CudaPrinter final : public KernelPrinter {
 public:
  const char* language() const override { return "cuda"; }
  PrintedUnit print(const ir::LoopProgram& program, const Schedule& schedule) const override;
};

// Threads per block of the reduction kernels (a multiple of 32).
constexpr int kCudaReduceThreads = 256;

}  // namespace tp::stax::codegen
