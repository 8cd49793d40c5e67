// The view-scatter family: the pure counterparts of writing through a view.
// `select_scatter(self, src, dim, index)` is a copy of `self` whose
// `select(dim, index)` view holds `src` (likewise slice_scatter and
// as_strided_scatter). Functionalization (graph/tracer.cpp) turns
// `x[:, 0].mul_(3)` into `x' = select_scatter(x, mul(select(x, 1, 0), 3), 1, 0)`,
// so a captured graph never writes memory it did not allocate.
//
// One kernel serves all three: copy `self` into a fresh contiguous tensor, take
// the named view of that copy with the view operator's own kernel (so the
// geometry rules are the view's, not a second copy of them) and copy `src` in.
#include "ops/derivative_util.h"
#include "ops/dispatch.h"
#include "ops/families.h"
#include "ops/kernel_util.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tp {
namespace {

// The view operator each scatter inverts.
const OpDef& view_of(const OpDef& op) {
  std::string name = op.name;
  return get_op(name.substr(0, name.size() - std::string("_scatter").size()));
}

// The meta of the view the scatter writes (on a contiguous copy of self).
TensorMeta target_meta(const OpDef& op, const TensorMeta& self, const Attrs& attrs) {
  TensorMeta c = TensorMeta::contiguous(self.sizes, self.dtype);
  const OpDef& v = view_of(op);
  return v.infer(v, {c}, attrs).at(0);
}

std::vector<TensorMeta> scatter_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta& self = in[0];
  const TensorMeta& src = in[1];
  TensorMeta t = target_meta(op, self, attrs);
  TP_CHECK(src.sizes == t.sizes, ValueError, op.name, ": expected src to have a size equal to the slice of self (",
           shape_str(t.sizes), ") but got src of size ", shape_str(src.sizes), " for self of size ",
           shape_str(self.sizes));
  TP_CHECK(src.dtype == self.dtype, TypeError, op.name, ": expected src of dtype ", dtype_name(self.dtype),
           " (the dtype of self) but got ", dtype_name(src.dtype));
  if (std::string(op.name) == "as_strided_scatter") {
    // The view must stay inside self (a contiguous copy of it).
    int64_t reach = attrs.get_optional_int("storage_offset").value_or(0), numel = 1;
    for (auto s : self.sizes) numel *= s;
    bool empty = false;
    for (size_t d = 0; d < t.sizes.size(); ++d) {
      empty |= t.sizes[d] == 0;
      reach += (t.sizes[d] - 1) * t.strides[d];
    }
    TP_CHECK(empty || reach < numel, ValueError, op.name, ": the view of size ", shape_str(t.sizes), " and stride ",
             shape_str(t.strides), " reaches element ", reach, " of self of size ", shape_str(self.sizes));
  }
  return {TensorMeta::contiguous(self.sizes, self.dtype)};
}

std::vector<Tensor> scatter_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  copy_into(out, in[0]);
  Tensor view = run_kernel(view_of(op), {out}, attrs).at(0);
  copy_into(view, in[1]);
  return {out};
}

// Decompositions for code generators that lower pointwise operators and views
// but no scatter (Stax). select_scatter is a `where` over a constant mask along
// `dim`; a slice_scatter that covers the whole tensor is its source. Anything
// else calls the operator itself ("not expressible": the node stays whole).
std::vector<Tensor> select_scatter_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& self = in[0];
  const Tensor& src = in[1];
  if (self.dim() == 0 || src.dtype() != self.dtype() || !src.is_contiguous())
    return {call_op1(get_op("select_scatter"), in, attrs)};
  const int64_t d = wrap_dim(attrs.get<int64_t>("dim"), self.dim(), "select_scatter");
  int64_t index = attrs.get<int64_t>("index");
  if (index < 0) index += self.sizes()[d];
  // The mask is data made here, not by an operator: a constant of the graph.
  Shape ms(static_cast<size_t>(self.dim()), 1);
  ms[d] = self.sizes()[d];
  Tensor mask = Tensor::empty(ms, DType::Bool);
  for (int64_t i = 0; i < ms[d]; ++i) mask.data_as<bool>()[i] = i == index;
  return {ops::where(mask, ops::unsqueeze(src, d), self)};
}

std::vector<Tensor> slice_scatter_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& self = in[0];
  const Tensor& src = in[1];
  if (src.sizes() == self.sizes() && src.dtype() == self.dtype() && attrs.get_or<int64_t>("step", 1) == 1)
    return {ops::clone(src)};
  return {call_op1(get_op("slice_scatter"), in, attrs)};
}

constexpr const char* kNames[] = {"select_scatter", "slice_scatter", "as_strided_scatter"};

// d self: the gradient with the written region zeroed; d src: that region of the gradient.
template <int K>
std::vector<Tensor> scatter_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  std::vector<Tensor> grads(2);
  if (!g.defined()) return grads;
  const OpDef& op = get_op(kNames[K]);
  Tensor gc = ops::contiguous(g);
  if (a.needs_grad[0]) grads[0] = call_op1(op, {gc, ops::full_on(g, a.inputs[1].sizes(), Scalar(int64_t{0}), g.dtype())}, a.attrs);
  if (a.needs_grad[1]) grads[1] = ops::clone(call_op1(view_of(op), {gc}, a.attrs));
  return grads;
}

template <int K>
void reg(const char* schema, DecomposeFn decompose = nullptr) {
  register_op({.name = kNames[K], .schema = schema, .tags = kAllDTypes, .num_inputs = 2, .infer = &scatter_infer,
               .cpu = &scatter_cpu, .backward = &scatter_backward<K>, .decompose = decompose});
}

}  // namespace

void register_view_scatter_ops() {
  reg<0>("select_scatter(Tensor self, Tensor src, int dim, int index) -> Tensor", &select_scatter_decompose);
  reg<1>("slice_scatter(Tensor self, Tensor src, int dim=0, int? start=None, int? end=None, int step=1) -> Tensor",
         &slice_scatter_decompose);
  reg<2>("as_strided_scatter(Tensor self, Tensor src, int[] size, int[] stride, int? storage_offset=None) -> Tensor");
}

}  // namespace tp
