// C-family source text shared by the printers: constants of the loop IR and
// calls of its operators.
// Finite values print exactly (%.9g for float32 after rounding to float, %.17g
// for float64) and int64's minimum without overflowing the literal; NaN and
// infinity are spelled by the target (GCC builtins on the CPU, bit casts in CUDA).
#pragma once
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/scalar.h"
#include "stax/ir/call_op.h"
#include "stax/ir/loop_ir.h"

namespace tp::stax::codegen {

struct FloatSpellings {
  const char* nan_f32;
  const char* nan_f64;
  const char* inf_f32;  // positive infinity; a minus sign is prefixed for -inf
  const char* inf_f64;
};

// nullopt-free: returns "?" for a dtype no printer emits (narrow dtypes never reach them).
std::string c_literal(const Scalar& v, DType t, const FloatSpellings& spell);

// The identity of a Sum/Prod/Max/Min accumulator of type t, spelled as a
// literal ("0" for the others: pair reductions have their own emitters).
// Max/Min start from the extreme value *of the accumulator's type*: for bool
// that is false (true), not INT64_MIN converted to bool.
std::string c_reduce_identity(ir::ReduceOp r, DType t, const FloatSpellings& spell);

// a (+) b for a Sum/Prod/Max/Min accumulator, as an expression (tp_max/tp_min
// come from each printer's prelude); `a` for the others (pair reductions have
// their own emitters).
std::string c_combine(ir::ReduceOp r, const std::string& a, const std::string& b);

// The C type of a value of the loop IR (i64 is the prelude's int64 typedef);
// nullptr for a dtype no printer emits (narrow dtypes: the lowering refuses them).
const char* c_type(DType t);

// A call of `op` on already printed operands: its infix form where it has one,
// `!a` / `~a` for the logical and bitwise not, otherwise the prelude's tp_<name>(...).
std::string c_call(ir::CallOp op, const std::vector<std::string>& args);

}  // namespace tp::stax::codegen
