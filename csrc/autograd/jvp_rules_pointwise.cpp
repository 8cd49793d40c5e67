// Tangent formulas of the pointwise family: unary and binary math,
// activations, clamps, where/lerp/addcmul.
//
// An elementwise operator has a diagonal Jacobian per input (output element k
// depends only on element k of each broadcast input), and a diagonal matrix is
// its own transpose: J t = J^T t. So the tangent is the operator's derivative
// formula (ops registry, written with tensor ops: f'(x) * g) applied to the
// tangent in place of the incoming gradient, with every input first expanded
// to the result's shape so that the formula sums nothing back down.
// Comparisons and other ops with non-floating results get no tangent (the
// dispatcher skips them); rounding ops have zero derivative.
#include "autograd/jvp_rules.h"

namespace tp::autograd::forward_ad {
namespace {

std::vector<Tensor> elementwise_rule(const JvpArgs& a) {
  TP_CHECK(a.op.backward, Error, "forward-mode AD: '", a.op.name, "' has no derivative formula");
  const Shape& shape = a.outputs[0].sizes();
  std::vector<Tensor> ins(a.inputs.size());
  for (size_t i = 0; i < ins.size(); ++i) {
    const Tensor& x = a.inputs[i];
    // A host 0-d input without a tangent (a number's sign, a mask) stays 0-d beside
    // a device result: expanded, it would be a host tensor with dims there.
    const bool host_number = x.defined() && x.dim() == 0 && x.device().kind == Device::Kind::CPU &&
                             a.outputs[0].device().kind != Device::Kind::CPU && !a.has(i);
    ins[i] = x.defined() && !x.is_wrapped_number() && !host_number && x.sizes() != shape ? ops::expand(x, shape) : x;
  }
  std::vector<Tensor> grads(a.outputs.size());
  Tensor acc;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!a.has(i) || !is_floating(a.inputs[i].dtype())) continue;
    grads[0] = a.tangents[i].sizes() == shape ? a.tangents[i] : ops::expand(a.tangents[i], shape);
    std::vector<bool> needs(ins.size(), false);
    needs[i] = true;
    std::vector<Tensor> r = a.op.backward(BackwardArgs{ins, a.outputs, grads, a.attrs, needs});
    if (i < r.size()) acc = add_t(acc, r[i]);
  }
  std::vector<Tensor> out(a.outputs.size());
  out[0] = acc;
  return out;
}

}  // namespace

void register_pointwise_jvp_rules() {
  // Unary math and activations.
  for (const char* n : {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan",
                        "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc",
                        "erfinv", "sigmoid", "logit", "reciprocal", "relu", "gelu", "silu", "mish", "softplus", "elu",
                        "leaky_relu", "hardtanh", "abs", "neg", "sign", "floor", "ceil", "round", "trunc", "frac",
                        "square"})
    register_jvp(n, &elementwise_rule);
  // Binary and ternary math.
  for (const char* n : {"add", "sub", "mul", "div", "maximum", "minimum", "where", "floor_divide", "remainder", "fmod",
                        "pow", "atan2", "hypot", "addcmul", "addcdiv", "lerp", "clamp", "clamp_min", "clamp_max"})
    register_jvp(n, &elementwise_rule);
}

}  // namespace tp::autograd::forward_ad
