// mean as a lowering rule: the sum over the reduced dims divided by their
// element count N. The graph pass decomposes mean into sum / N with N a number
// fixed at capture; under dynamic shapes N depends on the sizes, so a symbolic
// graph keeps `mean` whole and N is an `Index` value (the product of the
// reduced extents, read at run time).
#include "stax/lowering/families.h"

namespace tp::stax {
using namespace tp::stax::ir;

namespace {

Value lower_mean(LoweringContext& c) {
  const Value& x = c.input(0);
  const DType dt = c.out_dtype();
  if (!is_floating(dt)) c.fail("mean of an integer result");
  if (!is_floating(x.dtype) && x.dtype != dt) c.fail("mean converting an integer input");
  const int64_t nd = static_cast<int64_t>(x.sizes.size());
  std::vector<int64_t> dims;
  if (const AttrValue* d = c.attrs().find("dim")) {
    if (auto* one = std::get_if<int64_t>(d)) dims = {*one};
    else if (auto* many = std::get_if<std::vector<int64_t>>(d)) dims = *many;
  }
  std::vector<bool> reduced(static_cast<size_t>(nd), dims.empty());
  for (auto d : dims) {
    int64_t w = d < 0 ? d + nd : d;
    if (nd == 0) continue;
    if (w < 0 || w >= nd) c.fail(str("reduction dim ", d, " out of range"));
    reduced[static_cast<size_t>(w)] = true;
  }
  IndexExpr count = 1;
  for (int64_t d = 0; d < nd; ++d)
    if (reduced[static_cast<size_t>(d)]) count = count * x.size(static_cast<size_t>(d));
  count = simplify(count);
  LoweringFn sum = find_lowering("sum");
  if (!sum) c.fail("no rule for sum");
  Value s = sum(c);  // the same dims, keepdim and result dtype
  memoize(s);
  // eager divides the sum by N converted to the result's float type.
  return c.pointwise([s, count, dt](const Index& idx) {
    return call(CallOp::Div, {s.at(idx), cast(index_value(count), dt)}, dt);
  });
}

}  // namespace

void register_mean_lowerings(LoweringTable& t) { t["mean"] = lower_mean; }

}  // namespace tp::stax
