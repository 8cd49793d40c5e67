// Random lowerings: philox_random (ops/random_functional.h) as a compute
// function. Element i (flat, row-major) of a uniform or normal float32/float64
// draw is a pure function of the generator state input [key, first counter],
// the draw's offset and i (the prelude's tp_philox_* helpers), so the value
// fuses into its consumers like any pointwise value (dropout's mask is a
// comparison of it) and the result does not depend on how loops are split
// across threads. randint / randperm and 16-bit dtypes have no rule here: the
// region falls back to eager (or raises under strict_native).
#include "stax/lowering/families.h"

namespace tp::stax {
using namespace tp::stax::ir;

namespace {

Value lower_philox_random(LoweringContext& c) {
  const std::string& dist = c.attrs().get_str("distribution");
  const DType dt = c.out_dtype();
  if ((dist != "uniform" && dist != "normal") || (dt != DType::Float32 && dt != DType::Float64))
    c.fail(str("no generated code for '", dist, "' draws of dtype ", dtype_name(dt),
               " (uniform and normal float32/float64 only)"));
  const CallOp fn = dist == "uniform" ? (dt == DType::Float32 ? CallOp::PhiloxUniformF32 : CallOp::PhiloxUniformF64)
                                      : (dt == DType::Float32 ? CallOp::PhiloxNormalF32 : CallOp::PhiloxNormalF64);
  const Value& state = c.input(0);
  Expr key = state.at(Index{IndexExpr(0)});
  const int64_t offset = c.attrs().get_int("offset");
  Expr first = state.at(Index{IndexExpr(1)});
  if (offset != 0) first = call(CallOp::Add, {first, constant(Scalar(offset), DType::Int64)}, DType::Int64);
  // Row-major position at this call's sizes (a symbolic draw's strides are expressions).
  const SymShape strides = sym_contiguous_strides(c.out_size_exprs());
  return c.pointwise([=](const Index& idx) { return call(fn, {key, first, index_value(linear_index(idx, strides))}, dt); });
}

}  // namespace

void register_random_lowerings(LoweringTable& t) { t["philox_random"] = &lower_philox_random; }

}  // namespace tp::stax
