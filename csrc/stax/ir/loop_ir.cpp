#include "stax/ir/loop_ir.h"

#include <cmath>
#include <cstring>
#include <mutex>
#include <sstream>
#include <unordered_map>

namespace tp::stax::ir {

namespace {

// A constant's identity is its kind and its bits: 0.0 and -0.0 are different
// values (Scalar's == calls them equal), and a NaN is equal to itself.
uint64_t scalar_bits(const Scalar& v) {
  if (v.is_float()) {
    double d = v.to_double();
    uint64_t b;
    std::memcpy(&b, &d, sizeof b);
    return b;
  }
  return static_cast<uint64_t>(v.to_int());
}
int scalar_kind(const Scalar& v) { return v.is_float() ? 2 : v.is_bool() ? 1 : 0; }

size_t mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

size_t shallow_hash(const ExprNode& n) {
  size_t h = mix(static_cast<size_t>(n.op), static_cast<size_t>(n.dtype));
  switch (n.op) {
    case ExprOp::Const: h = mix(mix(h, scalar_bits(n.value)), scalar_kind(n.value)); break;
    case ExprOp::Load: h = mix(mix(h, static_cast<size_t>(n.buffer)), n.index.hash()); break;
    case ExprOp::Index: h = mix(h, n.index.hash()); break;
    case ExprOp::Guard: h = mix(h, scalar_bits(n.value)); break;
    case ExprOp::Call: h = mix(h, static_cast<size_t>(n.fn)); break;
    default: break;
  }
  for (auto& a : n.args) h = mix(h, std::hash<const void*>()(a.get()));
  return h;
}

bool shallow_equal(const ExprNode& a, const ExprNode& b) {
  if (a.op != b.op || a.dtype != b.dtype || a.args.size() != b.args.size()) return false;
  for (size_t i = 0; i < a.args.size(); ++i)
    if (a.args[i].get() != b.args[i].get()) return false;
  switch (a.op) {
    case ExprOp::Const:
      return scalar_kind(a.value) == scalar_kind(b.value) && scalar_bits(a.value) == scalar_bits(b.value);
    // Spelling too, not only ==: the table is shared by every program, and
    // another live program may name the same variable id differently (r0 in a
    // reduction, i0 in a pointwise lowering). Handing back its node printed
    // the other program's name, undeclared here (issue 12/11: an eager CUDA
    // sum's kernel read `i0` where its loop declared `r0`).
    case ExprOp::Load: return a.buffer == b.buffer && identical(a.index, b.index);
    case ExprOp::Index: return identical(a.index, b.index);
    case ExprOp::Guard: return scalar_bits(a.value) == scalar_bits(b.value);
    case ExprOp::Call: return a.fn == b.fn;
    default: return true;
  }
}

// The table holds weak references: a node lives as long as some expression
// uses it. Expired entries are swept when the table has doubled since the last
// sweep, so the table stays proportional to the live nodes.
struct InternTable {
  std::mutex mu;
  std::unordered_multimap<size_t, std::weak_ptr<const ExprNode>> nodes;
  size_t sweep_at = 4096;
};

InternTable& table() {
  static InternTable* t = new InternTable();  // never destroyed: nodes may outlive static destruction order
  return *t;
}

}  // namespace

Expr intern(ExprNode proto) {
  size_t h = shallow_hash(proto);
  InternTable& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto range = t.nodes.equal_range(h);
  for (auto it = range.first; it != range.second; ++it)
    if (Expr e = it->second.lock(); e && shallow_equal(*e, proto)) return e;
  Expr e = std::make_shared<const ExprNode>(std::move(proto));
  if (t.nodes.size() >= t.sweep_at) {
    for (auto it = t.nodes.begin(); it != t.nodes.end();)
      it = it->second.expired() ? t.nodes.erase(it) : std::next(it);
    t.sweep_at = std::max<size_t>(4096, 2 * t.nodes.size());
  }
  t.nodes.emplace(h, e);
  return e;
}

Expr constant(const Scalar& v, DType dtype) {
  ExprNode n0;
  auto* n = &n0;
  n->op = ExprOp::Const;
  n->dtype = dtype;
  // A float32 constant holds its float32 value, so that widening it later
  // (cast to float64) gives what eager's float32 tensor widens to.
  n->value = dtype == DType::Float32 && v.is_float() ? Scalar(static_cast<double>(static_cast<float>(v.to_double()))) : v;
  return intern(std::move(n0));
}

Expr load(int buffer, IndexExpr index, DType dtype) {
  ExprNode n0;
  auto* n = &n0;
  n->op = ExprOp::Load;
  n->dtype = dtype;
  n->buffer = buffer;
  n->index = std::move(index);
  return intern(std::move(n0));
}

Expr load_indirect(int buffer, IndexExpr index, Expr offset, DType dtype) {
  ExprNode n;
  n.op = ExprOp::Load;
  n.dtype = dtype;
  n.buffer = buffer;
  n.index = std::move(index);
  n.args = {std::move(offset)};
  return intern(std::move(n));
}

Expr index_value(IndexExpr index) {
  if (index.is_const()) return constant(Scalar(index.const_value()), DType::Int64);
  ExprNode n;
  n.op = ExprOp::Index;
  n.dtype = DType::Int64;
  n.index = std::move(index);
  return intern(std::move(n));
}

Expr guard(Expr ok, Expr value, int code, Expr report) {
  ExprNode n;
  n.op = ExprOp::Guard;
  n.dtype = value->dtype;
  n.value = Scalar(int64_t{code});
  n.args = {std::move(ok), std::move(value)};
  if (report) n.args.push_back(std::move(report));
  return intern(std::move(n));
}

Expr call(CallOp fn, std::vector<Expr> args, DType dtype) {
  ExprNode n0;
  auto* n = &n0;
  n->op = ExprOp::Call;
  n->dtype = dtype;
  n->fn = fn;
  n->args = std::move(args);
  return intern(std::move(n0));
}

Expr where(Expr cond, Expr a, Expr b) {
  ExprNode n0;
  auto* n = &n0;
  n->op = ExprOp::Where;
  n->dtype = a->dtype;
  n->args = {std::move(cond), std::move(a), std::move(b)};
  return intern(std::move(n0));
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
      case DType::Float16:
      case DType::BFloat16:
        // (CUDA regions only) a number meeting a 16-bit tensor: kept at float
        // precision, as eager's float opmath keeps it; the result rounds at the store.
        return constant(Scalar(static_cast<double>(static_cast<float>(v.to_double()))), dtype);
      case DType::Bool: return constant(Scalar(v.is_float() ? v.to_double() != 0.0 : v.to_int() != 0), dtype);
      case DType::Int64:
        if (!v.is_float()) return constant(Scalar(v.to_int()), dtype);
        if (std::isfinite(v.to_double()) && std::fabs(v.to_double()) < 9.2e18)
          return constant(Scalar(static_cast<int64_t>(v.to_double())), dtype);  // truncation
        break;  // undefined in C++: leave it to the run-time conversion, as eager's
      default: break;
    }
  }
  ExprNode n;
  n.op = ExprOp::Cast;
  n.dtype = dtype;
  n.args = {std::move(x)};
  return intern(std::move(n));
}

namespace {

// Prints one node, its arguments by name where they are bound.
std::string print_node(const ExprNode* e, const std::unordered_map<const ExprNode*, std::string>& bound,
                       std::unordered_map<const ExprNode*, std::string>& memo) {
  if (auto b = bound.find(e); b != bound.end()) return b->second;
  if (auto m = memo.find(e); m != memo.end()) return m->second;
  auto arg = [&](size_t i) { return print_node(e->args[i].get(), bound, memo); };
  std::string s;
  switch (e->op) {
    case ExprOp::Const: s = e->value.repr(); break;
    case ExprOp::Load:
      s = "load(b" + std::to_string(e->buffer) + ", " + e->index.to_string() + (e->args.empty() ? "" : " + " + arg(0)) + ")";
      break;
    case ExprOp::Index: s = "index(" + e->index.to_string() + ")"; break;
    case ExprOp::Guard: s = "guard(" + arg(0) + ", " + arg(1) + ", code " + e->value.repr() + ")"; break;
    case ExprOp::Call: {
      s = std::string(name(e->fn)) + "(";
      for (size_t i = 0; i < e->args.size(); ++i) s += (i ? ", " : "") + arg(i);
      s += ")";
      break;
    }
    case ExprOp::Where: s = "where(" + arg(0) + ", " + arg(1) + ", " + arg(2) + ")"; break;
    case ExprOp::Cast: s = std::string(dtype_name(e->dtype)) + "(" + arg(0) + ")"; break;
  }
  memo[e] = s;
  return s;
}

}  // namespace

std::string to_string(const Expr& e) {
  // Parents per node, counted over the DAG's edges (each node expanded once).
  std::unordered_map<const ExprNode*, int> uses;
  std::vector<const ExprNode*> order;  // post-order: arguments before users
  std::vector<std::pair<const ExprNode*, size_t>> stack{{e.get(), 0}};
  uses[e.get()] = 0;
  while (!stack.empty()) {
    auto& [n, i] = stack.back();
    if (i < n->args.size()) {
      const ExprNode* c = n->args[i++].get();
      if (uses[c]++ == 0) stack.push_back({c, 0});
    } else {
      order.push_back(n);
      stack.pop_back();
    }
  }
  std::unordered_map<const ExprNode*, std::string> bound, memo;
  std::string lets;
  for (const ExprNode* n : order) {
    if (n == e.get() || uses[n] < 2 || n->args.empty()) continue;
    std::string name = "$";  // appended, not operator+: GCC 12 warns falsely (-Wrestrict)
    name += std::to_string(bound.size());
    lets += name + " = " + print_node(n, bound, memo) + "; ";
    bound[n] = name;
  }
  std::string body = print_node(e.get(), bound, memo);
  if (lets.empty()) return body;
  std::string out = "[";
  out += lets.substr(0, lets.size() - 2);
  out += "] ";
  out += body;
  return out;
}

const char* reduce_op_name(ReduceOp r) {
  switch (r) {
    case ReduceOp::None: return "none";
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Welford: return "welford";
    case ReduceOp::ArgMax: return "argmax";
    case ReduceOp::ArgMin: return "argmin";
  }
  return "?";
}

IndexExpr LoopProgram::new_var(const std::string& prefix) {
  int id = next_var_id++;
  // The name ends with the id: two variables with different ids never print
  // alike, so a node spelled by another program (see intern) could only print
  // an undeclared name, never silently another variable of this one.
  std::string name = prefix;
  name += std::to_string(id);
  // Variables are C++ names in generated code: "i" + 64 would be the prelude's
  // integer type i64 (a compile error that only a program with 64+ loop
  // variables, e.g. many outputs, reaches).
  if (name == "i64") name += "_";
  return var(id, name);
}

namespace {
std::string exprs_str(const std::vector<IndexExpr>& es) {
  std::string out = "[";
  for (size_t i = 0; i < es.size(); ++i) {
    if (i) out += ", ";
    out += es[i].to_string();
  }
  out += ']';
  return out;
}
}  // namespace

bool ComputeNode::is_static() const {
  for (const IndexExpr& e : range_exprs)
    if (!e.is_const()) return false;
  for (const IndexExpr& e : reduce_range_exprs)
    if (!e.is_const()) return false;
  return true;
}

std::string LoopProgram::to_string() const {
  std::ostringstream os;
  for (auto& b : buffers) {
    os << "buffer " << b.name << " (b" << b.id << "): " << dtype_name(b.dtype) << shape_str(b.sizes);
    if (!b.size_exprs.empty()) os << " sizes " << exprs_str(b.size_exprs);
    os << "\n";
  }
  for (auto& n : nodes) {
    os << "node " << n.id << " [" << n.origin << "] -> b" << n.out_buffer;
    if (n.aux_buffer >= 0) os << ", b" << n.aux_buffer;
    os << "[" << n.store_index.to_string()
       << "] over " << (n.range_exprs.empty() ? shape_str(n.ranges) : exprs_str(n.range_exprs));
    if (n.is_reduction())
      os << " " << (n.scan ? "scan " : "") << reduce_op_name(n.reduce) << " over "
         << (n.reduce_range_exprs.empty() ? shape_str(n.reduce_ranges) : exprs_str(n.reduce_range_exprs));
    os << ": " << ir::to_string(n.body);
    if (n.position) os << " at " << ir::to_string(n.position);
    os << "\n";
  }
  for (auto& e : externs) os << ir::to_string(e) << "\n";
  return os.str();
}

}  // namespace tp::stax::ir
