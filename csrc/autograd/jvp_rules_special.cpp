// Tangent formulas of the differentiable special functions of
// ops/special_bessel_ops.cpp and ops/special_binary_ops.cpp: the derivative their
// reverse formulas use (ops/special_derivatives.h) times the tangent.
// gammainc/gammaincc have no derivative in a: a tangent on a raises, as the
// reverse formula does.
#include "autograd/jvp_rules.h"
#include "core/error.h"
#include "ops/special_derivatives.h"

namespace tp::autograd::forward_ad {
namespace {

template <const char* Op>
std::vector<Tensor> unary_jvp(const JvpArgs& a) {
  return {ops::mul(a.tangents[0], special_unary_derivative(Op, a.inputs[0], a.outputs[0]))};
}

std::vector<Tensor> incomplete_gamma_jvp(const JvpArgs& a, bool upper) {
  TP_CHECK(!a.has(0), NotImplementedError, a.op.name,
           ": the derivative with respect to the first argument (a) is not implemented");
  if (!a.has(1)) return {Tensor()};
  return {ops::mul(a.tangents[1],
                   incomplete_gamma_x_derivative(a.inputs[0], a.inputs[1], upper, a.outputs[0].dtype()))};
}
std::vector<Tensor> gammainc_jvp(const JvpArgs& a) { return incomplete_gamma_jvp(a, false); }
std::vector<Tensor> gammaincc_jvp(const JvpArgs& a) { return incomplete_gamma_jvp(a, true); }

constexpr char kI0e[] = "special_i0e";
constexpr char kI1e[] = "special_i1e";
constexpr char kErfcx[] = "special_erfcx";
constexpr char kLogNdtr[] = "special_log_ndtr";
constexpr char kNdtri[] = "special_ndtri";

}  // namespace

void register_special_jvp_rules() {
  register_jvp(kI0e, &unary_jvp<kI0e>);
  register_jvp(kI1e, &unary_jvp<kI1e>);
  register_jvp(kErfcx, &unary_jvp<kErfcx>);
  register_jvp(kLogNdtr, &unary_jvp<kLogNdtr>);
  register_jvp(kNdtri, &unary_jvp<kNdtri>);
  register_jvp("special_gammainc", &gammainc_jvp);
  register_jvp("special_gammaincc", &gammaincc_jvp);
}

}  // namespace tp::autograd::forward_ad
