// The pointwise family: binary arithmetic and comparisons, unary math, where.
// Shape: broadcast (NumPy rules); dtype: PyTorch's result_type; output: a new
// contiguous tensor. Each kernel converts its operands to the computation
// dtype first (a no-op in the common case) so that the inner loops handle one
// element type and stay short enough for GCC to vectorize.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ops/derivative_util.h"
#include "ops/families.h"
#include "ops/kernel_util.h"
#include "ops/pointwise_kernels.h"
#include "ops/registry.h"
#include "ops/tensor_iterator.h"
#include "ops/type_promotion.h"
#include "ops/vec_math.h"

namespace tp {
namespace {

constexpr bool is_comparison(BinaryOp k) { return k >= BinaryOp::Eq; }

const char* binary_name(BinaryOp k) {
  static const char* names[] = {"add", "sub", "mul", "div", "maximum", "minimum",
                                "eq",  "ne",  "lt",  "le",  "gt",      "ge"};
  return names[static_cast<int>(k)];
}

// ---------------------------------------------------------------------------
// Scalar math. Integer arithmetic wraps (through uint64_t: signed overflow
// would be undefined behaviour).
template <BinaryOp K, class T>
inline auto binary_apply(T a, T b) {
  constexpr bool is_int = std::is_same_v<T, int64_t>;
  constexpr bool is_bool = std::is_same_v<T, bool>;
  if constexpr (K == BinaryOp::Add) {
    if constexpr (is_bool) return static_cast<bool>(a | b);
    else if constexpr (is_int) return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
    else return static_cast<T>(a + b);
  } else if constexpr (K == BinaryOp::Sub) {
    if constexpr (is_bool) return static_cast<bool>(a ^ b);  // rejected by inference
    else if constexpr (is_int) return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
    else return static_cast<T>(a - b);
  } else if constexpr (K == BinaryOp::Mul) {
    if constexpr (is_bool) return static_cast<bool>(a & b);
    else if constexpr (is_int) return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
    else return static_cast<T>(a * b);
  } else if constexpr (K == BinaryOp::Div) {
    return static_cast<T>(a / b);  // floating only (true division)
  } else if constexpr (K == BinaryOp::Maximum) {
    return select(a > b || a != a, a, b);  // NaN on either side propagates
  } else if constexpr (K == BinaryOp::Minimum) {
    return select(a < b || a != a, a, b);
  } else if constexpr (K == BinaryOp::Eq) {
    return a == b;
  } else if constexpr (K == BinaryOp::Ne) {
    return a != b;
  } else if constexpr (K == BinaryOp::Lt) {
    return a < b;
  } else if constexpr (K == BinaryOp::Le) {
    return a <= b;
  } else if constexpr (K == BinaryOp::Gt) {
    return a > b;
  } else {
    return a >= b;
  }
}

enum class UnaryOp { Neg, Relu, Abs, Exp, Log, Sqrt, Tanh, Sigmoid };

template <UnaryOp K, class T>
inline T unary_apply(T x) {
  if constexpr (K == UnaryOp::Neg) {
    if constexpr (std::is_same_v<T, int64_t>) return static_cast<int64_t>(0ull - static_cast<uint64_t>(x));
    else return -x;
  } else if constexpr (K == UnaryOp::Relu) {
    return select(x < T(0), T(0), x);  // NaN stays NaN
  } else if constexpr (K == UnaryOp::Abs) {
    if constexpr (std::is_same_v<T, int64_t>) return x < 0 ? static_cast<int64_t>(0ull - static_cast<uint64_t>(x)) : x;
    else return std::abs(x);
  } else if constexpr (K == UnaryOp::Exp) {
    return exp_any(x);
  } else if constexpr (K == UnaryOp::Log) {
    return std::log(x);
  } else if constexpr (K == UnaryOp::Sqrt) {
    return std::sqrt(x);
  } else if constexpr (K == UnaryOp::Tanh) {
    return std::tanh(x);
  } else {
    return T(1) / (T(1) + exp_any(-x));
  }
}

// ---------------------------------------------------------------------------
// Inner loops: a contiguous path, a path with one broadcast scalar operand,
// and the general strided path.
template <class Out, class T, class F>
void binary_loop(const TensorIterator& it, F f) {
  it.for_each([f](char** d, const int64_t* s, int64_t n) {
    Out* o = reinterpret_cast<Out*>(d[0]);
    const T* a = reinterpret_cast<const T*>(d[1]);
    const T* b = reinterpret_cast<const T*>(d[2]);
    if (s[0] == sizeof(Out)) {
      if (s[1] == sizeof(T) && s[2] == sizeof(T)) {
        for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
        return;
      }
      if (s[1] == sizeof(T) && s[2] == 0) {
        const T bv = *b;
        for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], bv);
        return;
      }
      if (s[1] == 0 && s[2] == sizeof(T)) {
        const T av = *a;
        for (int64_t i = 0; i < n; ++i) o[i] = f(av, b[i]);
        return;
      }
    }
    char* po = d[0];
    const char* pa = d[1];
    const char* pb = d[2];
    for (int64_t i = 0; i < n; ++i, po += s[0], pa += s[1], pb += s[2])
      *reinterpret_cast<Out*>(po) = f(*reinterpret_cast<const T*>(pa), *reinterpret_cast<const T*>(pb));
  });
}

template <class T, class F>
void unary_loop(const TensorIterator& it, F f) {
  it.for_each([f](char** d, const int64_t* s, int64_t n) {
    T* o = reinterpret_cast<T*>(d[0]);
    const T* a = reinterpret_cast<const T*>(d[1]);
    if (s[0] == sizeof(T) && s[1] == sizeof(T)) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
      return;
    }
    char* po = d[0];
    const char* pa = d[1];
    for (int64_t i = 0; i < n; ++i, po += s[0], pa += s[1])
      *reinterpret_cast<T*>(po) = f(*reinterpret_cast<const T*>(pa));
  });
}

template <BinaryOp K>
void run_binary(const Tensor& out, const Tensor& a, const Tensor& b) {
  TP_CHECK(a.dtype() == b.dtype(), Error, "internal: ", binary_name(K), " kernel got operands of dtypes ",
           dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  TensorIterator it({out, a, b});
  TP_DISPATCH_ALL(a.dtype(), binary_name(K), ([&]<class T>() {
    if constexpr (is_comparison(K)) {
      binary_loop<bool, T>(it, [](T x, T y) { return binary_apply<K, T>(x, y); });
    } else if constexpr (K == BinaryOp::Div && !std::is_floating_point_v<T>) {
      throw Error(str("internal: div kernel on dtype ", dtype_name(a.dtype())));
    } else {
      binary_loop<T, T>(it, [](T x, T y) { return static_cast<T>(binary_apply<K, T>(x, y)); });
    }
  }));
}

// ---------------------------------------------------------------------------
// Binary operators.
template <BinaryOp K>
std::vector<TensorMeta> binary_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  Shape shape = broadcast_shapes(in[0].sizes, in[1].sizes, op.name);
  DType ct = result_type(in);
  DType out = ct;
  if constexpr (is_comparison(K)) {
    out = DType::Bool;
  } else if constexpr (K == BinaryOp::Div) {
    if (!is_floating(ct)) out = default_float_dtype();
  } else if constexpr (K == BinaryOp::Sub) {
    TP_CHECK(in[0].dtype != DType::Bool && in[1].dtype != DType::Bool, TypeError, op.name,
             ": subtraction, the `-` operator, with a bool tensor is not supported (got dtypes ",
             dtype_name(in[0].dtype), " and ", dtype_name(in[1].dtype),
             "); to invert a mask use the `~` or `logical_not()` operator instead");
  }
  return {TensorMeta::contiguous(std::move(shape), out)};
}

template <BinaryOp K>
std::vector<Tensor> binary_cpu(const OpDef&, const std::vector<Tensor>& in, const Attrs&,
                               const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  // Comparisons compute in the promoted dtype; arithmetic in the result dtype.
  DType ct = is_comparison(K) ? result_type(in) : om[0].dtype;
  run_binary<K>(out, convert(in[0], ct), convert(in[1], ct));
  return {out};
}

// ---------------------------------------------------------------------------
// Unary operators.
template <UnaryOp K>
constexpr bool promotes_to_float() {
  return K == UnaryOp::Exp || K == UnaryOp::Log || K == UnaryOp::Sqrt || K == UnaryOp::Tanh ||
         K == UnaryOp::Sigmoid;
}

template <UnaryOp K>
std::vector<TensorMeta> unary_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  DType dt = in[0].dtype;
  if constexpr (promotes_to_float<K>()) {
    if (!is_floating(dt)) dt = default_float_dtype();
  } else if constexpr (K == UnaryOp::Neg) {
    TP_CHECK(dt != DType::Bool, TypeError, op.name,
             ": negation, the `-` operator, on a bool tensor is not supported (dtype bool); to invert a mask use "
             "the `~` or `logical_not()` operator instead");
  } else {
    TP_CHECK(dt != DType::Bool, TypeError, op.name, ": not supported for dtype bool");
  }
  return {TensorMeta::contiguous(in[0].sizes, dt)};
}

template <UnaryOp K>
std::vector<Tensor> unary_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs&,
                              const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  Tensor x = convert(in[0], om[0].dtype);
  TensorIterator it({out, x});
  if constexpr (promotes_to_float<K>()) {
    TP_DISPATCH_FLOATING(out.dtype(), op.name,
                         ([&]<class T>() { unary_loop<T>(it, [](T v) { return unary_apply<K, T>(v); }); }));
  } else {
    TP_DISPATCH_NUMERIC(out.dtype(), op.name,
                        ([&]<class T>() { unary_loop<T>(it, [](T v) { return unary_apply<K, T>(v); }); }));
  }
  return {out};
}

// ---------------------------------------------------------------------------
// where(cond, a, b)
std::vector<TensorMeta> where_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  TP_CHECK(in[0].dtype == DType::Bool, TypeError, op.name,
           ": expected the condition to be a bool tensor, but got dtype ", dtype_name(in[0].dtype));
  Shape shape = broadcast_shapes(broadcast_shapes(in[0].sizes, in[1].sizes, op.name), in[2].sizes, op.name);
  return {TensorMeta::contiguous(std::move(shape), result_type(std::vector<TensorMeta>{in[1], in[2]}))};
}

std::vector<Tensor> where_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs&,
                              const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  DType dt = om[0].dtype;
  Tensor a = convert(in[1], dt), b = convert(in[2], dt);
  TensorIterator it({out, in[0], a, b});
  TP_DISPATCH_ALL(dt, op.name, ([&]<class T>() {
    it.for_each([](char** d, const int64_t* s, int64_t n) {
      if (s[0] == sizeof(T) && s[1] == 1 && s[2] == sizeof(T) && s[3] == sizeof(T)) {
        T* o = reinterpret_cast<T*>(d[0]);
        const bool* c = reinterpret_cast<const bool*>(d[1]);
        const T* x = reinterpret_cast<const T*>(d[2]);
        const T* y = reinterpret_cast<const T*>(d[3]);
        for (int64_t i = 0; i < n; ++i) o[i] = select(c[i], x[i], y[i]);
        return;
      }
      char *po = d[0], *pc = d[1], *px = d[2], *py = d[3];
      for (int64_t i = 0; i < n; ++i, po += s[0], pc += s[1], px += s[2], py += s[3])
        *reinterpret_cast<T*>(po) =
            *reinterpret_cast<const bool*>(pc) ? *reinterpret_cast<const T*>(px) : *reinterpret_cast<const T*>(py);
    });
  }));
  return {out};
}

// ---------------------------------------------------------------------------
// Derivative formulas.
using ops::grad_out;
using ops::reduce_grad;
using ops::scalar;

std::vector<Tensor> add_backward(const BackwardArgs& a) {
  const Tensor& g = grad_out(a);
  if (!g.defined()) return {Tensor(), Tensor()};
  return {a.needs_grad[0] ? reduce_grad(g, a.inputs[0]) : Tensor(),
          a.needs_grad[1] ? reduce_grad(g, a.inputs[1]) : Tensor()};
}

std::vector<Tensor> sub_backward(const BackwardArgs& a) {
  const Tensor& g = grad_out(a);
  if (!g.defined()) return {Tensor(), Tensor()};
  return {a.needs_grad[0] ? reduce_grad(g, a.inputs[0]) : Tensor(),
          a.needs_grad[1] ? reduce_grad(ops::neg(g), a.inputs[1]) : Tensor()};
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
  Tensor gx, gy;
  if (a.needs_grad[0]) gx = reduce_grad(ops::div(g, y), x);
  if (a.needs_grad[1]) gy = reduce_grad(ops::neg(ops::div(ops::mul(g, x), ops::mul(y, y))), y);
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

// Unary formulas: f(g, x, out) -> grad for x.
template <Tensor (*F)(const Tensor& g, const Tensor& x, const Tensor& out)>
std::vector<Tensor> unary_backward(const BackwardArgs& a) {
  const Tensor& g = grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  return {reduce_grad(F(g, a.inputs[0], a.outputs[0]), a.inputs[0])};
}
Tensor d_neg(const Tensor& g, const Tensor&, const Tensor&) { return ops::neg(g); }
Tensor d_relu(const Tensor& g, const Tensor&, const Tensor& out) {
  return ops::where(ops::gt(out, scalar(0)), g, scalar(0.0));
}
Tensor d_abs(const Tensor& g, const Tensor& x, const Tensor&) {
  return ops::where(ops::gt(x, scalar(0)), g, ops::where(ops::lt(x, scalar(0)), ops::neg(g), scalar(0.0)));
}
Tensor d_exp(const Tensor& g, const Tensor&, const Tensor& out) { return ops::mul(g, out); }
Tensor d_log(const Tensor& g, const Tensor& x, const Tensor&) { return ops::div(g, x); }
Tensor d_sqrt(const Tensor& g, const Tensor&, const Tensor& out) {
  return ops::div(g, ops::mul(out, scalar(2)));
}
Tensor d_tanh(const Tensor& g, const Tensor&, const Tensor& out) {
  return ops::mul(g, ops::sub(scalar(1), ops::mul(out, out)));
}
Tensor d_sigmoid(const Tensor& g, const Tensor&, const Tensor& out) {
  return ops::mul(g, ops::mul(out, ops::sub(scalar(1), out)));
}

// ---------------------------------------------------------------------------
template <BinaryOp K>
void register_binary(BackwardFn backward) {
  OpDef d;
  d.name = binary_name(K);
  d.tags = kPointwise;
  d.num_inputs = 2;
  d.infer = &binary_infer<K>;
  d.cpu = &binary_cpu<K>;
  d.backward = backward;
  d.pointwise_fn = binary_name(K);
  register_op(d);
}

template <UnaryOp K>
void register_unary(const char* name, BackwardFn backward) {
  OpDef d;
  d.name = name;
  d.tags = kPointwise;
  d.num_inputs = 1;
  d.infer = &unary_infer<K>;
  d.cpu = &unary_cpu<K>;
  d.backward = backward;
  d.pointwise_fn = name;
  register_op(d);
}

}  // namespace

void binary_kernel(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  switch (op) {
    case BinaryOp::Add: return run_binary<BinaryOp::Add>(out, a, b);
    case BinaryOp::Sub: return run_binary<BinaryOp::Sub>(out, a, b);
    case BinaryOp::Mul: return run_binary<BinaryOp::Mul>(out, a, b);
    case BinaryOp::Div: return run_binary<BinaryOp::Div>(out, a, b);
    case BinaryOp::Maximum: return run_binary<BinaryOp::Maximum>(out, a, b);
    case BinaryOp::Minimum: return run_binary<BinaryOp::Minimum>(out, a, b);
    case BinaryOp::Eq: return run_binary<BinaryOp::Eq>(out, a, b);
    case BinaryOp::Ne: return run_binary<BinaryOp::Ne>(out, a, b);
    case BinaryOp::Lt: return run_binary<BinaryOp::Lt>(out, a, b);
    case BinaryOp::Le: return run_binary<BinaryOp::Le>(out, a, b);
    case BinaryOp::Gt: return run_binary<BinaryOp::Gt>(out, a, b);
    case BinaryOp::Ge: return run_binary<BinaryOp::Ge>(out, a, b);
  }
}

void register_pointwise_ops() {
  register_binary<BinaryOp::Add>(&add_backward);
  register_binary<BinaryOp::Sub>(&sub_backward);
  register_binary<BinaryOp::Mul>(&mul_backward);
  register_binary<BinaryOp::Div>(&div_backward);
  register_binary<BinaryOp::Maximum>(&maximum_backward);
  register_binary<BinaryOp::Minimum>(&minimum_backward);
  register_binary<BinaryOp::Eq>(nullptr);  // comparisons are not differentiable
  register_binary<BinaryOp::Ne>(nullptr);
  register_binary<BinaryOp::Lt>(nullptr);
  register_binary<BinaryOp::Le>(nullptr);
  register_binary<BinaryOp::Gt>(nullptr);
  register_binary<BinaryOp::Ge>(nullptr);

  register_unary<UnaryOp::Neg>("neg", &unary_backward<d_neg>);
  register_unary<UnaryOp::Relu>("relu", &unary_backward<d_relu>);
  register_unary<UnaryOp::Abs>("abs", &unary_backward<d_abs>);
  register_unary<UnaryOp::Exp>("exp", &unary_backward<d_exp>);
  register_unary<UnaryOp::Log>("log", &unary_backward<d_log>);
  register_unary<UnaryOp::Sqrt>("sqrt", &unary_backward<d_sqrt>);
  register_unary<UnaryOp::Tanh>("tanh", &unary_backward<d_tanh>);
  register_unary<UnaryOp::Sigmoid>("sigmoid", &unary_backward<d_sigmoid>);

  OpDef w;
  w.name = "where";
  w.tags = kPointwise;
  w.num_inputs = 3;
  w.infer = &where_infer;
  w.cpu = &where_cpu;
  w.backward = &where_backward;
  w.pointwise_fn = "where";
  register_op(w);
}

}  // namespace tp
