// The unary pointwise family: exponentials and logarithms, trigonometric and
// hyperbolic functions, erf and friends, activations (sigmoid, gelu, silu,
// mish, softplus, elu, leaky_relu, hardtanh, relu), rounding, sign/abs/neg,
// the float classifiers (isnan, isinf, isfinite) and logical/bitwise not.
//
// Every operator is one table row: its schema, a dtype rule, the float kernel
// of ops/vec (float32 vectorized per ISA, float64 through libm) and, where it
// is differentiable, a derivative written with tensor operators. Integer and
// bool inputs run small element loops here.
#include <cmath>
#include <cstdint>

#include "ops/api_math.h"
#include "ops/derivative_util.h"
#include "ops/families.h"
#include "ops/vec/pointwise_common.h"

namespace tp {
namespace {

using vec::UnaryFn;
using ops::grad_out;
using ops::scalar;

// How an operator treats dtypes.
enum class Rule {
  FloatValued,  // integers and bool compute and return the default float (exp, sin, sigmoid, ...)
  FloatOnly,    // floating inputs only (gelu, silu, ...: PyTorch has no integer kernel)
  SameNoBool,   // keeps the dtype; bool is rejected (neg, abs, floor, relu, ...)
  SameAny,      // keeps the dtype, bool included (sign); square turns bool into int64
};

// ---------------------------------------------------------------------------
// Parameters from attributes.
vec::Params params_of(UnaryFn f, const Attrs& at) {
  vec::Params p;
  switch (f) {
    case UnaryFn::Logit: {
      auto eps = at.get_optional_double("eps");
      p.a = eps ? *eps : -1.0;
      break;
    }
    case UnaryFn::Softplus:
      p.a = at.is_none("beta") ? 1.0 : at.get_double("beta");
      p.b = at.is_none("threshold") ? 20.0 : at.get_double("threshold");
      break;
    case UnaryFn::Elu: p.a = at.is_none("alpha") ? 1.0 : at.get_double("alpha"); break;
    case UnaryFn::LeakyRelu: p.a = at.is_none("negative_slope") ? 0.01 : at.get_double("negative_slope"); break;
    case UnaryFn::Hardtanh:
      p.a = at.is_none("min_val") ? -1.0 : at.get_double("min_val");
      p.b = at.is_none("max_val") ? 1.0 : at.get_double("max_val");
      break;
    case UnaryFn::Round: {
      const int64_t d = at.is_none("decimals") ? 0 : at.get_int("decimals");
      p.a = std::pow(10.0, static_cast<double>(d < 0 ? -d : d));
      p.b = d > 0 ? 1.0 : (d < 0 ? -1.0 : 0.0);
      break;
    }
    default: break;
  }
  return p;
}

// gelu's `approximate` picks the kernel.
UnaryFn resolve(UnaryFn f, const Attrs& at, const char* op) {
  if (f != UnaryFn::Gelu || at.is_none("approximate")) return f;
  const std::string& a = at.get_str("approximate");
  if (a == "none") return UnaryFn::Gelu;
  if (a == "tanh") return UnaryFn::GeluTanh;
  throw ValueError(str(op, ": approximate argument must be either 'none' or 'tanh', got '", a, "'"));
}

// ---------------------------------------------------------------------------
// Inference and kernels.
template <UnaryFn F, Rule R>
std::vector<TensorMeta> unary_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& at) {
  DType dt = in[0].dtype;
  resolve(F, at, op.name);
  if constexpr (R == Rule::FloatValued) {
    dt = pw::float_result(dt);
  } else if constexpr (R == Rule::FloatOnly) {
    if (!is_floating(dt)) pw::throw_dtype(op.name, in, "expected a floating-point tensor");
  } else if constexpr (R == Rule::SameNoBool) {
    if (dt == DType::Bool) {
      if (F == UnaryFn::Neg)
        throw TypeError(str(op.name, ": negation, the `-` operator, on a bool tensor is not supported (dtype bool); "
                                     "to invert a mask use the `~` or `logical_not()` operator instead"));
      pw::throw_dtype(op.name, in, "not supported for bool tensors");
    }
    if (F == UnaryFn::Round && !is_floating(dt) && !at.is_none("decimals") && at.get_int("decimals") != 0)
      pw::throw_dtype(op.name, in, "round with decimals is only supported for floating-point tensors");
  } else {
    if (F == UnaryFn::Square && dt == DType::Bool) dt = DType::Int64;
  }
  return {TensorMeta::contiguous(in[0].sizes, dt)};
}

// Integer kernels of the dtype-keeping operators (int64 after the dispatcher's widening).
template <UnaryFn F>
int64_t int_apply(int64_t x, int64_t lo, int64_t hi) {
  if constexpr (F == UnaryFn::Neg) return pw::wrap_sub(0, x);
  else if constexpr (F == UnaryFn::Abs) return x < 0 ? pw::wrap_sub(0, x) : x;
  else if constexpr (F == UnaryFn::Relu) return x < 0 ? 0 : x;
  else if constexpr (F == UnaryFn::Sign) return (x > 0) - (x < 0);
  else if constexpr (F == UnaryFn::Square) return pw::wrap_mul(x, x);
  else if constexpr (F == UnaryFn::Hardtanh) return x < lo ? lo : (x > hi ? hi : x);
  else return x;  // floor, ceil, round, trunc of an integer
}

template <UnaryFn F, Rule R>
void unary_into(const OpDef& op, const Tensor& out, const std::vector<Tensor>& in, const Attrs& at) {
  const DType dt = out.dtype();
  const Tensor x = convert(in[0], dt);
  if (is_floating(dt)) {
    const vec::Params p = params_of(F, at);
    const UnaryFn f = resolve(F, at, op.name);
    TP_DISPATCH_FLOATING(dt, op.name, ([&]<class T>() { pw::run_unary_float<T>(f, out, x, p); }));
    return;
  }
  if constexpr (R == Rule::SameNoBool || R == Rule::SameAny) {
    if (dt == DType::Bool) {  // sign of a bool is itself
      copy_into(out, x);
      return;
    }
    TP_CHECK(dt == DType::Int64, TypeError, op.name, ": unsupported dtype ", dtype_name(dt));
    int64_t lo = 0, hi = 0;
    if constexpr (F == UnaryFn::Hardtanh) {
      const vec::Params p = params_of(F, at);
      lo = static_cast<int64_t>(p.a);
      hi = static_cast<int64_t>(p.b);
    }
    pw::unary_loop<int64_t, int64_t>(out, x, [lo, hi](int64_t v) { return int_apply<F>(v, lo, hi); });
    return;
  }
  throw TypeError(str(op.name, ": unsupported dtype ", dtype_name(dt)));
}

// ---------------------------------------------------------------------------
// Bool-valued classifiers and the nots: any dtype in.
enum class Pred { IsNan, IsInf, IsFinite, LogicalNot };

template <Pred P>
std::vector<TensorMeta> pred_infer(const OpDef&, const std::vector<TensorMeta>& in, const Attrs&) {
  return {TensorMeta::contiguous(in[0].sizes, DType::Bool)};
}

template <Pred P, class T>
bool pred_apply(T v) {
  if constexpr (P == Pred::LogicalNot) return !(v != T(0));
  if constexpr (!std::is_floating_point_v<T>) return P == Pred::IsFinite;  // integers are always finite
  if constexpr (P == Pred::IsNan) return v != v;
  if constexpr (P == Pred::IsInf) return v - v != v - v && v == v;  // inf - inf is NaN; NaN is excluded
  return v - v == v - v;  // IsFinite: NaN for inf and NaN, 0 otherwise
}

template <Pred P>
void pred_into(const OpDef& op, const Tensor& out, const std::vector<Tensor>& in, const Attrs&) {
  const Tensor& x = in[0];
  if (x.dtype() == DType::Float32) {  // the per-ISA kernel on contiguous rows
    auto f = vec::table().pred_f32[static_cast<int>(P)];
    TensorIterator it({out, x});
    it.for_each([f](char** d, const int64_t* s, int64_t n) {
      if (s[0] == 1 && s[1] == 4) {
        f(reinterpret_cast<const float*>(d[1]), reinterpret_cast<bool*>(d[0]), n);
        return;
      }
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<bool*>(d[0] + i * s[0]) = pred_apply<P, float>(*reinterpret_cast<const float*>(d[1] + i * s[1]));
    });
    return;
  }
  TP_DISPATCH_ALL(x.dtype(), op.name,
                  ([&]<class T>() { pw::unary_loop<bool, T>(out, x, [](T v) { return pred_apply<P, T>(v); }); }));
}

std::vector<TensorMeta> bitwise_not_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  if (is_floating(in[0].dtype)) pw::throw_dtype(op.name, in, "bitwise operations need an integer or bool tensor");
  return {TensorMeta::contiguous(in[0].sizes, in[0].dtype)};
}

void bitwise_not_into(const OpDef& op, const Tensor& out, const std::vector<Tensor>& in, const Attrs&) {
  const Tensor x = convert(in[0], out.dtype());
  if (out.dtype() == DType::Bool) pw::unary_loop<bool, bool>(out, x, [](bool v) { return !v; });
  else pw::unary_loop<int64_t, int64_t>(out, x, [](int64_t v) { return ~v; });
}

// ---------------------------------------------------------------------------
// Derivative formulas: f(g, x, out, attrs) -> gradient for x.
using DFn = Tensor (*)(const Tensor& g, const Tensor& x, const Tensor& out, const Attrs& at);
using IntoFnAlias = pw::IntoFn;

// 16-bit tensors: the formula runs in float32 and reduce_grad rounds once, as PyTorch's backward
// kernels do (each tensor op of silu's formula rounding in float16 gave 4x PyTorch's error).
// A saved value autograd did not keep (OpDef::saved: the formula does not read it) stays as it is.
Tensor wide(const Tensor& t) {
  return t.defined() && ops::holds_data(t) && (t.dtype() == DType::Float16 || t.dtype() == DType::BFloat16)
             ? ops::to_dtype(t, DType::Float32)
             : t;
}

template <DFn D>
std::vector<Tensor> unary_backward(const BackwardArgs& a) {
  const Tensor& g = grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  return {ops::reduce_grad(D(wide(g), wide(a.inputs[0]), wide(a.outputs[0]), a.attrs), a.inputs[0])};
}

Tensor c(double v) { return scalar(v); }
Tensor mul3(const Tensor& a, const Tensor& b, const Tensor& d) { return ops::mul(ops::mul(a, b), d); }
Tensor one_minus_sq(const Tensor& x) { return ops::sub(c(1.0), ops::mul(x, x)); }
// Zeros of x's shape on g's device (x is a metadata placeholder: not saved).
Tensor zero_grad(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) {
  return ops::full_on(g, x.sizes(), Scalar(int64_t{0}), x.dtype());
}

constexpr double kLn2 = 0.69314718055994530942, kLn10 = 2.30258509299404568402;
constexpr double k2OverSqrtPi = 1.12837916709551257390, kSqrtPiOver2 = 0.88622692545275801365;
constexpr double kInvSqrt2Pi = 0.39894228040143267794, kSqrt2OverPi = 0.79788456080286535588;

Tensor d_exp(const Tensor& g, const Tensor&, const Tensor& o, const Attrs&) { return ops::mul(g, o); }
Tensor d_exp2(const Tensor& g, const Tensor&, const Tensor& o, const Attrs&) { return mul3(g, o, c(kLn2)); }
Tensor d_expm1(const Tensor& g, const Tensor&, const Tensor& o, const Attrs&) { return ops::mul(g, ops::add(o, c(1.0))); }
Tensor d_log(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) { return ops::div(g, x); }
Tensor d_log2(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) { return ops::div(g, ops::mul(x, c(kLn2))); }
Tensor d_log10(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) { return ops::div(g, ops::mul(x, c(kLn10))); }
Tensor d_log1p(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) { return ops::div(g, ops::add(x, c(1.0))); }
Tensor d_sqrt(const Tensor& g, const Tensor&, const Tensor& o, const Attrs&) { return ops::div(g, ops::mul(o, c(2.0))); }
Tensor d_rsqrt(const Tensor& g, const Tensor&, const Tensor& o, const Attrs&) {
  return ops::mul(mul3(g, o, ops::mul(o, o)), c(-0.5));
}
Tensor d_sin(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) { return ops::mul(g, ops::cos(x)); }
Tensor d_cos(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) { return ops::neg(ops::mul(g, ops::sin(x))); }
Tensor d_tan(const Tensor& g, const Tensor&, const Tensor& o, const Attrs&) {
  return ops::mul(g, ops::add(c(1.0), ops::mul(o, o)));
}
Tensor d_asin(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) { return ops::mul(g, ops::rsqrt(one_minus_sq(x))); }
Tensor d_acos(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) {
  return ops::neg(ops::mul(g, ops::rsqrt(one_minus_sq(x))));
}
Tensor d_atan(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) {
  return ops::div(g, ops::add(c(1.0), ops::mul(x, x)));
}
Tensor d_sinh(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) { return ops::mul(g, ops::cosh(x)); }
Tensor d_cosh(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) { return ops::mul(g, ops::sinh(x)); }
Tensor d_tanh(const Tensor& g, const Tensor&, const Tensor& o, const Attrs&) { return ops::mul(g, one_minus_sq(o)); }
Tensor d_asinh(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) {
  return ops::mul(g, ops::rsqrt(ops::add(ops::mul(x, x), c(1.0))));
}
Tensor d_acosh(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) {
  return ops::mul(g, ops::rsqrt(ops::mul(ops::sub(x, c(1.0)), ops::add(x, c(1.0)))));
}
Tensor d_atanh(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) { return ops::div(g, one_minus_sq(x)); }
Tensor d_erf(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) {
  return mul3(g, ops::exp(ops::neg(ops::mul(x, x))), c(k2OverSqrtPi));
}
Tensor d_erfc(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) {
  return mul3(g, ops::exp(ops::neg(ops::mul(x, x))), c(-k2OverSqrtPi));
}
Tensor d_erfinv(const Tensor& g, const Tensor&, const Tensor& o, const Attrs&) {
  return mul3(g, ops::exp(ops::mul(o, o)), c(kSqrtPiOver2));
}
Tensor d_sigmoid(const Tensor& g, const Tensor&, const Tensor& o, const Attrs&) {
  return mul3(g, o, ops::sub(c(1.0), o));
}
Tensor d_logit(const Tensor& g, const Tensor& x, const Tensor&, const Attrs& at) {
  Tensor d = ops::div(g, ops::mul(x, ops::sub(c(1.0), x)));
  auto eps = at.get_optional_double("eps");
  if (!eps) return d;
  Tensor outside = ops::logical_or(ops::lt(x, c(*eps)), ops::gt(x, c(1.0 - *eps)));
  return ops::where(outside, c(0.0), d);
}
Tensor d_relu(const Tensor& g, const Tensor&, const Tensor& o, const Attrs&) {
  return ops::where(ops::gt(o, c(0.0)), g, c(0.0));
}
Tensor d_gelu(const Tensor& g, const Tensor& x, const Tensor&, const Attrs& at) {
  if (resolve(UnaryFn::Gelu, at, "gelu") == UnaryFn::GeluTanh) {
    Tensor x2 = ops::mul(x, x);
    Tensor t = ops::tanh(ops::mul(ops::add(x, mul3(x2, x, c(0.044715))), c(kSqrt2OverPi)));
    Tensor left = ops::mul(ops::add(t, c(1.0)), c(0.5));
    Tensor dinner = ops::mul(ops::add(ops::mul(x2, c(3 * 0.044715)), c(1.0)), c(kSqrt2OverPi));
    Tensor right = mul3(ops::mul(x, c(0.5)), one_minus_sq(t), dinner);
    return ops::mul(g, ops::add(left, right));
  }
  Tensor cdf = ops::mul(ops::erfc(ops::mul(x, c(-0.70710678118654752440))), c(0.5));  // no cancellation for x < 0
  Tensor pdf = ops::mul(ops::exp(ops::mul(ops::mul(x, x), c(-0.5))), c(kInvSqrt2Pi));
  return ops::mul(g, ops::add(cdf, ops::mul(x, pdf)));
}
Tensor d_silu(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) {
  Tensor s = ops::sigmoid(x);
  return mul3(g, s, ops::add(c(1.0), ops::mul(x, ops::sub(c(1.0), s))));
}
Tensor d_mish(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) {
  Tensor t = ops::tanh(ops::softplus(x));
  return ops::mul(g, ops::add(t, mul3(x, ops::sigmoid(x), one_minus_sq(t))));
}
Tensor d_softplus(const Tensor& g, const Tensor& x, const Tensor&, const Attrs& at) {
  const vec::Params p = params_of(UnaryFn::Softplus, at);
  Tensor bx = ops::mul(x, c(p.a));
  return ops::where(ops::gt(bx, c(p.b)), g, ops::mul(g, ops::sigmoid(bx)));
}
Tensor d_elu(const Tensor& g, const Tensor& x, const Tensor&, const Attrs& at) {
  const double alpha = params_of(UnaryFn::Elu, at).a;
  return ops::where(ops::gt(x, c(0.0)), g, mul3(g, ops::exp(x), c(alpha)));
}
Tensor d_leaky_relu(const Tensor& g, const Tensor& x, const Tensor&, const Attrs& at) {
  return ops::where(ops::gt(x, c(0.0)), g, ops::mul(g, c(params_of(UnaryFn::LeakyRelu, at).a)));
}
Tensor d_hardtanh(const Tensor& g, const Tensor& x, const Tensor&, const Attrs& at) {
  const vec::Params p = params_of(UnaryFn::Hardtanh, at);
  return ops::where(ops::le(x, c(p.a)), c(0.0), ops::where(ops::ge(x, c(p.b)), c(0.0), g));
}
Tensor d_abs(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) { return ops::mul(g, ops::sign(x)); }
Tensor d_neg(const Tensor& g, const Tensor&, const Tensor&, const Attrs&) { return ops::neg(g); }
Tensor d_frac(const Tensor& g, const Tensor&, const Tensor&, const Attrs&) { return g; }
Tensor d_reciprocal(const Tensor& g, const Tensor&, const Tensor& o, const Attrs&) {
  return ops::neg(mul3(g, o, o));
}
Tensor d_square(const Tensor& g, const Tensor& x, const Tensor&, const Attrs&) { return mul3(g, x, c(2.0)); }

// ---------------------------------------------------------------------------
// Decompositions into the operators the Stax lowering knows (arithmetic, exp,
// log, sqrt, tanh, comparisons, where, dtype conversion), so compiled graphs
// with these activations get generated kernels. Each one follows its eager
// kernel's formula step by step (same operation order, same NaN and bound
// semantics), so the two differ only by the rounding of exp/log/tanh. A
// decomposition that calls its own operator means "not expressible for these
// arguments": the pass keeps the node and the lowering reports it.
using ops::to_dtype;

// The floating dtype a float-valued operator computes in (integers -> default float).
Tensor as_float(const Tensor& x) { return to_dtype(x, pw::float_result(x.dtype())); }
Tensor int_c(int64_t v) { return scalar(Scalar(v)); }

// log1p(u) from log alone: when 1 + u rounds, log(1+u) * u / ((1+u) - 1)
// cancels the rounding (Goldberg); when it is exact (u = 0, -1, huge, inf) log(1+u) is.
Tensor log1p_of(const Tensor& u) {
  Tensor w = ops::add(u, c(1.0)), d = ops::sub(w, c(1.0)), lw = ops::log(w);
  return ops::where(ops::eq(d, u), lw, ops::where(ops::eq(w, c(1.0)), u, ops::mul(lw, ops::div(u, d))));
}

// expm1(x) from exp and log: (e - 1) * x / log(e) cancels the rounding of
// e = exp(x) (Kahan); e == 1 means |x| is below rounding, e - 1 == -1 or e - 1
// == e means the subtraction is already exact to rounding (far tails, inf).
Tensor expm1_of(const Tensor& x) {
  Tensor e = ops::exp(x), em1 = ops::sub(e, c(1.0));
  Tensor general = ops::mul(em1, ops::div(x, ops::log(e)));
  Tensor exact = ops::where(ops::eq(em1, e), em1, general);
  return ops::where(ops::eq(e, c(1.0)), x, ops::where(ops::eq(em1, c(-1.0)), em1, exact));
}

// erf in float32 from exp and two polynomials fitted for this file (least
// squares on the relative error, float64): |z| < 1: z + z * P(z^2) (the exact
// leading z keeps the rounding small); otherwise 1 - exp(-z^2) * R(z - 2.5)
// with |z| clamped to 4, where erf already rounds to 1. Evaluated in float32
// the error is at most 1.2 ulp (like a libm erff), so the decomposition is
// only offered for float32; float64 erf stays erf.
constexpr double kErfSmall[] = {
    0.12837916706819952, -0.37612638542470794, 0.11283783827080134, -0.02686551877934777,
    0.005221305907103914, -0.0008488421412689202, 0.00011299802387324894, -9.770074096565492e-06};
constexpr double kErfLarge[] = {
    0.2108063638049418, -0.07434734069176197, 0.024938004799970048, -0.008001654026795504,
    0.0024670047103934273, -0.000733263406695735, 0.00021104965349756237, -5.940006282652257e-05,
    1.5988347727684022e-05, -3.8066294477091354e-06, 1.030902516710673e-06, -4.161573758259004e-07,
    9.42570300594623e-08};

template <size_t N>
Tensor horner(const double (&coef)[N], const Tensor& t) {
  Tensor r = ops::add(ops::mul(t, c(coef[N - 1])), c(coef[N - 2]));
  for (size_t k = N - 2; k-- > 0;) r = ops::add(ops::mul(r, t), c(coef[k]));
  return r;
}

Tensor erf_f32(const Tensor& z) {  // NaN propagates; +-inf gives +-1
  Tensor small = ops::add(z, ops::mul(z, horner(kErfSmall, ops::mul(z, z))));
  Tensor a = ops::abs(z), zc = ops::minimum(a, c(4.0));
  Tensor tail = ops::sub(c(1.0), ops::mul(ops::exp(ops::neg(ops::mul(zc, zc))), horner(kErfLarge, ops::sub(zc, c(2.5)))));
  return ops::where(ops::lt(a, c(1.0)), small, ops::where(ops::lt(z, c(0.0)), ops::neg(tail), tail));
}

using Outs = std::vector<Tensor>;
Outs dec_erf(const std::vector<Tensor>& in, const Attrs&) {
  Tensor x = as_float(in[0]);
  return {x.dtype() == DType::Float32 ? erf_f32(x) : ops::erf(in[0])};
}
Outs dec_silu(const std::vector<Tensor>& in, const Attrs&) {
  return {ops::div(in[0], ops::add(ops::exp(ops::neg(in[0])), c(1.0)))};
}
Outs dec_gelu(const std::vector<Tensor>& in, const Attrs& at) {
  const Tensor& x = in[0];
  if (resolve(UnaryFn::Gelu, at, "gelu") != UnaryFn::GeluTanh) {
    // 16-bit: the float32 form, rounded once (as eager computes it in float32).
    if (x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16)
      return {ops::to_dtype(dec_gelu({ops::to_dtype(x, DType::Float32)}, at)[0], x.dtype())};
    if (x.dtype() != DType::Float32) return {ops::gelu(x, "none")};  // needs a float64 erf
    // Eager's formula, x/2 * erfc(-x/sqrt 2): the same bits as eager where the
    // compiled erfc is eager's (the Stax prelude's float erfc), no cancellation
    // for x < 0, and faster than erf's two polynomials and exp.
    Tensor cdf = ops::erfc(ops::mul(x, c(-0.70710678118654752440)));
    return {ops::mul(ops::mul(x, c(0.5)), cdf)};
  }
  Tensor cube = ops::mul(ops::mul(ops::mul(x, c(0.044715)), x), x);
  Tensor inner = ops::mul(ops::add(x, cube), c(kSqrt2OverPi));
  return {ops::mul(ops::mul(x, c(0.5)), ops::add(ops::tanh(inner), c(1.0)))};
}
Outs dec_mish(const std::vector<Tensor>& in, const Attrs&) {
  return {ops::mul(in[0], ops::tanh(log1p_of(ops::exp(in[0]))))};
}
Outs dec_softplus(const std::vector<Tensor>& in, const Attrs& at) {
  const vec::Params p = params_of(UnaryFn::Softplus, at);
  Tensor bx = ops::mul(in[0], c(p.a));
  return {ops::where(ops::gt(bx, c(p.b)), in[0], ops::div(log1p_of(ops::exp(bx)), c(p.a)))};
}
Outs dec_elu(const std::vector<Tensor>& in, const Attrs& at) {
  const double alpha = params_of(UnaryFn::Elu, at).a;
  return {ops::where(ops::gt(in[0], c(0.0)), in[0], ops::mul(expm1_of(in[0]), c(alpha)))};
}
Outs dec_leaky_relu(const std::vector<Tensor>& in, const Attrs& at) {
  const double slope = params_of(UnaryFn::LeakyRelu, at).a;
  return {ops::where(ops::gt(in[0], c(0.0)), in[0], ops::mul(in[0], c(slope)))};
}
// x < lo ? lo : x, then > hi ? hi : that: a NaN input passes, a NaN bound is ignored, lo > hi gives hi.
Outs dec_hardtanh(const std::vector<Tensor>& in, const Attrs& at) {
  const Tensor& x = in[0];
  const vec::Params p = params_of(UnaryFn::Hardtanh, at);
  Tensor lo = c(p.a), hi = c(p.b);
  if (!is_floating(x.dtype())) {  // the integer kernel truncates the bounds
    if (!std::isfinite(p.a) || !std::isfinite(p.b)) return {ops::hardtanh(x, Scalar(p.a), Scalar(p.b))};
    lo = int_c(static_cast<int64_t>(p.a));
    hi = int_c(static_cast<int64_t>(p.b));
  }
  Tensor l = ops::where(ops::lt(x, lo), lo, x);
  return {ops::where(ops::gt(l, hi), hi, l)};
}
Outs dec_log1p(const std::vector<Tensor>& in, const Attrs&) { return {log1p_of(as_float(in[0]))}; }
Outs dec_expm1(const std::vector<Tensor>& in, const Attrs&) { return {expm1_of(as_float(in[0]))}; }
Outs dec_rsqrt(const std::vector<Tensor>& in, const Attrs&) { return {ops::div(c(1.0), ops::sqrt(as_float(in[0])))}; }
Outs dec_reciprocal(const std::vector<Tensor>& in, const Attrs&) { return {ops::div(c(1.0), as_float(in[0]))}; }
Outs dec_square(const std::vector<Tensor>& in, const Attrs&) {
  Tensor x = in[0].dtype() == DType::Bool ? to_dtype(in[0], DType::Int64) : in[0];
  return {ops::mul(x, x)};
}
Outs dec_sign(const std::vector<Tensor>& in, const Attrs&) {  // NaN -> 0, like the kernel
  const Tensor& x = in[0];
  if (x.dtype() == DType::Bool) return {ops::clone(x)};
  return {ops::sub(to_dtype(ops::gt(x, int_c(0)), x.dtype()), to_dtype(ops::lt(x, int_c(0)), x.dtype()))};
}
// The kernel clamps to [eps, 1 - eps] with both bounds rounded to its compute
// type (a negative eps means no clamp), then takes log(x / (1 - x)).
Outs dec_logit(const std::vector<Tensor>& in, const Attrs& at) {
  Tensor x = as_float(in[0]);
  if (auto eps = at.get_optional_double("eps")) {
    double lo = *eps, hi = 1.0 - *eps;
    if (x.dtype() != DType::Float64) {
      const float lf = static_cast<float>(*eps);
      lo = lf;
      hi = 1.0f - lf;
    }
    if (lo >= 0) {
      x = ops::where(ops::lt(x, c(lo)), c(lo), x);
      x = ops::where(ops::gt(x, c(hi)), c(hi), x);
    }
  }
  return {ops::log(ops::div(x, ops::sub(c(1.0), x)))};
}

// ---------------------------------------------------------------------------
// "exp(Tensor self) -> Tensor" -> "exp_(Tensor(a!) self) -> Tensor(a!)"
const char* inplace_schema_of(const char* iname, const char* schema) {
  std::string is = schema;
  is.replace(0, is.find('('), iname);
  is.replace(is.find("Tensor self"), 11, "Tensor(a!) self");
  is.replace(is.rfind("-> Tensor"), 9, "-> Tensor(a!)");
  return intern_attr_name(is);
}

template <IntoFnAlias Into, InferFn Infer, DFn D, DecomposeFn Dec = nullptr>
void reg_any(const char* name, const char* schema, bool inplace) {
  const char* iname = inplace ? intern_attr_name(std::string(name) + "_") : nullptr;
  BackwardFn bw = nullptr;
  if constexpr (D != nullptr) bw = &unary_backward<D>;
  pw::register_pointwise<Into, Infer>(name, schema, 1, bw, iname, inplace ? inplace_schema_of(iname, schema) : nullptr,
                                      0, Dec);
}

template <UnaryFn F, Rule R, DFn D = nullptr, DecomposeFn Dec = nullptr>
void reg(const char* name, const char* schema, bool inplace = true) {
  reg_any<&unary_into<F, R>, &unary_infer<F, R>, D, Dec>(name, schema, inplace);
}

template <Pred P>
void reg_pred(const char* name, const char* schema, bool inplace) {
  reg_any<&pred_into<P>, &pred_infer<P>, nullptr>(name, schema, inplace);
}

}  // namespace

void register_unary_math_ops() {
  using R = Rule;
  using U = UnaryFn;
  reg<U::Exp, R::FloatValued, d_exp>("exp", "exp(Tensor self) -> Tensor");
  reg<U::Exp2, R::FloatValued, d_exp2>("exp2", "exp2(Tensor self) -> Tensor");
  reg<U::Expm1, R::FloatValued, d_expm1, dec_expm1>("expm1", "expm1(Tensor self) -> Tensor");
  reg<U::Log, R::FloatValued, d_log>("log", "log(Tensor self) -> Tensor");
  reg<U::Log2, R::FloatValued, d_log2>("log2", "log2(Tensor self) -> Tensor");
  reg<U::Log10, R::FloatValued, d_log10>("log10", "log10(Tensor self) -> Tensor");
  reg<U::Log1p, R::FloatValued, d_log1p, dec_log1p>("log1p", "log1p(Tensor self) -> Tensor");
  reg<U::Sqrt, R::FloatValued, d_sqrt>("sqrt", "sqrt(Tensor self) -> Tensor");
  reg<U::Rsqrt, R::FloatValued, d_rsqrt, dec_rsqrt>("rsqrt", "rsqrt(Tensor self) -> Tensor");
  reg<U::Sin, R::FloatValued, d_sin>("sin", "sin(Tensor self) -> Tensor");
  reg<U::Cos, R::FloatValued, d_cos>("cos", "cos(Tensor self) -> Tensor");
  reg<U::Tan, R::FloatValued, d_tan>("tan", "tan(Tensor self) -> Tensor");
  reg<U::Asin, R::FloatValued, d_asin>("asin", "asin(Tensor self) -> Tensor");
  reg<U::Acos, R::FloatValued, d_acos>("acos", "acos(Tensor self) -> Tensor");
  reg<U::Atan, R::FloatValued, d_atan>("atan", "atan(Tensor self) -> Tensor");
  reg<U::Sinh, R::FloatValued, d_sinh>("sinh", "sinh(Tensor self) -> Tensor");
  reg<U::Cosh, R::FloatValued, d_cosh>("cosh", "cosh(Tensor self) -> Tensor");
  reg<U::Tanh, R::FloatValued, d_tanh>("tanh", "tanh(Tensor self) -> Tensor");
  reg<U::Asinh, R::FloatValued, d_asinh>("asinh", "asinh(Tensor self) -> Tensor");
  reg<U::Acosh, R::FloatValued, d_acosh>("acosh", "acosh(Tensor self) -> Tensor");
  reg<U::Atanh, R::FloatValued, d_atanh>("atanh", "atanh(Tensor self) -> Tensor");
  reg<U::Erf, R::FloatValued, d_erf, dec_erf>("erf", "erf(Tensor self) -> Tensor");
  reg<U::Erfc, R::FloatValued, d_erfc>("erfc", "erfc(Tensor self) -> Tensor");
  reg<U::Erfinv, R::FloatValued, d_erfinv>("erfinv", "erfinv(Tensor self) -> Tensor");
  reg<U::Sigmoid, R::FloatValued, d_sigmoid>("sigmoid", "sigmoid(Tensor self) -> Tensor");
  reg<U::Logit, R::FloatValued, d_logit, dec_logit>("logit", "logit(Tensor self, float? eps=None) -> Tensor");
  reg<U::Reciprocal, R::FloatValued, d_reciprocal, dec_reciprocal>("reciprocal", "reciprocal(Tensor self) -> Tensor");
  reg<U::Relu, R::SameNoBool, d_relu>("relu", "relu(Tensor self) -> Tensor");
  reg<U::Gelu, R::FloatOnly, d_gelu, dec_gelu>("gelu", "gelu(Tensor self, *, str approximate='none') -> Tensor");
  reg<U::Silu, R::FloatOnly, d_silu, dec_silu>("silu", "silu(Tensor self) -> Tensor");
  reg<U::Mish, R::FloatOnly, d_mish, dec_mish>("mish", "mish(Tensor self) -> Tensor");
  reg<U::Softplus, R::FloatOnly, d_softplus, dec_softplus>("softplus", "softplus(Tensor self, Scalar beta=1, Scalar threshold=20) -> Tensor", false);
  reg<U::Elu, R::FloatOnly, d_elu, dec_elu>("elu", "elu(Tensor self, Scalar alpha=1.0) -> Tensor");
  reg<U::LeakyRelu, R::FloatOnly, d_leaky_relu, dec_leaky_relu>("leaky_relu", "leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor");
  reg<U::Hardtanh, R::SameNoBool, d_hardtanh, dec_hardtanh>("hardtanh", "hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor");
  reg<U::Abs, R::SameNoBool, d_abs>("abs", "abs(Tensor self) -> Tensor");
  reg<U::Neg, R::SameNoBool, d_neg>("neg", "neg(Tensor self) -> Tensor");
  reg<U::Sign, R::SameAny, zero_grad, dec_sign>("sign", "sign(Tensor self) -> Tensor");
  reg<U::Floor, R::SameNoBool, zero_grad>("floor", "floor(Tensor self) -> Tensor");
  reg<U::Ceil, R::SameNoBool, zero_grad>("ceil", "ceil(Tensor self) -> Tensor");
  reg<U::Round, R::SameNoBool, zero_grad>("round", "round(Tensor self, *, int decimals=0) -> Tensor");
  reg<U::Trunc, R::SameNoBool, zero_grad>("trunc", "trunc(Tensor self) -> Tensor");
  reg<U::Frac, R::FloatOnly, d_frac>("frac", "frac(Tensor self) -> Tensor");
  reg<U::Square, R::SameAny, d_square, dec_square>("square", "square(Tensor self) -> Tensor");
  reg_pred<Pred::IsNan>("isnan", "isnan(Tensor self) -> Tensor", false);
  reg_pred<Pred::IsInf>("isinf", "isinf(Tensor self) -> Tensor", false);
  reg_pred<Pred::IsFinite>("isfinite", "isfinite(Tensor self) -> Tensor", false);
  reg_pred<Pred::LogicalNot>("logical_not", "logical_not(Tensor self) -> Tensor", true);
  reg_any<&bitwise_not_into, &bitwise_not_infer, nullptr>("bitwise_not", "bitwise_not(Tensor self) -> Tensor", true);
}

}  // namespace tp
