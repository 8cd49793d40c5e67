// The operators of the expression IR's Call nodes, typed, and everything the
// compiler needs to know about each one in one table: the IR name (also the
// prelude's `tp_<name>` helper), the arity, its family, whether it is costly
// enough to be computed once and reused (scheduler), and its C-family infix
// spelling where it has one (printers). Adding an operator means adding one
// enumerator and one table row; no pass compares names.
#pragma once
#include <optional>
#include <string>

namespace tp::stax::ir {

enum class CallOp : unsigned char {
  // arithmetic (operands and result of the node's dtype)
  Add, Sub, Mul, Div, Neg, Max, Min, Relu, Abs,
  // math with own vector forms in the prelude (GeluGrad: Phi(x) + x phi(x), the erf
  // gelu's derivative; formed on the CPU from its unfused ops, gelu_grad_fusion.h)
  Exp, Log, Sqrt, Tanh, Sigmoid, GeluGrad,
  // comparisons: operands of one dtype, result bool
  Eq, Ne, Lt, Le, Gt, Ge,
  // logical: bool operands and result
  And, Or, Xor, Not,
  // bitwise: integer operands and result (shifts: CUDA printer only, eager's
  // rules for amounts outside 0..63, see pointwise.cpp)
  BitAnd, BitOr, BitXor, BitNot, Shl, Shr,
  // float math backed by libm (lane by lane in vector code)
  Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh,
  Exp2, Log2, Log10, Erfc, Floor, Ceil, Trunc, Round, Frac,
  Atan2, Hypot, Fmod, Remainder, Pow,
  // counter-based random draws (key, first counter, flat element index), int64
  // operands: element i of eager's rand/randn (ops/generator.h, random_fill)
  PhiloxUniformF32, PhiloxUniformF64, PhiloxNormalF32, PhiloxNormalF64,
};

enum class CallFamily : unsigned char { Arithmetic, Math, Comparison, Logical, Bitwise, Libm, Random };

struct CallInfo {
  CallOp op;
  const char* name;   // IR name; the prelude defines tp_<name> unless `infix` is set
  int arity;
  CallFamily family;
  bool expensive;     // worth storing once and re-reading rather than recomputing
  const char* infix;  // "+", "==", ... or nullptr
};

const CallInfo& info(CallOp op);
const char* name(CallOp op);
inline bool is_comparison(CallOp op) { return info(op).family == CallFamily::Comparison; }
inline bool is_libm(CallOp op) { return info(op).family == CallFamily::Libm; }
inline bool is_random(CallOp op) { return info(op).family == CallFamily::Random; }
// The operator with this IR name, if any.
std::optional<CallOp> call_op_named(const std::string& name);

}  // namespace tp::stax::ir
