// Factory lowerings: tensors filled with one value are a constant function.
#include <cmath>

#include "stax/lowering/families.h"

namespace tp::stax {
using namespace tp::stax::ir;

namespace {
LoweringFn filled(std::optional<Scalar> fixed) {
  return [fixed](LoweringContext& c) {
    Scalar s = fixed ? *fixed : c.attrs().get_scalar("fill_value");
    DType dt = c.out_dtype();
    return c.pointwise([s, dt](const Index&) { return constant(s, dt); });
  };
}
// arange: start + step * i. Integer bounds (or an integer result) are exact
// int64 arithmetic, as eager's; float bounds are left to eager unless start and
// step are whole numbers (then every element is exact in any float type).
Value lower_arange(LoweringContext& c) {
  Scalar start = c.attrs().has("start") ? c.attrs().get_scalar("start") : Scalar(int64_t{0});
  Scalar step = c.attrs().has("step") ? c.attrs().get_scalar("step") : Scalar(int64_t{1});
  DType dt = c.out_dtype();
  bool ints = !start.is_float() && !step.is_float();
  if (!ints && is_floating(dt)) {
    double s = start.to_double(), st = step.to_double();
    if (s != std::floor(s) || st != std::floor(st) || std::fabs(s) > 1e15 || std::fabs(st) > 1e15)
      c.fail("a float arange with fractional start or step");
  } else if (!ints) {
    c.fail("an integer arange from float bounds");
  }
  int64_t s0 = start.to_int(), st = step.to_int();
  return c.pointwise([s0, st, dt](const Index& idx) {
    return cast(index_value(idx.empty() ? IndexExpr(s0) : idx[0] * st + IndexExpr(s0)), dt);
  });
}

}  // namespace

void register_factory_lowerings(LoweringTable& t) {
  t["full"] = filled(std::nullopt);
  t["zeros"] = filled(Scalar(int64_t(0)));
  t["ones"] = filled(Scalar(int64_t(1)));
  t["arange"] = lower_arange;
  t["arange.start"] = lower_arange;
}

}  // namespace tp::stax
