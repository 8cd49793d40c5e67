// Tangent formulas of the matmul family. Products are bilinear: the tangent
// is the sum over factors of the product with that factor replaced by its
// tangent. addmm/baddbmm add a scaled input on top (beta * self).
#include "autograd/jvp_rules.h"

namespace tp::autograd::forward_ad {
namespace {

// beta * self + alpha * product(b1, b2), for addmm (mm) and baddbmm (bmm).
template <Tensor (*Product)(const Tensor&, const Tensor&)>
std::vector<Tensor> add_product_rule(const JvpArgs& a) {
  const Scalar beta = a.attrs.is_none("beta") ? Scalar(int64_t{1}) : a.attrs.get_scalar("beta");
  const Scalar alpha = a.attrs.is_none("alpha") ? Scalar(int64_t{1}) : a.attrs.get_scalar("alpha");
  Tensor prod;
  if (a.has(1)) prod = Product(a.tangents[1], a.inputs[2]);
  if (a.has(2)) prod = add_t(prod, Product(a.inputs[1], a.tangents[2]));
  Tensor r;
  if (prod.defined()) r = ops::mul(prod, ops::scalar(alpha));
  if (a.has(0) && beta.to_double() != 0.0) r = add_t(r, ops::mul(a.tangents[0], ops::scalar(beta)));
  if (!r.defined()) r = ops::zeros_like(a.outputs[0]);
  return {r};
}

Tensor mm(const Tensor& x, const Tensor& y) { return call_op1(TP_OP("mm"), {x, y}); }
Tensor bmm(const Tensor& x, const Tensor& y) { return call_op1(TP_OP("bmm"), {x, y}); }

}  // namespace

void register_matmul_jvp_rules() {
  for (const char* n : {"mm", "bmm", "matmul"}) register_jvp(n, &multilinear_rule);
  register_jvp("addmm", &add_product_rule<&mm>);
  register_jvp("baddbmm", &add_product_rule<&bmm>);
}

}  // namespace tp::autograd::forward_ad
