// The other binary pointwise operators (floor_divide, remainder, fmod, pow,
// atan2, hypot, logical and bitwise operators, shifts) and the ternary ones
// (addcmul, addcdiv, lerp, clamp). Python numbers arrive as wrapped 0-d
// tensors, so `pow(x, 2)`, `pow(2, x)` and `clamp(x, 0, 1)` are all one
// operator each; a bound or exponent that is one number for every element
// takes a fast path.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/api_math.h"
#include "ops/derivative_util.h"
#include "ops/dispatch.h"
#include "ops/families.h"
#include "ops/vec/pointwise_common.h"

namespace tp {
namespace {

using vec::BinaryFn;
using ops::grad_out;
using ops::reduce_grad;
using ops::scalar;

enum class Op {
  FloorDivide, Remainder, Fmod, Pow, Atan2, Hypot,
  LogicalAnd, LogicalOr, LogicalXor, BitAnd, BitOr, BitXor, Shl, Shr,
};

constexpr bool is_logical(Op k) { return k == Op::LogicalAnd || k == Op::LogicalOr || k == Op::LogicalXor; }
constexpr bool is_bitwise(Op k) { return k >= Op::BitAnd; }
constexpr bool is_float_valued(Op k) { return k == Op::Atan2 || k == Op::Hypot; }

// A 0-d operand (wrapped number or 0-d tensor) as a double, for fast paths.
std::optional<double> scalar_value(const Tensor& t) {
  if (!t.defined() || t.dim() != 0) return std::nullopt;
  double v = 0;
  TP_DISPATCH_ALL(t.dtype(), "scalar_value", ([&]<class T>() { v = static_cast<double>(*t.data_as<T>()); }));
  return v;
}

// ---------------------------------------------------------------------------
// Binary inference and kernels.
template <Op K>
std::vector<TensorMeta> binary_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  Shape shape = broadcast_shapes(in[0].sizes, in[1].sizes, op.name);
  const DType ct = result_type(in);
  DType out = ct;
  if constexpr (is_logical(K)) {
    out = DType::Bool;
  } else if constexpr (is_bitwise(K)) {
    if (is_floating(ct)) pw::throw_dtype(op.name, in, "bitwise operations need integer or bool tensors");
    if ((K == Op::Shl || K == Op::Shr) && ct == DType::Bool)
      pw::throw_dtype(op.name, in, "shifts need integer tensors");
  } else if constexpr (is_float_valued(K)) {
    out = pw::float_result(ct);
  } else if constexpr (K == Op::Pow) {
    // PyTorch has no bool pow kernel: a bool tensor to a bool Python number stays bool (its x**0
    // and x**1 shortcuts); bool ** bool tensors and a bool number to a bool tensor are refused.
    if (ct == DType::Bool && !(in[1].wrapped_number && !in[0].wrapped_number))
      throw NotImplementedError(str(op.name, ": not implemented for bool base and exponent (got shapes ",
                                    shape_str(in[0].sizes), " and ", shape_str(in[1].sizes),
                                    "); convert one of them to an integer or floating dtype"));
  } else {
    if (ct == DType::Bool) pw::throw_dtype(op.name, in, "not supported for bool tensors");
  }
  return {TensorMeta::contiguous(std::move(shape), out)};
}

int64_t int_pow(int64_t base, int64_t e) {
  if (e < 0) return base == 1 ? 1 : base == -1 ? (e % 2 == 0 ? 1 : -1) : 0;
  uint64_t r = 1, b = static_cast<uint64_t>(base);
  while (e) {
    if (e & 1) r *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<int64_t>(r);
}

// Shifts by the bit width or more (or negative amounts) fill with the sign / zeros.
int64_t shl(int64_t a, int64_t b) { return b < 0 || b >= 64 ? 0 : static_cast<int64_t>(static_cast<uint64_t>(a) << b); }
int64_t shr(int64_t a, int64_t b) { return b < 0 || b >= 64 ? (a < 0 ? -1 : 0) : a >> b; }

template <Op K>
void int_into(const char* name, const Tensor& out, const Tensor& a, const Tensor& b) {
  std::atomic<bool> zero{false};
  auto* z = &zero;
  pw::binary_loop<int64_t, int64_t>(out, a, b, [z](int64_t x, int64_t y) -> int64_t {
    if constexpr (K == Op::FloorDivide || K == Op::Remainder || K == Op::Fmod) {
      if (y == 0) {
        z->store(true, std::memory_order_relaxed);
        return 0;
      }
      if (y == -1) return K == Op::FloorDivide ? pw::wrap_sub(0, x) : 0;  // INT64_MIN / -1 wraps
      const int64_t q = x / y, r = x % y;
      const bool adjust = r != 0 && ((r < 0) != (y < 0));
      if constexpr (K == Op::FloorDivide) return adjust ? q - 1 : q;
      else if constexpr (K == Op::Remainder) return adjust ? r + y : r;
      else return r;
    } else if constexpr (K == Op::Pow) {
      return int_pow(x, y);
    } else if constexpr (K == Op::BitAnd) {
      return x & y;
    } else if constexpr (K == Op::BitOr) {
      return x | y;
    } else if constexpr (K == Op::BitXor) {
      return x ^ y;
    } else if constexpr (K == Op::Shl) {
      return shl(x, y);
    } else {
      return shr(x, y);
    }
  });
  if (zero.load()) pw::throw_zero_division(name);
}

BinaryFn float_fn(Op k) {
  switch (k) {
    case Op::FloorDivide: return BinaryFn::DivFloor;
    case Op::Remainder: return BinaryFn::Remainder;
    case Op::Fmod: return BinaryFn::Fmod;
    case Op::Pow: return BinaryFn::Pow;
    case Op::Atan2: return BinaryFn::Atan2;
    default: return BinaryFn::Hypot;
  }
}

// pow(x, c) for the exponents with an exact cheaper form (PyTorch takes the same shortcuts).
template <class T>
bool pow_shortcut(const Tensor& out, const Tensor& x, double e) {
  vec::UnaryFn f;
  if (e == 2.0) f = vec::UnaryFn::Square;
  else if (e == 0.5) f = vec::UnaryFn::Sqrt;
  else if (e == -0.5) f = vec::UnaryFn::Rsqrt;
  else if (e == -1.0) f = vec::UnaryFn::Reciprocal;
  else return false;
  pw::run_unary_float<T>(f, out, x, {});
  return true;
}

template <Op K>
void binary_into(const OpDef& op, const Tensor& out, const std::vector<Tensor>& in, const Attrs& attrs) {
  const DType ct = is_logical(K) ? result_type(in) : out.dtype();
  const Tensor a = convert(in[0], ct), b = convert(in[1], ct);
  if constexpr (K == Op::FloorDivide) {
    if (ct == DType::Float32 && attrs.has(kNarrowDTypeAttr) && pw::rounds_narrow(in)) {
      pw::div_round_narrow(out, a, b, true, attrs.get<DType>(kNarrowDTypeAttr));
      return;
    }
  }
  if constexpr (is_logical(K)) {
    TP_DISPATCH_ALL(ct, op.name, ([&]<class T>() {
      pw::binary_loop<bool, T>(out, a, b, [](T x, T y) -> bool {
        const bool p = x != T(0), q = y != T(0);
        if constexpr (K == Op::LogicalAnd) return p && q;
        else if constexpr (K == Op::LogicalOr) return p || q;
        else return p != q;
      });
    }));
  } else if (is_floating(ct)) {
    TP_DISPATCH_FLOATING(ct, op.name, ([&]<class T>() {
      if constexpr (K == Op::Pow) {
        auto e = scalar_value(in[1]);
        if (e && pow_shortcut<T>(out, a, *e)) return;
      }
      pw::run_binary_float<T>(float_fn(K), out, a, b, {});
    }));
  } else if (K == Op::Pow && ct == DType::Bool) {  // bool tensor ** bool number: x**0 is all true, x**1 is x
    const bool e = scalar_value(in[1]).value_or(1.0) != 0.0;
    pw::binary_loop<bool, bool>(out, a, b, [e](bool x, bool) -> bool { return e ? x : true; });
  } else if (ct == DType::Bool) {  // bitwise on bool
    pw::binary_loop<bool, bool>(out, a, b, [](bool x, bool y) -> bool {
      if constexpr (K == Op::BitAnd) return x && y;
      else if constexpr (K == Op::BitOr) return x || y;
      else return x != y;
    });
  } else {
    if constexpr (K == Op::Pow) {
      // Only a Python-number exponent is refused, as in PyTorch; a tensor exponent (0-d included)
      // gives int_pow's values (0 unless the base is 1 or -1).
      auto e = in[1].is_wrapped_number() ? scalar_value(in[1]) : std::nullopt;
      TP_CHECK(!(e && *e < 0), ValueError, op.name, ": integers to negative integer powers are not allowed (base dtype ",
               dtype_name(in[0].dtype()), ", exponent ", *e, ")");
    }
    int_into<K>(op.name, out, a, b);
  }
}

// ---------------------------------------------------------------------------
// Ternary operators: addcmul, addcdiv, lerp, clamp.
template <class T, class F>
void ternary_loop(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, F f) {
  TensorIterator it({out, a, b, c});
  it.for_each([f](char** d, const int64_t* s, int64_t n) {
    constexpr int64_t z = sizeof(T);
    if (s[0] == z && s[1] == z && s[2] == z && s[3] == z) {
      T* o = reinterpret_cast<T*>(d[0]);
      const T* x = reinterpret_cast<const T*>(d[1]);
      const T* y = reinterpret_cast<const T*>(d[2]);
      const T* w = reinterpret_cast<const T*>(d[3]);
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i], w[i]);
      return;
    }
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<T*>(d[0] + i * s[0]) = f(*reinterpret_cast<const T*>(d[1] + i * s[1]),
                                                 *reinterpret_cast<const T*>(d[2] + i * s[2]),
                                                 *reinterpret_cast<const T*>(d[3] + i * s[3]));
  });
}

enum class Tern { Addcmul, Addcdiv, Lerp };

template <Tern K>
std::vector<TensorMeta> tern_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& at) {
  Shape shape = pw::broadcast_all(in, op.name);
  // lerp does not promote between its two ends (PyTorch's rule): an EMA buffer
  // lerp_'d towards a tensor of another dtype is a bug in the caller (Adam's
  // state after `p.data = p.data.double()`), not a conversion to make silently.
  if (K == Tern::Lerp && !in[1].wrapped_number && in[1].dtype != in[0].dtype)
    throw Error(str(op.name, ": expected dtype ", dtype_name(in[0].dtype), " for `end` but got dtype ",
                    dtype_name(in[1].dtype), " (lerp does not promote between self and end)"));
  const DType ct = result_type(in);
  if (K != Tern::Addcmul && !is_floating(ct))
    pw::throw_dtype(op.name, in, K == Tern::Addcdiv ? "integer division is not supported, use floating-point tensors"
                                                     : "expected floating-point tensors");
  if (K != Tern::Lerp && !is_floating(ct) && !at.is_none("value") && at.get_scalar("value").is_float())
    pw::throw_dtype(op.name, in, "for integer tensors, value must not be a floating point number");
  if (ct == DType::Bool) pw::throw_dtype(op.name, in, "not supported for bool tensors");
  return {TensorMeta::contiguous(std::move(shape), ct)};
}

template <Tern K>
void tern_into(const OpDef& op, const Tensor& out, const std::vector<Tensor>& in, const Attrs& at) {
  const DType ct = out.dtype();
  const Tensor a = convert(in[0], ct), b = convert(in[1], ct), c = convert(in[2], ct);
  const Scalar value = at.is_none("value") ? Scalar(int64_t{1}) : at.get_scalar("value");
  TP_DISPATCH_NUMERIC(ct, op.name, ([&]<class T>() {
    const T v = value.to<T>();
    if constexpr (K == Tern::Addcmul) {
      if constexpr (std::is_integral_v<T>)
        ternary_loop<T>(out, a, b, c, [v](T x, T y, T w) { return pw::wrap_add(x, pw::wrap_mul(v, pw::wrap_mul(y, w))); });
      else ternary_loop<T>(out, a, b, c, [v](T x, T y, T w) { return x + v * y * w; });
    } else if constexpr (K == Tern::Addcdiv) {
      ternary_loop<T>(out, a, b, c, [v](T x, T y, T w) { return x + v * (y / w); });
    } else {  // lerp: the form that is exact at weight 0 and at weight 1
      ternary_loop<T>(out, a, b, c, [](T x, T y, T w) {
        const T d = y - x;
        return std::abs(w) < T(0.5) ? x + w * d : y - d * (T(1) - w);
      });
    }
  }));
}

// clamp(self, min?, max?), clamp_min(self, min), clamp_max(self, max): inputs
// are self plus up to two bounds; absent bounds are undefined tensors.
enum class Clamp { Both, Min, Max };

template <Clamp K>
std::vector<TensorMeta> clamp_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  if (K == Clamp::Both)
    TP_CHECK(in[1].defined || in[2].defined, ValueError, op.name, ": at least one of 'min' or 'max' must not be None");
  std::vector<TensorMeta> defined;
  for (const auto& m : in)
    if (m.defined) defined.push_back(m);
  Shape shape = pw::broadcast_all(in, op.name);
  const DType ct = result_type(defined);
  if (ct == DType::Bool) pw::throw_dtype(op.name, in, "not supported for bool tensors");
  return {TensorMeta::contiguous(std::move(shape), ct)};
}

template <class T>
T clamp_one(T x, T lo, T hi) {  // NaN in x or in a bound propagates; lo > hi gives hi
  if constexpr (std::is_floating_point_v<T>) {
    const T l = (x > lo || x != x) ? x : lo;
    return (l < hi || l != l) ? l : hi;
  } else {
    const T l = x < lo ? lo : x;
    return l > hi ? hi : l;
  }
}

template <Clamp K>
void clamp_into(const OpDef& op, const Tensor& out, const std::vector<Tensor>& in, const Attrs& attrs) {
  const DType ct = out.dtype();
  const Tensor x = convert(in[0], ct);
  Tensor lo = K == Clamp::Max ? Tensor() : in[1];
  Tensor hi = K == Clamp::Min ? Tensor() : K == Clamp::Max ? in[1] : in[2];
  if (attrs.has(kNarrowDTypeAttr)) {
    // A narrow integer result (computed in int64): PyTorch converts each bound to that type first, so a
    // Python number must fit it (unsigned types also take -max .. -1) and then wraps (uint8: -20 -> 236).
    const DType narrow = attrs.get<DType>(kNarrowDTypeAttr);
    if (is_integral(narrow, false))
      for (Tensor* b : {&lo, &hi})
        if (b->defined() && !is_floating(b->dtype())) {
          if (b->is_wrapped_number()) check_scalar_fits(b->item(), narrow, op.name);
          *b = convert(convert(*b, narrow), ct);
        }
  }
  TP_DISPATCH_NUMERIC(ct, op.name, ([&]<class T>() {
    const T lowest = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                          : std::numeric_limits<T>::lowest();
    const T highest = std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                            : std::numeric_limits<T>::max();
    auto lv = lo.defined() ? scalar_value(lo) : std::optional<double>(0.0);
    auto hv = hi.defined() ? scalar_value(hi) : std::optional<double>(0.0);
    if (lv && hv) {  // one number per bound: a unary loop
      const T l = lo.defined() ? static_cast<T>(*lv) : lowest, h = hi.defined() ? static_cast<T>(*hv) : highest;
      if constexpr (std::is_floating_point_v<T>) {
        if (l == l && h == h) {  // NaN bounds take the general path
          vec::Params p;
          p.a = l;
          p.b = h;
          pw::run_unary_float<T>(vec::UnaryFn::Hardtanh, out, x, p);
          return;
        }
      } else {
        pw::unary_loop<T, T>(out, x, [l, h](T v) { return clamp_one(v, l, h); });
        return;
      }
    }
    Tensor l = lo.defined() ? convert(lo, ct) : Tensor::scalar_tensor(Scalar(static_cast<double>(lowest)), ct);
    Tensor h = hi.defined() ? convert(hi, ct) : Tensor::scalar_tensor(Scalar(static_cast<double>(highest)), ct);
    if constexpr (std::is_integral_v<T>) {
      if (!lo.defined()) l = Tensor::scalar_tensor(Scalar(static_cast<int64_t>(lowest)), ct);
      if (!hi.defined()) h = Tensor::scalar_tensor(Scalar(static_cast<int64_t>(highest)), ct);
    }
    ternary_loop<T>(out, x, l, h, [](T v, T a, T b) { return clamp_one(v, a, b); });
  }));
}

// ---------------------------------------------------------------------------
// Derivative formulas.
// Zeros of t's shape on g's device (t may be a metadata placeholder).
Tensor zeros_for(const Tensor& g, const Tensor& t) { return ops::full_on(g, t.sizes(), Scalar(int64_t{0}), t.dtype()); }

std::vector<Tensor> zero_backward2(const BackwardArgs& a) {  // floor_divide: piecewise constant
  const Tensor& g = ops::grad_out(a);
  if (!g.defined()) return {Tensor(), Tensor()};
  return {a.needs_grad[0] ? zeros_for(g, a.inputs[0]) : Tensor(), a.needs_grad[1] ? zeros_for(g, a.inputs[1]) : Tensor()};
}

// remainder / fmod: d/dx = 1, d/dy = -(quotient rounded the op's way).
template <bool Floor>
std::vector<Tensor> mod_backward(const BackwardArgs& a) {
  const Tensor& g = grad_out(a);
  if (!g.defined()) return {Tensor(), Tensor()};
  const Tensor &x = a.inputs[0], &y = a.inputs[1];
  Tensor gy;
  if (a.needs_grad[1]) {
    Tensor q = ops::div(x, y, std::optional<std::string>(Floor ? "floor" : "trunc"));
    gy = reduce_grad(ops::neg(ops::mul(g, q)), y);
  }
  return {a.needs_grad[0] ? reduce_grad(g, x) : Tensor(), gy};
}

std::vector<Tensor> pow_backward(const BackwardArgs& a) {
  const Tensor& g = grad_out(a);
  if (!g.defined()) return {Tensor(), Tensor()};
  const Tensor &x = a.inputs[0], &e = a.inputs[1], &out = a.outputs[0];
  Tensor gx, ge;
  if (a.needs_grad[0]) {  // e * x^(e-1); 0 where e == 0 (also at x == 0)
    Tensor d = ops::mul(e, ops::pow(x, ops::sub(e, scalar(1.0))));
    gx = reduce_grad(ops::mul(g, ops::where(ops::eq(e, scalar(0.0)), scalar(0.0), d)), x);
  }
  if (a.needs_grad[1]) {  // x^e * log(x); 0 where x == 0 and e >= 0
    Tensor d = ops::mul(out, ops::log(x));
    Tensor mask = ops::logical_and(ops::eq(x, scalar(0.0)), ops::ge(e, scalar(0.0)));
    ge = reduce_grad(ops::mul(g, ops::where(mask, scalar(0.0), d)), e);
  }
  return {gx, ge};
}

std::vector<Tensor> atan2_backward(const BackwardArgs& a) {
  const Tensor& g = grad_out(a);
  if (!g.defined()) return {Tensor(), Tensor()};
  const Tensor &y = a.inputs[0], &x = a.inputs[1];
  // 1 / (x^2 + y^2), taken as 0 at the origin (PyTorch's gradient there is 0,
  // not the NaN of 0 * inf: atan2 of a zero vector in an angle loss would
  // otherwise poison every gradient).
  Tensor r2 = ops::add(ops::mul(x, x), ops::mul(y, y));
  Tensor origin = ops::eq(r2, ops::scalar(0.0));
  Tensor inv = ops::where(origin, ops::scalar(0.0), ops::reciprocal(ops::where(origin, ops::scalar(1.0), r2)));
  return {a.needs_grad[0] ? reduce_grad(ops::mul(ops::mul(g, x), inv), y) : Tensor(),
          a.needs_grad[1] ? reduce_grad(ops::neg(ops::mul(ops::mul(g, y), inv)), x) : Tensor()};
}

std::vector<Tensor> hypot_backward(const BackwardArgs& a) {
  const Tensor& g = grad_out(a);
  if (!g.defined()) return {Tensor(), Tensor()};
  const Tensor &x = a.inputs[0], &y = a.inputs[1], &out = a.outputs[0];
  Tensor go = ops::div(g, out);
  return {a.needs_grad[0] ? reduce_grad(ops::mul(go, x), x) : Tensor(),
          a.needs_grad[1] ? reduce_grad(ops::mul(go, y), y) : Tensor()};
}

Scalar value_of(const Attrs& at) { return at.is_none("value") ? Scalar(int64_t{1}) : at.get_scalar("value"); }

// 16-bit operands: derivative formulas run in float32 and reduce_grad rounds once.
Tensor wide(const Tensor& t) {
  return t.defined() && (t.dtype() == DType::Float16 || t.dtype() == DType::BFloat16) ? ops::to_dtype(t, DType::Float32)
                                                                                       : t;
}

std::vector<Tensor> addcmul_backward(const BackwardArgs& a) {
  const Tensor& g = grad_out(a);
  if (!g.defined()) return {Tensor(), Tensor(), Tensor()};
  Tensor gv = ops::mul(wide(g), scalar(value_of(a.attrs)));
  return {a.needs_grad[0] ? reduce_grad(g, a.inputs[0]) : Tensor(),
          a.needs_grad[1] ? reduce_grad(ops::mul(gv, wide(a.inputs[2])), a.inputs[1]) : Tensor(),
          a.needs_grad[2] ? reduce_grad(ops::mul(gv, wide(a.inputs[1])), a.inputs[2]) : Tensor()};
}

std::vector<Tensor> addcdiv_backward(const BackwardArgs& a) {
  const Tensor& g = grad_out(a);
  if (!g.defined()) return {Tensor(), Tensor(), Tensor()};
  const Tensor t1 = wide(a.inputs[1]), t2 = wide(a.inputs[2]);
  Tensor gv = ops::mul(wide(g), scalar(value_of(a.attrs)));
  return {a.needs_grad[0] ? reduce_grad(g, a.inputs[0]) : Tensor(),
          a.needs_grad[1] ? reduce_grad(ops::div(gv, t2), a.inputs[1]) : Tensor(),
          a.needs_grad[2] ? reduce_grad(ops::neg(ops::div(ops::mul(gv, t1), ops::mul(t2, t2))), a.inputs[2]) : Tensor()};
}

std::vector<Tensor> lerp_backward(const BackwardArgs& a) {
  const Tensor& g = grad_out(a);
  if (!g.defined()) return {Tensor(), Tensor(), Tensor()};
  const Tensor &s = a.inputs[0], &e = a.inputs[1], &w = a.inputs[2];
  return {a.needs_grad[0] ? reduce_grad(ops::mul(g, ops::sub(scalar(1.0), w)), s) : Tensor(),
          a.needs_grad[1] ? reduce_grad(ops::mul(g, w), e) : Tensor(),
          a.needs_grad[2] ? reduce_grad(ops::mul(g, ops::sub(e, s)), w) : Tensor()};
}

// clamp: the gradient passes where the input is strictly inside the bounds
// (PyTorch also passes it at the bounds themselves); a bound gets it where it won.
template <Clamp K>
std::vector<Tensor> clamp_backward(const BackwardArgs& a) {
  const int n = static_cast<int>(a.inputs.size());
  const Tensor& g = grad_out(a);
  std::vector<Tensor> r(n);
  if (!g.defined()) return r;
  const Tensor& x = a.inputs[0];
  Tensor lo = K == Clamp::Max ? Tensor() : a.inputs[1];
  Tensor hi = K == Clamp::Min ? Tensor() : K == Clamp::Max ? a.inputs[1] : a.inputs[2];
  Tensor below = lo.defined() ? ops::lt(x, lo) : Tensor();
  Tensor above = hi.defined() ? ops::gt(x, hi) : Tensor();
  Tensor keep = below.defined() ? ops::logical_not(below) : Tensor();
  if (above.defined()) keep = keep.defined() ? ops::logical_and(keep, ops::logical_not(above)) : ops::logical_not(above);
  if (a.needs_grad[0]) r[0] = reduce_grad(ops::where(keep, g, scalar(0.0)), x);
  const int ilo = K == Clamp::Max ? -1 : 1, ihi = K == Clamp::Min ? -1 : K == Clamp::Max ? 1 : 2;
  if (ilo > 0 && a.needs_grad[ilo] && lo.defined()) {
    Tensor won = below;
    if (above.defined()) won = ops::logical_and(won, ops::le(lo, hi));
    r[ilo] = reduce_grad(ops::where(won, g, scalar(0.0)), lo);
  }
  if (ihi > 0 && a.needs_grad[ihi] && hi.defined()) {
    Tensor won = above;
    if (lo.defined()) won = ops::logical_or(won, ops::gt(lo, hi));
    r[ihi] = reduce_grad(ops::where(won, g, scalar(0.0)), hi);
  }
  return r;
}

// ---------------------------------------------------------------------------
// Decompositions for the Stax backend (operators it lowers). Like the kernels,
// they first convert every operand, Python numbers included, to the common
// dtype (so `1 - weight` is rounded in that dtype) and then follow the
// kernel's formula in the same order.
using Outs = std::vector<Tensor>;

std::vector<Tensor> to_common(const std::vector<Tensor>& in) {
  std::vector<Tensor> defined;
  for (auto& t : in)
    if (t.defined()) defined.push_back(t);
  const DType ct = result_type(defined);
  std::vector<Tensor> r;
  for (auto& t : in) {
    Tensor c = t.defined() ? ops::to_dtype(t, ct) : t;
    r.push_back(c.defined() && c.is_wrapped_number() ? ops::clone(c) : c);  // a plain 0-d tensor of ct
  }
  return r;
}

Outs dec_addcmul(const std::vector<Tensor>& in, const Attrs& at) {  // self + value * t1 * t2
  auto x = to_common(in);
  const Scalar v = value_of(at);
  Tensor prod = v.to<double>() == 1.0 ? x[1] : ops::mul(x[1], scalar(v));
  return {ops::add(x[0], ops::mul(prod, x[2]))};
}
Outs dec_addcdiv(const std::vector<Tensor>& in, const Attrs& at) {  // self + value * (t1 / t2)
  auto x = to_common(in);
  const Scalar v = value_of(at);
  Tensor q = ops::div(x[1], x[2]);
  return {ops::add(x[0], v.to<double>() == 1.0 ? q : ops::mul(q, scalar(v)))};
}
// The kernel's form, exact at weight 0 and at weight 1.
Outs dec_lerp(const std::vector<Tensor>& in, const Attrs&) {
  auto x = to_common(in);
  const Tensor &s = x[0], &e = x[1], &w = x[2];
  Tensor d = ops::sub(e, s);
  Tensor near_start = ops::add(s, ops::mul(w, d));
  Tensor near_end = ops::sub(e, ops::mul(d, ops::sub(scalar(1.0), w)));
  return {ops::where(ops::lt(ops::abs(w), scalar(0.5)), near_start, near_end)};
}
// pow by a Python number with one of the kernel's exact shortcuts (x*x, sqrt,
// 1/sqrt, 1/x); any other exponent or a tensor exponent stays pow (the call to
// itself tells the pass so), since exp(e*log(x)) would not match the kernel.
Outs dec_pow(const std::vector<Tensor>& in, const Attrs&) {
  const Tensor &x = in[0], &e = in[1];
  const DType ct = result_type(in);
  if (e.is_wrapped_number() && !x.is_wrapped_number()) {
    const double v = e.item().to<double>();
    const Tensor b = ops::to_dtype(x, ct == DType::Bool ? DType::Int64 : ct);
    if (v == 2.0) return {ops::mul(b, b)};
    if (is_floating(ct)) {
      if (v == 0.5) return {ops::sqrt(b)};
      if (v == -0.5) return {ops::div(scalar(1.0), ops::sqrt(b))};
      if (v == -1.0) return {ops::div(scalar(1.0), b)};
    }
  }
  return {ops::pow(x, e)};
}

// NaN in the input or in a bound propagates and lo > hi gives hi: exactly
// minimum(maximum(x, lo), hi) with the NaN-propagating maximum/minimum.
template <Clamp K>
Outs dec_clamp(const std::vector<Tensor>& in, const Attrs&) {
  auto x = to_common(in);
  Tensor lo = K == Clamp::Max ? Tensor() : x[1];
  Tensor hi = K == Clamp::Min ? Tensor() : K == Clamp::Max ? x[1] : x[2];
  Tensor r = x[0];
  if (lo.defined()) r = ops::maximum(r, lo);
  if (hi.defined()) r = ops::minimum(r, hi);
  return {r};
}

// ---------------------------------------------------------------------------
const char* inplace_schema_of(const char* iname, const char* schema) {
  std::string is = schema;
  is.replace(0, is.find('('), iname);
  is.replace(is.find("Tensor self"), 11, "Tensor(a!) self");
  is.replace(is.rfind("-> Tensor"), 9, "-> Tensor(a!)");
  return intern_attr_name(is);
}

template <pw::IntoFn Into, InferFn Infer>
void reg(const char* name, const char* schema, int n, BackwardFn bw, bool inplace, DecomposeFn dec = nullptr) {
  const char* iname = inplace ? intern_attr_name(std::string(name) + "_") : nullptr;
  pw::register_pointwise<Into, Infer>(name, schema, n, bw, iname, inplace ? inplace_schema_of(iname, schema) : nullptr,
                                      0, dec);
}

template <Op K>
void reg2(const char* name, BackwardFn bw, bool inplace = true) {
  std::string s = std::string(name) + "(Tensor self, Tensor other) -> Tensor";
  if (K == Op::Pow) s = "pow(Tensor self, Tensor exponent) -> Tensor";
  reg<&binary_into<K>, &binary_infer<K>>(name, intern_attr_name(s), 2, bw, inplace, K == Op::Pow ? &dec_pow : nullptr);
}

}  // namespace

void register_binary_math_ops() {
  reg2<Op::FloorDivide>("floor_divide", &zero_backward2);
  reg2<Op::Remainder>("remainder", &mod_backward<true>);
  reg2<Op::Fmod>("fmod", &mod_backward<false>);
  reg2<Op::Pow>("pow", &pow_backward);
  reg2<Op::Atan2>("atan2", &atan2_backward);
  reg2<Op::Hypot>("hypot", &hypot_backward);
  reg2<Op::LogicalAnd>("logical_and", nullptr);
  reg2<Op::LogicalOr>("logical_or", nullptr);
  reg2<Op::LogicalXor>("logical_xor", nullptr);
  reg2<Op::BitAnd>("bitwise_and", nullptr);
  reg2<Op::BitOr>("bitwise_or", nullptr);
  reg2<Op::BitXor>("bitwise_xor", nullptr);
  reg2<Op::Shl>("bitwise_left_shift", nullptr);
  reg2<Op::Shr>("bitwise_right_shift", nullptr);
  reg<&tern_into<Tern::Addcmul>, &tern_infer<Tern::Addcmul>>(
      "addcmul", "addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor", 3,
      &addcmul_backward, true, &dec_addcmul);
  reg<&tern_into<Tern::Addcdiv>, &tern_infer<Tern::Addcdiv>>(
      "addcdiv", "addcdiv(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor", 3,
      &addcdiv_backward, true, &dec_addcdiv);
  reg<&tern_into<Tern::Lerp>, &tern_infer<Tern::Lerp>>("lerp", "lerp(Tensor self, Tensor end, Tensor weight) -> Tensor",
                                                       3, &lerp_backward, true, &dec_lerp);
  reg<&clamp_into<Clamp::Both>, &clamp_infer<Clamp::Both>>(
      "clamp", "clamp(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor", 3, &clamp_backward<Clamp::Both>, true,
      &dec_clamp<Clamp::Both>);
  reg<&clamp_into<Clamp::Min>, &clamp_infer<Clamp::Min>>("clamp_min", "clamp_min(Tensor self, Tensor min) -> Tensor", 2,
                                                         &clamp_backward<Clamp::Min>, true, &dec_clamp<Clamp::Min>);
  reg<&clamp_into<Clamp::Max>, &clamp_infer<Clamp::Max>>("clamp_max", "clamp_max(Tensor self, Tensor max) -> Tensor", 2,
                                                         &clamp_backward<Clamp::Max>, true, &dec_clamp<Clamp::Max>);
}

}  // namespace tp
