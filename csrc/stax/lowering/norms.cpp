// Normalization lowerings: native_batch_norm in evaluation mode. With
// training=False the statistics are the running ones, so the output is a
// pointwise function of x and four per-channel vectors and fuses with its
// neighbours. The arithmetic follows the eager kernel step for step, so the
// result is the same: rstd = T(1 / sqrt(double(running_var) + eps)), scale =
// rstd * weight, shift = bias - mean * scale, y = x * scale + shift (in T).
// The other two results are what eager returns in this mode: the running
// mean and that rstd, per channel. Training mode (batch statistics and the
// in-place update of the running ones) and 16-bit inputs (eager computes in
// float32) decline, and run as an extern call.
#include "stax/lowering/families.h"

namespace tp::stax {
using namespace tp::stax::ir;

namespace {

Value lower_native_batch_norm(LoweringContext& c) {
  // Operands: (input, weight, bias, running_mean, running_var).
  if (c.attrs().get_or("training", false)) c.fail("native_batch_norm in training mode has no loop rule");
  const Value& x = c.input(0);
  const DType dt = x.dtype;
  if (dt != DType::Float32 && dt != DType::Float64)
    c.fail(str("native_batch_norm of dtype ", dtype_name(dt), " has no loop rule (float32/float64 only)"));
  if (x.sizes.size() < 2) c.fail("native_batch_norm needs an (N, C, ...) input");
  const int64_t channels = x.sizes[1];
  const double eps = c.attrs().get_double("eps");
  auto per_channel = [&](size_t i) {
    const Value v = c.input(i);
    return [v, dt](const IndexExpr& ch) { return cast(v.at(Index{ch}), dt); };
  };
  auto weight = per_channel(1), bias = per_channel(2), mean = per_channel(3);
  const Value var = c.input(4);
  auto rstd = [var, dt, eps](const IndexExpr& ch) {
    Expr v = cast(var.at(Index{ch}), DType::Float64);
    Expr denom = call(CallOp::Sqrt, {call(CallOp::Add, {v, constant(Scalar(eps), DType::Float64)}, DType::Float64)},
                      DType::Float64);
    return cast(call(CallOp::Div, {constant(Scalar(1.0), DType::Float64), denom}, DType::Float64), dt);
  };
  // The per-channel vectors: rstd, scale and shift are computed once per
  // channel into small buffers (not once per element of x).
  auto vec = [&](std::function<Expr(const IndexExpr&)> f) {
    Value v;
    v.sizes = {channels};
    v.dtype = dt;
    v.at = [f, channels](const Index& idx) { return f(channels == 1 ? IndexExpr(0) : idx[0]); };
    return v;
  };
  auto realized = [&](const Value& v) {
    int buf = c.realize(v, BufferKind::Temp, -1, c.origin());
    return LoweringContext::from_buffer(buf, {channels}, {1}, dt);
  };
  const Value rstd_v = realized(vec(rstd));
  const Value scale_v = realized(vec([=](const IndexExpr& ch) {
    return call(CallOp::Mul, {rstd_v.at(Index{ch}), weight(ch)}, dt);
  }));
  const Value shift_v = realized(vec([=](const IndexExpr& ch) {
    return call(CallOp::Sub, {bias(ch), call(CallOp::Mul, {mean(ch), scale_v.at(Index{ch})}, dt)}, dt);
  }));
  Value y = c.pointwise([=](const Index& idx) {
    const Index ch{channels == 1 ? IndexExpr(0) : idx[1]};
    return call(CallOp::Add, {call(CallOp::Mul, {x.at(idx), scale_v.at(ch)}, dt), shift_v.at(ch)}, dt);
  });
  c.set_results({y, vec(mean), rstd_v});
  return y;
}

}  // namespace

void register_norm_lowerings(LoweringTable& t) { t["native_batch_norm"] = &lower_native_batch_norm; }

}  // namespace tp::stax
