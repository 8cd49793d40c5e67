// 2-D pooling: max_pool2d_with_indices (max_pool2d is a composite taking its
// values), avg_pool2d, adaptive_avg_pool2d, each with an internal gradient
// operator. Inputs are (N, C, H, W) or unbatched (C, H, W); kernels work on
// the N*C planes of a contiguous copy, in parallel over planes.
#include <algorithm>
#include <string_view>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/parallel.h"
#include "ops/derivative_util.h"
#include "ops/dispatch.h"
#include "ops/nn_util.h"
#include "ops/registry.h"

namespace tp {
namespace {

struct PoolGeom {
  int64_t planes, H, W, Ho, Wo;
  Pair k, s, p, d;
  bool ceil_mode = false;
};

int64_t pooled_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  if (span < 0) return 0;  // the window does not fit (C++ division would round -1/s up to 0)
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  // In ceil mode the last window must start inside the input or its left padding.
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

// Max and average pooling take integer inputs as PyTorch does on the CPU
// (the average truncates toward zero); adaptive pooling needs floats.
void check_input(const char* op, const TensorMeta& x, bool allow_int = false) {
  TP_CHECK(x.sizes.size() == 3 || x.sizes.size() == 4, ValueError, op,
           ": expected 3D (unbatched) or 4D (batched) input, but got input of shape ", shape_str(x.sizes));
  TP_CHECK(is_floating(x.dtype) || (allow_int && x.dtype != DType::Bool), TypeError, op, ": expected a ",
           allow_int ? "numeric (not bool)" : "floating-point", " input, but got ", dtype_name(x.dtype));
  const size_t c = x.sizes.size() - 3;
  for (size_t i = c; i < x.sizes.size(); ++i)
    TP_CHECK(x.sizes[i] > 0 || i == c, ValueError, op, ": expected non-empty spatial dims, but got input of shape ",
             shape_str(x.sizes));
}

PoolGeom pool_geom(const char* op, const Shape& x, const Attrs& attrs, bool has_dilation) {
  PoolGeom g;
  const size_t nd = x.size();
  g.H = x[nd - 2];
  g.W = x[nd - 1];
  g.planes = numel(x) / std::max<int64_t>(1, g.H * g.W);
  g.k = pair_attr(attrs, "kernel_size", op);
  g.s = pair_attr(attrs, "stride", op, g.k);
  g.p = pair_attr(attrs, "padding", op, Pair{0, 0});
  g.d = has_dilation ? pair_attr(attrs, "dilation", op, Pair{1, 1}) : Pair{1, 1};
  g.ceil_mode = attrs.get_or<bool>("ceil_mode", false);
  for (int i = 0; i < 2; ++i) {
    TP_CHECK(g.k[i] > 0 && g.s[i] > 0 && g.d[i] > 0, ValueError, op,
             ": kernel_size, stride and dilation must be positive");
    TP_CHECK(g.p[i] >= 0 && g.p[i] <= g.k[i] / 2, ValueError, op,
             ": pad should be at least 0 and at most half of the kernel size, but got padding=", g.p[i],
             " for kernel_size=", g.k[i]);
  }
  g.Ho = pooled_size(g.H, g.k[0], g.s[0], g.p[0], g.d[0], g.ceil_mode);
  g.Wo = pooled_size(g.W, g.k[1], g.s[1], g.p[1], g.d[1], g.ceil_mode);
  TP_CHECK(g.Ho > 0 && g.Wo > 0, ValueError, op, ": output size is too small (", g.Ho, " x ", g.Wo,
           ") for input of shape ", shape_str(x));
  return g;
}

Shape with_spatial(Shape x, int64_t h, int64_t w) {
  x[x.size() - 2] = h;
  x[x.size() - 1] = w;
  return x;
}

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  return false;
}

int64_t plane_grain(int64_t work) { return std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, work)); }

// ---- max pooling ----
std::vector<TensorMeta> maxpool_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_input(op.name, in[0], true);
  PoolGeom g = pool_geom(op.name, in[0].sizes, attrs, true);
  Shape o = with_spatial(in[0].sizes, g.Ho, g.Wo);
  return {TensorMeta::contiguous(o, in[0].dtype), TensorMeta::contiguous(o, DType::Int64)};
}

// NaN wins (as in PyTorch); the index is the flat h * W + w of the input plane.
std::vector<Tensor> maxpool_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]), idx = alloc_out(om[1]);
  const PoolGeom g = pool_geom(op.name, in[0].sizes(), attrs, true);
  Tensor x = as_contiguous(in[0]);
  TP_DISPATCH_NUMERIC(out.dtype(), op.name, ([&]<class T>() {
    const T* px = x.data_as<T>();
    T* po = out.data_as<T>();
    int64_t* pi = idx.data_as<int64_t>();
    parallel_for(0, g.planes, plane_grain(g.Ho * g.Wo * g.k[0] * g.k[1]), [&](int64_t lo, int64_t hi) {
      for (int64_t pl = lo; pl < hi; ++pl) {
        const T* xp = px + pl * g.H * g.W;
        for (int64_t oh = 0; oh < g.Ho; ++oh)
          for (int64_t ow = 0; ow < g.Wo; ++ow) {
            T best = std::numeric_limits<T>::lowest();
            int64_t at = -1;
            // One condition, evaluated without short-circuit jumps (the former
            // `at < 0 || v > best || nan` test and early exit cost several
            // data-dependent, mispredicted jumps per element on relu outputs):
            // the first element, then each larger one or the first NaN; once
            // best is NaN nothing replaces it.
            for (int64_t i = 0; i < g.k[0]; ++i) {
              const int64_t ih = oh * g.s[0] - g.p[0] + i * g.d[0];
              if (ih < 0 || ih >= g.H) continue;
              for (int64_t j = 0; j < g.k[1]; ++j) {
                const int64_t iw = ow * g.s[1] - g.p[1] + j * g.d[1];
                if (iw < 0 || iw >= g.W) continue;
                const T v = xp[ih * g.W + iw];
                const bool take = (at < 0) | (((v > best) | is_nan(v)) & !is_nan(best));
                best = take ? v : best;
                at = take ? ih * g.W + iw : at;
              }
            }
            const int64_t o = (pl * g.Ho + oh) * g.Wo + ow;
            po[o] = best;
            pi[o] = at;
          }
      }
    });
  }));
  return {out, idx};
}

// Routes each output gradient to the input element that was the maximum.
std::vector<TensorMeta> maxpool_grad_infer(const OpDef&, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  return {TensorMeta::contiguous(attr_shape(attrs, "size"), in[0].dtype)};
}

std::vector<Tensor> maxpool_grad_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs&,
                                     const std::vector<TensorMeta>& om) {
  Tensor gx = alloc_out(om[0]);
  fill(gx, Scalar(int64_t{0}));
  Tensor go = as_contiguous(in[0]), idx = as_contiguous(in[1]);
  const int64_t hw = gx.dim() ? gx.sizes()[gx.dim() - 2] * gx.sizes()[gx.dim() - 1] : 1;
  const int64_t ohw = go.dim() ? go.sizes()[go.dim() - 2] * go.sizes()[go.dim() - 1] : 1;
  if (hw == 0 || ohw == 0) return {gx};
  const int64_t planes = gx.numel() / hw;
  TP_DISPATCH_FLOATING(gx.dtype(), op.name, ([&]<class T>() {
    const T* pg = go.data_as<T>();
    const int64_t* pi = idx.data_as<int64_t>();
    T* px = gx.data_as<T>();
    parallel_for(0, planes, plane_grain(ohw), [&](int64_t lo, int64_t hi) {
      for (int64_t pl = lo; pl < hi; ++pl)
        for (int64_t o = 0; o < ohw; ++o) {
          const int64_t at = pi[pl * ohw + o];
          if (at >= 0) px[pl * hw + at] += pg[pl * ohw + o];
        }
    });
  }));
  return {gx};
}

std::vector<Tensor> maxpool_backward(const BackwardArgs& a) {
  const Tensor& g = a.grad_outputs[0];
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  static const OpDef& op = get_op("max_pool2d_grad");
  const Shape& s = a.inputs[0].sizes();
  return {call_op1(op, {g, a.outputs[1]}, {{"size", std::vector<int64_t>(s.begin(), s.end())}})};
}

// max_pool2d_grad is linear in the incoming gradient: its derivative picks, for every
// output position, the gradient at the input position that won (double backward).
std::vector<Tensor> maxpool_grad_backward(const BackwardArgs& a) {
  const Tensor& gg = ops::grad_out(a);
  if (!gg.defined() || !a.needs_grad[0]) return {Tensor(), Tensor()};
  const Tensor &g = a.inputs[0], &idx = a.inputs[1];
  Tensor flat_idx = ops::flatten(idx, idx.dim() - 2);
  Tensor picked = ops::gather(ops::flatten(gg, gg.dim() - 2), -1, ops::clamp_min(flat_idx, ops::scalar(Scalar(int64_t{0}))));
  picked = ops::where(ops::ge(flat_idx, ops::scalar(Scalar(int64_t{0}))), picked, ops::scalar(0.0));
  return {ops::reshape(picked, g.sizes()), Tensor()};
}

// ---- average pooling ----
std::vector<TensorMeta> avgpool_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_input(op.name, in[0], true);
  PoolGeom g = pool_geom(op.name, in[0].sizes, attrs, false);
  if (!attrs.is_none("divisor_override"))
    TP_CHECK(attrs.get_int("divisor_override") != 0, ValueError, op.name, ": divisor must be not zero");
  return {TensorMeta::contiguous(with_spatial(in[0].sizes, g.Ho, g.Wo), in[0].dtype)};
}

// One window of average pooling: its clipped bounds and its divisor.
struct Window {
  int64_t h0, h1, w0, w1;
  double div;
};
Window avg_window(const PoolGeom& g, int64_t oh, int64_t ow, bool include_pad, std::optional<int64_t> divisor) {
  int64_t h0 = oh * g.s[0] - g.p[0], w0 = ow * g.s[1] - g.p[1];
  int64_t h1 = std::min(h0 + g.k[0], g.H + g.p[0]), w1 = std::min(w0 + g.k[1], g.W + g.p[1]);
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, g.H);
  w1 = std::min(w1, g.W);
  const int64_t div = divisor ? *divisor : include_pad ? padded : (h1 - h0) * (w1 - w0);
  return {h0, h1, w0, w1, static_cast<double>(div)};
}

template <bool Backward>
void avgpool_run(const char* op, const Tensor& src, const Tensor& dst, const PoolGeom& g, const Attrs& attrs) {
  const bool include_pad = attrs.get_or<bool>("count_include_pad", true);
  const std::optional<int64_t> divisor = attrs.get_optional_int("divisor_override");
  TP_DISPATCH_NUMERIC(dst.dtype(), op, ([&]<class T>() {
    const T* ps = src.data_as<T>();
    T* pd = dst.data_as<T>();
    parallel_for(0, g.planes, plane_grain(g.Ho * g.Wo * g.k[0] * g.k[1]), [&](int64_t lo, int64_t hi) {
      for (int64_t pl = lo; pl < hi; ++pl)
        for (int64_t oh = 0; oh < g.Ho; ++oh)
          for (int64_t ow = 0; ow < g.Wo; ++ow) {
            const Window w = avg_window(g, oh, ow, include_pad, divisor);
            const int64_t o = (pl * g.Ho + oh) * g.Wo + ow;
            if constexpr (Backward) {  // src: grad of the output, dst: grad of the input
              const T share = static_cast<T>(ps[o] / w.div);
              for (int64_t h = w.h0; h < w.h1; ++h)
                for (int64_t x = w.w0; x < w.w1; ++x) pd[(pl * g.H + h) * g.W + x] += share;
            } else {
              T acc = T(0);
              for (int64_t h = w.h0; h < w.h1; ++h)
                for (int64_t x = w.w0; x < w.w1; ++x) acc += ps[(pl * g.H + h) * g.W + x];
              pd[o] = static_cast<T>(acc / w.div);
            }
          }
    });
  }));
}

std::vector<Tensor> avgpool_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  avgpool_run<false>(op.name, as_contiguous(in[0]), out, pool_geom(op.name, in[0].sizes(), attrs, false), attrs);
  return {out};
}

std::vector<TensorMeta> avgpool_grad_infer(const OpDef&, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  return {TensorMeta::contiguous(attr_shape(attrs, "size"), in[0].dtype)};
}

std::vector<Tensor> avgpool_grad_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                     const std::vector<TensorMeta>& om) {
  Tensor gx = alloc_out(om[0]);
  fill(gx, Scalar(int64_t{0}));
  avgpool_run<true>(op.name, as_contiguous(in[0]), gx, pool_geom(op.name, gx.sizes(), attrs, false), attrs);
  return {gx};
}

std::vector<Tensor> avgpool_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  static const OpDef& op = get_op("avg_pool2d_grad");
  Attrs attrs = a.attrs;
  const Shape& s = a.inputs[0].sizes();
  attrs.set("size", std::vector<int64_t>(s.begin(), s.end()));
  return {call_op1(op, {g}, attrs)};
}

// avg_pool2d_grad is the adjoint of avg_pool2d: its derivative is avg_pool2d itself.
std::vector<Tensor> avgpool_grad_backward(const BackwardArgs& a) {
  const Tensor& gg = ops::grad_out(a);
  if (!gg.defined() || !a.needs_grad[0]) return {Tensor()};
  static const OpDef& op = get_op("avg_pool2d");
  Attrs attrs;
  for (const auto& [name, value] : a.attrs.items())
    if (std::string_view(name) != "size") attrs.set(name, value);
  return {call_op1(op, {gg}, attrs)};
}

// ---- adaptive average pooling ----
Pair adaptive_out(const OpDef& op, const Attrs& attrs) {
  Pair o = pair_attr(attrs, "output_size", op.name);
  TP_CHECK(o[0] >= 0 && o[1] >= 0, ValueError, op.name, ": output_size must be non-negative");
  return o;
}

std::vector<TensorMeta> adaptive_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_input(op.name, in[0]);
  Pair o = adaptive_out(op, attrs);
  return {TensorMeta::contiguous(with_spatial(in[0].sizes, o[0], o[1]), in[0].dtype)};
}

// Window i of n over `in` elements: [floor(i * in / n), ceil((i + 1) * in / n)).
inline int64_t win_start(int64_t i, int64_t n, int64_t in) { return (i * in) / n; }
inline int64_t win_end(int64_t i, int64_t n, int64_t in) { return ((i + 1) * in + n - 1) / n; }

template <bool Backward>
void adaptive_run(const char* op, const Tensor& src, const Tensor& dst, int64_t planes, int64_t H, int64_t W,
                  int64_t Ho, int64_t Wo) {
  TP_DISPATCH_FLOATING(dst.dtype(), op, ([&]<class T>() {
    const T* ps = src.data_as<T>();
    T* pd = dst.data_as<T>();
    parallel_for(0, planes, plane_grain(H * W), [&](int64_t lo, int64_t hi) {
      for (int64_t pl = lo; pl < hi; ++pl)
        for (int64_t oh = 0; oh < Ho; ++oh)
          for (int64_t ow = 0; ow < Wo; ++ow) {
            const int64_t h0 = win_start(oh, Ho, H), h1 = win_end(oh, Ho, H);
            const int64_t w0 = win_start(ow, Wo, W), w1 = win_end(ow, Wo, W);
            const T div = static_cast<T>((h1 - h0) * (w1 - w0));
            const int64_t o = (pl * Ho + oh) * Wo + ow;
            if constexpr (Backward) {
              const T share = ps[o] / div;
              for (int64_t h = h0; h < h1; ++h)
                for (int64_t x = w0; x < w1; ++x) pd[(pl * H + h) * W + x] += share;
            } else {
              T acc = T(0);
              for (int64_t h = h0; h < h1; ++h)
                for (int64_t x = w0; x < w1; ++x) acc += ps[(pl * H + h) * W + x];
              pd[o] = acc / div;
            }
          }
    });
  }));
}

std::vector<Tensor> adaptive_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs&,
                                 const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  const Shape& s = in[0].sizes();
  const int64_t H = s[s.size() - 2], W = s[s.size() - 1];
  const int64_t Ho = out.sizes()[s.size() - 2], Wo = out.sizes()[s.size() - 1];
  if (out.numel() == 0) return {out};
  adaptive_run<false>(op.name, as_contiguous(in[0]), out, in[0].numel() / (H * W), H, W, Ho, Wo);
  return {out};
}

std::vector<Tensor> adaptive_grad_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs&,
                                      const std::vector<TensorMeta>& om) {
  Tensor gx = alloc_out(om[0]);
  fill(gx, Scalar(int64_t{0}));
  const Shape& s = gx.sizes();
  const int64_t H = s[s.size() - 2], W = s[s.size() - 1];
  const int64_t Ho = in[0].sizes()[s.size() - 2], Wo = in[0].sizes()[s.size() - 1];
  if (in[0].numel() == 0 || gx.numel() == 0) return {gx};
  adaptive_run<true>(op.name, as_contiguous(in[0]), gx, gx.numel() / (H * W), H, W, Ho, Wo);
  return {gx};
}

std::vector<Tensor> adaptive_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  static const OpDef& op = get_op("adaptive_avg_pool2d_grad");
  const Shape& s = a.inputs[0].sizes();
  return {call_op1(op, {g}, {{"size", std::vector<int64_t>(s.begin(), s.end())}})};
}

// adaptive_avg_pool2d_grad is the adjoint of adaptive_avg_pool2d (same output size).
std::vector<Tensor> adaptive_grad_backward(const BackwardArgs& a) {
  const Tensor& gg = ops::grad_out(a);
  if (!gg.defined() || !a.needs_grad[0]) return {Tensor()};
  static const OpDef& op = get_op("adaptive_avg_pool2d");
  const Shape& s = a.inputs[0].sizes();
  return {call_op1(op, {gg}, {{"output_size", std::vector<int64_t>(s.end() - 2, s.end())}})};
}

std::vector<Tensor> maxpool_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  static const OpDef& op = get_op("max_pool2d_with_indices");
  return {call_op(op, in, attrs)[0]};
}

std::vector<TensorMeta> composite_infer(const OpDef& op, const std::vector<TensorMeta>&, const Attrs&) {
  throw Error(str("internal: ", op.name, " is a composite and has no inference of its own"));
}

}  // namespace

void register_pool_ops() {
  register_op({.name = "max_pool2d_with_indices",
               .schema = "max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
                         "int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)",
               .num_inputs = 1, .infer = &maxpool_infer, .cpu = &maxpool_cpu, .backward = &maxpool_backward});
  register_op({.name = "max_pool2d",
               .schema = "max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
                         "int[2] dilation=1, bool ceil_mode=False) -> Tensor",
               .tags = kComposite, .num_inputs = 1, .infer = &composite_infer, .decompose = &maxpool_decompose});
  register_op({.name = "max_pool2d_grad", .num_inputs = 2, .infer = &maxpool_grad_infer, .cpu = &maxpool_grad_cpu,
               .backward = &maxpool_grad_backward});
  register_op({.name = "avg_pool2d",
               .schema = "avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
                         "bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor",
               .num_inputs = 1, .infer = &avgpool_infer, .cpu = &avgpool_cpu, .backward = &avgpool_backward});
  register_op({.name = "avg_pool2d_grad", .num_inputs = 1, .infer = &avgpool_grad_infer, .cpu = &avgpool_grad_cpu,
               .backward = &avgpool_grad_backward});
  register_op({.name = "adaptive_avg_pool2d",
               .schema = "adaptive_avg_pool2d(Tensor self, int[2] output_size) -> Tensor", .num_inputs = 1,
               .infer = &adaptive_infer, .cpu = &adaptive_cpu, .backward = &adaptive_backward});
  register_op({.name = "adaptive_avg_pool2d_grad", .num_inputs = 1, .infer = &avgpool_grad_infer,
               .cpu = &adaptive_grad_cpu, .backward = &adaptive_grad_backward});
}

}  // namespace tp
