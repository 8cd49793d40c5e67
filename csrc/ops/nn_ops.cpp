// Neural-network operators. conv2d and the pools have kernels of their own
// (ops/conv_ops.cpp, ops/pool_ops.cpp); here: the composites over them
// (conv1d, the 'same'/'valid' padding forms), and the losses. nll_loss has a
// kernel (a gather by class index with weights and ignore_index); the other
// losses decompose into pointwise operators, reductions, log_softmax and
// nll_loss, so autograd and the tracer only see those.
#include <algorithm>

#include "ops/derivative_util.h"
#include "ops/dispatch.h"
#include "ops/families.h"
#include "ops/nn_util.h"
#include "ops/registry.h"
#include "ops/size_expr.h"

namespace tp {
namespace {

std::vector<TensorMeta> composite_infer(const OpDef& op, const std::vector<TensorMeta>&, const Attrs&) {
  throw Error(str("internal: ", op.name, " is a composite and has no inference of its own"));
}

TensorMeta meta_of(const Tensor& t) {
  if (t.defined()) return t.meta();
  TensorMeta m;
  m.defined = false;
  return m;
}

const OpDef& conv2d_op() {
  static const OpDef& op = get_op("conv2d");
  return op;
}

// ---- conv1d: a conv2d over a height-1 image ----
std::vector<int64_t> one_attr(const Attrs& attrs, const char* name, int64_t fallback) {
  const AttrValue* v = attrs.find(name);
  if (v) {
    if (auto* i = std::get_if<int64_t>(v)) return {*i};
    if (auto* xs = std::get_if<std::vector<int64_t>>(v)) {
      TP_CHECK(xs->size() == 1, ValueError, "conv1d: ", name, " must have one element, got ", xs->size());
      return *xs;
    }
  }
  return {fallback};
}

Tensor conv1d_via_2d(const std::vector<Tensor>& in, const Attrs& attrs, int64_t padding) {
  const Tensor &x = in[0], &w = in[1];
  TP_CHECK(x.dim() == 2 || x.dim() == 3, ValueError,
           "conv1d: expected 2D (unbatched) or 3D (batched) input, but got input of shape ", shape_str(x.sizes()));
  TP_CHECK(w.dim() == 3, ValueError, "conv1d: expected a 3D weight [out_channels, in_channels/groups, kW], but got "
           "shape ", shape_str(w.sizes()));
  // The shape checks conv2d would make, stated with conv1d's own shapes.
  const int64_t groups = attrs.get_int("groups"), dil = one_attr(attrs, "dilation", 1)[0];
  const int64_t C = x.sizes()[x.dim() - 2], L = x.sizes()[x.dim() - 1], K = w.sizes()[2];
  TP_CHECK(groups > 0, ValueError, "conv1d: groups must be positive, got ", groups);
  TP_CHECK(C == w.sizes()[1] * groups, ValueError, "conv1d: input of shape ", shape_str(x.sizes()), " has ", C,
           " channels, but weight of shape ", shape_str(w.sizes()), " with groups=", groups, " expects ",
           w.sizes()[1] * groups);
  TP_CHECK(padding < 0 || dil <= 0 || L + 2 * padding >= dil * (K - 1) + 1, ValueError, "conv1d: kernel size (",
           dil * (K - 1) + 1, ", dilated) is larger than the padded input (", L + 2 * padding, ") for input of shape ",
           shape_str(x.sizes()));
  Attrs a = {{"stride", std::vector<int64_t>{1, one_attr(attrs, "stride", 1)[0]}},
             {"padding", std::vector<int64_t>{0, padding}},
             {"dilation", std::vector<int64_t>{1, dil}},
             {"groups", groups}};
  Tensor y = call_op1(conv2d_op(), {ops::unsqueeze(x, -2), ops::unsqueeze(w, -2), in[2]}, a);
  return ops::squeeze(y, -2);
}

std::vector<Tensor> conv1d_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  return {conv1d_via_2d(in, attrs, one_attr(attrs, "padding", 0)[0])};
}

// ---- padding='same' / 'valid' ----
// 'same' keeps the input size (stride 1). An odd total padding puts the extra
// element on the right, like PyTorch: we pad both sides by the larger half
// and drop the first output element.
struct SamePad {
  int64_t pad;
  bool drop_first;
};
SamePad same_pad(int64_t k, int64_t dilation) {
  const int64_t total = dilation * (k - 1), left = total / 2;
  return {total - left, total - left != left};
}

void check_padding_mode(const char* op, const std::string& mode, const Attrs& attrs, int nd) {
  TP_CHECK(mode == "same" || mode == "valid", ValueError, op, ": invalid padding string '", mode,
           "', should be one of 'valid' or 'same'");
  if (mode == "same") {
    const AttrValue* s = attrs.find("stride");
    bool unit = true;
    if (s) {
      if (auto* i = std::get_if<int64_t>(s)) unit = *i == 1;
      if (auto* xs = std::get_if<std::vector<int64_t>>(s))
        for (int64_t v : *xs) unit &= v == 1;
    }
    TP_CHECK(unit, ValueError, op, ": padding='same' is not supported for strided convolutions");
  }
  (void)nd;
}

std::vector<Tensor> conv2d_padding_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const std::string& mode = attrs.get_str("padding");
  check_padding_mode("conv2d", mode, attrs, 2);
  Attrs a = attrs;
  if (mode == "valid") {
    a.set("padding", std::vector<int64_t>{0, 0});
    return {call_op1(conv2d_op(), in, a)};
  }
  TP_CHECK(in[1].dim() == 4, ValueError, "conv2d: expected a 4D weight, but got shape ", shape_str(in[1].sizes()));
  const Pair d = pair_attr(attrs, "dilation", "conv2d", Pair{1, 1});
  const SamePad ph = same_pad(in[1].sizes()[2], d[0]), pw = same_pad(in[1].sizes()[3], d[1]);
  a.set("padding", std::vector<int64_t>{ph.pad, pw.pad});
  Tensor y = call_op1(conv2d_op(), in, a);
  if (ph.drop_first) y = ops::slice(y, -2, 1, std::nullopt, 1);
  if (pw.drop_first) y = ops::slice(y, -1, 1, std::nullopt, 1);
  return {y};
}

std::vector<Tensor> conv1d_padding_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const std::string& mode = attrs.get_str("padding");
  check_padding_mode("conv1d", mode, attrs, 1);
  if (mode == "valid") return {conv1d_via_2d(in, attrs, 0)};
  TP_CHECK(in[1].dim() == 3, ValueError, "conv1d: expected a 3D weight, but got shape ", shape_str(in[1].sizes()));
  const SamePad p = same_pad(in[1].sizes()[2], one_attr(attrs, "dilation", 1)[0]);
  Tensor y = conv1d_via_2d(in, attrs, p.pad);
  return {p.drop_first ? ops::slice(y, -1, 1, std::nullopt, 1) : y};
}

// ---- losses ----
enum class Reduction { None, Mean, Sum };
Reduction reduction_of(const char* op, const Attrs& attrs) {
  const std::string r = attrs.has("reduction") ? attrs.get_str("reduction") : "mean";
  if (r == "none") return Reduction::None;
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  throw ValueError(str(op, ": reduction must be 'none', 'mean' or 'sum', but got '", r, "'"));
}
Tensor reduce(const Tensor& x, Reduction r) {
  if (r == Reduction::Mean) return ops::mean(x);
  if (r == Reduction::Sum) return ops::sum(x);
  return x;
}

void check_same_shape(const char* op, const Tensor& a, const Tensor& b) {
  TP_CHECK(a.sizes() == b.sizes(), ValueError, op, ": target of shape ", shape_str(b.sizes()),
           " must have the same shape as input of shape ", shape_str(a.sizes()));
}

std::vector<Tensor> mse_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Reduction r = reduction_of("mse_loss", attrs);
  Tensor d = ops::sub(in[0], in[1]);
  return {reduce(ops::mul(d, d), r)};
}

// nll_loss on (N, C, R...) or (C,) log-probabilities with integer targets (N, R...) or ().
struct NllGeom {
  int64_t N, C, R;
};
NllGeom nll_geom(const char* op, const TensorMeta& x, const TensorMeta& t, const TensorMeta& w) {
  TP_CHECK(x.sizes.size() >= 1, ValueError, op, ": input must have at least 1 dim, got shape ", shape_str(x.sizes));
  TP_CHECK(is_floating(x.dtype), TypeError, op, ": expected a floating-point input, but got ", dtype_name(x.dtype));
  TP_CHECK(is_integral(t.dtype, false), TypeError, op, ": expected an integer (class index) target, but got ",
           dtype_name(t.dtype));
  Shape expect;
  NllGeom g{1, x.sizes[0], 1};
  if (x.sizes.size() >= 2) {
    g.N = x.sizes[0];
    g.C = x.sizes[1];
    expect = {x.sizes[0]};
    for (size_t i = 2; i < x.sizes.size(); ++i) {
      expect.push_back(x.sizes[i]);
      g.R *= x.sizes[i];
    }
  }
  TP_CHECK(t.sizes == expect, ValueError, op, ": expected target of shape ", shape_str(expect), " for input of shape ",
           shape_str(x.sizes), ", but got ", shape_str(t.sizes));
  if (w.defined)
    TP_CHECK(w.sizes == Shape{g.C} && w.dtype == x.dtype, ValueError, op, ": expected a weight of shape [", g.C,
             "] and dtype ", dtype_name(x.dtype), ", but got ", dtype_name(w.dtype), shape_str(w.sizes));
  return g;
}

std::vector<TensorMeta> nll_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  nll_geom(op.name, in[0], in[1], in[2]);
  const Reduction r = reduction_of(op.name, attrs);
  return {TensorMeta::contiguous(r == Reduction::None ? in[1].sizes : Shape{}, in[0].dtype)};
}

// Calls f(index into input, index into target, class weight) for every
// target element that is not ignored; checks the class range.
template <class T, class F>
void for_targets(const char* op, const Tensor& target, const Tensor& weight, const NllGeom& g, int64_t ignore,
                 const F& f) {
  const int64_t* pt = target.data_as<int64_t>();
  const T* pw = weight.defined() ? weight.data_as<T>() : nullptr;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t r = 0; r < g.R; ++r) {
      const int64_t ti = n * g.R + r, c = pt[ti];
      if (c == ignore) continue;
      TP_CHECK(c >= 0 && c < g.C, IndexError, op, ": target ", c, " is out of bounds for ", g.C, " classes");
      f((n * g.C + c) * g.R + r, ti, pw ? pw[c] : T(1));
    }
}

std::vector<Tensor> nll_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                            const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  const NllGeom g = nll_geom(op.name, in[0].meta(), in[1].meta(), meta_of(in[2]));
  const Reduction r = reduction_of(op.name, attrs);
  const int64_t ignore = attrs.get_int("ignore_index");
  Tensor x = as_contiguous(in[0]), t = convert(as_contiguous(in[1]), DType::Int64);
  Tensor w = in[2].defined() ? as_contiguous(in[2]) : Tensor();
  TP_DISPATCH_FLOATING(out.dtype(), op.name, ([&]<class T>() {
    const T* px = x.data_as<T>();
    T* po = out.data_as<T>();
    if (r == Reduction::None) {
      std::fill(po, po + out.numel(), T(0));
      for_targets<T>(op.name, t, w, g, ignore, [&](int64_t xi, int64_t ti, T wc) { po[ti] = -wc * px[xi]; });
      return;
    }
    double total = 0, wsum = 0;  // in double: a sum over many samples
    for_targets<T>(op.name, t, w, g, ignore, [&](int64_t xi, int64_t, T wc) {
      total -= static_cast<double>(wc) * px[xi];
      wsum += wc;
    });
    po[0] = static_cast<T>(r == Reduction::Sum ? total : total / wsum);  // all ignored: 0/0 = NaN, as in PyTorch
  }));
  return {out};
}

// Gradient of nll_loss w.r.t. its input: -w[c] * grad at the target class.
std::vector<TensorMeta> nll_grad_infer(const OpDef&, const std::vector<TensorMeta>& in, const Attrs&) {
  return {TensorMeta::contiguous(in[1].sizes, in[1].dtype)};
}

std::vector<Tensor> nll_grad_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                 const std::vector<TensorMeta>& om) {
  Tensor gx = alloc_out(om[0]);
  fill(gx, Scalar(int64_t{0}));
  const NllGeom g = nll_geom(op.name, in[1].meta(), in[2].meta(), meta_of(in[3]));
  const Reduction r = reduction_of(op.name, attrs);
  const int64_t ignore = attrs.get_int("ignore_index");
  Tensor go = as_contiguous(in[0]), t = convert(as_contiguous(in[2]), DType::Int64);
  Tensor w = in[3].defined() ? as_contiguous(in[3]) : Tensor();
  TP_DISPATCH_FLOATING(gx.dtype(), op.name, ([&]<class T>() {
    const T* pg = go.data_as<T>();
    T* px = gx.data_as<T>();
    double scale = 1;
    if (r == Reduction::Mean) {
      double wsum = 0;
      for_targets<T>(op.name, t, w, g, ignore, [&](int64_t, int64_t, T wc) { wsum += wc; });
      scale = 1 / wsum;
    }
    for_targets<T>(op.name, t, w, g, ignore, [&](int64_t xi, int64_t ti, T wc) {
      const T gi = r == Reduction::None ? pg[ti] : static_cast<T>(pg[0] * scale);
      px[xi] = -wc * gi;
    });
  }));
  return {gx};
}

std::vector<Tensor> nll_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor(), Tensor(), Tensor()};
  static const OpDef& op = get_op("nll_loss_grad");
  return {call_op1(op, {g, a.inputs[0], a.inputs[1], a.inputs[2]}, a.attrs), Tensor(), Tensor()};
}

const OpDef& nll_op() {
  static const OpDef& op = get_op("nll_loss");
  return op;
}
Tensor nll(const Tensor& logp, const Tensor& target, const Tensor& weight, const std::string& reduction,
           int64_t ignore) {
  return call_op1(nll_op(), {logp, target, weight}, {{"reduction", reduction}, {"ignore_index", ignore}});
}

// nll_loss_grad is linear in its incoming gradient g (its only differentiable input:
// it reads log-probabilities for their shape alone), and nll_loss is its adjoint, so
// the gradient w.r.t. g is nll_loss of the incoming gradient with the same target,
// weight, reduction and ignore_index. Without it, a second derivative through a loss
// whose incoming gradient depends on the parameters (a focal or per-sample-weighted
// cross entropy under create_graph) silently lost that path.
std::vector<Tensor> nll_grad_backward(const BackwardArgs& a) {
  const Tensor& gg = ops::grad_out(a);
  if (!gg.defined() || !a.needs_grad[0]) return {Tensor(), Tensor(), Tensor(), Tensor()};
  return {call_op1(nll_op(), {gg, a.inputs[2], a.inputs[3]}, a.attrs), Tensor(), Tensor(), Tensor()};
}

// The weight vector shaped to broadcast along the class dim of an input of rank nd.
Tensor class_weight(const Tensor& w, int64_t nd) {
  if (nd < 2) return w;
  Shape s(nd, 1);
  s[1] = w.sizes()[0];
  return ops::reshape(w, s);
}

std::vector<Tensor> cross_entropy_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor &x = in[0], &t = in[1], &w = in[2];
  const char* op = "cross_entropy";
  const Reduction r = reduction_of(op, attrs);
  const std::string& rs = attrs.get_str("reduction");
  const int64_t ignore = attrs.get_int("ignore_index");
  const double eps = attrs.get_double("label_smoothing");
  TP_CHECK(eps >= 0 && eps <= 1, ValueError, op, ": label_smoothing must be between 0.0 and 1.0, got ", eps);
  TP_CHECK(x.dim() >= 1, ValueError, op, ": input must have at least 1 dim, got shape ", shape_str(x.sizes()));
  const int64_t cdim = x.dim() >= 2 ? 1 : 0, C = x.sizes()[cdim];
  Tensor logp = ops::log_softmax(x, cdim);
  if (w.defined())
    TP_CHECK(w.sizes() == Shape{C}, ValueError, op, ": expected a weight of shape [", C, "], but got ",
             shape_str(w.sizes()));
  if (is_floating(t.dtype())) {  // class probabilities
    check_same_shape(op, x, t);
    Tensor tt = eps > 0 ? ops::add(ops::mul(t, ops::scalar(1 - eps)), ops::scalar(eps / static_cast<double>(C))) : t;
    Tensor prod = ops::mul(logp, tt);
    if (w.defined()) prod = ops::mul(prod, class_weight(w, x.dim()));
    Tensor per = ops::neg(ops::sum(prod, {cdim}));
    if (r == Reduction::Mean && x.dim() >= 2) return {ops::div(ops::sum(per), ops::scalar(x.numel() / C))};
    return {reduce(per, r)};
  }
  Tensor loss = nll(logp, t, w, rs, ignore);
  if (eps == 0) return {loss};
  // Smoothing: eps/C times the (weighted) sum of -logp over the classes, for non-ignored targets.
  Tensor lw = w.defined() ? ops::mul(logp, class_weight(w, x.dim())) : logp;
  Tensor smooth = ops::neg(ops::sum(lw, {cdim}));
  Tensor keep = ops::to_dtype(ops::ne(t, ops::scalar(Scalar(ignore))), x.dtype());
  smooth = ops::mul(smooth, keep);
  if (r == Reduction::Mean) {
    // The same denominator as nll_loss: the summed weights of the counted targets.
    // (full of x's sizes kept as such: a symbolic capture keeps the batch size.)
    Tensor denom = nll(ops::full_like_sized(x, Scalar(-1.0), x.dtype()), t, w, "sum", ignore);
    smooth = ops::div(ops::sum(smooth), denom);
  } else {
    smooth = reduce(smooth, r);
  }
  const double c = static_cast<double>(C);
  return {ops::add(ops::mul(loss, ops::scalar(1 - eps)), ops::mul(smooth, ops::scalar(eps / c)))};
}

// Probabilities outside [0, 1] (logits passed by mistake) would give a silent
// NaN loss; PyTorch raises. The check is graph nodes (a flag, then
// _value_check), so a compiled region raises too. A NaN input passes it (and
// gives a NaN loss, as in PyTorch).
Tensor checked_probabilities(const Tensor& x) {
  Tensor failed = ops::any(ops::logical_or(ops::lt(x, ops::scalar(0.0)), ops::gt(x, ops::scalar(1.0))));
  Attrs a;
  a.set("message", std::string("binary_cross_entropy: all elements of input should be between 0 and 1 "
                               "(for logits use binary_cross_entropy_with_logits)"));
  return call_op1(get_op("_value_check"), {failed, x}, a);
}

std::vector<Tensor> bce_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor &t = in[1], &w = in[2];
  const Reduction r = reduction_of("binary_cross_entropy", attrs);
  check_same_shape("binary_cross_entropy", in[0], t);
  const Tensor x = checked_probabilities(in[0]);
  // log is clamped at -100 so that x = 0 or 1 gives a finite loss (PyTorch's convention).
  // The log's argument is replaced by 1 where it is exactly 0: log(0) = -inf would make
  // its derivative 0 / 0 = NaN there even though the clamp passes it no gradient (a
  // sigmoid that saturates to exactly 1.0 would then poison every gradient). `!= 0`
  // keeps a NaN input NaN.
  auto clamped_log = [](const Tensor& v) {
    Tensor nonzero = ops::ne(v, ops::scalar(0.0));
    Tensor safe = ops::where(nonzero, v, ops::scalar(1.0));
    return ops::where(nonzero, ops::maximum(ops::log(safe), ops::scalar(-100.0)), ops::scalar(-100.0));
  };
  Tensor lo = clamped_log(x);
  Tensor l1 = clamped_log(ops::sub(ops::scalar(1.0), x));
  Tensor loss = ops::neg(ops::add(ops::mul(t, lo), ops::mul(ops::sub(ops::scalar(1.0), t), l1)));
  if (w.defined()) loss = ops::mul(loss, w);
  return {reduce(loss, r)};
}

// (1 - t) * x + l * log(1 + exp(-x)) with l = 1 + (pos_weight - 1) * t, where
// log(1 + exp(-x)) = log1p(exp(-|x|)) + max(-x, 0) never overflows.
std::vector<Tensor> bce_logits_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor &x = in[0], &t = in[1], &w = in[2], &pw = in[3];
  const Reduction r = reduction_of("binary_cross_entropy_with_logits", attrs);
  check_same_shape("binary_cross_entropy_with_logits", x, t);
  Tensor softplus_neg = ops::add(ops::log1p(ops::exp(ops::neg(ops::abs(x)))), ops::relu(ops::neg(x)));
  Tensor lw = pw.defined() ? ops::add(ops::scalar(1.0), ops::mul(ops::sub(pw, ops::scalar(1.0)), t)) : Tensor();
  Tensor loss = ops::add(ops::mul(ops::sub(ops::scalar(1.0), t), x), lw.defined() ? ops::mul(lw, softplus_neg) : softplus_neg);
  if (w.defined()) loss = ops::mul(loss, w);
  return {reduce(loss, r)};
}

void composite(const char* name, const char* schema, int n, DecomposeFn f) {
  register_op({.name = name, .schema = schema, .tags = kComposite, .num_inputs = n, .infer = &composite_infer,
               .decompose = f});
}

}  // namespace

void register_nn_ops() {
  register_conv_ops();
  register_pool_ops();
  register_conv_transpose_ops();
  composite("conv2d.padding",
            "conv2d.padding(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, str padding=\"valid\", "
            "int[2] dilation=1, int groups=1) -> Tensor",
            3, &conv2d_padding_decompose);
  composite("conv1d",
            "conv1d(Tensor input, Tensor weight, Tensor? bias=None, int[1] stride=1, int[1] padding=0, "
            "int[1] dilation=1, int groups=1) -> Tensor",
            3, &conv1d_decompose);
  composite("conv1d.padding",
            "conv1d.padding(Tensor input, Tensor weight, Tensor? bias=None, int[1] stride=1, str padding=\"valid\", "
            "int[1] dilation=1, int groups=1) -> Tensor",
            3, &conv1d_padding_decompose);
  composite("mse_loss", "mse_loss(Tensor self, Tensor target, str reduction='mean') -> Tensor", 2, &mse_decompose);
  register_op({.name = "nll_loss",
               .schema = "nll_loss(Tensor self, Tensor target, Tensor? weight=None, str reduction='mean', "
                         "int ignore_index=-100) -> Tensor",
               .num_inputs = 3, .infer = &nll_infer, .cpu = &nll_cpu, .backward = &nll_backward});
  register_op({.name = "nll_loss_grad", .num_inputs = 4, .infer = &nll_grad_infer, .cpu = &nll_grad_cpu,
               .backward = &nll_grad_backward});
  composite("cross_entropy",
            "cross_entropy(Tensor self, Tensor target, Tensor? weight=None, str reduction='mean', "
            "int ignore_index=-100, float label_smoothing=0.0) -> Tensor",
            3, &cross_entropy_decompose);
  composite("binary_cross_entropy",
            "binary_cross_entropy(Tensor self, Tensor target, Tensor? weight=None, str reduction='mean') -> Tensor", 3,
            &bce_decompose);
  composite("binary_cross_entropy_with_logits",
            "binary_cross_entropy_with_logits(Tensor self, Tensor target, Tensor? weight=None, "
            "Tensor? pos_weight=None, str reduction='mean') -> Tensor",
            4, &bce_logits_decompose);
}

}  // namespace tp
