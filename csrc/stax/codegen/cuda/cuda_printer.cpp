// The CUDA printer (see cuda_printer.h): each KernelPlan becomes one kernel in
// one of three thread mappings (Flat, Row, Column); the plan's nests, fusion,
// locals, side stores and vector lanes are printed as the scheduler decided.
#include "stax/codegen/cuda/cuda_printer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "stax/codegen/c_syntax.h"
#include "stax/codegen/cuda/split_reduction.h"
#include "stax/ir/call_op.h"
#include "stax/ir/expr_visitor.h"
#include "stax/scheduler/schedule.h"

namespace tp::stax::codegen {

using namespace ir;

namespace {

bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

// The 16-bit fast forms one at a time (measurement switches, default on):
// TP_CUDA_HALF_FAST_DIV=0 keeps IEEE division, TP_CUDA_HALF_CONTRACT=0 keeps
// products rounded alone. Read once per process.
bool half_switch(const char* name) {
  const char* v = std::getenv(name);
  return !(v && v[0] == '0');
}
bool half_fast_div() {
  static const bool on = half_switch("TP_CUDA_HALF_FAST_DIV");
  return on;
}
bool half_contract() {
  static const bool on = half_switch("TP_CUDA_HALF_CONTRACT");
  return on;
}

// The type a value has in registers: 16-bit floats compute in float; every
// integer has a register of its own width (the prelude's u8/i8/i16), so a
// narrow result wraps at its assignment as PyTorch's does.
const char* ctype(DType t) {
  if (is_half(t)) return "float";
  if (t == DType::Int32) return "int";
  if (t == DType::Int16) return "i16";
  if (t == DType::Int8) return "i8";
  if (t == DType::UInt8) return "u8";
  if (const char* c = c_type(t)) return c;
  throw NotImplementedError(str("stax cuda printer: dtype ", dtype_name(t), " is not supported yet"));
}

const FloatSpellings kCuda{"__int_as_float(0x7fc00000)", "__longlong_as_double(0x7ff8000000000000LL)",
                                    "__int_as_float(0x7f800000)", "__longlong_as_double(0x7ff0000000000000LL)"};

// The type of a buffer's elements in memory: 16-bit floats are the prelude's
// tp_bf16 / tp_half (a 16-bit pattern converting to and from float).
const char* mtype(DType t) {
  if (t == DType::BFloat16) return "tp_bf16";
  if (t == DType::Float16) return "tp_half";
  return ctype(t);
}

std::string literal(const Scalar& v, DType t) {
  return c_literal(v, is_half(t) ? DType::Float32 : t, kCuda);
}

// Device helpers: the names the IR's Call nodes print as (tp_<name>), the
// reduction functors and the block-wide combine.
const char* kPrelude = R"(typedef long long i64;
typedef short i16;
typedef signed char i8;
typedef unsigned char u8;
#define TP_D static __device__ __forceinline__
// 16-bit floats without cuda_bf16.h / cuda_fp16.h (NVRTC wheels may lack them):
// memory holds the bit pattern, registers hold float; a store rounds to
// nearest even. bfloat16 is the top half of a float32; float16 converts with PTX.
TP_D float tp_bf16_to_f(unsigned short h) { return __uint_as_float(((unsigned)h) << 16); }
TP_D unsigned short tp_f_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  // NaN stays NaN
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
}
TP_D float tp_half_to_f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
TP_D unsigned short tp_f_to_half(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
// Two floats rounded into one 32-bit word (lo in the low half): one instruction from sm_80.
TP_D unsigned tp_pack_bf16(float lo, float hi) {
#if __CUDA_ARCH__ >= 800
  unsigned r; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r;
#else
  return (unsigned)tp_f_to_bf16(lo) | ((unsigned)tp_f_to_bf16(hi) << 16);
#endif
}
TP_D unsigned tp_pack_half(float lo, float hi) {
#if __CUDA_ARCH__ >= 800
  unsigned r; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r;
#else
  return (unsigned)tp_f_to_half(lo) | ((unsigned)tp_f_to_half(hi) << 16);
#endif
}
struct tp_bf16 {
  unsigned short bits;
  tp_bf16() = default;
  __device__ __forceinline__ tp_bf16(float f) : bits(tp_f_to_bf16(f)) {}
  __device__ __forceinline__ operator float() const { return tp_bf16_to_f(bits); }
};
struct tp_half {
  unsigned short bits;
  tp_half() = default;
  __device__ __forceinline__ tp_half(float f) : bits(tp_f_to_half(f)) {}
  __device__ __forceinline__ operator float() const { return tp_half_to_f(bits); }
};
// A cast to a 16-bit type inside an expression: the value rounded, kept in float.
TP_D float tp_round_bf16(float f) { return tp_bf16_to_f(tp_f_to_bf16(f)); }
TP_D float tp_round_half(float f) { return tp_half_to_f(tp_f_to_half(f)); }
// Eight 16-bit lanes: one 16-byte access (the uint4 view makes loads and
// stores single 128-bit moves; lanes are read and written through v).
union __align__(16) tp_bf16x8 { uint4 u; tp_bf16 v[8]; };
union __align__(16) tp_halfx8 { uint4 u; tp_half v[8]; };
// Two 16-bit lanes: one 4-byte access (column sums: a thread's neighbouring outputs).
union __align__(4) tp_bf16x2 { unsigned u; tp_bf16 v[2]; };
union __align__(4) tp_halfx2 { unsigned u; tp_half v[2]; };
TP_D tp_bf16x8 make_tp_bf16x8(float a, float b, float c, float d, float e, float f, float g, float h) {
  tp_bf16x8 r; r.u = make_uint4(tp_pack_bf16(a, b), tp_pack_bf16(c, d), tp_pack_bf16(e, f), tp_pack_bf16(g, h)); return r;
}
TP_D tp_halfx8 make_tp_halfx8(float a, float b, float c, float d, float e, float f, float g, float h) {
  tp_halfx8 r; r.u = make_uint4(tp_pack_half(a, b), tp_pack_half(c, d), tp_pack_half(e, f), tp_pack_half(g, h)); return r;
}
TP_D long long tp_floordiv(long long a, long long b) { long long q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }
TP_D long long tp_mod(long long a, long long b) { if (b == -1) return 0; long long r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
TP_D int tp_floordiv(int a, int b) { int q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }
TP_D int tp_mod(int a, int b) { if (b == -1) return 0; int r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
// Shifts as eager computes them (in 64 bits, then wrapped to the width, which
// is PyTorch's result too): an amount outside 0..63 gives 0 (left) or the
// sign fill (right).
template <class T> TP_D T tp_shl(T a, T b) { return (T)((i64)b < 0 || (i64)b >= 64 ? 0LL : (i64)((unsigned long long)(i64)a << (int)b)); }
template <class T> TP_D T tp_shr(T a, T b) { return (T)((i64)b < 0 || (i64)b >= 64 ? ((i64)a < 0 ? -1LL : 0LL) : (i64)a >> (int)b); }
// Products are rounded on their own (no contraction into an FMA), as eager rounds them.
TP_D float tp_mul(float a, float b) { return __fmul_rn(a, b); }
TP_D double tp_mul(double a, double b) { return __dmul_rn(a, b); }
TP_D i64 tp_mul(i64 a, i64 b) { return a * b; }
// max/min propagate NaN, as eager does.
template <class T> TP_D T tp_max(T a, T b) { return (a != a || a > b) ? a : b; }
template <class T> TP_D T tp_min(T a, T b) { return (a != a || a < b) ? a : b; }
TP_D bool tp_max(bool a, bool b) { return a || b; }
TP_D bool tp_min(bool a, bool b) { return a && b; }
template <class T> TP_D T tp_neg(T a) { return -a; }
template <class T> TP_D T tp_relu(T a) { return a > T(0) ? a : (a != a ? a : T(0)); }
template <class T> TP_D T tp_abs(T a) { return a < T(0) ? -a : (a == T(0) ? T(0) : a); }
TP_D float tp_sigmoid(float a) { return 1.0f / (1.0f + expf(-a)); }
TP_D double tp_sigmoid(double a) { return 1.0 / (1.0 + exp(-a)); }
#define TP_M1(n, ff, fd) TP_D float tp_##n(float x) { return ff(x); } TP_D double tp_##n(double x) { return fd(x); }
#define TP_M2(n, ff, fd) TP_D float tp_##n(float x, float y) { return ff(x, y); } TP_D double tp_##n(double x, double y) { return fd(x, y); }
TP_M1(exp, expf, exp) TP_M1(log, logf, log) TP_M1(sqrt, sqrtf, sqrt) TP_M1(tanh, tanhf, tanh)
TP_M1(sin, sinf, sin) TP_M1(cos, cosf, cos) TP_M1(tan, tanf, tan) TP_M1(asin, asinf, asin) TP_M1(acos, acosf, acos)
TP_M1(atan, atanf, atan) TP_M1(sinh, sinhf, sinh) TP_M1(cosh, coshf, cosh) TP_M1(asinh, asinhf, asinh)
TP_M1(acosh, acoshf, acosh) TP_M1(atanh, atanhf, atanh) TP_M1(exp2, exp2f, exp2) TP_M1(log2, log2f, log2)
TP_M1(log10, log10f, log10) TP_M1(erfc, erfcf, erfc) TP_M1(floor, floorf, floor) TP_M1(ceil, ceilf, ceil)
TP_M1(trunc, truncf, trunc) TP_M1(round, rintf, rint)
TP_M2(atan2, atan2f, atan2) TP_M2(hypot, hypotf, hypot) TP_M2(fmod, fmodf, fmod) TP_M2(pow, powf, pow)
// 16-bit results (issue 12 item 4): the value is rounded to 8 (bfloat16) or 11
// (float16) bits, so exp, tanh, sigmoid and division of a 16-bit node use the
// hardware approximations (relative error about 2^-22, far below one 16-bit
// ulp) instead of the accurate float routines, which made the 16-bit kernels
// instruction-bound. float32 and float64 nodes keep the accurate ones.
// exp keeps subnormal results (no .ftz: bfloat16 has them too).
TP_D float tp_exp_h(float x) { float r; asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(x * 1.44269504f)); return r; }
TP_D float tp_ex2_ftz(float x) { float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r; }
TP_D float tp_rcp_ftz(float x) { float r; asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r; }
// 1 / (1 + e): e >= 0, so flushing subnormals changes nothing that survives.
TP_D float tp_sigmoid_h(float x) { return tp_rcp_ftz(1.0f + tp_ex2_ftz(x * -1.44269504f)); }
// tanh: 1 - 2 / (1 + e^2x) has an absolute error near 2^-22 (so 1 + tanh, as
// in GELU, keeps it), a relative one under 2^-13 from |x| = 2^-9 up; below,
// tanh(x) is x within x^2/3 < 2^-19.
TP_D float tp_tanh_h(float x) {
  const float big = fmaf(-2.0f, tp_rcp_ftz(1.0f + tp_ex2_ftz(x * 2.88539008f)), 1.0f);
  return fabsf(x) < 0.001953125f ? x : big;
}
// Full-range division within 2 float ulps (PTX div.full: operands scaled, one
// approximate reciprocal; a row's divisor, as softmax's sum, is prepared once).
TP_D float tp_div_h(float a, float b) { float r; asm("div.full.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r; }
TP_D float tp_frac(float x) { return x - truncf(x); }
TP_D double tp_frac(double x) { return x - trunc(x); }
// fmod's result moved to the divisor's sign (PyTorch / Python %).
template <class T> TP_D T tp_remainder(T x, T y) { T r = tp_fmod(x, y); return (r != T(0) && ((r < T(0)) != (y < T(0)))) ? r + y : r; }
template <class T> TP_D T tp_where(bool c, T a, T b) { return c ? a : b; }
TP_D float tp_shfl(float v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
TP_D double tp_shfl(double v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
TP_D i64 tp_shfl(i64 v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
TP_D int tp_shfl(int v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
TP_D i16 tp_shfl(i16 v, int o) { return (i16)__shfl_xor_sync(0xffffffffu, (int)v, o); }
TP_D i8 tp_shfl(i8 v, int o) { return (i8)__shfl_xor_sync(0xffffffffu, (int)v, o); }
TP_D u8 tp_shfl(u8 v, int o) { return (u8)__shfl_xor_sync(0xffffffffu, (int)v, o); }
TP_D bool tp_shfl(bool v, int o) { return __shfl_xor_sync(0xffffffffu, (int)v, o) != 0; }
struct tp_op_sum { template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; } };
struct tp_op_prod { template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return a * b; } };
struct tp_op_max { template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return tp_max(a, b); } };
struct tp_op_min { template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return tp_min(a, b); } };
// Every thread's v combined over the block, in a fixed order (deterministic);
// every thread gets the result. sh: 32 entries of shared memory.
template <class T, class F> TP_D T tp_block_reduce(T v, F f, T* sh) {
  for (int o = 16; o > 0; o >>= 1) v = f(v, tp_shfl(v, o));
  const int nw = (blockDim.x + 31) >> 5;
  if (nw == 1) return v;
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  T r = sh[0];
  for (int w = 1; w < nw; ++w) r = f(r, sh[w]);
  __syncthreads();
  return r;
}
)";

bool supported_call(CallOp op) { return !is_random(op); }

const char* functor(ReduceOp r) {
  switch (r) {
    case ReduceOp::Sum: return "tp_op_sum()";
    case ReduceOp::Prod: return "tp_op_prod()";
    case ReduceOp::Max: return "tp_op_max()";
    default: return "tp_op_min()";
  }
}

std::string reduce_init(ReduceOp r, DType t) { return c_reduce_identity(r, t, kCuda); }

// The accumulator's type: a float32 sum accumulates in double, 16-bit floats
// in float.
DType acc_dtype(ReduceOp r, DType t) {
  if (is_half(t)) return DType::Float32;
  return r == ReduceOp::Sum && t == DType::Float32 ? DType::Float64 : t;
}

// The 16-byte vector of dtype t (16 / itemsize lanes).
const char* vec_type(DType t) {
  switch (t) {
    case DType::Float64: return "double2";
    case DType::Int32: return "int4";
    case DType::BFloat16: return "tp_bf16x8";
    case DType::Float16: return "tp_halfx8";
    default: return "float4";
  }
}
// Does a vector of `lanes` elements of t fill exactly one 16-byte access?
bool vec_fits(DType t, int lanes) { return (is_floating(t) || t == DType::Int32) && itemsize(t) * lanes == 16; }
std::string lane_field(DType t, int l) {
  if (is_half(t)) return ".v[" + std::to_string(l) + "]";
  static const char* f[] = {".x", ".y", ".z", ".w"};
  return f[l];
}

class Writer {
 public:
  Writer(const LoopProgram& p, const std::unordered_map<int, std::string>& locals, RangeMap ranges, int& counter)
      : p_(p), locals_(locals), ranges_(std::move(ranges)), counter_(counter) {}
  // Loads printed as a given name (one lane of a vector load).
  std::unordered_map<const ExprNode*, std::string> lane_loads;

  std::string emit(const Expr& e, std::ostringstream& os, const std::string& ind) {
    auto it = names_.find(e.get());
    if (it != names_.end()) return it->second;
    std::string rhs;
    switch (e->op) {
      case ExprOp::Const: rhs = literal(e->value, e->dtype); break;
      case ExprOp::Load: {
        auto lane = lane_loads.find(e.get());
        auto loc = locals_.find(e->buffer);
        const Buffer& b = p_.buffers[e->buffer];
        if (lane != lane_loads.end()) {
          rhs = lane->second;
        } else if (loc != locals_.end()) {
          rhs = loc->second;
        } else if (!e->args.empty()) {  // indirect: an offset read from data
          std::string off = emit(e->args[0], os, ind);
          rhs = b.name + "[" + to_c(e->index, ranges_) + " + " + off + "]";
        } else {
          rhs = b.name + "[" + to_c(e->index, ranges_) + "]";
        }
        break;
      }
      case ExprOp::Call: {
        if (!supported_call(e->fn))
          throw NotImplementedError(str("stax cuda printer: operation '", name(e->fn), "' is not supported yet"));
        std::vector<std::string> a;
        for (auto& x : e->args) a.push_back(emit(x, os, ind));
        // A floating product goes through tp_mul (rounded alone, never fused
        // into an FMA with its consumer), except a sum's own body value.
        // A 16-bit node is rounded to 16 bits anyway: its products may contract
        // into FMAs and its exp/tanh/sigmoid/division use the fast forms above.
        const bool h = is_half(e->dtype);
        if (e->fn == CallOp::Mul && is_floating(e->dtype) && !(h && half_contract()) && e.get() != sum_root_)
          rhs = "tp_mul(" + a[0] + ", " + a[1] + ")";
        else if (h && (e->fn == CallOp::Exp || e->fn == CallOp::Tanh || e->fn == CallOp::Sigmoid))
          rhs = std::string("tp_") + info(e->fn).name + "_h(" + a[0] + ")";
        else if (h && half_fast_div() && e->fn == CallOp::Div && per_element(e)) rhs = "tp_div_h(" + a[0] + ", " + a[1] + ")";
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
        if (e->dtype == DType::Bool) rhs = "(" + a + " != 0)";
        else if (e->dtype == DType::BFloat16) rhs = "tp_round_bf16((float)(" + a + "))";
        else if (e->dtype == DType::Float16) rhs = "tp_round_half((float)(" + a + "))";
        // float -> narrow integer: truncated to int64 first, then wrapped to
        // the width (eager's conversion, and PyTorch's for uint8; C's direct
        // conversion is undefined out of range).
        else if (is_floating(e->args[0]->dtype) && is_integral(e->dtype, false) && itemsize(e->dtype) < 8)
          rhs = std::string("(") + ctype(e->dtype) + ")(i64)(" + a + ")";
        else rhs = std::string("(") + ctype(e->dtype) + ")(" + a + ")";
        break;
      }
    }
    std::string nm = "t";  // appended, not operator+: GCC 12 warns falsely (-Wrestrict)
    nm += std::to_string(counter_++);
    os << ind << "const " << ctype(e->dtype) << " " << nm << " = " << rhs << ";\n";
    names_[e.get()] = nm;
    return nm;
  }
  // Whether a value changes from element to element (reads a buffer or an
  // index). A row-invariant division (layer_norm's 1/sqrt(var + eps), a mean's
  // sum / n) stays a plain `/`, which the compiler hoists out of the element
  // loop; the fast form's asm is not hoisted and made 16-bit layer_norm and
  // RMSNorm instruction-bound (beta 0.67 / 0.79 against 0.99 on the H200).
  // Memoized on the node: the IR is a DAG whose paths can be exponential.
  bool per_element(const Expr& e) {
    auto it = varying_.find(e.get());
    if (it != varying_.end()) return it->second;
    bool v = e->op == ExprOp::Index || (e->op == ExprOp::Load && !locals_.count(e->buffer));
    for (size_t i = 0; !v && i < e->args.size(); ++i) v = per_element(e->args[i]);
    varying_[e.get()] = v;
    return v;
  }
  void reset_names() { names_.clear(); }
  void set_sum_root(const ExprNode* e) { sum_root_ = e; }

 private:
  const LoopProgram& p_;
  const std::unordered_map<int, std::string>& locals_;
  std::unordered_map<const ExprNode*, bool> varying_;
  RangeMap ranges_;
  int& counter_;
  std::unordered_map<const ExprNode*, std::string> names_;
  const ExprNode* sum_root_ = nullptr;
};

// Product of the first `count` sizes.
int64_t leading_product(const Shape& s, size_t count) {
  int64_t n = 1;
  for (size_t i = 0; i < count && i < s.size(); ++i) n *= s[i];
  return n;
}

// How one nest's inner space splits into work items: `groups` vector groups of
// `lanes` elements of the last inner dim per row of the other inner dims, then
// `tail` scalar elements per such row. The numbers are at the hints; the
// expressions (`_e`) hold at any sizes (constants for a static nest).
struct NestItems {
  int lanes = 1;
  int64_t rows = 1;     // product of the inner extents but the last
  int64_t groups = 0;   // per row
  int64_t tail = 1;     // per row
  IndexExpr rows_e = 1, groups_e = 0, tail_e = 1;
  int64_t vec_items() const { return rows * groups; }
  int64_t tail_items() const { return rows * tail; }
  IndexExpr vec_items_e() const { return rows_e * groups_e; }
  IndexExpr tail_items_e() const { return rows_e * tail_e; }
};

// Extent d of a nest's inner space as an expression.
IndexExpr inner_extent(const LoopNest& n, size_t d) {
  return d < n.inner_extents.size() ? n.inner_extents[d] : IndexExpr(n.inner_ranges[d]);
}

NestItems nest_items(const LoopNest& n) {
  NestItems it;
  const size_t nd = n.inner_vars.size();
  if (nd == 0) return it;
  it.rows = leading_product(n.inner_ranges, nd - 1);
  const int64_t e = n.inner_ranges.back();
  it.lanes = n.vectorize && n.lanes > 1 && n.lanes <= 8 ? n.lanes : 1;
  it.groups = it.lanes > 1 ? e / it.lanes : 0;
  it.tail = e - it.groups * it.lanes;
  it.rows_e = 1;
  for (size_t d = 0; d + 1 < nd; ++d) it.rows_e = it.rows_e * inner_extent(n, d);
  const IndexExpr ee = inner_extent(n, nd - 1);
  it.groups_e = it.lanes > 1 ? floordiv(ee, IndexExpr(it.lanes)) : IndexExpr(0);
  it.tail_e = ee - it.groups_e * it.lanes;
  return it;
}

class KernelWriter {
 public:
  // wide: 64-bit indices although the plan proved 32 bits (a symbolic
  // kernel whose flattened work the plan's proof does not cover).
  KernelWriter(const LoopProgram& p, const KernelPlan& k, std::ostringstream& os, bool wide = false)
      : p_(p), k_(k), os_(os) {
    ix_ = k.index_bits == 32 && !wide ? "int" : "i64";
    if (k.symbolic) {
      // Sizes lie in their declared ranges (a division by one prints as C's
      // `/`), loop variables below their extents' largest value.
      ranges_ = k.size_ranges;
      auto loop = [&](const IndexExpr& e) -> Interval {
        const Interval r = range_of(e, k.size_ranges);
        return {0, r.hi == INT64_MAX ? INT64_MAX - 1 : std::max<int64_t>(r.hi - 1, 0)};
      };
      ranges_[k.outer_var.var_id()] = loop(k.outer_count);
      for (const LoopNest& n : k.nests)
        for (size_t d = 0; d < n.inner_vars.size(); ++d) ranges_[n.inner_vars[d].var_id()] = loop(inner_extent(n, d));
      return;
    }
    ranges_[k.outer_var.var_id()] = outer_interval(k);
    for (const LoopNest& n : k.nests)
      for (size_t d = 0; d < n.inner_vars.size(); ++d) ranges_[n.inner_vars[d].var_id()] = loop_interval(n.inner_extents[d]);
  }

  // An extent or count in the source: the number for a constant (as static
  // kernels always printed it), else the C expression over tp_size<k>.
  std::string cx(const IndexExpr& e) const {
    const IndexExpr s = simplify(e, ranges_);
    if (s.is_const()) return std::to_string(s.const_value());
    return "(" + to_c(s, ranges_) + ")";
  }
  // An index over the outer variable alone (a reduction's store), printed
  // with the outer loop's range (and the sizes' declared ones).
  std::string outer_c(const IndexExpr& e) const {
    if (!k_.symbolic) return to_c(e, {{k_.outer_var.var_id(), outer_interval(k_)}});
    RangeMap r = k_.size_ranges;
    r[k_.outer_var.var_id()] = ranges_.at(k_.outer_var.var_id());
    return to_c(e, r);
  }
  bool is_zero(const IndexExpr& e) const {
    const IndexExpr s = simplify(e, ranges_);
    return s.is_const() && s.const_value() == 0;
  }

  // A column reduction's row index tp_g split over the nest's reduced dims
  // (the last fastest), as locals named after the loop variables.
  void split_reduced_index(const LoopNest& n, const std::string& ind) {
    os_ << ind << ix_ << " tp_rem = tp_g;\n";
    for (size_t d = n.inner_vars.size(); d-- > 0;) {
      const std::string e = cx(inner_extent(n, d));
      os_ << ind << "const " << ix_ << " " << n.inner_vars[d].var_name() << " = tp_rem % " << e << "; tp_rem /= " << e
          << ";\n";
    }
    os_ << ind << "(void)tp_rem;\n";
  }

  // Declares the inner variables of `n` for work item `g` (vector item: the
  // last variable is the group's first element).
  void decode(const LoopNest& n, const NestItems& it, const std::string& g, bool vec, const std::string& ind) {
    const size_t nd = n.inner_vars.size();
    if (nd == 0) return;
    const std::string j = n.inner_vars.back().var_name();
    const std::string per = cx(vec ? it.groups_e : it.tail_e);
    os_ << ind << "const " << ix_ << " " << j << " = ";
    // g < per where a nest has one inner dim (every loop bounds it so): a
    // symbolic nest skips that `%`, a run-time division on the GPU.
    const std::string gm = k_.symbolic && nd == 1 ? g : g + " % " + per;
    if (vec) os_ << "(" << gm << ") * " << it.lanes << ";\n";
    else os_ << cx(it.groups_e * it.lanes) << " + " << gm << ";\n";
    if (nd == 1) return;
    os_ << ind << ix_ << " " << j << "_r = " << g << " / " << per << ";\n";
    for (size_t d = nd - 1; d-- > 0;) {
      const std::string e = cx(inner_extent(n, d));
      os_ << ind << "const " << ix_ << " " << n.inner_vars[d].var_name() << " = " << j << "_r % " << e << "; " << j
          << "_r /= " << e << ";\n";
    }
    os_ << ind << "(void)" << j << "_r;\n";
  }

  // The body of one work item. Pointwise: stores (vector store when the group
  // is aligned). Reduction: folds the item's values into `acc`.
  void item(const LoopNest& n, const NestItems& it, bool vec, const std::string& acc, const std::string& ind) {
    const ComputeNode& node = p_.nodes[n.node];
    const Buffer& out = p_.buffers[node.out_buffer];
    Writer w(p_, locals_, ranges_, counter_);
    if (node.reduce == ReduceOp::Sum) w.set_sum_root(n.body.get());
    const bool red = node.is_reduction();
    DType dt = node.body->dtype;
    auto fold = [&](const std::string& v) {
      DType at = acc_dtype(node.reduce, dt);
      std::string val = at == dt ? v : std::string("(") + ctype(at) + ")" + v;
      os_ << ind << acc << " = " << c_combine(node.reduce, acc, val) << ";\n";
    };
    // lane >= 0: inside a vector group of a cached row, where the value also
    // goes to the register cache of (buffer, index), or only there when no
    // one reads that memory before the nest that writes it for good.
    auto side_stores = [&](Writer& wr, const std::string& in2, int lane) {
      for (const SideStore& ss : n.side_stores) {
        std::string v = wr.emit(ss.value, os_, in2);
        if (lane >= 0 && use_cache_) {
          auto c = cache_.find(cache_key(ss.buffer, ss.index, n));
          if (c != cache_.end()) {
            os_ << in2 << c->second << "[tp_kk]" << lane_field(ss.value->dtype, lane) << " = " << v << ";\n";
            if (dead_side_.count(c->first)) continue;
          }
        }
        os_ << in2 << p_.buffers[ss.buffer].name << "[" << to_c(ss.index, ranges_) << "] = " << v << ";\n";
      }
    };
    if (!vec) {
      std::string v = w.emit(n.body, os_, ind);
      side_stores(w, ind, -1);
      if (red) fold(v);
      else os_ << ind << out.name << "[" << to_c(n.store_index, ranges_) << "] = " << v << ";\n";
      return;
    }
    // Vector group: one 16-byte access per contiguous buffer (and the store),
    // when every address is aligned; otherwise the same lanes one by one.
    const int L = it.lanes;
    const int jv = n.inner_vars.back().var_id();
    const std::string jb = n.inner_vars.back().var_name();
    std::vector<const ExprNode*> vloads;
    std::set<const ExprNode*> seen;
    std::string aligned = "0";
    for (const ExprNode* l : loads_of(n.body)) {
      if (!l->args.empty() || locals_.count(l->buffer) || !seen.insert(l).second) continue;
      auto c = coefficient_of(l->index, jv);
      if (!c || *c != 1 || l->dtype != dt || !vec_fits(dt, L)) continue;
      vloads.push_back(l);
    }
    std::unordered_map<const ExprNode*, std::string> lane_base;
    std::vector<const ExprNode*> mem_loads;  // the vector loads not served by the register cache
    for (const ExprNode* l : vloads) {
      if (use_cache_) {
        auto c = cache_.find(cache_key(l->buffer, l->index, n));
        if (c != cache_.end()) {
          lane_base[l] = c->second + "[tp_kk]";
          continue;
        }
      }
      mem_loads.push_back(l);
      const std::string idx = to_c(l->index, ranges_);
      const std::string nm = "tp_v" + std::to_string(counter_++);
      os_ << ind << "const " << ix_ << " " << nm << "_i = " << idx << ";\n";
      aligned += " | (unsigned long long)(" + p_.buffers[l->buffer].name + " + " + nm + "_i)";
      lane_base[l] = nm;
    }
    const bool vstore = !red && coefficient_of(n.store_index, jv).value_or(0) == 1 && vec_fits(dt, L) &&
                        out.dtype == dt;
    std::string sidx;
    if (vstore) {
      sidx = "tp_s" + std::to_string(counter_++);
      os_ << ind << "const " << ix_ << " " << sidx << " = " << to_c(n.store_index, ranges_) << ";\n";
      aligned += " | (unsigned long long)(" + out.name + " + " + sidx + ")";
    }
    const std::string al = "tp_al" + std::to_string(counter_++);
    os_ << ind << "const bool " << al << " = ((" << aligned << ") & 15) == 0;\n";
    const char* vt = vec_type(dt);
    for (const ExprNode* l : mem_loads) {
      const std::string& nm = lane_base[l];
      const std::string& b = p_.buffers[l->buffer].name;
      os_ << ind << vt << " " << nm << ";\n";
      os_ << ind << "if (" << al << ") " << nm << " = *reinterpret_cast<const " << vt << "*>(" << b << " + " << nm
          << "_i);\n";
      os_ << ind << "else {";
      for (int q = 0; q < L; ++q) os_ << " " << nm << lane_field(dt, q) << " = " << b << "[" << nm << "_i + " << q << "];";
      os_ << " }\n";
    }
    std::vector<std::string> results;
    for (int q = 0; q < L; ++q) {
      const std::string r = "tp_r" + std::to_string(counter_++);
      results.push_back(r);
      if (!red) os_ << ind << ctype(dt) << " " << r << ";\n";  // float for 16-bit types: rounded at the store
    }
    for (int q = 0; q < L; ++q) {
      os_ << ind << "{\n";
      const std::string in2 = ind + "  ";
      // The lane's own value of the last inner variable, under its name.
      os_ << in2 << "const " << ix_ << " " << jb << "_q = " << jb << " + " << q << ";\n";
      Writer wl(p_, locals_, ranges_, counter_);
      if (node.reduce == ReduceOp::Sum) wl.set_sum_root(n.body.get());
      for (const ExprNode* l : vloads) wl.lane_loads[l] = lane_base[l] + lane_field(dt, q);
      // Redeclare the last variable for this lane (nested scope), so invariant
      // loads, side stores and indices read the lane's position.
      os_ << in2 << "{\n";
      const std::string in3 = in2 + "  ";
      os_ << in3 << "const " << ix_ << " " << jb << " = " << jb << "_q;\n" << in3 << "(void)" << jb << ";\n";
      std::string v = wl.emit(n.body, os_, in3);
      side_stores(wl, in3, q);
      if (red) {
        DType at = acc_dtype(node.reduce, dt);
        std::string val = at == dt ? v : std::string("(") + ctype(at) + ")" + v;
        os_ << in3 << acc << " = " << c_combine(node.reduce, acc, val) << ";\n";
      } else {
        os_ << in3 << results[q] << " = " << v << ";\n";
        if (!vstore) os_ << in3 << out.name << "[" << to_c(n.store_index, ranges_) << "] = " << v << ";\n";
      }
      os_ << in2 << "}\n" << ind << "}\n";
    }
    if (vstore) {
      os_ << ind << "if (" << al << ") *reinterpret_cast<" << vt << "*>(" << out.name << " + " << sidx << ") = make_"
          << vt << "(";
      for (int q = 0; q < L; ++q) os_ << (q ? ", " : "") << results[q];
      os_ << ");\n" << ind << "else {";
      for (int q = 0; q < L; ++q) os_ << " " << out.name << "[" << sidx << " + " << q << "] = " << results[q] << ";";
      os_ << " }\n";
    }
  }

  // The loads of a column nest contiguous along the outputs: with L lanes a
  // thread reads L neighbouring elements of each in one access. Returns false
  // when some 16-bit load has a reduced-dim stride (or a form) that would not
  // keep every row's access aligned like the first row's: the alignment is
  // then tested once per thread, not once per row.
  bool column_pairs(const LoopNest& n, int L, std::vector<const ExprNode*>& pairs) const {
    const int ov = k_.outer_var.var_id();
    std::set<const ExprNode*> seen;
    for (const ExprNode* l : loads_of(n.body)) {
      if (!l->args.empty() || locals_.count(l->buffer) || !seen.insert(l).second || !is_half(l->dtype)) continue;
      auto c = coefficient_of(l->index, ov);
      if (!c || *c != 1) continue;
      for (const IndexExpr& v : n.inner_vars) {
        auto cv = coefficient_of(l->index, v.var_id());
        if (!cv || *cv % L != 0) return false;
      }
      pairs.push_back(l);
    }
    return true;
  }

  // Before the reduced loop: whether every pair access of this thread is
  // L * 2-byte aligned (the reduced variables at 0; column_pairs made the
  // other rows agree).
  void column_alignment(const LoopNest& n, int L, const std::vector<const ExprNode*>& pairs, const std::string& al,
                        const std::string& ind) {
    os_ << ind << "bool " << al << ";\n" << ind << "{\n";
    for (const IndexExpr& v : n.inner_vars)
      os_ << ind << "  const " << ix_ << " " << v.var_name() << " = 0; (void)" << v.var_name() << ";\n";
    os_ << ind << "  " << al << " = ((0";
    for (const ExprNode* l : pairs)
      os_ << " | (unsigned long long)(" << p_.buffers[l->buffer].name << " + (" << to_c(l->index, ranges_) << "))";
    os_ << ") & " << (2 * L - 1) << ") == 0;\n" << ind << "}\n";
  }

  // One reduced item of the column form with `L` neighbouring outputs per
  // thread (16-bit data: two lanes make one 4-byte access per row, as a
  // float32 column thread reads). `vec`: the pair loads are single aligned
  // accesses (the caller tested it once); else they read lane by lane. The
  // body runs once per lane with the outer variable moved to that lane,
  // folding into acc<q>.
  void column_item(const LoopNest& n, int L, const std::vector<const ExprNode*>& pairs, bool vec,
                   const std::string& acc, const std::string& ind) {
    const ComputeNode& node = p_.nodes[n.node];
    const DType dt = node.body->dtype, at = acc_dtype(node.reduce, dt);
    const std::string o = k_.outer_var.var_name();
    std::unordered_map<const ExprNode*, std::string> base;
    for (const ExprNode* l : pairs) {
      const std::string nm = "tp_p" + std::to_string(counter_++);
      const std::string& b = p_.buffers[l->buffer].name;
      const char* vt = l->dtype == DType::BFloat16 ? "tp_bf16x2" : "tp_halfx2";
      os_ << ind << "const " << ix_ << " " << nm << "_i = " << to_c(l->index, ranges_) << ";\n";
      os_ << ind << vt << " " << nm << ";\n";
      if (vec) {
        os_ << ind << nm << ".u = *reinterpret_cast<const unsigned*>(" << b << " + " << nm << "_i);\n";
      } else {
        for (int q = 0; q < L; ++q) os_ << ind << nm << ".v[" << q << "] = " << b << "[" << nm << "_i + " << q << "];\n";
      }
      base[l] = nm;
    }
    for (int q = 0; q < L; ++q) {
      os_ << ind << "{\n";
      const std::string in2 = ind + "  ";
      os_ << in2 << "const " << ix_ << " " << o << "_q = " << o << " + " << q << ";\n";
      os_ << in2 << "{\n";
      const std::string in3 = in2 + "  ";
      os_ << in3 << "const " << ix_ << " " << o << " = " << o << "_q;\n" << in3 << "(void)" << o << ";\n";
      Writer wl(p_, locals_, ranges_, counter_);
      if (node.reduce == ReduceOp::Sum) wl.set_sum_root(n.body.get());
      for (const ExprNode* l : pairs) wl.lane_loads[l] = base[l] + ".v[" + std::to_string(q) + "]";
      std::string v = wl.emit(n.body, os_, in3);
      std::string val = at == dt ? v : std::string("(") + ctype(at) + ")" + v;
      const std::string a = acc + std::to_string(q);
      os_ << in3 << a << " = " << c_combine(node.reduce, a, val) << ";\n";
      os_ << in2 << "}\n" << ind << "}\n";
    }
  }

  const std::string& ix() const { return ix_; }
  std::unordered_map<int, std::string>& locals() { return locals_; }
  int next() { return counter_++; }

  // A (buffer, index) read or written by nest n, with n's inner variable
  // renamed to the first nest's: equal keys are the same element of a row.
  std::string cache_key(int buffer, const IndexExpr& index, const LoopNest& n) const {
    const IndexExpr& j0 = k_.nests[0].inner_vars.back();
    IndexExpr e = substitute(index, {{n.inner_vars.back().var_id(), j0}});
    return std::to_string(buffer) + "@" + to_c(simplify(e, ranges_), ranges_);
  }

  // Register cache of a row kernel whose nests share one inner dim: every
  // read-only row a nest reads with vector accesses is loaded once per row
  // into K vector registers per thread (group g = threadIdx.x + kk * block),
  // and every nest takes it from there; a side store another nest reads back
  // at the same element goes there too. Returns false (no cache) when the row
  // needs more than `max_regs` registers per thread.
  bool plan_cache(const NestItems& it, int block, int max_regs) {
    const int K = static_cast<int>((it.groups + block - 1) / block);
    std::set<int> written;
    for (const LoopNest& n : k_.nests) {
      written.insert(p_.nodes[n.node].out_buffer);
      for (const SideStore& ss : n.side_stores) written.insert(ss.buffer);
    }
    std::map<std::string, std::pair<int, IndexExpr>> keys;  // key -> (buffer, index over nest 0's variable)
    std::map<std::string, int> key_dtype;
    for (const LoopNest& n : k_.nests) {
      const int jv = n.inner_vars.back().var_id();
      for (const ExprNode* l : loads_of(n.body)) {
        if (!l->args.empty() || locals_.count(l->buffer) || l->dtype != p_.nodes[n.node].body->dtype ||
            !vec_fits(l->dtype, it.lanes))
          continue;
        auto c = coefficient_of(l->index, jv);
        if (!c || *c != 1) continue;
        const std::string key = cache_key(l->buffer, l->index, n);
        if (written.count(l->buffer)) {
          side_reads_[key]++;
          continue;
        }
        // A row-invariant operand (layer_norm's weight) stays in L1 anyway:
        // registers would only lower the occupancy.
        if (!depends_on(l->index, k_.outer_var.var_id())) continue;
        keys.emplace(key, std::make_pair(l->buffer, substitute(l->index, {{jv, k_.nests[0].inner_vars.back()}})));
        key_dtype[key] = static_cast<int>(l->dtype);
      }
    }
    // Side stores read back later at the same element (softmax's exp).
    std::map<std::string, int> side_keys;
    for (const LoopNest& n : k_.nests)
      for (const SideStore& ss : n.side_stores) {
        const std::string key = cache_key(ss.buffer, ss.index, n);
        if (side_reads_.count(key) && vec_fits(ss.value->dtype, it.lanes))
          side_keys[key] = static_cast<int>(ss.value->dtype);
      }
    // 32-bit registers: two 16-bit lanes share one.
    int64_t regs = 0;
    for (auto& [key, t] : key_dtype) regs += K * it.lanes * itemsize(static_cast<DType>(t)) / 4;
    for (auto& [key, t] : side_keys) regs += K * it.lanes * itemsize(static_cast<DType>(t)) / 4;
    if (K < 1 || K > 8 || regs > max_regs || (keys.empty() && side_keys.empty())) return false;
    k_cache_ = K;
    use_cache_ = true;
    for (auto& [key, bi] : keys) {
      cache_[key] = "tp_c" + std::to_string(counter_++);
      cache_loads_.push_back({cache_[key], bi.first, bi.second, static_cast<DType>(key_dtype[key])});
    }
    for (auto& [key, dt] : side_keys) {
      cache_[key] = "tp_c" + std::to_string(counter_++);
      cache_side_.push_back({cache_[key], static_cast<DType>(dt)});
      // The memory write can go when every read of that buffer in this kernel
      // is this element (served from registers) and a later nest stores the
      // buffer's final value at the same element.
      const int buffer = std::stoi(key.substr(0, key.find('@')));
      bool others = false, final_store = false;
      for (const LoopNest& n : k_.nests)
        for (const ExprNode* l : loads_of(n.body))
          if (l->buffer == buffer && (!l->args.empty() || cache_key(buffer, l->index, n) != key)) others = true;
      for (const LoopNest& n : k_.nests)
        if (!p_.nodes[n.node].is_reduction() && p_.nodes[n.node].out_buffer == buffer &&
            cache_key(buffer, n.store_index, n) == key)
          final_store = true;
      if (!others && final_store) dead_side_.insert(key);
    }
    return true;
  }

  // Declares the caches and loads the read-only rows (outer variable set).
  void emit_cache_loads(const NestItems& it, int block, const std::string& ind) {
    for (auto& c : cache_side_) os_ << ind << vec_type(c.dtype) << " " << c.name << "[" << k_cache_ << "];\n";
    for (auto& c : cache_loads_) os_ << ind << vec_type(c.dtype) << " " << c.name << "[" << k_cache_ << "];\n";
    if (cache_loads_.empty()) return;
    const std::string j0 = k_.nests[0].inner_vars.back().var_name();
    os_ << ind << "#pragma unroll\n" << ind << "for (int tp_kk = 0; tp_kk < " << k_cache_ << "; ++tp_kk) {\n";
    os_ << ind << "  const " << ix_ << " tp_g = threadIdx.x + tp_kk * " << block_str(block) << ";\n";
    os_ << ind << "  if (tp_g < " << cx(it.groups_e) << ") {\n";
    os_ << ind << "    const " << ix_ << " " << j0 << " = tp_g * " << it.lanes << ";\n";
    for (auto& c : cache_loads_) {
      const std::string& b = p_.buffers[c.buffer].name;
      os_ << ind << "    const " << ix_ << " " << c.name << "_i = " << to_c(c.index, ranges_) << ";\n";
      os_ << ind << "    if ((((unsigned long long)(" << b << " + " << c.name << "_i)) & 15) == 0) " << c.name
          << "[tp_kk] = *reinterpret_cast<const " << vec_type(c.dtype) << "*>(" << b << " + " << c.name << "_i);\n";
      os_ << ind << "    else {";
      for (int q = 0; q < it.lanes; ++q)
        os_ << " " << c.name << "[tp_kk]" << lane_field(c.dtype, q) << " = " << b << "[" << c.name << "_i + " << q << "];";
      os_ << " }\n";
    }
    os_ << ind << "  }\n" << ind << "}\n";
  }
  bool use_cache() const { return use_cache_; }
  // A symbolic row prints its cached body and, behind a run-time test, the
  // plain one: the cache is off while the latter prints.
  void set_use_cache(bool on) { use_cache_ = on; }
  int cache_k() const { return k_cache_; }
  // The block size chosen at launch (symbolic rows): the source reads blockDim.x.
  void set_launch_block(bool on) { launch_block_ = on; }
  std::string block_str(int block) const {
    return launch_block_ ? "(" + ix_ + ")blockDim.x" : std::to_string(block);
  }

 private:
  const LoopProgram& p_;
  const KernelPlan& k_;
  std::ostringstream& os_;
  std::string ix_;
  RangeMap ranges_;
  std::unordered_map<int, std::string> locals_;
  int counter_ = 0;
  // Register cache (plan_cache).
  struct CacheLoad {
    std::string name;
    int buffer;
    IndexExpr index;
    DType dtype;
  };
  struct CacheSide {
    std::string name;
    DType dtype;
  };
  bool use_cache_ = false;
  bool launch_block_ = false;
  int k_cache_ = 0;
  std::map<std::string, std::string> cache_;
  std::vector<CacheLoad> cache_loads_;
  std::vector<CacheSide> cache_side_;
  std::map<std::string, int> side_reads_;
  std::set<std::string> dead_side_;
};

// Can the kernel run as one grid-stride loop? Every nest pointwise, with the
// same inner space and the same lanes.
bool flat_form(const LoopProgram& p, const KernelPlan& k) {
  for (const LoopNest& n : k.nests) {
    if (p.nodes[n.node].is_reduction()) return false;
    if (n.inner_ranges != k.nests[0].inner_ranges || n.inner_extents != k.nests[0].inner_extents) return false;
    NestItems a = nest_items(n), b = nest_items(k.nests[0]);
    if (a.lanes != b.lanes) return false;
  }
  return true;
}

// Every nest over the same single inner dim, vectorized with the same lanes.
bool row_cacheable(const LoopProgram& p, const KernelPlan& k) {
  for (const LoopNest& n : k.nests) {
    if (n.inner_vars.size() != 1 || n.inner_ranges != k.nests[0].inner_ranges ||
        n.inner_extents != k.nests[0].inner_extents || p.nodes[n.node].scan)
      return false;
    NestItems a = nest_items(n);
    if (a.lanes < 2 || a.groups == 0 || a.lanes != nest_items(k.nests[0]).lanes) return false;
  }
  return true;
}

int pow2_at_least(int64_t n, int lo, int hi) {
  int t = lo;
  while (t < hi && t < n) t *= 2;
  return t;
}

bool pow2_in(int v, int lo, int hi) { return v >= lo && v <= hi && (v & (v - 1)) == 0; }

// Every knob the kernels could not take is refused before anything is printed.
void check_knobs(const CudaKnobs& k) {
  auto check = [](int v, bool ok, const char* name, const char* want) {
    if (v != 0 && !ok) throw ValueError(str("stax cuda printer: ", name, " = ", v, " (want 0 or ", want, ")"));
  };
  check(k.row_block, pow2_in(k.row_block, 32, 512), "row_block", "a power of two in [32, 512]");
  check(k.row_threads, pow2_in(k.row_threads, 32, 1024), "row_threads", "a power of two in [32, 1024]");
  check(k.flat_block, k.flat_block > 0 && k.flat_block <= 1024 && k.flat_block % 32 == 0, "flat_block",
        "a multiple of 32 up to 1024");
  check(k.column_width, k.column_width == 8 || k.column_width == 16 || k.column_width == 32 || k.column_width == 64,
        "column_width", "8, 16, 32 or 64");
  // >= 64 threads: at least two block rows for two-lane 16-bit columns at W = 64.
  check(k.column_threads, pow2_in(k.column_threads, 64, 1024), "column_threads", "a power of two in [64, 1024]");
  check(k.split_blocks, k.split_blocks >= 1 && k.split_blocks <= 4096, "split_blocks", "1 to 4096");
  check(k.split_threads, pow2_in(k.split_threads, 64, 1024), "split_threads", "a power of two in [64, 1024]");
}

}  // namespace

PrintedUnit CudaPrinter::print(const LoopProgram& p, const Schedule& s) const { return print_cuda(p, s).unit; }

CudaLaunch cuda_launch_at(const CudaLaunch& l, const std::unordered_map<int, int64_t>& sizes) {
  if (!l.symbolic) return l;
  CudaLaunch r = l;
  r.work = std::max<int64_t>(evaluate(l.work_expr, sizes), 0);
  if (l.split_auto) {
    // The split factor the static printer would take at these items (at least one block).
    r.work = std::max(split_reduction_blocks(evaluate(l.split_items, sizes)), 1);
  } else if (l.form == CudaForm::Row && l.block_max > 0) {
    const int64_t items = std::max<int64_t>(evaluate(l.items_expr, sizes), 1);
    r.block_x = pow2_at_least(l.cache_k > 0 ? (items + l.cache_k - 1) / l.cache_k : items, 32, l.block_max);
  }
  return r;
}

CudaUnit CudaPrinter::print_cuda(const LoopProgram& p, const Schedule& s) const {
  check_knobs(knobs_);
  CudaUnit cu;
  PrintedUnit& u = cu.unit;
  u.language = language();
  // Buffer slots: every buffer that lives in memory (locals of a kernel do not).
  std::set<int> memory_temps;
  for (auto& k : s.kernels)
    for (auto& n : k.nests) {
      if (n.store_to_memory) memory_temps.insert(p.nodes[n.node].out_buffer);
      for (auto& ss : n.side_stores) memory_temps.insert(ss.buffer);
    }
  for (auto& e : p.externs) {
    for (auto& o : e.inputs)
      if (o.kind == ExternOperand::Kind::Buffer) memory_temps.insert(o.buffer);
    for (int b : e.outputs) memory_temps.insert(b);
  }
  for (auto& b : p.buffers) {
    if (b.kind == BufferKind::Status) throw NotImplementedError("stax cuda printer: checked indexing is not supported yet");
    if (b.kind == BufferKind::Temp && !memory_temps.count(b.id)) continue;
    mtype(b.dtype);  // refuses narrow integer dtypes
    u.slot_buffer.push_back(b.id);
  }
  std::ostringstream os;
  os << "// Generated by Stax (CUDA printer): one kernel per kernel plan.\n" << kPrelude;
  for (const KernelPlan& k : s.kernels) {
    for (const LoopNest& n : k.nests)
      if (p.nodes[n.node].scan) throw NotImplementedError("stax cuda printer: scans (cumsum, cumprod) are not supported yet");
    for (const LoopNest& n : k.nests)
      if (p.nodes[n.node].has_pair_result())
        throw NotImplementedError("stax cuda printer: Welford and arg reductions are not supported yet");
    std::set<int> written;
    for (const LoopNest& n : k.nests) {
      if (n.store_to_memory || !p.nodes[n.node].is_reduction()) written.insert(p.nodes[n.node].out_buffer);
      for (auto& ss : n.side_stores) written.insert(ss.buffer);
    }
    CudaLaunch launch;
    const bool column = k.vectorize_outer && k.nests.size() == 1;
    const bool flat = !column && flat_form(p, k);
    // Dynamic shapes: the outer count and the items as expressions (constants
    // when static); the launch keeps them and the host evaluates them per call.
    const bool sym = k.symbolic;
    const IndexExpr outer_e = sym ? k.outer_count : IndexExpr(k.outer_extent);
    int64_t max_items = 1;
    IndexExpr max_items_e = 1;
    for (const LoopNest& n : k.nests) {
      NestItems it = nest_items(n);
      max_items = std::max({max_items, it.vec_items(), it.tail_items()});
      max_items_e = ir::max(max_items_e, ir::max(it.vec_items_e(), it.tail_items_e()));
    }
    const RangeMap& sr = k.size_ranges;
    max_items_e = simplify(max_items_e, sr);
    // 32-bit indices cover the plan's loops and indices over the declared
    // ranges; a flat kernel's grid-stride index runs to outer x items, which
    // that proof does not cover: 64-bit where it may pass 2^30.
    bool wide = false;
    if (sym && k.index_bits == 32) {
      IndexExpr total = 0;
      for (const LoopNest& n : k.nests) {
        NestItems it = nest_items(n);
        total = ir::max(total, outer_e * (it.vec_items_e() + it.tail_items_e()));
      }
      wide = range_of(simplify(total, sr), sr).hi > (int64_t{1} << 30);
    }
    launch.symbolic = sym;
    // Column sums of 16-bit data: two neighbouring outputs per thread, so a
    // thread still reads 4 bytes per row (as float32) and keeps as many bytes
    // in flight (one output per thread read 2 bytes: half the float32 rate).
    int col_lanes = 1;
    if (column) {
      launch.form = CudaForm::Column;
      // W neighbouring outputs per block row (a warp reads whole 32-byte
      // sectors down to W = 8 floats), fewer when the outputs are few, so
      // that the grid still fills the GPU; 1024 threads a block.
      // Symbolic outputs: W from the hint (any W is correct).
      const int W = knobs_.column_width > 0 ? knobs_.column_width
                    : k.outer_extent >= 8192 ? 32 : k.outer_extent >= 4096 ? 16 : 8;
      std::vector<const ExprNode*> pairs;
      const IndexExpr oc = simplify(outer_e, sr);
      if (is_half(p.nodes[k.nests[0].node].body->dtype) && oc.is_const() && oc.const_value() % 2 == 0 &&
          KernelWriter(p, k, os).column_pairs(k.nests[0], 2, pairs) && !pairs.empty())
        col_lanes = 2;
      launch.block_x = W / col_lanes;
      launch.column_width = W;
      launch.block_y = (knobs_.column_threads > 0 ? knobs_.column_threads : kCudaColumnThreads) / launch.block_x;
      launch.work = (k.outer_extent + W - 1) / W;
      launch.work_expr = floordiv(outer_e + (W - 1), IndexExpr(W));
    } else if (flat) {
      NestItems it = nest_items(k.nests[0]);
      launch.form = CudaForm::Flat;
      launch.block_x = knobs_.flat_block > 0 ? knobs_.flat_block : 256;
      launch.work = k.outer_extent * (it.vec_items() + it.tail_items());
      launch.work_expr = outer_e * (it.vec_items_e() + it.tail_items_e());
    } else {
      launch.form = CudaForm::Row;
      launch.block_x = knobs_.row_threads > 0      ? knobs_.row_threads
                       : k.outer_extent == 1 ? 1024
                                             : pow2_at_least(max_items, 32, 512);
      launch.work = k.outer_extent;
      launch.work_expr = outer_e;
      // Symbolic items per row: the block covers the call's items (as the
      // static choice covers the hint's).
      if (sym && knobs_.row_threads == 0 && k.outer_extent != 1 && !max_items_e.is_const()) {
        launch.block_max = 512;
        launch.items_expr = max_items_e;
      }
    }
    // One row whose first nest is its only reduction: split over blocks (split_reduction.h).
    // Symbolic items: split whenever the declared range reaches the split sizes
    // (the kernel reads gridDim.x, so any grid is right); the blocks follow the
    // call's items at launch.
    int split = 0;
    if (launch.form == CudaForm::Row && k.outer_extent == 1 && p.nodes[k.nests[0].node].is_reduction() &&
        simplify(outer_e, sr).is_const()) {
      int reductions = 0;
      for (const LoopNest& n : k.nests) reductions += p.nodes[n.node].is_reduction() ? 1 : 0;
      NestItems it = nest_items(k.nests[0]);
      const IndexExpr items_e = simplify(it.vec_items_e() + it.tail_items_e(), sr);
      const bool sym_items = sym && !items_e.is_const();
      if (reductions == 1) {
        split = split_reduction_blocks(it.vec_items() + it.tail_items());
        if (sym_items && split_reduction_blocks(std::min<int64_t>(range_of(items_e, sr).hi, int64_t{1} << 40)) > 0)
          split = std::max(split, 1);
      }
      if (split) {
        if (knobs_.split_blocks > 0) split = knobs_.split_blocks;
        launch.block_x = knobs_.split_threads > 0 ? knobs_.split_threads : kSplitThreads;
        launch.work = split;
        launch.block_max = 0;
        if (sym_items && knobs_.split_blocks == 0) {
          launch.split_auto = true;
          launch.split_items = items_e;
        }
      }
    }
    KernelWriter kw(p, k, os, wide);
    // A row whose nests share one vectorized inner dim keeps its read-only
    // inputs in registers (one read from memory per row, whatever the number
    // of nests): about four vector groups per thread.
    bool cached = false;
    // Symbolic row length: K groups a thread as at the hint, the block chosen
    // at launch to cover the row; a row longer than K x 512 groups takes the
    // plain row path (a run-time test in the kernel).
    bool cache_test = false;
    if (launch.form == CudaForm::Row && k.outer_extent > 1 && row_cacheable(p, k)) {
      NestItems it = nest_items(k.nests[0]);
      // A symbolic row is planned for at least 2048 groups (K = 4 at 512
      // threads: rows of 8192 floats stay in registers whatever the hint).
      const bool sym_groups = sym && !simplify(it.groups_e, sr).is_const();
      NestItems plan_it = it;
      if (sym_groups) plan_it.groups = std::max<int64_t>(it.groups, 4 * 512);
      const int block = knobs_.row_block > 0 ? knobs_.row_block : pow2_at_least((plan_it.groups + 3) / 4, 32, 512);  // <= 128 registers a thread
      if (kw.plan_cache(plan_it, block, 64)) {
        cached = true;
        launch.block_x = block;
        launch.register_rows = true;
        cu.tunable = true;
        if (sym_groups) {
          // The block at the hint, as the launch will choose it there.
          launch.block_x = pow2_at_least((it.groups + kw.cache_k() - 1) / kw.cache_k(), 32, 512);
          cache_test = true;
          launch.block_max = 512;
          launch.cache_k = kw.cache_k();
          launch.items_expr = simplify(it.groups_e, sr);
          kw.set_launch_block(true);
        } else {
          launch.block_max = 0;  // the row's groups are static: the static block
        }
      }
    }
    if (launch.block_max > 0) kw.set_launch_block(true);
    os << "\n// " << k.name << ": " << k.origin << "\n// outer space ";
    if (sym) {
      os << "[";
      for (size_t d = 0; d < k.outer_extents.size(); ++d) os << (d ? ", " : "") << k.outer_extents[d].to_string();
      os << "]";
    } else {
      os << shape_str(k.outer_ranges);
    }
    os << ", " << (column ? "column" : flat ? "flat" : "row") << " form\n";
    if (split) {
      const ComputeNode& rn = p.nodes[k.nests[0].node];
      const int acc_bytes = static_cast<int>(itemsize(acc_dtype(rn.reduce, rn.body->dtype)));
      launch.scratch_bytes =
          split_reduction_scratch_bytes(acc_bytes, launch.split_auto ? std::max(split, kSplitMaxBlocks) : split);
    }
    const int bounds = launch.block_max > 0 ? launch.block_max : launch.block_x * launch.block_y;
    os << "extern \"C\" __global__ void __launch_bounds__(" << bounds << ") " << k.name << "(";
    bool first_param = true;
    auto param = [&]() -> std::ostream& {
      if (!first_param) os << ", ";
      first_param = false;
      return os;
    };
    for (size_t i = 0; i < u.slot_buffer.size(); ++i) {
      const Buffer& b = p.buffers[u.slot_buffer[i]];
      param() << (written.count(b.id) ? "" : "const ") << mtype(b.dtype) << "* __restrict__ " << b.name;
    }
    // Every kernel of a symbolic program takes every size (one argument list for all).
    for (int z = 0; z < p.num_sizes; ++z) param() << "const i64 tp_arg_size" << z;
    if (split) param() << split_reduction_param();
    os << ") {\n";
    const std::string& ix = kw.ix();
    for (int z = 0; z < p.num_sizes; ++z)
      os << "  const " << ix << " tp_size" << z << " = (" << ix << ")tp_arg_size" << z << "; (void)tp_size" << z << ";\n";
    const std::string o = k.outer_var.var_name();
    const std::string outer_c = kw.cx(outer_e);
    if (column) {
      const LoopNest& n = k.nests[0];
      const ComputeNode& node = p.nodes[n.node];
      DType dt = node.body->dtype, at = acc_dtype(node.reduce, dt);
      IndexExpr rn_e = 1;
      for (size_t d = 0; d < n.inner_vars.size(); ++d) rn_e = rn_e * inner_extent(n, d);
      const std::string rn = kw.cx(rn_e);
      const int X = launch.block_x, Y = launch.block_y, L = col_lanes;
      if (L > 1) {
        // Lanes: thread x owns outputs L*x .. L*x+L-1 of its block; the block's
        // combine sums each output's Y partials in row order (deterministic).
        os << "  __shared__ " << ctype(at) << " tp_col[" << Y << "][" << X * L + 1 << "];\n";
        os << "  const " << ix << " " << o << " = ((" << ix << ")blockIdx.x * " << X << " + threadIdx.x) * " << L
           << ";\n";
        for (int q = 0; q < L; ++q) os << "  " << ctype(at) << " acc" << q << " = " << reduce_init(node.reduce, at) << ";\n";
        std::vector<const ExprNode*> pairs;
        kw.column_pairs(n, L, pairs);
        os << "  if (" << o << " < " << outer_c << ") {\n";
        kw.column_alignment(n, L, pairs, "tp_al", "    ");
        // Two copies of the loop, so that the aligned one has no branch per row
        // and its unrolled loads are all in flight together. Unrolled 4 deep (a
        // block has 256 rows of 64 bytes in flight): 8 deep measured slower on
        // the H200 (0.77 of the copy bandwidth against 0.81).
        for (bool vec : {true, false}) {
          os << (vec ? "    if (tp_al) {\n" : "    } else {\n");
          os << "      #pragma unroll 4\n";
          os << "      for (" << ix << " tp_g = threadIdx.y; tp_g < " << rn << "; tp_g += " << Y << ") {\n";
          kw.split_reduced_index(n, "        ");
          kw.column_item(n, L, pairs, vec, "acc", "        ");
          os << "      }\n";
        }
        os << "    }\n  }\n";
        for (int q = 0; q < L; ++q) os << "  tp_col[threadIdx.y][threadIdx.x * " << L << " + " << q << "] = acc" << q << ";\n";
        os << "  __syncthreads();\n";
        os << "  if (threadIdx.y < " << L << " && " << o << " < " << outer_c << ") {\n";
        os << "    const int tp_c = threadIdx.x * " << L << " + threadIdx.y;\n";
        os << "    " << ctype(at) << " acc = tp_col[0][tp_c];\n";
        os << "    for (int y = 1; y < " << Y << "; ++y) acc = " << c_combine(node.reduce, "acc", "tp_col[y][tp_c]") << ";\n";
        os << "    const " << ix << " " << o << "_q = " << o << " + threadIdx.y;\n";
        os << "    {\n      const " << ix << " " << o << " = " << o << "_q;\n";
        os << "      " << p.buffers[node.out_buffer].name << "[" << kw.outer_c(n.store_index) << "] = ("
           << ctype(p.buffers[node.out_buffer].dtype) << ")acc;\n    }\n  }\n";
        os << "}\n";
        u.kernel_names.push_back(k.name);
        cu.launches.push_back(launch);
        continue;
      }
      os << "  __shared__ " << ctype(at) << " tp_col[" << Y << "][" << X + 1 << "];\n";
      os << "  const " << ix << " " << o << " = (" << ix << ")blockIdx.x * " << X << " + threadIdx.x;\n";
      os << "  " << ctype(at) << " acc = " << reduce_init(node.reduce, at) << ";\n";
      os << "  if (" << o << " < " << outer_c << ") {\n";
      os << "    #pragma unroll 4\n";
      os << "    for (" << ix << " tp_g = threadIdx.y; tp_g < " << rn << "; tp_g += " << Y << ") {\n";
      kw.split_reduced_index(n, "      ");
      NestItems it;  // scalar items
      kw.item(n, it, false, "acc", "      ");
      os << "    }\n  }\n";
      os << "  tp_col[threadIdx.y][threadIdx.x] = acc;\n  __syncthreads();\n";
      os << "  if (threadIdx.y == 0 && " << o << " < " << outer_c << ") {\n";
      os << "    for (int y = 1; y < " << Y << "; ++y) acc = "
         << c_combine(node.reduce, "acc", "tp_col[y][threadIdx.x]") << ";\n";
      os << "    " << p.buffers[node.out_buffer].name << "[" << kw.outer_c(n.store_index) << "] = ("
         << ctype(p.buffers[node.out_buffer].dtype) << ")acc;\n  }\n";
    } else if (flat) {
      NestItems it = nest_items(k.nests[0]);
      auto loop = [&](bool vec) {
        const IndexExpr per_e = vec ? it.vec_items_e() : it.tail_items_e();
        if (kw.is_zero(per_e)) return;
        const std::string per = kw.cx(per_e);
        const std::string total = kw.cx(outer_e * per_e);
        if (sym) {
          // The grid-stride step split once into whole rows and a remainder:
          // (outer, item) advance without a run-time division per item.
          const std::string in = std::to_string(kw.next());
          // A zero count (a row shorter than one vector, a row without a
          // tail) skips the loop: its divisions would be by zero.
          os << "  if (" << per << " > 0) {\n    const " << ix << " tp_per" << in << " = " << per << ";\n";
          os << "    const " << ix << " tp_step" << in << " = (" << ix << ")gridDim.x * blockDim.x;\n";
          os << "    const " << ix << " tp_so" << in << " = tp_step" << in << " / tp_per" << in << ", tp_sg" << in
             << " = tp_step" << in << " % tp_per" << in << ";\n";
          os << "    const " << ix << " tp_e0" << in << " = (" << ix << ")blockIdx.x * blockDim.x + threadIdx.x;\n";
          os << "    " << ix << " tp_g = tp_e0" << in << " % tp_per" << in << ";\n";
          os << "    for (" << ix << " " << o << " = tp_e0" << in << " / tp_per" << in << "; " << o << " < " << outer_c
             << ";) {\n";
          for (const LoopNest& n : k.nests) {
            os << "      {\n";
            kw.decode(n, it, "tp_g", vec, "        ");
            kw.item(n, it, vec, "", "        ");
            os << "      }\n";
          }
          os << "      tp_g += tp_sg" << in << ";\n      " << o << " += tp_so" << in << ";\n";
          os << "      if (tp_g >= tp_per" << in << ") {\n        tp_g -= tp_per" << in << ";\n        ++" << o
             << ";\n      }\n    }\n  }\n";
          return;
        }
        os << "  for (" << ix << " tp_e = (" << ix << ")blockIdx.x * blockDim.x + threadIdx.x; tp_e < " << total
           << "; tp_e += (" << ix << ")gridDim.x * blockDim.x) {\n";
        os << "    const " << ix << " " << o << " = tp_e / " << per << ";\n";
        os << "    const " << ix << " tp_g = tp_e % " << per << ";\n";
        for (const LoopNest& n : k.nests) {
          os << "    {\n";
          kw.decode(n, it, "tp_g", vec, "      ");
          kw.item(n, it, vec, "", "      ");
          os << "    }\n";
        }
        os << "  }\n";
      };
      loop(true);
      loop(false);
    } else {
      std::set<int> shared_types;
      for (const LoopNest& n : k.nests) {
        const ComputeNode& node = p.nodes[n.node];
        if (node.is_reduction()) shared_types.insert(static_cast<int>(acc_dtype(node.reduce, node.body->dtype)));
      }
      for (int t : shared_types) {
        DType d = static_cast<DType>(t);
        os << "  __shared__ " << ctype(d) << " tp_sh_" << ctype(d) << "[32];\n";
      }
      // The rows: with the register cache (use_cache) or without.
      auto rows = [&](bool use_cache, const std::string& in0) {
        kw.set_use_cache(use_cache);
        const std::string in1 = in0 + "  ";
        // Split: every block walks the single row (its reduction items are shared out below).
        os << in0 << "for (" << ix << " " << o << " = " << (split ? "0" : "blockIdx.x") << "; " << o << " < " << outer_c
           << "; " << o << (split ? "++" : " += gridDim.x") << ") {\n";
        if (use_cache) kw.emit_cache_loads(nest_items(k.nests[0]), launch.block_x, in1);
        for (size_t ni = 0; ni < k.nests.size(); ++ni) {
          const LoopNest& n = k.nests[ni];
          const ComputeNode& node = p.nodes[n.node];
          const bool red = node.is_reduction();
          NestItems it = nest_items(n);
          DType dt = node.body->dtype, at = acc_dtype(node.reduce, dt);
          const std::string acc = "tp_acc" + std::to_string(n.node);
          std::string over = shape_str(n.inner_ranges);
          if (sym) {
            over = "[";
            for (size_t d = 0; d < n.inner_vars.size(); ++d) over += (d ? ", " : "") + inner_extent(n, d).to_string();
            over += "]";
          }
          os << in1 << "// node " << n.node << ": " << node.origin << " -> " << p.buffers[node.out_buffer].name
             << (red ? std::string(" (") + reduce_op_name(node.reduce) + " over " + over + ")" : "")
             << (it.lanes > 1 ? ", " + std::to_string(it.lanes) + " lanes" : "") << "\n";
          if (red) os << in1 << ctype(at) << " " << acc << " = " << reduce_init(node.reduce, at) << ";\n";
          for (bool vec : {true, false}) {
            const IndexExpr per_e = vec ? it.vec_items_e() : it.tail_items_e();
            if (kw.is_zero(per_e)) continue;
            const std::string per = kw.cx(per_e);
            if (vec && use_cache) {  // the K groups of this thread, as the cache holds them
              os << in1 << "#pragma unroll\n" << in1 << "for (int tp_kk = 0; tp_kk < " << kw.cache_k() << "; ++tp_kk) {\n";
              os << in1 << "  const " << ix << " tp_g = threadIdx.x + tp_kk * " << kw.block_str(launch.block_x) << ";\n";
              os << in1 << "  if (tp_g < " << per << ") {\n";
              kw.decode(n, it, "tp_g", true, in1 + "    ");
              kw.item(n, it, true, acc, in1 + "    ");
              os << in1 << "  }\n" << in1 << "}\n";
              continue;
            }
            if (vec) os << in1 << "#pragma unroll 4\n";
            const bool grid = split && red;  // the split reduction: a grid-stride loop over its items
            os << in1 << "for (" << ix << " tp_g = "
               << (grid ? "(" + ix + ")blockIdx.x * blockDim.x + threadIdx.x" : "threadIdx.x") << "; tp_g < " << per
               << "; tp_g += " << (grid ? "(" + ix + ")gridDim.x * blockDim.x" : "blockDim.x") << ") {\n";
            kw.decode(n, it, "tp_g", vec, in1 + "  ");
            kw.item(n, it, vec, acc, in1 + "  ");
            os << in1 << "}\n";
          }
          if (red) {
            const std::string r = "red" + std::to_string(n.node);
            os << in1 << acc << " = tp_block_reduce(" << acc << ", " << functor(node.reduce) << ", tp_sh_" << ctype(at)
               << ");\n";
            if (split)
              os << split_reduction_combine(acc, ctype(at), reduce_init(node.reduce, at), functor(node.reduce),
                                            std::string("tp_sh_") + ctype(at), in1);
            os << in1 << "const " << ctype(dt) << " " << r << " = (" << ctype(dt) << ")" << acc << ";\n";
            kw.locals()[node.out_buffer] = r;
            if (n.store_to_memory)
              os << in1 << "if (threadIdx.x == 0) " << p.buffers[node.out_buffer].name << "["
                 << kw.outer_c(n.store_index) << "] = " << r << ";\n";
          }
          const bool wrote = (!red) || !n.side_stores.empty();
          if (wrote && ni + 1 < k.nests.size()) os << in1 << "__syncthreads();\n";
        }
        // The next row's first reduction reuses the shared scratch: the block-wide
        // combine ends with a barrier, so nothing more is needed here.
        os << in0 << "}\n";
      };
      if (cache_test) {
        // The block was chosen at launch to hold the row in K groups a thread;
        // a row too long for 512 threads runs without the cache.
        os << "  if (" << kw.cx(nest_items(k.nests[0]).groups_e) << " <= " << kw.cache_k() << " * (" << ix
           << ")blockDim.x) {\n";
        rows(true, "    ");
        os << "  } else {\n";
        rows(false, "    ");
        os << "  }\n";
      } else {
        rows(cached, "  ");
      }
    }
    os << "}\n";
    u.kernel_names.push_back(k.name);
    cu.launches.push_back(launch);
  }
  u.kernel_count = static_cast<int>(u.kernel_names.size());
  u.source = os.str();
  return cu;
}

}  // namespace tp::stax::codegen
