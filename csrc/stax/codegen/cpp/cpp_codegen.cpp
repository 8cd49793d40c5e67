#include "stax/codegen/cpp/cpp_codegen.h"

#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <unordered_map>

#include "stax/codegen/cpp/prelude.h"

namespace tp::stax::codegen {
using namespace tp::stax::ir;

namespace {

const char* ctype(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::Int64: return "i64";
    case DType::Float32: return "float";
    case DType::Float64: return "double";
    default: break;  // other dtypes never reach code generation (lowering refuses them)
  }
  return "?";
}
const char* vtype(DType t) { return t == DType::Float64 ? "vd" : "vf"; }
const char* splat(DType t) { return t == DType::Float64 ? "tp_splat_vd" : "tp_splat_vf"; }

std::string literal(const Scalar& v, DType t) {
  char buf[64];
  switch (t) {
    case DType::Bool: return v.to_bool() ? "true" : "false";
    case DType::Int64: return std::to_string(v.to_int()) + "LL";
    case DType::Float32:
    case DType::Float64: {
      double d = v.to_double();
      bool f32 = t == DType::Float32;
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
    default: break;  // other dtypes never reach code generation (lowering refuses them)
  }
  return "0";
}

std::string reduce_init(ReduceOp r, DType t) {
  switch (r) {
    case ReduceOp::Sum: return literal(Scalar(int64_t(0)), t);
    case ReduceOp::Max:
      return is_floating(t) ? literal(Scalar(-INFINITY), t) : std::string("(-9223372036854775807LL - 1)");
    case ReduceOp::Min: return is_floating(t) ? literal(Scalar(INFINITY), t) : std::string("9223372036854775807LL");
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
        static const std::unordered_map<std::string, std::string> infix = {
            {"add", "+"}, {"sub", "-"}, {"mul", "*"}, {"div", "/"}, {"eq", "=="},
            {"ne", "!="}, {"lt", "<"},  {"le", "<="}, {"gt", ">"},  {"ge", ">="}};
        auto op = infix.find(e->fn);
        if (op != infix.end()) rhs = a[0] + " " + op->second + " " + a[1];
        else if (e->fn == "neg") rhs = "tp_neg(" + a[0] + ")";
        else {
          rhs = "tp_" + e->fn + "(";
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
    std::string name = "t";  // appended, not `"t" + ...`: GCC 12 misreads that as an overlapping memcpy (-Wrestrict)
    name += std::to_string(counter_++);
    const char* type = vec ? (e->dtype == DType::Bool ? "auto" : vtype(e->dtype)) : ctype(e->dtype);
    os << indent << type << " " << name << " = " << rhs << ";\n";
    names_[e.get()] = name;
    return name;
  }
  void reset_names() { names_.clear(); }

 private:
  const LoopProgram& p_;
  const std::unordered_map<int, std::string>& locals_;
  RangeMap ranges_;
  std::unordered_map<const ExprNode*, std::string> names_;
  int counter_ = 0;
};

std::string var_name(const IndexExpr& v) { return v.var_name(); }

RangeMap nest_ranges(const KernelPlan& k, const LoopNest& n) {
  RangeMap r;
  r[k.outer_var.var_id()] = {0, std::max<int64_t>(k.outer_extent - 1, 0)};
  for (size_t d = 0; d < n.inner_vars.size(); ++d) r[n.inner_vars[d].var_id()] = {0, n.inner_ranges[d] - 1};
  return r;
}

void emit_nest(std::ostringstream& os, const LoopProgram& p, const KernelPlan& k, const LoopNest& nest,
               std::unordered_map<int, std::string>& locals, int vector_bytes, const std::string& lo_hi_lo,
               const std::string& lo_hi_hi) {
  const ComputeNode& node = p.nodes[nest.node];
  const Buffer& out = p.buffers[node.out_buffer];
  RangeMap ranges = nest_ranges(k, nest);
  Writer w(p, locals, ranges);
  DType dt = node.body->dtype;
  const std::string in = "    ";
  std::string acc = "red" + std::to_string(nest.node);
  // A reduction's result outlives its loop block: later nests of this kernel read it.
  if (node.is_reduction()) os << in << ctype(dt) << " " << acc << ";\n";
  os << in << "{  // node " << nest.node << ": " << node.origin << " -> " << out.name;
  if (node.is_reduction()) os << " (" << reduce_op_name(node.reduce) << " over " << shape_str(nest.inner_ranges) << ")";
  os << (nest.vectorize ? ", vectorized" : "") << "\n";
  size_t nd = nest.inner_vars.size();
  int lanes = is_floating(dt) ? vector_bytes / static_cast<int>(itemsize(dt)) : 1;
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
    return;
  }

  // Reduction: several vector accumulators (segmented summation, Section 6.5),
  // a scalar accumulator for the tail, a pairwise combine at the end.
  std::string init = reduce_init(node.reduce, dt);
  constexpr int kAcc = 4;
  if (nest.vectorize) {
    for (int a = 0; a < kAcc; ++a)
      os << indent << vtype(dt) << " " << acc << "_v" << a << " = " << splat(dt) << "(" << init << ");\n";
  }
  os << indent << ctype(dt) << " " << acc << "_s = " << init << ";\n";
  open_outer_inner();
  os << indent << "i64 " << jb << " = " << lo << ";\n";
  if (nest.vectorize) {
    os << indent << "for (; " << jb << " + " << kAcc * lanes << " <= " << hi << "; " << jb << " += " << kAcc * lanes
       << ") {\n";
    for (int a = 0; a < kAcc; ++a) {
      os << indent << "  {\n" << indent << "    const i64 " << j << " = " << jb << " + " << a * lanes << ";\n";
      std::string v = w.emit(nest.body, true, jv, os, indent + "    ");
      side_stores(true, indent + "    ");
      std::string av = acc + "_v" + std::to_string(a);
      os << indent << "    " << av << " = " << combine(node.reduce, av, v) << ";\n" << indent << "  }\n";
      w.reset_names();
    }
    os << indent << "}\n";
    os << indent << "for (; " << jb << " + " << lanes << " <= " << hi << "; " << jb << " += " << lanes << ") {\n";
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
    os << indent << "for (; " << jb << " < " << hi << "; ++" << jb << ") {\n";
    os << indent << "  const i64 " << j << " = " << jb << ";\n";
    std::string v = w.emit(nest.body, false, jv, os, indent + "  ");
    side_stores(false, indent + "  ");
    os << indent << "  " << acc << "_s = " << combine(node.reduce, acc + "_s", v) << ";\n" << indent << "}\n";
  }
  close_outer_inner();
  os << in << "  " << acc << " = ";
  if (nest.vectorize) {
    std::string tree = combine(node.reduce, combine(node.reduce, acc + "_v0", acc + "_v1"),
                               combine(node.reduce, acc + "_v2", acc + "_v3"));
    os << combine(node.reduce, std::string(horizontal(node.reduce)) + "(" + tree + ")", acc + "_s") << ";\n";
  } else {
    os << acc << "_s;\n";
  }
  os << in << "}\n";
  locals[node.out_buffer] = acc;
  if (nest.store_to_memory) {
    std::string sidx = to_c(nest.store_index, ranges);
    os << in << out.name << "[" << sidx << "] = " << acc << ";\n";
  }
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
  DType dt = node.body->dtype;
  std::string o = k.outer_var.var_name();
  std::string acc = "red" + std::to_string(nest.node) + "_v";
  std::string indent = "    ";
  os << indent << "{  // node " << nest.node << ": " << node.origin << " -> " << out.name << " ("
     << reduce_op_name(node.reduce) << " over " << shape_str(nest.inner_ranges) << "), vectorized across " << o
     << "\n";
  indent += "  ";
  for (int u = 0; u < unroll; ++u)
    os << indent << vtype(dt) << " " << acc << u << " = " << splat(dt) << "(" << reduce_init(node.reduce, dt)
       << ");\n";
  for (size_t d = 0; d < nest.inner_vars.size(); ++d) {
    std::string v = var_name(nest.inner_vars[d]);
    os << indent << "for (i64 " << v << " = 0; " << v << " < " << nest.inner_ranges[d] << "; ++" << v << ") {\n";
    indent += "  ";
  }
  for (int u = 0; u < unroll; ++u) {
    os << indent << "{\n" << indent << "  const i64 " << o << " = " << o << "_b + " << u * lanes << ";\n";
    std::string val = w.emit(nest.body, true, k.outer_var.var_id(), os, indent + "  ");
    os << indent << "  " << acc << u << " = " << combine(node.reduce, acc + std::to_string(u), val) << ";\n";
    os << indent << "}\n";
    w.reset_names();
  }
  for (size_t d = 0; d < nest.inner_vars.size(); ++d) {
    indent.resize(indent.size() - 2);
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
  for (auto& b : p.buffers) {
    if (b.kind == BufferKind::Temp && !memory_temps.count(b.id)) continue;
    slot_of[b.id] = static_cast<int>(g.slot_buffer.size());
    g.slot_buffer.push_back(b.id);
  }

  PreludeRequest req;
  req.vector_bytes = vector_bytes;
  req.need_floordiv = true;
  for (auto& n : p.nodes) {
    std::vector<const ExprNode*> stack{n.body.get()};
    while (!stack.empty()) {
      const ExprNode* e = stack.back();
      stack.pop_back();
      if (e->op == ExprOp::Call) {
        req.need_exp |= e->fn == "exp";
        req.need_log |= e->fn == "log";
        req.need_tanh |= e->fn == "tanh";
        req.need_sigmoid |= e->fn == "sigmoid";
      }
      for (auto& a : e->args) stack.push_back(a.get());
    }
  }

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
      os << "  " << ctype(dt) << " partial[" << chunks << "];\n";
      os << "  #pragma omp parallel for schedule(static)\n";
      os << "  for (i64 " << o << "_c = 0; " << o << "_c < " << chunks << "; ++" << o << "_c) {\n";
      os << "    const i64 " << o << " = 0;\n    (void)" << o << ";\n";
      os << "    const i64 lo = " << o << "_c * " << k.chunk << ";\n";
      os << "    const i64 hi = lo + " << k.chunk << " < " << extent << " ? lo + " << k.chunk << " : " << extent << ";\n";
      LoopNest part = nest;
      part.store_to_memory = false;
      emit_nest(os, p, k, part, locals, vector_bytes, "lo", "hi");
      os << "    partial[" << o << "_c] = " << red << ";\n  }\n";
      os << "  " << ctype(dt) << " total = partial[0];\n";
      os << "  for (i64 c = 1; c < " << chunks << "; ++c) total = " << combine(node.reduce, "total", "partial[c]")
         << ";\n";
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
  os << "extern \"C\" void tp_entry(void* const* bufs, const long long* sizes) {\n  (void)sizes;\n";
  for (auto& k : s.kernels) os << "  " << k.name << "(bufs);\n";
  os << "}\n";
  g.source = os.str();
  g.kernel_count = static_cast<int>(s.kernels.size());
  return g;
}

}  // namespace tp::stax::codegen
