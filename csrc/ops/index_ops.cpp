// The indexing family: advanced indexing (index, index_put[_]), index_select,
// gather, scatter[_add][_], index_add[_], masked_fill[_], masked_select,
// nonzero, where(condition), embedding, one_hot.
//
// Index tensors are int64 here; bool masks are expanded to integer indices
// with nonzero() by the caller (the C++ API and the Python frontend), so every
// operator's output shape follows from its inputs' shapes, except nonzero's.
// Every index is checked before any element moves: an out-of-range index
// raises IndexError naming the operator, the index and the size.
#include <algorithm>
#include <limits>
#include <cstring>

#include "ops/byte_move.h"
#include "ops/derivative_util.h"
#include "ops/dispatch.h"
#include "ops/families.h"
#include "ops/kernel_util.h"
#include "ops/registry.h"
#include "ops/tensor_iterator.h"

namespace tp {
namespace {

// Advanced indexing accepts negative indices (counted from the end); the
// dim-wise operators (index_select, gather, scatter, embedding) do not.
int64_t checked_index(int64_t v, int64_t size, int64_t dim, const char* op, bool allow_negative = true) {
  TP_CHECK(v >= (allow_negative ? -size : 0) && v < size, IndexError, op, ": index ", v, " is out of bounds for dimension ", dim,
           " with size ", size);
  return v < 0 ? v + size : v;
}

char* bytes(const Tensor& t) { return static_cast<char*>(t.data()); }

// Checks n indices at once: a min/max pass (vectorized) and, only on failure,
// a search for the first bad index to name it.
void check_indices(const int64_t* v, int64_t n, int64_t size, int64_t dim, const char* op, bool allow_negative) {
  int64_t lo = 0, hi = -1;
  for (int64_t k = 0; k < n; ++k) {
    lo = v[k] < lo ? v[k] : lo;
    hi = v[k] > hi ? v[k] : hi;
  }
  if (n == 0 || (lo >= (allow_negative ? -size : 0) && hi < size)) return;
  for (int64_t k = 0; k < n; ++k) checked_index(v[k], size, dim, op, allow_negative);
}

// ---------------------------------------------------------------------------
// Advanced indexing geometry. `idx[d]` indexes dim d of self (undefined: the
// whole dim). The defined index tensors broadcast to one shape B. The result
// has B in place of the indexed dims when those are adjacent, else B first
// followed by the other dims (the NumPy/PyTorch rule).
struct AdvGeom {
  Shape out_sizes, b_sizes;
  std::vector<int64_t> indexed, kept;  // dims of self
  int64_t b_pos = 0;                   // where B starts in the result
};

AdvGeom adv_geom(const Shape& self, const std::vector<TensorMeta>& idx, const char* op) {
  TP_CHECK(idx.size() <= self.size(), IndexError, op, ": too many indices for tensor of dimension ", self.size(),
           " (got ", idx.size(), ")");
  AdvGeom g;
  bool first = true;
  for (size_t d = 0; d < self.size(); ++d) {
    if (d >= idx.size() || !idx[d].defined) {
      g.kept.push_back(static_cast<int64_t>(d));
      continue;
    }
    TP_CHECK(is_index_dtype(idx[d].dtype), TypeError, op,
             ": tensors used as indices must be long, int or byte tensors (bool masks go through nonzero), got ",
             dtype_name(idx[d].dtype), " for dimension ", d);
    g.b_sizes = first ? idx[d].sizes : broadcast_shapes(g.b_sizes, idx[d].sizes, op);
    first = false;
    g.indexed.push_back(static_cast<int64_t>(d));
  }
  TP_CHECK(!g.indexed.empty(), ValueError, op, ": expected at least one index tensor");
  const bool adjacent = g.indexed.back() - g.indexed.front() + 1 == static_cast<int64_t>(g.indexed.size());
  g.b_pos = adjacent ? g.indexed.front() : 0;
  for (int64_t d : g.kept)
    if (adjacent && d < g.b_pos) g.out_sizes.push_back(self[d]);
  g.out_sizes.insert(g.out_sizes.end(), g.b_sizes.begin(), g.b_sizes.end());
  for (int64_t d : g.kept)
    if (!adjacent || d > g.b_pos) g.out_sizes.push_back(self[d]);
  return g;
}

std::vector<TensorMeta> metas_of(const std::vector<Tensor>& ts, size_t begin, size_t end) {
  std::vector<TensorMeta> m;
  for (size_t i = begin; i < end; ++i) {
    if (ts[i].defined()) {
      m.push_back(ts[i].meta());
    } else {
      TensorMeta u;
      u.defined = false;
      m.push_back(u);
    }
  }
  return m;
}

// Element offset into self (from its data pointer) of every position of B.
std::vector<int64_t> adv_offsets(const Tensor& self, const std::vector<Tensor>& idx, const AdvGeom& g,
                                 const char* op, bool allow_negative = true) {
  const int64_t nb = numel(g.b_sizes);
  std::vector<int64_t> off(static_cast<size_t>(nb), 0);
  for (int64_t d : g.indexed) {
    Tensor i64 = index_as_int64(idx[d], op);
    Tensor b = contiguous_bits(i64.as_strided(g.b_sizes, broadcast_strides(i64.sizes(), i64.strides(), g.b_sizes),
                                              i64.offset()));
    const int64_t* v = b.data_as<int64_t>();
    const int64_t size = self.sizes()[d], stride = self.strides()[d];
    check_indices(v, nb, size, d, op, allow_negative);
    for (int64_t k = 0; k < nb; ++k) off[k] += (v[k] < 0 ? v[k] + size : v[k]) * stride;
  }
  return off;
}

// An advanced-indexing move seen as rows: the result is [pre, B, post] (pre:
// the kept dims before B, empty when B goes first), and row (p, b) moves the
// post-block between self at pre_off(p) + off[b] and the result-shaped tensor
// `dense`. Walking p outermost keeps both sides in memory order.
struct AdvLayout {
  Shape pre_sizes, pre_self, pre_dense, post_sizes, post_self, post_dense;
  int64_t b_dense = 0;  // stride of the flattened B dim in dense
};

// nullopt when dense's B dims cannot be walked as one flat dim (then it needs a contiguous copy).
std::optional<AdvLayout> adv_layout(const AdvGeom& g, const Tensor& self, const Shape& dense_strides) {
  AdvLayout l;
  const int64_t nbd = static_cast<int64_t>(g.b_sizes.size());
  // The B dims of size > 1 must nest like one flat dim; the flat stride is the innermost one's.
  int64_t inner = -1;
  for (int64_t i = nbd - 1; i >= 0; --i) {
    if (g.b_sizes[i] == 1) continue;
    const int64_t st = dense_strides[g.b_pos + i];
    if (inner < 0) l.b_dense = st;
    else if (st != dense_strides[g.b_pos + inner] * g.b_sizes[inner]) return std::nullopt;
    inner = i;
  }
  int64_t pos = 0;
  for (int64_t d : g.kept) {
    if (pos == g.b_pos) pos += nbd;
    const bool pre = pos < g.b_pos;
    (pre ? l.pre_sizes : l.post_sizes).push_back(self.sizes()[d]);
    (pre ? l.pre_self : l.post_self).push_back(self.strides()[d]);
    (pre ? l.pre_dense : l.post_dense).push_back(dense_strides[pos++]);
  }
  return l;
}

// Moves elements between self (at the indexed positions) and `dense` (any
// strides over the result shape; stride 0 broadcasts a value). to_dense:
// gather (index); else scatter (index_put_).
void adv_move(const Tensor& self, const AdvGeom& g, const std::vector<int64_t>& off, const Tensor& dense_in,
              bool to_dense) {
  const int64_t item = itemsize(self.dtype()), nb = static_cast<int64_t>(off.size());
  if (nb == 0 || numel(g.out_sizes) == 0) return;
  Tensor dense = dense_in;
  std::optional<AdvLayout> ol = adv_layout(g, self, dense.strides());
  if (!ol) {
    TP_CHECK(!to_dense, Error, "internal: index output is not contiguous");
    dense = contiguous_bits(dense);
    ol = adv_layout(g, self, dense.strides());
  }
  const AdvLayout& l = *ol;
  const int64_t npre = numel(l.pre_sizes), block = numel(l.post_sizes), rows = npre * nb;
  const int64_t npd = static_cast<int64_t>(l.pre_sizes.size());
  char* sbase = bytes(self);
  char* dbase = bytes(dense);
  // Element offsets of pre position p in self and in dense.
  auto pre_offsets = [&](int64_t p, int64_t& so, int64_t& dof) {
    so = 0, dof = 0;
    for (int64_t d = npd - 1; d >= 0; --d) {
      const int64_t i = p % l.pre_sizes[d];
      p /= l.pre_sizes[d];
      so += i * l.pre_self[d];
      dof += i * l.pre_dense[d];
    }
  };
  dispatch_itemsize(item, "index", [&]<class U>() {
    auto rows_loop = [&](int64_t r0, int64_t r1, auto&& move_block) {
      int64_t p = r0 / nb, b = r0 % nb, so = 0, dof = 0;
      pre_offsets(p, so, dof);
      for (int64_t r = r0; r < r1; ++r) {
        move_block(sbase + (so + off[b]) * item, dbase + (dof + b * l.b_dense) * item);
        if (++b == nb && r + 1 < r1) {
          b = 0;
          pre_offsets(++p, so, dof);
        }
      }
    };
    if (block == 1) {  // one element per row: a plain gather/scatter loop
      parallel_for(0, rows, kGrainSize, [&](int64_t r0, int64_t r1) {
        rows_loop(r0, r1, [&](char* sp, char* dp) {
          if (to_dense) std::memcpy(dp, sp, sizeof(U));
          else std::memcpy(sp, dp, sizeof(U));
        });
      });
      return;
    }
    Shape sb = l.post_self, db = l.post_dense;
    for (auto& v : sb) v *= item;
    for (auto& v : db) v *= item;
    // One iterator over the post dims, reused for every row with shifted bases.
    TensorIterator it(l.post_sizes, to_dense ? std::vector<Shape>{db, sb} : std::vector<Shape>{sb, db},
                      to_dense ? std::vector<char*>{dbase, sbase} : std::vector<char*>{sbase, dbase});
    parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / block), [&](int64_t r0, int64_t r1) {
      rows_loop(r0, r1, [&](char* sp, char* dp) {
        const int64_t shift0 = to_dense ? dp - dbase : sp - sbase, shift1 = to_dense ? sp - sbase : dp - dbase;
        it.serial_for_each(
            [&](char** d, const int64_t* s, int64_t n) {
              char* q[2] = {d[0] + shift0, d[1] + shift1};
              move_row<U>(q, s, n);
            },
            0, it.numel());
      });
    });
  });
}

// Adds alpha * dense into self at the indexed positions, in order (repeated
// indices accumulate), computing in the compute dtype.
template <class T>
void adv_accumulate_typed(const Tensor& self, const AdvGeom& g, const std::vector<int64_t>& off,
                          const Tensor& dense, T alpha) {
  const AdvLayout l = *adv_layout(g, self, dense.strides());  // dense is contiguous
  const int64_t nb = static_cast<int64_t>(off.size()), npre = numel(l.pre_sizes);
  const int64_t npd = static_cast<int64_t>(l.pre_sizes.size());
  if (nb == 0 || numel(g.out_sizes) == 0) return;
  Shape sb = l.post_self, db = l.post_dense;
  for (auto& v : sb) v *= sizeof(T);
  for (auto& v : db) v *= sizeof(T);
  TensorIterator it(l.post_sizes, {sb, db}, {bytes(self), bytes(dense)});
  const auto add_row = [alpha](char** d, const int64_t* st, int64_t n) {
    char* o = d[0];
    const char* v = d[1];
    const int64_t so = st[0], sv = st[1];
    for (int64_t i = 0; i < n; ++i) {
      T& x = *reinterpret_cast<T*>(o + i * so);
      const T y = *reinterpret_cast<const T*>(v + i * sv);
      if constexpr (std::is_same_v<T, bool>) x = x || (alpha && y);
      else x = static_cast<T>(x + alpha * y);
    }
  };
  // In order, on one thread: repeated indices add up.
  for (int64_t p = 0; p < npre; ++p) {
    int64_t so = 0, dof = 0, rest = p;
    for (int64_t d = npd - 1; d >= 0; --d) {
      const int64_t i = rest % l.pre_sizes[d];
      rest /= l.pre_sizes[d];
      so += i * l.pre_self[d];
      dof += i * l.pre_dense[d];
    }
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t s_shift = (so + off[b]) * static_cast<int64_t>(sizeof(T));
      const int64_t d_shift = (dof + b * l.b_dense) * static_cast<int64_t>(sizeof(T));
      it.serial_for_each(
          [&](char** d, const int64_t* st, int64_t n) {
            char* q[2] = {d[0] + s_shift, d[1] + d_shift};
            add_row(q, st, n);
          },
          0, it.numel());
    }
  }
}

// Adds alpha * values (broadcast to the indexing result) into self at the
// indexed positions. A narrow dtype accumulates in its compute dtype and is
// stored back.
void adv_accumulate(const Tensor& self, const std::vector<Tensor>& idx, const AdvGeom& g, const Tensor& values,
                    const Scalar& alpha, const char* op, bool allow_negative = true) {
  const DType cd = compute_dtype(self.dtype());
  Tensor target = cd == self.dtype() ? self : convert(self, cd);
  std::vector<int64_t> off = adv_offsets(target, idx, g, op, allow_negative);
  Tensor dense = Tensor::empty(g.out_sizes, cd);
  copy_into(dense, values);
  TP_DISPATCH_ALL(cd, op, [&]<class T>() {
    adv_accumulate_typed<T>(target, g, off, dense, alpha.is_float() ? cast_value<T>(alpha.to_double()) : alpha.to<T>());
  });
  if (!target.impl_ptr() || target.impl() != self.impl()) copy_into(self, target);
}

// The values written by index_put_, converted to self's dtype and read as the
// indexing result's shape (a broadcast view: no copy of an expanded value).
Tensor dense_values(const Tensor& self, const Tensor& values, const AdvGeom& g, DType dtype, const char* op) {
  Shape b = broadcast_shapes(g.out_sizes, values.sizes(), op);
  TP_CHECK(b == g.out_sizes, ValueError, op, ": shape mismatch: value tensor of shape ", shape_str(values.sizes()),
           " cannot be broadcast to indexing result of shape ", shape_str(g.out_sizes));
  Tensor v = convert(values, dtype);
  if (may_overlap(v, self)) v = contiguous_copy(v);  // read before any element of self is written
  return v.as_strided(g.out_sizes, broadcast_strides(v.sizes(), v.strides(), g.out_sizes), v.offset());
}

// ---- index ----
// Zeros (ones) of `sizes` and `dtype` on like's device, for a gradient that starts from them.
Tensor grad_zeros(const Tensor& like, const Shape& sizes, DType dtype) {
  return ops::full_on(like, sizes, Scalar(int64_t{0}), dtype);
}
Tensor grad_ones(const Tensor& like, const Shape& sizes, DType dtype) {
  return ops::full_on(like, sizes, Scalar(int64_t{1}), dtype);
}

std::vector<TensorMeta> index_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  std::vector<TensorMeta> idx(in.begin() + 1, in.end());
  AdvGeom g = adv_geom(in[0].sizes, idx, op.name);
  return {TensorMeta::contiguous(g.out_sizes, in[0].dtype)};
}

std::vector<Tensor> index_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs&,
                              const std::vector<TensorMeta>& om) {
  std::vector<Tensor> idx(in.begin() + 1, in.end());
  AdvGeom g = adv_geom(in[0].sizes(), metas_of(in, 1, in.size()), op.name);
  std::vector<int64_t> off = adv_offsets(in[0], idx, g, op.name);
  Tensor out = alloc_out(om[0]);
  adv_move(in[0], g, off, out, /*to_dense=*/true);
  return {out};
}

std::vector<Tensor> index_backward(const BackwardArgs& a) {
  std::vector<Tensor> grads(a.inputs.size());
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return grads;
  std::vector<Tensor> idx(a.inputs.begin() + 1, a.inputs.end());
  grads[0] = ops::index_put(grad_zeros(a.inputs[0], a.inputs[0].sizes(), g.dtype()), idx, g, /*accumulate=*/true);
  return grads;
}

// ---- index_put / index_put_ ----
std::vector<TensorMeta> index_put_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  TP_CHECK(in.size() >= 2, ValueError, op.name, ": expected self, indices and values");
  std::vector<TensorMeta> idx(in.begin() + 1, in.end() - 1);
  AdvGeom g = adv_geom(in[0].sizes, idx, op.name);
  Shape b = broadcast_shapes(g.out_sizes, in.back().sizes, op.name);
  TP_CHECK(b == g.out_sizes, ValueError, op.name, ": shape mismatch: value tensor of shape ",
           shape_str(in.back().sizes), " cannot be broadcast to indexing result of shape ", shape_str(g.out_sizes));
  if (op.has(kInplace)) {
    check_no_internal_overlap(in[0].sizes, in[0].strides, op.name);
    return {in[0]};
  }
  return {TensorMeta::contiguous(in[0].sizes, in[0].dtype)};
}

void index_put_into(const Tensor& self, const std::vector<Tensor>& in, bool accumulate, const char* op) {
  std::vector<Tensor> idx(in.begin() + 1, in.end() - 1);
  AdvGeom g = adv_geom(self.sizes(), metas_of(in, 1, in.size() - 1), op);
  Tensor dense = dense_values(self, in.back(), g, accumulate ? in.back().dtype() : self.dtype(), op);
  if (accumulate) {
    adv_accumulate(self, idx, g, dense, Scalar(int64_t{1}), op);
  } else {
    adv_move(self, g, adv_offsets(self, idx, g, op), dense, /*to_dense=*/false);
  }
}

std::vector<Tensor> index_put_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                  const std::vector<TensorMeta>& om) {
  const bool acc = attrs.get_or<bool>("accumulate", false);
  if (op.has(kInplace)) {
    index_put_into(in[0], in, acc, op.name);
    return {in[0]};
  }
  Tensor out = alloc_out(om[0]);
  move_elements(out, in[0]);
  index_put_into(out, in, acc, op.name);
  return {out};
}

std::vector<Tensor> index_put_backward(const BackwardArgs& a) {
  std::vector<Tensor> grads(a.inputs.size());
  const Tensor& g = ops::grad_out(a);
  if (!g.defined()) return grads;
  std::vector<Tensor> idx(a.inputs.begin() + 1, a.inputs.end() - 1);
  const bool acc = a.attrs.get_or<bool>("accumulate", false);
  if (a.needs_grad[0])
    grads[0] = acc ? g : ops::index_put(g, idx, Tensor::scalar_tensor(Scalar(0.0), g.dtype()), false);
  if (a.needs_grad.back()) grads.back() = ops::reduce_grad(ops::index(g, idx), a.inputs.back());
  return grads;
}

// ---- index_select / index_add: advanced indexing along one dim ----
// self and index as the general machinery sees them: a 0-d self reads as [1],
// the index as a vector.
struct OneDim {
  Tensor self;
  std::vector<Tensor> idx;
  int64_t dim;
};

OneDim one_dim(const Tensor& self, int64_t dim, const Tensor& index, const char* op) {
  TP_CHECK(index.dim() <= 1, ValueError, op, ": index is supposed to be a vector, got shape ",
           shape_str(index.sizes()));
  OneDim r{self.dim() == 0 ? self.as_strided({1}, {1}, self.offset()) : self, {}, 0};
  r.dim = wrap_dim(dim, r.self.dim(), op);
  r.idx.resize(static_cast<size_t>(r.dim) + 1);
  r.idx[r.dim] = index.dim() == 0 ? index.as_strided({1}, {1}, index.offset()) : index;
  return r;
}

Shape one_dim_sizes(const Shape& self, int64_t dim, const TensorMeta& index, const char* op) {
  TP_CHECK(index.sizes.size() <= 1, ValueError, op, ": index is supposed to be a vector, got shape ",
           shape_str(index.sizes));
  TP_CHECK(is_index_dtype(index.dtype), TypeError, op, ": index must be an integer tensor, got ",
           dtype_name(index.dtype));
  Shape s = self.empty() ? Shape{1} : self;
  s[wrap_dim(dim, static_cast<int64_t>(s.size()), op)] = numel(index.sizes);
  return self.empty() ? Shape{} : s;
}

std::vector<TensorMeta> index_select_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  Shape s = one_dim_sizes(in[0].sizes, attrs.get_int("dim"), in[1], op.name);
  if (in[0].sizes.empty() && numel(in[1].sizes) != 1) s = {numel(in[1].sizes)};
  return {TensorMeta::contiguous(s, in[0].dtype)};
}

std::vector<Tensor> index_select_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                     const std::vector<TensorMeta>& om) {
  OneDim r = one_dim(in[0], attrs.get_int("dim"), in[1], op.name);
  std::vector<TensorMeta> metas = metas_of(r.idx, 0, r.idx.size());
  AdvGeom g = adv_geom(r.self.sizes(), metas, op.name);
  std::vector<int64_t> off = adv_offsets(r.self, r.idx, g, op.name, false);
  Tensor out = alloc_out(om[0]);
  Tensor dense = out.as_strided(g.out_sizes, contiguous_strides(g.out_sizes), out.offset());
  adv_move(r.self, g, off, dense, true);
  return {out};
}

std::vector<Tensor> index_select_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor(), Tensor()};
  const Tensor& x = a.inputs[0];
  Tensor src = x.dim() == 0 ? ops::reshape(g, {-1}) : g;
  Tensor z = grad_zeros(x, x.dim() == 0 ? Shape{1} : x.sizes(), g.dtype());
  Tensor r = ops::index_add(z, a.attrs.get_int("dim"), ops::reshape(a.inputs[1], {-1}), src);
  return {x.dim() == 0 ? ops::reshape(r, {}) : r, Tensor()};
}

std::vector<TensorMeta> index_add_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  Shape want = one_dim_sizes(in[0].sizes, attrs.get_int("dim"), in[1], op.name);
  TP_CHECK(in[2].sizes == want || (in[0].sizes.empty() && numel(in[2].sizes) == numel(in[1].sizes)), ValueError,
           op.name, ": source of shape ", shape_str(in[2].sizes), " does not match self of shape ",
           shape_str(in[0].sizes), " with dimension ", attrs.get_int("dim"), " replaced by the index length ",
           numel(in[1].sizes), " (expected ", shape_str(want), ")");
  if (op.has(kInplace)) {
    check_no_internal_overlap(in[0].sizes, in[0].strides, op.name);
    return {in[0]};
  }
  return {TensorMeta::contiguous(in[0].sizes, in[0].dtype)};
}

void index_add_into(const Tensor& self, const std::vector<Tensor>& in, const Attrs& attrs, const char* op) {
  OneDim r = one_dim(self, attrs.get_int("dim"), in[1], op);
  AdvGeom g = adv_geom(r.self.sizes(), metas_of(r.idx, 0, r.idx.size()), op);
  Tensor src = contiguous_bits(in[2]);
  src = src.as_strided(g.out_sizes, contiguous_strides(g.out_sizes), src.offset());
  adv_accumulate(r.self, r.idx, g, src, attrs.get_scalar("alpha"), op, /*allow_negative=*/false);
}

std::vector<Tensor> index_add_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                  const std::vector<TensorMeta>& om) {
  if (op.has(kInplace)) {
    index_add_into(in[0], in, attrs, op.name);
    return {in[0]};
  }
  Tensor out = alloc_out(om[0]);
  move_elements(out, in[0]);
  index_add_into(out, in, attrs, op.name);
  return {out};
}

std::vector<Tensor> index_add_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  std::vector<Tensor> grads(3);
  if (!g.defined()) return grads;
  if (a.needs_grad[0]) grads[0] = g;
  if (a.needs_grad[2]) {
    const Tensor& src = a.inputs[2];
    Tensor sel = ops::index_select(g, a.attrs.get_int("dim"), a.inputs[1]);
    sel = ops::mul(ops::reshape(sel, src.sizes()), ops::scalar(a.attrs.get_scalar("alpha")));
    grads[2] = ops::reduce_grad(sel, src);
  }
  return grads;
}

// ---------------------------------------------------------------------------
// gather / scatter: the index tensor names, for each of its elements, the
// position along `dim`; the other coordinates are the element's own.
Tensor as_1d_if_0d(const Tensor& t) { return t.dim() == 0 ? t.as_strided({1}, {1}, t.offset()) : t; }

void check_dim_index_shapes(const Shape& self, const Shape& index, const Shape* src, int64_t dim, const char* op) {
  if (numel(index) == 0) return;  // an empty index reads or writes nothing, whatever its rank (as PyTorch)
  const Shape s = self.empty() ? Shape{1} : self, i = index.empty() ? Shape{1} : index;
  TP_CHECK(s.size() == i.size(), ValueError, op, ": index tensor must have the same number of dimensions as the ",
           "input tensor: got index of shape ", shape_str(index), " and input of shape ", shape_str(self));
  for (size_t d = 0; d < s.size(); ++d) {
    TP_CHECK(static_cast<int64_t>(d) == dim || i[d] <= s[d], ValueError, op, ": size does not match at dimension ",
             d, ": expected index ", shape_str(index), " to be no larger than self ", shape_str(self),
             " apart from dimension ", dim);
    if (src) {
      const Shape sr = src->empty() ? Shape{1} : *src;
      TP_CHECK(sr.size() == i.size() && i[d] <= sr[d], ValueError, op, ": expected index ", shape_str(index),
               " to be no larger than src ", shape_str(*src), " in every dimension");
    }
  }
}

// The index as int64 (0-d read as [1]) with every value checked against `size`.
Tensor checked_dim_index(const Tensor& index, int64_t size, int64_t dim, const char* op) {
  Tensor i = as_1d_if_0d(index_as_int64(index, op));
  const int64_t* v = i.data_as<int64_t>();
  check_indices(v, i.numel(), size, dim, op, /*allow_negative=*/false);
  return i;
}

Shape byte_strides(const Tensor& t) {
  Shape s = t.strides();
  for (auto& v : s) v *= itemsize(t.dtype());
  return s;
}

std::vector<TensorMeta> gather_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const int64_t dim = wrap_dim(attrs.get_int("dim"), std::max<int64_t>(1, in[0].sizes.size()), op.name);
  TP_CHECK(is_index_dtype(in[1].dtype), TypeError, op.name, ": expected an integer index tensor, got ",
           dtype_name(in[1].dtype));
  check_dim_index_shapes(in[0].sizes, in[1].sizes, nullptr, dim, op.name);
  return {TensorMeta::contiguous(in[1].sizes, in[0].dtype)};
}

std::vector<Tensor> gather_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                               const std::vector<TensorMeta>& om) {
  Tensor result = alloc_out(om[0]);
  if (result.numel() == 0) return {result};
  Tensor self = as_1d_if_0d(in[0]);
  const int64_t dim = wrap_dim(attrs.get_int("dim"), self.dim(), op.name);
  Tensor idx = checked_dim_index(in[1], self.sizes()[dim], dim, op.name);
  Tensor out = as_1d_if_0d(result);
  const int64_t item = itemsize(self.dtype()), step = self.strides()[dim] * item;
  Shape ss = byte_strides(self);
  ss[dim] = 0;
  TensorIterator it(idx.sizes(), {byte_strides(out), byte_strides(idx), ss}, {bytes(out), bytes(idx), bytes(self)});
  dispatch_itemsize(item, op.name, [&]<class U>() {
    it.for_each([step](char** p, const int64_t* s, int64_t n) {
      // Locals: stores through char* could alias p and s, which would reload them every element.
      char* o = p[0];
      const char* ix = p[1];
      const char* src = p[2];
      const int64_t so = s[0], si = s[1], ss = s[2];
      for (int64_t i = 0; i < n; ++i) {
        const int64_t v = *reinterpret_cast<const int64_t*>(ix + i * si);
        std::memcpy(o + i * so, src + i * ss + v * step, sizeof(U));
      }
    });
  });
  return {result};
}

std::vector<Tensor> gather_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor(), Tensor()};
  const Tensor& x = a.inputs[0];
  return {ops::scatter_add(grad_zeros(x, x.sizes(), g.dtype()), a.attrs.get_int("dim"), a.inputs[1], g),
          Tensor()};
}

enum class Reduce { None, Add, Multiply };

Reduce reduce_kind(const Attrs& attrs, const char* op) {
  if (attrs.is_none("reduce")) return Reduce::None;
  const std::string& r = attrs.get_str("reduce");
  if (r == "add" || r == "sum") return Reduce::Add;
  if (r == "multiply" || r == "prod") return Reduce::Multiply;
  throw ValueError(str(op, ": reduce argument must be either 'add' or 'multiply', got '", r, "'"));
}

// dst[..., index[e], ...] (op)= src[e] for every element e of index.
void scatter_into(const Tensor& dst_in, int64_t dim_attr, const Tensor& index, const Tensor& src_in, bool src_is_value,
                  Reduce reduce, const char* op) {
  Tensor dst = as_1d_if_0d(dst_in);
  const int64_t dim = wrap_dim(dim_attr, dst.dim(), op);
  Tensor idx = checked_dim_index(index, dst.sizes()[dim], dim, op);
  if (idx.numel() == 0) return;
  const DType cd = reduce == Reduce::None ? dst.dtype() : compute_dtype(dst.dtype());
  Tensor target = cd == dst.dtype() ? dst : convert(dst, cd);
  Tensor src = convert(src_in, cd);
  src = as_1d_if_0d(src);
  Shape src_strides = src_is_value ? Shape(idx.sizes().size(), 0) : byte_strides(src);
  const int64_t item = itemsize(cd), step = target.strides()[dim] * item;
  Shape ts = byte_strides(target);
  ts[dim] = 0;
  TensorIterator it(idx.sizes(), {ts, byte_strides(idx), src_strides}, {bytes(target), bytes(idx), bytes(src)});
  if (reduce == Reduce::None) {
    dispatch_itemsize(item, op, [&]<class U>() {
      it.for_each([step](char** p, const int64_t* s, int64_t n) {
        char* o = p[0];
        const char* ix = p[1];
        const char* src = p[2];
        const int64_t so = s[0], si = s[1], ss = s[2];
        for (int64_t i = 0; i < n; ++i) {
          const int64_t v = *reinterpret_cast<const int64_t*>(ix + i * si);
          std::memcpy(o + i * so + v * step, src + i * ss, sizeof(U));
        }
      });
    });
  } else {
    TP_DISPATCH_ALL(cd, op, [&]<class T>() {
      // Serial: several elements may reduce into the same position.
      it.serial_for_each(
          [step, reduce](char** p, const int64_t* s, int64_t n) {
            for (int64_t i = 0; i < n; ++i) {
              const int64_t v = *reinterpret_cast<const int64_t*>(p[1] + i * s[1]);
              T* o = reinterpret_cast<T*>(p[0] + i * s[0] + v * step);
              const T x = *reinterpret_cast<const T*>(p[2] + i * s[2]);
              if constexpr (std::is_same_v<T, bool>) *o = reduce == Reduce::Add ? (*o || x) : (*o && x);
              else *o = reduce == Reduce::Add ? static_cast<T>(*o + x) : static_cast<T>(*o * x);
            }
          },
          0, it.numel());
    });
  }
  if (target.impl() != dst.impl()) copy_into(dst, target);
}

std::vector<TensorMeta> scatter_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const int64_t dim = wrap_dim(attrs.get_int("dim"), std::max<int64_t>(1, in[0].sizes.size()), op.name);
  TP_CHECK(is_index_dtype(in[1].dtype), TypeError, op.name, ": expected an integer index tensor, got ",
           dtype_name(in[1].dtype));
  const bool has_src = in.size() > 2 && !in[2].sizes.empty();  // a 0-d src is a fill value
  check_dim_index_shapes(in[0].sizes, in[1].sizes, has_src ? &in[2].sizes : nullptr, dim, op.name);
  if (attrs.has("reduce")) reduce_kind(attrs, op.name);
  if (op.has(kInplace)) {
    check_no_internal_overlap(in[0].sizes, in[0].strides, op.name);
    return {in[0]};
  }
  return {TensorMeta::contiguous(in[0].sizes, in[0].dtype)};
}

template <bool kAdd>
std::vector<Tensor> scatter_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                const std::vector<TensorMeta>& om) {
  Tensor dst = in[0];
  if (!op.has(kInplace)) {
    dst = alloc_out(om[0]);
    move_elements(dst, in[0]);
  }
  const bool has_src = in.size() > 2;
  Tensor src = has_src ? in[2] : scalar_of(attrs.get_scalar("value"), in[0].dtype());
  const Reduce r = kAdd ? Reduce::Add : reduce_kind(attrs, op.name);
  scatter_into(dst, attrs.get_int("dim"), in[1], src, src.dim() == 0, r, op.name);
  return {dst};
}

// The gradient of src: the output gradient gathered at the scattered positions,
// zero where src was not read (src may be larger than index).
Tensor scatter_src_grad(const Tensor& g, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor picked = ops::gather(g, dim, index);
  if (src.dim() == 0) return ops::sum(picked);  // a fill value reaches every scattered position
  if (index.sizes() == src.sizes()) return picked;
  if (g.device().kind != Device::Kind::CPU) {
    // A device gradient (no strided copy_ into a device view): each dim where
    // src is larger takes picked into device zeros with slice_scatter, dim by
    // dim (dims before d already have src's sizes, dims after d index's).
    static const OpDef& slice_scatter = get_op("slice_scatter");
    Tensor r = picked;
    for (int64_t d = 0; d < index.dim(); ++d) {
      if (index.sizes()[d] == src.sizes()[d]) continue;
      Tensor like = src;
      for (int64_t e = d + 1; e < index.dim(); ++e) like = ops::narrow(like, e, 0, index.sizes()[e]);
      Attrs at = {{"dim", d}, {"start", int64_t{0}}, {"end", index.sizes()[d]}, {"step", int64_t{1}}};
      r = call_op1(slice_scatter, {grad_zeros(like, like.sizes(), g.dtype()), r}, at);
    }
    return r;
  }
  Tensor z = ops::zeros(src.sizes(), g.dtype());
  Tensor part = z;
  for (int64_t d = 0; d < index.dim(); ++d) part = ops::narrow(part, d, 0, index.sizes()[d]);
  ops::copy_(part, picked);
  return z;
}

template <bool kAdd>
std::vector<Tensor> scatter_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  std::vector<Tensor> grads(a.inputs.size());
  if (!g.defined()) return grads;
  const int64_t dim = a.attrs.get_int("dim");
  const Reduce r = kAdd ? Reduce::Add : reduce_kind(a.attrs, "scatter");
  TP_CHECK(r != Reduce::Multiply, Error, "scatter: the derivative of reduce='multiply' is not implemented");
  if (a.needs_grad[0])
    grads[0] = r == Reduce::Add ? g : ops::scatter(g, dim, a.inputs[1], Scalar(0.0));
  if (a.inputs.size() > 2 && a.needs_grad[2]) grads[2] = scatter_src_grad(g, dim, a.inputs[1], a.inputs[2]);
  return grads;
}

// ---------------------------------------------------------------------------
// scatter_reduce: sum / prod / mean / amax / amin of every src element that
// lands on a position, with or without the position's own value.
enum class RKind { Sum, Prod, Mean, Amax, Amin };

RKind rkind(const Attrs& attrs, const char* op) {
  const std::string& r = attrs.get_str("reduce");
  if (r == "sum") return RKind::Sum;
  if (r == "prod") return RKind::Prod;
  if (r == "mean") return RKind::Mean;
  if (r == "amax") return RKind::Amax;
  if (r == "amin") return RKind::Amin;
  throw ValueError(str(op, ": reduce argument must be one of sum, prod, mean, amax, amin, got '", r, "'"));
}

std::vector<TensorMeta> scatter_reduce_infer(const OpDef& op, const std::vector<TensorMeta>& in,
                                             const Attrs& attrs) {
  const int64_t dim = wrap_dim(attrs.get_int("dim"), std::max<int64_t>(1, in[0].sizes.size()), op.name);
  TP_CHECK(is_index_dtype(in[1].dtype), TypeError, op.name, ": expected an integer index tensor, got ",
           dtype_name(in[1].dtype));
  check_dim_index_shapes(in[0].sizes, in[1].sizes, &in[2].sizes, dim, op.name);
  rkind(attrs, op.name);
  return {TensorMeta::contiguous(in[0].sizes, in[0].dtype)};
}

template <class T>
void scatter_reduce_typed(const Tensor& out, const TensorIterator& it, int64_t step, RKind k, bool include_self) {
  T* base = out.data_as<T>();
  std::vector<int64_t> count(static_cast<size_t>(out.numel()), include_self ? 1 : 0);
  auto position = [&](char** p, const int64_t* s, int64_t i) {
    const int64_t v = *reinterpret_cast<const int64_t*>(p[1] + i * s[1]);
    return (p[0] + i * s[0] + v * step - reinterpret_cast<char*>(base)) / static_cast<int64_t>(sizeof(T));
  };
  if (!include_self) {  // positions that receive a value start from the reduction's identity
    T identity = k == RKind::Prod ? T(1) : T(0);
    if (k == RKind::Amax) identity = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                                         : std::numeric_limits<T>::lowest();
    if (k == RKind::Amin) identity = std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                                         : std::numeric_limits<T>::max();
    it.serial_for_each([&](char** p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) base[position(p, s, i)] = identity;
    }, 0, it.numel());
  }
  it.serial_for_each([&](char** p, const int64_t* s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t pos = position(p, s, i);
      const T x = *reinterpret_cast<const T*>(p[2] + i * s[2]);
      T& o = base[pos];
      if constexpr (std::is_same_v<T, bool>) {
        o = (k == RKind::Prod || k == RKind::Amin) ? (o && x) : (o || x);
      } else {
        switch (k) {
          case RKind::Sum: case RKind::Mean: o = static_cast<T>(o + x); break;
          case RKind::Prod: o = static_cast<T>(o * x); break;
          case RKind::Amax: o = (x > o || x != x) ? x : o; break;  // NaN propagates
          case RKind::Amin: o = (x < o || x != x) ? x : o; break;
        }
      }
      ++count[pos];
    }
  }, 0, it.numel());
  if constexpr (!std::is_same_v<T, bool>) {
    if (k == RKind::Mean)
      for (int64_t e = 0; e < out.numel(); ++e) {
        if (count[e] <= 1) continue;
        if constexpr (std::is_floating_point_v<T>) base[e] = base[e] / static_cast<T>(count[e]);
        else {  // integers: floor division
          const T c = static_cast<T>(count[e]);
          T q = base[e] / c;
          if ((base[e] % c != 0) && ((base[e] < 0) != (c < 0))) --q;
          base[e] = q;
        }
      }
  }
}

std::vector<Tensor> scatter_reduce_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                       const std::vector<TensorMeta>& om) {
  const RKind k = rkind(attrs, op.name);
  const bool include_self = attrs.get_or<bool>("include_self", true);
  const DType cd = compute_dtype(in[0].dtype());
  Tensor out = as_1d_if_0d(contiguous_copy(convert(in[0], cd)));
  const int64_t dim = wrap_dim(attrs.get_int("dim"), out.dim(), op.name);
  Tensor idx = checked_dim_index(in[1], out.sizes()[dim], dim, op.name);
  Tensor src = as_1d_if_0d(convert(in[2], cd));
  if (idx.numel() > 0) {
    const int64_t item = itemsize(cd), step = out.strides()[dim] * item;
    Shape os = byte_strides(out);
    os[dim] = 0;
    TensorIterator it(idx.sizes(), {os, byte_strides(idx), byte_strides(src)}, {bytes(out), bytes(idx), bytes(src)});
    TP_DISPATCH_ALL(cd, op.name, [&]<class T>() { scatter_reduce_typed<T>(out, it, step, k, include_self); });
  }
  Tensor result = alloc_out(om[0]);
  copy_into(result, out.as_strided(om[0].sizes, contiguous_strides(om[0].sizes), out.offset()));
  return {result};
}

// The part of src that index reads (src may be larger than index).
Tensor src_used(const Tensor& src, const Tensor& index) {
  Tensor part = src;
  for (int64_t d = 0; d < index.dim(); ++d) part = ops::narrow(part, d, 0, index.sizes()[d]);
  return part;
}

std::vector<Tensor> scatter_reduce_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  std::vector<Tensor> grads(3);
  if (!g.defined()) return grads;
  const Tensor &self = a.inputs[0], &index = a.inputs[1], &src = a.inputs[2], &out = a.outputs[0];
  const int64_t dim = a.attrs.get_int("dim");
  const RKind k = rkind(a.attrs, "scatter_reduce");
  const bool include_self = a.attrs.get_or<bool>("include_self", true);
  const Tensor used = src_used(src, index);
  // Zeros and ones on the gradient's device (the C++ factories build on the host).
  auto zeros_like = [&](const Tensor& t) { return grad_zeros(t, t.sizes(), g.dtype()); };
  auto ones_like = [&](const Tensor& t) { return grad_ones(t, t.sizes(), g.dtype()); };
  auto pad_src = [&](const Tensor& part) {  // a gradient for `used`, as one for the whole src
    if (used.sizes() == src.sizes()) return part;
    Tensor z = grad_zeros(src, src.sizes(), part.dtype());
    Tensor view = src_used(z, index);
    ops::copy_(view, part);
    return z;
  };
  Tensor zero_at_scattered = ops::scatter(g, dim, index, Scalar(0.0));  // self's values that were replaced
  if (k == RKind::Sum || k == RKind::Mean) {
    Tensor gs = g;
    if (k == RKind::Mean) {  // every contribution is divided by the position's count
      // (used has index's sizes)
      Tensor n = ops::scatter_add(include_self ? ones_like(self) : zeros_like(self), dim, index, ones_like(used));
      gs = ops::div(g, ops::maximum(n, ops::scalar(Scalar(1.0))));
    }
    if (a.needs_grad[0]) grads[0] = include_self ? gs : ops::scatter(gs, dim, index, Scalar(0.0));
    if (a.needs_grad[2]) grads[2] = pad_src(ops::gather(gs, dim, index));
    return grads;
  }
  if (k == RKind::Prod) {
    // d out / d factor = the product of the position's other factors. With zeros among them it
    // is not out / factor: it is the product of the nonzero factors when the factor is the only
    // zero, 0 when another factor is zero, and that product / factor when none is.
    auto zero = [](const Tensor& t) { return ops::eq(t, ops::scalar(Scalar(0.0))); };
    auto one_if = [](const Tensor& mask, const Tensor& t) { return ops::where(mask, ops::scalar(Scalar(1.0)), t); };
    auto count = [&](const Tensor& mask) { return ops::to_dtype(mask, g.dtype()); };
    const Tensor self_zero = zero(self), src_zero = zero(used);
    const Tensor nonzero_prod = ops::scatter_reduce(one_if(self_zero, self), dim, index, one_if(src_zero, used),
                                                    "prod", include_self);
    const Tensor nzero = ops::scatter_add(include_self ? count(self_zero) : zeros_like(self), dim,
                                          index, count(src_zero));
    auto others = [&](const Tensor& factor_zero, const Tensor& factor, const Tensor& prod, const Tensor& nzeros) {
      const Tensor no_zero = ops::eq(nzeros, ops::scalar(Scalar(0.0)));
      const Tensor one_zero = ops::eq(nzeros, ops::scalar(Scalar(1.0)));
      return ops::where(factor_zero, ops::where(one_zero, prod, ops::scalar(Scalar(0.0))),
                        ops::where(no_zero, ops::div(prod, one_if(factor_zero, factor)), ops::scalar(Scalar(0.0))));
    };
    if (a.needs_grad[0])
      grads[0] = include_self ? ops::mul(g, others(self_zero, self, nonzero_prod, nzero)) : zero_at_scattered;
    if (a.needs_grad[2])
      grads[2] = pad_src(ops::mul(ops::gather(g, dim, index),
                                  others(src_zero, used, ops::gather(nonzero_prod, dim, index),
                                         ops::gather(nzero, dim, index))));
    return grads;
  }
  // amax / amin: the gradient is shared evenly by every value equal to the result. As in PyTorch (whose
  // gradients are matched), self's value counts among the ties even with include_self=False, where it
  // receives no share: the sources' shares then sum to less than the gradient.
  Tensor self_hits = ops::to_dtype(ops::eq(self, out), g.dtype());
  Tensor src_hits = ops::to_dtype(ops::eq(used, ops::gather(out, dim, index)), g.dtype());
  Tensor ties = ops::scatter_add(self_hits, dim, index, src_hits);
  Tensor share = ops::div(g, ops::maximum(ties, ops::scalar(Scalar(1.0))));
  if (a.needs_grad[0])
    grads[0] = include_self ? ops::mul(share, self_hits) : zero_at_scattered;
  if (a.needs_grad[2]) grads[2] = pad_src(ops::mul(ops::gather(share, dim, index), src_hits));
  return grads;
}

// ---------------------------------------------------------------------------
// masked_fill
std::vector<TensorMeta> masked_fill_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  TP_CHECK(in[1].dtype == DType::Bool, TypeError, op.name, ": expected a bool mask, got mask of dtype ",
           dtype_name(in[1].dtype));
  if (in.size() == 2 && attrs.has("value")) check_scalar_fits(attrs.get<Scalar>("value"), in[0].dtype, op.name);
  if (in.size() > 2)
    TP_CHECK(in[2].sizes.empty(), ValueError, op.name,
             ": only supports a 0-dimensional value tensor, but got a value of shape ", shape_str(in[2].sizes));
  Shape b = broadcast_shapes(in[0].sizes, in[1].sizes, op.name);
  if (op.has(kInplace)) {
    TP_CHECK(b == in[0].sizes, ValueError, op.name, ": mask of shape ", shape_str(in[1].sizes),
             " does not broadcast to self of shape ", shape_str(in[0].sizes));
    check_no_internal_overlap(in[0].sizes, in[0].strides, op.name);
    return {in[0]};
  }
  return {TensorMeta::contiguous(b, in[0].dtype)};
}

void masked_fill_into(const Tensor& dst, const Tensor& mask, const Tensor& value) {
  Tensor v = convert(value, dst.dtype());
  TensorIterator it({dst, mask});
  dispatch_itemsize(itemsize(dst.dtype()), "masked_fill", [&]<class U>() {
    U bits;
    std::memcpy(&bits, v.data(), sizeof(U));
    it.for_each([bits](char** p, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i)
        if (*reinterpret_cast<const bool*>(p[1] + i * s[1])) std::memcpy(p[0] + i * s[0], &bits, sizeof(U));
    });
  });
}

std::vector<Tensor> masked_fill_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                    const std::vector<TensorMeta>& om) {
  Tensor dst = in[0];
  if (!op.has(kInplace)) {
    dst = alloc_out(om[0]);
    move_elements(dst, in[0]);
  }
  // The value (a Python number arrives as a wrapped 0-d tensor: the Tensor overload binds first) must fit
  // self's dtype, as with the Scalar overload: PyTorch raises for uint8 masked_fill(300) and tensor(300).
  if (in.size() > 2) check_scalar_fits(in[2].item(), in[0].dtype(), op.name);
  Tensor value = in.size() > 2 ? in[2] : scalar_of(attrs.get_scalar("value"), in[0].dtype());
  masked_fill_into(dst, in[1], value);
  return {dst};
}

std::vector<Tensor> masked_fill_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  std::vector<Tensor> grads(a.inputs.size());
  if (!g.defined()) return grads;
  const Tensor& mask = a.inputs[1];
  if (a.needs_grad[0]) grads[0] = ops::reduce_grad(ops::masked_fill(g, mask, Scalar(0.0)), a.inputs[0]);
  if (a.inputs.size() > 2 && a.needs_grad[2])
    grads[2] = ops::reduce_grad(ops::sum(ops::mul(g, ops::to_dtype(mask, g.dtype()))), a.inputs[2]);
  return grads;
}

// ---------------------------------------------------------------------------
// nonzero: the one operator here whose output shape depends on data.
std::vector<TensorMeta> nonzero_infer(const OpDef&, const std::vector<TensorMeta>& in, const Attrs&) {
  TensorMeta m = TensorMeta::contiguous({0, static_cast<int64_t>(in[0].sizes.size())}, DType::Int64);
  m.sizes[0] = -1;  // unknown until the data is read
  return {m};
}

std::vector<Tensor> nonzero_cpu(const OpDef&, const std::vector<Tensor>& in, const Attrs&,
                                const std::vector<TensorMeta>&) {
  Tensor x = contiguous_bits(in[0]);
  const int64_t n = x.numel(), nd = x.dim();
  const bool fp = is_floating(x.dtype());
  std::vector<int64_t> hits;
  dispatch_itemsize(itemsize(x.dtype()), "nonzero", [&]<class U>() {
    const U* p = x.data_as<U>();
    // Floating point: any bit but the sign bit set (so -0.0 counts as zero, NaN as non-zero).
    for (int64_t i = 0; i < n; ++i)
      if (fp ? static_cast<U>(p[i] << 1) != 0 : p[i] != 0) hits.push_back(i);
  });
  const int64_t count = static_cast<int64_t>(hits.size());
  Tensor out = Tensor::empty({count, nd}, DType::Int64);
  int64_t* o = out.data_as<int64_t>();
  for (int64_t k = 0; k < count; ++k) {
    int64_t rest = hits[k];
    for (int64_t d = nd - 1; d >= 0; --d) {
      o[k * nd + d] = rest % x.sizes()[d];
      rest /= x.sizes()[d];
    }
  }
  return {out};
}

// ---------------------------------------------------------------------------
// embedding: rows of weight picked by integer indices.
std::vector<TensorMeta> embedding_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta &input = in[0], &weight = in[1];
  TP_CHECK(weight.sizes.size() == 2, ValueError, op.name, ": weight must be 2-D, got shape ",
           shape_str(weight.sizes));
  TP_CHECK(is_index_dtype(input.dtype), TypeError, op.name,
           ": expected an integer tensor of indices as input, got dtype ", dtype_name(input.dtype));
  if (auto p = attrs.get_optional_int("padding_idx"))
    TP_CHECK(*p >= -weight.sizes[0] && *p < weight.sizes[0], ValueError, op.name, ": padding_idx ", *p,
             " must be within num_embeddings ", weight.sizes[0]);
  TP_CHECK(attrs.is_none("max_norm"), ValueError, op.name, ": max_norm is not supported yet");
  TP_CHECK(!attrs.get_or<bool>("scale_grad_by_freq", false), ValueError, op.name,
           ": scale_grad_by_freq is not supported yet");
  TP_CHECK(!attrs.get_or<bool>("sparse", false), ValueError, op.name, ": sparse gradients are not supported");
  Shape s = input.sizes;
  s.push_back(weight.sizes[1]);
  return {TensorMeta::contiguous(s, weight.dtype)};
}

std::vector<Tensor> embedding_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs&,
                                  const std::vector<TensorMeta>& om) {
  const Tensor& weight = in[1];
  std::vector<Tensor> idx{in[0]};
  AdvGeom g = adv_geom(weight.sizes(), metas_of(idx, 0, 1), op.name);
  std::vector<int64_t> off = adv_offsets(weight, idx, g, op.name, /*allow_negative=*/false);
  Tensor out = alloc_out(om[0]);
  adv_move(weight, g, off, out, true);
  return {out};
}

std::vector<Tensor> embedding_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[1]) return {Tensor(), Tensor()};
  const Tensor& weight = a.inputs[1];
  if (g.device().kind != Device::Kind::CPU) {
    // A device gradient: the C++ factories build on the host, so the zeros are
    // where(true, 0, weight) on the weight's device (an operator of the weight,
    // so a joint-graph trace records it), and the padding row's gradient is
    // masked out of g before the rows are accumulated.
    Tensor gg = g;
    if (auto p = a.attrs.get_optional_int("padding_idx")) {
      const int64_t row = *p < 0 ? *p + weight.sizes()[0] : *p;
      Tensor keep = ops::unsqueeze(ops::ne(a.inputs[0], ops::scalar(Scalar(row))), -1);
      gg = ops::where(keep, g, ops::scalar(Scalar(0.0)));
    }
    Tensor zeros = ops::zeros_like(weight, g.dtype());
    return {Tensor(), ops::index_put(zeros, {a.inputs[0]}, gg, /*accumulate=*/true)};
  }
  Tensor gw = ops::index_put(ops::zeros(weight.sizes(), g.dtype()), {a.inputs[0]}, g, /*accumulate=*/true);
  if (auto p = a.attrs.get_optional_int("padding_idx")) {  // the padding row never learns
    const int64_t row = *p < 0 ? *p + weight.sizes()[0] : *p;
    gw = ops::index_put(gw, {Tensor::scalar_tensor(Scalar(row), DType::Int64)},
                        Tensor::scalar_tensor(Scalar(0.0), g.dtype()), false);
  }
  return {Tensor(), gw};
}

// ---------------------------------------------------------------------------
// one_hot
std::vector<TensorMeta> one_hot_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  TP_CHECK(is_index_dtype(in[0].dtype), TypeError, op.name,
           ": one_hot is only applicable to index tensors of an integer dtype, got ", dtype_name(in[0].dtype));
  const int64_t c = attrs.get_int("num_classes");
  TP_CHECK(c >= -1, ValueError, op.name, ": num_classes should be -1 or a non-negative number, got ", c);
  Shape s = in[0].sizes;
  s.push_back(c);  // -1: known only once the data is read
  TensorMeta m = TensorMeta::contiguous(c >= 0 ? s : Shape{}, DType::Int64);
  m.sizes = s;
  return {m};
}

std::vector<Tensor> one_hot_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                const std::vector<TensorMeta>&) {
  Tensor idx = index_as_int64(in[0], op.name);
  const int64_t n = idx.numel();
  const int64_t* v = idx.data_as<int64_t>();
  int64_t c = attrs.get_int("num_classes"), lo = 0, hi = -1;
  for (int64_t i = 0; i < n; ++i) lo = std::min(lo, v[i]), hi = std::max(hi, v[i]);
  TP_CHECK(lo >= 0, ValueError, op.name, ": class values must be non-negative, got ", lo);
  if (c < 0) {
    TP_CHECK(n > 0, ValueError, op.name, ": can not infer the total number of classes from an empty tensor");
    c = hi + 1;
  }
  TP_CHECK(hi < c, ValueError, op.name, ": class values must be smaller than num_classes ", c, ", got ", hi);
  Shape s = in[0].sizes();
  s.push_back(c);
  check_sizes(s, op.name);
  Tensor out = Tensor::empty(s, DType::Int64);
  int64_t* o = out.data_as<int64_t>();
  std::fill(o, o + out.numel(), int64_t{0});
  for (int64_t i = 0; i < n; ++i) o[i * c + v[i]] = 1;
  return {out};
}

// ---------------------------------------------------------------------------
// Composites over the primitives above.
std::vector<Tensor> masked_select_decompose(const std::vector<Tensor>& in, const Attrs&) {
  TP_CHECK(in[1].dtype() == DType::Bool, TypeError, "masked_select: expected a bool mask, got mask of dtype ",
           dtype_name(in[1].dtype()));
  Shape r = broadcast_shapes(in[0].sizes(), in[1].sizes(), "masked_select");
  if (r.empty()) r = {1};  // two 0-d operands: one element, selected or not (the result is always 1-D)
  return {ops::index(ops::expand(in[0], r), {ops::expand(in[1], r)})};
}

// A 0-d input reads as one element (PyTorch and NumPy agree on this).
std::vector<Tensor> nonzero_tuple_decompose(const std::vector<Tensor>& in, const Attrs&) {
  Tensor x = in[0].dim() == 0 ? ops::reshape(in[0], {1}) : in[0];
  return ops::unbind(ops::nonzero(x), 1);
}

// Indices that address dim `dim` only (earlier dims whole).
std::vector<Tensor> at_dim(const Tensor& x, int64_t dim, const Tensor& index, const char* op) {
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), op);
  TP_CHECK(index.dim() <= 1, ValueError, op, ": index is supposed to be a vector, got shape ",
           shape_str(index.sizes()));
  std::vector<Tensor> idx(static_cast<size_t>(d));
  idx.push_back(index);
  return idx;
}

// A 0-d tensor of `value` on x's device (a host scalar next to a CUDA x would
// be refused by index_put's same-device check).
Tensor scalar_beside(const Tensor& x, const Scalar& value, DType dtype) {
  if (x.device().kind == Device::Kind::CPU || x.numel() == 0) return Tensor::scalar_tensor(value, dtype);
  return ops::full_on(x, {}, value, dtype);
}

std::vector<Tensor> index_fill_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& x = in[0];
  Tensor value = scalar_beside(x, attrs.get_scalar("value"), x.dtype());
  return {ops::index_put(x, at_dim(x, attrs.get_int("dim"), in[1], "index_fill"), value)};
}

// index_fill with a 0-d tensor value: the value takes part as a tensor, so it gets a gradient, the
// sum of the gradient over the filled positions, each counted once however often the index names
// it (a where over the filled mask, not index_put, whose derivative counts repeats).
std::vector<Tensor> index_fill_tensor_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& x = in[0];
  TP_CHECK(in[2].dim() == 0, ValueError, "index_fill: only supports a 0-dimensional value tensor, but got a value of shape ",
           shape_str(in[2].sizes()));
  const Tensor filled = ops::index_put(ops::zeros_like(x, DType::Bool), at_dim(x, attrs.get_int("dim"), in[1], "index_fill"),
                                       scalar_beside(x, Scalar(true), DType::Bool));
  // A Python number arrives as a host 0-d tensor: for a CUDA x it is made beside x
  // (a value that requires grad stays as given, so its gradient still flows).
  Tensor value = in[2];
  if (!(value.device() == x.device()) && value.device().kind == Device::Kind::CPU && !value.requires_grad())
    value = scalar_beside(x, value.item(), x.dtype());
  return {ops::where(filled, ops::to_dtype(value, x.dtype()), x)};
}

std::vector<Tensor> index_copy_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& x = in[0];
  // One index tensor at dim d: the indexing result has source's shape (B stays at d).
  return {ops::index_put(x, at_dim(x, attrs.get_int("dim"), in[1], "index_copy"), in[2])};
}

// take_along_dim: gather after broadcasting self and indices in every dim but `dim`.
std::vector<Tensor> take_along_dim_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor &x = in[0], &idx = in[1];
  if (attrs.is_none("dim")) return {ops::gather(ops::reshape(x, {-1}), 0, ops::reshape(idx, {-1}))};
  TP_CHECK(x.dim() == idx.dim(), ValueError, "take_along_dim: input and indices should have the same number of ",
           "dimensions, but got ", x.dim(), " and ", idx.dim());
  const int64_t d = wrap_dim(attrs.get_int("dim"), std::max<int64_t>(x.dim(), 1), "take_along_dim");
  if (x.dim() == 0) return {ops::gather(x, 0, idx)};
  Shape xs = x.sizes(), is = idx.sizes();
  xs[d] = 1, is[d] = 1;
  Shape b = broadcast_shapes(xs, is, "take_along_dim");
  Shape xb = b, ib = b;
  xb[d] = x.sizes()[d], ib[d] = idx.sizes()[d];
  return {ops::gather(ops::expand(x, xb), d, ops::expand(idx, ib))};
}

void reg(const char* name, const char* schema, uint32_t tags, int num_inputs, InferFn infer, KernelFn cpu,
         BackwardFn backward) {
  register_op({.name = name, .schema = schema, .tags = tags, .num_inputs = num_inputs, .infer = infer, .cpu = cpu,
               .backward = backward});
}

void reg_composite(const char* name, const char* schema, int num_inputs, DecomposeFn decompose) {
  register_op({.name = name, .schema = schema, .tags = kComposite | kAllDTypes, .num_inputs = num_inputs,
               .decompose = decompose});
}

}  // namespace

void register_index_ops() {
  constexpr uint32_t A = kAllDTypes, I = kInplace | kAllDTypes;
  // Overloads are tried in registration order. The Tensor overloads come first,
  // so a 0-d tensor that requires grad stays a tensor; a Python number reaches
  // them as a wrapped 0-d tensor, which both read as a fill value.
  // Tensor[] indices: one entry per leading dim of self; an undefined entry is a whole dim (a `:`).
  reg("index", "index(Tensor self, Tensor[] indices) -> Tensor", A, -1, &index_infer, &index_cpu, &index_backward);
  reg("index_put", "index_put(Tensor self, Tensor[] indices, Tensor values, bool accumulate=False) -> Tensor", A, -1,
      &index_put_infer, &index_put_cpu, &index_put_backward);
  reg("index_put_", "index_put_(Tensor(a!) self, Tensor[] indices, Tensor values, bool accumulate=False) -> Tensor(a!)",
      I, -1, &index_put_infer, &index_put_cpu, &index_put_backward);
  reg("index_select", "index_select(Tensor self, int dim, Tensor index) -> Tensor", A, 2, &index_select_infer,
      &index_select_cpu, &index_select_backward);
  reg("index_add", "index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor", A, 3,
      &index_add_infer, &index_add_cpu, &index_add_backward);
  reg("index_add_",
      "index_add_(Tensor(a!) self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor(a!)", I, 3,
      &index_add_infer, &index_add_cpu, &index_add_backward);
  reg("gather", "gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor", A, 2,
      &gather_infer, &gather_cpu, &gather_backward);
  reg("scatter.src", "scatter.src(Tensor self, int dim, Tensor index, Tensor src, *, str? reduce=None) -> Tensor", A,
      3, &scatter_infer, &scatter_cpu<false>, &scatter_backward<false>);
  reg("scatter.value",
      "scatter.value(Tensor self, int dim, Tensor index, Scalar value, *, str? reduce=None) -> Tensor", A, 2,
      &scatter_infer, &scatter_cpu<false>, &scatter_backward<false>);
  reg("scatter_.src",
      "scatter_.src(Tensor(a!) self, int dim, Tensor index, Tensor src, *, str? reduce=None) -> Tensor(a!)", I, 3,
      &scatter_infer, &scatter_cpu<false>, &scatter_backward<false>);
  reg("scatter_.value",
      "scatter_.value(Tensor(a!) self, int dim, Tensor index, Scalar value, *, str? reduce=None) -> Tensor(a!)", I, 2,
      &scatter_infer, &scatter_cpu<false>, &scatter_backward<false>);
  reg("scatter_add", "scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor", A, 3, &scatter_infer,
      &scatter_cpu<true>, &scatter_backward<true>);
  reg("scatter_add_", "scatter_add_(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)", I, 3,
      &scatter_infer, &scatter_cpu<true>, &scatter_backward<true>);
  reg("scatter_reduce.two",
      "scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True) -> Tensor",
      A, 3, &scatter_reduce_infer, &scatter_reduce_cpu, &scatter_reduce_backward);
  reg("masked_fill.Tensor", "masked_fill.Tensor(Tensor self, Tensor mask, Tensor value) -> Tensor", A, 3,
      &masked_fill_infer, &masked_fill_cpu, &masked_fill_backward);
  reg("masked_fill.Scalar", "masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor", A, 2,
      &masked_fill_infer, &masked_fill_cpu, &masked_fill_backward);
  reg("masked_fill_.Tensor", "masked_fill_.Tensor(Tensor(a!) self, Tensor mask, Tensor value) -> Tensor(a!)", I, 3,
      &masked_fill_infer, &masked_fill_cpu, &masked_fill_backward);
  reg("masked_fill_.Scalar", "masked_fill_.Scalar(Tensor(a!) self, Tensor mask, Scalar value) -> Tensor(a!)", I, 2,
      &masked_fill_infer, &masked_fill_cpu, &masked_fill_backward);
  reg("nonzero", "nonzero(Tensor self) -> Tensor", A | kNondeterministicShape, 1, &nonzero_infer, &nonzero_cpu,
      nullptr);
  reg("embedding",
      "embedding(Tensor input, Tensor weight, int? padding_idx=None, float? max_norm=None, float norm_type=2.0, "
      "bool scale_grad_by_freq=False, bool sparse=False) -> Tensor",
      A, 2, &embedding_infer, &embedding_cpu, &embedding_backward);
  reg("one_hot", "one_hot(Tensor self, int num_classes=-1) -> Tensor", kNondeterministicShape, 1, &one_hot_infer,
      &one_hot_cpu, nullptr);
  // The tensor overload first: a 0-d tensor value would also convert to the Scalar one (losing its gradient).
  reg_composite("index_fill.int_Tensor", "index_fill.int_Tensor(Tensor self, int dim, Tensor index, Tensor value) -> Tensor",
                3, &index_fill_tensor_decompose);
  reg_composite("index_fill", "index_fill(Tensor self, int dim, Tensor index, Scalar value) -> Tensor", 2,
                &index_fill_decompose);
  reg_composite("index_copy", "index_copy(Tensor self, int dim, Tensor index, Tensor source) -> Tensor", 3,
                &index_copy_decompose);
  reg_composite("take_along_dim", "take_along_dim(Tensor self, Tensor indices, int? dim=None) -> Tensor", 2,
                &take_along_dim_decompose);
  reg_composite("masked_select", "masked_select(Tensor self, Tensor mask) -> Tensor", 2, &masked_select_decompose);
  reg_composite("nonzero_tuple", "nonzero_tuple(Tensor self) -> Tensor[]", 1, &nonzero_tuple_decompose);
  reg_composite("where.cond", "where.cond(Tensor condition) -> Tensor[]", 1, &nonzero_tuple_decompose);
}

}  // namespace tp
