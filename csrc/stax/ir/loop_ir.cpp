#include "stax/ir/loop_ir.h"

#include <cmath>
#include <sstream>
#include <unordered_set>

namespace tp::stax::ir {

Expr constant(const Scalar& v, DType dtype) {
  auto n = std::make_shared<ExprNode>();
  n->op = ExprOp::Const;
  n->dtype = dtype;
  // A float32 constant holds its float32 value, so that widening it later
  // (cast to float64) gives what eager's float32 tensor widens to.
  n->value = dtype == DType::Float32 && v.is_float() ? Scalar(static_cast<double>(static_cast<float>(v.to_double()))) : v;
  return n;
}

Expr load(int buffer, IndexExpr index, DType dtype) {
  auto n = std::make_shared<ExprNode>();
  n->op = ExprOp::Load;
  n->dtype = dtype;
  n->buffer = buffer;
  n->index = std::move(index);
  return n;
}

Expr call(std::string fn, std::vector<Expr> args, DType dtype) {
  auto n = std::make_shared<ExprNode>();
  n->op = ExprOp::Call;
  n->dtype = dtype;
  n->fn = std::move(fn);
  n->args = std::move(args);
  return n;
}

Expr where(Expr cond, Expr a, Expr b) {
  auto n = std::make_shared<ExprNode>();
  n->op = ExprOp::Where;
  n->dtype = a->dtype;
  n->args = {std::move(cond), std::move(a), std::move(b)};
  return n;
}

Expr cast(Expr x, DType dtype) {
  if (x->dtype == dtype) return x;
  if (x->op == ExprOp::Const) {
    // Fold the conversion, rounding the value as the cast would: a float32
    // constant later widened to float64 must be 0.1f, not 0.1.
    const Scalar& v = x->value;
    switch (dtype) {
      case DType::Float32:
        return constant(Scalar(static_cast<double>(static_cast<float>(v.to_double()))), dtype);
      case DType::Float64: return constant(Scalar(v.to_double()), dtype);
      case DType::Bool: return constant(Scalar(v.is_float() ? v.to_double() != 0.0 : v.to_int() != 0), dtype);
      case DType::Int64:
        if (!v.is_float()) return constant(Scalar(v.to_int()), dtype);
        if (std::isfinite(v.to_double()) && std::fabs(v.to_double()) < 9.2e18)
          return constant(Scalar(static_cast<int64_t>(v.to_double())), dtype);  // truncation
        break;  // undefined in C++: leave it to the run-time conversion, as eager's
      default: break;
    }
  }
  auto n = std::make_shared<ExprNode>();
  n->op = ExprOp::Cast;
  n->dtype = dtype;
  n->args = {std::move(x)};
  return n;
}

bool is_comparison(const std::string& fn) {
  return fn == "eq" || fn == "ne" || fn == "lt" || fn == "le" || fn == "gt" || fn == "ge";
}

std::string to_string(const Expr& e) {
  switch (e->op) {
    case ExprOp::Const: return e->value.repr();
    case ExprOp::Load: return "load(b" + std::to_string(e->buffer) + ", " + e->index.to_string() + ")";
    case ExprOp::Call: {
      std::string s = e->fn + "(";
      for (size_t i = 0; i < e->args.size(); ++i) s += (i ? ", " : "") + to_string(e->args[i]);
      return s + ")";
    }
    case ExprOp::Where:
      return "where(" + to_string(e->args[0]) + ", " + to_string(e->args[1]) + ", " + to_string(e->args[2]) + ")";
    case ExprOp::Cast: return std::string(dtype_name(e->dtype)) + "(" + to_string(e->args[0]) + ")";
  }
  return "?";
}

const char* reduce_op_name(ReduceOp r) {
  switch (r) {
    case ReduceOp::None: return "none";
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

IndexExpr LoopProgram::new_var(const std::string& prefix) {
  int id = next_var_id++;
  std::string name = prefix;
  name += std::to_string(id);
  // Variables are C++ names in generated code: "i" + 64 would be the prelude's
  // integer type i64 (a compile error that only a program with 64+ loop
  // variables, e.g. many outputs, reaches).
  if (name == "i64") name += "_";
  return var(id, name);
}

std::string LoopProgram::to_string() const {
  std::ostringstream os;
  for (auto& b : buffers)
    os << "buffer " << b.name << " (b" << b.id << "): " << dtype_name(b.dtype) << shape_str(b.sizes) << "\n";
  for (auto& n : nodes) {
    os << "node " << n.id << " [" << n.origin << "] -> b" << n.out_buffer << "[" << n.store_index.to_string()
       << "] over " << shape_str(n.ranges);
    if (n.is_reduction()) os << " " << reduce_op_name(n.reduce) << " over " << shape_str(n.reduce_ranges);
    os << ": " << ir::to_string(n.body) << "\n";
  }
  return os.str();
}

std::vector<const ExprNode*> loads_of(const Expr& e) {
  std::vector<const ExprNode*> out;
  std::unordered_set<const ExprNode*> seen;
  std::vector<const ExprNode*> stack{e.get()};
  while (!stack.empty()) {
    const ExprNode* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (n->op == ExprOp::Load) out.push_back(n);
    for (auto& a : n->args) stack.push_back(a.get());
  }
  return out;
}

}  // namespace tp::stax::ir
