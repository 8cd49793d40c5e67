// Forward-mode automatic differentiation (dual tensors, Section 5 / issue 10).
//
// A dual tensor is an ordinary tensor whose tangent is kept in a side table
// keyed by its TensorImpl for the current dual level. While a level is open,
// the dispatcher hook (autograd/record.cpp) sends every operator call with a
// dual input here: the primal results are computed as usual (reverse-mode
// recording included), then the operator's tangent formula — tensor ops on the
// primal inputs/outputs and the input tangents — gives the results' tangents.
// Formulas are looked up by operator name; one file per family registers them
// (jvp_rules_*.cpp). An op reached with a dual input and no formula raises
// NotImplementedError naming it: never a silent zero tangent.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ops/registry.h"

namespace tp::autograd::forward_ad {

// What a tangent formula may read. Tangents are undefined where the input has
// none (a constant); formulas treat an undefined tangent as zero.
struct JvpArgs {
  const OpDef& op;
  const std::vector<Tensor>& inputs;   // primal inputs (for in-place ops: self before the write)
  const std::vector<Tensor>& outputs;  // primal outputs
  const std::vector<Tensor>& tangents;  // one per input
  const Attrs& attrs;
  bool has(size_t i) const { return i < tangents.size() && tangents[i].defined(); }
};
// One tangent per output (undefined: the output gets none).
using JvpFn = std::vector<Tensor> (*)(const JvpArgs& a);

void register_jvp(const char* op_name, JvpFn fn);
JvpFn find_jvp(const std::string& op_name);  // null if the op has no formula

// Dual levels. Only one level may be open at a time (nesting is refused, with
// the error naming dual_level); the level number counts up from 0.
int64_t enter_dual_level();
void exit_dual_level(int64_t level);
int64_t current_level();  // -1 when none is open
// Cheap test the dispatcher hook makes on every call.
bool active();

// make_dual: a view of `primal` (keeping its reverse-mode history) carrying `tangent`.
Tensor make_dual(const Tensor& primal, const Tensor& tangent, int64_t level);
// (primal view, tangent or undefined) at `level`.
std::pair<Tensor, Tensor> unpack_dual(const Tensor& t, int64_t level);
Tensor tangent_of(const Tensor& t);  // at the current level; undefined if none
// Gives `to` (an alias of `from`) from's tangent, if a level is open and it has one.
void copy_tangent(const Tensor& from, const Tensor& to);

// The forward-mode part of the dispatcher hook: `inner` computes the primal results.
using InnerHook = std::vector<Tensor> (*)(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs);
std::vector<Tensor> dispatch(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                             InnerHook inner);

// Names of the operators that have a tangent formula (for coverage listings).
std::vector<std::string> ops_with_formula();

}  // namespace tp::autograd::forward_ad
