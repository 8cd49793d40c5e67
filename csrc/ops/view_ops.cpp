// The view family. Primitives (view, permute, expand, slice, select,
// as_strided, diagonal, view.dtype): each output aliases input 0 (same storage
// and version counter) with new sizes/strides/offset; inference computes the
// view's strides, so the tracer sees them too. Composites (reshape, flatten,
// transpose, squeeze, narrow, split, ...) decompose into the primitives.
#include <algorithm>
#include <optional>

#include "ops/derivative_util.h"
#include "ops/dispatch.h"
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

// A device gradient (CUDA) cannot take the CPU zeros below (the C++
// factories build on the host): its zeros come from where(true, 0, g's first
// element broadcast), computed on g's device, and the gradient goes in through
// slice_scatter (a strided copy_ into a device view is not a kernel). The
// element is reached through operators (select, reshape, expand), never a
// direct Tensor view: a joint-graph trace must record it as a function of g,
// or it becomes a non-contiguous constant holding the trace's gradient.
bool on_device(const Tensor& g) { return g.device().kind != Device::Kind::CPU && g.numel() > 0; }
// An empty device gradient has no element to start from: its zeros come from full_on.
bool empty_on_device(const Tensor& g) { return g.device().kind != Device::Kind::CPU && g.numel() == 0; }

Tensor device_zeros(const Tensor& g, const Shape& sizes) {
  Tensor one = g;
  while (one.dim() > 0) one = ops::select(one, 0, 0);
  one = ops::expand(ops::reshape(one, Shape(sizes.size(), 1)), sizes);
  return ops::where(Tensor::scalar_tensor(Scalar(true), DType::Bool), ops::scalar(Scalar(0.0)), one);
}

Tensor device_slice_grad(const Tensor& g, const Shape& sizes, int64_t dim, std::optional<int64_t> start,
                         std::optional<int64_t> end, int64_t step) {
  static const OpDef& op = get_op("slice_scatter");
  Attrs attrs = {{"dim", dim}, {"step", step}};
  attrs.set("start", start ? AttrValue(*start) : AttrValue(std::monostate{}));
  attrs.set("end", end ? AttrValue(*end) : AttrValue(std::monostate{}));
  return call_op1(op, {device_zeros(g, sizes), g}, attrs);
}

// slice/select: scatter the gradient into zeros of the input's shape.
std::vector<Tensor> slice_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const AttrValue* s = a.attrs.find("start");
  const AttrValue* e = a.attrs.find("end");
  std::optional<int64_t> start, end;
  if (s && std::holds_alternative<int64_t>(*s)) start = std::get<int64_t>(*s);
  if (e && std::holds_alternative<int64_t>(*e)) end = std::get<int64_t>(*e);
  if (empty_on_device(g)) return {ops::full_on(g, a.inputs[0].sizes(), Scalar(int64_t{0}), g.dtype())};
  if (on_device(g))
    return {device_slice_grad(g, a.inputs[0].sizes(), a.attrs.get<int64_t>("dim"), start, end,
                              a.attrs.get_or<int64_t>("step", 1))};
  Tensor z = ops::zeros(a.inputs[0].sizes(), g.dtype());
  Tensor part = ops::slice(z, a.attrs.get<int64_t>("dim"), start, end, a.attrs.get_or<int64_t>("step", 1));
  ops::copy_(part, g);
  return {z};
}

std::vector<Tensor> select_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  if (empty_on_device(g)) return {ops::full_on(g, a.inputs[0].sizes(), Scalar(int64_t{0}), g.dtype())};
  if (on_device(g)) {
    const Shape& sizes = a.inputs[0].sizes();
    int64_t dim = a.attrs.get<int64_t>("dim"), index = a.attrs.get<int64_t>("index");
    if (dim < 0) dim += static_cast<int64_t>(sizes.size());
    if (index < 0) index += sizes[static_cast<size_t>(dim)];
    return {device_slice_grad(ops::unsqueeze(g, dim), sizes, dim, index, index + 1, 1)};
  }
  Tensor z = ops::zeros(a.inputs[0].sizes(), g.dtype());
  Tensor part = ops::select(z, a.attrs.get<int64_t>("dim"), a.attrs.get<int64_t>("index"));
  ops::copy_(part, g);
  return {z};
}


// ---- as_strided ----
struct StridedGeom {
  Shape sizes, strides;
  int64_t offset;
};

StridedGeom as_strided_geom(int64_t x_offset, const Attrs& attrs, const char* op) {
  StridedGeom g{attr_shape(attrs, "size"), attr_shape(attrs, "stride"),
                attrs.get_optional_int("storage_offset").value_or(x_offset)};
  TP_CHECK(g.sizes.size() == g.strides.size(), ValueError, op, ": mismatch in length of strides and shape: size ",
           shape_str(g.sizes), ", stride ", shape_str(g.strides));
  check_sizes(g.sizes, op);
  for (auto s : g.strides) TP_CHECK(s >= 0, ValueError, op, ": negative strides are not supported, got ", shape_str(g.strides));
  TP_CHECK(g.offset >= 0, ValueError, op, ": negative storage offset ", g.offset);
  return g;
}

// Highest element offset a view reaches (offset itself for a one-element view), or -1 when empty.
int64_t last_element(const Shape& sizes, const Shape& strides, int64_t offset) {
  int64_t last = offset;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return -1;
    last += (sizes[d] - 1) * strides[d];
  }
  return last;
}

std::vector<TensorMeta> as_strided_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  StridedGeom g = as_strided_geom(0, attrs, op.name);
  return {view_meta(in[0], std::move(g.sizes), std::move(g.strides))};
}

std::vector<Tensor> as_strided_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                   const std::vector<TensorMeta>& om) {
  const Tensor& x = in[0];
  StridedGeom g = as_strided_geom(x.offset(), attrs, op.name);
  const int64_t capacity = static_cast<int64_t>(x.impl()->storage->nbytes()) / itemsize(x.dtype());
  const int64_t last = last_element(g.sizes, g.strides, g.offset);
  TP_CHECK(last < capacity, ValueError, op.name, ": setStorage: sizes ", shape_str(g.sizes), ", strides ",
           shape_str(g.strides), " and storage offset ", g.offset, " require a storage of ", last + 1,
           " elements but the storage holds ", capacity);
  return {x.as_strided(om[0].sizes, om[0].strides, g.offset)};
}

// Whether two elements of a view of these sizes and strides may share memory:
// visiting the dims by increasing stride, each stride must step past all that
// the smaller dims reach. Conservative (a false "may" only costs a division by 1).
bool may_self_overlap(const Shape& sizes, const Shape& strides) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of the dims with more than one element
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return false;
    if (sizes[d] > 1) dims.emplace_back(strides[d], sizes[d]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;
  for (auto [stride, size] : dims) {
    if (stride <= reach) return true;
    reach += (size - 1) * stride;
  }
  return false;
}

// The gradient is accumulated into a zero buffer that stands for the storage
// both views read (every output element adds to the memory it came from) and
// read back through the input's geometry. When several of the input's elements
// share one memory location (the input is itself an expanded or unfolded view),
// each gets an equal share of that location's gradient: the chain of views
// back to their base sums those elements again, so the base gets exactly the
// sum once (without the division, x.unfold(1, 2, 1).unfold(0, 2, 1) counted
// every window overlap twice).
std::vector<Tensor> as_strided_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const Tensor& x = a.inputs[0];
  StridedGeom og = as_strided_geom(x.offset(), a.attrs, "as_strided");
  const int64_t x_last = last_element(x.sizes(), x.strides(), x.offset());
  const int64_t o_last = last_element(og.sizes, og.strides, og.offset);
  if (x_last < 0 || o_last < 0) return {ops::full_on(g, x.sizes(), Scalar(int64_t{0}), g.dtype())};
  const int64_t lo = std::min(x.offset(), og.offset), len = std::max(x_last, o_last) + 1 - lo;
  // Both made on g's device (a CUDA g meets no host tensor in index_add).
  Tensor positions = ops::as_strided(ops::arange_on(g, len), og.sizes, og.strides, og.offset - lo);
  Tensor buf = ops::index_add(ops::full_on(g, {len}, Scalar(int64_t{0}), g.dtype()), 0, ops::reshape(positions, {-1}),
                              ops::reshape(g, {-1}));
  if (may_self_overlap(x.sizes(), x.strides())) {
    Tensor own = ops::as_strided(ops::arange_on(g, len), x.sizes(), x.strides(), x.offset() - lo);
    Tensor count = ops::index_add(ops::full_on(g, {len}, Scalar(int64_t{0}), g.dtype()), 0, ops::reshape(own, {-1}),
                                  ops::full_on(g, {x.numel()}, Scalar(int64_t{1}), g.dtype()));
    buf = ops::div(buf, ops::clamp(count, Scalar(int64_t{1}), std::nullopt), std::nullopt);
  }
  return {ops::as_strided(buf, x.sizes(), x.strides(), x.offset() - lo)};
}

// ---- diagonal ----
struct DiagGeom {
  int64_t d1, d2, length, offset_elems;
};

DiagGeom diagonal_geom(const Shape& sizes, const Shape& strides, const Attrs& attrs, const char* op) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  TP_CHECK(nd >= 2, ValueError, op, ": expected a tensor with at least 2 dimensions, got shape ", shape_str(sizes));
  const int64_t d1 = wrap_dim(attrs.get_int("dim1"), nd, op), d2 = wrap_dim(attrs.get_int("dim2"), nd, op);
  TP_CHECK(d1 != d2, ValueError, op, ": diagonal dimensions cannot be identical ", attrs.get_int("dim1"), ", ",
           attrs.get_int("dim2"));
  const int64_t off = attrs.get_int("offset");
  int64_t len = off >= 0 ? std::min(sizes[d1], sizes[d2] - off) : std::min(sizes[d1] + off, sizes[d2]);
  len = std::max<int64_t>(len, 0);
  int64_t start = 0;
  if (len > 0) start = off >= 0 ? off * strides[d2] : -off * strides[d1];
  return {d1, d2, len, start};
}

TensorMeta diagonal_meta(const TensorMeta& x, const DiagGeom& g) {
  Shape sizes, strides;
  for (size_t d = 0; d < x.sizes.size(); ++d) {
    if (static_cast<int64_t>(d) == g.d1 || static_cast<int64_t>(d) == g.d2) continue;
    sizes.push_back(x.sizes[d]);
    strides.push_back(x.strides[d]);
  }
  sizes.push_back(g.length);
  strides.push_back(x.strides[g.d1] + x.strides[g.d2]);
  return view_meta(x, std::move(sizes), std::move(strides));
}

std::vector<TensorMeta> diagonal_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  return {diagonal_meta(in[0], diagonal_geom(in[0].sizes, in[0].strides, attrs, op.name))};
}

std::vector<Tensor> diagonal_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                 const std::vector<TensorMeta>& om) {
  const Tensor& x = in[0];
  DiagGeom g = diagonal_geom(x.sizes(), x.strides(), attrs, op.name);
  return {x.as_strided(om[0].sizes, om[0].strides, x.offset() + g.offset_elems)};
}

std::vector<Tensor> diagonal_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const int64_t off = a.attrs.get_int("offset"), d1 = a.attrs.get_int("dim1"), d2 = a.attrs.get_int("dim2");
  if (empty_on_device(g)) return {ops::full_on(g, a.inputs[0].sizes(), Scalar(int64_t{0}), g.dtype())};
  if (on_device(g)) {
    // No strided copy_ into a device view: g goes to the flat positions of the
    // diagonal (of 0..numel-1 laid out as x) with index_add, all on g's device.
    const Shape& sizes = a.inputs[0].sizes();
    int64_t numel = 1;
    for (int64_t s : sizes) numel *= s;
    const Tensor pos = ops::diagonal(ops::reshape(ops::arange_on(g, numel), sizes), off, d1, d2);
    const Tensor flat = ops::index_add(ops::full_on(g, {numel}, Scalar(int64_t{0}), g.dtype()), 0,
                                       ops::reshape(pos, {-1}), ops::reshape(g, {-1}));
    return {ops::reshape(flat, sizes)};
  }
  Tensor z = ops::zeros(a.inputs[0].sizes(), g.dtype());
  Tensor part = ops::diagonal(z, off, d1, d2);
  ops::copy_(part, g);
  return {z};
}

// ---- view.dtype: the same bits read as another dtype ----
// Of another element size (PyTorch's rule): the last dim, which must have
// stride 1, is scaled by the size ratio, and so are the other strides (and the
// offset, checked by the kernel); a narrower dtype multiplies them, a wider one
// divides them, which must be exact.
std::vector<TensorMeta> view_dtype_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const DType to = attrs.get<DType>("dtype");
  const DType from = in[0].dtype;
  const int64_t old_size = itemsize(from), new_size = itemsize(to);
  TensorMeta m = view_meta(in[0], in[0].sizes, in[0].strides);
  m.dtype = to;
  if (old_size == new_size) return {m};
  const int64_t rank = static_cast<int64_t>(m.sizes.size());
  auto what = [&] { return str("to view ", dtype_name(from), " as ", dtype_name(to), " (different element sizes)"); };
  TP_CHECK(rank > 0, ValueError, op.name, ": self.dim() cannot be 0 ", what());
  TP_CHECK(m.strides[rank - 1] == 1, ValueError, op.name, ": self.stride(-1) must be 1 ", what(), ", but got ",
           m.strides[rank - 1]);
  if (old_size > new_size) {
    const int64_t ratio = old_size / new_size;
    m.sizes[rank - 1] *= ratio;
    for (int64_t d = 0; d < rank - 1; ++d) m.strides[d] *= ratio;
  } else {
    const int64_t ratio = new_size / old_size;
    TP_CHECK(m.sizes[rank - 1] % ratio == 0, ValueError, op.name, ": self.size(-1) must be divisible by ", ratio,
             " ", what(), ", but got ", m.sizes[rank - 1]);
    for (int64_t d = 0; d < rank - 1; ++d)
      TP_CHECK(m.strides[d] % ratio == 0, ValueError, op.name, ": self.stride(", d, ") must be divisible by ", ratio,
               " ", what(), ", but got ", m.strides[d]);
    m.sizes[rank - 1] /= ratio;
    for (int64_t d = 0; d < rank - 1; ++d) m.strides[d] /= ratio;
  }
  return {m};
}

std::vector<Tensor> view_dtype_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs&,
                                   const std::vector<TensorMeta>& om) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = in[0].impl()->storage;
  impl->sizes = om[0].sizes;
  impl->strides = om[0].strides;
  const int64_t old_size = itemsize(in[0].dtype()), new_size = itemsize(om[0].dtype);
  const int64_t bytes = in[0].offset() * old_size;  // the offset is counted in elements
  TP_CHECK(bytes % new_size == 0, ValueError, op.name, ": self.storage_offset() must be divisible by ",
           new_size / old_size, " to view ", dtype_name(in[0].dtype()), " as ", dtype_name(om[0].dtype),
           " (different element sizes), but got ", in[0].offset());
  impl->offset = bytes / new_size;
  impl->dtype = om[0].dtype;
  impl->own_counter = in[0].impl()->own_counter;
  return {Tensor(std::move(impl))};
}

// ---------------------------------------------------------------------------
// Composite views: each decomposes into the primitive views above, so autograd,
// the tracer and the Stax lowering only ever see view/permute/expand/slice/select.
std::vector<Tensor> reshape_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  return {ops::reshape(in[0], attr_shape(attrs, "shape"))};
}

std::vector<Tensor> flatten_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& x = in[0];
  if (x.dim() == 0) return {ops::reshape(x, {1})};
  const int64_t s = wrap_dim(attrs.get_int("start_dim"), x.dim(), "flatten");
  const int64_t e = wrap_dim(attrs.get_int("end_dim"), x.dim(), "flatten");
  TP_CHECK(s <= e, ValueError, "flatten: start_dim (", attrs.get_int("start_dim"),
           ") cannot come after end_dim (", attrs.get_int("end_dim"), ") for a tensor of shape ",
           shape_str(x.sizes()));
  if (s == e) return {x};
  Shape sizes(x.sizes().begin(), x.sizes().begin() + s);
  int64_t n = 1;
  for (int64_t d = s; d <= e; ++d) n *= x.sizes()[d];
  sizes.push_back(n);
  sizes.insert(sizes.end(), x.sizes().begin() + e + 1, x.sizes().end());
  return {ops::reshape(x, sizes)};
}

std::vector<Tensor> unflatten_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& x = in[0];
  TP_CHECK(x.dim() > 0, ValueError, "unflatten: cannot unflatten a 0-d tensor");
  const int64_t d = wrap_dim(attrs.get_int("dim"), x.dim(), "unflatten");
  Shape parts = attr_shape(attrs, "sizes");
  TP_CHECK(!parts.empty(), ValueError, "unflatten: sizes must be non-empty");
  parts = infer_view_size(parts, x.sizes()[d], "unflatten");
  int64_t n = 1;
  for (auto p : parts) n *= p;
  TP_CHECK(n == x.sizes()[d], ValueError, "unflatten: provided sizes ", shape_str(attr_shape(attrs, "sizes")),
           " don't multiply up to the size of dim ", d, " (", x.sizes()[d], ") in the input tensor of shape ",
           shape_str(x.sizes()));
  Shape sizes(x.sizes().begin(), x.sizes().begin() + d);
  sizes.insert(sizes.end(), parts.begin(), parts.end());
  sizes.insert(sizes.end(), x.sizes().begin() + d + 1, x.sizes().end());
  return {ops::view(x, sizes)};
}

std::vector<Tensor> transpose_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  if (in[0].dim() == 0) {  // a 0-d tensor accepts dims 0 and -1 and is its own transpose
    wrap_dim(attrs.get_int("dim0"), 1, "transpose");
    wrap_dim(attrs.get_int("dim1"), 1, "transpose");
    return {in[0]};
  }
  return {ops::transpose(in[0], attrs.get_int("dim0"), attrs.get_int("dim1"))};
}

std::vector<Tensor> t_decompose(const std::vector<Tensor>& in, const Attrs&) {
  const Tensor& x = in[0];
  TP_CHECK(x.dim() <= 2, ValueError, "t: expects a tensor with <= 2 dimensions, but self is ", x.dim(),
           "D (shape ", shape_str(x.sizes()), ")");
  return {x.dim() < 2 ? x : ops::transpose(x, 0, 1)};
}

std::vector<Tensor> squeeze_decompose(const std::vector<Tensor>& in, const Attrs&) { return {ops::squeeze(in[0])}; }

std::vector<Tensor> squeeze_dims_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& x = in[0];
  const AttrValue* v = attrs.find("dim");
  std::vector<int64_t> dims = v && std::holds_alternative<std::vector<int64_t>>(*v)
                                  ? std::get<std::vector<int64_t>>(*v)
                                  : std::vector<int64_t>{attrs.get_int("dim")};
  const int64_t nd = std::max<int64_t>(x.dim(), 1);
  std::vector<bool> drop(static_cast<size_t>(nd), false);
  for (auto d : dims) drop[wrap_dim(d, nd, "squeeze")] = true;
  if (x.dim() == 0) return {x};
  Shape sizes;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!(drop[d] && x.sizes()[d] == 1)) sizes.push_back(x.sizes()[d]);
  return {ops::view(x, sizes)};
}

std::vector<Tensor> unsqueeze_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  return {ops::unsqueeze(in[0], attrs.get_int("dim"))};
}

std::vector<Tensor> narrow_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& x = in[0];
  TP_CHECK(x.dim() > 0, IndexError, "narrow: cannot be applied to a 0-dim tensor");
  const int64_t d = wrap_dim(attrs.get_int("dim"), x.dim(), "narrow");
  const int64_t size = x.sizes()[d], length = attrs.get_int("length");
  int64_t start = attrs.get_int("start");
  TP_CHECK(start >= -size && start <= size, IndexError, "narrow: start ", start, " is out of range for dimension ",
           d, " of size ", size);
  if (start < 0) start += size;
  TP_CHECK(length >= 0 && start + length <= size, ValueError, "narrow: start (", start, ") + length (", length,
           ") exceeds dimension size (", size, ") of dimension ", d);
  return {ops::slice(x, d, start, start + length, 1)};
}

std::vector<Tensor> expand_as_decompose(const std::vector<Tensor>& in, const Attrs&) {
  return {ops::expand(in[0], in[1].sizes())};
}
std::vector<Tensor> view_as_decompose(const std::vector<Tensor>& in, const Attrs&) {
  return {ops::view(in[0], in[1].sizes())};
}
std::vector<Tensor> reshape_as_decompose(const std::vector<Tensor>& in, const Attrs&) {
  return {ops::reshape(in[0], in[1].sizes())};
}

std::vector<Tensor> movedim_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& x = in[0];
  const auto& src = attrs.get<std::vector<int64_t>>("source");
  const auto& dst = attrs.get<std::vector<int64_t>>("destination");
  TP_CHECK(src.size() == dst.size(), ValueError, "movedim: invalid source or destination dims: source ", src,
           " and destination ", dst, " have different lengths");
  const int64_t nd = x.dim();
  std::vector<int64_t> perm(static_cast<size_t>(nd), -1);
  std::vector<bool> used(static_cast<size_t>(nd), false);
  for (size_t i = 0; i < src.size(); ++i) {
    const int64_t s = wrap_dim(src[i], std::max<int64_t>(nd, 1), "movedim");
    const int64_t t = wrap_dim(dst[i], std::max<int64_t>(nd, 1), "movedim");
    if (nd == 0) continue;
    TP_CHECK(!used[s], ValueError, "movedim: repeated dim in source ", src);
    TP_CHECK(perm[t] < 0, ValueError, "movedim: repeated dim in destination ", dst);
    used[s] = true;
    perm[t] = s;
  }
  int64_t next = 0;
  for (auto& p : perm) {
    if (p >= 0) continue;
    while (used[next]) ++next;
    p = next++;
  }
  return {nd == 0 ? x : ops::permute(x, perm)};
}

std::vector<Tensor> unbind_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& x = in[0];
  TP_CHECK(x.dim() > 0, IndexError, "unbind: dimension specified as ", attrs.get_int("dim"),
           " but tensor has no dimensions");
  const int64_t d = wrap_dim(attrs.get_int("dim"), x.dim(), "unbind");
  std::vector<Tensor> out;
  for (int64_t i = 0; i < x.sizes()[d]; ++i) out.push_back(ops::select(x, d, i));
  return out;
}

std::vector<Tensor> split_at(const Tensor& x, int64_t d, const std::vector<int64_t>& lengths) {
  std::vector<Tensor> out;
  int64_t start = 0;
  for (auto len : lengths) {
    out.push_back(ops::slice(x, d, start, start + len, 1));
    start += len;
  }
  return out;
}

std::vector<Tensor> split_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& x = in[0];
  TP_CHECK(x.dim() > 0, ValueError, "split: expects at least a 1-dimensional tensor");
  const int64_t d = wrap_dim(attrs.get_int("dim"), x.dim(), "split");
  const int64_t size = x.sizes()[d], step = attrs.get_int("split_size");
  TP_CHECK(step > 0 || (step == 0 && size == 0), ValueError, "split: split_size can only be 0 if dimension size is 0, but got split_size ",
           step, " for dimension ", d, " of size ", size);
  std::vector<int64_t> lengths;
  if (step == 0) lengths.push_back(0);
  for (int64_t s = 0; s < size; s += step) lengths.push_back(std::min(step, size - s));
  if (lengths.empty()) lengths.push_back(0);
  return split_at(x, d, lengths);
}

std::vector<Tensor> split_sizes_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& x = in[0];
  TP_CHECK(x.dim() > 0, ValueError, "split: expects at least a 1-dimensional tensor");
  const int64_t d = wrap_dim(attrs.get_int("dim"), x.dim(), "split");
  const auto& sizes = attrs.get<std::vector<int64_t>>("split_size");
  int64_t total = 0;
  for (auto s : sizes) {
    TP_CHECK(s >= 0, ValueError, "split: split_sizes must be non-negative, got ", sizes);
    total += s;
  }
  TP_CHECK(total == x.sizes()[d], ValueError, "split: split_sizes ", sizes, " must sum exactly to the size ",
           x.sizes()[d], " of dimension ", d, " (tensor shape ", shape_str(x.sizes()), ")");
  return split_at(x, d, sizes);
}

std::vector<Tensor> chunk_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& x = in[0];
  TP_CHECK(x.dim() > 0, ValueError, "chunk: expects at least a 1-dimensional tensor");
  const int64_t chunks = attrs.get_int("chunks");
  TP_CHECK(chunks > 0, ValueError, "chunk: number of chunks must be greater than 0, got ", chunks);
  const int64_t d = wrap_dim(attrs.get_int("dim"), x.dim(), "chunk");
  const int64_t size = x.sizes()[d], step = (size + chunks - 1) / chunks;
  if (size == 0) return split_at(x, d, std::vector<int64_t>(static_cast<size_t>(chunks), 0));  // as PyTorch
  Attrs a{{"split_size", step}, {"dim", d}};
  return split_decompose(in, a);
}

// ---- unfold ----
// Windows of `size` every `step` along a dim, as a new last dim. Its own view
// operator (not as_strided with absolute strides): the geometry follows the
// input's, so a capture replays it on whatever layout and storage offset the
// input has then (an as_strided recorded at capture kept the first input's
// offset, and read a materialized view of a view through the strides of the
// memory under it).
struct UnfoldGeom {
  int64_t dim, size, step;
};

UnfoldGeom unfold_geom(const Shape& sizes, const Attrs& attrs) {
  const int64_t nd = std::max<int64_t>(static_cast<int64_t>(sizes.size()), 1);
  const int64_t d = wrap_dim(attrs.get_int("dimension"), nd, "unfold");
  const int64_t size = attrs.get_int("size"), step = attrs.get_int("step");
  const int64_t n = sizes.empty() ? 1 : sizes[static_cast<size_t>(d)];
  TP_CHECK(size >= 0 && size <= n, ValueError, "unfold: maximum size for tensor at dimension ", d, " is ", n,
           " but size is ", size);
  TP_CHECK(step > 0, ValueError, "unfold: step is ", step, " but must be > 0");
  return {d, size, step};
}

std::vector<TensorMeta> unfold_infer(const OpDef&, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta& x = in[0];
  const UnfoldGeom g = unfold_geom(x.sizes, attrs);
  Shape sizes = x.sizes, strides = x.strides;
  const int64_t st = x.sizes.empty() ? 1 : x.strides[static_cast<size_t>(g.dim)];
  if (!x.sizes.empty()) {
    const auto d = static_cast<size_t>(g.dim);
    sizes[d] = (x.sizes[d] - g.size) / g.step + 1;
    strides[d] = st * g.step;
  }
  sizes.push_back(g.size);
  strides.push_back(st);
  return {view_meta(x, std::move(sizes), std::move(strides))};
}

// Each window element adds its gradient to the input element it reads
// (position k * step + j along the dim): exact whatever the input's memory,
// also when the input is itself an overlapping view.
std::vector<Tensor> unfold_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const Tensor& x = a.inputs[0];
  const UnfoldGeom u = unfold_geom(x.sizes(), a.attrs);
  if (x.dim() == 0) return {u.size == 1 ? ops::reshape(g, {}) : ops::full_on(g, {}, Scalar(int64_t{0}), g.dtype())};
  const int64_t n = x.sizes()[static_cast<size_t>(u.dim)], windows = g.sizes()[static_cast<size_t>(u.dim)];
  if (g.numel() == 0) return {ops::full_on(g, x.sizes(), Scalar(int64_t{0}), g.dtype())};
  const Tensor pos = ops::reshape(ops::as_strided(ops::arange_on(g, n), {windows, u.size}, {u.step, 1}, 0), {-1});
  Shape merged = x.sizes();
  merged[static_cast<size_t>(u.dim)] = windows * u.size;
  const Tensor rows = ops::reshape(ops::movedim(g, {g.dim() - 1}, {u.dim + 1}), merged);
  return {ops::index_add(ops::full_on(g, x.sizes(), Scalar(int64_t{0}), g.dtype()), u.dim, pos, rows)};
}

void register_view(const char* name, const char* schema, InferFn infer, KernelFn cpu, BackwardFn backward) {
  register_op({.name = name, .schema = schema, .tags = kView | kAllDTypes, .num_inputs = 1, .infer = infer,
               .cpu = cpu, .backward = backward});
}

void register_composite_view(const char* name, const char* schema, int num_inputs, DecomposeFn decompose) {
  register_op({.name = name, .schema = schema, .tags = kView | kComposite | kAllDTypes, .num_inputs = num_inputs,
               .decompose = decompose});
}

}  // namespace

void register_view_ops() {
  register_view("view", "view(Tensor(a) self, int[] size) -> Tensor(a)", &view_infer, &alias_cpu, &view_backward);
  register_view("permute", "permute(Tensor(a) self, int[] dims) -> Tensor(a)", &permute_infer, &alias_cpu,
                &permute_backward);
  register_view("expand", "expand(Tensor(a) self, int[] size, *, bool implicit=False) -> Tensor(a)", &expand_infer,
                &alias_cpu, &expand_backward);
  register_view("slice", "slice(Tensor(a) self, int dim=0, int? start=None, int? end=None, int step=1) -> Tensor(a)",
                &slice_infer, &slice_cpu, &slice_backward);
  register_view("select", "select(Tensor(a) self, int dim, int index) -> Tensor(a)", &select_infer, &select_cpu,
                &select_backward);
  register_view("as_strided", "as_strided(Tensor(a) self, int[] size, int[] stride, int? storage_offset=None) -> Tensor(a)",
                &as_strided_infer, &as_strided_cpu, &as_strided_backward);
  register_view("diagonal", "diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)",
                &diagonal_infer, &diagonal_cpu, &diagonal_backward);
  register_view("unfold", "unfold(Tensor(a) self, int dimension, int size, int step) -> Tensor(a)", &unfold_infer,
                &alias_cpu, &unfold_backward);
  // Reinterpreting bits has no derivative (PyTorch refuses it across dtypes too).
  register_view("view.dtype", "view.dtype(Tensor(a) self, ScalarType dtype) -> Tensor(a)", &view_dtype_infer,
                &view_dtype_cpu, nullptr);

  register_composite_view("reshape", "reshape(Tensor(a) self, int[] shape) -> Tensor(a)", 1, &reshape_decompose);
  register_composite_view("flatten", "flatten(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)", 1,
                          &flatten_decompose);
  register_composite_view("unflatten", "unflatten(Tensor(a) self, int dim, int[] sizes) -> Tensor(a)", 1,
                          &unflatten_decompose);
  register_composite_view("transpose", "transpose(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", 1,
                          &transpose_decompose);
  register_composite_view("swapaxes", "swapaxes(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", 1,
                          &transpose_decompose);
  register_composite_view("t", "t(Tensor(a) self) -> Tensor(a)", 1, &t_decompose);
  register_composite_view("squeeze", "squeeze(Tensor(a) self) -> Tensor(a)", 1, &squeeze_decompose);
  register_composite_view("squeeze.dim", "squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)", 1,
                          &squeeze_dims_decompose);
  register_composite_view("squeeze.dims", "squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)", 1,
                          &squeeze_dims_decompose);
  register_composite_view("unsqueeze", "unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", 1, &unsqueeze_decompose);
  register_composite_view("narrow", "narrow(Tensor(a) self, int dim, int start, int length) -> Tensor(a)", 1,
                          &narrow_decompose);
  register_composite_view("expand_as", "expand_as(Tensor(a) self, Tensor other) -> Tensor(a)", 2,
                          &expand_as_decompose);
  register_composite_view("view_as", "view_as(Tensor(a) self, Tensor other) -> Tensor(a)", 2, &view_as_decompose);
  register_composite_view("reshape_as", "reshape_as(Tensor(a) self, Tensor other) -> Tensor(a)", 2,
                          &reshape_as_decompose);
  register_composite_view("movedim", "movedim(Tensor(a) self, int[] source, int[] destination) -> Tensor(a)", 1,
                          &movedim_decompose);
  register_composite_view("moveaxis", "moveaxis(Tensor(a) self, int[] source, int[] destination) -> Tensor(a)", 1,
                          &movedim_decompose);
  register_composite_view("swapdims", "swapdims(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", 1,
                          &transpose_decompose);
  register_composite_view("unbind", "unbind(Tensor(a) self, int dim=0) -> Tensor(a)[]", 1, &unbind_decompose);
  register_composite_view("split", "split(Tensor(a) self, int split_size, int dim=0) -> Tensor(a)[]", 1,
                          &split_decompose);
  register_composite_view("split.sizes", "split.sizes(Tensor(a) self, int[] split_size, int dim=0) -> Tensor(a)[]", 1,
                          &split_sizes_decompose);
  register_composite_view("chunk", "chunk(Tensor(a) self, int chunks, int dim=0) -> Tensor(a)[]", 1,
                          &chunk_decompose);
}

}  // namespace tp
