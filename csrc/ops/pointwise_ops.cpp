// The core binary pointwise family: add/sub (with alpha), mul, div (with
// rounding_mode), maximum, minimum, the six comparisons and where.
// Shape: broadcast (NumPy rules); dtype: PyTorch's result_type (true division
// of integers gives the default float); output: a new contiguous tensor.
// Float kernels come from the per-ISA tables of ops/vec; integer and bool
// kernels are element loops here. The unary operators live in
// unary_math_ops.cpp, the other binary ones in binary_math_ops.cpp.
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "ops/derivative_util.h"
#include "ops/dispatch.h"
#include "ops/families.h"
#include "ops/kernel_util.h"
#include "ops/pointwise_kernels.h"
#include "ops/registry.h"
#include "ops/type_promotion.h"
#include "ops/vec/pointwise_common.h"

namespace tp {
namespace {

using pw::binary_loop;
using vec::BinaryFn;

constexpr bool is_comparison(BinaryOp k) { return k >= BinaryOp::Eq; }

// ---------------------------------------------------------------------------
// Attributes
Scalar alpha_of(const Attrs& attrs) { return attrs.is_none("alpha") ? Scalar(int64_t{1}) : attrs.get_scalar("alpha"); }

enum class Rounding { None, Trunc, Floor };
Rounding rounding_of(const Attrs& attrs, const char* op) {
  if (attrs.is_none("rounding_mode")) return Rounding::None;
  const std::string& m = attrs.get_str("rounding_mode");
  if (m == "trunc") return Rounding::Trunc;
  if (m == "floor") return Rounding::Floor;
  throw ValueError(str(op, ": expected rounding_mode to be one of None, 'trunc', or 'floor' but found '", m, "'"));
}

// ---------------------------------------------------------------------------
// Integer and bool element functions.
template <BinaryOp K>
auto int_fn(int64_t alpha, std::atomic<bool>* zero, Rounding r) {
  return [alpha, zero, r](int64_t a, int64_t b) -> int64_t {
    if constexpr (K == BinaryOp::Add) return pw::wrap_add(a, pw::wrap_mul(alpha, b));
    else if constexpr (K == BinaryOp::Sub) return pw::wrap_sub(a, pw::wrap_mul(alpha, b));
    else if constexpr (K == BinaryOp::Mul) return pw::wrap_mul(a, b);
    else if constexpr (K == BinaryOp::Maximum) return a > b ? a : b;
    else if constexpr (K == BinaryOp::Minimum) return a < b ? a : b;
    else {  // Div with rounding
      if (b == 0) {
        zero->store(true, std::memory_order_relaxed);
        return 0;
      }
      if (b == -1) return pw::wrap_sub(0, a);  // INT64_MIN / -1 wraps instead of trapping
      int64_t q = a / b;
      if (r == Rounding::Floor && (a % b != 0) && ((a < 0) != (b < 0))) --q;
      return q;
    }
  };
}

template <BinaryOp K>
bool bool_fn(bool a, bool b) {
  if constexpr (K == BinaryOp::Add || K == BinaryOp::Maximum) return a || b;
  else return a && b;  // Mul, Minimum
}

BinaryFn float_fn(BinaryOp k, Rounding r) {
  switch (k) {
    case BinaryOp::Add: return BinaryFn::Add;
    case BinaryOp::Sub: return BinaryFn::Sub;
    case BinaryOp::Mul: return BinaryFn::Mul;
    case BinaryOp::Div: return r == Rounding::None ? BinaryFn::Div : r == Rounding::Trunc ? BinaryFn::DivTrunc : BinaryFn::DivFloor;
    case BinaryOp::Maximum: return BinaryFn::Maximum;
    default: return BinaryFn::Minimum;
  }
}

template <BinaryOp K>
void compare_into(const char* name, const Tensor& out, const Tensor& a, const Tensor& b) {
  TP_DISPATCH_ALL(a.dtype(), name, ([&]<class T>() {
    binary_loop<bool, T>(out, a, b, [](T x, T y) -> bool {
      if constexpr (K == BinaryOp::Eq) return x == y;
      else if constexpr (K == BinaryOp::Ne) return x != y;
      else if constexpr (K == BinaryOp::Lt) return x < y;
      else if constexpr (K == BinaryOp::Le) return x <= y;
      else if constexpr (K == BinaryOp::Gt) return x > y;
      else return x >= y;
    });
  }));
}

// out = a <K> b with a, b already in out's dtype (or the promoted dtype for comparisons).
template <BinaryOp K>
void arith_into(const char* name, const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha, Rounding r) {
  const DType dt = out.dtype();
  if (dt == DType::Float32 || dt == DType::Float64) {
    vec::Params p;
    p.a = alpha.to_double();
    TP_DISPATCH_FLOATING(dt, name, ([&]<class T>() { pw::run_binary_float<T>(float_fn(K, r), out, a, b, p); }));
  } else if (dt == DType::Bool) {
    TP_CHECK(K != BinaryOp::Div, TypeError, name, ": rounding division is not supported for dtype bool");
    // add's alpha scales the second operand: x + False * y is x.
    const bool keep_b = K != BinaryOp::Add || alpha.to_double() != 0;
    if constexpr (K != BinaryOp::Div && K != BinaryOp::Sub)
      binary_loop<bool, bool>(out, a, b, [keep_b](bool x, bool y) { return bool_fn<K>(x, y && keep_b); });
  } else {
    TP_CHECK(dt == DType::Int64, TypeError, name, ": unsupported dtype ", dtype_name(dt));
    std::atomic<bool> zero{false};
    binary_loop<int64_t, int64_t>(out, a, b, int_fn<K>(alpha.to_int(), &zero, r));
    if (zero.load()) pw::throw_zero_division(name);
  }
}

// ---------------------------------------------------------------------------
// Inference
template <BinaryOp K>
std::vector<TensorMeta> binary_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  Shape shape = broadcast_shapes(in[0].sizes, in[1].sizes, op.name);
  DType ct = result_type(in);
  DType out = ct;
  if constexpr (is_comparison(K)) {
    out = DType::Bool;
  } else if constexpr (K == BinaryOp::Div) {
    if (rounding_of(attrs, op.name) == Rounding::None) out = pw::float_result(ct);
    else if (ct == DType::Bool) pw::throw_dtype(op.name, in, "rounding division is not supported for bool tensors");
  } else if constexpr (K == BinaryOp::Add || K == BinaryOp::Sub) {
    if (K == BinaryOp::Sub && (in[0].dtype == DType::Bool || in[1].dtype == DType::Bool))
      throw TypeError(str(op.name, ": subtraction, the `-` operator, with a bool tensor is not supported (got dtypes ",
                          dtype_name(in[0].dtype), " and ", dtype_name(in[1].dtype),
                          "); to invert a mask use the `~` or `logical_not()` operator instead"));
    const Scalar alpha = alpha_of(attrs);
    TP_CHECK(!(alpha.is_float() && !is_floating(ct)), TypeError, op.name, ": for integral input tensors (dtype ",
             dtype_name(ct), "), argument alpha must not be a floating point number");
    TP_CHECK(!(alpha.is_bool() && ct != DType::Bool), TypeError, op.name,
             ": boolean alpha only supported for boolean results (got dtype ", dtype_name(ct), ")");
  }
  return {TensorMeta::contiguous(std::move(shape), out)};
}

template <BinaryOp K>
void binary_into(const OpDef& op, const Tensor& out, const std::vector<Tensor>& in, const Attrs& attrs) {
  if constexpr (is_comparison(K)) {
    const DType ct = result_type(in);
    compare_into<K>(op.name, out, convert(in[0], ct), convert(in[1], ct));
  } else {
    const Rounding r = K == BinaryOp::Div ? rounding_of(attrs, op.name) : Rounding::None;
    const DType ct = out.dtype();
    if (r != Rounding::None && ct == DType::Float32 && attrs.has(kNarrowDTypeAttr) && pw::rounds_narrow(in)) {
      pw::div_round_narrow(out, convert(in[0], ct), convert(in[1], ct), r == Rounding::Floor,
                           attrs.get<DType>(kNarrowDTypeAttr));
      return;
    }
    arith_into<K>(op.name, out, convert(in[0], ct), convert(in[1], ct), alpha_of(attrs), r);
  }
}

// ---------------------------------------------------------------------------
// where(cond, a, b)
std::vector<TensorMeta> where_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  TP_CHECK(in[0].dtype == DType::Bool, TypeError, op.name,
           ": expected the condition to be a bool tensor, but got dtype ", dtype_name(in[0].dtype));
  Shape shape = broadcast_shapes(broadcast_shapes(in[0].sizes, in[1].sizes, op.name), in[2].sizes, op.name);
  return {TensorMeta::contiguous(std::move(shape), result_type(std::vector<TensorMeta>{in[1], in[2]}))};
}

void where_into(const OpDef& op, const Tensor& out, const std::vector<Tensor>& in, const Attrs&) {
  DType dt = out.dtype();
  Tensor a = convert(in[1], dt), b = convert(in[2], dt);
  TensorIterator it({out, in[0], a, b});
  TP_DISPATCH_ALL(dt, op.name, ([&]<class T>() {
    it.for_each([](char** d, const int64_t* s, int64_t n) {
      if (s[0] == sizeof(T) && s[1] == 1 && s[2] == sizeof(T) && s[3] == sizeof(T)) {
        T* o = reinterpret_cast<T*>(d[0]);
        const bool* c = reinterpret_cast<const bool*>(d[1]);
        const T* x = reinterpret_cast<const T*>(d[2]);
        const T* y = reinterpret_cast<const T*>(d[3]);
        for (int64_t i = 0; i < n; ++i) o[i] = c[i] ? x[i] : y[i];
        return;
      }
      char *po = d[0], *pc = d[1], *px = d[2], *py = d[3];
      for (int64_t i = 0; i < n; ++i, po += s[0], pc += s[1], px += s[2], py += s[3])
        *reinterpret_cast<T*>(po) =
            *reinterpret_cast<const bool*>(pc) ? *reinterpret_cast<const T*>(px) : *reinterpret_cast<const T*>(py);
    });
  }));
}

// ---------------------------------------------------------------------------
// Derivative formulas.
using ops::grad_out;
using ops::reduce_grad;
using ops::scalar;

Tensor scaled(const Tensor& g, const Scalar& alpha, bool negate) {
  const bool one = !alpha.is_float() && alpha.to_int() == 1;
  if (one) return negate ? ops::neg(g) : g;
  return ops::mul(g, scalar(negate ? Scalar(-alpha.to_double()) : Scalar(alpha.to_double())));
}

std::vector<Tensor> add_backward(const BackwardArgs& a) {
  const Tensor& g = grad_out(a);
  if (!g.defined()) return {Tensor(), Tensor()};
  return {a.needs_grad[0] ? reduce_grad(g, a.inputs[0]) : Tensor(),
          a.needs_grad[1] ? reduce_grad(scaled(g, alpha_of(a.attrs), false), a.inputs[1]) : Tensor()};
}

std::vector<Tensor> sub_backward(const BackwardArgs& a) {
  const Tensor& g = grad_out(a);
  if (!g.defined()) return {Tensor(), Tensor()};
  return {a.needs_grad[0] ? reduce_grad(g, a.inputs[0]) : Tensor(),
          a.needs_grad[1] ? reduce_grad(scaled(g, alpha_of(a.attrs), true), a.inputs[1]) : Tensor()};
}

std::vector<Tensor> mul_backward(const BackwardArgs& a) {
  const Tensor& g = grad_out(a);
  if (!g.defined()) return {Tensor(), Tensor()};
  return {a.needs_grad[0] ? reduce_grad(ops::mul(g, a.inputs[1]), a.inputs[0]) : Tensor(),
          a.needs_grad[1] ? reduce_grad(ops::mul(g, a.inputs[0]), a.inputs[1]) : Tensor()};
}

std::vector<Tensor> div_backward(const BackwardArgs& a) {
  const Tensor& g = grad_out(a);
  if (!g.defined()) return {Tensor(), Tensor()};
  const Tensor &x = a.inputs[0], &y = a.inputs[1];
  if (!a.attrs.is_none("rounding_mode")) {  // piecewise constant: zero almost everywhere
    return {a.needs_grad[0] ? ops::full_on(g, x.sizes(), Scalar(int64_t{0}), x.dtype()) : Tensor(),
            a.needs_grad[1] ? ops::full_on(g, y.sizes(), Scalar(int64_t{0}), y.dtype()) : Tensor()};
  }
  // 16-bit operands: the formula runs in float32 and reduce_grad rounds once (three float16
  // roundings in g * x / (y * y) gave 1.5x PyTorch's error).
  auto wide = [](const Tensor& t) {
    return t.dtype() == DType::Float16 || t.dtype() == DType::BFloat16 ? ops::to_dtype(t, DType::Float32) : t;
  };
  const Tensor wg = wide(g), wy = wide(y);
  Tensor gx, gy;
  if (a.needs_grad[0]) gx = reduce_grad(ops::div(wg, wy), x);
  if (a.needs_grad[1]) gy = reduce_grad(ops::neg(ops::div(ops::mul(wg, wide(x)), ops::mul(wy, wy))), y);
  return {gx, gy};
}

// maximum/minimum: the gradient goes to the selected input, split evenly on
// ties; a NaN input gets the gradient of the NaN it produced (PyTorch).
std::vector<Tensor> extremum_backward(const BackwardArgs& a, bool is_max) {
  const Tensor& g = grad_out(a);
  if (!g.defined()) return {Tensor(), Tensor()};
  const Tensor &x = a.inputs[0], &y = a.inputs[1];
  Tensor tie = ops::eq(x, y);
  Tensor half = ops::mul(g, scalar(0.5));
  auto grad_for = [&](const Tensor& self, const Tensor& other) {
    Tensor loses = is_max ? ops::lt(self, other) : ops::gt(self, other);
    return ops::where(loses, scalar(0.0), ops::where(tie, half, g));
  };
  return {a.needs_grad[0] ? reduce_grad(grad_for(x, y), x) : Tensor(),
          a.needs_grad[1] ? reduce_grad(grad_for(y, x), y) : Tensor()};
}
std::vector<Tensor> maximum_backward(const BackwardArgs& a) { return extremum_backward(a, true); }
std::vector<Tensor> minimum_backward(const BackwardArgs& a) { return extremum_backward(a, false); }

std::vector<Tensor> where_backward(const BackwardArgs& a) {
  const Tensor& g = grad_out(a);
  if (!g.defined()) return {Tensor(), Tensor(), Tensor()};
  const Tensor& c = a.inputs[0];
  return {Tensor(), a.needs_grad[1] ? reduce_grad(ops::where(c, g, scalar(0.0)), a.inputs[1]) : Tensor(),
          a.needs_grad[2] ? reduce_grad(ops::where(c, scalar(0.0), g), a.inputs[2]) : Tensor()};
}

// ---------------------------------------------------------------------------
template <BinaryOp K>
void reg(const char* name, const char* schema, BackwardFn backward, const char* inplace_schema) {
  const char* iname = inplace_schema ? intern_attr_name(std::string(name) + "_") : nullptr;
  pw::register_pointwise<&binary_into<K>, &binary_infer<K>>(name, schema, 2, backward, iname, inplace_schema);
}

}  // namespace

void binary_kernel(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  auto run = [&]<BinaryOp K>() {
    if constexpr (is_comparison(K)) compare_into<K>("binary", out, a, b);
    else arith_into<K>("binary", out, a, b, Scalar(int64_t{1}), Rounding::None);
  };
  switch (op) {
    case BinaryOp::Add: return run.template operator()<BinaryOp::Add>();
    case BinaryOp::Sub: return run.template operator()<BinaryOp::Sub>();
    case BinaryOp::Mul: return run.template operator()<BinaryOp::Mul>();
    case BinaryOp::Div: return run.template operator()<BinaryOp::Div>();
    case BinaryOp::Maximum: return run.template operator()<BinaryOp::Maximum>();
    case BinaryOp::Minimum: return run.template operator()<BinaryOp::Minimum>();
    case BinaryOp::Eq: return run.template operator()<BinaryOp::Eq>();
    case BinaryOp::Ne: return run.template operator()<BinaryOp::Ne>();
    case BinaryOp::Lt: return run.template operator()<BinaryOp::Lt>();
    case BinaryOp::Le: return run.template operator()<BinaryOp::Le>();
    case BinaryOp::Gt: return run.template operator()<BinaryOp::Gt>();
    case BinaryOp::Ge: return run.template operator()<BinaryOp::Ge>();
  }
}

void register_pointwise_ops() {
  reg<BinaryOp::Add>("add", "add(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", &add_backward,
                     "add_(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  reg<BinaryOp::Sub>("sub", "sub(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", &sub_backward,
                     "sub_(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  reg<BinaryOp::Mul>("mul", "mul(Tensor self, Tensor other) -> Tensor", &mul_backward,
                     "mul_(Tensor self, Tensor other) -> Tensor");
  reg<BinaryOp::Div>("div", "div(Tensor self, Tensor other, *, str? rounding_mode=None) -> Tensor", &div_backward,
                     "div_(Tensor self, Tensor other, *, str? rounding_mode=None) -> Tensor");
  reg<BinaryOp::Maximum>("maximum", "maximum(Tensor self, Tensor other) -> Tensor", &maximum_backward, nullptr);
  reg<BinaryOp::Minimum>("minimum", "minimum(Tensor self, Tensor other) -> Tensor", &minimum_backward, nullptr);
  // Comparisons are not differentiable.
  reg<BinaryOp::Eq>("eq", "eq(Tensor self, Tensor other) -> Tensor", nullptr, "eq_(Tensor self, Tensor other) -> Tensor");
  reg<BinaryOp::Ne>("ne", "ne(Tensor self, Tensor other) -> Tensor", nullptr, "ne_(Tensor self, Tensor other) -> Tensor");
  reg<BinaryOp::Lt>("lt", "lt(Tensor self, Tensor other) -> Tensor", nullptr, "lt_(Tensor self, Tensor other) -> Tensor");
  reg<BinaryOp::Le>("le", "le(Tensor self, Tensor other) -> Tensor", nullptr, "le_(Tensor self, Tensor other) -> Tensor");
  reg<BinaryOp::Gt>("gt", "gt(Tensor self, Tensor other) -> Tensor", nullptr, "gt_(Tensor self, Tensor other) -> Tensor");
  reg<BinaryOp::Ge>("ge", "ge(Tensor self, Tensor other) -> Tensor", nullptr, "ge_(Tensor self, Tensor other) -> Tensor");
  pw::register_pointwise<&where_into, &where_infer>(
      "where", "where(Tensor condition, Tensor self, Tensor other) -> Tensor", 3, &where_backward);
}

}  // namespace tp
