#include "stax/ir/call_op.h"

#include <unordered_map>


namespace tp::stax::ir {

namespace {

using F = CallFamily;
// In enumerator order (checked at first use).
constexpr CallInfo kCalls[] = {
    {CallOp::Add, "add", 2, F::Arithmetic, false, "+"},
    {CallOp::Sub, "sub", 2, F::Arithmetic, false, "-"},
    {CallOp::Mul, "mul", 2, F::Arithmetic, false, "*"},
    {CallOp::Div, "div", 2, F::Arithmetic, false, "/"},
    {CallOp::Neg, "neg", 1, F::Arithmetic, false, nullptr},
    {CallOp::Max, "max", 2, F::Arithmetic, false, nullptr},
    {CallOp::Min, "min", 2, F::Arithmetic, false, nullptr},
    {CallOp::Relu, "relu", 1, F::Arithmetic, false, nullptr},
    {CallOp::Abs, "abs", 1, F::Arithmetic, false, nullptr},
    {CallOp::Exp, "exp", 1, F::Math, true, nullptr},
    {CallOp::Log, "log", 1, F::Math, true, nullptr},
    {CallOp::Sqrt, "sqrt", 1, F::Math, true, nullptr},
    {CallOp::Tanh, "tanh", 1, F::Math, true, nullptr},
    {CallOp::Sigmoid, "sigmoid", 1, F::Math, true, nullptr},
    {CallOp::GeluGrad, "gelu_grad", 1, F::Math, true, nullptr},
    {CallOp::Eq, "eq", 2, F::Comparison, false, "=="},
    {CallOp::Ne, "ne", 2, F::Comparison, false, "!="},
    {CallOp::Lt, "lt", 2, F::Comparison, false, "<"},
    {CallOp::Le, "le", 2, F::Comparison, false, "<="},
    {CallOp::Gt, "gt", 2, F::Comparison, false, ">"},
    {CallOp::Ge, "ge", 2, F::Comparison, false, ">="},
    {CallOp::And, "and", 2, F::Logical, false, "&&"},
    {CallOp::Or, "or", 2, F::Logical, false, "||"},
    {CallOp::Xor, "xor", 2, F::Logical, false, "!="},
    {CallOp::Not, "not", 1, F::Logical, false, nullptr},
    {CallOp::BitAnd, "bitand", 2, F::Bitwise, false, "&"},
    {CallOp::BitOr, "bitor", 2, F::Bitwise, false, "|"},
    {CallOp::BitXor, "bitxor", 2, F::Bitwise, false, "^"},
    {CallOp::BitNot, "bitnot", 1, F::Bitwise, false, nullptr},
    {CallOp::Shl, "shl", 2, F::Bitwise, false, nullptr},
    {CallOp::Shr, "shr", 2, F::Bitwise, false, nullptr},
    {CallOp::Sin, "sin", 1, F::Libm, true, nullptr},
    {CallOp::Cos, "cos", 1, F::Libm, true, nullptr},
    {CallOp::Tan, "tan", 1, F::Libm, true, nullptr},
    {CallOp::Asin, "asin", 1, F::Libm, true, nullptr},
    {CallOp::Acos, "acos", 1, F::Libm, true, nullptr},
    {CallOp::Atan, "atan", 1, F::Libm, true, nullptr},
    {CallOp::Sinh, "sinh", 1, F::Libm, true, nullptr},
    {CallOp::Cosh, "cosh", 1, F::Libm, true, nullptr},
    {CallOp::Asinh, "asinh", 1, F::Libm, true, nullptr},
    {CallOp::Acosh, "acosh", 1, F::Libm, true, nullptr},
    {CallOp::Atanh, "atanh", 1, F::Libm, true, nullptr},
    {CallOp::Exp2, "exp2", 1, F::Libm, true, nullptr},
    {CallOp::Log2, "log2", 1, F::Libm, true, nullptr},
    {CallOp::Log10, "log10", 1, F::Libm, true, nullptr},
    {CallOp::Erfc, "erfc", 1, F::Libm, true, nullptr},
    {CallOp::Floor, "floor", 1, F::Libm, false, nullptr},
    {CallOp::Ceil, "ceil", 1, F::Libm, false, nullptr},
    {CallOp::Trunc, "trunc", 1, F::Libm, false, nullptr},
    {CallOp::Round, "round", 1, F::Libm, false, nullptr},
    {CallOp::Frac, "frac", 1, F::Libm, false, nullptr},
    {CallOp::Atan2, "atan2", 2, F::Libm, true, nullptr},
    {CallOp::Hypot, "hypot", 2, F::Libm, true, nullptr},
    {CallOp::Fmod, "fmod", 2, F::Libm, true, nullptr},
    {CallOp::Remainder, "remainder", 2, F::Libm, true, nullptr},
    {CallOp::Pow, "pow", 2, F::Libm, true, nullptr},
    {CallOp::PhiloxUniformF32, "philox_uniform_f32", 3, F::Random, true, nullptr},
    {CallOp::PhiloxUniformF64, "philox_uniform_f64", 3, F::Random, true, nullptr},
    {CallOp::PhiloxNormalF32, "philox_normal_f32", 3, F::Random, true, nullptr},
    {CallOp::PhiloxNormalF64, "philox_normal_f64", 3, F::Random, true, nullptr},
};
constexpr size_t kCount = sizeof(kCalls) / sizeof(kCalls[0]);

constexpr bool table_in_order() {
  for (size_t i = 0; i < kCount; ++i)
    if (static_cast<size_t>(kCalls[i].op) != i) return false;
  return true;
}
static_assert(table_in_order(), "kCalls must list the CallOp enumerators in order");
static_assert(static_cast<size_t>(CallOp::PhiloxNormalF64) + 1 == kCount, "every CallOp needs a table row");

}  // namespace

const CallInfo& info(CallOp op) { return kCalls[static_cast<size_t>(op)]; }
const char* name(CallOp op) { return info(op).name; }

std::optional<CallOp> call_op_named(const std::string& n) {
  static const auto* by_name = [] {
    auto* m = new std::unordered_map<std::string, CallOp>();
    for (auto& c : kCalls) m->emplace(c.name, c.op);
    return m;
  }();
  auto it = by_name->find(n);
  if (it == by_name->end()) return std::nullopt;
  return it->second;
}

}  // namespace tp::stax::ir
