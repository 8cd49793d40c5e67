// The shape-changing copies: cat, stack, flip, roll, repeat, tile, tril, triu,
// contiguous. Their kernels move elements by itemsize (ops/byte_move.h), so
// every dtype is handled natively (tagged kAllDTypes); only cat converts, when
// its inputs' dtypes differ.
#include <algorithm>
#include <cstring>

#include "core/parallel.h"
#include "ops/byte_move.h"
#include "ops/derivative_util.h"
#include "ops/families.h"
#include "ops/kernel_util.h"
#include "ops/registry.h"
#include "ops/size_expr.h"

namespace tp {
namespace {

std::vector<int64_t> int_list(const Attrs& attrs, const char* name) {
  return attrs.get<std::vector<int64_t>>(name);
}

// ---- cat ----
// A 1-D tensor of size 0 is skipped whatever its shape (PyTorch keeps this for old code).
bool skipped_in_cat(const Shape& s) { return s.size() == 1 && s[0] == 0; }

struct CatGeom {
  int64_t dim = 0;
  Shape sizes;
  DType dtype = DType::Float32;
};

CatGeom cat_geom(const std::vector<TensorMeta>& in, const Attrs& attrs, const char* op) {
  TP_CHECK(!in.empty(), ValueError, op, ": expected a non-empty list of Tensors");
  CatGeom g;
  g.dtype = in[0].dtype;
  for (auto& m : in) g.dtype = promote_types(g.dtype, m.dtype);
  const TensorMeta* ref = nullptr;
  for (size_t i = 0; i < in.size(); ++i) {
    TP_CHECK(!in[i].sizes.empty(), ValueError, op, ": zero-dimensional tensor (at position ", i,
             ") cannot be concatenated");
    if (!ref && !skipped_in_cat(in[i].sizes)) ref = &in[i];
  }
  if (!ref) {
    g.sizes = {0};
    return g;
  }
  const int64_t nd = static_cast<int64_t>(ref->sizes.size());
  g.dim = wrap_dim(attrs.get_int("dim"), nd, op);
  g.sizes = ref->sizes;
  g.sizes[g.dim] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const Shape& s = in[i].sizes;
    if (skipped_in_cat(s)) continue;
    TP_CHECK(static_cast<int64_t>(s.size()) == nd, ValueError, op,
             ": tensors must have the same number of dimensions: got ", nd, " and ", s.size(), " (tensor ", i,
             " has shape ", shape_str(s), ")");
    for (int64_t d = 0; d < nd; ++d)
      TP_CHECK(d == g.dim || s[d] == ref->sizes[d], ValueError, op,
               ": sizes of tensors must match except in dimension ", g.dim, ". Expected size ", ref->sizes[d],
               " but got size ", s[d], " for tensor number ", i, " in the list (shapes ", shape_str(ref->sizes),
               " and ", shape_str(s), ")");
    g.sizes[g.dim] += s[g.dim];
  }
  return g;
}

std::vector<TensorMeta> cat_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  CatGeom g = cat_geom(in, attrs, op.name);
  check_sizes(g.sizes, op.name);
  return {TensorMeta::contiguous(g.sizes, g.dtype)};
}

std::vector<Tensor> cat_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                            const std::vector<TensorMeta>& om) {
  std::vector<TensorMeta> metas;
  for (auto& t : in) metas.push_back(t.meta());
  CatGeom g = cat_geom(metas, attrs, op.name);
  Tensor out = alloc_out(om[0]);
  int64_t offset = 0;
  for (auto& t : in) {
    if (skipped_in_cat(t.sizes()) || t.sizes()[g.dim] == 0) continue;
    Tensor part = out.as_strided(t.sizes(), out.strides(), out.offset() + offset * out.strides()[g.dim]);
    if (t.dtype() == out.dtype()) move_elements(part, t);
    else copy_into(part, t);
    offset += t.sizes()[g.dim];
  }
  return {out};
}

std::vector<Tensor> cat_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  std::vector<Tensor> grads(a.inputs.size());
  if (!g.defined()) return grads;
  std::vector<TensorMeta> metas;
  for (auto& t : a.inputs) metas.push_back(t.meta());
  CatGeom geom = cat_geom(metas, a.attrs, "cat");
  // The bounds are sums of the inputs' sizes, kept as such (ops/size_expr.h):
  // a joint graph traced with symbolic sizes slices at expressions of them.
  ops::SizeExpr offset = 0;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    const Tensor& x = a.inputs[i];
    if (skipped_in_cat(x.sizes())) {
      if (a.needs_grad[i]) grads[i] = ops::full_on(g, x.sizes(), Scalar(int64_t{0}), x.dtype());  // x: metadata only
      continue;
    }
    const ops::SizeExpr end = offset + ops::SizeExpr::size_of(x, geom.dim);
    if (a.needs_grad[i]) grads[i] = ops::reduce_grad(ops::slice_sized(g, geom.dim, offset, end), x);
    offset = end;
  }
  return grads;
}

std::vector<Tensor> stack_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  TP_CHECK(!in.empty(), ValueError, "stack: expects a non-empty list of Tensors");
  const int64_t d = wrap_dim(attrs.get_int("dim"), in[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (size_t i = 0; i < in.size(); ++i) {
    TP_CHECK(in[i].sizes() == in[0].sizes(), ValueError, "stack: expects each tensor to be equal size, but got ",
             shape_str(in[0].sizes()), " at entry 0 and ", shape_str(in[i].sizes()), " at entry ", i);
    parts.push_back(ops::unsqueeze(in[i], d));
  }
  return {ops::cat(parts, d)};
}

// ---- flip ----
std::vector<bool> dim_mask(const std::vector<int64_t>& dims, int64_t ndim, const char* op) {
  std::vector<bool> m(static_cast<size_t>(ndim), false);
  for (auto d : dims) {
    const int64_t w = wrap_dim(d, std::max<int64_t>(ndim, 1), op);
    if (ndim == 0) continue;
    TP_CHECK(!m[w], ValueError, op, ": dim ", w, " appears multiple times in the list of dims ", dims);
    m[w] = true;
  }
  return m;
}

std::vector<TensorMeta> flip_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  dim_mask(int_list(attrs, "dims"), static_cast<int64_t>(in[0].sizes.size()), op.name);
  return {TensorMeta::contiguous(in[0].sizes, in[0].dtype)};
}

std::vector<Tensor> flip_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                             const std::vector<TensorMeta>& om) {
  const Tensor& x = in[0];
  Tensor out = alloc_out(om[0]);
  if (out.numel() == 0) return {out};
  auto flip = dim_mask(int_list(attrs, "dims"), x.dim(), op.name);
  // Read through a view that walks the flipped dims backwards.
  Shape strides = x.strides();
  const char* src = static_cast<const char*>(x.data());
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (!flip[d]) continue;
    src += (x.sizes()[d] - 1) * strides[d] * itemsize(x.dtype());
    strides[d] = -strides[d];
  }
  move_elements_raw(x.sizes(), static_cast<char*>(out.data()), out.strides(), src, strides, itemsize(x.dtype()));
  return {out};
}

std::vector<Tensor> flip_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  return {ops::flip(g, int_list(a.attrs, "dims"))};
}

// ---- roll ----
// The total shift of each dim (a dim may be listed twice), in [0, size).
std::vector<int64_t> roll_shifts(const Shape& sizes, const Attrs& attrs, const char* op) {
  const auto shifts = int_list(attrs, "shifts");
  const auto dims = int_list(attrs, "dims");
  TP_CHECK(dims.size() == shifts.size() || (dims.empty() && shifts.size() == 1), ValueError, op,
           ": shifts and dimensions must align: got shifts ", shifts, " and dims ", dims);
  std::vector<int64_t> total(sizes.size(), 0);
  for (size_t i = 0; i < dims.size(); ++i) {
    TP_CHECK(!sizes.empty(), IndexError, op, ": cannot roll a 0-dim tensor along dim ", dims[i]);
    const int64_t d = wrap_dim(dims[i], static_cast<int64_t>(sizes.size()), op);
    if (sizes[d] > 0) total[d] = ((total[d] + shifts[i]) % sizes[d] + sizes[d]) % sizes[d];
  }
  return total;
}

std::vector<TensorMeta> roll_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  roll_shifts(in[0].sizes, attrs, op.name);
  return {TensorMeta::contiguous(in[0].sizes, in[0].dtype)};
}

// out[(i + s) mod n] = x[i] along each rolled dim: every rolled dim splits into
// two blocks, so 2^k block copies cover the k rolled dims.
void roll_into(const Tensor& out, const Tensor& x, const std::vector<int64_t>& shift) {
  std::vector<int64_t> rolled;
  for (size_t d = 0; d < shift.size(); ++d)
    if (shift[d] != 0) rolled.push_back(static_cast<int64_t>(d));
  const int64_t item = itemsize(x.dtype());
  for (int64_t m = 0; m < (int64_t{1} << rolled.size()); ++m) {
    Shape sizes = x.sizes();
    int64_t src_off = 0, dst_off = 0;
    for (size_t j = 0; j < rolled.size(); ++j) {
      const int64_t d = rolled[j], n = x.sizes()[d], s = shift[d];
      const bool tail = (m >> j) & 1;  // the last s elements wrap to the front
      sizes[d] = tail ? s : n - s;
      src_off += (tail ? n - s : 0) * x.strides()[d];
      dst_off += (tail ? 0 : s) * out.strides()[d];
    }
    move_elements_raw(sizes, static_cast<char*>(out.data()) + dst_off * item, out.strides(),
                      static_cast<const char*>(x.data()) + src_off * item, x.strides(), item);
  }
}

std::vector<Tensor> roll_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                             const std::vector<TensorMeta>& om) {
  const Tensor& x = in[0];
  Tensor out = alloc_out(om[0]);
  if (out.numel() == 0) return {out};
  if (int_list(attrs, "dims").empty()) {  // roll the flattened tensor
    Tensor flat_x = contiguous_bits(x);
    Tensor fx = flat_x.as_strided({x.numel()}, {1}, flat_x.offset());
    Tensor fo = out.as_strided({x.numel()}, {1}, out.offset());
    Attrs a{{"shifts", int_list(attrs, "shifts")}, {"dims", std::vector<int64_t>{0}}};
    roll_into(fo, fx, roll_shifts(fx.sizes(), a, op.name));
    return {out};
  }
  roll_into(out, x, roll_shifts(x.sizes(), attrs, op.name));
  return {out};
}

std::vector<Tensor> roll_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  auto shifts = int_list(a.attrs, "shifts");
  for (auto& s : shifts) s = -s;
  return {ops::roll(g, shifts, int_list(a.attrs, "dims"))};
}

// ---- repeat ----
std::vector<TensorMeta> repeat_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const auto reps = int_list(attrs, "repeats");
  const Shape& xs = in[0].sizes;
  TP_CHECK(reps.size() >= xs.size(), ValueError, op.name, ": number of dimensions of repeat dims ", reps,
           " can not be smaller than number of dimensions of tensor ", shape_str(xs));
  const size_t lead = reps.size() - xs.size();
  Shape sizes(reps.size());
  for (size_t i = 0; i < reps.size(); ++i) {
    TP_CHECK(reps[i] >= 0, ValueError, op.name, ": repeats can not be negative, got ", reps);
    sizes[i] = reps[i] * (i < lead ? 1 : xs[i - lead]);
  }
  check_sizes(sizes, op.name);
  return {TensorMeta::contiguous(sizes, in[0].dtype)};
}

// The output read as [r0, s0, r1, s1, ...]: one copy from the input with
// stride 0 along every r_i.
std::vector<Tensor> repeat_cpu(const OpDef&, const std::vector<Tensor>& in, const Attrs& attrs,
                               const std::vector<TensorMeta>& om) {
  const Tensor& x = in[0];
  Tensor out = alloc_out(om[0]);
  if (out.numel() == 0) return {out};
  const auto reps = int_list(attrs, "repeats");
  const size_t lead = reps.size() - static_cast<size_t>(x.dim());
  Shape shape, dst, src;
  for (size_t i = 0; i < reps.size(); ++i) {
    const int64_t s = i < lead ? 1 : x.sizes()[i - lead];
    const int64_t xs = i < lead ? 0 : x.strides()[i - lead];
    shape.insert(shape.end(), {reps[i], s});
    dst.insert(dst.end(), {s * out.strides()[i], out.strides()[i]});
    src.insert(src.end(), {0, xs});
  }
  move_elements_raw(shape, static_cast<char*>(out.data()), dst, static_cast<const char*>(x.data()), src,
                    itemsize(x.dtype()));
  return {out};
}

std::vector<Tensor> repeat_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const Tensor& x = a.inputs[0];
  const auto reps = int_list(a.attrs, "repeats");
  const size_t lead = reps.size() - static_cast<size_t>(x.dim());
  Shape split;
  std::vector<int64_t> sum_dims;
  for (size_t i = 0; i < reps.size(); ++i) {
    split.insert(split.end(), {reps[i], i < lead ? 1 : x.sizes()[i - lead]});
    sum_dims.push_back(static_cast<int64_t>(2 * i));
  }
  if (sum_dims.empty()) return {g};
  return {ops::reshape(ops::sum(ops::reshape(g, split), sum_dims), x.sizes())};
}

std::vector<Tensor> tile_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  auto reps = int_list(attrs, "dims");
  while (static_cast<int64_t>(reps.size()) < in[0].dim()) reps.insert(reps.begin(), 1);
  return {ops::repeat(in[0], reps)};
}

// ---- tril / triu ----
std::vector<TensorMeta> tri_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  TP_CHECK(in[0].sizes.size() >= 2, ValueError, op.name,
           ": input tensor must have at least 2 dimensions, got shape ", shape_str(in[0].sizes));
  return {TensorMeta::contiguous(in[0].sizes, in[0].dtype)};
}

// Copies x, then zeroes the other triangle row by row (all-zero bits are zero
// in every dtype).
template <bool kLower>
std::vector<Tensor> tri_cpu(const OpDef&, const std::vector<Tensor>& in, const Attrs& attrs,
                            const std::vector<TensorMeta>& om) {
  const Tensor& x = in[0];
  Tensor out = alloc_out(om[0]);
  if (out.numel() == 0) return {out};
  move_elements(out, x);
  const int64_t k = attrs.get_int("diagonal"), rows = x.sizes()[x.dim() - 2], cols = x.sizes()[x.dim() - 1];
  const int64_t item = itemsize(x.dtype()), total_rows = out.numel() / cols;
  char* base = static_cast<char*>(out.data());
  parallel_for(0, total_rows, std::max<int64_t>(1, kGrainSize / cols), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t i = r % rows;
      int64_t lo, hi;  // the zeroed columns [lo, hi)
      if (kLower) lo = std::clamp<int64_t>(i + k + 1, 0, cols), hi = cols;
      else lo = 0, hi = std::clamp<int64_t>(i + k, 0, cols);
      if (hi > lo) std::memset(base + (r * cols + lo) * item, 0, static_cast<size_t>((hi - lo) * item));
    }
  });
  return {out};
}

template <bool kLower>
std::vector<Tensor> tri_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const int64_t k = a.attrs.get_int("diagonal");
  return {kLower ? ops::tril(g, k) : ops::triu(g, k)};
}

std::vector<Tensor> contiguous_decompose(const std::vector<Tensor>& in, const Attrs&) {
  return {in[0].is_contiguous() ? in[0] : ops::clone(in[0])};
}

// ---- stacking helpers (NumPy names) ----
Tensor at_least(const Tensor& x, int64_t nd) {
  if (x.dim() >= nd) return x;
  if (nd == 1) return ops::reshape(x, {1});
  if (nd == 2) return ops::reshape(x, {1, x.numel()});
  if (x.dim() == 0) return ops::reshape(x, {1, 1, 1});
  if (x.dim() == 1) return ops::reshape(x, {1, x.sizes()[0], 1});
  return ops::unsqueeze(x, -1);
}

template <int64_t N>
std::vector<Tensor> atleast_decompose(const std::vector<Tensor>& in, const Attrs&) {
  return {at_least(in[0], N)};
}

std::vector<Tensor> all_at_least(const std::vector<Tensor>& in, int64_t nd) {
  std::vector<Tensor> out;
  for (auto& t : in) out.push_back(at_least(t, nd));
  return out;
}

std::vector<Tensor> hstack_decompose(const std::vector<Tensor>& in, const Attrs&) {
  auto ts = all_at_least(in, 1);
  TP_CHECK(!ts.empty(), ValueError, "hstack: expects a non-empty list of Tensors");
  return {ops::cat(ts, ts[0].dim() == 1 ? 0 : 1)};
}
std::vector<Tensor> vstack_decompose(const std::vector<Tensor>& in, const Attrs&) {
  return {ops::cat(all_at_least(in, 2), 0)};
}
std::vector<Tensor> dstack_decompose(const std::vector<Tensor>& in, const Attrs&) {
  return {ops::cat(all_at_least(in, 3), 2)};
}
std::vector<Tensor> column_stack_decompose(const std::vector<Tensor>& in, const Attrs&) {
  std::vector<Tensor> ts;
  for (auto& t : in) ts.push_back(t.dim() <= 1 ? ops::reshape(t, {t.numel(), 1}) : t);
  return {ops::cat(ts, 1)};
}

std::vector<Tensor> fliplr_decompose(const std::vector<Tensor>& in, const Attrs&) {
  TP_CHECK(in[0].dim() >= 2, ValueError, "fliplr: input must be at least 2-dimensional, got shape ",
           shape_str(in[0].sizes()));
  return {ops::flip(in[0], {1})};
}
std::vector<Tensor> flipud_decompose(const std::vector<Tensor>& in, const Attrs&) {
  TP_CHECK(in[0].dim() >= 1, ValueError, "flipud: input must be at least 1-dimensional");
  return {ops::flip(in[0], {0})};
}

// Rotation by k quarter turns in the plane of dims: flips and one transpose.
std::vector<Tensor> rot90_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& x = in[0];
  const auto dims = int_list(attrs, "dims");
  TP_CHECK(dims.size() == 2 && x.dim() >= 2, ValueError, "rot90: expected 2 dims and a tensor with at least 2 ",
           "dimensions, got dims ", dims, " and shape ", shape_str(x.sizes()));
  const int64_t d0 = wrap_dim(dims[0], x.dim(), "rot90"), d1 = wrap_dim(dims[1], x.dim(), "rot90");
  TP_CHECK(d0 != d1, ValueError, "rot90: rotation dims must differ, got ", dims);
  switch (((attrs.get_int("k") % 4) + 4) % 4) {
    case 1: return {ops::transpose(ops::flip(x, {d1}), d0, d1)};
    case 2: return {ops::flip(x, {d0, d1})};
    case 3: return {ops::flip(ops::transpose(x, d0, d1), {d1})};
    default: return {ops::clone(x)};
  }
}

void register_copy_op(const char* name, const char* schema, int num_inputs, InferFn infer, KernelFn cpu,
                      BackwardFn backward) {
  register_op({.name = name, .schema = schema, .tags = kAllDTypes, .num_inputs = num_inputs, .infer = infer,
               .cpu = cpu, .backward = backward});
}

void register_composite(const char* name, const char* schema, int num_inputs, DecomposeFn decompose) {
  register_op({.name = name, .schema = schema, .tags = kComposite | kAllDTypes, .num_inputs = num_inputs,
               .decompose = decompose});
}

}  // namespace

void register_shape_ops() {
  register_copy_op("cat", "cat(Tensor[] tensors, int dim=0) -> Tensor", -1, &cat_infer, &cat_cpu, &cat_backward);
  register_copy_op("flip", "flip(Tensor self, int[] dims) -> Tensor", 1, &flip_infer, &flip_cpu, &flip_backward);
  register_copy_op("roll", "roll(Tensor self, int[] shifts, int[] dims=[]) -> Tensor", 1, &roll_infer, &roll_cpu,
                   &roll_backward);
  register_copy_op("repeat", "repeat(Tensor self, int[] repeats) -> Tensor", 1, &repeat_infer, &repeat_cpu,
                   &repeat_backward);
  register_copy_op("tril", "tril(Tensor self, int diagonal=0) -> Tensor", 1, &tri_infer, &tri_cpu<true>,
                   &tri_backward<true>);
  register_copy_op("triu", "triu(Tensor self, int diagonal=0) -> Tensor", 1, &tri_infer, &tri_cpu<false>,
                   &tri_backward<false>);
  register_composite("stack", "stack(Tensor[] tensors, int dim=0) -> Tensor", -1, &stack_decompose);
  register_composite("tile", "tile(Tensor self, int[] dims) -> Tensor", 1, &tile_decompose);
  register_composite("hstack", "hstack(Tensor[] tensors) -> Tensor", -1, &hstack_decompose);
  register_composite("vstack", "vstack(Tensor[] tensors) -> Tensor", -1, &vstack_decompose);
  register_composite("row_stack", "row_stack(Tensor[] tensors) -> Tensor", -1, &vstack_decompose);
  register_composite("dstack", "dstack(Tensor[] tensors) -> Tensor", -1, &dstack_decompose);
  register_composite("column_stack", "column_stack(Tensor[] tensors) -> Tensor", -1, &column_stack_decompose);
  register_composite("atleast_1d", "atleast_1d(Tensor(a) self) -> Tensor(a)", 1, &atleast_decompose<1>);
  register_composite("atleast_2d", "atleast_2d(Tensor(a) self) -> Tensor(a)", 1, &atleast_decompose<2>);
  register_composite("atleast_3d", "atleast_3d(Tensor(a) self) -> Tensor(a)", 1, &atleast_decompose<3>);
  register_composite("fliplr", "fliplr(Tensor self) -> Tensor", 1, &fliplr_decompose);
  register_composite("flipud", "flipud(Tensor self) -> Tensor", 1, &flipud_decompose);
  register_composite("rot90", "rot90(Tensor self, int k=1, int[] dims=[0,1]) -> Tensor", 1, &rot90_decompose);
  register_composite("contiguous", "contiguous(Tensor(a) self, MemoryFormat? memory_format=None) -> Tensor(a)", 1, &contiguous_decompose);
}

}  // namespace tp
