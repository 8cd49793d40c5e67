// Factory lowerings: tensors filled with one value are a constant function.
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
}  // namespace

void register_factory_lowerings(LoweringTable& t) {
  t["full"] = filled(std::nullopt);
  t["zeros"] = filled(Scalar(int64_t(0)));
  t["ones"] = filled(Scalar(int64_t(1)));
}

}  // namespace tp::stax
