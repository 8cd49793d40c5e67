// Transposed convolution (conv_transpose1d / conv_transpose2d) as a composite
// over conv2d_input_grad. A transposed convolution is, by definition, the
// adjoint of the convolution with the same weight and geometry: for a
// convolution taking a [Cout, Ho, Wo] image to [Cin, H, W] with weight
// [Cin, Cout/groups, kh, kw], the transposed one takes [Cin, H, W] back to
// [Cout, Ho, Wo]. conv2d's input gradient is exactly that map, so the
// composite reuses its CPU (im2col/GEMM) and CUDA (cuDNN backward-data)
// kernels, and its derivatives (conv2d_input_grad is differentiable in both
// arguments) give first and second order gradients without new code.
#include <algorithm>
#include <string>

#include "ops/dispatch.h"
#include "ops/nn_util.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tp {
namespace {

std::vector<TensorMeta> composite_infer(const OpDef& op, const std::vector<TensorMeta>&, const Attrs&) {
  throw Error(str("internal: ", op.name, " is a composite and has no inference of its own"));
}

// The 1-D operator's int[1] attributes as the pair {1 (height), value}.
Pair one_as_pair(const Attrs& attrs, const char* name, int64_t fallback, int64_t height) {
  const AttrValue* v = attrs.find(name);
  int64_t value = fallback;
  if (v) {
    if (auto* i = std::get_if<int64_t>(v)) value = *i;
    if (auto* xs = std::get_if<std::vector<int64_t>>(v)) {
      TP_CHECK(xs->size() <= 1, ValueError, "conv_transpose1d: ", name, " must have one element, got ", xs->size());
      if (xs->size() == 1) value = (*xs)[0];
    }
  }
  return {height, value};
}

struct TGeom {
  Pair stride, pad, out_pad, dil;
  int64_t groups;
};

// x: [N, Cin, H, W] or [Cin, H, W]; w: [Cin, Cout/groups, kh, kw]. `op` and the
// shapes named in errors are the user's (1-D shapes for conv_transpose1d).
Tensor transpose_2d(const char* op, const Tensor& x, const Tensor& w, const Tensor& bias, const TGeom& g,
                    const Shape& user_x, const Shape& user_w) {
  TP_CHECK(g.groups > 0, ValueError, op, ": groups must be positive, got ", g.groups);
  for (int d = 0; d < 2; ++d) {
    TP_CHECK(g.stride[d] > 0, ValueError, op, ": stride must be positive");
    TP_CHECK(g.dil[d] > 0, ValueError, op, ": dilation must be positive");
    TP_CHECK(g.pad[d] >= 0, ValueError, op, ": negative padding is not supported");
    TP_CHECK(g.out_pad[d] >= 0, ValueError, op, ": output_padding must be non-negative");
    TP_CHECK(g.out_pad[d] < std::max(g.stride[d], g.dil[d]), ValueError, op, ": output_padding (", g.out_pad[d],
             ") must be smaller than either stride (", g.stride[d], ") or dilation (", g.dil[d], ")");
  }
  const bool batched = x.dim() == 4;
  const int64_t Cin = x.sizes()[batched ? 1 : 0];
  TP_CHECK(w.sizes()[0] == Cin, ValueError, op, ": input of shape ", shape_str(user_x), " has ", Cin,
           " channels, but weight of shape ", shape_str(user_w), " expects ", w.sizes()[0],
           " (weight is [in_channels, out_channels/groups, kernel...])");
  TP_CHECK(Cin % g.groups == 0, ValueError, op, ": in_channels (", Cin, ") must be divisible by groups (", g.groups,
           ")");
  const int64_t Cout = w.sizes()[1] * g.groups;
  Shape size = batched ? Shape{x.sizes()[0], Cout, 0, 0} : Shape{Cout, 0, 0};
  for (int d = 0; d < 2; ++d) {
    const int64_t in = x.sizes()[x.dim() - 2 + d], k = w.sizes()[2 + d];
    const int64_t out = (in - 1) * g.stride[d] - 2 * g.pad[d] + g.dil[d] * (k - 1) + g.out_pad[d] + 1;
    TP_CHECK(out > 0, ValueError, op, ": the output size would be ", out, " (non-positive) for input of shape ",
             shape_str(user_x), ", weight of shape ", shape_str(user_w), " and padding ", g.pad[d]);
    size[size.size() - 2 + d] = out;
  }
  Attrs a = {{"stride", std::vector<int64_t>{g.stride[0], g.stride[1]}},
             {"padding", std::vector<int64_t>{g.pad[0], g.pad[1]}},
             {"dilation", std::vector<int64_t>{g.dil[0], g.dil[1]}},
             {"groups", g.groups}};
  a.set("size", std::vector<int64_t>(size.begin(), size.end()));
  // With output_padding >= stride (allowed while < dilation) the convolution over the output
  // size has output_padding / stride more rows than x: x gets that many zero rows at the end
  // (they contribute nothing), so the adjoint's geometry matches.
  Tensor xp = x;
  for (int d = 0; d < 2; ++d) {
    const int64_t extra = g.out_pad[d] / g.stride[d], dim = x.dim() - 2 + d;
    if (extra == 0 || xp.sizes()[dim] == 0) continue;
    Tensor zero_row = ops::zeros_like(ops::slice(xp, dim, 0, 1, 1));
    std::vector<Tensor> parts{xp};
    for (int64_t i = 0; i < extra; ++i) parts.push_back(zero_row);
    xp = ops::cat(parts, dim);
  }
  static const OpDef& input_grad = get_op("conv2d_input_grad");
  // float16/bfloat16 on the CPU: the im2col/GEMM kernel would accumulate in the half type
  // (4% off for a 16-term sum); compute in float32 and round once, as PyTorch does.
  // cuDNN accumulates in float32 itself.
  const DType dt = xp.dtype();
  const bool upcast = !is_compute_dtype(dt) && xp.device().kind == Device::Kind::CPU;
  const DType work = upcast ? DType::Float32 : dt;
  Tensor y = call_op1(input_grad, {ops::to_dtype(xp, work), ops::to_dtype(w, work)}, a);
  if (bias.defined()) {
    TP_CHECK(bias.dim() == 1 && bias.sizes()[0] == Cout, ValueError, op, ": expected a bias of shape [", Cout,
             "], but got shape ", shape_str(bias.sizes()));
    TP_CHECK(bias.dtype() == x.dtype(), TypeError, op, ": expected a bias of dtype ", dtype_name(x.dtype()),
             ", but got ", dtype_name(bias.dtype()));
    y = ops::add(y, ops::reshape(ops::to_dtype(bias, work), Shape{Cout, 1, 1}));
  }
  return ops::to_dtype(y, dt);
}

void check_dims(const char* op, const Tensor& x, const Tensor& w, int nd) {
  TP_CHECK(x.dim() == nd + 1 || x.dim() == nd + 2, ValueError, op, ": expected ", nd + 1, "D (unbatched) or ", nd + 2,
           "D (batched) input, but got input of shape ", shape_str(x.sizes()));
  TP_CHECK(w.dim() == nd + 2, ValueError, op, ": expected a ", nd + 2,
           "D weight [in_channels, out_channels/groups, kernel...], but got shape ", shape_str(w.sizes()));
  TP_CHECK(is_floating(x.dtype()), TypeError, op, ": expected a floating-point input, but got ", dtype_name(x.dtype()));
  // conv2d_input_grad reads the weight with the input's element type: a mismatch must stop here.
  TP_CHECK(x.dtype() == w.dtype(), TypeError, op, ": expected input and weight of the same dtype, but got ",
           dtype_name(x.dtype()), " and ", dtype_name(w.dtype()));
}

std::vector<Tensor> conv_transpose2d_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const char* op = "conv_transpose2d";
  check_dims(op, in[0], in[1], 2);
  TGeom g{pair_attr(attrs, "stride", op, Pair{1, 1}), pair_attr(attrs, "padding", op, Pair{0, 0}),
          pair_attr(attrs, "output_padding", op, Pair{0, 0}), pair_attr(attrs, "dilation", op, Pair{1, 1}),
          attrs.get_int("groups")};
  return {transpose_2d(op, in[0], in[1], in[2], g, in[0].sizes(), in[1].sizes())};
}

// A height-1 image: the 2-D operator with stride/dilation 1 and no padding in height.
std::vector<Tensor> conv_transpose1d_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const char* op = "conv_transpose1d";
  check_dims(op, in[0], in[1], 1);
  TGeom g{one_as_pair(attrs, "stride", 1, 1), one_as_pair(attrs, "padding", 0, 0),
          one_as_pair(attrs, "output_padding", 0, 0), one_as_pair(attrs, "dilation", 1, 1), attrs.get_int("groups")};
  Tensor y = transpose_2d(op, ops::unsqueeze(in[0], -2), ops::unsqueeze(in[1], -2), in[2], g, in[0].sizes(),
                          in[1].sizes());
  return {ops::squeeze(y, -2)};
}

void composite(const char* name, const char* schema, int n, DecomposeFn f) {
  register_op({.name = name, .schema = schema, .tags = kComposite, .num_inputs = n, .infer = &composite_infer,
               .decompose = f});
}

}  // namespace

void register_conv_transpose_ops() {
  composite("conv_transpose2d",
            "conv_transpose2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=0, "
            "int[2] output_padding=0, int groups=1, int[2] dilation=1) -> Tensor",
            3, &conv_transpose2d_decompose);
  composite("conv_transpose1d",
            "conv_transpose1d(Tensor input, Tensor weight, Tensor? bias=None, int[1] stride=1, int[1] padding=0, "
            "int[1] output_padding=0, int groups=1, int[1] dilation=1) -> Tensor",
            3, &conv_transpose1d_decompose);
}

}  // namespace tp
