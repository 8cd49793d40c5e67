// The joint forward+backward graph (Section 5.2): the captured forward graph
// differentiated by reverse mode, traced into one functional graph
//   (primals..., tangents...) -> (outputs..., grads...).
// The derivative formulas are tensor operators (OpDef::backward), so running
// them under the graph tracer records the backward pass as ordinary nodes.
#pragma once
#include <memory>
#include <vector>

#include "graph/graph.h"

namespace tp::aot {

struct JointGraph {
  std::unique_ptr<graph::Graph> graph;
  int num_primals = 0;
  int num_outputs = 0;  // forward results (the joint graph's first outputs)
  // Per forward output: it carries a gradient (floating, and it depends on a
  // primal that requires grad through differentiable operators). Each such
  // output has one tangent placeholder, in output order, after the primals.
  std::vector<bool> differentiable;
  // Per primal: the joint output index of its gradient, or -1 when it needs none
  // (it does not require grad, or no output depends on it).
  std::vector<int> grad_output;
};

// `inputs` are example values of the forward graph's placeholders (the call's
// tensors); `needs_grad[i]` says which ones require grad. The joint graph is
// cleaned by CSE/DCE/simplification before it is returned.
JointGraph trace_joint(const graph::Graph& forward, const std::vector<Tensor>& inputs,
                       const std::vector<bool>& needs_grad);

}  // namespace tp::aot
