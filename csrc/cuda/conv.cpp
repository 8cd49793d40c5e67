// conv2d on CUDA: through cuDNN (cuda/cudnn.h) where it loads, else by
// im2col + the cuBLASLt matmul (float32/float64 only). For sample n and group
// g the input patches unfold into
//   col[n][g][(c * kh + i) * kw + j][oh * Wo + ow] = x[n][g*Cg + c][oh*sh - ph + i*dh][ow*sw - pw + j*dw]
// (zero outside the image), so out[n][g] = W[g] (Og x kk) @ col[n][g]; the
// input gradient is col2im(W^T @ grad) and the weight gradient
// grad (as [G, Og, N*hw]) @ col^T with col unfolded as [G, kk, N*hw]. The
// unfold kernel writes through three strides, so both layouts come from one
// source. col2im gathers (each input element sums its own patch entries in a
// fixed order): no atomics, deterministic.
#include <algorithm>

#include "cuda/copy.h"
#include "cuda/cudnn.h"
#include "cuda/driver.h"
#include "cuda/kernels.h"
#include "cuda/nn_kernels.h"
#include "ops/dispatch.h"
#include "ops/kernel_util.h"
#include "ops/nn_util.h"

namespace tp::cuda {

const char* float_ctype(DType d) { return d == DType::Float32 ? "float" : "double"; }

unsigned grid_1d(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 65535 * 8));
}

namespace {

constexpr int kThreads = 256;

// Same layout as the struct in the generated sources.
struct ConvParams {
  long long N, C, H, W, G, Cg, kh, kw, Ho, Wo, sh, sw, ph, pw, dh, dw;
  long long sn, sg, sr;  // im2col: where (sample, group, patch row) start in col
};

const char* kParamStruct =
    "struct P { long long N, C, H, W, G, Cg, kh, kw, Ho, Wo, sh, sw, ph, pw, dh, dw, sn, sg, sr; };\n";

std::string im2col_source(const std::string& name, DType dt) {
  std::string s = "typedef " + std::string(float_ctype(dt)) + " T;\n" + kParamStruct;
  s += "extern \"C\" __global__ void " + name + "(const T* __restrict__ x, T* __restrict__ col, P p) {\n";
  s += "  const long long kk = p.Cg * p.kh * p.kw, hw = p.Ho * p.Wo, total = p.N * p.G * kk * hw;\n";
  s += "  const long long step = (long long)gridDim.x * blockDim.x;\n";
  s += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {\n";
  s += "    long long q = i;\n";
  s += "    const long long pix = q % hw; q /= hw;\n";
  s += "    const long long r = q % kk; q /= kk;\n";
  s += "    const long long g = q % p.G, n = q / p.G;\n";
  s += "    const long long j = r % p.kw, t = r / p.kw, ki = t % p.kh, c = t / p.kh;\n";
  s += "    const long long oh = pix / p.Wo, ow = pix % p.Wo;\n";
  s += "    const long long ih = oh * p.sh - p.ph + ki * p.dh, iw = ow * p.sw - p.pw + j * p.dw;\n";
  s += "    T v = (T)0;\n";
  s += "    if (ih >= 0 && ih < p.H && iw >= 0 && iw < p.W) v = x[((n * p.C + g * p.Cg + c) * p.H + ih) * p.W + iw];\n";
  s += "    col[n * p.sn + g * p.sg + r * p.sr + pix] = v;\n  }\n}\n";
  return s;
}

// gcol: [N, G, kk, hw] contiguous; one thread per input element.
std::string col2im_source(const std::string& name, DType dt) {
  std::string s = "typedef " + std::string(float_ctype(dt)) + " T;\n" + kParamStruct;
  s += "extern \"C\" __global__ void " + name + "(const T* __restrict__ gcol, T* __restrict__ gx, P p) {\n";
  s += "  const long long kk = p.Cg * p.kh * p.kw, hw = p.Ho * p.Wo, total = p.N * p.C * p.H * p.W;\n";
  s += "  const long long step = (long long)gridDim.x * blockDim.x;\n";
  s += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {\n";
  s += "    const long long w = i % p.W, h = (i / p.W) % p.H, c = (i / (p.W * p.H)) % p.C, n = i / (p.W * p.H * p.C);\n";
  s += "    const long long g = c / p.Cg, cl = c % p.Cg;\n";
  s += "    const T* base = gcol + (n * p.G + g) * kk * hw;\n";
  s += "    T acc = (T)0;\n";
  s += "    for (long long ki = 0; ki < p.kh; ++ki) {\n";
  s += "      const long long th = h + p.ph - ki * p.dh;\n";
  s += "      if (th < 0 || th % p.sh != 0 || th / p.sh >= p.Ho) continue;\n";
  s += "      const long long oh = th / p.sh;\n";
  s += "      for (long long j = 0; j < p.kw; ++j) {\n";
  s += "        const long long tw = w + p.pw - j * p.dw;\n";
  s += "        if (tw < 0 || tw % p.sw != 0 || tw / p.sw >= p.Wo) continue;\n";
  s += "        acc += base[((cl * p.kh + ki) * p.kw + j) * hw + oh * p.Wo + tw / p.sw];\n";
  s += "      }\n    }\n";
  s += "    gx[i] = acc;\n  }\n}\n";
  return s;
}

std::string kname(const char* what, DType dt) { return str("tp_", what, "_", dtype_name(dt)); }

bool is_float(DType d) { return d == DType::Float32 || d == DType::Float64; }
bool is_half(DType d) { return d == DType::Float16 || d == DType::BFloat16; }

// x: [N, C, H, W] (or unbatched [C, H, W]); w: [O, Cg, kh, kw].
ConvParams geometry(const Shape& x, const Shape& w, const Attrs& attrs, const char* op) {
  ConvParams p{};
  const bool b = x.size() == 4;
  p.N = b ? x[0] : 1;
  p.C = x[b ? 1 : 0];
  p.H = x[b ? 2 : 1];
  p.W = x[b ? 3 : 2];
  p.G = attrs.get_int("groups");
  p.Cg = w[1];
  p.kh = w[2];
  p.kw = w[3];
  const Pair st = pair_attr(attrs, "stride", op, Pair{1, 1}), pad = pair_attr(attrs, "padding", op, Pair{0, 0}),
             dil = pair_attr(attrs, "dilation", op, Pair{1, 1});
  p.sh = st[0];
  p.sw = st[1];
  p.ph = pad[0];
  p.pw = pad[1];
  p.dh = dil[0];
  p.dw = dil[1];
  p.Ho = (p.H + 2 * p.ph - p.dh * (p.kh - 1) - 1) / p.sh + 1;
  p.Wo = (p.W + 2 * p.pw - p.dw * (p.kw - 1) - 1) / p.sw + 1;
  return p;
}

// A pointwise 1x1 convolution reads the input as its own unfolded matrix.
bool is_pointwise(const ConvParams& p) {
  return p.kh == 1 && p.kw == 1 && p.sh == 1 && p.sw == 1 && p.ph == 0 && p.pw == 0;
}

ConvShape cudnn_shape(const ConvParams& p, int64_t O) {
  return ConvShape{p.N, p.C, p.H, p.W, O, p.G, p.kh, p.kw, p.Ho, p.Wo, p.ph, p.pw, p.sh, p.sw, p.dh, p.dw};
}

Tensor contiguous_on_device(const Tensor& t) {
  if (t.is_contiguous()) return t;
  static const OpDef& clone = get_op("clone");
  return run_kernel(clone, {t}, {})[0];
}

Tensor mm(const Tensor& a, const Tensor& b) {
  static const OpDef& op = get_op("matmul");
  return run_kernel(op, {a, b}, {})[0];
}

void unfold(const Tensor& x, const Tensor& col, ConvParams p, int dev) {
  const int64_t total = p.N * p.G * p.Cg * p.kh * p.kw * p.Ho * p.Wo;
  if (total == 0) return;
  const std::string name = kname("im2col", x.dtype());
  void* px = x.data();
  void* pc = col.data();
  void* args[] = {&px, &pc, &p};
  launch_generated(dev, name, im2col_source(name, x.dtype()), grid_1d(total, kThreads), kThreads, args);
}

Shape contiguous_of(const Shape& s) { return contiguous_strides(s); }

Tensor conv_forward(const std::vector<Tensor>& in, const Attrs& attrs, const TensorMeta& om) {
  Tensor x = contiguous_on_device(in[0]), w = contiguous_on_device(in[1]);
  const int dev = x.device().index;
  ConvParams p = geometry(x.sizes(), w.sizes(), attrs, "conv2d");
  const int64_t O = w.sizes()[0], Og = O / p.G, kk = p.Cg * p.kh * p.kw, hw = p.Ho * p.Wo;
  if (const ConvShape s = cudnn_shape(p, O); cudnn_covers(x.dtype(), s)) {
    Tensor y = empty(om.sizes, om.dtype, dev);
    cudnn_convolution(dev, om.dtype, ConvPass::Forward, s, x.data(), w.data(), y.data(), "conv2d");
    // The bias in place (no second output tensor); a compiled region's
    // pointwise tail reads the biased result.
    if (in[2].defined()) cudnn_add_bias(dev, om.dtype, s, contiguous_on_device(in[2]).data(), y.data(), "conv2d");
    return y;
  }
  if (!is_float(om.dtype)) return Tensor();  // 16-bit beyond cuDNN: no kernel
  Tensor col;
  if (is_pointwise(p)) {
    col = x.as_strided({p.N, p.G, kk, hw}, {p.C * hw, kk * hw, hw, 1}, x.offset());
  } else {
    col = empty({p.N, p.G, kk, hw}, x.dtype(), dev);
    p.sn = p.G * kk * hw;
    p.sg = kk * hw;
    p.sr = hw;
    unfold(x, col, p, dev);
  }
  Tensor r;
  if (p.G == 1) {
    r = mm(w.as_strided({O, kk}, {kk, 1}, w.offset()), col.as_strided({p.N, kk, hw}, {col.strides()[0], hw, 1}, col.offset()));
  } else {
    r = mm(w.as_strided({p.G, Og, kk}, {Og * kk, kk, 1}, w.offset()), col);
  }
  Tensor out = r.as_strided(om.sizes, contiguous_of(om.sizes), r.offset());
  if (in[2].defined()) {
    static const OpDef& add = get_op("add");
    const Tensor& b = in[2];
    out = run_kernel(add, {out, b.as_strided({O, 1, 1}, {b.strides()[0], 1, 1}, b.offset())}, {})[0];
  }
  return out;
}

// inputs (grad, w), attrs size = the input's shape.
Tensor conv_input_grad(const std::vector<Tensor>& in, const Attrs& attrs, const TensorMeta& om) {
  Tensor g = contiguous_on_device(in[0]), w = contiguous_on_device(in[1]);
  const int dev = g.device().index;
  ConvParams p = geometry(om.sizes, w.sizes(), attrs, "conv2d_input_grad");
  const int64_t O = w.sizes()[0], Og = O / p.G, kk = p.Cg * p.kh * p.kw, hw = p.Ho * p.Wo;
  if (const ConvShape s = cudnn_shape(p, O); cudnn_covers(om.dtype, s)) {
    Tensor gx = empty(om.sizes, om.dtype, dev);
    cudnn_convolution(dev, om.dtype, ConvPass::BackwardData, s, g.data(), w.data(), gx.data(), "conv2d_input_grad");
    return gx;
  }
  if (!is_float(om.dtype)) return Tensor();
  Tensor gcol;
  if (p.G == 1) {
    gcol = mm(w.as_strided({kk, O}, {1, kk}, w.offset()), g.as_strided({p.N, O, hw}, {O * hw, hw, 1}, g.offset()));
  } else {
    gcol = mm(w.as_strided({p.G, kk, Og}, {Og * kk, 1, kk}, w.offset()),
              g.as_strided({p.N, p.G, Og, hw}, {O * hw, Og * hw, hw, 1}, g.offset()));
  }
  if (is_pointwise(p)) return gcol.as_strided(om.sizes, contiguous_of(om.sizes), gcol.offset());
  Tensor gx = empty(om.sizes, om.dtype, dev);
  const int64_t total = gx.numel();
  if (total > 0) {
    const std::string name = kname("col2im", om.dtype);
    void* pc = gcol.data();
    void* px = gx.data();
    void* args[] = {&pc, &px, &p};
    launch_generated(dev, name, col2im_source(name, om.dtype), grid_1d(total, kThreads), kThreads, args);
  }
  return gx;
}

// inputs (grad, x), attrs size = the weight's shape.
Tensor conv_weight_grad(const std::vector<Tensor>& in, const Attrs& attrs, const TensorMeta& om) {
  Tensor g = contiguous_on_device(in[0]), x = contiguous_on_device(in[1]);
  const int dev = g.device().index;
  ConvParams p = geometry(x.sizes(), om.sizes, attrs, "conv2d_weight_grad");
  const int64_t O = om.sizes[0], Og = O / p.G, kk = p.Cg * p.kh * p.kw, hw = p.Ho * p.Wo, L = p.N * hw;
  if (const ConvShape s = cudnn_shape(p, O); cudnn_covers(om.dtype, s)) {
    Tensor gw = empty(om.sizes, om.dtype, dev);
    cudnn_convolution(dev, om.dtype, ConvPass::BackwardFilter, s, g.data(), x.data(), gw.data(), "conv2d_weight_grad");
    return gw;
  }
  if (!is_float(om.dtype)) return Tensor();
  // col as [G, kk, N*hw]: the samples side by side, so one GEMM per group sums them.
  Tensor col = empty({p.G, kk, L}, x.dtype(), dev);
  p.sn = hw;
  p.sg = kk * L;
  p.sr = L;
  unfold(x, col, p, dev);
  // grad as [G, Og, N*hw] (a copy unless one sample).
  Tensor gp = g.as_strided({p.G, Og, p.N, hw}, {Og * hw, hw, O * hw, 1}, g.offset());
  gp = contiguous_on_device(gp);
  Tensor r;
  if (p.G == 1) {
    r = mm(gp.as_strided({O, L}, {L, 1}, gp.offset()), col.as_strided({L, kk}, {1, L}, col.offset()));
  } else {
    r = mm(gp.as_strided({p.G, Og, L}, {Og * L, L, 1}, gp.offset()),
           col.as_strided({p.G, L, kk}, {kk * L, 1, L}, col.offset()));
  }
  return r.as_strided(om.sizes, contiguous_of(om.sizes), r.offset());
}

}  // namespace

bool conv_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                 const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out) {
  const std::string name = op.name;
  if (name != "conv2d" && name != "conv2d_input_grad" && name != "conv2d_weight_grad") return false;
  // float16/bfloat16 only through cuDNN (im2col's kernels are float/double).
  if (out_meta.size() != 1 || !(is_float(out_meta[0].dtype) || (is_half(out_meta[0].dtype) && cudnn_available() &&
                                                                 cudnn_enabled())))
    return false;
  for (const Tensor& t : inputs)
    if (t.defined() && (t.device().kind != Device::Kind::CUDA || t.dtype() != out_meta[0].dtype)) return false;
  if (inputs[0].device().index != inputs[1].device().index) return false;
  const int dev = inputs[0].device().index;
  const TensorMeta& om = out_meta[0];
  // Empty problems: nothing to multiply (a zero-channel conv is its bias, or zero).
  const Shape& ws = name == "conv2d" ? inputs[1].sizes() : name == "conv2d_input_grad" ? inputs[1].sizes() : om.sizes;
  if (numel(om.sizes) == 0 || ws[1] == 0 || inputs[0].numel() == 0) {
    if (name == "conv2d" && numel(om.sizes) > 0 && inputs[2].defined()) return false;
    Tensor z = empty(om.sizes, om.dtype, dev);
    if (z.numel() > 0) {
      activate(dev);
      check(driver().cuMemsetD8(reinterpret_cast<CUdeviceptr>(z.data()), 0, z.numel() * itemsize(z.dtype())),
            op.name);
    }
    out = {z};
    return true;
  }
  Tensor r = name == "conv2d"              ? conv_forward(inputs, attrs, om)
             : name == "conv2d_input_grad" ? conv_input_grad(inputs, attrs, om)
                                           : conv_weight_grad(inputs, attrs, om);
  if (!r.defined()) return false;
  out = {r};
  return true;
}

std::vector<std::pair<std::string, std::string>> conv_kernel_sources() {
  std::vector<std::pair<std::string, std::string>> v;
  for (DType dt : {DType::Float32, DType::Float64}) {
    v.emplace_back(kname("im2col", dt), im2col_source(kname("im2col", dt), dt));
    v.emplace_back(kname("col2im", dt), col2im_source(kname("col2im", dt), dt));
  }
  return v;
}

}  // namespace tp::cuda
