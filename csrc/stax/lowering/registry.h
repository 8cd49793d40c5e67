// The lowering registry: one rule per graph operator, registered by name from
// one file per operator family (pointwise, views, reductions, factories,
// indexing, random, extern). A rule turns the operator into a Value — a
// compute function composed from its operands' functions, or a buffer written
// by a compute node or an extern call. An operator without a rule makes the
// region fall back to eager (or raise under strict_native), naming it.
#pragma once
#include <functional>
#include <string>

#include "stax/lowering/context.h"

namespace tp::stax {

using LoweringFn = std::function<Value(LoweringContext&)>;

// Registers (or replaces: tests plant faulty rules this way) the rule for `op`,
// the operator's registry name including its overload (`masked_fill.Scalar`).
void register_lowering(const std::string& op, LoweringFn fn);
// The rule for `op`; empty when it has none.
LoweringFn find_lowering(const std::string& op);
// Removes a rule (tests restore the built-in one with restore_builtin_lowering).
void unregister_lowering(const std::string& op);
void restore_builtin_lowering(const std::string& op);
// Dynamic shapes: whether the built-in rule of `op` handles symbolic sizes
// (Value::sym_sizes). A node touching a symbolic size whose rule does not is
// lowered as an extern call of its eager kernel, or refused ("symbolic shapes").
bool handles_symbolic_shapes(const std::string& op);
// Composites (operators with a decomposition) that have a native loop rule:
// the Stax pipeline's decomposition pass leaves them whole (layer_norm, var, std, ...).
bool keeps_whole_for_stax(const std::string& op);

}  // namespace tp::stax
