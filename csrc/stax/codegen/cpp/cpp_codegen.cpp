#include "stax/codegen/cpp/cpp_codegen.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "stax/codegen/cpp/prelude.h"
#include "stax/ir/expr_visitor.h"

namespace tp::stax::codegen {
using namespace tp::stax::ir;

namespace {

const char* ctype(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::Int64: return "i64";
    case DType::Float32: return "float";
    case DType::Float64: return "double";
    default: break;  // narrow dtypes never reach generated code (the lowering refuses them)
  }
  return "?";
}
const char* vtype(DType t) { return t == DType::Float64 ? "vd" : "vf"; }
const char* splat(DType t) { return t == DType::Float64 ? "tp_splat_vd" : "tp_splat_vf"; }

std::string literal(const Scalar& v, DType t) {
  char buf[64];
  switch (t) {
    case DType::Bool: return v.to_bool() ? "true" : "false";
    case DType::Int64: {
      int64_t i = v.to_int();
      // -9223372036854775808LL is unary minus on a literal too large for long long.
      if (i == INT64_MIN) return "(-9223372036854775807LL - 1)";
      return std::to_string(i) + "LL";
    }
    case DType::Float32:
    case DType::Float64: {
      bool f32 = t == DType::Float32;
      // Round to float first: a finite double may overflow to inf as float32.
      double d = f32 ? static_cast<double>(static_cast<float>(v.to_double())) : v.to_double();
      if (std::isnan(d)) return f32 ? "__builtin_nanf(\"\")" : "__builtin_nan(\"\")";
      if (std::isinf(d)) return std::string(d < 0 ? "-" : "") + (f32 ? "__builtin_inff()" : "__builtin_inf()");
      if (f32) {
        std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(static_cast<float>(d)));
      } else {
        std::snprintf(buf, sizeof buf, "%.17g", d);
      }
      std::string s(buf);
      if (s.find_first_of(".en") == std::string::npos) s += ".0";
      return f32 ? s + "f" : s;
    }
    default: break;
  }
  return "0";
}

std::string reduce_init(ReduceOp r, DType t) {
  switch (r) {
    case ReduceOp::Sum: return literal(Scalar(int64_t(0)), t);
    // The identity is the smallest (largest) value *of the accumulator's type*:
    // for bool that is false (true), not INT64_MIN converted to bool.
    case ReduceOp::Max:
      if (t == DType::Bool) return "false";
      return is_floating(t) ? literal(Scalar(-INFINITY), t) : std::string("(-9223372036854775807LL - 1)");
    case ReduceOp::Min:
      if (t == DType::Bool) return "true";
      return is_floating(t) ? literal(Scalar(INFINITY), t) : std::string("9223372036854775807LL");
    case ReduceOp::None: break;
  }
  return "0";
}

std::string combine(ReduceOp r, const std::string& a, const std::string& b) {
  switch (r) {
    case ReduceOp::Sum: return "(" + a + " + " + b + ")";
    case ReduceOp::Max: return "tp_max(" + a + ", " + b + ")";
    case ReduceOp::Min: return "tp_min(" + a + ", " + b + ")";
    case ReduceOp::None: break;
  }
  return a;
}

const char* horizontal(ReduceOp r) {
  return r == ReduceOp::Sum ? "tp_hsum" : r == ReduceOp::Max ? "tp_hmax" : "tp_hmin";
}

class Writer {
 public:
  Writer(const LoopProgram& p, const std::unordered_map<int, std::string>& locals, RangeMap ranges)
      : p_(p), locals_(locals), ranges_(std::move(ranges)) {}

  // Emits statements computing e into `os`; returns the name of the value.
  std::string emit(const Expr& e, bool vec, int inner_var, std::ostringstream& os, const std::string& indent) {
    auto it = names_.find(e.get());
    if (it != names_.end()) return it->second;
    std::string rhs;
    switch (e->op) {
      case ExprOp::Const: rhs = vec ? std::string(splat(e->dtype)) + "(" + literal(e->value, e->dtype) + ")"
                                    : literal(e->value, e->dtype); break;
      case ExprOp::Load: {
        auto loc = locals_.find(e->buffer);
        const Buffer& b = p_.buffers[e->buffer];
        if (loc != locals_.end()) {
          rhs = vec ? std::string(splat(e->dtype)) + "(" + loc->second + ")" : loc->second;
        } else {
          std::string idx = to_c(e->index, ranges_);
          bool invariant = inner_var < 0 || !depends_on(e->index, inner_var);
          if (!vec) rhs = b.name + "[" + idx + "]";
          else if (invariant) rhs = std::string(splat(e->dtype)) + "(" + b.name + "[" + idx + "])";
          else rhs = "tp_load(" + b.name + " + (" + idx + "))";
        }
        break;
      }
      case ExprOp::Call: {
        std::vector<std::string> a;
        for (auto& x : e->args) a.push_back(emit(x, vec, inner_var, os, indent));
        const CallInfo& ci = info(e->fn);
        if (ci.infix) rhs = a[0] + " " + ci.infix + " " + a[1];  // logical ops: bool operands, scalar code only
        else if (e->fn == CallOp::Not) rhs = "!" + a[0];
        else {
          rhs = std::string("tp_") + ci.name + "(";
          for (size_t i = 0; i < a.size(); ++i) rhs += (i ? ", " : "") + a[i];
          rhs += ")";
        }
        break;
      }
      case ExprOp::Where: {
        std::string c = emit(e->args[0], vec, inner_var, os, indent);
        std::string a = emit(e->args[1], vec, inner_var, os, indent);
        std::string b = emit(e->args[2], vec, inner_var, os, indent);
        rhs = "tp_where(" + c + ", " + a + ", " + b + ")";
        break;
      }
      case ExprOp::Cast: {
        std::string a = emit(e->args[0], vec, inner_var, os, indent);
        rhs = e->dtype == DType::Bool ? "(" + a + " != 0)" : std::string("(") + ctype(e->dtype) + ")(" + a + ")";
        break;
      }
    }
    std::string name = "t";  // appended, not operator+: GCC 12 warns falsely (-Wrestrict)
    name += std::to_string(counter_++);
    const char* type = vec ? (e->dtype == DType::Bool ? "auto" : vtype(e->dtype)) : ctype(e->dtype);
    os << indent << type << " " << name << " = " << rhs << ";\n";
    // A floating product is rounded before anything adds to it, as eager
    // rounds every operator's result: GCC would otherwise contract
    // `a * b + c` into one fused multiply-add (-ffp-contract=fast is its
    // default) and the compiled result would differ from eager's in the last
    // bit. The empty asm makes the product opaque (it stays in its register).
    // exp/log end in a multiplication inside the prelude (exp scales by 2^k):
    // contracted into the consumer, exp(inf) - exp(inf) became fma(p*2^h,
    // 2^(k-h), -inf) = -inf instead of NaN.
    // A sum's own body value is exempt: the sum is reordered anyway (compared to
    // tolerance), and `acc + x * 2` as one FMA keeps Example 1.1 at its speed.
    if (e->op == ExprOp::Call && (e->fn == CallOp::Mul || e->fn == CallOp::Exp || e->fn == CallOp::Log) && is_floating(e->dtype) &&
        e.get() != sum_root_)
      os << indent << "__asm__(\"\" : \"+v\"(" << name << "));\n";
    // Likewise a float truncated to an integer: GCC would turn (float)(i64)x
    // into trunc(x), which keeps the sign of a zero (-0.3 -> -0.0, where the
    // integer round trip gives +0.0 as eager does).
    if (e->op == ExprOp::Cast && !is_floating(e->dtype) && e->dtype != DType::Bool && !vec &&
        is_floating(e->args[0]->dtype))
      os << indent << "__asm__(\"\" : \"+r\"(" << name << "));\n";
    // And a double rounded to float: GCC 12 with -march=native folds
    // `(double)(float)x >= x` into `x == x`, as if the rounding were exact.
    if (e->op == ExprOp::Cast && e->dtype == DType::Float32 && e->args[0]->dtype == DType::Float64 && !vec)
      os << indent << "__asm__(\"\" : \"+v\"(" << name << "));\n";
    names_[e.get()] = name;
    return name;
  }
  void reset_names() { names_.clear(); }
  // The body of a Sum reduction: its value is only added into the accumulator.
  void set_sum_root(const ExprNode* e) { sum_root_ = e; }

 private:
  const LoopProgram& p_;
  const std::unordered_map<int, std::string>& locals_;
  RangeMap ranges_;
  std::unordered_map<const ExprNode*, std::string> names_;
  const ExprNode* sum_root_ = nullptr;
  int counter_ = 0;
};

std::string var_name(const IndexExpr& v) { return v.var_name(); }

RangeMap nest_ranges(const KernelPlan& k, const LoopNest& n) {
  RangeMap r;
  r[k.outer_var.var_id()] = {0, std::max<int64_t>(k.outer_extent - 1, 0)};
  for (size_t d = 0; d < n.inner_vars.size(); ++d) r[n.inner_vars[d].var_id()] = {0, n.inner_ranges[d] - 1};
  return r;
}

// `max_span`: the longest [lo, hi) the last inner loop can run when lo/hi are
// given (a chunk); 0 = the loop's own range. Returns, for a reduction, the name
// of its most precise result (a float sum's double total before rounding).
std::string emit_nest(std::ostringstream& os, const LoopProgram& p, const KernelPlan& k, const LoopNest& nest,
               std::unordered_map<int, std::string>& locals, int vector_bytes, const std::string& lo_hi_lo,
               const std::string& lo_hi_hi, int64_t max_span = 0) {
  const ComputeNode& node = p.nodes[nest.node];
  const Buffer& out = p.buffers[node.out_buffer];
  RangeMap ranges = nest_ranges(k, nest);
  Writer w(p, locals, ranges);
  if (node.reduce == ReduceOp::Sum) w.set_sum_root(nest.body.get());
  DType dt = node.body->dtype;
  const std::string in = "    ";
  std::string acc = "red" + std::to_string(nest.node);
  size_t nd = nest.inner_vars.size();
  int lanes = is_floating(dt) ? vector_bytes / static_cast<int>(itemsize(dt)) : 1;
  // Reduction: several vector accumulators (segmented summation, Section 6.5),
  // a scalar accumulator for the tail, a pairwise combine at the end.
  //
  // A long floating-point sum is cut into blocks (each vector accumulator
  // takes 64 steps per block, a scalar loop 256): every block starts from
  // zero, and the block results are added pairwise, in double, through a
  // binary-counter stack (cascaded summation). The rounding error then grows
  // with the block length, not with the reduced length (Section 13.3), and the
  // large partial sums near the top of the cascade are not rounded to float
  // (eager flushes its blocks into a double total for the same reason).
  // Sizes are static, so a reduction no longer than one block (a 2048-float
  // row) is emitted exactly as without blocking.
  constexpr int kAcc = 4;
  const int64_t span = max_span > 0 ? max_span : (nd ? nest.inner_ranges.back() : 1);
  const int64_t block = nest.vectorize ? int64_t{kAcc} * lanes * 64 : 256;
  const bool cascade = node.reduce == ReduceOp::Sum && is_floating(dt) && nd > 0 && span > block;
  // A reduction's result outlives its loop block: later nests of this kernel read it.
  if (node.is_reduction()) os << in << ctype(dt) << " " << acc << ";\n";
  if (cascade) os << in << "double " << acc << "_tot = 0.0;\n";
  os << in << "{  // node " << nest.node << ": " << node.origin << " -> " << out.name;
  if (node.is_reduction()) os << " (" << reduce_op_name(node.reduce) << " over " << shape_str(nest.inner_ranges) << ")";
  os << (nest.vectorize ? ", vectorized" : "") << "\n";
  int jv = nd ? nest.inner_vars.back().var_id() : -1;
  std::string indent = in + "  ";
  // Loops over all inner dims but the last (never vectorized).
  auto open_outer_inner = [&]() {
    for (size_t d = 0; d + 1 < nd; ++d) {
      std::string v = var_name(nest.inner_vars[d]);
      os << indent << "for (i64 " << v << " = 0; " << v << " < " << nest.inner_ranges[d] << "; ++" << v << ") {\n";
      indent += "  ";
    }
  };
  auto close_outer_inner = [&]() {
    for (size_t d = 0; d + 1 < nd; ++d) {
      indent.resize(indent.size() - 2);
      os << indent << "}\n";
    }
  };
  std::string lo = "0", hi = nd ? std::to_string(nest.inner_ranges.back()) : "1";
  if (!lo_hi_lo.empty()) { lo = lo_hi_lo; hi = lo_hi_hi; }
  std::string j = nd ? var_name(nest.inner_vars.back()) : "";
  std::string jb = j + "_";
  std::string store_idx = to_c(nest.store_index, ranges);
  // Values a later nest of this kernel reads back instead of recomputing.
  auto side_stores = [&](bool vec, const std::string& ind) {
    for (auto& ss : nest.side_stores) {
      std::string v = w.emit(ss.value, vec, jv, os, ind);
      const Buffer& b = p.buffers[ss.buffer];
      std::string idx = to_c(ss.index, ranges);
      if (vec) os << ind << "tp_store(" << b.name << " + (" << idx << "), " << v << ");  // reused below\n";
      else os << ind << b.name << "[" << idx << "] = " << v << ";  // reused below\n";
    }
  };

  if (!node.is_reduction()) {
    if (nd == 0) {
      std::string v = w.emit(nest.body, false, -1, os, indent);
      os << indent << out.name << "[" << store_idx << "] = " << v << ";\n";
    } else {
      open_outer_inner();
      os << indent << "i64 " << jb << " = " << lo << ";\n";
      if (nest.vectorize) {
        os << indent << "for (; " << jb << " + " << lanes << " <= " << hi << "; " << jb << " += " << lanes << ") {\n";
        os << indent << "  const i64 " << j << " = " << jb << ";\n";
        std::string v = w.emit(nest.body, true, jv, os, indent + "  ");
        side_stores(true, indent + "  ");
        os << indent << "  tp_store(" << out.name << " + (" << store_idx << "), " << v << ");\n";
        os << indent << "}\n";
        w.reset_names();
      }
      os << indent << "for (; " << jb << " < " << hi << "; ++" << jb << ") {\n";
      os << indent << "  const i64 " << j << " = " << jb << ";\n";
      std::string v = w.emit(nest.body, false, jv, os, indent + "  ");
      side_stores(false, indent + "  ");
      os << indent << "  " << out.name << "[" << store_idx << "] = " << v << ";\n";
      os << indent << "}\n";
      close_outer_inner();
    }
    os << in << "}\n";
    return "";
  }

  std::string init = reduce_init(node.reduce, dt);
  int levels = 1;
  if (cascade) {
    int64_t blocks = (span + block - 1) / block;
    for (size_t d = 0; d + 1 < nd; ++d) blocks *= nest.inner_ranges[d];
    while (levels < 62 && (int64_t{1} << levels) <= blocks) ++levels;
    os << indent << "double " << acc << "_stk[" << levels << "];\n";
    os << indent << "i64 " << acc << "_n = 0;\n";
  }
  if (nest.vectorize) {
    for (int a = 0; a < kAcc; ++a)
      os << indent << vtype(dt) << " " << acc << "_v" << a << " = " << splat(dt) << "(" << init << ");\n";
  }
  // A scalar (strided or unvectorizable) float32 sum accumulates in double:
  // one conversion per element in a loop that is latency-bound anyway.
  const bool wide_scalar = node.reduce == ReduceOp::Sum && dt == DType::Float32 && !nest.vectorize;
  os << indent << (wide_scalar ? "double" : ctype(dt)) << " " << acc << "_s = " << init << ";\n";
  open_outer_inner();
  std::string loop_lo = lo, loop_hi = hi;
  if (cascade) {
    os << indent << "for (i64 " << jb << "b = " << lo << "; " << jb << "b < " << hi << "; " << jb << "b += " << block
       << ") {\n";
    indent += "  ";
    os << indent << "const i64 " << jb << "e = " << jb << "b + " << block << " < " << hi << " ? " << jb << "b + "
       << block << " : " << hi << ";\n";
    if (nest.vectorize)
      for (int a = 0; a < kAcc; ++a) os << indent << acc << "_v" << a << " = " << splat(dt) << "(" << init << ");\n";
    os << indent << acc << "_s = " << init << ";\n";
    loop_lo = jb + "b";
    loop_hi = jb + "e";
  }
  std::string vec_total;
  if (nest.vectorize) {
    std::string tree = combine(node.reduce, combine(node.reduce, acc + "_v0", acc + "_v1"),
                               combine(node.reduce, acc + "_v2", acc + "_v3"));
    vec_total = combine(node.reduce, std::string(horizontal(node.reduce)) + "(" + tree + ")", acc + "_s");
  }
  os << indent << "i64 " << jb << " = " << loop_lo << ";\n";
  if (nest.vectorize) {
    os << indent << "for (; " << jb << " + " << kAcc * lanes << " <= " << loop_hi << "; " << jb << " += "
       << kAcc * lanes << ") {\n";
    for (int a = 0; a < kAcc; ++a) {
      os << indent << "  {\n" << indent << "    const i64 " << j << " = " << jb << " + " << a * lanes << ";\n";
      std::string v = w.emit(nest.body, true, jv, os, indent + "    ");
      side_stores(true, indent + "    ");
      std::string av = acc + "_v" + std::to_string(a);
      os << indent << "    " << av << " = " << combine(node.reduce, av, v) << ";\n" << indent << "  }\n";
      w.reset_names();
    }
    os << indent << "}\n";
    os << indent << "for (; " << jb << " + " << lanes << " <= " << loop_hi << "; " << jb << " += " << lanes << ") {\n";
    os << indent << "  const i64 " << j << " = " << jb << ";\n";
    std::string v = w.emit(nest.body, true, jv, os, indent + "  ");
    side_stores(true, indent + "  ");
    os << indent << "  " << acc << "_v0 = " << combine(node.reduce, acc + "_v0", v) << ";\n" << indent << "}\n";
    w.reset_names();
  }
  if (nd == 0) {
    std::string v = w.emit(nest.body, false, -1, os, indent);
    os << indent << acc << "_s = " << combine(node.reduce, acc + "_s", v) << ";\n";
  } else {
    os << indent << "for (; " << jb << " < " << loop_hi << "; ++" << jb << ") {\n";
    os << indent << "  const i64 " << j << " = " << jb << ";\n";
    std::string v = w.emit(nest.body, false, jv, os, indent + "  ");
    side_stores(false, indent + "  ");
    os << indent << "  " << acc << "_s = " << combine(node.reduce, acc + "_s", v) << ";\n" << indent << "}\n";
  }
  if (cascade) {
    // Push the block's sum: merge with equal-sized partial sums first (pairwise).
    os << indent << "{\n";
    os << indent << "  double tp_b = (double)(" << (nest.vectorize ? vec_total : acc + "_s") << ");\n";
    os << indent << "  i64 tp_c = " << acc << "_n++;\n" << indent << "  int tp_lv = 0;\n";
    os << indent << "  for (; tp_c & 1; tp_c >>= 1, ++tp_lv) tp_b = " << acc << "_stk[tp_lv] + tp_b;\n";
    os << indent << "  " << acc << "_stk[tp_lv] = tp_b;\n" << indent << "}\n";
    indent.resize(indent.size() - 2);
    os << indent << "}\n";
  }
  close_outer_inner();
  if (cascade) {
    os << in << "  {\n" << in << "    double& tp_t = " << acc << "_tot;\n";
    os << in << "    for (int tp_lv = 0; tp_lv < " << levels << "; ++tp_lv)\n";
    os << in << "      if ((" << acc << "_n >> tp_lv) & 1) tp_t = " << acc << "_stk[tp_lv] + tp_t;\n";
    os << in << "    " << acc << " = (" << ctype(dt) << ")tp_t;\n" << in << "  }\n";
  } else {
    os << in << "  " << acc << " = " << (nest.vectorize ? vec_total : acc + "_s") << ";\n";
  }
  os << in << "}\n";
  locals[node.out_buffer] = acc;
  std::string precise = cascade ? acc + "_tot" : acc;
  if (nest.store_to_memory) {
    std::string sidx = to_c(nest.store_index, ranges);
    os << in << out.name << "[" << sidx << "] = " << acc << ";\n";
  }
  return precise;
}

// A reduction vectorized across the outer loop: `unroll` vectors hold
// unroll*lanes neighbouring outputs (o .. o+unroll*lanes-1), so every row
// the inner loop visits is read as one contiguous run; the inner loops take
// scalar steps.
void emit_outer_vector_reduction(std::ostringstream& os, const LoopProgram& p, const KernelPlan& k,
                                 const LoopNest& nest, int lanes, int unroll) {
  const ComputeNode& node = p.nodes[nest.node];
  const Buffer& out = p.buffers[node.out_buffer];
  RangeMap ranges = nest_ranges(k, nest);
  std::unordered_map<int, std::string> no_locals;
  Writer w(p, no_locals, ranges);
  if (node.reduce == ReduceOp::Sum) w.set_sum_root(nest.body.get());
  DType dt = node.body->dtype;
  std::string o = k.outer_var.var_name();
  std::string acc = "red" + std::to_string(nest.node) + "_v";
  std::string indent = "    ";
  os << indent << "{  // node " << nest.node << ": " << node.origin << " -> " << out.name << " ("
     << reduce_op_name(node.reduce) << " over " << shape_str(nest.inner_ranges) << "), vectorized across " << o
     << "\n";
  indent += "  ";
  const std::string init = reduce_init(node.reduce, dt);
  auto reset = [&]() {
    for (int u = 0; u < unroll; ++u) os << indent << acc << u << " = " << splat(dt) << "(" << init << ");\n";
  };
  for (int u = 0; u < unroll; ++u) os << indent << vtype(dt) << " " << acc << u << " = " << splat(dt) << "(" << init << ");\n";
  // A long float sum runs in blocks of 128 rows whose sums are converted to
  // double vectors and added pairwise (cascaded), as in emit_nest: the error
  // grows with the block, not with the number of rows. 128 rows per block is
  // eager's flush interval too, and keeps the per-block conversion (2 vd per
  // vf) below 2% of the loop's work.
  const size_t nd = nest.inner_vars.size();
  constexpr int64_t kRows = 128;
  const bool f32 = dt == DType::Float32;
  const int nb = f32 ? 2 * unroll : unroll;  // double vectors per block
  const int half = lanes / 2;
  auto indices = [](int from, int count) {
    std::string s;
    for (int i = 0; i < count; ++i) s += (i ? ", " : "") + std::to_string(from + i);
    return s;
  };
  const bool cascade = node.reduce == ReduceOp::Sum && nd > 0 && nest.inner_ranges.back() > kRows;
  int levels = 1;
  const std::string stk = acc + "stk", cnt = acc + "n";
  if (cascade) {
    int64_t blocks = (nest.inner_ranges.back() + kRows - 1) / kRows;
    for (size_t d = 0; d + 1 < nd; ++d) blocks *= nest.inner_ranges[d];
    while (levels < 62 && (int64_t{1} << levels) <= blocks) ++levels;
    os << indent << "vd " << stk << "[" << levels << "][" << nb << "];\n";
    os << indent << "i64 " << cnt << " = 0;\n";
  }
  for (size_t d = 0; d < nd; ++d) {
    std::string v = var_name(nest.inner_vars[d]);
    if (cascade && d + 1 == nd) {
      int64_t r = nest.inner_ranges[d];
      os << indent << "for (i64 " << v << "_b = 0; " << v << "_b < " << r << "; " << v << "_b += " << kRows << ") {\n";
      indent += "  ";
      reset();
      os << indent << "const i64 " << v << "_e = " << v << "_b + " << kRows << " < " << r << " ? " << v << "_b + " << kRows
         << " : " << r << ";\n";
      os << indent << "for (i64 " << v << " = " << v << "_b; " << v << " < " << v << "_e; ++" << v << ") {\n";
    } else {
      os << indent << "for (i64 " << v << " = 0; " << v << " < " << nest.inner_ranges[d] << "; ++" << v << ") {\n";
    }
    indent += "  ";
  }
  for (int u = 0; u < unroll; ++u) {
    os << indent << "{\n" << indent << "  const i64 " << o << " = " << o << "_b + " << u * lanes << ";\n";
    std::string val = w.emit(nest.body, true, k.outer_var.var_id(), os, indent + "  ");
    os << indent << "  " << acc << u << " = " << combine(node.reduce, acc + std::to_string(u), val) << ";\n";
    os << indent << "}\n";
    w.reset_names();
  }
  for (size_t d = 0; d < nd; ++d) {
    indent.resize(indent.size() - 2);
    os << indent << "}\n";
    if (cascade && d == 0) {
      // Push this block's vectors: merge with equal-sized partial sums first.
      os << indent << "{\n" << indent << "  i64 tp_c = " << cnt << "++;\n" << indent << "  int tp_lv = 0;\n";
      os << indent << "  vd tp_b[" << nb << "];\n";
      for (int u = 0; u < unroll; ++u) {
        std::string a = acc + std::to_string(u);
        if (f32) {
          os << indent << "  tp_b[" << 2 * u << "] = __builtin_convertvector(__builtin_shufflevector(" << a << ", " << a
             << ", " << indices(0, half) << "), vd);\n";
          os << indent << "  tp_b[" << 2 * u + 1 << "] = __builtin_convertvector(__builtin_shufflevector(" << a << ", "
             << a << ", " << indices(half, half) << "), vd);\n";
        } else {
          os << indent << "  tp_b[" << u << "] = " << a << ";\n";
        }
      }
      os << indent << "  for (; tp_c & 1; tp_c >>= 1, ++tp_lv)\n";
      os << indent << "    for (int l = 0; l < " << nb << "; ++l) tp_b[l] = " << stk << "[tp_lv][l] + tp_b[l];\n";
      os << indent << "  for (int l = 0; l < " << nb << "; ++l) " << stk << "[tp_lv][l] = tp_b[l];\n";
      os << indent << "}\n";
      indent.resize(indent.size() - 2);
      os << indent << "}\n";
    }
  }
  if (cascade) {
    os << indent << "{\n" << indent << "  vd tp_t[" << nb << "];\n";
    os << indent << "  for (int l = 0; l < " << nb << "; ++l) tp_t[l] = tp_splat_vd(0.0);\n";
    os << indent << "  for (int tp_lv = 0; tp_lv < " << levels << "; ++tp_lv)\n";
    os << indent << "    if ((" << cnt << " >> tp_lv) & 1)\n";
    os << indent << "      for (int l = 0; l < " << nb << "; ++l) tp_t[l] = " << stk << "[tp_lv][l] + tp_t[l];\n";
    for (int u = 0; u < unroll; ++u) {
      std::string a = acc + std::to_string(u);
      if (f32) {
        os << indent << "  for (int l = 0; l < " << half << "; ++l) {\n";
        os << indent << "    " << a << "[l] = (float)tp_t[" << 2 * u << "][l];\n";
        os << indent << "    " << a << "[" << half << " + l] = (float)tp_t[" << 2 * u + 1 << "][l];\n";
        os << indent << "  }\n";
      } else {
        os << indent << "  " << a << " = tp_t[" << u << "];\n";
      }
    }
    os << indent << "}\n";
  }
  for (int u = 0; u < unroll; ++u) {
    os << indent << "{\n" << indent << "  const i64 " << o << " = " << o << "_b + " << u * lanes << ";\n";
    os << indent << "  tp_store(" << out.name << " + (" << to_c(nest.store_index, ranges) << "), " << acc << u
       << ");\n" << indent << "}\n";
  }
  os << "    }\n";
}

}  // namespace

GeneratedSource generate_cpp(const LoopProgram& p, const Schedule& s, int vector_bytes) {
  GeneratedSource g;
  // Buffer slots: every buffer that lives in memory.
  std::unordered_map<int, int> slot_of;
  std::set<int> memory_temps;
  for (auto& k : s.kernels)
    for (auto& n : k.nests)
      if (n.store_to_memory) memory_temps.insert(p.nodes[n.node].out_buffer);
  for (auto& e : p.externs) {  // extern calls read and write memory
    for (auto& o : e.inputs)
      if (o.kind == ExternOperand::Kind::Buffer) memory_temps.insert(o.buffer);
    for (int b : e.outputs) memory_temps.insert(b);
  }
  for (auto& b : p.buffers) {
    if (b.kind == BufferKind::Temp && !memory_temps.count(b.id)) continue;
    slot_of[b.id] = static_cast<int>(g.slot_buffer.size());
    g.slot_buffer.push_back(b.id);
  }

  PreludeRequest req;
  req.vector_bytes = vector_bytes;
  req.need_floordiv = true;
  struct Needs : ExprVisitor {
    PreludeRequest& req;
    explicit Needs(PreludeRequest& r) : req(r) {}
    void visit_call(const ExprNode& e) override {
      req.need_exp |= e.fn == CallOp::Exp;
      req.need_log |= e.fn == CallOp::Log;
      req.need_tanh |= e.fn == CallOp::Tanh;
      req.need_sigmoid |= e.fn == CallOp::Sigmoid;
      if (is_libm(e.fn)) req.libm.insert(name(e.fn));
    }
  } needs(req);  // one visitor for all bodies: a node shared between nodes is visited once
  for (auto& n : p.nodes) needs.visit(n.body);

  std::ostringstream os;
  os << "// Generated by Stax (TensorPlay). One translation unit per region: kernels + entry.\n";
  os << cpp_prelude(req) << "\n";
  for (auto& k : s.kernels) {
    os << "// " << k.name << ": " << k.origin << "\n";
    os << "// outer space " << shape_str(k.outer_ranges) << (k.parallel ? ", parallel" : "") << "\n";
    os << "static void " << k.name << "(void* const* bufs) {\n";
    std::set<int> used;
    for (auto& n : k.nests) {
      used.insert(p.nodes[n.node].out_buffer);
      for (const ExprNode* l : loads_of(n.body)) used.insert(l->buffer);
    }
    for (int b : used) {
      if (!slot_of.count(b)) continue;
      const Buffer& buf = p.buffers[b];
      bool writes = buf.kind == BufferKind::Output || buf.kind == BufferKind::Temp;
      os << "  " << (writes ? "" : "const ") << ctype(buf.dtype) << "* __restrict__ " << buf.name << " = ("
         << (writes ? "" : "const ") << ctype(buf.dtype) << "*)bufs[" << slot_of[b] << "];\n";
    }
    std::string o = k.outer_var.var_name();
    std::unordered_map<int, std::string> locals;
    if (k.chunk > 0 && p.nodes[k.nodes[0]].is_reduction()) {
      // Partial results per chunk, combined in chunk order.
      const LoopNest& nest = k.nests[0];
      const ComputeNode& node = p.nodes[nest.node];
      DType dt = node.body->dtype;
      int64_t extent = nest.inner_ranges[0];
      int64_t chunks = (extent + k.chunk - 1) / k.chunk;
      std::string red = "red" + std::to_string(nest.node);
      // A float sum's chunk totals stay in double until the end.
      const char* pt = node.reduce == ReduceOp::Sum && is_floating(dt) ? "double" : ctype(dt);
      os << "  " << pt << " partial[" << chunks << "];\n";
      os << "  #pragma omp parallel for schedule(static)\n";
      os << "  for (i64 " << o << "_c = 0; " << o << "_c < " << chunks << "; ++" << o << "_c) {\n";
      os << "    const i64 " << o << " = 0;\n    (void)" << o << ";\n";
      os << "    const i64 lo = " << o << "_c * " << k.chunk << ";\n";
      os << "    const i64 hi = lo + " << k.chunk << " < " << extent << " ? lo + " << k.chunk << " : " << extent << ";\n";
      LoopNest part = nest;
      part.store_to_memory = false;
      std::string precise = emit_nest(os, p, k, part, locals, vector_bytes, "lo", "hi", k.chunk);
      os << "    partial[" << o << "_c] = " << precise << ";\n  }\n";
      // Combined pairwise in a fixed tree (not in thread order): deterministic,
      // and a sum's error grows with log2(chunks), not with chunks.
      os << "  for (i64 w = 1; w < " << chunks << "; w *= 2)\n";
      os << "    for (i64 c = 0; c + w < " << chunks << "; c += 2 * w) partial[c] = "
         << combine(node.reduce, "partial[c]", "partial[c + w]") << ";\n";
      os << "  " << ctype(dt) << " total = (" << ctype(dt) << ")partial[0];\n";
      RangeMap r;
      r[k.outer_var.var_id()] = {0, 0};
      os << "  " << p.buffers[node.out_buffer].name << "[" << to_c(simplify(nest.store_index, r), r)
         << "] = total;\n";
    } else if (k.chunk > 0) {
      int64_t extent = k.nests[0].inner_ranges[0];
      int64_t chunks = (extent + k.chunk - 1) / k.chunk;
      os << "  #pragma omp parallel for schedule(static)\n";
      os << "  for (i64 " << o << "_c = 0; " << o << "_c < " << chunks << "; ++" << o << "_c) {\n";
      os << "    const i64 " << o << " = 0;\n    (void)" << o << ";\n";
      os << "    const i64 lo = " << o << "_c * " << k.chunk << ";\n";
      os << "    const i64 hi = lo + " << k.chunk << " < " << extent << " ? lo + " << k.chunk << " : " << extent << ";\n";
      emit_nest(os, p, k, k.nests[0], locals, vector_bytes, "lo", "hi");
      os << "  }\n";
    } else if (k.vectorize_outer) {
      int lanes = vector_bytes / static_cast<int>(itemsize(p.nodes[k.nodes[0]].body->dtype));
      // Widest block of vectors (up to 8, i.e. 512 bytes of a float row) that
      // divides the outer extent, so at most lanes-1 outputs are left over.
      int unroll = 8;
      while (unroll > 1 && (k.outer_extent % (unroll * lanes) != 0 || k.outer_extent < unroll * lanes)) unroll /= 2;
      int64_t width = static_cast<int64_t>(unroll) * lanes;
      int64_t groups = k.outer_extent / width;
      if (k.parallel) os << "  #pragma omp parallel for schedule(static)\n";
      os << "  for (i64 " << o << "_g = 0; " << o << "_g < " << groups << "; ++" << o << "_g) {\n";
      os << "    const i64 " << o << "_b = " << o << "_g * " << width << ";\n";
      emit_outer_vector_reduction(os, p, k, k.nests[0], lanes, unroll);
      os << "  }\n";
      // The remaining outputs, one at a time.
      LoopNest tail = k.nests[0];
      tail.vectorize = false;
      os << "  for (i64 " << o << " = " << groups * width << "; " << o << " < " << k.outer_extent << "; ++" << o
         << ") {\n";
      emit_nest(os, p, k, tail, locals, vector_bytes, "", "");
      os << "  }\n";
    } else {
      if (k.parallel) os << "  #pragma omp parallel for schedule(static)\n";
      os << "  for (i64 " << o << " = 0; " << o << " < " << k.outer_extent << "; ++" << o
         << ") {\n";
      for (auto& n : k.nests) emit_nest(os, p, k, n, locals, vector_bytes, "", "");
      os << "  }\n";
    }
    os << "}\n\n";
  }
  // Extern calls run in the backend: ext(ctx, k) runs LoopProgram::externs[k]
  // and may replace its result's pointer in bufs (kernels read bufs on entry);
  // nonzero means it failed, and the backend raises the error.
  os << "extern \"C\" void tp_entry(void* const* bufs, const long long* sizes, int (*ext)(void*, int), void* ctx) {\n"
     << "  (void)sizes; (void)ext; (void)ctx;\n";
  for (auto& step : s.steps) {
    if (!step.is_extern) {
      os << "  " << s.kernels[step.index].name << "(bufs);\n";
      continue;
    }
    const ExternCall& e = p.externs[step.index];
    os << "  // extern " << e.id << ": " << e.op << " (" << extern_kind_name(e.kind) << "; " << e.origin << ")\n";
    os << "  if (ext(ctx, " << e.id << ")) return;\n";
  }
  os << "}\n";
  g.source = os.str();
  g.kernel_count = static_cast<int>(s.kernels.size());
  return g;
}

}  // namespace tp::stax::codegen
