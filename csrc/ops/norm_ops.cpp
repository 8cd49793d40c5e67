// Normalizations: softmax / log_softmax, layer_norm, rms_norm, batch_norm,
// and dropout.
//
// batch_norm and dropout are composites over a primitive that returns what
// the derivative needs as extra outputs (native_batch_norm: the per-channel
// statistics; native_dropout: the keep mask). layer_norm is a single-output
// primitive (so a compiled function can capture it, and Stax can take its
// decomposition) whose derivative recomputes the row statistics with tensor
// operators; native_layer_norm returns them as extra outputs like PyTorch's.
// rms_norm is a plain composite of tensor operators.
#include <cmath>
#include <limits>

#include "core/parallel.h"
#include "ops/families.h"
#include "ops/generator.h"
#include "ops/reduce_kernel.h"
#include "ops/reduction_args.h"
#include "ops/reduction_grad.h"
#include "ops/registry.h"
#include "ops/vec/vec_kernels.h"
#include "ops/vec_math.h"

// GCC 12 warns falsely about the attribute initializer lists below.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace tp {
namespace {
using reduce::MaxPolicy;
using reduce::reduce_row;
using reduce::SumPolicy;
using ops::Dims;

using reduce::dtype_arg;

// ---------------------------------------------------------------------------
// softmax / log_softmax (dtype= converts the input first, like PyTorch).
std::vector<TensorMeta> softmax_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  DType dt = dtype_arg(attrs).value_or(in[0].dtype);
  TP_CHECK(is_floating(dt), TypeError, op.name, ": expected a floating-point tensor but got dtype ", dtype_name(dt));
  wrap_dim(attrs.get_int("dim"), std::max<int64_t>(1, static_cast<int64_t>(in[0].sizes.size())), op.name);
  return {TensorMeta::contiguous(in[0].sizes, dt)};
}

// One row at a time: max, exp and sum, then scale (softmax) or shift (log), all
// while the row is in cache.
template <bool Log, class T>
void softmax_row(const T* x, T* y, int64_t D) {
  const T m = reduce_row<MaxPolicy<T>>(x, D, 1);
  if constexpr (sizeof(T) == 4) {
    // exp is the costly part: the widest vector ISA of this CPU (ops/vec) runs it.
    static const auto vexp = vec::unary_fn<float>(vec::UnaryFn::Exp);
    for (int64_t i = 0; i < D; ++i) y[i] = x[i] - m;
    vexp(y, y, D, vec::Params{});
  } else {
    for (int64_t i = 0; i < D; ++i) y[i] = exp_any(x[i] - m);
  }
  const double s = reduce_row<SumPolicy<T>>(y, D, 1);
  if constexpr (Log) {
    // (x - max) - log(sum): folding max + log(sum) first would round log(sum) away when |max| is large.
    const T ls = static_cast<T>(std::log(s));
    for (int64_t i = 0; i < D; ++i) y[i] = (x[i] - m) - ls;
  } else {
    const T inv = static_cast<T>(1.0 / s);
    for (int64_t i = 0; i < D; ++i) y[i] *= inv;
  }
}

// Over a non-innermost dim: vectorize across a block of neighbouring columns.
template <bool Log, class T>
void softmax_columns(const T* xb, T* yb, int64_t D, int64_t inner, int64_t w) {
  constexpr int64_t W = 256;
  T m[W];
  double sum[W];
  for (int64_t j = 0; j < w; ++j) {
    m[j] = MaxPolicy<T>::identity();
    sum[j] = 0;
  }
  for (int64_t d = 0; d < D; ++d)
    for (int64_t j = 0; j < w; ++j) m[j] = MaxPolicy<T>::step(m[j], xb[d * inner + j]);
  for (int64_t d = 0; d < D; ++d) {  // exp into the output row (log_softmax overwrites it below)
    const T* xr = xb + d * inner;
    T* yr = yb + d * inner;
    if constexpr (sizeof(T) == 4) {
      static const auto vexp = vec::unary_fn<float>(vec::UnaryFn::Exp);
      for (int64_t j = 0; j < w; ++j) yr[j] = xr[j] - m[j];
      vexp(yr, yr, w, vec::Params{});
    } else {
      for (int64_t j = 0; j < w; ++j) yr[j] = exp_any(xr[j] - m[j]);
    }
    for (int64_t j = 0; j < w; ++j) sum[j] += yr[j];
  }
  T f[W];  // log(sum) for log_softmax (applied after subtracting the max, see softmax_row), else 1/sum
  for (int64_t j = 0; j < w; ++j) f[j] = Log ? static_cast<T>(std::log(sum[j])) : static_cast<T>(1.0 / sum[j]);
  for (int64_t d = 0; d < D; ++d)
    for (int64_t j = 0; j < w; ++j)
      yb[d * inner + j] = Log ? (xb[d * inner + j] - m[j]) - f[j] : yb[d * inner + j] * f[j];
}

template <bool Log, class T>
void softmax_kernel(const Tensor& in, const Tensor& out, int64_t dim) {
  Tensor xc = as_contiguous(in);
  const T* x = xc.data_as<T>();
  T* y = out.data_as<T>();
  const Shape& s = in.sizes();
  int64_t outer = 1, inner = 1, D = s.empty() ? 1 : s[dim];
  for (int64_t d = 0; d < dim; ++d) outer *= s[d];
  for (int64_t d = dim + 1; d < static_cast<int64_t>(s.size()); ++d) inner *= s[d];
  if (outer * D * inner == 0) return;
  if (inner == 1) {
    parallel_for(0, outer, std::max<int64_t>(1, kGrainSize / D), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) softmax_row<Log>(x + r * D, y + r * D, D);
    });
    return;
  }
  constexpr int64_t W = 256;
  const int64_t blocks = (inner + W - 1) / W;
  parallel_for(0, outer * blocks, std::max<int64_t>(1, kGrainSize / (D * std::min(inner, W))), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / blocks, c0 = (t % blocks) * W;
      softmax_columns<Log>(x + o * D * inner + c0, y + o * D * inner + c0, D, inner, std::min(W, inner - c0));
    }
  });
}

template <bool Log>
std::vector<Tensor> softmax_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  Tensor x = convert(in[0], om[0].dtype);
  int64_t dim = in[0].dim() ? wrap_dim(attrs.get_int("dim"), in[0].dim(), op.name) : 0;
  TP_DISPATCH_FLOATING(out.dtype(), op.name, ([&]<class T>() { softmax_kernel<Log, T>(x, out, dim); }));
  return {out};
}

Tensor softmax_input(const std::vector<Tensor>& in, const Attrs& attrs) {
  auto dt = dtype_arg(attrs);
  return dt ? ops::to_dtype(in[0], *dt) : in[0];
}

std::vector<Tensor> softmax_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  int64_t dim = attrs.get_int("dim");
  Tensor x = softmax_input(in, attrs);
  Tensor e = ops::exp(ops::sub(x, ops::amax(x, {dim}, true)));
  return {ops::div(e, ops::sum(e, {dim}, true))};
}

std::vector<Tensor> log_softmax_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  int64_t dim = attrs.get_int("dim");
  Tensor x = softmax_input(in, attrs);
  Tensor shifted = ops::sub(x, ops::amax(x, {dim}, true));
  return {ops::sub(shifted, ops::log(ops::sum(ops::exp(shifted), {dim}, true)))};
}

// The derivatives of 16-bit tensors are computed in float32 and rounded once (reduce_grad casts
// back), as PyTorch's backward kernels do: every tensor op of a formula would round otherwise.
Tensor wide(const Tensor& t) {
  return t.defined() && (t.dtype() == DType::Float16 || t.dtype() == DType::BFloat16) ? ops::to_dtype(t, DType::Float32)
                                                                                       : t;
}

// d softmax: y * (g - sum(g * y)); d log_softmax: g - exp(y) * sum(g).
std::vector<Tensor> softmax_backward(const BackwardArgs& a) {
  const Tensor g = wide(ops::grad_out(a));
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const Tensor y = wide(a.outputs[0]);
  if (y.dim() == 0) return {ops::zeros({}, a.inputs[0].dtype())};
  int64_t dim = a.attrs.get_int("dim");
  Tensor dot = ops::sum(ops::mul(g, y), {dim}, true);
  return {ops::reduce_grad(ops::mul(y, ops::sub(g, dot)), a.inputs[0])};
}

std::vector<Tensor> log_softmax_backward(const BackwardArgs& a) {
  const Tensor g = wide(ops::grad_out(a));
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const Tensor y = wide(a.outputs[0]);
  if (y.dim() == 0) return {ops::zeros({}, a.inputs[0].dtype())};
  int64_t dim = a.attrs.get_int("dim");
  return {ops::reduce_grad(ops::sub(g, ops::mul(ops::exp(y), ops::sum(g, {dim}, true))), a.inputs[0])};
}

// ---------------------------------------------------------------------------
// Shape checks shared by layer_norm and rms_norm: the trailing dims of the
// input are normalized_shape; weight and bias have exactly that shape.
int64_t check_normalized(const char* op, const Shape& in, const Shape& norm, const TensorMeta* w, const TensorMeta* b) {
  const int64_t k = static_cast<int64_t>(norm.size()), nd = static_cast<int64_t>(in.size());
  TP_CHECK(k >= 1, ValueError, op, ": normalized_shape must have at least one dim");
  bool ok = nd >= k;
  for (int64_t i = 0; ok && i < k; ++i) ok = in[nd - k + i] == norm[i];
  TP_CHECK(ok, ValueError, op, ": expected input with shape [*, ", str(norm).substr(1), " but got input of size ",
           shape_str(in));
  for (const TensorMeta* t : {w, b})
    if (t && t->defined)
      TP_CHECK(t->sizes == norm, ValueError, op, ": expected weight and bias of shape ", shape_str(norm), " but got ",
               shape_str(t->sizes));
  return nd - k;  // the first normalized dim
}

std::vector<TensorMeta> in_metas(const std::vector<Tensor>& in) {
  std::vector<TensorMeta> m;
  for (auto& t : in) {
    if (t.defined()) {
      m.push_back(t.meta());
    } else {
      m.emplace_back();
      m.back().defined = false;
    }
  }
  return m;
}

Shape normalized_attr(const Attrs& attrs) {
  const auto& v = attrs.get<std::vector<int64_t>>("normalized_shape");
  return Shape(v.begin(), v.end());
}

std::vector<TensorMeta> native_layer_norm_infer(const OpDef& op, const std::vector<TensorMeta>& in,
                                               const Attrs& attrs) {
  TP_CHECK(is_floating(in[0].dtype), TypeError, op.name, ": expected a floating-point input but got dtype ",
           dtype_name(in[0].dtype));
  const int64_t axis = check_normalized(op.name, in[0].sizes, normalized_attr(attrs), &in[1], &in[2]);
  Shape stat = in[0].sizes;
  for (size_t d = static_cast<size_t>(axis); d < stat.size(); ++d) stat[d] = 1;
  return {TensorMeta::contiguous(in[0].sizes, in[0].dtype), TensorMeta::contiguous(stat, in[0].dtype),
          TensorMeta::contiguous(stat, in[0].dtype)};
}

// Sum of squared deviations from m, with independent accumulators GCC vectorizes.
template <class T>
double sq_dev_sum(const T* x, int64_t n, T m) {
  constexpr int L = sizeof(T) == 4 ? 16 : 8;
  T acc[L] = {};
  int64_t i = 0;
  double tot = 0;
  while (n - i >= L) {
    const int64_t stop = i + std::min<int64_t>(256 * L, (n - i) / L * L);  // flush into double regularly
    for (; i < stop; i += L)
      for (int j = 0; j < L; ++j) acc[j] += (x[i + j] - m) * (x[i + j] - m);
    for (int j = 0; j < L; ++j) {
      tot += acc[j];
      acc[j] = T(0);
    }
  }
  for (; i < n; ++i) tot += static_cast<double>(x[i] - m) * static_cast<double>(x[i] - m);
  return tot;
}

template <class T>
void layer_norm_kernel(const Tensor& xin, const Tensor& win, const Tensor& bin, double eps, const Tensor& out,
                       const Tensor& mean, const Tensor& rstd) {
  Tensor xc = as_contiguous(xin);
  Tensor wc = win.defined() ? as_contiguous(win) : Tensor(), bc = bin.defined() ? as_contiguous(bin) : Tensor();
  const int64_t rows = mean.numel(), n = rows ? xc.numel() / rows : 0;
  const T* x = xc.data_as<T>();
  const T* w = wc.defined() ? wc.data_as<T>() : nullptr;
  const T* b = bc.defined() ? bc.data_as<T>() : nullptr;
  T* y = out.data_as<T>();
  T* pm = mean.data_as<T>();
  T* pr = rstd.data_as<T>();
  parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, n)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      const T m = static_cast<T>(reduce_row<SumPolicy<T>>(xr, n, 1) / static_cast<double>(n));
      const T rs = static_cast<T>(1.0 / std::sqrt(sq_dev_sum(xr, n, m) / static_cast<double>(n) + eps));
      pm[r] = m;
      pr[r] = rs;
      if (w && b) {
        for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - m) * rs * w[i] + b[i];
      } else if (w) {
        for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - m) * rs * w[i];
      } else if (b) {
        for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - m) * rs + b[i];
      } else {
        for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - m) * rs;
      }
    }
  });
}

std::vector<Tensor> native_layer_norm_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                          const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]), mean = alloc_out(om[1]), rstd = alloc_out(om[2]);
  const double eps = attrs.get_double("eps");
  DType dt = out.dtype();
  Tensor w = in[1].defined() ? convert(in[1], dt) : Tensor(), b = in[2].defined() ? convert(in[2], dt) : Tensor();
  TP_DISPATCH_FLOATING(dt, op.name, ([&]<class T>() { layer_norm_kernel<T>(in[0], w, b, eps, out, mean, rstd); }));
  return {out, mean, rstd};
}

// layer_norm: the same kernel, the statistics go to scratch tensors.
std::vector<TensorMeta> layer_norm_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  return {native_layer_norm_infer(op, in, attrs)[0]};
}
std::vector<Tensor> layer_norm_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                   const std::vector<TensorMeta>& om) {
  return {native_layer_norm_cpu(op, in, attrs, native_layer_norm_infer(op, in_metas(in), attrs))[0]};
}

Dims trailing_dims(int64_t from, int64_t nd) {
  Dims dims;
  for (int64_t d = from; d < nd; ++d) dims.push_back(d);
  return dims;
}

Dims normalized_dims(const Tensor& x, const Attrs& attrs) {
  const int64_t k = static_cast<int64_t>(normalized_attr(attrs).size());
  return trailing_dims(x.dim() - k, x.dim());
}

// With xhat = (x - mean) * rstd and gx = g * weight:
//   dx = rstd * (gx - mean(gx) - xhat * mean(gx * xhat))   (means over the normalized dims)
//   dweight = sum(g * xhat), dbias = sum(g)                  (over the other dims)
std::vector<Tensor> layer_norm_grads(const BackwardArgs& a, const Tensor& xhat, const Tensor& rstd) {
  const Tensor g = wide(a.grad_outputs[0]);
  std::vector<Tensor> grads(3);
  if (!g.defined()) return grads;
  const Tensor& x = a.inputs[0];
  const Tensor w = wide(a.inputs[1]);
  const Dims dims = normalized_dims(x, a.attrs);
  if (a.needs_grad[0]) {
    Tensor gx = w.defined() ? ops::mul(g, w) : g;
    Tensor inner = ops::sub(ops::sub(gx, ops::mean(gx, dims, true)), ops::mul(xhat, ops::mean(ops::mul(gx, xhat), dims, true)));
    grads[0] = ops::reduce_grad(ops::mul(rstd, inner), x);
  }
  if (a.needs_grad[1] && w.defined()) grads[1] = ops::reduce_grad(ops::mul(g, xhat), a.inputs[1]);
  if (a.needs_grad[2] && a.inputs[2].defined()) grads[2] = ops::reduce_grad(g, a.inputs[2]);
  return grads;
}

std::vector<Tensor> native_layer_norm_backward(const BackwardArgs& a) {
  const Tensor rstd = wide(a.outputs[2]);
  const Tensor xhat = ops::mul(ops::sub(wide(a.inputs[0]), wide(a.outputs[1])), rstd);
  std::vector<Tensor> grads = layer_norm_grads(a, xhat, rstd);
  // The saved mean and rstd (outputs 1, 2) are functions of x too; a double backward sends
  // gradients to them (as in batch_norm_backward): d mean/dx = 1/M, d rstd/dx = -rstd^2 xhat/M.
  const Tensor &gm = a.grad_outputs[1], &gr = a.grad_outputs[2];
  if (!a.needs_grad[0] || (!gm.defined() && !gr.defined())) return grads;
  const Tensor& x = a.inputs[0];
  double m = 1;
  for (int64_t d : normalized_dims(x, a.attrs)) m *= static_cast<double>(x.sizes()[d]);
  Tensor extra;
  if (gm.defined()) extra = ops::div(wide(gm), ops::scalar(m));
  if (gr.defined()) {
    Tensor t = ops::div(ops::mul(ops::mul(wide(gr), ops::mul(rstd, rstd)), xhat), ops::scalar(m));
    extra = extra.defined() ? ops::sub(extra, t) : ops::neg(t);
  }
  extra = ops::reduce_grad(ops::add(extra, ops::zeros_like(xhat)), x);  // to x's full shape
  grads[0] = grads[0].defined() ? ops::add(grads[0], extra) : extra;
  return grads;
}

// The row statistics again, from tensor operators: (xhat, rstd).
std::pair<Tensor, Tensor> normalized(const Tensor& x, const Dims& dims, double eps) {
  Tensor centered = ops::sub(x, ops::mean(x, dims, true));
  Tensor var = ops::mean(ops::mul(centered, centered), dims, true);
  Tensor rstd = ops::div(ops::scalar(Scalar(1.0)), ops::sqrt(ops::add(var, ops::scalar(Scalar(eps)))));
  return {ops::mul(centered, rstd), rstd};
}

std::vector<Tensor> layer_norm_backward(const BackwardArgs& a) {
  if (!a.grad_outputs[0].defined()) return {Tensor(), Tensor(), Tensor()};
  auto [xhat, rstd] = normalized(wide(a.inputs[0]), normalized_dims(a.inputs[0], a.attrs), a.attrs.get_double("eps"));
  return layer_norm_grads(a, xhat, rstd);
}

// For graph passes (Stax fuses the parts); eager runs the kernel above.
std::vector<Tensor> layer_norm_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  Tensor y = normalized(in[0], normalized_dims(in[0], attrs), attrs.get_double("eps")).first;
  if (in[1].defined()) y = ops::mul(y, in[1]);
  if (in[2].defined()) y = ops::add(y, in[2]);
  return {y};
}

// ---------------------------------------------------------------------------
// rms_norm: x / sqrt(mean(x^2) + eps) * weight; eps defaults to the dtype's epsilon.
std::vector<Tensor> rms_norm_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& x = in[0];
  TP_CHECK(is_floating(x.dtype()), TypeError, "rms_norm: expected a floating-point input but got dtype ",
           dtype_name(x.dtype()));
  TensorMeta wm = in[1].defined() ? in[1].meta() : TensorMeta{};
  wm.defined = in[1].defined();
  const int64_t axis = check_normalized("rms_norm", x.sizes(), normalized_attr(attrs), &wm, nullptr);
  const double eps = attrs.get_optional_double("eps").value_or(
      x.dtype() == DType::Float64 ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon());
  // 16-bit inputs are normalized in float32 and rounded once at the end, as PyTorch does: their
  // squares overflow float16 (300^2 > 65504) and every intermediate rounding adds error.
  const bool narrow = x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16;
  const Tensor xc = narrow ? ops::to_dtype(x, DType::Float32) : x;
  Tensor ms = ops::mean(ops::mul(xc, xc), trailing_dims(axis, x.dim()), true);
  Tensor y = ops::div(xc, ops::sqrt(ops::add(ms, ops::scalar(Scalar(eps)))));
  if (in[1].defined()) y = ops::mul(y, in[1]);
  if (!narrow) return {y};
  return {ops::to_dtype(y, in[1].defined() ? promote_types(x.dtype(), in[1].dtype()) : x.dtype())};
}

// ---------------------------------------------------------------------------
// batch_norm over dim 1 of an (N, C, *) input. Training normalizes with the
// batch statistics (biased variance) and moves the running statistics toward
// them (unbiased variance) in place; evaluation uses the running statistics.
struct BnGeom {
  int64_t n = 1, c = 1, s = 1;  // batch, channels, spatial
};
BnGeom bn_geom(const Shape& x) {
  BnGeom g;
  g.n = x[0];
  g.c = x[1];
  for (size_t d = 2; d < x.size(); ++d) g.s *= x[d];
  return g;
}

std::vector<TensorMeta> batch_norm_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta& x = in[0];
  TP_CHECK(is_floating(x.dtype), TypeError, op.name, ": expected a floating-point input but got dtype ",
           dtype_name(x.dtype));
  TP_CHECK(x.sizes.size() >= 2, ValueError, op.name, ": expected an input of at least 2 dims (N, C, ...) but got ",
           shape_str(x.sizes));
  const int64_t c = x.sizes[1];
  for (int i = 1; i <= 4; ++i)
    if (in[i].defined)
      TP_CHECK(in[i].sizes == Shape{c}, ValueError, op.name, ": expected running stats, weight and bias of shape [",
               c, "] but got ", shape_str(in[i].sizes), " for input of size ", shape_str(x.sizes));
  const bool training = attrs.get_or("training", false);
  if (training) {
    BnGeom g = bn_geom(x.sizes);
    TP_CHECK(g.n * g.s > 1, ValueError, op.name, ": expected more than 1 value per channel when training, got input of size ",
             shape_str(x.sizes));
  } else {
    TP_CHECK(in[3].defined && in[4].defined, ValueError, op.name,
             ": running_mean and running_var must be given when training=False");
  }
  return {TensorMeta::contiguous(x.sizes, x.dtype), TensorMeta::contiguous({c}, x.dtype),
          TensorMeta::contiguous({c}, x.dtype)};
}

template <class T>
void batch_stats(const T* x, BnGeom g, int64_t ch, double* mean, double* var) {
  double s = 0;
  for (int64_t i = 0; i < g.n; ++i) s += reduce_row<SumPolicy<T>>(x + (i * g.c + ch) * g.s, g.s, 1);
  const double m = s / static_cast<double>(g.n * g.s);
  double ss = 0;
  for (int64_t i = 0; i < g.n; ++i) ss += sq_dev_sum(x + (i * g.c + ch) * g.s, g.s, static_cast<T>(m));
  *mean = m;
  *var = ss / static_cast<double>(g.n * g.s);
}

template <class T>
void batch_norm_kernel(const std::vector<Tensor>& in, const Tensor& out, const Tensor& save_mean,
                       const Tensor& save_rstd, bool training, double momentum, double eps) {
  Tensor xc = as_contiguous(in[0]);
  const BnGeom g = bn_geom(xc.sizes());
  const T* x = xc.data_as<T>();
  auto vec = [&](int i) { return in[i].defined() ? as_contiguous(convert(in[i], out.dtype())) : Tensor(); };
  // aten's input order: (input, weight, bias, running_mean, running_var).
  Tensor w = vec(1), b = vec(2), rm = vec(3), rv = vec(4);
  T* pm = save_mean.data_as<T>();
  T* pr = save_rstd.data_as<T>();
  parallel_for(0, g.c, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, g.n * g.s)), [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      double m, v;
      if (training) {
        batch_stats(x, g, ch, &m, &v);
        if (rm.defined()) {
          T& r = rm.data_as<T>()[ch];
          r = static_cast<T>((1 - momentum) * r + momentum * m);
        }
        if (rv.defined()) {
          const double cnt = static_cast<double>(g.n * g.s);
          T& r = rv.data_as<T>()[ch];
          r = static_cast<T>((1 - momentum) * r + momentum * v * cnt / (cnt - 1));
        }
      } else {
        m = rm.data_as<T>()[ch];
        v = rv.data_as<T>()[ch];
      }
      const T mean = static_cast<T>(m), rstd = static_cast<T>(1.0 / std::sqrt(v + eps));
      pm[ch] = mean;
      pr[ch] = rstd;
      const T scale = w.defined() ? rstd * w.data_as<T>()[ch] : rstd;
      const T shift = (b.defined() ? b.data_as<T>()[ch] : T(0)) - mean * scale;
      for (int64_t i = 0; i < g.n; ++i) {
        const T* xr = x + (i * g.c + ch) * g.s;
        T* yr = out.data_as<T>() + (i * g.c + ch) * g.s;
        for (int64_t j = 0; j < g.s; ++j) yr[j] = xr[j] * scale + shift;
      }
    }
  });
  // The running statistics are updated in place (after a copy if they were
  // not contiguous float of the input's dtype).
  for (int i : {3, 4}) {
    Tensor& r = i == 3 ? rm : rv;
    if (!training || !r.defined()) continue;
    if (r.impl() != in[i].impl()) copy_into(in[i], r);
    in[i].bump_version();
  }
}

// Tagged kAllDTypes: the dispatcher would hand a 16-bit call widened copies of the running
// statistics, and their update would be lost; here only the input is widened and the kernel
// writes the statistics back into their own storage (batch_norm_kernel's copy_into).
std::vector<Tensor> batch_norm_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                   const std::vector<TensorMeta>& om) {
  const DType cd = compute_dtype(om[0].dtype);
  auto wide_meta = [&](int i) {
    TensorMeta m = om[i];
    m.dtype = cd;
    return m;
  };
  std::vector<Tensor> wide = in;
  wide[0] = convert(in[0], cd);
  Tensor out = alloc_out(wide_meta(0)), mean = alloc_out(wide_meta(1)), rstd = alloc_out(wide_meta(2));
  const bool training = attrs.get_or("training", false);
  const double momentum = attrs.get_double("momentum"), eps = attrs.get_double("eps");
  TP_DISPATCH_FLOATING(cd, op.name, ([&]<class T>() {
                         batch_norm_kernel<T>(wide, out, mean, rstd, training, momentum, eps);
                       }));
  if (cd == om[0].dtype) return {out, mean, rstd};
  return {convert(out, om[0].dtype), convert(mean, om[1].dtype), convert(rstd, om[2].dtype)};
}

// Training: dx = w * rstd * (g - mean(g) - xhat * mean(g * xhat)) over (N, *);
// evaluation: the statistics are constants, dx = g * w * rstd.
std::vector<Tensor> batch_norm_backward(const BackwardArgs& a) {
  std::vector<Tensor> grads(5);
  const bool stats_grads = a.grad_outputs[1].defined() || a.grad_outputs[2].defined();
  if (!a.grad_outputs[0].defined() && !stats_grads) return grads;
  const Tensor x = wide(a.inputs[0]);
  // Only the statistics can have gradients in a double backward (the formula reads them, not y).
  const Tensor g = a.grad_outputs[0].defined() ? wide(a.grad_outputs[0]) : ops::zeros_like(x);
  Shape cshape(static_cast<size_t>(x.dim()), 1);
  cshape[1] = x.sizes()[1];
  Dims dims;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != 1) dims.push_back(d);
  Tensor mean = ops::reshape(wide(a.outputs[1]), cshape), rstd = ops::reshape(wide(a.outputs[2]), cshape);
  Tensor xhat = ops::mul(ops::sub(x, mean), rstd);
  const Tensor w = wide(a.inputs[1]);
  if (a.needs_grad[0]) {
    Tensor scale = w.defined() ? ops::mul(rstd, ops::reshape(w, cshape)) : rstd;
    Tensor inner = g;
    const bool training = a.attrs.get_or("training", false);
    if (training)
      inner = ops::sub(ops::sub(g, ops::mean(g, dims, true)), ops::mul(xhat, ops::mean(ops::mul(g, xhat), dims, true)));
    Tensor gx = ops::mul(scale, inner);
    // In training the saved mean and rstd (outputs 1 and 2) are functions of x; a double
    // backward reads them in this very formula and sends gradients back to them:
    // d mean / dx = 1 / M and d rstd / dx = -rstd^2 * xhat / M per channel (M elements).
    if (training) {
      const double m = static_cast<double>(x.numel()) / static_cast<double>(x.sizes()[1]);
      if (a.grad_outputs[1].defined())
        gx = ops::add(gx, ops::div(ops::reshape(wide(a.grad_outputs[1]), cshape), ops::scalar(m)));
      if (a.grad_outputs[2].defined()) {
        Tensor gr = ops::mul(ops::reshape(wide(a.grad_outputs[2]), cshape), ops::mul(rstd, rstd));
        gx = ops::sub(gx, ops::div(ops::mul(gr, xhat), ops::scalar(m)));
      }
    }
    grads[0] = ops::reduce_grad(gx, a.inputs[0]);
  }
  if (a.needs_grad[1] && w.defined())
    grads[1] = ops::to_dtype(ops::sum(ops::mul(g, xhat), dims, false), a.inputs[1].dtype());
  if (a.needs_grad[2] && a.inputs[2].defined()) grads[2] = ops::to_dtype(ops::sum(g, dims, false), a.inputs[2].dtype());
  return grads;
}

std::vector<Tensor> batch_norm_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  // batch_norm keeps F.batch_norm's order (input, running_mean, running_var, weight, bias).
  return {ops::native_batch_norm(in[0], in[3], in[4], in[1], in[2], attrs.get_or("training", false),
                                 attrs.get_double("momentum"), attrs.get_double("eps"))[0]};
}

// ---------------------------------------------------------------------------
// dropout: zeroes each element with probability p (Philox, 4 elements per
// counter, so the result does not depend on the thread count) and scales the
// kept ones by 1/(1-p).
void check_p(const char* op, double p) {
  TP_CHECK(p >= 0 && p <= 1, ValueError, op, ": dropout probability has to be between 0 and 1, but got ", p);
}

std::vector<TensorMeta> dropout_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  TP_CHECK(is_floating(in[0].dtype), TypeError, op.name, ": expected a floating-point input but got dtype ",
           dtype_name(in[0].dtype));
  check_p(op.name, attrs.get_double("p"));
  return {TensorMeta::contiguous(in[0].sizes, in[0].dtype), TensorMeta::contiguous(in[0].sizes, DType::Bool)};
}

std::vector<Tensor> dropout_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]), mask = alloc_out(om[1]);
  const double p = attrs.get_or("train", true) ? attrs.get_double("p") : 0.0;
  const int64_t n = out.numel();
  if (n == 0) return {out, mask};
  Tensor x = as_contiguous(in[0]);
  const uint64_t words = static_cast<uint64_t>((n + 3) / 4);
  PhiloxRange range = generator_reserve(words);
  const float keep = static_cast<float>(1.0 - p);
  bool* pm = mask.data_as<bool>();
  parallel_for(0, static_cast<int64_t>(words), kGrainSize / 4, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      uint32_t r[4];
      philox4x32(range.first + static_cast<uint64_t>(c), range.key, r);
      for (int64_t j = 0; j < 4 && c * 4 + j < n; ++j) pm[c * 4 + j] = unit_float(r[j]) < keep;
    }
  });
  TP_DISPATCH_FLOATING(out.dtype(), op.name, ([&]<class T>() {
                         const T scale = p < 1 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
                         const T* px = x.data_as<T>();
                         T* po = out.data_as<T>();
                         parallel_for(0, n, kGrainSize, [&](int64_t b, int64_t e) {
                           for (int64_t i = b; i < e; ++i) po[i] = select(pm[i], px[i] * scale, T(0));
                         });
                       }));
  return {out, mask};
}

std::vector<Tensor> dropout_backward(const BackwardArgs& a) {
  const Tensor& g = a.grad_outputs[0];
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const double p = a.attrs.get_or("train", true) ? a.attrs.get_double("p") : 0.0;
  Tensor scale = ops::scalar(Scalar(p < 1 ? 1.0 / (1.0 - p) : 0.0));
  return {ops::reduce_grad(ops::mul(ops::mul(g, ops::to_dtype(a.outputs[1], g.dtype())), scale), a.inputs[0])};
}

std::vector<Tensor> dropout_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const double p = attrs.get_double("p");
  check_p("dropout", p);
  if (!attrs.get_or("train", true)) return {in[0]};
  return {ops::native_dropout(in[0], p, true)[0]};
}

}  // namespace

void register_norm_ops() {
  auto reg = [](OpDef d) { register_op(d); };
  reg({.name = "softmax", .schema = "softmax(Tensor self, int dim, ScalarType? dtype=None) -> Tensor",
       .tags = kComposite, .infer = &softmax_infer, .cpu = &softmax_cpu<false>, .backward = &softmax_backward,
       .decompose = &softmax_decompose});
  reg({.name = "log_softmax", .schema = "log_softmax(Tensor self, int dim, ScalarType? dtype=None) -> Tensor",
       .tags = kComposite, .infer = &softmax_infer, .cpu = &softmax_cpu<true>, .backward = &log_softmax_backward,
       .decompose = &log_softmax_decompose});
  reg({.name = "native_layer_norm",
       .schema = "native_layer_norm(Tensor input, int[] normalized_shape, Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)",
       .num_inputs = 3, .infer = &native_layer_norm_infer, .cpu = &native_layer_norm_cpu,
       .backward = &native_layer_norm_backward});
  reg({.name = "layer_norm",
       .schema = "layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) -> Tensor",
       .tags = kComposite, .num_inputs = 3, .infer = &layer_norm_infer, .cpu = &layer_norm_cpu,
       .backward = &layer_norm_backward, .decompose = &layer_norm_decompose,
       .recorded_as = "native_layer_norm"});
  reg({.name = "rms_norm",
       .schema = "rms_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor",
       .num_inputs = 2, .decompose = &rms_norm_decompose});
  reg({.name = "native_batch_norm",
       .schema = "native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)",
       .tags = kAllDTypes, .num_inputs = 5, .infer = &batch_norm_infer, .cpu = &batch_norm_cpu,
       .backward = &batch_norm_backward});
  reg({.name = "batch_norm",
       .schema = "batch_norm(Tensor input, Tensor? running_mean, Tensor? running_var, Tensor? weight=None, Tensor? bias=None, bool training=False, float momentum=0.1, float eps=1e-05) -> Tensor",
       .num_inputs = 5, .decompose = &batch_norm_decompose});
  reg({.name = "native_dropout", .schema = "native_dropout(Tensor input, float p, bool train) -> (Tensor, Tensor)",
       .tags = kRandom, .infer = &dropout_infer, .cpu = &dropout_cpu, .backward = &dropout_backward});
  reg({.name = "dropout", .schema = "dropout(Tensor input, float p=0.5, bool train=True) -> Tensor", .tags = kRandom,
       .decompose = &dropout_decompose});
}

}  // namespace tp
