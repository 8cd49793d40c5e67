// Running a Stax region on a CUDA GPU (issue 12 item 4, first step): the
// region is lowered as for the CPU, printed by the CUDA printer, its kernels
// compiled by NVRTC for the device's exact architecture and launched in node
// order; outputs and temps come from the CUDA caching allocator. What the
// printer does not print yet raises NotImplementedError.
#pragma once
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"

namespace tp::stax {

// The CUDA source the CUDA printer makes for g.
std::string cuda_source(const graph::Graph& g);
// Runs g on `inputs` (CUDA tensors of one device); returns its outputs.
std::vector<Tensor> run_cuda(const graph::Graph& g, const std::vector<Tensor>& inputs);

}  // namespace tp::stax
