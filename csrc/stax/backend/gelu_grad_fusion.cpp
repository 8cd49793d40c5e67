#include "stax/backend/gelu_grad_fusion.h"

#include "stax/ir/expr_visitor.h"

namespace tp::stax {
namespace {

using ir::CallOp;
using ir::Expr;
using ir::ExprNode;
using ir::ExprOp;

// The constants as the formula writes them (doubles), compared after rounding
// to float: the body's Const nodes hold the double, the kernel the float.
constexpr double kNegInvSqrt2 = -0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

bool is_f32(const Expr& e) { return e->dtype == DType::Float32; }

bool is_const(const Expr& e, double v) {
  return e->op == ExprOp::Const && is_f32(e) && static_cast<float>(e->value.to_double()) == static_cast<float>(v);
}

bool is_call(const Expr& e, CallOp fn) { return e->op == ExprOp::Call && e->fn == fn && is_f32(e); }

// e = a * b with one operand the constant v (either order); the other operand.
Expr times_const(const Expr& e, double v) {
  if (!is_call(e, CallOp::Mul)) return nullptr;
  if (is_const(e->args[1], v)) return e->args[0];
  if (is_const(e->args[0], v)) return e->args[1];
  return nullptr;
}

// 0.5 * erfc(x * -1/sqrt2): x, or null.
Expr cdf_argument(const Expr& e) {
  Expr er = times_const(e, 0.5);
  if (!er || !is_call(er, CallOp::Erfc)) return nullptr;
  return times_const(er->args[0], kNegInvSqrt2);
}

// x * (exp(x * x * -0.5) * 1/sqrt(2 pi)) for the given x (either order).
bool is_x_pdf(const Expr& e, const Expr& x) {
  if (!is_call(e, CallOp::Mul)) return false;
  for (int i = 0; i < 2; ++i) {
    if (e->args[i] != x) continue;
    Expr ex = times_const(e->args[1 - i], kInvSqrt2Pi);
    if (!ex || !is_call(ex, CallOp::Exp)) continue;
    Expr sq = times_const(ex->args[0], -0.5);
    if (sq && is_call(sq, CallOp::Mul) && sq->args[0] == x && sq->args[1] == x) return true;
  }
  return false;
}

class GeluGradFusion : public ir::ExprMutator {
 public:
  int replaced = 0;

 protected:
  Expr mutate_call(const Expr& e, std::vector<Expr> args) override {
    Expr r = rebuild(e, std::move(args));
    if (!is_call(r, CallOp::Add)) return r;
    for (int i = 0; i < 2; ++i) {
      Expr x = cdf_argument(r->args[i]);
      if (x && is_f32(x) && is_x_pdf(r->args[1 - i], x)) {
        ++replaced;
        return ir::call(CallOp::GeluGrad, {x}, DType::Float32);
      }
    }
    return r;
  }
};

}  // namespace

int fuse_gelu_grad(ir::LoopProgram& program) {
  GeluGradFusion f;  // one mutator: a subexpression shared between nodes is rewritten once
  for (ir::ComputeNode& n : program.nodes)
    if (n.body) n.body = f.mutate(n.body);
  return f.replaced;
}

}  // namespace tp::stax
