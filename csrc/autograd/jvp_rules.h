// Shared pieces of the tangent formulas (one jvp_rules_<family>.cpp per
// operator family registers its formulas with register_jvp).
#pragma once
#include "autograd/forward_ad.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace tp::autograd::forward_ad {

void register_pointwise_jvp_rules();  // jvp_rules_pointwise.cpp: unary and binary math, activations
void register_reduction_jvp_rules();  // jvp_rules_reduction.cpp: sum, mean, amax, prod, var, softmax, ...
void register_view_jvp_rules();       // jvp_rules_view.cpp: views, shape copies, indexing (all linear)
void register_matmul_jvp_rules();     // jvp_rules_matmul.cpp: mm, bmm, matmul, addmm, linear
void register_nn_jvp_rules();         // jvp_rules_nn.cpp: norms, dropout, conv, embedding, losses
void register_linalg_jvp_rules();     // jvp_rules_linalg.cpp: linalg factorizations, special functions
void register_special_jvp_rules();    // jvp_rules_special.cpp: i0e, i1e, erfcx, log_ndtr, ndtri, gammainc(c)
inline void register_all_jvp_rules() {
  register_pointwise_jvp_rules();
  register_reduction_jvp_rules();
  register_view_jvp_rules();
  register_matmul_jvp_rules();
  register_nn_jvp_rules();
  register_linalg_jvp_rules();
  register_special_jvp_rules();
}

// The tangent of input i, zeros shaped like the input when it has none.
inline Tensor tan_or_zero(const JvpArgs& a, size_t i) {
  if (a.has(i)) return a.tangents[i];
  const Tensor& x = a.inputs[i];
  if (x.is_wrapped_number()) return Tensor::wrapped_scalar(is_floating(x.dtype()) ? Scalar(0.0) : Scalar(int64_t{0}));
  return ops::zeros_like(x);
}

// Sum of two tangent contributions, either of which may be undefined (zero).
inline Tensor add_t(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return ops::add(a, b);
}

// For an operator linear in its floating inputs jointly (views, sum, cat, neg,
// ...): the op applied to the tangents, integer inputs (indices) kept as they are.
inline std::vector<Tensor> linear_rule(const JvpArgs& a) {
  std::vector<Tensor> ins(a.inputs.size());
  for (size_t i = 0; i < ins.size(); ++i) {
    const Tensor& x = a.inputs[i];
    if (!x.defined() || !is_floating(x.dtype()))
      ins[i] = x;
    else
      ins[i] = tan_or_zero(a, i);
  }
  return call_op(a.op, ins, a.attrs);
}

// For an operator linear in input 0 only (the others are constants: indices,
// masks, sizes): the op applied to input 0's tangent.
inline std::vector<Tensor> linear_in_first(const JvpArgs& a) {
  std::vector<Tensor> ins = a.inputs;
  ins[0] = tan_or_zero(a, 0);
  return call_op(a.op, ins, a.attrs);
}

// For an operator multilinear in its floating inputs (mul, mm, bmm, conv without
// bias, ...): the sum over inputs with a tangent of the op with that input
// replaced by its tangent.
inline std::vector<Tensor> multilinear_rule(const JvpArgs& a) {
  std::vector<Tensor> acc;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    if (!a.has(i)) continue;
    std::vector<Tensor> ins = a.inputs;
    ins[i] = a.tangents[i];
    std::vector<Tensor> r = call_op(a.op, ins, a.attrs);
    if (acc.empty())
      acc = r;
    else
      for (size_t k = 0; k < r.size(); ++k) acc[k] = add_t(acc[k], r[k]);
  }
  return acc;
}

// Tangent of an elementwise unary op: f'(x) * t, with f'(x) given.
inline std::vector<Tensor> scale(const JvpArgs& a, const Tensor& derivative) {
  return {ops::mul(derivative, a.tangents[0])};
}

}  // namespace tp::autograd::forward_ad
