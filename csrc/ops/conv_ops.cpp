// 2-D convolution (cross-correlation, as in PyTorch) by im2col + GEMM, with
// its two gradient operators; conv1d and the 'same'/'valid' padding forms are
// composites over conv2d (ops/nn_ops.cpp registers everything).
//
// For one sample and one group the input patches are unfolded into a matrix
//   col[(c * kh + i) * kw + j][oh * Wo + ow] = x[c][oh*sh - ph + i*dh][ow*sw - pw + j*dw]
// (zero outside the image), so out = W[Og, Cg*kh*kw] @ col, grad_col = W^T @ grad
// (folded back with col2im), grad_W += grad @ col^T.
#include <algorithm>
#include <string_view>
#include <type_traits>

#include "core/parallel.h"
#include "ops/blas.h"
#include "ops/derivative_util.h"
#include "ops/dispatch.h"
#include "ops/nn_util.h"
#include "ops/registry.h"

namespace tp {
namespace {

struct ConvGeom {
  int64_t N, C, H, W;     // input
  int64_t O, kh, kw;      // weight [O, C/groups, kh, kw]
  int64_t Ho, Wo, groups;
  Pair stride, pad, dil;
  int64_t Cg() const { return C / groups; }
  int64_t Og() const { return O / groups; }
  int64_t kk() const { return Cg() * kh * kw; }
  int64_t hw() const { return Ho * Wo; }
};

// Checks shapes and computes the geometry from the input and weight shapes.
ConvGeom conv_geom(const char* op, const Shape& x, const Shape& w, const Attrs& attrs) {
  TP_CHECK(x.size() == 3 || x.size() == 4, ValueError, op, ": expected 3D (unbatched) or 4D (batched) input, but got "
           "input of shape ", shape_str(x));
  TP_CHECK(w.size() == 4, ValueError, op, ": expected a 4D weight [out_channels, in_channels/groups, kH, kW], but got "
           "shape ", shape_str(w));
  ConvGeom g;
  const bool b = x.size() == 4;
  g.N = b ? x[0] : 1;
  g.C = x[b ? 1 : 0];
  g.H = x[b ? 2 : 1];
  g.W = x[b ? 3 : 2];
  g.O = w[0];
  g.kh = w[2];
  g.kw = w[3];
  g.groups = attrs.get_int("groups");
  g.stride = pair_attr(attrs, "stride", op, Pair{1, 1});
  g.pad = pair_attr(attrs, "padding", op, Pair{0, 0});
  g.dil = pair_attr(attrs, "dilation", op, Pair{1, 1});
  TP_CHECK(g.groups > 0, ValueError, op, ": groups must be positive, got ", g.groups);
  TP_CHECK(g.stride[0] > 0 && g.stride[1] > 0, ValueError, op, ": stride must be positive");
  TP_CHECK(g.dil[0] > 0 && g.dil[1] > 0, ValueError, op, ": dilation must be positive");
  TP_CHECK(g.pad[0] >= 0 && g.pad[1] >= 0, ValueError, op, ": negative padding is not supported");
  TP_CHECK(g.O % g.groups == 0, ValueError, op, ": out_channels (", g.O, ") must be divisible by groups (", g.groups,
           ")");
  TP_CHECK(g.C == w[1] * g.groups, ValueError, op, ": input of shape ", shape_str(x), " has ", g.C,
           " channels, but weight of shape ", shape_str(w), " with groups=", g.groups, " expects ", w[1] * g.groups);
  const int64_t eh = g.dil[0] * (g.kh - 1) + 1, ew = g.dil[1] * (g.kw - 1) + 1;
  TP_CHECK(g.H + 2 * g.pad[0] >= eh && g.W + 2 * g.pad[1] >= ew, ValueError, op, ": kernel size (", eh, " x ", ew,
           ", dilated) is larger than the padded input (", g.H + 2 * g.pad[0], " x ", g.W + 2 * g.pad[1],
           ") for input of shape ", shape_str(x));
  g.Ho = (g.H + 2 * g.pad[0] - eh) / g.stride[0] + 1;
  g.Wo = (g.W + 2 * g.pad[1] - ew) / g.stride[1] + 1;
  return g;
}

Shape out_shape(const ConvGeom& g, bool batched) {
  return batched ? Shape{g.N, g.O, g.Ho, g.Wo} : Shape{g.O, g.Ho, g.Wo};
}

std::vector<TensorMeta> conv2d_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta &x = in[0], &w = in[1], &b = in[2];
  // Integer convolution is allowed as in PyTorch on the CPU (exact, no gradient).
  TP_CHECK(x.dtype != DType::Bool && x.dtype == w.dtype, TypeError, op.name,
           ": expected numeric (not bool) input and weight of the same dtype, but got ", dtype_name(x.dtype), " and ",
           dtype_name(w.dtype));
  ConvGeom g = conv_geom(op.name, x.sizes, w.sizes, attrs);
  if (b.defined) {
    TP_CHECK(b.sizes == Shape{g.O} && b.dtype == x.dtype, ValueError, op.name, ": expected a bias of shape [", g.O,
             "] and dtype ", dtype_name(x.dtype), ", but got ", dtype_name(b.dtype), shape_str(b.sizes));
  }
  return {TensorMeta::contiguous(out_shape(g, x.sizes.size() == 4), x.dtype)};
}

// Row r of the unfolded matrix starts at col + r * ld (ld = hw for one sample;
// several samples side by side use ld = samples * hw).
template <class T>
void im2col(const T* x, const ConvGeom& g, T* col, int64_t ld) {
  const int64_t hw = ld;
  for (int64_t c = 0; c < g.Cg(); ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        T* row = col + ((c * g.kh + i) * g.kw + j) * hw;
        const T* plane = x + c * g.H * g.W;
        for (int64_t oh = 0; oh < g.Ho; ++oh) {
          const int64_t ih = oh * g.stride[0] - g.pad[0] + i * g.dil[0];
          T* r = row + oh * g.Wo;
          if (ih < 0 || ih >= g.H) {
            std::fill(r, r + g.Wo, T(0));
            continue;
          }
          // Columns [lo, hi) read inside the row, the rest is padding: the copy
          // needs no bounds test per element (a plain copy at stride 1).
          const int64_t s = g.stride[1], off = j * g.dil[1] - g.pad[1];
          const int64_t lo = std::min<int64_t>(g.Wo, off >= 0 ? 0 : (-off + s - 1) / s);
          const int64_t hi = std::max<int64_t>(lo, std::min<int64_t>(g.Wo, g.W - off <= 0 ? 0 : (g.W - off + s - 1) / s));
          const T* src = plane + ih * g.W;
          std::fill(r, r + lo, T(0));
          if (s == 1) std::copy(src + lo + off, src + hi + off, r + lo);
          else
            for (int64_t ow = lo; ow < hi; ++ow) r[ow] = src[ow * s + off];
          std::fill(r + hi, r + g.Wo, T(0));
        }
      }
}

template <class T>
void col2im_add(const T* col, const ConvGeom& g, T* x) {
  const int64_t hw = g.hw();
  for (int64_t c = 0; c < g.Cg(); ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const T* row = col + ((c * g.kh + i) * g.kw + j) * hw;
        T* plane = x + c * g.H * g.W;
        for (int64_t oh = 0; oh < g.Ho; ++oh) {
          const int64_t ih = oh * g.stride[0] - g.pad[0] + i * g.dil[0];
          if (ih < 0 || ih >= g.H) continue;
          T* dst = plane + ih * g.W;
          for (int64_t ow = 0; ow < g.Wo; ++ow) {
            const int64_t iw = ow * g.stride[1] - g.pad[1] + j * g.dil[1];
            if (iw >= 0 && iw < g.W) dst[iw] += row[oh * g.Wo + ow];
          }
        }
      }
}

// A 1x1 convolution with stride 1 and no padding reads the input as the column matrix itself.
bool is_pointwise(const ConvGeom& g) {
  return g.kh == 1 && g.kw == 1 && g.stride == Pair{1, 1} && g.pad == Pair{0, 0};
}

// Runs body(n) for every sample: with several samples, one thread per sample
// (single-threaded BLAS, so the unfolding runs in parallel too); a single
// sample uses threaded BLAS.
template <class F>
void for_samples(const ConvGeom& g, const F& body) {
  if (g.N > 1 && num_threads() > 1 && !in_parallel_region()) {
    blas::use_one_thread();
    parallel_for(0, g.N, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t n = lo; n < hi; ++n) body(n);
    });
  } else {
    for (int64_t n = 0; n < g.N; ++n) body(n);
  }
}

// C = A B + beta C (row-major, A is M x K, B is K x N): BLAS for floats, a
// plain loop for integers, which BLAS does not have.
template <class T>
void gemm_nn(int64_t M, int64_t N, int64_t K, const T* A, const T* B, T beta, T* C) {
  if constexpr (std::is_floating_point_v<T>) {
    blas::gemm(false, false, M, N, K, T(1), A, K, B, N, beta, C, N);
  } else {
    for (int64_t m = 0; m < M; ++m) {
      T* c = C + m * N;
      if (beta == T(0)) std::fill(c, c + N, T(0));
      for (int64_t k = 0; k < K; ++k) {
        const T a = A[m * K + k];
        const T* b = B + k * N;
        for (int64_t n = 0; n < N; ++n) c[n] += a * b[n];
      }
    }
  }
}

template <class T>
void conv_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvGeom& g, const Tensor& out) {
  const T* px = x.data_as<T>();
  const T* pw = w.data_as<T>();
  T* po = out.data_as<T>();
  const int64_t hw = g.hw(), kk = g.kk();
  const bool direct = is_pointwise(g);
  for_samples(g, [&](int64_t n) {
    std::vector<T> col(direct ? 0 : static_cast<size_t>(kk * hw));
    T* on = po + n * g.O * hw;
    if (bias.defined()) {
      const T* pb = bias.data_as<T>();
      for (int64_t o = 0; o < g.O; ++o) std::fill(on + o * hw, on + (o + 1) * hw, pb[o]);
    }
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const T* xg = px + (n * g.C + grp * g.Cg()) * g.H * g.W;
      if (!direct) im2col(xg, g, col.data(), hw);
      gemm_nn<T>(g.Og(), hw, kk, pw + grp * g.Og() * kk, direct ? xg : col.data(), bias.defined() ? T(1) : T(0),
                 on + grp * g.Og() * hw);
    }
  });
}

std::vector<Tensor> conv2d_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                               const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  if (out.numel() == 0) return {out};
  ConvGeom g = conv_geom(op.name, in[0].sizes(), in[1].sizes(), attrs);
  Tensor x = as_contiguous(in[0]), w = as_contiguous(in[1]);
  Tensor b = in[2].defined() ? as_contiguous(in[2]) : Tensor();
  TP_DISPATCH_NUMERIC(out.dtype(), op.name, ([&]<class T>() {
    if (g.kk() > 0) return conv_forward<T>(x, w, b, g, out);
    // No input channels: the result is the bias (or zero).
    T* po = out.data_as<T>();
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t o = 0; o < g.O; ++o)
        std::fill(po + (n * g.O + o) * g.hw(), po + (n * g.O + o + 1) * g.hw(), b.defined() ? b.data_as<T>()[o] : T(0));
  }));
  return {out};
}

// ---- gradient operators (internal: no schema) ----
Shape size_attr(const Attrs& attrs) { return attr_shape(attrs, "size"); }

std::vector<TensorMeta> input_grad_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  conv_geom(op.name, size_attr(attrs), in[1].sizes, attrs);
  return {TensorMeta::contiguous(size_attr(attrs), in[0].dtype)};
}

std::vector<Tensor> input_grad_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                   const std::vector<TensorMeta>& om) {
  Tensor gx = alloc_out(om[0]);
  fill(gx, Scalar(int64_t{0}));
  ConvGeom g = conv_geom(op.name, gx.sizes(), in[1].sizes(), attrs);
  if (gx.numel() == 0 || g.hw() == 0 || g.O == 0) return {gx};
  Tensor go = as_contiguous(in[0]), w = as_contiguous(in[1]);
  TP_DISPATCH_FLOATING(gx.dtype(), op.name, ([&]<class T>() {
    const T* pg = go.data_as<T>();
    const T* pw = w.data_as<T>();
    T* px = gx.data_as<T>();
    const int64_t hw = g.hw(), kk = g.kk();
    const bool direct = is_pointwise(g);
    for_samples(g, [&](int64_t n) {
      std::vector<T> col(direct ? 0 : static_cast<size_t>(kk * hw));
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        T* xg = px + (n * g.C + grp * g.Cg()) * g.H * g.W;
        // col = W_g^T @ grad_g; the 1x1 case writes straight into the input gradient.
        blas::gemm(true, false, kk, hw, g.Og(), T(1), pw + grp * g.Og() * kk, kk, pg + (n * g.O + grp * g.Og()) * hw,
                   hw, T(0), direct ? xg : col.data(), hw);
        if (!direct) col2im_add(col.data(), g, xg);
      }
    });
  }));
  return {gx};
}

std::vector<TensorMeta> weight_grad_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  conv_geom(op.name, in[1].sizes, size_attr(attrs), attrs);
  return {TensorMeta::contiguous(size_attr(attrs), in[0].dtype)};
}

// grad_W = sum over samples of grad_n @ col_n^T, computed per chunk of
// samples as one GEMM over their columns side by side: [Og, S*hw] @ [S*hw, kk].
// Chunks depend only on the sizes, so the result does not depend on the
// thread count; unfolding runs in parallel over samples, the GEMM in BLAS.
std::vector<Tensor> weight_grad_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                    const std::vector<TensorMeta>& om) {
  Tensor gw = alloc_out(om[0]);
  fill(gw, Scalar(int64_t{0}));
  ConvGeom g = conv_geom(op.name, in[1].sizes(), gw.sizes(), attrs);
  if (gw.numel() == 0 || g.hw() == 0 || g.N == 0) return {gw};
  Tensor go = as_contiguous(in[0]), x = as_contiguous(in[1]);
  TP_DISPATCH_FLOATING(gw.dtype(), op.name, ([&]<class T>() {
    const T* pg = go.data_as<T>();
    const T* px = x.data_as<T>();
    T* pw = gw.data_as<T>();
    const int64_t hw = g.hw(), kk = g.kk();
    const int64_t S = std::clamp<int64_t>((int64_t{1} << 24) / std::max<int64_t>(1, kk * hw), 1, g.N);
    std::vector<T> col(static_cast<size_t>(kk * S * hw)), gt(static_cast<size_t>(g.Og() * S * hw));
    for (int64_t n0 = 0; n0 < g.N; n0 += S) {
      const int64_t s = std::min(S, g.N - n0), ld = s * hw;
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        parallel_for(0, s, 1, [&](int64_t lo, int64_t hi) {
          for (int64_t i = lo; i < hi; ++i) {
            const int64_t n = n0 + i;
            im2col(px + (n * g.C + grp * g.Cg()) * g.H * g.W, g, col.data() + i * hw, ld);
            const T* src = pg + (n * g.O + grp * g.Og()) * hw;
            for (int64_t o = 0; o < g.Og(); ++o) std::copy(src + o * hw, src + (o + 1) * hw, gt.data() + o * ld + i * hw);
          }
        });
        blas::gemm(false, true, g.Og(), kk, ld, T(1), gt.data(), ld, col.data(), ld, n0 == 0 ? T(0) : T(1),
                   pw + grp * g.Og() * kk, kk);
      }
    }
  }));
  return {gw};
}

Attrs geometry_attrs(const Attrs& attrs, const Shape& size) {
  Attrs a = {{"stride", attrs.find("stride") ? *attrs.find("stride") : AttrValue(std::vector<int64_t>{1, 1})},
             {"padding", attrs.find("padding") ? *attrs.find("padding") : AttrValue(std::vector<int64_t>{0, 0})},
             {"dilation", attrs.find("dilation") ? *attrs.find("dilation") : AttrValue(std::vector<int64_t>{1, 1})},
             {"groups", attrs.get_int("groups")}};
  a.set("size", std::vector<int64_t>(size.begin(), size.end()));
  return a;
}

std::vector<Tensor> conv2d_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined()) return {Tensor(), Tensor(), Tensor()};
  const Tensor &x = a.inputs[0], &w = a.inputs[1];
  Tensor gx, gw, gb;
  if (a.needs_grad[0]) {
    static const OpDef& op = get_op("conv2d_input_grad");
    gx = call_op1(op, {g, w}, geometry_attrs(a.attrs, x.sizes()));
  }
  if (a.needs_grad[1]) {
    static const OpDef& op = get_op("conv2d_weight_grad");
    gw = call_op1(op, {g, x}, geometry_attrs(a.attrs, w.sizes()));
  }
  if (a.inputs[2].defined() && a.needs_grad[2]) gb = ops::sum(g, g.dim() == 4 ? ops::Dims{0, 2, 3} : ops::Dims{1, 2});
  return {gx, gw, gb};
}

// The two gradient operators are bilinear: input_grad(g, w) is the adjoint of conv2d(., w)
// and weight_grad(g, x) the adjoint of conv2d(x, .), so their own derivatives are
// convolutions and each other (double backward: gradient penalties of a convolutional
// critic, MAML through a CNN). The attrs without "size" are conv2d's.
Attrs conv_attrs(const Attrs& a) {
  Attrs r;
  for (const auto& [name, value] : a.items())
    if (std::string_view(name) != "size") r.set(name, value);
  return r;
}

// conv2d_input_grad(g, w) -> x-shaped; incoming gradient gg is x-shaped.
std::vector<Tensor> input_grad_backward(const BackwardArgs& a) {
  const Tensor& gg = ops::grad_out(a);
  if (!gg.defined()) return {Tensor(), Tensor()};
  const Tensor &g = a.inputs[0], &w = a.inputs[1];
  Tensor dg, dw;
  if (a.needs_grad[0]) {
    static const OpDef& op = get_op("conv2d");
    dg = call_op1(op, {gg, w, Tensor()}, conv_attrs(a.attrs));
  }
  if (a.needs_grad[1]) {
    static const OpDef& op = get_op("conv2d_weight_grad");
    dw = call_op1(op, {g, gg}, geometry_attrs(a.attrs, w.sizes()));
  }
  return {dg, dw};
}

// conv2d_weight_grad(g, x) -> w-shaped; incoming gradient gg is w-shaped.
std::vector<Tensor> weight_grad_backward(const BackwardArgs& a) {
  const Tensor& gg = ops::grad_out(a);
  if (!gg.defined()) return {Tensor(), Tensor()};
  const Tensor &g = a.inputs[0], &x = a.inputs[1];
  Tensor dg, dx;
  if (a.needs_grad[0]) {
    static const OpDef& op = get_op("conv2d");
    dg = call_op1(op, {x, gg, Tensor()}, conv_attrs(a.attrs));
  }
  if (a.needs_grad[1]) {
    static const OpDef& op = get_op("conv2d_input_grad");
    dx = call_op1(op, {g, gg}, geometry_attrs(a.attrs, x.sizes()));
  }
  return {dg, dx};
}

}  // namespace

void register_conv_ops() {
  register_op({.name = "conv2d",
               .schema = "conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, "
                         "int[2] dilation=1, int groups=1) -> Tensor",
               .num_inputs = 3, .infer = &conv2d_infer, .cpu = &conv2d_cpu, .backward = &conv2d_backward});
  register_op({.name = "conv2d_input_grad", .num_inputs = 2, .infer = &input_grad_infer, .cpu = &input_grad_cpu,
               .backward = &input_grad_backward});
  register_op({.name = "conv2d_weight_grad", .num_inputs = 2, .infer = &weight_grad_infer, .cpu = &weight_grad_cpu,
               .backward = &weight_grad_backward});
}

}  // namespace tp
