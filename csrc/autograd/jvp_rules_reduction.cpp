// Tangent formulas of the reduction family.
//
// Reductions where every input element feeds exactly one result element
// (sum, mean, prod, amax/amin, max/min, var/std, norm, logsumexp) share one
// rule: their derivative formula, given a gradient of ones, yields the partial
// derivative d y / d x_i of each element's own result; the tangent is then the
// sum over the reduced dims of (partial derivative * tangent). Ties of
// amax/amin thus share the tangent evenly, as the reverse formula does.
// Reductions returning (values, indices) pick the tangent at the indices;
// softmax and log_softmax have their own closed forms.
#include "autograd/jvp_rules.h"

namespace tp::autograd::forward_ad {
namespace {

// The dims a reduction call reduces over (its `dim` attribute: an int, an int
// list, or none/empty for all dims).
std::vector<int64_t> reduced_dims(const JvpArgs& a, int64_t ndim) {
  std::vector<int64_t> dims;
  const AttrValue* v = a.attrs.find("dim");
  if (v && std::holds_alternative<int64_t>(*v)) dims.push_back(std::get<int64_t>(*v));
  if (v && std::holds_alternative<std::vector<int64_t>>(*v)) dims = std::get<std::vector<int64_t>>(*v);
  if (dims.empty())
    for (int64_t d = 0; d < ndim; ++d) dims.push_back(d);
  for (auto& d : dims) d = wrap_dim(d, std::max<int64_t>(ndim, 1), a.op.name);
  return dims;
}

std::vector<Tensor> per_element_reduction_rule(const JvpArgs& a) {
  const Tensor& x = a.inputs[0];
  std::vector<Tensor> grads(a.outputs.size());
  grads[0] = ops::ones_like(a.outputs[0]);
  std::vector<bool> needs(a.inputs.size(), false);
  needs[0] = true;
  const Tensor partial = a.op.backward(BackwardArgs{a.inputs, a.outputs, grads, a.attrs, needs})[0];
  const Tensor prod = ops::mul(partial, a.tangents[0]);
  std::vector<Tensor> out(a.outputs.size());
  if (x.dim() == 0) {
    out[0] = prod;
    return out;
  }
  Shape keep = x.sizes();
  for (int64_t d : reduced_dims(a, x.dim())) keep[d] = 1;
  out[0] = ops::reshape(ops::sum_to(prod, keep), a.outputs[0].sizes());
  return out;
}

// (values, indices) along `dim`: the tangent at the chosen indices.
std::vector<Tensor> indexed_values_rule(const JvpArgs& a) {
  const Tensor& t = a.tangents[0];
  Tensor idx = a.outputs[1];
  std::vector<Tensor> out(2);
  if (t.dim() == 0) {
    out[0] = t;
    return out;
  }
  const int64_t dim = wrap_dim(a.attrs.get_or<int64_t>("dim", -1), t.dim(), a.op.name);
  const bool squeezed = idx.dim() < t.dim();  // keepdim=False
  if (squeezed) idx = ops::unsqueeze(idx, dim);
  Tensor v = ops::gather(t, dim, idx);
  out[0] = squeezed ? ops::squeeze(v, dim) : v;
  return out;
}

std::vector<Tensor> softmax_rule(const JvpArgs& a) {
  const Tensor& y = a.outputs[0];
  const int64_t dim = a.attrs.get_int("dim");
  const Tensor t = ops::to_dtype(a.tangents[0], y.dtype());
  const Tensor ty = ops::mul(y, t);
  return {ops::sub(ty, ops::mul(y, ops::sum(ty, {dim}, true)))};
}

std::vector<Tensor> log_softmax_rule(const JvpArgs& a) {
  const Tensor& y = a.outputs[0];
  const int64_t dim = a.attrs.get_int("dim");
  const Tensor t = ops::to_dtype(a.tangents[0], y.dtype());
  return {ops::sub(t, ops::sum(ops::mul(ops::exp(y), t), {dim}, true))};
}

// cumprod: y_k * sum_{j<=k} t_j / x_j, which needs nonzero inputs.
std::vector<Tensor> cumprod_rule(const JvpArgs& a) {
  const Tensor& x = a.inputs[0];
  TP_CHECK(!ops::any(ops::eq(x, ops::scalar(Scalar(0.0)))).item().to_bool(), NotImplementedError,
           "forward-mode AD: the tangent formula of 'cumprod' needs an input without zeros");
  const int64_t dim = a.attrs.get_int("dim");
  return {ops::mul(a.outputs[0], ops::cumsum(ops::div(a.tangents[0], x), dim))};
}

}  // namespace

void register_reduction_jvp_rules() {
  for (const char* n : {"sum", "mean", "cumsum", "bincount"}) register_jvp(n, &linear_rule);  // bincount: linear in its weights
  for (const char* n : {"prod", "amax", "amin", "max", "min", "var", "var.dim", "var.unbiased", "std", "std.dim",
                        "std.unbiased", "norm", "norm.str", "logsumexp"})
    register_jvp(n, &per_element_reduction_rule);
  for (const char* n : {"max.dim", "min.dim", "kthvalue", "median.dim", "mode", "cummax", "cummin", "sort", "topk"})
    register_jvp(n, &indexed_values_rule);
  register_jvp("softmax", &softmax_rule);
  register_jvp("log_softmax", &log_softmax_rule);
  register_jvp("cumprod", &cumprod_rule);
}

}  // namespace tp::autograd::forward_ad
