// The view family: view, permute, expand, slice, select. Each output aliases
// input 0 (same storage and version counter) with new sizes/strides/offset;
// inference computes the view's strides, so the tracer sees them too.
#include <optional>

#include "ops/derivative_util.h"
#include "ops/families.h"
#include "ops/kernel_util.h"
#include "ops/registry.h"

namespace tp {
namespace {

TensorMeta view_meta(const TensorMeta& in, Shape sizes, Shape strides) {
  TensorMeta m;
  m.sizes = std::move(sizes);
  m.strides = std::move(strides);
  m.dtype = in.dtype;
  m.device = in.device;
  return m;
}

// Views whose offset is unchanged.
std::vector<Tensor> alias_cpu(const OpDef&, const std::vector<Tensor>& in, const Attrs&,
                              const std::vector<TensorMeta>& om) {
  return {in[0].as_strided(om[0].sizes, om[0].strides, in[0].offset())};
}

// ---- view ----
std::vector<TensorMeta> view_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta& x = in[0];
  Shape size = infer_view_size(attr_shape(attrs, "size"), numel(x.sizes), op.name);
  std::optional<Shape> strides = view_strides(x.sizes, x.strides, size);
  TP_CHECK(strides, Error, op.name,
           ": view size is not compatible with input tensor's size and stride (at least one dimension spans "
           "across two contiguous subspaces): input shape ",
           shape_str(x.sizes), " with strides ", shape_str(x.strides), ", requested shape ", shape_str(size),
           ". Use .reshape(...) instead.");
  return {view_meta(x, std::move(size), std::move(*strides))};
}

// ---- permute ----
std::vector<int64_t> checked_permutation(const std::vector<int64_t>& dims, int64_t ndim, const char* op) {
  TP_CHECK(static_cast<int64_t>(dims.size()) == ndim, ValueError, op,
           ": number of dims don't match: the tensor has ", ndim, " dims but the permutation ", dims, " has ",
           dims.size());
  std::vector<int64_t> perm(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], ndim, op);
    TP_CHECK(!seen[d], ValueError, op, ": repeated dim ", d, " in permutation ", dims);
    seen[d] = true;
    perm[i] = d;
  }
  return perm;
}

std::vector<TensorMeta> permute_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta& x = in[0];
  auto perm = checked_permutation(attrs.get<std::vector<int64_t>>("dims"), static_cast<int64_t>(x.sizes.size()),
                                  op.name);
  Shape sizes(perm.size()), strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    sizes[i] = x.sizes[perm[i]];
    strides[i] = x.strides[perm[i]];
  }
  return {view_meta(x, std::move(sizes), std::move(strides))};
}

// ---- expand ----
std::vector<TensorMeta> expand_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta& x = in[0];
  Shape target = attr_shape(attrs, "size");
  const int64_t nd = static_cast<int64_t>(target.size()), xd = static_cast<int64_t>(x.sizes.size());
  TP_CHECK(nd >= xd, ValueError, op.name, ": the number of sizes provided (", nd,
           ") must be greater or equal to the number of dimensions in the tensor (", xd, "); tensor shape ",
           shape_str(x.sizes), ", target ", shape_str(target));
  Shape sizes(nd), strides(nd);
  for (int64_t i = nd - 1; i >= 0; --i) {
    int64_t j = i - (nd - xd);  // the matching input dim, if any
    int64_t want = target[i];
    if (j < 0) {
      TP_CHECK(want >= 0, ValueError, op.name, ": the expanded size ", want,
               " is not allowed in a leading, non-existing dimension ", i, " (target ", shape_str(target), ")");
      sizes[i] = want;
      strides[i] = 0;
      continue;
    }
    if (want == -1) want = x.sizes[j];
    TP_CHECK(want >= 0, ValueError, op.name, ": invalid size ", want, " in target ", shape_str(target));
    if (x.sizes[j] == want) {
      sizes[i] = want;
      strides[i] = x.strides[j];
    } else {
      TP_CHECK(x.sizes[j] == 1, ValueError, op.name, ": the expanded size of the tensor (", want,
               ") must match the existing size (", x.sizes[j], ") at non-singleton dimension ", i,
               ". Target sizes: ", shape_str(target), ". Tensor sizes: ", shape_str(x.sizes));
      sizes[i] = want;
      strides[i] = 0;
    }
  }
  check_sizes(sizes, op.name);
  return {view_meta(x, std::move(sizes), std::move(strides))};
}

// ---- slice ----
struct SliceGeom {
  int64_t dim, start, length, step;
};

SliceGeom slice_geom(const Shape& sizes, const Attrs& attrs, const char* op) {
  TP_CHECK(!sizes.empty(), IndexError, op, ": slice() cannot be applied to a 0-dim tensor");
  int64_t dim = wrap_dim(attrs.get<int64_t>("dim"), static_cast<int64_t>(sizes.size()), op);
  int64_t step = attrs.get_or<int64_t>("step", 1);
  TP_CHECK(step > 0, ValueError, op, ": slice step must be positive, got ", step);
  const int64_t size = sizes[dim];
  int64_t start = attrs.get_or<int64_t>("start", 0);
  int64_t end = attrs.get_or<int64_t>("end", size);
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = start < 0 ? 0 : (start > size ? size : start);
  end = end < start ? start : (end > size ? size : end);
  int64_t span = end - start;
  return {dim, start, span / step + (span % step != 0 ? 1 : 0), step};
}

std::vector<TensorMeta> slice_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta& x = in[0];
  SliceGeom g = slice_geom(x.sizes, attrs, op.name);
  Shape sizes = x.sizes, strides = x.strides;
  sizes[g.dim] = g.length;
  strides[g.dim] *= g.step;
  return {view_meta(x, std::move(sizes), std::move(strides))};
}

std::vector<Tensor> slice_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                              const std::vector<TensorMeta>& om) {
  const Tensor& x = in[0];
  SliceGeom g = slice_geom(x.sizes(), attrs, op.name);
  // An empty slice keeps the input's offset: start may be one past the end.
  int64_t offset = x.offset() + (g.length > 0 ? g.start * x.strides()[g.dim] : 0);
  return {x.as_strided(om[0].sizes, om[0].strides, offset)};
}

// ---- select ----
std::pair<int64_t, int64_t> select_geom(const Shape& sizes, const Attrs& attrs, const char* op) {
  TP_CHECK(!sizes.empty(), IndexError, op, ": select() cannot be applied to a 0-dim tensor");
  int64_t dim = wrap_dim(attrs.get<int64_t>("dim"), static_cast<int64_t>(sizes.size()), op);
  int64_t index = attrs.get<int64_t>("index");
  TP_CHECK(index >= -sizes[dim] && index < sizes[dim], IndexError, op, ": index ", index,
           " out of range for tensor of size ", shape_str(sizes), " at dimension ", dim);
  return {dim, index < 0 ? index + sizes[dim] : index};
}

std::vector<TensorMeta> select_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta& x = in[0];
  auto [dim, index] = select_geom(x.sizes, attrs, op.name);
  Shape sizes = x.sizes, strides = x.strides;
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  return {view_meta(x, std::move(sizes), std::move(strides))};
}

std::vector<Tensor> select_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                               const std::vector<TensorMeta>& om) {
  const Tensor& x = in[0];
  auto [dim, index] = select_geom(x.sizes(), attrs, op.name);
  return {x.as_strided(om[0].sizes, om[0].strides, x.offset() + index * x.strides()[dim])};
}

// ---------------------------------------------------------------------------
// Derivative formulas.
std::vector<Tensor> view_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  return {ops::reshape(g, a.inputs[0].sizes())};  // the gradient may not be viewable (e.g. expanded)
}

std::vector<Tensor> permute_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  auto perm = checked_permutation(a.attrs.get<std::vector<int64_t>>("dims"), a.inputs[0].dim(), "permute");
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  return {ops::permute(g, inverse)};
}

std::vector<Tensor> expand_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  return {ops::sum_to(g, a.inputs[0].sizes())};
}

// slice/select: scatter the gradient into zeros of the input's shape.
std::vector<Tensor> slice_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  Tensor z = ops::zeros(a.inputs[0].sizes(), g.dtype());
  const AttrValue* s = a.attrs.find("start");
  const AttrValue* e = a.attrs.find("end");
  std::optional<int64_t> start, end;
  if (s && std::holds_alternative<int64_t>(*s)) start = std::get<int64_t>(*s);
  if (e && std::holds_alternative<int64_t>(*e)) end = std::get<int64_t>(*e);
  Tensor part = ops::slice(z, a.attrs.get<int64_t>("dim"), start, end, a.attrs.get_or<int64_t>("step", 1));
  ops::copy_(part, g);
  return {z};
}

std::vector<Tensor> select_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  Tensor z = ops::zeros(a.inputs[0].sizes(), g.dtype());
  Tensor part = ops::select(z, a.attrs.get<int64_t>("dim"), a.attrs.get<int64_t>("index"));
  ops::copy_(part, g);
  return {z};
}

void register_view(const char* name, InferFn infer, KernelFn cpu, BackwardFn backward) {
  register_op({.name = name, .tags = kView, .num_inputs = 1, .infer = infer, .cpu = cpu, .backward = backward});
}

}  // namespace

void register_view_ops() {
  register_view("view", &view_infer, &alias_cpu, &view_backward);
  register_view("permute", &permute_infer, &alias_cpu, &permute_backward);
  register_view("expand", &expand_infer, &alias_cpu, &expand_backward);
  register_view("slice", &slice_infer, &slice_cpu, &slice_backward);
  register_view("select", &select_infer, &select_cpu, &select_backward);
}

}  // namespace tp
