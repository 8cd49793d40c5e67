// Tangent formulas of the view, shape-copy and indexing families. All these
// operators are linear in their floating inputs (indices and masks are
// constants), so the tangent is the operator applied to the tangents. A few
// need care: `view` and `as_strided` read the tangent's own memory layout,
// which need not match the primal's; filling with a constant gives the filled
// positions a zero tangent; scatter with a multiplicative reduction is not
// linear.
#include "autograd/jvp_rules.h"

namespace tp::autograd::forward_ad {
namespace {

// view/reshape-like: the tangent's strides may not allow a view, so reshape.
std::vector<Tensor> view_rule(const JvpArgs& a) { return {ops::reshape(a.tangents[0], a.outputs[0].sizes())}; }

// as_strided addresses memory: only meaningful when the primal is the
// contiguous start of its storage, and the tangent is then read the same way.
std::vector<Tensor> as_strided_rule(const JvpArgs& a) {
  const Tensor& x = a.inputs[0];
  TP_CHECK(x.offset() == 0 && x.is_contiguous(), NotImplementedError,
           "forward-mode AD: the tangent formula of 'as_strided' needs a contiguous primal at storage offset 0 "
           "(got shape ", shape_str(x.sizes()), ")");
  std::vector<Tensor> ins{ops::contiguous(a.tangents[0])};
  return call_op(a.op, ins, a.attrs);
}

// Filling positions with a constant (scatter.value, masked_fill.Scalar):
// the same fill with 0 on the tangent.
std::vector<Tensor> fill_constant_rule(const JvpArgs& a) {
  Attrs at = a.attrs;
  at.set("value", Scalar(0.0));
  std::vector<Tensor> ins = a.inputs;
  ins[0] = a.tangents[0];
  return call_op(a.op, ins, at);
}

bool reduce_is(const JvpArgs& a, std::initializer_list<const char*> linear) {
  if (a.attrs.is_none("reduce")) return true;
  const std::string& r = a.attrs.get_str("reduce");
  for (const char* l : linear)
    if (r == l) return true;
  return false;
}

std::vector<Tensor> scatter_rule(const JvpArgs& a) {
  TP_CHECK(reduce_is(a, {"add", "sum", "mean"}), NotImplementedError,
           "forward-mode AD: no tangent formula for '", a.op.name, "' with reduce='", a.attrs.get_str("reduce"), "'");
  if (std::string(a.op.name) == "scatter.value") return fill_constant_rule(a);
  return linear_rule(a);
}

}  // namespace

void register_view_jvp_rules() {
  for (const char* n : {"permute", "expand", "slice", "select", "diagonal", "unfold", "to", "clone", "cat", "flip",
                        "roll", "repeat", "tril", "triu", "index", "index_put", "index_select", "index_add", "gather",
                        "scatter_add", "select_scatter", "slice_scatter", "as_strided_scatter", "masked_fill.Tensor",
                        "masked_scatter", "_to_device", "_value_check"})
    register_jvp(n, &linear_rule);
  register_jvp("view", &view_rule);
  register_jvp("as_strided", &as_strided_rule);
  register_jvp("masked_fill.Scalar", &fill_constant_rule);
  for (const char* n : {"scatter.src", "scatter.value", "scatter_reduce.two"}) register_jvp(n, &scatter_rule);
}

}  // namespace tp::autograd::forward_ad
