// Tangent formulas of the nn family: normalizations, dropout, convolution,
// pooling, embedding and nll_loss (cross_entropy, mse_loss, linear, batch_norm
// and dropout are composites of these and of the other families).
#include "autograd/jvp_rules.h"

namespace tp::autograd::forward_ad {
namespace {

Tensor sc(double v) { return ops::scalar(Scalar(v)); }

// Normalization over `dims` (keepdim statistics): with xhat = (x - mean) * rstd,
//   d xhat = rstd * (t - mean(t) - xhat * mean(t * xhat)),
// and the affine part out = xhat * w + b adds xhat * tw + tb.
Tensor normalized_tangent(const Tensor& t, const Tensor& xhat, const Tensor& rstd, const std::vector<int64_t>& dims) {
  Tensor inner = ops::sub(ops::sub(t, ops::mean(t, dims, true)), ops::mul(xhat, ops::mean(ops::mul(t, xhat), dims, true)));
  return ops::mul(rstd, inner);
}

Tensor affine_tangent(Tensor dxhat, const Tensor& xhat, const JvpArgs& a, const Tensor& w, size_t wi, size_t bi,
                      const Shape& param_view) {
  auto as_param = [&](const Tensor& p) { return param_view.empty() ? p : ops::reshape(p, param_view); };
  Tensor r = w.defined() ? ops::mul(dxhat, as_param(w)) : dxhat;
  if (a.has(wi)) r = ops::add(r, ops::mul(xhat, as_param(a.tangents[wi])));
  if (a.has(bi)) r = ops::add(r, as_param(a.tangents[bi]));
  return r;
}

std::vector<Tensor> layer_norm_rule(const JvpArgs& a) {
  const Tensor& x = a.inputs[0];
  const auto& ns = a.attrs.get<std::vector<int64_t>>("normalized_shape");
  std::vector<int64_t> dims;
  for (int64_t d = x.dim() - static_cast<int64_t>(ns.size()); d < x.dim(); ++d) dims.push_back(d);
  const double eps = a.attrs.get_double("eps");
  const Tensor centered = ops::sub(x, ops::mean(x, dims, true));
  const Tensor var = ops::mean(ops::mul(centered, centered), dims, true);
  const Tensor rstd = ops::reciprocal(ops::sqrt(ops::add(var, sc(eps))));
  const Tensor xhat = ops::mul(centered, rstd);
  const Tensor t = tan_or_zero(a, 0);
  Tensor out = affine_tangent(normalized_tangent(t, xhat, rstd, dims), xhat, a, a.inputs[1], 1, 2, {});
  if (a.outputs.size() == 1) return {out};
  // native_layer_norm also returns the row mean and rstd.
  const Tensor dmean = ops::mean(t, dims, true);
  const Tensor drstd = ops::mul(ops::neg(ops::mul(rstd, rstd)), ops::mean(ops::mul(xhat, t), dims, true));
  return {out, ops::reshape(dmean, a.outputs[1].sizes()), ops::reshape(drstd, a.outputs[2].sizes())};
}

// native_batch_norm(input, weight, bias, running_mean, running_var) -> (out, mean, rstd), statistics per channel (dim 1).
std::vector<Tensor> batch_norm_rule(const JvpArgs& a) {
  TP_CHECK(!a.has(3) && !a.has(4), NotImplementedError,
           "forward-mode AD: the tangent formula of 'native_batch_norm' takes no tangent for the running statistics");
  const Tensor& x = a.inputs[0];
  Shape pv(x.dim(), 1);
  pv[1] = x.size(1);
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != 1) dims.push_back(d);
  const Tensor mean = ops::reshape(a.outputs[1], pv), rstd = ops::reshape(a.outputs[2], pv);
  const Tensor xhat = ops::mul(ops::sub(x, mean), rstd);
  const Tensor t = tan_or_zero(a, 0);
  const bool training = a.attrs.get_or("training", false);
  Tensor dxhat = training ? normalized_tangent(t, xhat, rstd, dims) : ops::mul(t, rstd);
  Tensor out = affine_tangent(dxhat, xhat, a, a.inputs[1], 1, 2, pv);
  if (!training) return {out, Tensor(), Tensor()};
  const Tensor dmean = ops::mean(t, dims, true);
  const Tensor drstd = ops::mul(ops::neg(ops::mul(rstd, rstd)), ops::mean(ops::mul(xhat, t), dims, true));
  return {out, ops::reshape(dmean, a.outputs[1].sizes()), ops::reshape(drstd, a.outputs[2].sizes())};
}

// native_dropout -> (out, keep mask): the tangent goes through the same mask and scale.
std::vector<Tensor> dropout_rule(const JvpArgs& a) {
  const double p = a.attrs.get_or("train", true) ? a.attrs.get_double("p") : 0.0;
  const Tensor& t = a.tangents[0];
  const Tensor masked = ops::mul(t, ops::to_dtype(a.outputs[1], t.dtype()));
  return {ops::mul(masked, sc(p < 1 ? 1.0 / (1.0 - p) : 0.0)), Tensor()};
}

// conv2d is bilinear in (input, weight); the bias adds per channel.
std::vector<Tensor> conv2d_rule(const JvpArgs& a) {
  Tensor r;
  if (a.has(0)) r = call_op1(a.op, {a.tangents[0], a.inputs[1], Tensor()}, a.attrs);
  if (a.has(1)) r = add_t(r, call_op1(a.op, {a.inputs[0], a.tangents[1], Tensor()}, a.attrs));
  if (a.has(2)) {
    const Tensor& y = a.outputs[0];
    Shape pv(y.dim(), 1);
    pv[y.dim() == 4 ? 1 : 0] = a.tangents[2].numel();
    Tensor tb = ops::reshape(a.tangents[2], pv);
    r = r.defined() ? ops::add(r, tb) : ops::contiguous(ops::expand(tb, y.sizes()));
  }
  return {r};
}

// max pooling picks one element per window: the tangent at the recorded
// indices (flat positions in each H*W plane).
std::vector<Tensor> max_pool_rule(const JvpArgs& a) {
  const Tensor& t = a.tangents[0];
  const Tensor& idx = a.outputs[1];
  const Tensor flat_t = ops::flatten(t, t.dim() - 2, t.dim() - 1);
  const Tensor flat_i = ops::flatten(idx, idx.dim() - 2, idx.dim() - 1);
  return {ops::reshape(ops::gather(flat_t, -1, flat_i), a.outputs[0].sizes()), Tensor()};
}

// nll_loss is linear in its input for a constant class weight.
std::vector<Tensor> nll_loss_rule(const JvpArgs& a) {
  TP_CHECK(!a.has(2), NotImplementedError,
           "forward-mode AD: the tangent formula of 'nll_loss' takes no tangent for the class weight");
  return linear_in_first(a);
}

}  // namespace

void register_nn_jvp_rules() {
  register_jvp("layer_norm", &layer_norm_rule);
  register_jvp("native_layer_norm", &layer_norm_rule);
  register_jvp("native_batch_norm", &batch_norm_rule);
  register_jvp("native_dropout", &dropout_rule);
  register_jvp("conv2d", &conv2d_rule);
  register_jvp("max_pool2d_with_indices", &max_pool_rule);
  register_jvp("nll_loss", &nll_loss_rule);
  register_jvp("embedding", &linear_rule);  // linear in the weight; the indices are constants
  for (const char* n : {"avg_pool2d", "adaptive_avg_pool2d"}) register_jvp(n, &linear_in_first);
  // Backward helpers, reached when a tangent goes through a derivative
  // formula (forward-over-reverse, e.g. jacfwd(grad(f))): linear or bilinear.
  for (const char* n : {"conv2d_input_grad", "conv2d_weight_grad"}) register_jvp(n, &multilinear_rule);
  for (const char* n : {"avg_pool2d_grad", "adaptive_avg_pool2d_grad", "max_pool2d_grad", "nll_loss_grad"})
    register_jvp(n, &linear_in_first);
}

}  // namespace tp::autograd::forward_ad
