// The joint forward+backward graph (Section 5.2): the captured forward graph
// differentiated by reverse mode, traced into one functional graph
//   (primals..., tangents...) -> (outputs..., grads...).
// The derivative formulas are tensor operators (OpDef::backward), so running
// them under the graph tracer records the backward pass as ordinary nodes.
#pragma once
#include <memory>
#include <unordered_map>
#include <vector>

#include "graph/graph.h"
#include "graph/shape_env.h"
#include "graph/tracer.h"

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

// The trace alone (no passes). `guards` (optional, a symbolic forward graph)
// makes the trace symbolic: the primals' dims that are symbols in the forward
// and the tangents' dims that are bare forward symbols get those symbols, and
// `guards` receives the trace's run-time shape guards. `tangents` (optional)
// replaces the ones-filled tangent examples at the results' example sizes;
// `at` (optional: a trace at other sizes) gives the forward's symbols' values,
// at which the forward nodes' size attributes are evaluated.
JointGraph trace_joint_raw(const graph::Graph& forward, const std::vector<Tensor>& inputs,
                           const std::vector<bool>& needs_grad, const std::vector<Tensor>* tangents = nullptr,
                           std::vector<graph::ShapeGuard>* guards = nullptr,
                           const std::unordered_map<int, int64_t>* at = nullptr);

// Dynamic shapes (symbolic_joint.cpp): the joint graph of a symbolic forward
// graph, with symbolic sizes, so one partition serves every size. The
// derivative formulas compute sizes as plain ints; the trace is accepted only
// when a second trace at other sizes records the same program with the sizes
// the symbolic one predicts (a formula that baked in a size, as mean's 1/N
// does, makes it fail). nullptr (with `why`) when it is not accepted: the
// caller then trains statically. `guards`: the joint trace's shape guards, in
// the forward graph's symbol numbering (the caller adds them to its version).
std::unique_ptr<JointGraph> trace_joint_symbolic(const graph::Graph& forward, const std::vector<Tensor>& inputs,
                                                 const std::vector<bool>& needs_grad,
                                                 std::vector<graph::ShapeGuard>* guards, std::string* why);

}  // namespace tp::aot
