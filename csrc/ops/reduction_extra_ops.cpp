// Reductions that need a whole slice at once or return more than a value:
// argmax/argmin, max.dim/min.dim (values + indices), max.other/min.other,
// var/std (+ var_mean/std_mean), norm, logsumexp, cumsum/cumprod.
//
// Their kernels read the input through reduce::rows_last (kept dims first,
// reduced dims last, contiguous): each output then owns one contiguous row,
// which keeps the loops simple; none of these is on the measured fast path.
#include <cmath>
#include <limits>
#include <tuple>

#include "ops/api_math.h"
#include "ops/api_shape_index.h"
#include "ops/families.h"
#include "ops/reduce_kernel.h"
#include "ops/reduction_args.h"
#include "ops/reduction_grad.h"
#include "ops/registry.h"

// GCC 12 warns falsely about the attribute initializer lists below.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace tp {
namespace {
using reduce::Rows;
using reduce::rows_last;
using ops::Dims;

using reduce::count_of;
using reduce::dims_of;
using reduce::keepdim_of;
using reduce::mask_of;

Shape out_shape(const char* op, const TensorMeta& in, const Attrs& attrs) {
  return reduced_shape(in.sizes, mask_of(op, static_cast<int64_t>(in.sizes.size()), attrs), keepdim_of(attrs));
}
void check_floating(const char* op, DType dt) {
  TP_CHECK(is_floating(dt), TypeError, op, ": expected a floating-point input but got dtype ", dtype_name(dt));
}
// Slices with no element have no extremum.
void check_nonempty(const char* op, const TensorMeta& in, const Attrs& attrs) {
  auto mask = mask_of(op, static_cast<int64_t>(in.sizes.size()), attrs);
  if (numel(reduced_shape(in.sizes, mask, false)) == 0) return;
  TP_CHECK(count_of(in.sizes, mask) > 0, IndexError, op, ": cannot reduce over a dimension of size 0 (input shape ",
           shape_str(in.sizes), ")");
}

// Runs body(const T* row, int64_t len, int64_t r) for every row, in parallel.
template <class T, class F>
void for_rows(const Rows& rows, const F& body) {
  const T* x = rows.data.data_as<T>();
  const int64_t len = rows.row_len;
  parallel_for(0, rows.rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, len)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) body(x + r * len, len, r);
  });
}

// ---------------------------------------------------------------------------
// argmax / argmin / max.dim / min.dim: the first position of the extremum
// (a NaN counts as the extremum, the first NaN wins).
template <bool IsMax, class T>
int64_t arg_extremum(const T* p, int64_t n) {
  int64_t best = 0;
  T v = p[0];
  if constexpr (std::is_floating_point_v<T>)
    if (v != v) return 0;
  for (int64_t i = 1; i < n; ++i) {
    const T x = p[i];
    if constexpr (std::is_floating_point_v<T>)
      if (x != x) return i;
    if (IsMax ? x > v : x < v) {
      v = x;
      best = i;
    }
  }
  return best;
}

std::vector<TensorMeta> arg_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_nonempty(op.name, in[0], attrs);
  Shape s = out_shape(op.name, in[0], attrs);
  // argmax(dim=None, keepdim=True) keeps every dim as size 1.
  return {TensorMeta::contiguous(std::move(s), DType::Int64)};
}

template <bool IsMax>
std::vector<Tensor> arg_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                            const std::vector<TensorMeta>& om) {
  Tensor idx = alloc_out(om[0]);
  if (idx.numel() == 0) return {idx};
  Rows rows = rows_last(in[0], mask_of(op.name, in[0].dim(), attrs));
  int64_t* o = idx.data_as<int64_t>();
  TP_DISPATCH_ALL(in[0].dtype(), op.name, ([&]<class T>() {
                    for_rows<T>(rows, [&](const T* p, int64_t n, int64_t r) { o[r] = arg_extremum<IsMax>(p, n); });
                  }));
  return {idx};
}

std::vector<TensorMeta> dim_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  wrap_dim(attrs.get_int("dim"), std::max<int64_t>(1, static_cast<int64_t>(in[0].sizes.size())), op.name);
  check_nonempty(op.name, in[0], attrs);
  Shape s = out_shape(op.name, in[0], attrs);
  return {TensorMeta::contiguous(s, in[0].dtype), TensorMeta::contiguous(s, DType::Int64)};
}

template <bool IsMax>
std::vector<Tensor> dim_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                            const std::vector<TensorMeta>& om) {
  Tensor val = alloc_out(om[0]), idx = alloc_out(om[1]);
  if (idx.numel() == 0) return {val, idx};
  Rows rows = rows_last(in[0], mask_of(op.name, in[0].dim(), attrs));
  int64_t* o = idx.data_as<int64_t>();
  TP_DISPATCH_ALL(in[0].dtype(), op.name, ([&]<class T>() {
                    T* v = val.data_as<T>();
                    for_rows<T>(rows, [&](const T* p, int64_t n, int64_t r) {
                      o[r] = arg_extremum<IsMax>(p, n);
                      v[r] = p[o[r]];
                    });
                  }));
  return {val, idx};
}

// The gradient goes to the recorded index only (a one-hot along `dim`).
// Eager's form compares with arange(x.size(dim)); the symbolic joint trace
// cannot follow that length, so its form numbers the positions 1..N with a
// cumulative sum of ones broadcast to x's sizes (an expand the tracer matches
// to x's symbolic shape), a program that does not depend on the sizes.
template <bool SizeFree>
std::vector<Tensor> dim_onehot_backward(const BackwardArgs& a) {
  const Tensor& g = a.grad_outputs[0];
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const Tensor& x = a.inputs[0];
  if (x.dim() == 0) return {ops::reduce_grad(g, x)};
  const int64_t dim = wrap_dim(a.attrs.get_int("dim"), x.dim(), "max.dim");
  auto mask = mask_of("max.dim", x.dim(), a.attrs);
  const bool keep = keepdim_of(a.attrs);
  Tensor idx = ops::as_keepdim(a.outputs[1], x, mask, keep);
  Tensor hit;
  const bool on_host = x.device().kind == Device::Kind::CPU;
  if (SizeFree || !on_host) {
    // Position + 1 along `dim` as a running count of ones. On a device the ones
    // are made there (ones_like follows x; a host tensor would meet the device
    // index in eq), counted in float64 (exact to 2^53), against the index as float64.
    if (on_host) {
      Tensor one = ops::expand(ops::ones(Shape(static_cast<size_t>(x.dim()), 1), DType::Int64), x.sizes());
      hit = ops::eq(ops::cumsum(one, dim), ops::add(idx, ops::scalar(Scalar(int64_t{1}))));
    } else {
      Tensor one = ops::ones_like(x, DType::Float64);
      hit = ops::eq(ops::cumsum(one, dim),
                    ops::add(ops::to_dtype(idx, DType::Float64), ops::scalar(Scalar(1.0))));
    }
  } else {
    Shape pos_shape(static_cast<size_t>(x.dim()), 1);
    pos_shape[dim] = x.sizes()[dim];
    hit = ops::eq(ops::reshape(ops::arange(Scalar(int64_t{0}), Scalar(x.sizes()[dim]), Scalar(int64_t{1}), DType::Int64),
                               pos_shape),
                  idx);
  }
  Tensor gx = ops::where(hit, ops::as_keepdim(g, x, mask, keep), ops::scalar(Scalar(0.0)));
  return {ops::reduce_grad(gx, x)};
}

// max.other / min.other are maximum / minimum.
std::vector<Tensor> max_other_decompose(const std::vector<Tensor>& in, const Attrs&) {
  return {ops::maximum(in[0], in[1])};
}
std::vector<Tensor> min_other_decompose(const std::vector<Tensor>& in, const Attrs&) {
  return {ops::minimum(in[0], in[1])};
}

// ---------------------------------------------------------------------------
// var / std: two passes over each slice in double (mean, then squared
// deviations), divided by max(0, N - correction) like PyTorch.
double correction_of(const Attrs& attrs) {
  if (auto c = attrs.get_optional_double("correction")) return *c;
  return attrs.get_or("unbiased", true) ? 1.0 : 0.0;
}

std::vector<TensorMeta> var_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_floating(op.name, in[0].dtype);
  return {TensorMeta::contiguous(out_shape(op.name, in[0], attrs), in[0].dtype)};
}

template <bool IsStd>
std::vector<Tensor> var_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                            const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  if (out.numel() == 0) return {out};
  Rows rows = rows_last(in[0], mask_of(op.name, in[0].dim(), attrs));
  const double div = std::max(0.0, static_cast<double>(rows.row_len) - correction_of(attrs));
  TP_DISPATCH_FLOATING(in[0].dtype(), op.name, ([&]<class T>() {
                         T* o = out.data_as<T>();
                         for_rows<T>(rows, [&](const T* p, int64_t n, int64_t r) {
                           double s = 0;
                           for (int64_t i = 0; i < n; ++i) s += p[i];
                           const double m = s / static_cast<double>(n);
                           double ss = 0;
                           for (int64_t i = 0; i < n; ++i) ss += (p[i] - m) * (p[i] - m);
                           const double v = ss / div;
                           o[r] = static_cast<T>(IsStd ? std::sqrt(v) : v);
                         });
                       }));
  return {out};
}

// d var / d x_i = 2 (x_i - mean) / (N - correction); d std = d var / (2 std).
template <bool IsStd>
std::vector<Tensor> var_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const Tensor& x = a.inputs[0];
  auto mask = mask_of("var", x.dim(), a.attrs);
  const bool keep = keepdim_of(a.attrs);
  const double div = std::max(0.0, static_cast<double>(count_of(x.sizes(), mask)) - correction_of(a.attrs));
  Tensor centered = ops::sub(x, ops::mean(x, dims_of(mask), true));
  Tensor gk = ops::as_keepdim(g, x, mask, keep);
  Tensor scale;
  if (IsStd) {  // where std is 0 the subgradient 0 is taken (as PyTorch does), not 0/0
    Tensor sd = ops::as_keepdim(a.outputs[0], x, mask, keep);
    Tensor zero = ops::eq(sd, ops::scalar(Scalar(0.0)));
    Tensor safe = ops::where(zero, ops::scalar(Scalar(1.0)), sd);
    scale = ops::where(zero, ops::scalar(Scalar(0.0)), ops::div(gk, ops::mul(safe, ops::scalar(Scalar(div)))));
  } else {
    scale = ops::mul(gk, ops::scalar(Scalar(2.0 / div)));
  }
  return {ops::reduce_grad(ops::mul(scale, centered), x)};
}

// The same derivative with N - correction computed by the graph (a symbolic
// joint trace): max(0, N - correction) in float64 from count_tensor, so the
// program does not depend on the sizes (the formula above bakes 2 / div in).
template <bool IsStd>
std::vector<Tensor> var_symbolic_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const Tensor& x = a.inputs[0];
  auto mask = mask_of("var", x.dim(), a.attrs);
  const bool keep = keepdim_of(a.attrs);
  Tensor div = ops::clamp_min(ops::sub(ops::count_tensor(x, mask), ops::scalar(Scalar(correction_of(a.attrs)))),
                              ops::scalar(Scalar(0.0)));
  Tensor centered = ops::sub(x, ops::mean(x, dims_of(mask), true));
  Tensor gk = ops::as_keepdim(g, x, mask, keep);
  Tensor scale;
  if (IsStd) {
    Tensor sd = ops::as_keepdim(a.outputs[0], x, mask, keep);
    Tensor zero = ops::eq(sd, ops::scalar(Scalar(0.0)));
    Tensor safe = ops::where(zero, ops::scalar(Scalar(1.0)), sd);
    scale = ops::where(zero, ops::scalar(Scalar(0.0)), ops::div(gk, ops::mul(safe, ops::to_dtype(div, gk.dtype()))));
  } else {
    scale = ops::mul(gk, ops::to_dtype(ops::div(ops::scalar(Scalar(2.0)), div), gk.dtype()));
  }
  return {ops::reduce_grad(ops::mul(scale, centered), x)};
}

// The same two-pass formula as the kernel (mean, then the sum of squared
// deviations), as tensor ops: Stax decomposes var/std into it and fuses both
// reductions into one kernel. Eager keeps the kernel (it has one).
template <bool IsStd>
std::vector<Tensor> var_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& x = in[0];
  auto mask = mask_of(IsStd ? "std" : "var", x.dim(), attrs);
  const Dims dims = dims_of(mask);
  const double div = std::max(0.0, static_cast<double>(count_of(x.sizes(), mask)) - correction_of(attrs));
  Tensor centered = ops::sub(x, ops::mean(x, dims, true));
  Tensor v = ops::div(ops::sum(ops::mul(centered, centered), dims, keepdim_of(attrs)), ops::scalar(Scalar(div)));
  return {IsStd ? ops::sqrt(v) : v};
}

template <bool IsStd>
std::vector<Tensor> var_mean_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  auto mask = mask_of(IsStd ? "std_mean" : "var_mean", in[0].dim(), attrs);
  std::optional<Dims> dims;
  if (!attrs.is_none("dim")) dims = dims_of(mask);
  const double c = correction_of(attrs);
  const bool keep = keepdim_of(attrs);
  Tensor v = IsStd ? ops::std_dev(in[0], dims, c, keep) : ops::var(in[0], dims, c, keep);
  return {v, ops::mean(in[0], dims_of(mask), keep)};
}

// ---------------------------------------------------------------------------
// norm: the vector p-norm over the reduced dims ('fro' is p = 2).
double p_of(const OpDef& op, const Attrs& attrs) {
  const AttrValue* v = attrs.find("p");
  if (v && std::holds_alternative<std::string>(*v)) {
    const std::string& s = std::get<std::string>(*v);
    TP_CHECK(s == "fro", ValueError, op.name, ": unsupported norm type '", s, "' (supported: a number or 'fro')");
    return 2.0;
  }
  return attrs.get_optional_double("p").value_or(2.0);
}

std::vector<TensorMeta> norm_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_floating(op.name, in[0].dtype);
  p_of(op, attrs);
  return {TensorMeta::contiguous(out_shape(op.name, in[0], attrs), in[0].dtype)};
}

template <class T>
double row_norm(const T* x, int64_t n, double p) {
  double acc = 0;
  if (std::isinf(p)) {
    acc = n ? std::fabs(static_cast<double>(x[0])) : (p > 0 ? 0.0 : INFINITY);
    for (int64_t i = 0; i < n; ++i) {
      const double a = std::fabs(static_cast<double>(x[i]));
      if (a != a) return a;
      acc = p > 0 ? std::max(acc, a) : std::min(acc, a);
    }
    return acc;
  }
  if (p == 0) {
    for (int64_t i = 0; i < n; ++i) acc += x[i] != T(0);
    return acc;
  }
  if (p == 1) {
    for (int64_t i = 0; i < n; ++i) acc += std::fabs(static_cast<double>(x[i]));
    return acc;
  }
  if (p == 2) {
    for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    return std::sqrt(acc);
  }
  for (int64_t i = 0; i < n; ++i) acc += std::pow(std::fabs(static_cast<double>(x[i])), p);
  return std::pow(acc, 1.0 / p);
}

std::vector<Tensor> norm_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                             const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  if (out.numel() == 0) return {out};
  Rows rows = rows_last(in[0], mask_of(op.name, in[0].dim(), attrs));
  const double p = p_of(op, attrs);
  TP_DISPATCH_FLOATING(in[0].dtype(), op.name, ([&]<class T>() {
                         T* o = out.data_as<T>();
                         for_rows<T>(rows, [&](const T* x, int64_t n, int64_t r) { o[r] = static_cast<T>(row_norm(x, n, p)); });
                       }));
  return {out};
}

Tensor sign_of(const Tensor& x) {
  return ops::sub(ops::to_dtype(ops::gt(x, ops::scalar(Scalar(0.0))), x.dtype()),
                  ops::to_dtype(ops::lt(x, ops::scalar(Scalar(0.0))), x.dtype()));
}

// d|x|_p / dx = sign(x) |x|^(p-1) / |x|_p^(p-1), 0 where the norm is 0;
// p = inf splits the gradient between the tied largest |x| like amax.
std::vector<Tensor> norm_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const Tensor& x = a.inputs[0];
  const double p = p_of(get_op("norm"), a.attrs);
  auto mask = mask_of("norm", x.dim(), a.attrs);
  const bool keep = keepdim_of(a.attrs);
  if (p == 0) return {ops::zeros_like(x)};
  Tensor sgn = sign_of(x);
  if (std::isinf(p)) return {ops::mul(sgn, ops::extremum_grad(g, ops::abs(x), a.outputs[0], mask, keep))};
  Tensor gk = ops::as_keepdim(g, x, mask, keep);
  if (p == 1) return {ops::reduce_grad(ops::mul(gk, sgn), x)};
  Tensor nk = ops::as_keepdim(a.outputs[0], x, mask, keep);
  Tensor zero = ops::eq(nk, ops::scalar(Scalar(0.0)));
  Tensor safe = ops::where(zero, ops::scalar(Scalar(1.0)), nk);
  Tensor ratio;
  if (p == 2) {
    ratio = ops::div(x, safe);
  } else {
    Tensor pm1 = ops::scalar(Scalar(p - 1));
    ratio = ops::mul(sgn, ops::exp(ops::mul(ops::sub(ops::log(ops::abs(x)), ops::log(safe)), pm1)));
  }
  Tensor gx = ops::where(zero, ops::scalar(Scalar(0.0)), ops::mul(gk, ratio));
  return {ops::reduce_grad(gx, x)};
}

// ---------------------------------------------------------------------------
// logsumexp: max + log(sum(exp(x - max))), integer inputs promote to float32.
std::vector<TensorMeta> lse_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  DType dt = is_floating(in[0].dtype) ? in[0].dtype : default_float_dtype();
  return {TensorMeta::contiguous(out_shape(op.name, in[0], attrs), dt)};
}

std::vector<Tensor> lse_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                            const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  if (out.numel() == 0) return {out};
  Rows rows = rows_last(convert(in[0], om[0].dtype), mask_of(op.name, in[0].dim(), attrs));
  TP_DISPATCH_FLOATING(out.dtype(), op.name, ([&]<class T>() {
                         T* o = out.data_as<T>();
                         for_rows<T>(rows, [&](const T* x, int64_t n, int64_t r) {
                           T m = reduce::reduce_row<reduce::MaxPolicy<T>>(x, n, 1);
                           if (std::isinf(m) || m != m) {  // all -inf, some +inf, or NaN: the max says it
                             o[r] = m;
                             return;
                           }
                           double s = 0;
                           for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i] - m));
                           o[r] = static_cast<T>(m + std::log(s));
                         });
                       }));
  return {out};
}

// For Stax: the max-shifted form as tensor ops. Where the max is not finite
// (all -inf, some +inf, or NaN) the result is the max itself, as the kernel's.
std::vector<Tensor> lse_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const DType dt = is_floating(in[0].dtype()) ? in[0].dtype() : default_float_dtype();
  Tensor x = ops::to_dtype(in[0], dt);
  const Dims dims = dims_of(mask_of("logsumexp", x.dim(), attrs));
  const bool keep = keepdim_of(attrs);
  for (int64_t d : dims)
    if (x.size(d) == 0)  // an empty reduction is -inf, as the kernel's; amax would refuse it
      return {ops::log(ops::sum(ops::exp(x), dims, keep))};
  Tensor m = ops::amax(x, dims, true);
  Tensor finite = ops::isfinite(m);
  Tensor shift = ops::where(finite, m, ops::scalar(Scalar(0.0)));
  Tensor r = ops::add(ops::log(ops::sum(ops::exp(ops::sub(x, shift)), dims, true)), shift);
  Tensor out = ops::where(finite, r, m);
  return {keep ? out : ops::squeeze_dims(out, dims)};
}

std::vector<Tensor> lse_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const Tensor& x = a.inputs[0];
  auto mask = mask_of("logsumexp", x.dim(), a.attrs);
  const bool keep = keepdim_of(a.attrs);
  Tensor w = ops::exp(ops::sub(x, ops::as_keepdim(a.outputs[0], x, mask, keep)));
  return {ops::reduce_grad(ops::mul(ops::as_keepdim(g, x, mask, keep), w), x)};
}

// ---------------------------------------------------------------------------
// cumsum / cumprod along one dim; bool and integer inputs accumulate in int64.
// Floats accumulate in double; integers wrap through uint64_t.
std::vector<TensorMeta> cum_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  wrap_dim(attrs.get_int("dim"), std::max<int64_t>(1, static_cast<int64_t>(in[0].sizes.size())), op.name);
  DType dt = in[0].dtype;
  if (!attrs.is_none("dtype")) dt = attrs.get<DType>("dtype");
  else if (!is_floating(dt)) dt = DType::Int64;
  return {TensorMeta::contiguous(in[0].sizes, dt)};
}

template <bool IsProd>
std::vector<Tensor> cum_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                            const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  if (out.numel() == 0) return {out};
  Tensor x = as_contiguous(convert(in[0], om[0].dtype));
  const int64_t nd = x.dim(), dim = nd ? wrap_dim(attrs.get_int("dim"), nd, op.name) : 0;
  int64_t outer = 1, inner = 1, D = nd ? x.sizes()[dim] : 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.sizes()[d];
  for (int64_t d = dim + 1; d < nd; ++d) inner *= x.sizes()[d];
  TP_DISPATCH_NUMERIC(out.dtype(), op.name, ([&]<class T>() {
    using A = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
    const T* px = x.data_as<T>();
    T* po = out.data_as<T>();
    // One task per (outer, block of inner columns): columns accumulate side by side.
    constexpr int64_t W = 256;
    const int64_t blocks = (inner + W - 1) / W;
    parallel_for(0, outer * blocks, std::max<int64_t>(1, kGrainSize / (D * std::min(inner, W))), [&](int64_t b, int64_t e) {
      A acc[W];
      for (int64_t t = b; t < e; ++t) {
        const int64_t o = t / blocks, c0 = (t % blocks) * W, w = std::min(W, inner - c0);
        for (int64_t j = 0; j < w; ++j) acc[j] = IsProd ? A(1) : A(0);
        for (int64_t d = 0; d < D; ++d) {
          const int64_t base = (o * D + d) * inner + c0;
          for (int64_t j = 0; j < w; ++j) {
            acc[j] = IsProd ? acc[j] * static_cast<A>(px[base + j]) : acc[j] + static_cast<A>(px[base + j]);
            po[base + j] = static_cast<T>(acc[j]);
          }
        }
      }
    });
  }));
  return {out};
}

// Reverse cumulative sum along `dim`: total - cumsum + self.
Tensor rev_cumsum(const Tensor& g, int64_t dim) {
  return ops::add(ops::sub(ops::sum(g, {dim}, true), ops::cumsum(g, dim)), g);
}

std::vector<Tensor> cumsum_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const Tensor& x = a.inputs[0];
  if (x.dim() == 0) return {ops::reduce_grad(g, x)};
  return {ops::reduce_grad(rev_cumsum(g, wrap_dim(a.attrs.get_int("dim"), x.dim(), "cumsum")), x)};
}

std::vector<Tensor> cumprod_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const Tensor& x = a.inputs[0];
  if (x.dim() == 0) return {ops::reduce_grad(g, x)};
  const int64_t dim = wrap_dim(a.attrs.get_int("dim"), x.dim(), "cumprod");
  return {ops::reduce_grad(ops::cumprod_backward(ops::to_dtype(g, x.dtype()), x, dim), x)};
}

// _cumprod_backward(grad, self, dim): exact also with zeros in a slice. With z
// the first zero: positions before z get sum_{j>=i} g_j out_j / x_i (out_j is
// 0 from z on), position z gets prefix(z-1) * sum_{j>=z} g_j prod_{z<k<=j} x_k,
// positions after z get 0 (their products all contain x_z = 0).
std::vector<TensorMeta> cumprod_bw_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_floating(op.name, in[1].dtype);
  return {TensorMeta::contiguous(in[1].sizes, in[1].dtype)};
}

template <class T>
void cumprod_bw_slice(const T* g, const T* x, T* o, int64_t n, int64_t s) {
  int64_t z = n;
  for (int64_t i = 0; i < n; ++i)
    if (x[i * s] == T(0)) { z = i; break; }
  double prefix = 1, tail = 0;  // tail = sum_{j>=i, j<z} g_j out_j, built backwards
  std::vector<double> out(static_cast<size_t>(z));
  for (int64_t i = 0; i < z; ++i) out[i] = (prefix *= x[i * s]);
  for (int64_t i = n - 1; i > z; --i) o[i * s] = T(0);
  if (z < n) {
    double before = z ? out[z - 1] : 1.0, run = 1, acc = 0;
    for (int64_t j = z; j < n; ++j) {
      if (j > z) run *= x[j * s];
      acc += g[j * s] * run;
    }
    o[z * s] = static_cast<T>(before * acc);
  }
  for (int64_t i = z - 1; i >= 0; --i) {
    tail += g[i * s] * out[i];
    o[i * s] = static_cast<T>(tail / x[i * s]);
  }
}

std::vector<Tensor> cumprod_bw_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                   const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  if (out.numel() == 0) return {out};
  Tensor g = as_contiguous(convert(in[0], out.dtype())), x = as_contiguous(in[1]);
  const int64_t nd = x.dim(), dim = wrap_dim(attrs.get_int("dim"), nd, op.name);
  int64_t outer = 1, inner = 1, D = x.sizes()[dim];
  for (int64_t d = 0; d < dim; ++d) outer *= x.sizes()[d];
  for (int64_t d = dim + 1; d < nd; ++d) inner *= x.sizes()[d];
  TP_DISPATCH_FLOATING(out.dtype(), op.name, ([&]<class T>() {
    parallel_for(0, outer * inner, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, D)), [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t base = (t / inner) * D * inner + t % inner;
        cumprod_bw_slice<T>(g.data_as<T>() + base, x.data_as<T>() + base, out.data_as<T>() + base, D, inner);
      }
    });
  }));
  return {out};
}

}  // namespace

void register_reduction_extra_ops() {
  auto reg = [](OpDef d) { register_op(d); };
  reg({.name = "argmax", .schema = "argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
       .tags = kReduction, .infer = &arg_infer, .cpu = &arg_cpu<true>});
  reg({.name = "argmin", .schema = "argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
       .tags = kReduction, .infer = &arg_infer, .cpu = &arg_cpu<false>});
  reg({.name = "max.dim",
       .schema = "max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
       .tags = kReduction, .infer = &dim_infer, .cpu = &dim_cpu<true>, .backward = &dim_onehot_backward<false>,
       .symbolic_backward = &dim_onehot_backward<true>});
  reg({.name = "min.dim",
       .schema = "min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
       .tags = kReduction, .infer = &dim_infer, .cpu = &dim_cpu<false>, .backward = &dim_onehot_backward<false>,
       .symbolic_backward = &dim_onehot_backward<true>});
  reg({.name = "max.other", .schema = "max.other(Tensor self, Tensor other) -> Tensor", .num_inputs = 2,
       .decompose = &max_other_decompose});
  reg({.name = "min.other", .schema = "min.other(Tensor self, Tensor other) -> Tensor", .num_inputs = 2,
       .decompose = &min_other_decompose});
  reg({.name = "var",
       .schema = "var(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor",
       .tags = kReduction, .infer = &var_infer, .cpu = &var_cpu<false>, .backward = &var_backward<false>,
       .symbolic_backward = &var_symbolic_backward<false>,
       .decompose = &var_decompose<false>});
  reg({.name = "var.dim",
       .schema = "var.dim(Tensor self, int[1]? dim=None, bool unbiased=True, bool keepdim=False) -> Tensor",
       .tags = kReduction, .infer = &var_infer, .cpu = &var_cpu<false>, .backward = &var_backward<false>,
       .symbolic_backward = &var_symbolic_backward<false>,
       .decompose = &var_decompose<false>});
  reg({.name = "std",
       .schema = "std(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor",
       .tags = kReduction, .infer = &var_infer, .cpu = &var_cpu<true>, .backward = &var_backward<true>,
       .symbolic_backward = &var_symbolic_backward<true>,
       .decompose = &var_decompose<true>});
  reg({.name = "std.dim",
       .schema = "std.dim(Tensor self, int[1]? dim=None, bool unbiased=True, bool keepdim=False) -> Tensor",
       .tags = kReduction, .infer = &var_infer, .cpu = &var_cpu<true>, .backward = &var_backward<true>,
       .symbolic_backward = &var_symbolic_backward<true>,
       .decompose = &var_decompose<true>});
  // var(x, True) is unbiased=True (a bool never binds dim): PyTorch's bool-only overloads.
  reg({.name = "var.unbiased", .schema = "var.unbiased(Tensor self, bool unbiased=True) -> Tensor",
       .tags = kReduction, .infer = &var_infer, .cpu = &var_cpu<false>, .backward = &var_backward<false>,
       .symbolic_backward = &var_symbolic_backward<false>,
       .decompose = &var_decompose<false>});
  reg({.name = "std.unbiased", .schema = "std.unbiased(Tensor self, bool unbiased=True) -> Tensor",
       .tags = kReduction, .infer = &var_infer, .cpu = &var_cpu<true>, .backward = &var_backward<true>,
       .symbolic_backward = &var_symbolic_backward<true>,
       .decompose = &var_decompose<true>});
  reg({.name = "var_mean",
       .schema = "var_mean(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> (Tensor, Tensor)",
       .decompose = &var_mean_decompose<false>});
  reg({.name = "var_mean.dim",
       .schema = "var_mean.dim(Tensor self, int[1]? dim=None, bool unbiased=True, bool keepdim=False) -> (Tensor, Tensor)",
       .decompose = &var_mean_decompose<false>});
  reg({.name = "var_mean.unbiased", .schema = "var_mean.unbiased(Tensor self, bool unbiased=True) -> (Tensor, Tensor)",
       .decompose = &var_mean_decompose<false>});
  reg({.name = "std_mean",
       .schema = "std_mean(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> (Tensor, Tensor)",
       .decompose = &var_mean_decompose<true>});
  reg({.name = "std_mean.dim",
       .schema = "std_mean.dim(Tensor self, int[1]? dim=None, bool unbiased=True, bool keepdim=False) -> (Tensor, Tensor)",
       .decompose = &var_mean_decompose<true>});
  reg({.name = "std_mean.unbiased", .schema = "std_mean.unbiased(Tensor self, bool unbiased=True) -> (Tensor, Tensor)",
       .decompose = &var_mean_decompose<true>});
  reg({.name = "norm",
       .schema = "norm(Tensor self, Scalar? p=2, int[1]? dim=None, bool keepdim=False) -> Tensor",
       .tags = kReduction, .infer = &norm_infer, .cpu = &norm_cpu, .backward = &norm_backward});
  reg({.name = "norm.str", .schema = "norm.str(Tensor self, str p, int[1]? dim=None, bool keepdim=False) -> Tensor",
       .tags = kReduction, .infer = &norm_infer, .cpu = &norm_cpu, .backward = &norm_backward});
  reg({.name = "logsumexp", .schema = "logsumexp(Tensor self, int[1] dim, bool keepdim=False) -> Tensor",
       .tags = kReduction, .infer = &lse_infer, .cpu = &lse_cpu, .backward = &lse_backward,
       .decompose = &lse_decompose});
  reg({.name = "cumsum", .schema = "cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor",
       .infer = &cum_infer, .cpu = &cum_cpu<false>, .backward = &cumsum_backward});
  reg({.name = "cumprod", .schema = "cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor",
       .infer = &cum_infer, .cpu = &cum_cpu<true>, .backward = &cumprod_backward});
  reg({.name = "_cumprod_backward", .num_inputs = 2, .infer = &cumprod_bw_infer, .cpu = &cumprod_bw_cpu});
}

}  // namespace tp
