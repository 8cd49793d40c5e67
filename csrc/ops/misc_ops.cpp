// Miscellaneous PyTorch operators (isclose, nan_to_num, diag, trace, meshgrid,
// cross, cdist, logaddexp, diff, copysign, aliases, ...). All are implicit
// composites: the dispatcher runs their decompositions, so autograd and
// tracing only ever see the primitive operators they are made of.
#include <cmath>
#include <numbers>
#include <limits>

#include "core/error.h"
#include "ops/dispatch.h"
#include "ops/families.h"
#include "ops/ops.h"
#include "ops/registry.h"
#include "ops/type_promotion.h"

namespace tp {
namespace {

using ops::scalar;
using TVec = std::vector<Tensor>;

int64_t wrap(int64_t d, int64_t n, const char* op) {
  const int64_t m = std::max<int64_t>(n, 1);
  TP_CHECK(d >= -m && d < m, IndexError, op, ": dimension out of range (expected to be in range of [", -m, ", ",
           m - 1, "], but got ", d, ")");
  return d < 0 ? d + m : d;
}

// A 0-d tensor of `dtype`: unlike a wrapped Python number it keeps bool
// results bool and never changes the promoted dtype of its partner.
Tensor const0(const Scalar& v, DType dtype) { return ops::full({}, v, dtype); }

// Integer and bool inputs of float-valued functions compute in the default float.
Tensor as_float(const Tensor& x) {
  return is_floating(x.dtype()) ? x : ops::to_dtype(x, default_float_dtype());
}
DType float_result(const Tensor& a, const Tensor& b) {
  const DType t = result_type(TVec{a, b});
  return is_floating(t) ? t : default_float_dtype();
}

// ---- comparisons ----
TVec isclose_dec(const TVec& in, const Attrs& at) {
  const Tensor &a = in[0], &b = in[1];
  TP_CHECK(a.dtype() == b.dtype(), TypeError, "isclose: expected both inputs to have the same dtype, got ",
           dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  const double rtol = at.get_double("rtol"), atol = at.get_double("atol");
  TP_CHECK(rtol >= 0 && atol >= 0, ValueError, "isclose: rtol and atol must be non-negative, got rtol=", rtol,
           " atol=", atol);
  Tensor close = ops::eq(a, b);  // also catches equal infinities
  if (a.dtype() == DType::Bool) return {close};
  // Integers compare in float64 so that the difference cannot overflow.
  const Tensor x = is_floating(a.dtype()) ? a : ops::to_dtype(a, DType::Float64);
  const Tensor y = is_floating(b.dtype()) ? b : ops::to_dtype(b, DType::Float64);
  const Tensor diff = ops::abs(ops::sub(x, y));
  const Tensor tol = ops::add(ops::mul(ops::abs(y), scalar(rtol)), scalar(atol));
  close = ops::logical_or(close, ops::logical_and(ops::isfinite(diff), ops::le(diff, tol)));
  if (at.get_or<bool>("equal_nan", false))
    close = ops::logical_or(close, ops::logical_and(ops::isnan(x), ops::isnan(y)));
  return {close};
}

// ---- special values ----
double finite_limit(DType t, bool high) {
  double m = std::numeric_limits<double>::max();
  if (t == DType::Float32) m = std::numeric_limits<float>::max();
  if (t == DType::Float16) m = 65504.0;
  if (t == DType::BFloat16) m = 3.3895313892515355e38;
  return high ? m : -m;
}

Tensor nan_to_num_impl(const Tensor& x, const Attrs& at) {
  if (!is_floating(x.dtype())) return ops::clone(x);
  const DType t = x.dtype();
  const double nan = at.get_optional_double("nan").value_or(0.0);
  const double pos = at.get_optional_double("posinf").value_or(finite_limit(t, true));
  const double neg = at.get_optional_double("neginf").value_or(finite_limit(t, false));
  const double inf = std::numeric_limits<double>::infinity();
  Tensor r = ops::where(ops::eq(x, scalar(-inf)), const0(neg, t), x);
  r = ops::where(ops::eq(x, scalar(inf)), const0(pos, t), r);
  return ops::where(ops::isnan(x), const0(nan, t), r);
}
TVec nan_to_num_dec(const TVec& in, const Attrs& at) { return {nan_to_num_impl(in[0], at)}; }

// In-place composites: compute out of place, then copy_ into self (copy_
// bumps the version counter and records the write for autograd).
TVec write_back(const Tensor& self, const Tensor& value) {
  Tensor s = self;
  ops::copy_(s, value);
  return {s};
}
TVec nan_to_num__dec(const TVec& in, const Attrs& at) { return write_back(in[0], nan_to_num_impl(in[0], at)); }

// ---- aliases ----
TVec clip_dec(const TVec& in, const Attrs&) { return {ops::clamp(in[0], in[1], in[2])}; }
TVec clip__dec(const TVec& in, const Attrs&) {
  Tensor s = in[0];
  return {ops::inplace("clamp_", s, {in[1], in[2]})};
}

// An alias forwards its inputs and attributes unchanged to the named operator.
template <const char* kTarget>
TVec alias_dec(const TVec& in, const Attrs& at) { return call_op(get_op(kTarget), in, at); }

constexpr char kAbs[] = "abs", kAbs_[] = "abs_", kNeg[] = "neg", kNeg_[] = "neg_", kTrunc[] = "trunc",
               kTrunc_[] = "trunc_", kDiv[] = "div", kDiv_[] = "div_", kMul[] = "mul", kMul_[] = "mul_",
               kSub[] = "sub", kSub_[] = "sub_";

TVec positive_dec(const TVec& in, const Attrs&) {
  TP_CHECK(in[0].dtype() != DType::Bool, TypeError,
           "positive: the + operator on a bool tensor is not supported; use logical_not or ~ for negation");
  return {in[0]};
}

// ---- matrices ----
// 1-D -> square matrix with x on diagonal k; 2-D -> a copy of diagonal k.
TVec diag_dec(const TVec& in, const Attrs& at) {
  const Tensor& x = in[0];
  const int64_t k = at.get_int("diagonal");
  TP_CHECK(x.dim() == 1 || x.dim() == 2, ValueError, "diag: expected a 1-D or 2-D tensor, got shape ",
           shape_str(x.sizes()));
  if (x.dim() == 2) return {ops::clone(ops::diagonal(x, k, 0, 1))};
  const int64_t len = x.sizes()[0], ak = k < 0 ? -k : k, n = len + ak;
  // Entry (i, j) lies on diagonal k when j - i == k; it holds x[i] (k >= 0)
  // or x[j] (k < 0), so x padded to n broadcasts along rows or columns.
  const Tensor idx = ops::arange_on(x, n);  // on x's device, as the padding below
  const Tensor mask = ops::eq(ops::add(ops::unsqueeze(idx, 1), scalar(k)), ops::unsqueeze(idx, 0));
  const Tensor padded = ak == 0 ? x : ops::cat({x, ops::full_on(x, {ak}, Scalar(int64_t{0}), x.dtype())}, 0);
  const Tensor src = k >= 0 ? ops::unsqueeze(padded, 1) : ops::unsqueeze(padded, 0);
  return {ops::where(mask, src, const0(Scalar(int64_t{0}), x.dtype()))};
}

TVec trace_dec(const TVec& in, const Attrs&) {
  TP_CHECK(in[0].dim() == 2, ValueError, "trace: expected a matrix, got shape ", shape_str(in[0].sizes()));
  return {ops::sum(ops::diagonal(in[0], 0, 0, 1))};
}

TVec tril__dec(const TVec& in, const Attrs& at) { return write_back(in[0], ops::tril(in[0], at.get_int("diagonal"))); }
TVec triu__dec(const TVec& in, const Attrs& at) { return write_back(in[0], ops::triu(in[0], at.get_int("diagonal"))); }

// The main diagonal of an n-D tensor sits every `step` elements of its
// row-major order; `wrap` lets a tall matrix continue past its square part.
TVec fill_diagonal__dec(const TVec& in, const Attrs& at) {
  const Tensor& x = in[0];
  TP_CHECK(x.dim() >= 2, ValueError, "fill_diagonal_: dimensions must larger than 1, got shape ",
           shape_str(x.sizes()));
  const auto& s = x.sizes();
  int64_t step = 0, inner = 1, side = s[0];
  for (int64_t d = x.dim() - 1; d >= 0; --d) {
    if (x.dim() > 2)
      TP_CHECK(s[d] == s[0], ValueError, "fill_diagonal_: all dimensions of input must be of equal length, got shape ",
               shape_str(s));
    step += inner;
    inner *= s[d];
    side = std::min(side, s[d]);
  }
  if (x.numel() == 0) return {x};
  const bool wrap_rows = x.dim() == 2 && at.get_or<bool>("wrap", false);
  const int64_t limit = wrap_rows ? x.numel() : side * step;
  // Flat positions 0..numel-1 on x's device (a host arange would not combine with a CUDA x).
  const Tensor p = ops::arange_on(x, x.numel());
  Tensor mask = ops::logical_and(ops::eq(ops::remainder(p, scalar(step)), scalar(int64_t{0})),
                                 ops::lt(p, scalar(limit)));
  mask = ops::reshape(mask, s);
  return write_back(x, ops::where(mask, const0(at.get_scalar("fill_value"), x.dtype()), x));
}

// ---- grids ----
TVec meshgrid_dec(const TVec& in, const Attrs& at) {
  const std::string indexing = at.is_none("indexing") ? "ij" : at.get_str("indexing");
  TP_CHECK(indexing == "ij" || indexing == "xy", ValueError,
           "meshgrid: indexing must be one of \"xy\" or \"ij\", but received: ", indexing);
  TP_CHECK(!in.empty(), ValueError, "meshgrid: expects a non-empty TensorList");
  const size_t n = in.size();
  Shape shape;
  for (size_t i = 0; i < n; ++i) {
    TP_CHECK(in[i].dim() <= 1, ValueError, "meshgrid: expects scalar or 1-D tensors, got shape ",
             shape_str(in[i].sizes()), " at entry ", i);
    TP_CHECK(in[i].dtype() == in[0].dtype(), TypeError, "meshgrid: expects all tensors to have the same dtype, got ",
             dtype_name(in[0].dtype()), " and ", dtype_name(in[i].dtype()));
    shape.push_back(in[i].numel());
  }
  // 'xy' swaps the roles of the first two inputs (Cartesian, not matrix, order).
  std::vector<size_t> pos(n);
  for (size_t i = 0; i < n; ++i) pos[i] = i;
  if (indexing == "xy" && n >= 2) std::swap(pos[0], pos[1]), std::swap(shape[0], shape[1]);
  TVec out;
  for (size_t i = 0; i < n; ++i) {
    Shape view(n, 1);
    view[pos[i]] = -1;
    out.push_back(ops::expand(ops::reshape(in[i], view), shape));
  }
  return out;
}

TVec cartesian_prod_dec(const TVec& in, const Attrs&) {
  TP_CHECK(!in.empty(), ValueError, "cartesian_prod: expects a non-empty TensorList");
  for (auto& t : in)
    TP_CHECK(t.dim() == 1, ValueError, "cartesian_prod: expects 1-D tensors, got shape ", shape_str(t.sizes()));
  if (in.size() == 1) return {in[0]};
  TVec cols;
  for (auto& g : meshgrid_dec(in, Attrs{{"indexing", std::string("ij")}})) cols.push_back(ops::flatten(g));
  return {ops::stack(cols, 1)};
}

// ---- vector geometry ----
Shape broadcast2(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape r(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TP_CHECK(x == y || x == 1 || y == 1, ValueError, op, ": shapes ", shape_str(a), " and ", shape_str(b),
             " cannot be broadcast together");
    r[i] = x == 1 ? y : x;
  }
  return r;
}

TVec cross_dec(const TVec& in, const Attrs& at) {
  const Shape shape = broadcast2(in[0].sizes(), in[1].sizes(), "cross");
  const int64_t nd = static_cast<int64_t>(shape.size());
  int64_t d = -1;
  if (at.is_none("dim")) {
    for (int64_t i = 0; i < nd && d < 0; ++i)
      if (shape[i] == 3) d = i;
    TP_CHECK(d >= 0, ValueError, "cross: no dimension of size 3 in input shapes ", shape_str(in[0].sizes()), " and ",
             shape_str(in[1].sizes()));
  } else {
    d = wrap(at.get_int("dim"), nd, "cross");
  }
  TP_CHECK(nd > 0 && shape[d] == 3, ValueError, "cross: dimension ", d, " does not have size 3 in shapes ",
           shape_str(in[0].sizes()), " and ", shape_str(in[1].sizes()));
  const Tensor a = ops::expand(in[0], shape), b = ops::expand(in[1], shape);
  auto c = [&](const Tensor& t, int64_t i) { return ops::select(t, d, i); };
  auto comp = [&](int64_t i, int64_t j) { return ops::sub(ops::mul(c(a, i), c(b, j)), ops::mul(c(a, j), c(b, i))); };
  return {ops::stack({comp(1, 2), comp(2, 0), comp(0, 1)}, d)};
}

// Pairwise distances through explicit differences: exact where the matmul
// expansion |x|^2 - 2xy + |y|^2 cancels catastrophically.
TVec cdist_dec(const TVec& in, const Attrs& at) {
  const Tensor &x1 = in[0], &x2 = in[1];
  TP_CHECK(x1.dim() >= 2 && x2.dim() >= 2 && x1.sizes().back() == x2.sizes().back(), ValueError,
           "cdist: expected inputs of shape [..., P, M] and [..., R, M], got ", shape_str(x1.sizes()), " and ",
           shape_str(x2.sizes()));
  TP_CHECK(is_floating(x1.dtype()) && is_floating(x2.dtype()), TypeError,
           "cdist: only supports floating-point dtypes, got ", dtype_name(x1.dtype()), " and ", dtype_name(x2.dtype()));
  const double p = at.get_double("p");
  TP_CHECK(p >= 0, ValueError, "cdist: only supports non-negative p values, got ", p);
  // compute_mode picks PyTorch's matmul shortcut for p = 2; the direct difference
  // used here is the accurate form for every mode, so the mode is only validated.
  if (!at.is_none("compute_mode")) {
    const std::string& mode = at.get_str("compute_mode");
    TP_CHECK(mode == "use_mm_for_euclid_dist_if_necessary" || mode == "use_mm_for_euclid_dist" ||
                 mode == "donot_use_mm_for_euclid_dist",
             ValueError, "cdist: ", mode, " is not a valid value for compute_mode");
  }
  const Tensor d = ops::sub(ops::unsqueeze(x1, -2), ops::unsqueeze(x2, -3));
  return {ops::norm(d, Scalar(p), ops::Dims{-1})};
}

TVec dist_dec(const TVec& in, const Attrs& at) {
  return {ops::norm(ops::sub(in[0], in[1]), at.get_scalar("p"))};
}

// ---- log-space sums ----
// max + log1p(exp(-|a - b|)); equal inputs (including equal infinities, where
// a - b is NaN) use a difference of 0.
Tensor logaddexp_impl(const Tensor& a0, const Tensor& b0) {
  const DType t = float_result(a0, b0);
  const Tensor a = ops::to_dtype(a0, t), b = ops::to_dtype(b0, t);
  const Tensor same = ops::eq(a, b);
  const Tensor d = ops::where(same, const0(Scalar(0.0), t), ops::sub(a, b));
  return ops::add(ops::maximum(a, b), ops::log1p(ops::exp(ops::neg(ops::abs(d)))));
}
TVec logaddexp_dec(const TVec& in, const Attrs&) { return {logaddexp_impl(in[0], in[1])}; }

// Inclusive scan by doubling: log2(n) rounds of logaddexp with a copy shifted
// by 1, 2, 4, ... (padded with -inf). Every step is a stable pairwise
// logaddexp, so no element underflows however far it is from the maximum.
TVec logcumsumexp_dec(const TVec& in, const Attrs& at) {
  Tensor y = as_float(in[0]);
  if (y.dim() == 0) return {ops::clone(y)};
  const int64_t d = wrap(at.get_int("dim"), y.dim(), "logcumsumexp");
  const int64_t n = y.sizes()[d];
  if (n <= 1 || y.numel() == 0) return {ops::clone(y)};
  for (int64_t s = 1; s < n; s *= 2) {
    // -inf of y's first s positions along d: the shape and device of y's (a CUDA y gets a CUDA pad).
    const Tensor pad = ops::full_like(ops::slice(y, d, 0, s, 1), Scalar(-std::numeric_limits<double>::infinity()));
    const Tensor shifted = ops::cat({pad, ops::slice(y, d, 0, n - s, 1)}, d);
    y = logaddexp_impl(y, shifted);
  }
  return {y};
}

// ---- finite differences ----
TVec diff_dec(const TVec& in, const Attrs& at) {
  Tensor x = in[0];
  TP_CHECK(x.dim() >= 1, ValueError, "diff: expects input to be at least one-dimensional");
  const int64_t n = at.get_int("n");
  TP_CHECK(n >= 0, ValueError, "diff: order must be non-negative but got ", n);
  if (n == 0) return {ops::clone(x)};  // PyTorch: the input itself (a copy); prepend/append are not used
  const int64_t d = wrap(at.get_int("dim"), x.dim(), "diff");
  if (in[1].defined() || in[2].defined()) {
    TVec parts;
    if (in[1].defined()) parts.push_back(in[1]);
    parts.push_back(x);
    if (in[2].defined()) parts.push_back(in[2]);
    x = ops::cat(parts, d);
  }
  for (int64_t i = 0; i < n && x.sizes()[d] > 0; ++i) {
    const int64_t len = x.sizes()[d];
    const Tensor hi = ops::slice(x, d, 1, len, 1), lo = ops::slice(x, d, 0, len - 1, 1);
    x = x.dtype() == DType::Bool ? ops::logical_xor(hi, lo) : ops::sub(hi, lo);
  }
  return {x};
}

// ---- sign manipulation ----
// True for negative numbers and -0.0 (1 / -0.0 is -inf).
Tensor signbit_impl(const Tensor& x) {
  if (x.dtype() == DType::Bool) return ops::zeros_like(x, DType::Bool);
  const Tensor neg = ops::lt(x, scalar(int64_t{0}));
  if (!is_floating(x.dtype())) return neg;
  const Tensor neg_zero = ops::logical_and(ops::eq(x, scalar(0.0)), ops::lt(ops::reciprocal(x), scalar(0.0)));
  return ops::logical_or(neg, neg_zero);
}
TVec signbit_dec(const TVec& in, const Attrs&) { return {signbit_impl(in[0])}; }

TVec copysign_dec(const TVec& in, const Attrs&) {
  const DType t = float_result(in[0], in[1]);
  const Tensor mag = ops::abs(ops::to_dtype(in[0], t));
  return {ops::where(signbit_impl(in[1]), ops::neg(mag), mag)};
}

TVec heaviside_dec(const TVec& in, const Attrs&) {
  const Tensor &x = in[0], &v = in[1];
  TP_CHECK(x.dtype() == v.dtype(), TypeError, "heaviside: input and values must have the same dtype, got ",
           dtype_name(x.dtype()), " and ", dtype_name(v.dtype()));
  const Tensor step = ops::to_dtype(ops::gt(x, scalar(int64_t{0})), x.dtype());
  return {ops::where(ops::eq(x, scalar(int64_t{0})), v, step)};
}

// x * log(y), but 0 where x == 0 (even for y == 0 or inf); NaN y stays NaN.
TVec xlogy_dec(const TVec& in, const Attrs&) {
  const DType t = float_result(in[0], in[1]);
  const Tensor x = ops::to_dtype(in[0], t), y = ops::to_dtype(in[1], t);
  const Tensor r = ops::where(ops::eq(x, scalar(0.0)), const0(Scalar(0.0), t), ops::mul(x, ops::log(y)));
  return {ops::where(ops::isnan(y), y, r)};
}

template <int kToRad>
TVec angle_dec(const TVec& in, const Attrs&) {
  const double f = kToRad ? std::numbers::pi / 180.0 : 180.0 / std::numbers::pi;
  return {ops::mul(as_float(in[0]), scalar(f))};
}

TVec float_power_dec(const TVec& in, const Attrs&) {
  return {ops::pow(ops::to_dtype(in[0], DType::Float64), ops::to_dtype(in[1], DType::Float64))};
}

void composite(const char* name, const char* schema, int num_inputs, DecomposeFn dec, uint32_t extra = 0) {
  register_op({.name = name, .schema = schema, .tags = kComposite | kAllDTypes | extra, .num_inputs = num_inputs,
               .decompose = dec});
}
// The in-place variant of an alias (the target is looked up when called:
// the registry cannot be queried while it is being filled).
void inplace_alias(const char* name, const char* schema, int num_inputs, const char*, DecomposeFn dec) {
  composite(name, schema, num_inputs, dec, kInplace);
}

}  // namespace

void register_misc_ops() {
  composite("isclose",
            "isclose(Tensor self, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False) -> Tensor",
            2, &isclose_dec);
  composite("nan_to_num", "nan_to_num(Tensor self, float? nan=0.0, float? posinf=None, float? neginf=None) -> Tensor",
            1, &nan_to_num_dec);
  composite("nan_to_num_",
            "nan_to_num_(Tensor(a!) self, float? nan=0.0, float? posinf=None, float? neginf=None) -> Tensor(a!)", 1,
            &nan_to_num__dec, kInplace);
  composite("clip", "clip(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor", 3, &clip_dec);
  inplace_alias("clip_", "clip_(Tensor(a!) self, Tensor? min=None, Tensor? max=None) -> Tensor(a!)", 3, "clamp_",
                &clip__dec);
  composite("diag", "diag(Tensor self, int diagonal=0) -> Tensor", 1, &diag_dec);
  composite("trace", "trace(Tensor self) -> Tensor", 1, &trace_dec);
  composite("tril_", "tril_(Tensor(a!) self, int diagonal=0) -> Tensor(a!)", 1, &tril__dec, kInplace);
  composite("triu_", "triu_(Tensor(a!) self, int diagonal=0) -> Tensor(a!)", 1, &triu__dec, kInplace);
  composite("fill_diagonal_", "fill_diagonal_(Tensor(a!) self, Scalar fill_value, bool wrap=False) -> Tensor(a!)", 1,
            &fill_diagonal__dec, kInplace);
  composite("meshgrid", "meshgrid(Tensor[] tensors, *, str? indexing=None) -> Tensor[]", -1, &meshgrid_dec);
  composite("cartesian_prod", "cartesian_prod(Tensor[] tensors) -> Tensor", -1, &cartesian_prod_dec);
  composite("cross", "cross(Tensor self, Tensor other, int? dim=None) -> Tensor", 2, &cross_dec);
  composite("cdist", "cdist(Tensor x1, Tensor x2, float p=2.0, str? compute_mode=None) -> Tensor", 2, &cdist_dec);
  composite("dist", "dist(Tensor self, Tensor other, Scalar p=2) -> Tensor", 2, &dist_dec);
  composite("logaddexp", "logaddexp(Tensor self, Tensor other) -> Tensor", 2, &logaddexp_dec);
  composite("logcumsumexp", "logcumsumexp(Tensor self, int dim) -> Tensor", 1, &logcumsumexp_dec);
  composite("diff", "diff(Tensor self, int n=1, int dim=-1, Tensor? prepend=None, Tensor? append=None) -> Tensor", 3,
            &diff_dec);
  composite("heaviside", "heaviside(Tensor self, Tensor values) -> Tensor", 2, &heaviside_dec);
  composite("signbit", "signbit(Tensor self) -> Tensor", 1, &signbit_dec);
  composite("copysign", "copysign(Tensor self, Tensor other) -> Tensor", 2, &copysign_dec);
  composite("xlogy", "xlogy(Tensor self, Tensor other) -> Tensor", 2, &xlogy_dec);
  composite("deg2rad", "deg2rad(Tensor self) -> Tensor", 1, &angle_dec<1>);
  composite("rad2deg", "rad2deg(Tensor self) -> Tensor", 1, &angle_dec<0>);
  composite("float_power", "float_power(Tensor self, Tensor exponent) -> Tensor", 2, &float_power_dec);
  composite("positive", "positive(Tensor self) -> Tensor", 1, &positive_dec);
  // PyTorch's alternative names.
  composite("absolute", "absolute(Tensor self) -> Tensor", 1, &alias_dec<kAbs>);
  composite("negative", "negative(Tensor self) -> Tensor", 1, &alias_dec<kNeg>);
  composite("fix", "fix(Tensor self) -> Tensor", 1, &alias_dec<kTrunc>);
  composite("true_divide", "true_divide(Tensor self, Tensor other) -> Tensor", 2, &alias_dec<kDiv>);
  composite("multiply", "multiply(Tensor self, Tensor other) -> Tensor", 2, &alias_dec<kMul>);
  composite("subtract", "subtract(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor", 2, &alias_dec<kSub>);
  composite("divide", "divide(Tensor self, Tensor other, *, str? rounding_mode=None) -> Tensor", 2, &alias_dec<kDiv>);
  inplace_alias("absolute_", "absolute_(Tensor(a!) self) -> Tensor(a!)", 1, kAbs_, &alias_dec<kAbs_>);
  inplace_alias("negative_", "negative_(Tensor(a!) self) -> Tensor(a!)", 1, kNeg_, &alias_dec<kNeg_>);
  inplace_alias("fix_", "fix_(Tensor(a!) self) -> Tensor(a!)", 1, kTrunc_, &alias_dec<kTrunc_>);
  inplace_alias("true_divide_", "true_divide_(Tensor(a!) self, Tensor other) -> Tensor(a!)", 2, kDiv_,
                &alias_dec<kDiv_>);
  inplace_alias("multiply_", "multiply_(Tensor(a!) self, Tensor other) -> Tensor(a!)", 2, kMul_, &alias_dec<kMul_>);
  inplace_alias("subtract_", "subtract_(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)", 2, kSub_,
                &alias_dec<kSub_>);
  inplace_alias("divide_", "divide_(Tensor(a!) self, Tensor other, *, str? rounding_mode=None) -> Tensor(a!)", 2,
                kDiv_, &alias_dec<kDiv_>);
}

}  // namespace tp
