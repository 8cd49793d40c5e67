#include "stax/ir/extern_call.h"

#include <functional>
#include <sstream>

namespace tp::stax::ir {

bool ExternOperand::operator==(const ExternOperand& o) const {
  return kind == o.kind && buffer == o.buffer && sizes == o.sizes && strides == o.strides && offset == o.offset &&
         dtype == o.dtype && (kind != Kind::Number || value == o.value) && size_exprs == o.size_exprs &&
         stride_exprs == o.stride_exprs && offset_expr == o.offset_expr;
}

bool ExternCall::operator==(const ExternCall& o) const {
  // origin is a comment, not part of what the call computes.
  return op == o.op && attrs == o.attrs && sym_attrs == o.sym_attrs && kind == o.kind &&
         before_node == o.before_node && inputs == o.inputs && outputs == o.outputs;
}

const char* extern_kind_name(ExternKind k) {
  switch (k) {
    case ExternKind::Kernel: return "kernel";
    case ExternKind::Gemm: return "gemm";
  }
  return "?";
}

std::string to_string(const ExternCall& e) {
  std::ostringstream os;
  os << "extern " << e.id << " " << e.op << "(";
  for (size_t i = 0; i < e.inputs.size(); ++i) {
    const ExternOperand& a = e.inputs[i];
    if (i) os << ", ";
    switch (a.kind) {
      case ExternOperand::Kind::Absent: os << "None"; break;
      case ExternOperand::Kind::Number: os << a.value.repr(); break;
      case ExternOperand::Kind::Buffer:
        os << "b" << a.buffer << "<" << dtype_name(a.dtype) << shape_str(a.sizes) << " strides "
           << shape_str(a.strides) << " +" << a.offset;
        if (!a.size_exprs.empty()) {  // symbolic: the expressions, which the hint values only exemplify
          os << " sym";
          for (auto& x : a.size_exprs) os << " " << x.to_string();
          os << " strides";
          for (auto& x : a.stride_exprs) os << " " << x.to_string();
          os << " +" << a.offset_expr.to_string();
        }
        os << ">";
        break;
    }
  }
  os << ")";
  if (!e.attrs.empty()) os << " {" << e.attrs << "}";
  for (auto& [name, exprs] : e.sym_attrs) {  // the expressions, which the printed values only exemplify
    os << " sym " << name << "=[";
    for (size_t i = 0; i < exprs.size(); ++i) os << (i ? ", " : "") << exprs[i].to_string();
    os << "]";
  }
  os << " -> ";
  for (size_t i = 0; i < e.outputs.size(); ++i) os << (i ? ", b" : "b") << e.outputs[i];
  os << " [" << extern_kind_name(e.kind) << ", before node " << e.before_node << "]";
  return os.str();
}

size_t hash(const ExternCall& e) {
  // The printed form names every field that operator== compares (not origin).
  return std::hash<std::string>()(to_string(e));
}

}  // namespace tp::stax::ir
