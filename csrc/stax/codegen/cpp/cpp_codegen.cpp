#include "stax/codegen/cpp/cpp_codegen.h"
#include "stax/runtime/region_times.h"

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "stax/codegen/cpp/prelude.h"
#include "stax/codegen/c_syntax.h"
#include "stax/ir/expr_visitor.h"
#include "stax/runtime/libmvec.h"

namespace tp::stax::codegen {
using namespace tp::stax::ir;

namespace {

// A narrow integer (int32, int16, int8, uint8) has a register of its own
// width: arithmetic on it is done in i64 (its operands widened, see
// Writer::value) and the assignment to the narrow register wraps, as
// PyTorch's integer arithmetic does. 16-bit floats never reach this printer
// (region_dtype refuses them for CPU regions).
bool narrow_int(DType t) { return t == DType::Int32 || t == DType::Int16 || t == DType::Int8 || t == DType::UInt8; }
// A 16-bit float (bfloat16, float16) is a float register; memory holds its
// 16-bit pattern (tp_bf16 / tp_half): a load widens exactly, a store rounds to
// nearest even once (a fused region rounds only what it writes), an explicit
// cast to the type inside an expression rounds (tp_round_*). No dependence on
// the compiler's _Float16 / __bf16: the prelude converts with integer code.
bool half16(DType t) { return t == DType::BFloat16 || t == DType::Float16; }
const char* ctype(DType t) {
  switch (t) {
    case DType::BFloat16:
    case DType::Float16: return "float";
    case DType::Int32: return "int";
    case DType::Int16: return "short";
    case DType::Int8: return "signed char";
    case DType::UInt8: return "unsigned char";
    default: break;
  }
  const char* c = c_type(t);
  return c ? c : "?";
}
// The element type of a buffer of dtype t.
const char* mtype(DType t) { return t == DType::BFloat16 ? "tp_bf16" : t == DType::Float16 ? "tp_half" : ctype(t); }
// A loaded element as a register value, and a register value as an element.
std::string widened(DType t, const std::string& v) {
  return t == DType::BFloat16 ? "tp_from_bf16(" + v + ")" : t == DType::Float16 ? "tp_from_half(" + v + ")" : v;
}
std::string stored(DType t, const std::string& v) {
  return t == DType::BFloat16 ? "tp_to_bf16(" + v + ")" : t == DType::Float16 ? "tp_to_half(" + v + ")" : v;
}
// A whole vector of float lanes stored to a buffer of dtype t (16-bit: rounded lane by lane).
std::string vstore(DType t, const std::string& ptr, const std::string& v) {
  const char* f = t == DType::BFloat16 ? "tp_store_bf16(" : t == DType::Float16 ? "tp_store_half(" : "tp_store(";
  return f + ptr + ", " + v + ")";
}
// Vector types by value type and the nest's lane type: a double inside float
// lanes (the scheduler allows arithmetic and casts there) is a vector of as
// many doubles, twice the register width (vdw).
const char* vtype(DType t, DType lane = DType::Float64) {
  return t != DType::Float64 ? "vf" : lane == DType::Float32 ? "vdw" : "vd";
}
const char* splat(DType t, DType lane = DType::Float64) {
  return t != DType::Float64 ? "tp_splat_vf" : lane == DType::Float32 ? "tp_splat_vdw" : "tp_splat_vd";
}

const FloatSpellings kGcc{"__builtin_nanf(\"\")", "__builtin_nan(\"\")", "__builtin_inff()", "__builtin_inf()"};

std::string literal(const Scalar& v, DType t) {
  return c_literal(v, half16(t) ? DType::Float32 : t, kGcc);
}

std::string reduce_init(ReduceOp r, DType t) { return c_reduce_identity(r, half16(t) ? DType::Float32 : t, kGcc); }

const char* horizontal(ReduceOp r) {
  switch (r) {
    case ReduceOp::Sum: return "tp_hsum";
    case ReduceOp::Prod: return "tp_hprod";
    case ReduceOp::Max: return "tp_hmax";
    default: return "tp_hmin";
  }
}

class Writer {
 public:
  // `lane`: the value type of the nest's vector lanes (its node's type).
  Writer(const LoopProgram& p, const std::unordered_map<int, std::string>& locals, RangeMap ranges, DType lane)
      : p_(p), locals_(locals), ranges_(std::move(ranges)), lane_(lane) {}

  // Emits statements computing e into `os`; returns the name of the value (a
  // vector in vector code).
  std::string emit(const Expr& e, bool vec, int inner_var, std::ostringstream& os, const std::string& indent) {
    std::string v = value(e, vec, inner_var, os, indent);
    return vec && scalars_.count(e.get()) ? splatted(e.get(), v, os, indent) : v;
  }
  void reset_names() {
    names_.clear();
    scalars_.clear();
    splats_.clear();
    uniform_.clear();
  }
  // Vector loads that depend on the loop variable read only the lanes of this
  // bit mask (a masked tail); "" for whole vectors.
  void set_mask(std::string mask) { mask_ = std::move(mask); }
  // The body of a Sum reduction: its value is only added into the accumulator.
  void set_sum_root(const ExprNode* e) { sum_root_ = e; }

 private:
  // Does e keep one value across the vector lanes (along inner_var)? Then it
  // is scalar code in vector code too (the scheduler's rule, vectorizable_along).
  bool uniform(const Expr& e, int inner_var) {
    auto it = uniform_.find(e.get());
    if (it != uniform_.end()) return it->second;
    bool u = false;
    switch (e->op) {
      case ExprOp::Const: u = true; break;
      case ExprOp::Load:
        u = e->args.empty() && (locals_.count(e->buffer) || inner_var < 0 || !depends_on(e->index, inner_var));
        break;
      case ExprOp::Index: u = inner_var < 0 || !depends_on(e->index, inner_var); break;
      case ExprOp::Guard: u = false; break;
      default:
        u = !(e->op == ExprOp::Call && is_random(e->fn));
        for (auto& a : e->args) u = u && uniform(a, inner_var);
    }
    uniform_[e.get()] = u;
    return u;
  }
  // A scalar value where vector code needs it as a vector (once per value).
  std::string splatted(const ExprNode* e, const std::string& v, std::ostringstream& os, const std::string& indent) {
    auto it = splats_.find(e);
    if (it != splats_.end()) return it->second;
    std::string name = "t";
    name += std::to_string(counter_++);
    os << indent << vtype(e->dtype, lane_) << " " << name << " = " << splat(e->dtype, lane_) << "(" << v << ");\n";
    return splats_[e] = name;
  }
  std::string value(const Expr& e, bool vec, int inner_var, std::ostringstream& os, const std::string& indent) {
    auto it = names_.find(e.get());
    if (it != names_.end()) return it->second;
    if (vec && uniform(e, inner_var)) {
      // Scalar code (GCC hoists it out of the loop), splatted by its readers;
      // a constant, a local or a load is its own text (`tp_splat_vf(2.0f)`).
      std::string leaf;
      if (e->op == ExprOp::Const) leaf = literal(e->value, e->dtype);
      else if (e->op == ExprOp::Load && locals_.count(e->buffer)) leaf = locals_.at(e->buffer);
      else if (e->op == ExprOp::Load)
        leaf = widened(e->dtype, p_.buffers[e->buffer].name + "[" + to_c(e->index, ranges_) + "]");
      else return value(e, false, inner_var, os, indent);
      scalars_.insert(e.get());
      return names_[e.get()] = leaf;
    }
    std::string rhs;
    switch (e->op) {
      case ExprOp::Const: rhs = literal(e->value, e->dtype); break;  // (a vector's constants are uniform)
      case ExprOp::Load: {
        auto loc = locals_.find(e->buffer);
        const Buffer& b = p_.buffers[e->buffer];
        if (loc != locals_.end()) {
          rhs = loc->second;
        } else if (!e->args.empty()) {  // indirect: never in vector code (the scheduler refuses it)
          std::string off = value(e->args[0], false, inner_var, os, indent);
          rhs = widened(b.dtype, b.name + "[" + to_c(e->index, ranges_) + " + " + off + "]");
        } else {
          std::string idx = to_c(e->index, ranges_);
          // A bool mask (a where's condition, the scheduler allows it nowhere
          // else): contiguous, its bytes become lane masks of the selected
          // values' type (an invariant one is a uniform scalar selecting whole vectors).
          if (!vec) rhs = widened(b.dtype, b.name + "[" + idx + "]");
          else if (e->dtype == DType::Bool)
            rhs = (mask_.empty() ? "tp_load_mask(" : "tp_load_mask_m(") + b.name + " + (" + idx + "), " +
                  (mask_.empty() ? "" : mask_ + ", ") + vtype(mask_lane_) + "{})";
          else if (!mask_.empty()) rhs = "tp_load_m(" + b.name + " + (" + idx + "), " + mask_ + ")";
          else if (half16(b.dtype))  // float lanes widened from the 16-bit patterns
            rhs = std::string(b.dtype == DType::BFloat16 ? "tp_load_bf16(" : "tp_load_half(") + b.name + " + (" + idx + "))";
          else rhs = "tp_load(" + b.name + " + (" + idx + "))";
        }
        break;
      }
      case ExprOp::Call: {
        std::vector<std::string> a;
        for (auto& x : e->args) a.push_back(emit(x, vec, inner_var, os, indent));  // (a uniform one splatted)
        // Narrow integers are scalar code: their operands are widened to i64, so
        // an int32 sum or product that overflows wraps at the narrow assignment
        // (in int it would be undefined behaviour that GCC may exploit), and the
        // prelude's i64 functions (tp_abs, tp_max, ...) take them unambiguously.
        if (!vec)
          for (size_t i = 0; i < a.size(); ++i)
            if (narrow_int(e->args[i]->dtype)) a[i] = "(i64)" + a[i];
        rhs = c_call(e->fn, a);  // logical/bitwise ops: bool or int operands, scalar code only
        break;
      }
      case ExprOp::Where: {
        mask_lane_ = e->dtype;  // the lanes a loaded bool condition selects between
        std::string c = value(e->args[0], vec, inner_var, os, indent);  // a uniform condition stays scalar
        std::string a = emit(e->args[1], vec, inner_var, os, indent);
        std::string b = emit(e->args[2], vec, inner_var, os, indent);
        rhs = "tp_where(" + c + ", " + a + ", " + b + ")";
        break;
      }
      case ExprOp::Index:  // a scalar (uniform in vector code)
        rhs = "(i64)(" + to_c(e->index, ranges_) + ")";
        break;
      case ExprOp::Guard: {  // in vector code only with a uniform condition (the scheduler's rule)
        std::string ok = value(e->args[0], false, inner_var, os, indent);
        std::string word = std::to_string(e->value.to_int()) + "LL";
        if (e->args.size() > 2)  // the code and the reported value in one store (LoopProgram::Check)
          word = "(i64)((unsigned long long)" + word + " | ((unsigned long long)(" +
                 value(e->args[2], false, inner_var, os, indent) + ") << 16))";
        os << indent << "if (__builtin_expect(!(" << ok << "), 0)) __atomic_store_n(tp_status, " << word
           << ", __ATOMIC_RELAXED);\n";
        rhs = emit(e->args[1], vec, inner_var, os, indent);
        break;
      }
      case ExprOp::Cast: {
        std::string a = value(e->args[0], vec, inner_var, os, indent);
        // In vector code only a float <-> double conversion of every lane (the
        // scheduler allows no other; the cast of a uniform value is scalar code).
        // 16-bit floats are float lanes: a cast to one rounds every lane, one from it is the register.
        if (vec && half16(e->dtype))
          rhs = std::string(e->dtype == DType::BFloat16 ? "tp_round_bf16(" : "tp_round_half(") + a + ")";
        else if (vec && half16(e->args[0]->dtype)) rhs = a;
        else if (vec) rhs = std::string(e->dtype == DType::Float64 ? "tp_widen(" : "tp_narrow(") + a + ")";
        else if (e->dtype == DType::Bool) rhs = "(" + a + " != 0)";
        else if (half16(e->dtype))  // rounds the float value to the 16-bit type
          rhs = std::string(e->dtype == DType::BFloat16 ? "tp_round_bf16" : "tp_round_half") + "((float)(" + a + "))";
        // A float becomes a narrow integer through int64, as eager converts it
        // (3e9 to int32 wraps to -1294967296; NaN and out-of-range values give
        // int64's INT64_MIN, whose low bits are 0).
        else if (narrow_int(e->dtype) && is_floating(e->args[0]->dtype))
          rhs = std::string("(") + ctype(e->dtype) + ")(i64)(" + a + ")";
        else rhs = std::string("(") + ctype(e->dtype) + ")(" + a + ")";
        break;
      }
    }
    std::string name = "t";  // appended, not operator+: GCC 12 warns falsely (-Wrestrict)
    name += std::to_string(counter_++);
    const char* type = !vec ? ctype(e->dtype) : e->dtype == DType::Bool ? "auto" : vtype(e->dtype, lane_);
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
      // (A double vector of float lanes is two registers: tp_keep holds both.)
      os << indent << (std::string(type) == "vdw" ? "tp_keep(&" + name + ");\n" : "__asm__(\"\" : \"+v\"(" + name + "));\n");
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
    if (!vec) scalars_.insert(e.get());  // (in vector code: a uniform value, or part of one)
    return name;
  }
  const LoopProgram& p_;
  const std::unordered_map<int, std::string>& locals_;
  RangeMap ranges_;
  std::unordered_map<const ExprNode*, std::string> names_;
  const ExprNode* sum_root_ = nullptr;
  std::string mask_;
  DType lane_;
  DType mask_lane_ = DType::Float32;  // value type of the where whose condition is being emitted
  std::unordered_set<const ExprNode*> scalars_;  // scalar values emitted in vector code (uniform ones)
  std::unordered_map<const ExprNode*, std::string> splats_;  // their vectors
  std::unordered_map<const ExprNode*, bool> uniform_;
  int counter_ = 0;
};

std::string var_name(const IndexExpr& v) { return v.var_name(); }

// Type of the loop variables (and so of the index arithmetic on them).
const char* index_type(const KernelPlan& k) { return k.index_bits == 32 ? "int" : "i64"; }

// A loop bound: a constant prints as its digits, an expression over size
// variables as C (the kernel defines tp_size<k> from sizes[k]).
std::string ext(const IndexExpr& e) { return e.is_const() ? std::to_string(e.const_value()) : to_c(e, {}); }

// The first statement of a vectorized nest's scalar tail loop (fewer than one
// vector of iterations). With a symbolic extent GCC cannot see that bound and
// auto-vectorizes the tail for 64- and 32-byte vectors, code that never runs
// and that made the C++ compile of Example 1.1 with a symbolic row 1.2x longer;
// an empty asm statement stops it. Static tails are left alone (their trip
// count is known, and the printed source stays what it was).
std::string tail_barrier(const LoopNest& nest, const std::string& indent) {
  if (!nest.vectorize || nest.inner_extents.empty() || nest.inner_extents.back().is_const()) return "";
  return indent + "__asm__(\"\");  // a tail: not auto-vectorized\n";
}

std::string extents_str(const Shape& shape, const std::vector<IndexExpr>& exprs) {
  bool fixed = true;
  for (const IndexExpr& e : exprs) fixed = fixed && e.is_const();
  if (fixed) return shape_str(shape);
  std::string out = "[";
  for (size_t i = 0; i < exprs.size(); ++i) {
    if (i) out += ", ";
    out += exprs[i].to_string();
  }
  out += ']';
  return out;
}

// Size variables a kernel reads (its loop bounds and indices).
std::vector<int> sizes_used(const KernelPlan& k) {
  std::vector<int> out;
  collect_sizes(k.outer_count, out);
  for (const LoopNest& n : k.nests) {
    for (const IndexExpr& e : n.inner_extents) collect_sizes(e, out);
    collect_sizes(n.store_index, out);
    for (const SideStore& ss : n.side_stores) collect_sizes(ss.index, out);
    for (const ExprNode* l : loads_of(n.body)) collect_sizes(l->index, out);
    // Index values (a count N read at run time, an index bound of a symbolic dim).
    struct IndexValues : ExprVisitor {
      std::vector<int>& out;
      explicit IndexValues(std::vector<int>& o) : out(o) {}
      void visit_index(const ExprNode& e) override { collect_sizes(e.index, out); }
    } values(out);
    values.visit(n.body);
  }
  std::sort(out.begin(), out.end());
  return out;
}

RangeMap nest_ranges(const KernelPlan& k, const LoopNest& n) {
  RangeMap r = k.size_ranges;  // empty unless the program has size variables
  r[k.outer_var.var_id()] = outer_interval(k);
  for (size_t d = 0; d < n.inner_vars.size(); ++d) r[n.inner_vars[d].var_id()] = loop_interval(n.inner_extents[d]);
  return r;
}

// A scan (cumsum / cumprod): the running fold along the inner loop, stored at
// every step. Floats accumulate in double and integers in unsigned 64-bit
// arithmetic (wrapping), each step rounded to the result type: eager's kernel
// does the same, so the results are equal bit for bit.
void emit_scan(std::ostringstream& os, const LoopProgram& p, const KernelPlan& k, const LoopNest& nest,
               std::unordered_map<int, std::string>& locals) {
  const ComputeNode& node = p.nodes[nest.node];
  const Buffer& out = p.buffers[node.out_buffer];
  RangeMap ranges = nest_ranges(k, nest);
  Writer w(p, locals, ranges, node.body->dtype);
  DType dt = node.body->dtype;
  const char* acc_t = is_floating(dt) ? "double" : "unsigned long long";
  std::string acc = "scan" + std::to_string(nest.node);
  const std::string in = "    ";
  os << in << "{  // node " << nest.node << ": " << node.origin << " -> " << out.name << " (scan "
     << reduce_op_name(node.reduce) << " over " << extents_str(nest.inner_ranges, nest.inner_extents) << ")\n";
  os << in << "  " << acc_t << " " << acc << " = " << (node.reduce == ReduceOp::Prod ? "1" : "0") << ";\n";
  std::string j = var_name(nest.inner_vars.back());
  os << in << "  for (" << index_type(k) << " " << j << " = 0; " << j << " < " << ext(nest.inner_extents.back()) << "; ++"
     << j << ") {\n";
  std::string v = w.emit(nest.body, false, -1, os, in + "    ");
  os << in << "    " << acc << " = " << acc << (node.reduce == ReduceOp::Prod ? " * " : " + ") << "(" << acc_t << ")" << v
     << ";\n";
  os << in << "    " << out.name << "[" << to_c(nest.store_index, ranges) << "] = "
     << stored(out.dtype, std::string("(") + ctype(dt) + ")" + acc) << ";\n";
  os << in << "  }\n" << in << "}\n";
}

// Stores a pair reduction's two results (when the plan keeps them in memory)
// and makes them the locals later nests of the kernel read.
void finish_pair(std::ostringstream& os, const LoopProgram& p, const LoopNest& nest, const RangeMap& ranges,
                 const std::string& first, const std::string& second, std::unordered_map<int, std::string>& locals) {
  const ComputeNode& node = p.nodes[nest.node];
  locals[node.out_buffer] = first;
  locals[node.aux_buffer] = second;
  const std::string sidx = to_c(nest.store_index, ranges);
  if (nest.store_to_memory)
    os << "    " << p.buffers[node.out_buffer].name << "[" << sidx << "] = " << stored(p.buffers[node.out_buffer].dtype, first)
       << ";\n";
  if (nest.store_aux_to_memory)
    os << "    " << p.buffers[node.aux_buffer].name << "[" << sidx << "] = " << stored(p.buffers[node.aux_buffer].dtype, second)
       << ";\n";
}

// A Welford reduction: results mean (out_buffer) and M2 (aux_buffer), as the
// plan says (WelfordMode). One pass: W vector accumulators, each a (mean, M2)
// state per double lane (a float vector is split into two double halves),
// stepped together so they share one count and one reciprocal per step; a plain
// sum beside them gives the mean result (sum / n is eager's mean, also for
// infinities, where the running mean would give inf - inf); then the states are
// merged pairwise (accumulators, then lanes), then with the scalar tail's.
// Two passes (a row in cache is read twice): the sum, the mean, then the sum of
// squared deviations from it, in the element type (the old decomposition's
// loops, 1.8x faster than one pass on a float row in L1, with 3-7x eager's
// error: see WelfordMode).
void emit_welford(std::ostringstream& os, const LoopProgram& p, const KernelPlan& k, const LoopNest& nest,
                  std::unordered_map<int, std::string>& locals) {
  const ComputeNode& node = p.nodes[nest.node];
  RangeMap ranges = nest_ranges(k, nest);
  Writer w(p, locals, ranges, node.body->dtype);
  const DType dt = node.body->dtype;
  const char* T = ctype(dt);
  const char* ix = index_type(k);
  const std::string in = "    ";
  const std::string acc = "red" + std::to_string(nest.node);
  const size_t nd = nest.inner_vars.size();
  const int lanes = nest.lanes, kAcc = nest.accumulators;
  const int jv = nd ? nest.inner_vars.back().var_id() : -1;
  const std::string j = nd ? var_name(nest.inner_vars.back()) : "", jb = j + "_";
  const bool two_pass = nest.welford == WelfordMode::TwoPass && nd == 1;
  const bool f32 = dt == DType::Float32;
  os << in << T << " " << acc << ";\n" << in << "double " << acc << "_m2;\n";
  os << in << "{  // node " << nest.node << ": " << node.origin << " -> " << p.buffers[node.out_buffer].name << ", "
     << p.buffers[node.aux_buffer].name << " (welford over " << extents_str(nest.inner_ranges, nest.inner_extents)
     << (two_pass ? ", two passes" : ", one pass") << ")" << (nest.vectorize ? ", vectorized" : "") << "\n";
  std::string indent = in + "  ";
  auto open_loops = [&]() {
    for (size_t d = 0; d + 1 < nd; ++d) {
      std::string v = var_name(nest.inner_vars[d]);
      os << indent << "for (" << ix << " " << v << " = 0; " << v << " < " << ext(nest.inner_extents[d]) << "; ++" << v
         << ") {\n";
      indent += "  ";
    }
  };
  auto close_loops = [&]() {
    for (size_t d = 0; d + 1 < nd; ++d) {
      indent.resize(indent.size() - 2);
      os << indent << "}\n";
    }
  };
  // The number of values: the product of the inner extents.
  std::string count = "1.0";
  for (const IndexExpr& e : nest.inner_extents) count += " * (double)(" + ext(e) + ")";

  if (two_pass) {
    // Sums over the row of terms of v, the body's value: per term W vector
    // accumulators and a scalar tail, combined pairwise (as a plain vector sum).
    // Prints `assign(totals)` in its own scope.
    const std::string hi = ext(nest.inner_extents[0]);
    int pass = 0;
    // Prints, in its own scope, sums over the row of terms(pre(v)), v the
    // body's value (pre prints a statement and names its value): per term W
    // vector accumulators and a scalar tail, combined pairwise; then assign(totals).
    using Pre = std::function<std::string(const std::string&, bool, const std::string&)>;
    using Terms = std::function<std::vector<std::string>(const std::string&)>;
    auto fold = [&](size_t nterms, const Pre& pre, const Terms& terms,
                    const std::function<std::string(const std::vector<std::string>&)>& assign) {
      const std::string a = acc + "_p" + std::to_string(pass++);
      os << indent << "{\n";
      const std::string outer_indent = indent;
      indent += "  ";
      auto an = [&](size_t t, int q) { return a + "_" + std::to_string(t) + "_v" + std::to_string(q); };
      auto sn = [&](size_t t) { return a + "_" + std::to_string(t) + "_s"; };
      for (size_t t = 0; t < nterms; ++t) {
        if (nest.vectorize)
          for (int q = 0; q < kAcc; ++q) os << indent << vtype(dt) << " " << an(t, q) << " = " << splat(dt) << "(0);\n";
        // (a scalar float32 loop accumulates in double, as a scalar sum does)
        os << indent << (!nest.vectorize && f32 ? "double" : T) << " " << sn(t) << " = 0;\n";
      }
      os << indent << ix << " " << jb << " = 0;\n";
      auto step = [&](bool vec, const std::string& ind, int q) {
        std::string v = w.emit(nest.body, vec, jv, os, ind);
        std::vector<std::string> ts = terms(pre(v, vec, ind));
        for (size_t t = 0; t < nterms; ++t) {
          std::string target = vec ? an(t, q) : sn(t);
          os << ind << target << " = " << target << " + " << ts[t] << ";\n";
        }
        w.reset_names();
      };
      if (nest.vectorize) {
        os << indent << "for (; " << jb << " + " << kAcc * lanes << " <= " << hi << "; " << jb << " += " << kAcc * lanes
           << ") {\n";
        for (int q = 0; q < kAcc; ++q) {
          os << indent << "  {\n" << indent << "    const " << ix << " " << j << " = " << jb << " + " << q * lanes << ";\n";
          step(true, indent + "    ", q);
          os << indent << "  }\n";
        }
        os << indent << "}\n";
        os << indent << "for (; " << jb << " + " << lanes << " <= " << hi << "; " << jb << " += " << lanes << ") {\n";
        os << indent << "  const " << ix << " " << j << " = " << jb << ";\n";
        step(true, indent + "  ", 0);
        os << indent << "}\n";
      }
      os << indent << "for (; " << jb << " < " << hi << "; ++" << jb << ") {\n";
      os << indent << "  const " << ix << " " << j << " = " << jb << ";\n";
      os << tail_barrier(nest, indent + "  ");
      step(false, indent + "  ", 0);
      os << indent << "}\n";
      std::vector<std::string> totals;
      for (size_t t = 0; t < nterms; ++t) {
        std::string total = sn(t);
        if (nest.vectorize) {
          std::function<std::string(int, int)> tree = [&](int from, int to) {
            if (to - from == 1) return an(t, from);
            int mid = from + (to - from + 1) / 2;
            return c_combine(ReduceOp::Sum, tree(from, mid), tree(mid, to));
          };
          total = c_combine(ReduceOp::Sum, std::string("tp_hsum(") + tree(0, kAcc) + ")", sn(t));
        }
        totals.push_back(total);
      }
      os << indent << assign(totals) << ";\n";
      indent = outer_indent;
      os << indent << "}\n";
    };
    fold(
        1, [](const std::string& v, bool, const std::string&) { return v; },
        [](const std::string& u) { return std::vector<std::string>{u}; },
        [&](const std::vector<std::string>& t) { return acc + " = (" + T + ")(" + t[0] + " / (" + T + ")(" + hi + "))"; });
    // The squared deviations, corrected by the deviations' own sum (Chan, Golub
    // and LeVeque's corrected two-pass formula): M2 = sum(d^2) - sum(d)^2 / n
    // removes, to first order, the error of the rounded mean (1e4 + randn,
    // float32, 2048-element rows: 2e-6 relative error without the correction,
    // 4e-7 with it; eager's double two-pass 6e-8).
    fold(
        2,
        [&](const std::string& v, bool vec, const std::string& ind) {
          os << ind << (vec ? vtype(dt) : T) << " tp_d = " << v << " - " << acc << ";\n";
          return std::string("tp_d");
        },
        [](const std::string& u) { return std::vector<std::string>{u, u + " * " + u}; },
        [&](const std::vector<std::string>& t) {
          return "const double tp_ds = (double)" + t[0] + "; " + acc + "_m2 = (double)" + t[1] +
                 " - tp_ds * tp_ds / (double)(" + hi + ")";
        });
    os << in << "}\n";
    finish_pair(os, p, nest, ranges, acc, acc + "_m2", locals);
    return;
  }
  // One pass.
  const int halves = nest.vectorize && f32 ? 2 : 1;
  const int half = lanes / 2;
  const std::string st = acc + "_w";  // state prefix
  // n: steps of the W-vector loop (every accumulator's count), n0: extra
  // one-vector steps of accumulator 0; t*: the scalar tail's state.
  os << indent << "double " << st << "n = 0, " << st << "n0 = 0, " << st << "tn = 0, " << st << "tm = 0, " << st
     << "tq = 0, " << st << "ts = 0;\n";
  auto sname = [&](const char* what, int a, int h) { return st + what + std::to_string(a) + "_" + std::to_string(h); };
  if (nest.vectorize)
    for (int a = 0; a < kAcc; ++a)
      for (int h = 0; h < halves; ++h)
        os << indent << "vd " << sname("m", a, h) << " = tp_splat_vd(0.0), " << sname("q", a, h) << " = tp_splat_vd(0.0), "
           << sname("s", a, h) << " = tp_splat_vd(0.0);\n";
  open_loops();
  std::string lo = "0", hi = nd ? ext(nest.inner_extents.back()) : "1";
  auto idx_list = [](int from, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(from + i);
    return s;
  };
  if (nd > 0) os << indent << ix << " " << jb << " = " << lo << ";\n";
  if (nest.vectorize) {
    os << indent << "for (; " << jb << " + " << kAcc * lanes << " <= " << hi << "; " << jb << " += " << kAcc * lanes
       << ") {\n";
    os << indent << "  " << st << "n += 1.0;\n";
    os << indent << "  const double " << st << "r = 1.0 / " << st << "n;\n";
    auto vstep = [&](int a, const std::string& ind, const std::string& r) {
      std::string v = w.emit(nest.body, true, jv, os, ind);
      for (int h = 0; h < halves; ++h) {
        std::string x = f32 ? "__builtin_convertvector(__builtin_shufflevector(" + v + ", " + v + ", " +
                                  idx_list(h * half, half) + "), vd)"
                            : v;
        os << ind << "{\n" << ind << "  const vd tp_x = " << x << ";\n";
        os << ind << "  tp_wstep(" << sname("m", a, h) << ", " << sname("q", a, h) << ", tp_x, " << r << ");\n";
        os << ind << "  " << sname("s", a, h) << " = " << sname("s", a, h) << " + tp_x;\n" << ind << "}\n";
      }
      w.reset_names();
    };
    for (int a = 0; a < kAcc; ++a) {
      os << indent << "  {\n" << indent << "    const " << ix << " " << j << " = " << jb << " + " << a * lanes << ";\n";
      // With several rows (a reduction over non-adjacent dims), accumulator 0
      // also holds the previous rows' left-over vectors: its count is n + n0.
      vstep(a, indent + "    ", a == 0 && nd > 1 ? "1.0 / (" + st + "n + " + st + "n0)" : st + "r");
      os << indent << "  }\n";
    }
    os << indent << "}\n";
    // Whole vectors left over go to accumulator 0 (its count is then n + n0).
    os << indent << "for (; " << jb << " + " << lanes << " <= " << hi << "; " << jb << " += " << lanes << ") {\n";
    os << indent << "  const " << ix << " " << j << " = " << jb << ";\n";
    os << indent << "  " << st << "n0 += 1.0;\n";
    vstep(0, indent + "  ", "1.0 / (" + st + "n + " + st + "n0)");
    os << indent << "}\n";
  }
  // The scalar tail (or the whole loop when not vectorized).
  std::string step_indent = indent;
  if (nd > 0) {
    os << indent << "for (; " << jb << " < " << hi << "; ++" << jb << ") {\n";
    os << indent << "  const " << ix << " " << j << " = " << jb << ";\n";
    os << tail_barrier(nest, indent + "  ");
    step_indent += "  ";
  }
  std::string v = w.emit(nest.body, false, jv, os, step_indent);
  os << step_indent << "const double tp_x = (double)" << v << ";\n";
  os << step_indent << st << "tn += 1.0;\n";
  os << step_indent << "tp_wstep(" << st << "tm, " << st << "tq, tp_x, 1.0 / " << st << "tn);\n";
  os << step_indent << st << "ts += tp_x;\n";
  if (nd > 0) os << indent << "}\n";
  w.reset_names();
  close_loops();
  // Merge: the vector states pairwise (equal counts), then their lanes, then the tail.
  os << indent << "double tp_n = 0, tp_m = 0, tp_q = 0, tp_s = 0;\n";
  if (nest.vectorize) {
    std::vector<std::string> ms, qs, ss;
    for (int a = 0; a < kAcc; ++a)
      for (int h = 0; h < halves; ++h) {
        ms.push_back(sname("m", a, h));
        qs.push_back(sname("q", a, h));
        ss.push_back(sname("s", a, h));
      }
    // Counts per state (accumulator a, half h): n, plus n0 for accumulator 0.
    os << indent << "{\n" << indent << "  double tp_c[" << ms.size() << "];\n";
    for (size_t i = 0; i < ms.size(); ++i)
      os << indent << "  tp_c[" << i << "] = " << st << "n" << (i < static_cast<size_t>(halves) ? " + " + st + "n0" : "")
         << ";\n";
    for (size_t width = 1; width < ms.size(); width *= 2)
      for (size_t i = 0; i + width < ms.size(); i += 2 * width) {
        os << indent << "  tp_wmerge(tp_c[" << i << "], " << ms[i] << ", " << qs[i] << ", tp_c[" << i + width << "], "
           << ms[i + width] << ", " << qs[i + width] << ");\n";
        os << indent << "  " << ss[i] << " = " << ss[i] << " + " << ss[i + width] << ";\n";
      }
    os << indent << "  tp_wlanes(tp_c[0], " << ms[0] << ", " << qs[0] << ", &tp_m, &tp_q);\n";
    os << indent << "  tp_n = tp_c[0] * " << (f32 ? half : lanes) << ";\n";
    os << indent << "  tp_s = tp_hsum(" << ss[0] << ");\n" << indent << "}\n";
  }
  os << indent << "tp_wmerge(tp_n, tp_m, tp_q, " << st << "tn, " << st << "tm, " << st << "tq);\n";
  os << indent << "tp_s += " << st << "ts;\n";
  os << indent << acc << " = (" << T << ")(tp_s / (" << count << "));\n";
  os << indent << acc << "_m2 = tp_q;\n";
  (void)lo;
  os << in << "}\n";
  finish_pair(os, p, nest, ranges, acc, acc + "_m2", locals);
}

// An arg reduction: the (value, position) of the first extremum, one pass in
// order (vectorized when the plan says so). A value replaces the best when it is larger (smaller), or a
// NaN while the best is not: the first NaN wins, as in eager, and the value
// result is the element at the position (so a tied -0.0 / +0.0 keeps the sign
// eager returns).
void emit_arg(std::ostringstream& os, const LoopProgram& p, const KernelPlan& k, const LoopNest& nest,
              std::unordered_map<int, std::string>& locals) {
  const ComputeNode& node = p.nodes[nest.node];
  RangeMap ranges = nest_ranges(k, nest);
  Writer w(p, locals, ranges, node.body->dtype);
  const DType dt = node.body->dtype;
  const bool is_max = node.reduce == ReduceOp::ArgMax;
  const char* ix = index_type(k);
  const std::string in = "    ";
  const std::string acc = "red" + std::to_string(nest.node);
  os << in << "i64 " << acc << " = 0;\n" << in << ctype(dt) << " " << acc << "_v = "
     << reduce_init(is_max ? ReduceOp::Max : ReduceOp::Min, dt) << ";\n";
  os << in << "{  // node " << nest.node << ": " << node.origin << " -> " << p.buffers[node.out_buffer].name << ", "
     << p.buffers[node.aux_buffer].name << " (" << reduce_op_name(node.reduce) << " over "
     << extents_str(nest.inner_ranges, nest.inner_extents) << ")\n";
  std::string indent = in + "  ";
  const size_t nd = nest.inner_vars.size();
  const bool vec = nest.vectorize && nd > 0;
  auto better = [&](const std::string& v, const std::string& best) {
    std::string b = v + (is_max ? " > " : " < ") + best;
    if (is_floating(dt)) b = "(" + b + ") | ((" + v + " != " + v + ") & (" + best + " == " + best + "))";
    return b;
  };
  // Vector form: per lane the best value and its position (int32 lanes for
  // float, int64 for double: as wide as the values), strict updates so a lane
  // keeps its first extremum; the loop's positions move with lane l as
  // position(j) + l (the scheduler checked the coefficient).
  const std::string bv = acc + "_bv", bi = acc + "_bi";
  const char* it = dt == DType::Float64 ? "vl" : "vi";
  if (vec) {
    os << indent << vtype(dt) << " " << bv << " = " << splat(dt) << "(" << reduce_init(is_max ? ReduceOp::Max : ReduceOp::Min, dt)
       << ");\n";
    os << indent << it << " " << bi << " = " << it << "{}, " << acc << "_io;\n";
    os << indent << "for (int l = 0; l < " << nest.lanes << "; ++l) " << acc << "_io[l] = l;\n";
  }
  for (size_t d = 0; d + (vec ? 1 : 0) < nd; ++d) {
    std::string v = var_name(nest.inner_vars[d]);
    os << indent << "for (" << ix << " " << v << " = 0; " << v << " < " << ext(nest.inner_extents[d]) << "; ++" << v
       << ") {\n";
    indent += "  ";
  }
  if (vec) {
    const std::string j = var_name(nest.inner_vars.back()), jb = j + "_", hi = ext(nest.inner_extents.back());
    const int jv = nest.inner_vars.back().var_id();
    os << indent << ix << " " << jb << " = 0;\n";
    os << indent << "for (; " << jb << " + " << nest.lanes << " <= " << hi << "; " << jb << " += " << nest.lanes << ") {\n";
    os << indent << "  const " << ix << " " << j << " = " << jb << ";\n";
    std::string v = w.emit(nest.body, true, jv, os, indent + "  ");
    std::string pos = w.emit(nest.position, false, -1, os, indent + "  ");
    os << indent << "  const auto tp_b = " << better(v, bv) << ";\n";
    os << indent << "  " << bv << " = tp_where(tp_b, " << v << ", " << bv << ");\n";
    os << indent << "  " << bi << " = tp_where(tp_b, (" << (dt == DType::Float64 ? "i64" : "int") << ")" << pos << " + "
       << acc << "_io, " << bi << ");\n";
    os << indent << "}\n";
    w.reset_names();
    os << indent << "for (; " << jb << " < " << hi << "; ++" << jb << ") {\n";
    os << indent << "  const " << ix << " " << j << " = " << jb << ";\n";
    os << tail_barrier(nest, indent + "  ");
    indent += "  ";
  }
  std::string v = w.emit(nest.body, false, -1, os, indent);
  std::string pos = w.emit(nest.position, false, -1, os, indent);
  os << indent << "if (" << better(v, acc + "_v") << ") { " << acc << "_v = " << v << "; " << acc << " = " << pos << "; }\n";
  if (vec) {
    indent.resize(indent.size() - 2);
    os << indent << "}\n";
  }
  for (size_t d = 0; d + (vec ? 1 : 0) < nd; ++d) {
    indent.resize(indent.size() - 2);
    os << indent << "}\n";
  }
  if (vec) {
    // The lanes and the scalar tail's pair, merged: the better value, or an
    // equal one (both NaN counts as equal) at a smaller position.
    os << indent << "for (int l = 0; l < " << nest.lanes << "; ++l) {\n";
    os << indent << "  const " << ctype(dt) << " tp_v = " << bv << "[l];\n";
    os << indent << "  const i64 tp_i = (i64)" << bi << "[l];\n";
    std::string eq = "(tp_v == " + acc + "_v)";
    if (is_floating(dt)) eq = "(" + eq + " | ((tp_v != tp_v) & (" + acc + "_v != " + acc + "_v)))";
    os << indent << "  if ((" << better("tp_v", acc + "_v") << ") | (" << eq << " & (tp_i < " << acc << "))) { " << acc
       << "_v = tp_v; " << acc << " = tp_i; }\n";
    os << indent << "}\n";
  }
  os << in << "}\n";
  finish_pair(os, p, nest, ranges, acc, acc + "_v", locals);
}

// Prints one nest as its plan says (lanes, accumulators, cascade blocks: see
// LoopNest); lo/hi, when given, bound the last inner loop (a chunk). Returns,
// for a reduction, the name of its most precise result (a float sum's double
// total before rounding).
std::string emit_nest(std::ostringstream& os, const LoopProgram& p, const KernelPlan& k, const LoopNest& nest,
                      std::unordered_map<int, std::string>& locals, const std::string& lo_hi_lo,
                      const std::string& lo_hi_hi) {
  const ComputeNode& node = p.nodes[nest.node];
  if (node.scan) {
    emit_scan(os, p, k, nest, locals);
    return "";
  }
  if (node.reduce == ReduceOp::Welford) {
    emit_welford(os, p, k, nest, locals);
    return "";
  }
  if (node.reduce == ReduceOp::ArgMax || node.reduce == ReduceOp::ArgMin) {
    emit_arg(os, p, k, nest, locals);
    return "";
  }
  const Buffer& out = p.buffers[node.out_buffer];
  RangeMap ranges = nest_ranges(k, nest);
  Writer w(p, locals, ranges, node.body->dtype);
  if (node.reduce == ReduceOp::Sum) w.set_sum_root(nest.body.get());
  DType dt = node.body->dtype;
  const std::string in = "    ";
  std::string acc = "red" + std::to_string(nest.node);
  size_t nd = nest.inner_vars.size();
  const int lanes = nest.lanes;
  const char* ix = index_type(k);
  // A masked tail (TailMode::Masked, vectorized nests only): the iterations
  // after the last whole vector run as one vector step whose loads read only
  // the live lanes (the others are zero: AVX-512 masked loads), whose stores
  // write only those, and whose reduction input is the identity in the others.
  const bool masked = nest.tail == TailMode::Masked && nest.vectorize && nd > 0;
  // A masked loop (TailMode::MaskedLoop, a reduction over a symbolic extent):
  // what the W-vector loop leaves runs as vector steps into accumulator 0, the
  // last one reading only its live lanes and adding the identity in the
  // others; no one-vector loop, no scalar tail.
  const bool masked_loop = nest.tail == TailMode::MaskedLoop && nest.vectorize && nd > 0 && node.is_reduction();
  // Reduction: nest.accumulators vector accumulators (segmented summation,
  // Section 6.5), a scalar accumulator for the tail, a pairwise combine at the
  // end. A cascaded sum (nest.block > 0) runs in blocks that each start from
  // zero; the block results are added pairwise, in double, through a
  // binary-counter stack, so the large partial sums near the top of the
  // cascade are not rounded to float (eager flushes its blocks into a double
  // total for the same reason).
  const int kAcc = nest.accumulators;
  const int64_t block = nest.block;
  const bool cascade = block > 0;
  // A reduction's result outlives its loop block: later nests of this kernel read it.
  if (node.is_reduction() || (nd == 0 && k.local_buffers.count(node.out_buffer)))
    os << in << ctype(dt) << " " << acc << ";\n";
  if (cascade) os << in << "double " << acc << "_tot = 0.0;\n";
  // A symbolic extent is cascaded in case it is long (the plan says so with
  // cascade_levels 0), but its blocks are added into the double total one
  // after the other instead of pairwise through the binary-counter stack: in
  // double the order costs nothing measurable (the
  // error of n / block additions in double is far below the float result's
  // rounding for any size that fits in memory), a row of one block gives the
  // uncascaded loop's value (0.0 + float, rounded back), and the kernel keeps
  // one loop form with no push, no stack sized for the symbol's range and no
  // flush (the stack, and an earlier run-time branch to a second copy of the
  // loop for rows of one block, cost Example 1.1 with both dims symbolic 1.2x
  // its time and 2x the static kernel's C++ compile time).
  const bool serial_total = cascade && nest.cascade_levels == 0;
  // A vectorized serial total has no block loop: the W-accumulator loop adds
  // its vectors into the total whenever it ends a block (a block is a whole
  // number of its steps, counted from the loop's start), and the last, partial
  // block (whole vectors, then the scalar tail) is added after the tail. The
  // same blocks, the same sums as a loop over blocks, but one loop level less:
  // g++ compiled Example 1.1 with both dims symbolic (64x128) about 1.5 ms
  // faster, and a flush test per W vectors costs nothing measurable.
  const int64_t step = int64_t{kAcc} * lanes;
  const bool flush_in_loop = serial_total && nest.vectorize && nd > 0 && block % step == 0;
  os << in << "{  // node " << nest.node << ": " << node.origin << " -> " << out.name;
  if (node.is_reduction()) os << " (" << reduce_op_name(node.reduce) << " over " << extents_str(nest.inner_ranges, nest.inner_extents) << ")";
  os << (nest.vectorize ? ", vectorized" : "") << "\n";
  int jv = nd ? nest.inner_vars.back().var_id() : -1;
  std::string indent = in + "  ";
  // Loops over all inner dims but the last (never vectorized).
  auto open_outer_inner = [&]() {
    for (size_t d = 0; d + 1 < nd; ++d) {
      std::string v = var_name(nest.inner_vars[d]);
      if (d == 0 && nest.parallel_first) os << indent << "#pragma omp parallel for schedule(static)\n";
      const bool bounded = d == 0 && nest.chunk_first && !lo_hi_lo.empty();  // a chunk of the first loop
      os << indent << "for (" << ix << " " << v << " = " << (bounded ? lo_hi_lo : "0") << "; " << v << " < "
         << (bounded ? lo_hi_hi : ext(nest.inner_extents[d])) << "; ++" << v << ") {\n";
      indent += "  ";
    }
  };
  auto close_outer_inner = [&]() {
    for (size_t d = 0; d + 1 < nd; ++d) {
      indent.resize(indent.size() - 2);
      os << indent << "}\n";
    }
  };
  std::string lo = "0", hi = nd ? ext(nest.inner_extents.back()) : "1";
  if (!lo_hi_lo.empty() && !nest.chunk_first) { lo = lo_hi_lo; hi = lo_hi_hi; }
  std::string j = nd ? var_name(nest.inner_vars.back()) : "";
  std::string jb = j + "_";
  std::string store_idx = to_c(nest.store_index, ranges);
  // Values a later nest of this kernel reads back instead of recomputing.
  auto side_stores = [&](bool vec, const std::string& ind, const std::string& mask = "") {
    for (auto& ss : nest.side_stores) {
      std::string v = w.emit(ss.value, vec, jv, os, ind);
      const Buffer& b = p.buffers[ss.buffer];
      std::string idx = to_c(ss.index, ranges);
      if (vec && !mask.empty())
        os << ind << "tp_store_m(" << b.name << " + (" << idx << "), " << v << ", " << mask << ");  // reused below\n";
      else if (vec) os << ind << vstore(b.dtype, b.name + " + (" + idx + ")", v) << ";  // reused below\n";
      else os << ind << b.name << "[" << idx << "] = " << stored(b.dtype, v) << ";  // reused below\n";
    }
  };

  if (!node.is_reduction()) {
    if (nd == 0 && k.local_buffers.count(node.out_buffer)) {
      // One value per outer iteration that later nests read (layer_norm's rstd):
      // a local, declared before the block like a reduction's result.
      std::string v = w.emit(nest.body, false, -1, os, indent);
      os << indent << acc << " = " << v << ";\n";
      if (nest.store_to_memory) os << indent << out.name << "[" << store_idx << "] = " << stored(out.dtype, acc) << ";\n";
      locals[node.out_buffer] = acc;
    } else if (nd == 0) {
      std::string v = w.emit(nest.body, false, -1, os, indent);
      os << indent << out.name << "[" << store_idx << "] = " << stored(out.dtype, v) << ";\n";
    } else {
      open_outer_inner();
      os << indent << ix << " " << jb << " = " << lo << ";\n";
      if (nest.vectorize) {
        os << indent << "for (; " << jb << " + " << lanes << " <= " << hi << "; " << jb << " += " << lanes << ") {\n";
        os << indent << "  const " << ix << " " << j << " = " << jb << ";\n";
        std::string v = w.emit(nest.body, true, jv, os, indent + "  ");
        side_stores(true, indent + "  ");
        os << indent << "  " << vstore(out.dtype, out.name + " + (" + store_idx + ")", v) << ";\n";
        os << indent << "}\n";
        w.reset_names();
      }
      if (masked) {
        os << indent << "if (" << jb << " < " << hi << ") {  // masked tail\n";
        os << indent << "  const unsigned tp_m = (1u << (unsigned)(" << hi << " - " << jb << ")) - 1u;\n";
        os << indent << "  const " << ix << " " << j << " = " << jb << ";\n";
        w.set_mask("tp_m");
        std::string v = w.emit(nest.body, true, jv, os, indent + "  ");
        side_stores(true, indent + "  ", "tp_m");
        os << indent << "  tp_store_m(" << out.name << " + (" << store_idx << "), " << v << ", tp_m);\n";
        os << indent << "}\n";
        w.set_mask("");
        w.reset_names();
      } else {
        os << indent << "for (; " << jb << " < " << hi << "; ++" << jb << ") {\n";
        os << indent << "  const " << ix << " " << j << " = " << jb << ";\n";
        os << tail_barrier(nest, indent + "  ");
        std::string v = w.emit(nest.body, false, jv, os, indent + "  ");
        side_stores(false, indent + "  ");
        os << indent << "  " << out.name << "[" << store_idx << "] = " << stored(out.dtype, v) << ";\n";
        os << indent << "}\n";
      }
      close_outer_inner();
    }
    os << in << "}\n";
    return "";
  }

  std::string init = reduce_init(node.reduce, dt);
  const int levels = nest.cascade_levels;
  if (cascade && !serial_total) {
    os << indent << "double " << acc << "_stk[" << levels << "];\n";
    os << indent << "i64 " << acc << "_n = 0;\n";
  }
  if (nest.vectorize) {
    for (int a = 0; a < kAcc; ++a)
      os << indent << vtype(dt) << " " << acc << "_v" << a << " = " << splat(dt) << "(" << init << ");\n";
  }
  const bool wide_scalar = nest.wide_scalar_acc;
  os << indent << (wide_scalar ? "double" : ctype(dt)) << " " << acc << "_s = " << init << ";\n";
  open_outer_inner();
  std::string loop_lo = lo, loop_hi = hi;
  if (cascade && !flush_in_loop) {
    os << indent << "for (" << ix << " " << jb << "b = " << lo << "; " << jb << "b < " << hi << "; " << jb << "b += " << block
       << ") {\n";
    indent += "  ";
    os << indent << "const " << ix << " " << jb << "e = " << jb << "b + " << block << " < " << hi << " ? " << jb << "b + "
       << block << " : " << hi << ";\n";
    if (nest.vectorize)
      for (int a = 0; a < kAcc; ++a) os << indent << acc << "_v" << a << " = " << splat(dt) << "(" << init << ");\n";
    os << indent << acc << "_s = " << init << ";\n";
    loop_lo = jb + "b";
    loop_hi = jb + "e";
  }
  std::string vec_total;
  if (nest.vectorize) {
    // Pairwise over the accumulators: ((v0 + v1) + (v2 + v3)) for four.
    std::function<std::string(int, int)> tree = [&](int from, int to) {
      if (to - from == 1) return acc + "_v" + std::to_string(from);
      int mid = from + (to - from + 1) / 2;
      return c_combine(node.reduce, tree(from, mid), tree(mid, to));
    };
    vec_total = c_combine(node.reduce, std::string(horizontal(node.reduce)) + "(" + tree(0, kAcc) + ")", acc + "_s");
  }
  os << indent << ix << " " << jb << " = " << loop_lo << ";\n";
  if (nest.vectorize) {
    os << indent << "for (; " << jb << " + " << kAcc * lanes << " <= " << loop_hi << "; " << jb << " += "
       << kAcc * lanes << ") {\n";
    for (int a = 0; a < kAcc; ++a) {
      os << indent << "  {\n" << indent << "    const " << ix << " " << j << " = " << jb << " + " << a * lanes << ";\n";
      std::string v = w.emit(nest.body, true, jv, os, indent + "    ");
      side_stores(true, indent + "    ");
      std::string av = acc + "_v" + std::to_string(a);
      os << indent << "    " << av << " = " << c_combine(node.reduce, av, v) << ";\n" << indent << "  }\n";
      w.reset_names();
    }
    if (flush_in_loop) {
      const bool pow2 = (block & (block - 1)) == 0;
      os << indent << "  if (((" << jb << " + " << step << (loop_lo == "0" ? std::string() : " - " + loop_lo) << ") "
         << (pow2 ? "& " + std::to_string(block - 1) : "% " + std::to_string(block)) << ") == 0) {  // a block ends\n";
      os << indent << "    " << acc << "_tot += (double)(" << vec_total << ");\n";
      for (int a = 0; a < kAcc; ++a) os << indent << "    " << acc << "_v" << a << " = " << splat(dt) << "(" << init << ");\n";
      os << indent << "  }\n";
    }
    os << indent << "}\n";
    if (!masked_loop) {
      os << indent << "for (; " << jb << " + " << lanes << " <= " << loop_hi << "; " << jb << " += " << lanes << ") {\n";
      os << indent << "  const " << ix << " " << j << " = " << jb << ";\n";
      std::string v = w.emit(nest.body, true, jv, os, indent + "  ");
      side_stores(true, indent + "  ");
      os << indent << "  " << acc << "_v0 = " << c_combine(node.reduce, acc + "_v0", v) << ";\n" << indent << "}\n";
      w.reset_names();
    }
  }
  if (nd == 0) {
    std::string v = w.emit(nest.body, false, -1, os, indent);
    os << indent << acc << "_s = " << c_combine(node.reduce, acc + "_s", v) << ";\n";
  } else if (masked_loop) {
    // The mask comes from one vector compare (tp_mask_below) and the identity
    // from a mask blend: a shift-built mask or a branch on the count here made
    // g++ split or version the loop (more compile time than the two loops).
    os << indent << "for (; " << jb << " < " << loop_hi << "; " << jb << " += " << lanes
       << ") {  // the rest: vectors, the last one masked\n";
    os << indent << "  const unsigned tp_m = tp_mask_below(" << vtype(dt) << "{}, " << loop_hi << " - " << jb << ");\n";
    os << indent << "  const " << ix << " " << j << " = " << jb << ";\n";
    w.set_mask("tp_m");
    std::string v = w.emit(nest.body, true, jv, os, indent + "  ");
    side_stores(true, indent + "  ", "tp_m");
    os << indent << "  " << acc << "_v0 = "
       << c_combine(node.reduce, acc + "_v0", "tp_sel_m(" + v + ", " + splat(dt) + "(" + init + "), tp_m)") << ";\n";
    os << indent << "}\n";
    w.set_mask("");
    w.reset_names();
  } else if (masked) {
    os << indent << "if (" << jb << " < " << loop_hi << ") {  // masked tail: the identity in the dead lanes\n";
    os << indent << "  const unsigned tp_m = (1u << (unsigned)(" << loop_hi << " - " << jb << ")) - 1u;\n";
    os << indent << "  const " << ix << " " << j << " = " << jb << ";\n";
    w.set_mask("tp_m");
    std::string v = w.emit(nest.body, true, jv, os, indent + "  ");
    side_stores(true, indent + "  ", "tp_m");
    os << indent << "  " << acc << "_v0 = "
       << c_combine(node.reduce, acc + "_v0",
                  "tp_where(tp_lanes_below(" + std::string(vtype(dt)) + "{}, " + loop_hi + " - " + jb + "), " + v + ", " +
                      splat(dt) + "(" + init + "))")
       << ";\n";
    os << indent << "}\n";
    w.set_mask("");
    w.reset_names();
  } else {
    os << indent << "for (; " << jb << " < " << loop_hi << "; ++" << jb << ") {\n";
    os << indent << "  const " << ix << " " << j << " = " << jb << ";\n";
    os << tail_barrier(nest, indent + "  ");
    std::string v = w.emit(nest.body, false, jv, os, indent + "  ");
    side_stores(false, indent + "  ");
    os << indent << "  " << acc << "_s = " << c_combine(node.reduce, acc + "_s", v) << ";\n" << indent << "}\n";
  }
  if (flush_in_loop) {
    // The last block; with more inner dims the next row starts from zero.
    os << indent << acc << "_tot += (double)(" << vec_total << ");\n";
    if (nd > 1) {
      for (int a = 0; a < kAcc; ++a) os << indent << acc << "_v" << a << " = " << splat(dt) << "(" << init << ");\n";
      os << indent << acc << "_s = " << init << ";\n";
    }
  } else if (cascade) {
    const std::string block_sum = nest.vectorize ? vec_total : acc + "_s";
    if (serial_total) {
      os << indent << acc << "_tot += (double)(" << block_sum << ");\n";
    } else {
      // Push the block's sum: merge with equal-sized partial sums first (pairwise).
      os << indent << "{\n";
      os << indent << "  double tp_b = (double)(" << block_sum << ");\n";
      os << indent << "  i64 tp_c = " << acc << "_n++;\n" << indent << "  int tp_lv = 0;\n";
      os << indent << "  for (; tp_c & 1; tp_c >>= 1, ++tp_lv) tp_b = " << acc << "_stk[tp_lv] + tp_b;\n";
      os << indent << "  " << acc << "_stk[tp_lv] = tp_b;\n" << indent << "}\n";
    }
    indent.resize(indent.size() - 2);
    os << indent << "}\n";
  }
  close_outer_inner();
  if (serial_total) {
    os << in << "  " << acc << " = (" << ctype(dt) << ")" << acc << "_tot;\n";
  } else if (cascade) {
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
    os << in << out.name << "[" << sidx << "] = " << stored(out.dtype, acc) << ";\n";
  }
  return precise;
}

// A reduction vectorized across the outer loop: `unroll` vectors hold
// unroll*lanes neighbouring outputs (o .. o+unroll*lanes-1), so every row
// the inner loop visits is read as one contiguous run; the inner loops take
// scalar steps.
void emit_outer_vector_reduction(std::ostringstream& os, const LoopProgram& p, const KernelPlan& k,
                                 const LoopNest& nest) {
  const OuterVectorPlan& plan = k.outer_vector;
  const char* ix = index_type(k);
  const int lanes = plan.lanes, unroll = plan.unroll;
  const ComputeNode& node = p.nodes[nest.node];
  const Buffer& out = p.buffers[node.out_buffer];
  RangeMap ranges = nest_ranges(k, nest);
  std::unordered_map<int, std::string> no_locals;
  Writer w(p, no_locals, ranges, node.body->dtype);
  if (node.reduce == ReduceOp::Sum) w.set_sum_root(nest.body.get());
  DType dt = node.body->dtype;
  std::string o = k.outer_var.var_name();
  std::string acc = "red" + std::to_string(nest.node) + "_v";
  std::string indent = "    ";
  os << indent << "{  // node " << nest.node << ": " << node.origin << " -> " << out.name << " ("
     << reduce_op_name(node.reduce) << " over " << extents_str(nest.inner_ranges, nest.inner_extents)
     << "), vectorized across " << o
     << "\n";
  indent += "  ";
  const std::string init = reduce_init(node.reduce, dt);
  auto reset = [&]() {
    for (int u = 0; u < unroll; ++u) os << indent << acc << u << " = " << splat(dt) << "(" << init << ");\n";
  };
  for (int u = 0; u < unroll; ++u) os << indent << vtype(dt) << " " << acc << u << " = " << splat(dt) << "(" << init << ");\n";
  // A long float sum runs in blocks of plan.block_rows rows whose sums are
  // converted to double vectors and added pairwise (cascaded), as in
  // emit_nest: the error grows with the block, not with the number of rows.
  const size_t nd = nest.inner_vars.size();
  const int64_t kRows = plan.block_rows;
  const bool f32 = dt == DType::Float32;
  const int nb = f32 ? 2 * unroll : unroll;  // double vectors per block
  const int half = lanes / 2;
  auto indices = [](int from, int count) {
    std::string s;
    for (int i = 0; i < count; ++i) s += (i ? ", " : "") + std::to_string(from + i);
    return s;
  };
  const bool cascade = kRows > 0;
  const int levels = plan.cascade_levels;
  const std::string stk = acc + "stk", cnt = acc + "n";
  if (cascade) {
    os << indent << "vd " << stk << "[" << levels << "][" << nb << "];\n";
    os << indent << "i64 " << cnt << " = 0;\n";
  }
  for (size_t d = 0; d < nd; ++d) {
    std::string v = var_name(nest.inner_vars[d]);
    if (cascade && d + 1 == nd) {
      const std::string r = ext(nest.inner_extents[d]);
      os << indent << "for (" << ix << " " << v << "_b = 0; " << v << "_b < " << r << "; " << v << "_b += " << kRows << ") {\n";
      indent += "  ";
      reset();
      os << indent << "const " << ix << " " << v << "_e = " << v << "_b + " << kRows << " < " << r << " ? " << v << "_b + " << kRows
         << " : " << r << ";\n";
      os << indent << "for (" << ix << " " << v << " = " << v << "_b; " << v << " < " << v << "_e; ++" << v << ") {\n";
    } else {
      os << indent << "for (" << ix << " " << v << " = 0; " << v << " < " << ext(nest.inner_extents[d]) << "; ++" << v
         << ") {\n";
    }
    indent += "  ";
  }
  for (int u = 0; u < unroll; ++u) {
    os << indent << "{\n" << indent << "  const " << ix << " " << o << " = " << o << "_b + " << u * lanes << ";\n";
    std::string val = w.emit(nest.body, true, k.outer_var.var_id(), os, indent + "  ");
    os << indent << "  " << acc << u << " = " << c_combine(node.reduce, acc + std::to_string(u), val) << ";\n";
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
    bool symbolic = false;  // as in emit_nest: stop at the count's highest bit
    for (const IndexExpr& e : nest.inner_extents) symbolic = symbolic || !e.is_const();
    if (symbolic)
      os << indent << "  for (int tp_lv = 0; (" << cnt << " >> tp_lv) != 0; ++tp_lv)\n";
    else
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
    os << indent << "{\n" << indent << "  const " << ix << " " << o << " = " << o << "_b + " << u * lanes << ";\n";
    os << indent << "  tp_store(" << out.name << " + (" << to_c(nest.store_index, ranges) << "), " << acc << u
       << ");\n" << indent << "}\n";
  }
  os << "    }\n";
}

// Prints one nest whose one inner loop is split into chunks across threads
// (KernelPlan::chunk, or LoopNest::chunk in a phased kernel). A reduction
// keeps one partial result per chunk and combines them in a fixed pairwise
// tree in chunk order (not in thread order): deterministic, the chunks a
// function of the extent alone (so the result does not depend on the thread
// count), and a sum's error grows with log2(chunks). Returns the combined
// result's name (a local declared here), "" for a pointwise nest. `tag`
// prefixes the names (several split nests in one kernel); `declare_o`: the
// chunk loop defines the (single) outer iteration itself; `with`: pointwise
// nests run after `nest` in each chunk (joins_chunk_loop).
std::string emit_chunked(std::ostringstream& os, const LoopProgram& p, const KernelPlan& k, const LoopNest& nest,
                         int64_t chunk_n, int64_t chunks_n, bool in_double, bool symbolic,
                         std::unordered_map<int, std::string>& locals, const std::string& tag, bool declare_o,
                         const std::vector<const LoopNest*>& with = {}) {
  const ComputeNode& node = p.nodes[nest.node];
  const std::string o = k.outer_var.var_name();
  const char* ix = index_type(k);
  const std::string partial = tag.empty() ? "partial" : tag + "part", total = tag.empty() ? "total" : tag + "all";
  const std::string tchunk = "tp_chunk" + tag, tchunks = "tp_chunks" + tag;
  std::string extent = std::to_string(nest.inner_ranges[0]), chunks = std::to_string(chunks_n),
              chunk = std::to_string(chunk_n);
  if (symbolic) extent = ext(nest.inner_extents[0]);
  const bool reduction = node.is_reduction();
  DType dt = node.body->dtype;
  if (reduction) {
    os << "  " << (in_double ? "double" : ctype(dt)) << " " << partial << "[" << chunks_n << "];\n";
    if (symbolic) {
      // At most chunks_n chunks of whole vectors, none shorter than chunk_n:
      // a function of the size alone (not of the thread count).
      os << "  " << ix << " " << tchunk << " = (" << extent << " + " << chunks_n - 1 << ") / " << chunks_n << ";\n";
      os << "  " << tchunk << " = " << tchunk << " < " << chunk_n << " ? " << chunk_n << " : (" << tchunk
         << " + 63) / 64 * 64;\n";
      // One chunk at least (an empty one gives the identity to partial[0]).
      os << "  const " << ix << " " << tchunks << " = " << extent << " > 0 ? (" << extent << " + " << tchunk
         << " - 1) / " << tchunk << " : 1;\n";
      chunks = tchunks;
      chunk = tchunk;
    }
  } else if (symbolic) {  // the chunk count from the size at run time
    chunks = "(" + extent + " + " + std::to_string(chunk_n - 1) + ") / " + std::to_string(chunk_n);
  }
  // A symbolic extent may be short at run time: one chunk then runs here,
  // without starting the thread team.
  os << "  #pragma omp parallel for schedule(dynamic, 1)" << (symbolic ? " if (" + chunks + " > 1)" : std::string()) << "\n";
  os << "  for (" << ix << " " << o << "_c = 0; " << o << "_c < " << chunks << "; ++" << o << "_c) {\n";
  if (declare_o) os << "    const " << ix << " " << o << " = 0;\n    (void)" << o << ";\n";
  os << "    const " << ix << " lo = " << o << "_c * " << chunk << ";\n";
  os << "    const " << ix << " hi = lo + " << chunk << " < " << extent << " ? lo + " << chunk << " : " << extent << ";\n";
  if (!reduction) {
    emit_nest(os, p, k, nest, locals, "lo", "hi");
    for (const LoopNest* w : with) emit_nest(os, p, k, *w, locals, "lo", "hi");  // same chunk (joins_chunk_loop)
    os << "  }\n";
    return "";
  }
  LoopNest part = nest;
  part.store_to_memory = false;
  std::string precise = emit_nest(os, p, k, part, locals, "lo", "hi");
  os << "    " << partial << "[" << o << "_c] = " << precise << ";\n  }\n";
  os << "  for (i64 w = 1; w < " << chunks << "; w *= 2)\n";
  os << "    for (i64 c = 0; c + w < " << chunks << "; c += 2 * w) " << partial << "[c] = "
     << c_combine(node.reduce, partial + "[c]", partial + "[c + w]") << ";\n";
  os << "  " << ctype(dt) << " " << total << " = (" << ctype(dt) << ")" << partial << "[0];\n";
  return total;
}

// Can `nest` share the chunk loop of the phased kernel's nests `run` (which
// can)? Pointwise, split into the same chunks of the same static extent, and
// reading what one of them writes only at the element that one writes there
// (the scheduler's stored hand-over): then a chunk of all of them reads and
// writes its own elements only. Adam's step over a flat parameter ran its
// moments and the parameter as three passes over memory (a 0-d step count
// made the kernel one outer iteration, so phased); now one.
bool joins_chunk_loop(const LoopProgram& p, const KernelPlan& k, const std::vector<const LoopNest*>& run,
                      const LoopNest& nest) {
  auto chunked = [&](const LoopNest& n) {
    return n.chunk > 0 && !p.nodes[n.node].is_reduction() && n.inner_vars.size() == 1 && n.inner_extents[0].is_const();
  };
  if (!chunked(nest)) return false;
  if (run.empty()) return true;
  const LoopNest& first = *run.front();
  if (nest.chunk != first.chunk || nest.inner_ranges != first.inner_ranges) return false;
  const int j = nest.inner_vars[0].var_id();
  for (const ExprNode* l : loads_of(nest.body)) {
    for (const LoopNest* w : run) {
      const ComputeNode& wn = p.nodes[w->node];
      const std::unordered_map<int, IndexExpr> to_w{{j, w->inner_vars[0]}};
      IndexExpr read = simplify(substitute(l->index, to_w), nest_ranges(k, *w));
      if (wn.aux_buffer == l->buffer) return false;
      if (wn.out_buffer == l->buffer && (!w->store_to_memory || !(read == w->store_index))) return false;
      for (const SideStore& ss : w->side_stores)
        if (ss.buffer == l->buffer && !(read == ss.index)) return false;
    }
  }
  return true;
}

// A phased kernel over a few outer iterations (rows): the first nest, a
// reduction, split into `nest.chunks` chunks per row, all rows' chunks in one
// parallel loop; then, on this thread, per row: the partials combined in the
// same fixed tree as a one-row split, and the other nests (no inner loop:
// mean's division) reading the row's result.
void emit_split_rows(std::ostringstream& os, const LoopProgram& p, const KernelPlan& k,
                     std::unordered_map<int, std::string>& locals) {
  const LoopNest& nest = k.nests[0];
  const ComputeNode& node = p.nodes[nest.node];
  const std::string o = k.outer_var.var_name();
  const char* ix = index_type(k);
  const std::string tag = "red" + std::to_string(nest.node) + "_";
  const std::string partial = tag + "part", total = tag + "all";
  const int64_t rows = k.outer_extent, chunks = nest.chunks;
  const std::string extent = std::to_string(nest.inner_ranges[0]), chunk = std::to_string(nest.chunk);
  DType dt = node.body->dtype;
  os << "  " << (nest.partials_in_double ? "double" : ctype(dt)) << " " << partial << "[" << rows * chunks << "];\n";
  os << "  #pragma omp parallel for schedule(dynamic, 1)\n";
  os << "  for (" << ix << " " << o << "_t = 0; " << o << "_t < " << rows * chunks << "; ++" << o << "_t) {\n";
  os << "    const " << ix << " " << o << " = " << o << "_t / " << chunks << ";\n";
  os << "    const " << ix << " lo = (" << o << "_t % " << chunks << ") * " << chunk << ";\n";
  os << "    const " << ix << " hi = lo + " << chunk << " < " << extent << " ? lo + " << chunk << " : " << extent << ";\n";
  LoopNest part = nest;
  part.store_to_memory = false;
  std::string precise = emit_nest(os, p, k, part, locals, "lo", "hi");
  os << "    " << partial << "[" << o << "_t] = " << precise << ";\n  }\n";
  os << "  for (" << ix << " " << o << " = 0; " << o << " < " << rows << "; ++" << o << ") {\n";
  os << "    " << (nest.partials_in_double ? "double" : ctype(dt)) << "* tp_p = " << partial << " + " << o << " * "
     << chunks << ";\n";
  os << "    for (i64 w = 1; w < " << chunks << "; w *= 2)\n";
  os << "      for (i64 c = 0; c + w < " << chunks << "; c += 2 * w) tp_p[c] = "
     << c_combine(node.reduce, "tp_p[c]", "tp_p[c + w]") << ";\n";
  os << "    const " << ctype(dt) << " " << total << " = (" << ctype(dt) << ")tp_p[0];\n";
  locals[node.out_buffer] = total;
  if (nest.store_to_memory) {
    RangeMap r = nest_ranges(k, nest);
    os << "    " << p.buffers[node.out_buffer].name << "[" << to_c(nest.store_index, r) << "] = "
       << stored(p.buffers[node.out_buffer].dtype, total) << ";\n";
  }
  for (size_t i = 1; i < k.nests.size(); ++i) emit_nest(os, p, k, k.nests[i], locals, "", "");
  os << "  }\n";
}

}  // namespace

GeneratedSource generate_cpp(const LoopProgram& program, const Schedule& schedule, int vector_bytes) {
  TP_CHECK(vector_bytes == schedule.vector_bytes, ValueError, "generate_cpp: vector_bytes ", vector_bytes,
           " differs from the schedule's ", schedule.vector_bytes);
  return CppPrinter().print(program, schedule);
}

PrintedUnit CppPrinter::print(const LoopProgram& p, const Schedule& s) const {
  PrintedUnit g;
  g.language = language();
  // Buffer slots: every buffer that lives in memory.
  std::unordered_map<int, int> slot_of;
  std::set<int> memory_temps;
  for (auto& k : s.kernels)
    for (auto& n : k.nests) {
      if (n.store_to_memory) memory_temps.insert(p.nodes[n.node].out_buffer);
      if (n.store_aux_to_memory) memory_temps.insert(p.nodes[n.node].aux_buffer);
    }
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
  req.vector_bytes = s.vector_bytes;
  req.need_floordiv = true;
  struct Needs : ExprVisitor {
    PreludeRequest& req;
    explicit Needs(PreludeRequest& r) : req(r) {}
    void visit_call(const ExprNode& e) override {
      req.need_exp |= e.fn == CallOp::Exp;
      req.need_log |= e.fn == CallOp::Log;
      req.need_tanh |= e.fn == CallOp::Tanh;
      req.need_sigmoid |= e.fn == CallOp::Sigmoid;
      req.need_gelu_grad |= e.fn == CallOp::GeluGrad;
      if (is_libm(e.fn)) req.libm.insert(name(e.fn));
      req.need_philox |= is_random(e.fn);
    }
  } needs(req);  // one visitor for all bodies: a node shared between nodes is visited once
  for (auto& n : p.nodes) {
    needs.visit(n.body);
    req.need_welford |= n.reduce == ReduceOp::Welford;
  }
  for (auto& k : s.kernels)
    for (auto& n : k.nests) req.need_masked |= n.tail != TailMode::Scalar && n.vectorize;
  for (auto& fn : req.libm) {
    std::string sym = libmvec_symbol(fn, s.vector_bytes);
    if (!sym.empty() && runtime::libmvec_has(sym)) req.libmvec[fn] = sym;
  }

  std::ostringstream os;
  os << "// Generated by Stax (TensorPlay). One translation unit per region: kernels + entry.\n";
  // No per-unit `#pragma GCC optimize` here: turning off loop header copying
  // (no-tree-ch) for symbolic units saved ~3 ms of g++, but with GCC 13 (the
  // H200 machine) a symbolic group_norm computed wrong statistics under it
  // (test_dynamic_stax.py::test_group_norm_with_symbolic_batch_and_spatial_dims)
  // while GCC 12 was right; GCC documents the optimize pragma as unfit for
  // production code, so every unit is compiled with the command line's options.
  os << cpp_prelude(req) << "\n";
  for (auto& k : s.kernels) {
    os << "// " << k.name << ": " << k.origin << "\n";
    os << "// outer space " << extents_str(k.outer_ranges, k.outer_extents) << (k.parallel ? ", parallel" : "")
       << "\n";
    // A kernel with symbolic extents also takes the sizes, read once into locals.
    const std::vector<int> sizes = sizes_used(k);
    os << "static void " << k.name << "(void* const* bufs" << (sizes.empty() ? "" : ", const long long* sizes")
       << ") {\n";
    for (int z : sizes) os << "  const i64 tp_size" << z << " = sizes[" << z << "];\n";
    std::set<int> used;
    for (auto& n : k.nests) {
      used.insert(p.nodes[n.node].out_buffer);
      if (p.nodes[n.node].aux_buffer >= 0) used.insert(p.nodes[n.node].aux_buffer);
      for (const ExprNode* l : loads_of(n.body)) used.insert(l->buffer);
    }
    for (int b : used) {
      if (!slot_of.count(b)) continue;
      const Buffer& buf = p.buffers[b];
      bool writes = buf.kind == BufferKind::Output || buf.kind == BufferKind::Temp;
      os << "  " << (writes ? "" : "const ") << mtype(buf.dtype) << "* __restrict__ " << buf.name << " = ("
         << (writes ? "" : "const ") << mtype(buf.dtype) << "*)bufs[" << slot_of[b] << "];\n";
    }
    if (p.status_buffer >= 0)
      os << "  i64* tp_status = (i64*)bufs[" << slot_of[p.status_buffer] << "];\n  (void)tp_status;\n";
    std::string o = k.outer_var.var_name();
    const char* ix = index_type(k);
    std::unordered_map<int, std::string> locals;
    // A one-element input or earlier result (a learning rate, an optimizer's
    // step count) is read once, here: inside an OpenMP region GCC no longer knows that the loops'
    // stores cannot alias it (the pointers' __restrict__ stays outside the
    // outlined function), so a value computed from it (Adam's pow(beta, step))
    // was computed again at every vector step.
    std::set<int> written;  // by this kernel (an earlier kernel's result is final here)
    for (auto& n : k.nests) {
      written.insert(p.nodes[n.node].out_buffer);
      written.insert(p.nodes[n.node].aux_buffer);
      for (const SideStore& ss : n.side_stores) written.insert(ss.buffer);
    }
    for (int b : used) {
      const Buffer& buf = p.buffers[b];
      if (!slot_of.count(b) || written.count(b) || !buf.size_exprs.empty() || numel(buf.sizes) != 1) continue;
      locals[b] = buf.name + "_v";
      os << "  const " << ctype(buf.dtype) << " " << locals[b] << " = " << widened(buf.dtype, buf.name + "[0]") << ";\n";
    }
    if (k.chunk > 0) {
      const LoopNest& nest = k.nests[0];
      std::string total = emit_chunked(os, p, k, nest, k.chunk, k.chunks, k.partials_in_double, k.symbolic, locals, "",
                                       /*declare_o=*/true);
      if (!total.empty()) {
        RangeMap r;
        r[k.outer_var.var_id()] = {0, 0};
        const Buffer& ob = p.buffers[p.nodes[nest.node].out_buffer];
        os << "  " << ob.name << "[" << to_c(simplify(nest.store_index, r), r) << "] = " << stored(ob.dtype, "total")
           << ";\n";
      }
    } else if (k.phased && k.outer_extent > 1) {
      emit_split_rows(os, p, k, locals);
    } else if (k.phased) {
      // One outer iteration, one phase per nest: the split ones across threads
      // (each with its own parallel loop: the next phase reads its result), the
      // others on this thread.
      os << "  {\n    const " << ix << " " << o << " = 0;\n    (void)" << o << ";\n";
      std::vector<bool> done(k.nests.size(), false);
      for (size_t i = 0; i < k.nests.size(); ++i) {
        if (done[i]) continue;
        const LoopNest& nest = k.nests[i];
        // The nests that share nest i's chunk loop, moved ahead of the nests
        // between that they do not read (those read none of them: node order).
        std::vector<const LoopNest*> run;
        std::vector<size_t> members;
        std::set<int> skipped_writes;
        const bool chunked = joins_chunk_loop(p, k, run, nest);
        for (size_t j = i; chunked && j < k.nests.size(); ++j) {
          if (done[j]) continue;
          const LoopNest& n = k.nests[j];
          bool reads_skipped = false;
          for (const ExprNode* l : loads_of(n.body)) reads_skipped = reads_skipped || skipped_writes.count(l->buffer);
          if (!reads_skipped && joins_chunk_loop(p, k, run, n)) {
            run.push_back(&n);
            members.push_back(j);
            continue;
          }
          const ComputeNode& sn = p.nodes[n.node];
          skipped_writes.insert(sn.out_buffer);
          if (sn.aux_buffer >= 0) skipped_writes.insert(sn.aux_buffer);
          for (const SideStore& ss : n.side_stores) skipped_writes.insert(ss.buffer);
        }
        if (run.size() >= 2) {  // one chunk loop, the nests one after the other in each chunk
          for (size_t m : members) done[m] = true;
          emit_chunked(os, p, k, nest, nest.chunk, nest.chunks, false, false, locals, "", /*declare_o=*/false,
                       std::vector<const LoopNest*>(run.begin() + 1, run.end()));
          continue;
        }
        if (nest.chunk == 0) {
          emit_nest(os, p, k, nest, locals, "", "");
          continue;
        }
        const ComputeNode& node = p.nodes[nest.node];
        const std::string tag = "red" + std::to_string(nest.node) + "_";
        std::string total = emit_chunked(os, p, k, nest, nest.chunk, nest.chunks, nest.partials_in_double,
                                         !nest.inner_extents[0].is_const(), locals, tag, /*declare_o=*/false);
        if (total.empty()) continue;
        locals[node.out_buffer] = total;  // later phases read the combined result
        if (nest.store_to_memory) {
          RangeMap r = nest_ranges(k, nest);
          os << "    " << p.buffers[node.out_buffer].name << "[" << to_c(nest.store_index, r) << "] = "
             << stored(p.buffers[node.out_buffer].dtype, total) << ";\n";
        }
      }
      os << "  }\n";
    } else if (k.vectorize_outer) {
      const OuterVectorPlan& v = k.outer_vector;
      int64_t width = static_cast<int64_t>(v.unroll) * v.lanes;
      // A symbolic outer extent: the number of whole groups is computed at run time.
      std::string groups = std::to_string(v.groups), first_tail = std::to_string(v.groups * width),
                  end = std::to_string(k.outer_extent);
      if (k.symbolic) {
        end = ext(k.outer_count);
        os << "  const " << ix << " " << o << "_n = (" << end << ") / " << width << ";\n";
        groups = o + "_n";
        first_tail = o + "_n * " + std::to_string(width);
      }
      if (k.parallel) os << "  #pragma omp parallel for schedule(static)\n";
      os << "  for (" << ix << " " << o << "_g = 0; " << o << "_g < " << groups << "; ++" << o << "_g) {\n";
      os << "    const " << ix << " " << o << "_b = " << o << "_g * " << width << ";\n";
      emit_outer_vector_reduction(os, p, k, k.nests[0]);
      os << "  }\n";
      // The remaining outputs, one at a time.
      os << "  for (" << ix << " " << o << " = " << first_tail << "; " << o << " < " << end << "; ++" << o
         << ") {\n";
      emit_nest(os, p, k, v.tail, locals, "", "");
      os << "  }\n";
    } else {
      if (k.parallel) os << "  #pragma omp parallel for schedule(static)\n";
      os << "  for (" << ix << " " << o << " = 0; " << o << " < " << ext(k.outer_count) << "; ++" << o
         << ") {\n";
      for (auto& n : k.nests) emit_nest(os, p, k, n, locals, "", "");
      os << "  }\n";
    }
    os << "}\n\n";
  }
  // Extern calls run in the backend: ext(ctx, k) runs LoopProgram::externs[k]
  // and may replace its result's pointer in bufs (kernels read bufs on entry);
  // nonzero means it failed, and the backend raises the error.
  // TP_LOGS=region_times: after kernel i, ext(ctx, -1 - i) marks its end
  // (runtime/region_times.h); a different source, so these never mix with the
  // entries of normal runs in the cache.
  const bool marks = region_times::enabled();
  os << "extern \"C\" void tp_entry(void* const* bufs, const long long* sizes, int (*ext)(void*, int), void* ctx) {\n"
     << "  (void)sizes; (void)ext; (void)ctx;\n";
  for (auto& step : s.steps) {
    if (!step.is_extern) {
      const KernelPlan& k = s.kernels[step.index];
      os << "  " << k.name << (sizes_used(k).empty() ? "(bufs);\n" : "(bufs, sizes);\n");
      if (marks) os << "  if (ext) ext(ctx, " << -1 - static_cast<int>(step.index) << ");\n";
      continue;
    }
    const ExternCall& e = p.externs[step.index];
    os << "  // extern " << e.id << ": " << e.op << " (" << extern_kind_name(e.kind) << "; " << e.origin << ")\n";
    os << "  if (ext(ctx, " << e.id << ")) return;\n";
  }
  os << "}\n";
  g.source = os.str();
  g.kernel_count = static_cast<int>(s.kernels.size());
  g.size_count = p.num_sizes;
  for (auto& k : s.kernels) g.kernel_names.push_back(k.name);
  return g;
}

}  // namespace tp::stax::codegen
