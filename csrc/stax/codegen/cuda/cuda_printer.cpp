// The CUDA printer (see cuda_printer.h). It prints each compute node as its
// own kernel: every node's result is stored to its buffer (temps included), so
// the kernels compose in node order without shared state.
#include "stax/codegen/cuda/cuda_printer.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "stax/codegen/c_syntax.h"
#include "stax/ir/call_op.h"

namespace tp::stax::codegen {

using namespace ir;

namespace {

const char* ctype(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::Int64: return "i64";
    case DType::Float32: return "float";
    case DType::Float64: return "double";
    default: break;
  }
  throw NotImplementedError(str("stax cuda printer: dtype ", dtype_name(t), " is not supported yet"));
}

std::string literal(const Scalar& v, DType t) {
  static const FloatSpellings kCuda{"__int_as_float(0x7fc00000)", "__longlong_as_double(0x7ff8000000000000LL)",
                                    "__int_as_float(0x7f800000)", "__longlong_as_double(0x7ff0000000000000LL)"};
  return c_literal(v, t, kCuda);
}

// Device helpers: the names the IR's Call nodes print as (tp_<name>).
const char* kPrelude = R"(typedef long long i64;
#define TP_D static __device__ __forceinline__
TP_D long long tp_floordiv(long long a, long long b) { long long q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }
TP_D long long tp_mod(long long a, long long b) { if (b == -1) return 0; long long r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
template <class T> TP_D T tp_add(T a, T b) { return a + b; }
template <class T> TP_D T tp_sub(T a, T b) { return a - b; }
// Products are rounded on their own (no contraction into an FMA), as eager rounds them.
TP_D float tp_mul(float a, float b) { return __fmul_rn(a, b); }
TP_D double tp_mul(double a, double b) { return __dmul_rn(a, b); }
TP_D i64 tp_mul(i64 a, i64 b) { return a * b; }
template <class T> TP_D T tp_div(T a, T b) { return a / b; }
template <class T> TP_D T tp_neg(T a) { return -a; }
// max/min propagate NaN, as eager does.
template <class T> TP_D T tp_max(T a, T b) { return (a != a || a > b) ? a : b; }
template <class T> TP_D T tp_min(T a, T b) { return (a != a || a < b) ? a : b; }
template <class T> TP_D T tp_relu(T a) { return a > T(0) ? a : (a != a ? a : T(0)); }
template <class T> TP_D T tp_abs(T a) { return a < T(0) ? -a : a; }
TP_D float tp_exp(float a) { return expf(a); }
TP_D double tp_exp(double a) { return exp(a); }
TP_D float tp_log(float a) { return logf(a); }
TP_D double tp_log(double a) { return log(a); }
TP_D float tp_sqrt(float a) { return sqrtf(a); }
TP_D double tp_sqrt(double a) { return sqrt(a); }
TP_D float tp_tanh(float a) { return tanhf(a); }
TP_D double tp_tanh(double a) { return tanh(a); }
TP_D float tp_sigmoid(float a) { return 1.0f / (1.0f + expf(-a)); }
TP_D double tp_sigmoid(double a) { return 1.0 / (1.0 + exp(-a)); }
template <class T> TP_D bool tp_eq(T a, T b) { return a == b; }
template <class T> TP_D bool tp_ne(T a, T b) { return a != b; }
template <class T> TP_D bool tp_lt(T a, T b) { return a < b; }
template <class T> TP_D bool tp_le(T a, T b) { return a <= b; }
template <class T> TP_D bool tp_gt(T a, T b) { return a > b; }
template <class T> TP_D bool tp_ge(T a, T b) { return a >= b; }
template <class T> TP_D T tp_where(bool c, T a, T b) { return c ? a : b; }
template <class T> TP_D T tp_shfl_down(T v, int o) { return __shfl_down_sync(0xffffffffu, v, o); }
)";

bool supported_call(CallOp op) {
  switch (op) {
    case CallOp::Add: case CallOp::Sub: case CallOp::Mul: case CallOp::Div: case CallOp::Neg:
    case CallOp::Max: case CallOp::Min: case CallOp::Relu: case CallOp::Abs:
    case CallOp::Exp: case CallOp::Log: case CallOp::Sqrt: case CallOp::Tanh: case CallOp::Sigmoid:
    case CallOp::Eq: case CallOp::Ne: case CallOp::Lt: case CallOp::Le: case CallOp::Gt: case CallOp::Ge:
    case CallOp::And: case CallOp::Or: case CallOp::Xor: case CallOp::Not:
      return true;
    default: return false;
  }
}

class Writer {
 public:
  Writer(const LoopProgram& p, RangeMap ranges) : p_(p), ranges_(std::move(ranges)) {}
  std::string emit(const Expr& e, std::ostringstream& os, const std::string& ind) {
    auto it = names_.find(e.get());
    if (it != names_.end()) return it->second;
    std::string rhs;
    switch (e->op) {
      case ExprOp::Const: rhs = literal(e->value, e->dtype); break;
      case ExprOp::Load:
        if (!e->args.empty()) throw NotImplementedError("stax cuda printer: indirect loads are not supported yet");
        rhs = p_.buffers[e->buffer].name + "[" + to_c(e->index, ranges_) + "]";
        break;
      case ExprOp::Call: {
        if (!supported_call(e->fn))
          throw NotImplementedError(str("stax cuda printer: operation '", name(e->fn), "' is not supported yet"));
        std::vector<std::string> a;
        for (auto& x : e->args) a.push_back(emit(x, os, ind));
        // A floating product goes through tp_mul (rounded alone, never fused
        // into an FMA with its consumer), except a sum's own body value.
        if (e->fn == CallOp::Mul && is_floating(e->dtype) && e.get() != sum_root_) rhs = "tp_mul(" + a[0] + ", " + a[1] + ")";
        else rhs = c_call(e->fn, a);
        break;
      }
      case ExprOp::Where: {
        std::string c = emit(e->args[0], os, ind), a = emit(e->args[1], os, ind), b = emit(e->args[2], os, ind);
        rhs = "tp_where(" + c + ", " + a + ", " + b + ")";
        break;
      }
      case ExprOp::Index: rhs = "(i64)(" + to_c(e->index, ranges_) + ")"; break;
      case ExprOp::Guard: throw NotImplementedError("stax cuda printer: checked indexing (Guard) is not supported yet");
      case ExprOp::Cast: {
        std::string a = emit(e->args[0], os, ind);
        rhs = e->dtype == DType::Bool ? "(" + a + " != 0)" : std::string("(") + ctype(e->dtype) + ")(" + a + ")";
        break;
      }
    }
    std::string nm = "t";  // appended, not operator+: GCC 12 warns falsely (-Wrestrict)
    nm += std::to_string(counter_++);
    os << ind << ctype(e->dtype) << " " << nm << " = " << rhs << ";\n";
    names_[e.get()] = nm;
    return nm;
  }

  void set_sum_root(const ExprNode* e) { sum_root_ = e; }

 private:
  const LoopProgram& p_;
  const ExprNode* sum_root_ = nullptr;
  RangeMap ranges_;
  std::unordered_map<const ExprNode*, std::string> names_;
  int counter_ = 0;
};

int64_t product(const Shape& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

// Splits the flat index `flat` into the variables `vars` over `ranges`
// (row-major, last variable fastest).
void unflatten(std::ostringstream& os, const std::string& ind, const std::string& flat,
               const std::vector<IndexExpr>& vars, const Shape& ranges) {
  os << ind << "i64 rem_" << flat << " = " << flat << ";\n";
  for (size_t d = ranges.size(); d-- > 0;) {
    os << ind << "const i64 " << vars[d].var_name() << " = rem_" << flat << " % " << ranges[d] << "LL; rem_" << flat
       << " /= " << ranges[d] << "LL;\n";
  }
  os << ind << "(void)rem_" << flat << ";\n";
}

std::string reduce_init(ReduceOp r, DType t) {
  switch (r) {
    case ReduceOp::Sum: return literal(Scalar(int64_t(0)), t);
    case ReduceOp::Prod: return literal(Scalar(int64_t(1)), t);
    case ReduceOp::Max: return literal(Scalar(-INFINITY), t);
    case ReduceOp::Min: return literal(Scalar(INFINITY), t);
    default: break;  // None; pair reductions are refused in print()
  }
  return "0";
}

std::string combine(ReduceOp r, const std::string& a, const std::string& b) {
  switch (r) {
    case ReduceOp::Sum: return a + " + " + b;
    case ReduceOp::Prod: return a + " * " + b;
    case ReduceOp::Max: return "tp_max(" + a + ", " + b + ")";
    case ReduceOp::Min: return "tp_min(" + a + ", " + b + ")";
    default: break;  // None; pair reductions are refused in print()
  }
  return a;
}

}  // namespace

PrintedUnit CudaPrinter::print(const LoopProgram& p, const Schedule& /*schedule*/) const {
  // The first step prints every node as its own kernel and does not read the
  // plans yet (vector loads and multi-node kernels come with them).
  if (!p.externs.empty()) throw NotImplementedError("stax cuda printer: extern calls are not supported yet");
  if (p.num_sizes > 0) throw NotImplementedError("stax cuda printer: symbolic sizes are not supported yet");
  PrintedUnit u;
  u.language = language();
  std::ostringstream os;
  os << "// Generated by Stax (CUDA printer): one kernel per compute node.\n" << kPrelude;
  std::string params;
  for (auto& b : p.buffers) {
    if (!params.empty()) params += ", ";
    params += std::string(ctype(b.dtype)) + "* __restrict__ " + b.name;
    u.slot_buffer.push_back(b.id);
  }
  for (const ComputeNode& n : p.nodes) {
    if (n.scan) throw NotImplementedError("stax cuda printer: scans are not supported yet");
    if (n.has_pair_result())
      throw NotImplementedError("stax cuda printer: Welford and arg reductions are not supported yet");
    if (!n.is_static()) throw NotImplementedError("stax cuda printer: symbolic sizes are not supported yet");
    const Buffer& out = p.buffers[n.out_buffer];
    std::string kname = "tp_k";
    kname += std::to_string(n.id);
    RangeMap ranges;
    for (size_t d = 0; d < n.vars.size(); ++d) ranges[n.vars[d].var_id()] = Interval{0, n.ranges[d] - 1};
    for (size_t d = 0; d < n.rvars.size(); ++d) ranges[n.rvars[d].var_id()] = Interval{0, n.reduce_ranges[d] - 1};
    Writer w(p, ranges);
    os << "\n// " << n.origin << "\nextern \"C\" __global__ void " << kname << "(" << params << ") {\n";
    int64_t numel = product(n.ranges);
    if (!n.is_reduction()) {
      os << "  for (i64 e = blockIdx.x * (i64)blockDim.x + threadIdx.x; e < " << numel
         << "LL; e += (i64)gridDim.x * blockDim.x) {\n";
      unflatten(os, "    ", "e", n.vars, n.ranges);
      std::string v = w.emit(n.body, os, "    ");
      os << "    " << out.name << "[" << to_c(n.store_index, ranges) << "] = " << v << ";\n  }\n}\n";
    } else {
      DType acc_t = n.body->dtype;
      const char* at = ctype(acc_t);
      int64_t rn = product(n.reduce_ranges);
      os << "  __shared__ " << at << " part[32];\n"
         << "  for (i64 e = blockIdx.x; e < " << numel << "LL; e += gridDim.x) {\n";
      unflatten(os, "    ", "e", n.vars, n.ranges);
      os << "    " << at << " acc = " << reduce_init(n.reduce, acc_t) << ";\n"
         << "    for (i64 r = threadIdx.x; r < " << rn << "LL; r += blockDim.x) {\n";
      unflatten(os, "      ", "r", n.rvars, n.reduce_ranges);
      if (n.reduce == ReduceOp::Sum) w.set_sum_root(n.body.get());
      std::string v = w.emit(n.body, os, "      ");
      os << "      acc = " << combine(n.reduce, "acc", v) << ";\n    }\n"
         << "    for (int o = 16; o > 0; o >>= 1) acc = " << combine(n.reduce, "acc", "tp_shfl_down(acc, o)") << ";\n"
         << "    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;\n"
         << "    __syncthreads();\n"
         << "    if (threadIdx.x < 32) {\n"
         << "      acc = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : " << reduce_init(n.reduce, acc_t) << ";\n"
         << "      for (int o = 16; o > 0; o >>= 1) acc = " << combine(n.reduce, "acc", "tp_shfl_down(acc, o)") << ";\n"
         << "      if (threadIdx.x == 0) " << out.name << "[" << to_c(n.store_index, ranges) << "] = ("
         << ctype(out.dtype) << ")acc;\n"
         << "    }\n    __syncthreads();\n  }\n}\n";
    }
    u.kernel_names.push_back(kname);
  }
  u.kernel_count = static_cast<int>(u.kernel_names.size());
  u.source = os.str();
  return u;
}

}  // namespace tp::stax::codegen
