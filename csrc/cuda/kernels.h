// Eager CUDA kernels: one NVRTC-compiled kernel per (operator, dtype, rank),
// generated from a source template, compiled for the device's exact
// architecture (sm_XY from its compute capability) and cached in memory by
// source text. Covered: elementwise float32/float64 add, sub, mul, div (any
// strides, broadcasting), neg, exp, log, relu, sigmoid, tanh, sqrt, the
// strided copy behind clone/contiguous/copy_, and sum over the last dim (or
// all dims) of a contiguous tensor; the matmul family through cuBLASLt
// (matmul.h).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ops/registry.h"

namespace tp::cuda {

// Installs the dispatcher's CUDA hook (ops/dispatch.h). Called once by the
// Python module at import; harmless without a GPU.
void install_dispatch_hook();
// Every kernel source this layer can generate, as (name, source): the tests
// compile each with NVRTC even on machines without a GPU.
std::vector<std::pair<std::string, std::string>> all_kernel_sources();
// Kernels compiled so far in this process (the in-memory cache's size).
size_t compiled_kernel_count();

// Launches kernel `name` of `source` (compiled and cached like the eager
// kernels: NVRTC for the device's exact sm_XY, CUBIN on disk keyed by source,
// arch and NVRTC version) on the default stream. Stax's CUDA regions use it.
void launch_generated(int device, const std::string& name, const std::string& source, unsigned grid,
                      unsigned block, void** args);

// The same, split for compiled regions: the function handle is looked up once
// (at compile time) and each call only launches it. `block_y` > 1 gives a
// two-dimensional block (column reductions).
void* generated_function(int device, const std::string& name, const std::string& source);
void launch_function(int device, void* function, unsigned grid, unsigned block_x, unsigned block_y, void** args,
                     const char* what);

// A second chance for an operator none of the kernels above covers: Stax
// generates, compiles and caches a kernel for it (stax/backend/cuda_eager.cpp
// installs it; this layer sits below Stax). It returns false when it cannot,
// and the dispatcher then raises NotImplementedError naming the operator.
using GeneratedOpFn = bool (*)(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                               const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);
void set_generated_op_fallback(GeneratedOpFn fn);

}  // namespace tp::cuda
