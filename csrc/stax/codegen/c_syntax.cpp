#include "stax/codegen/c_syntax.h"

#include <cmath>
#include <cstdint>
#include <cstdio>

namespace tp::stax::codegen {

std::string c_literal(const Scalar& v, DType t, const FloatSpellings& spell) {
  switch (t) {
    case DType::Bool: return v.to_bool() ? "true" : "false";
    case DType::Int64: {
      int64_t i = v.to_int();
      // -9223372036854775808LL is unary minus on a literal too large for long long.
      if (i == INT64_MIN) return "(-9223372036854775807LL - 1)";
      return std::to_string(i) + "LL";
    }
    case DType::UInt8:  // the CUDA printer's narrow registers: the value wrapped to the width
      return std::to_string(static_cast<uint8_t>(v.to_int()));
    case DType::Int8: return std::to_string(static_cast<int8_t>(v.to_int()));
    case DType::Int16: return std::to_string(static_cast<int16_t>(v.to_int()));
    case DType::Int32: {  // the CUDA printer's int registers
      const int64_t i = v.to_int();
      if (i == INT32_MIN) return "(-2147483647 - 1)";
      return std::to_string(i);
    }
    case DType::Float32:
    case DType::Float64: {
      const bool f32 = t == DType::Float32;
      // Round to float first: a finite double may overflow to inf as float32.
      const double d = f32 ? static_cast<double>(static_cast<float>(v.to_double())) : v.to_double();
      if (std::isnan(d)) return f32 ? spell.nan_f32 : spell.nan_f64;
      if (std::isinf(d)) return std::string(d < 0 ? "-" : "") + (f32 ? spell.inf_f32 : spell.inf_f64);
      char buf[64];
      std::snprintf(buf, sizeof buf, f32 ? "%.9g" : "%.17g", d);
      std::string s(buf);
      if (s.find_first_of(".en") == std::string::npos) s += ".0";
      return f32 ? s + "f" : s;
    }
    default: break;
  }
  return "?";
}

std::string c_call(ir::CallOp op, const std::vector<std::string>& a) {
  const ir::CallInfo& ci = ir::info(op);
  if (ci.infix) return a[0] + " " + ci.infix + " " + a[1];
  if (op == ir::CallOp::Not) return "!" + a[0];
  if (op == ir::CallOp::BitNot) return "~" + a[0];
  std::string s = std::string("tp_") + ci.name + "(";
  for (size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + a[i];
  return s + ")";
}

std::string c_reduce_identity(ir::ReduceOp r, DType t, const FloatSpellings& spell) {
  switch (r) {
    case ir::ReduceOp::Sum: return c_literal(Scalar(int64_t(0)), t, spell);
    case ir::ReduceOp::Prod: return c_literal(Scalar(int64_t(1)), t, spell);
    case ir::ReduceOp::Max:
      if (t == DType::Bool) return "false";
      if (t == DType::Int32) return "(-2147483647 - 1)";
      if (t == DType::Int16) return "(-32767 - 1)";
      if (t == DType::Int8) return "(-127 - 1)";
      if (t == DType::UInt8) return "0";
      return is_floating(t) ? c_literal(Scalar(-INFINITY), t, spell) : std::string("(-9223372036854775807LL - 1)");
    case ir::ReduceOp::Min:
      if (t == DType::Bool) return "true";
      if (t == DType::Int32) return "2147483647";
      if (t == DType::Int16) return "32767";
      if (t == DType::Int8) return "127";
      if (t == DType::UInt8) return "255";
      return is_floating(t) ? c_literal(Scalar(INFINITY), t, spell) : std::string("9223372036854775807LL");
    default: break;
  }
  return "0";
}

std::string c_combine(ir::ReduceOp r, const std::string& a, const std::string& b) {
  switch (r) {
    case ir::ReduceOp::Sum: return "(" + a + " + " + b + ")";
    case ir::ReduceOp::Prod: return "(" + a + " * " + b + ")";
    case ir::ReduceOp::Max: return "tp_max(" + a + ", " + b + ")";
    case ir::ReduceOp::Min: return "tp_min(" + a + ", " + b + ")";
    default: break;
  }
  return a;
}

const char* c_type(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::Int64: return "i64";
    case DType::Float32: return "float";
    case DType::Float64: return "double";
    default: return nullptr;
  }
}

}  // namespace tp::stax::codegen
