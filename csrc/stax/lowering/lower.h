// Lowering (Section 6): a captured, decomposed Graph -> LoopProgram.
//
// Every value is first a *compute function* from an index to an expression;
// pointwise operators and views compose those functions, so a chain of them
// never touches memory (Property 6.1). Only reductions and region outputs are
// written into buffers. An operator without a loop lowering that has an eager
// kernel becomes an extern call (lowering/extern.cpp) on buffers; one that
// cannot run inside a region (random, data-dependent shape) raises
// tp::BackendError naming it (with TP_STAX_LOWER_DEBUG=1 also printed).
#pragma once
#include <map>
#include <memory>
#include <tuple>

#include "graph/graph.h"
#include "stax/ir/loop_ir.h"

namespace tp::stax {

struct Value;

struct LoweredRegion {
  ir::LoopProgram program;
  std::vector<Tensor> constants;  // get_attr tensors, passed as extra inputs, in Constant-buffer order
  std::vector<Attrs> extern_attrs;  // per ExternCall (by id): the operator's attributes
  // Dynamic shapes: the graph's symbols (size_var(k) = symbols[k]); empty when static.
  std::vector<graph::SymbolInfo> symbols;
  // float16/bfloat16 buffers allowed: both printers load them into float
  // registers and round at stores (region_dtype).
  bool half_floats = false;
  // Lowered for the CUDA printer: its own choices (no Welford or pair nodes,
  // no status word, integer division and shifts generated, conv bias fused).
  bool cuda = false;
  // Value of a size expression at the symbols' hints (the example call).
  int64_t hint(const ir::IndexExpr& e) const;
  // Lowering state: the mean a var/std rule computed (a Welford node's mean
  // result, or the symbolic two-pass rule's sum / N) by (input graph node,
  // reduced dims, keepdim), so that a `mean` of the same input over the same
  // dims reads it instead of summing again (var_mean / std_mean reach Stax as
  // var + mean: one pass instead of a Welford pass plus a sum).
  std::map<std::tuple<const graph::Node*, std::vector<bool>, bool>, std::shared_ptr<const Value>> known_means;
};

// `cuda`: for the CUDA printer (LoweredRegion::cuda); otherwise the C++ one.
LoweredRegion lower(const graph::Graph& g, bool cuda = false);

// Whether a region's buffers and registers may have dtype t. Both printers
// take the four compute dtypes and every narrow integer (uint8, int8, int16,
// int32), each in registers of its own width, so arithmetic wraps as
// PyTorch's does, and (half_floats) the 16-bit floats in float registers.
inline bool region_dtype(DType t, bool half_floats) {
  return is_compute_dtype(t) || is_integral(t, false) || (half_floats && (t == DType::Float16 || t == DType::BFloat16));
}

}  // namespace tp::stax
