// The C++ API of the shape and indexing operators: each function is one call
// through the dispatcher with every attribute spelled out. The one piece of
// logic here is the expansion of bool masks into integer indices for
// index/index_put_, which PyTorch also does before its index kernel.
#include "ops/api_shape_index.h"

// GCC 12 warns falsely about the attribute initializer lists below.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "ops/dispatch.h"
#include "ops/ops.h"

namespace tp::ops {
namespace {

AttrValue opt_int(std::optional<int64_t> v) { return v ? AttrValue(*v) : AttrValue(std::monostate{}); }
AttrValue opt_str(const std::string& s) { return s.empty() ? AttrValue(std::monostate{}) : AttrValue(s); }

std::vector<Tensor> with_self(const Tensor& x, const std::vector<Tensor>& rest) {
  std::vector<Tensor> in{x};
  in.insert(in.end(), rest.begin(), rest.end());
  return in;
}

// One integer index per indexed dim: a bool mask over k dims becomes k index
// tensors (the coordinates of its true elements). Trailing whole dims are dropped.
std::vector<Tensor> expand_masks(const Tensor& x, const std::vector<Tensor>& indices, const char* op) {
  std::vector<Tensor> out;
  int64_t dim = 0;
  for (const Tensor& i : indices) {
    if (!i.defined() || i.dtype() != DType::Bool) {
      out.push_back(i);
      ++dim;
      continue;
    }
    TP_CHECK(i.dim() > 0, IndexError, op, ": a 0-dimensional bool index must be applied through Tensor indexing");
    TP_CHECK(dim + i.dim() <= x.dim(), IndexError, op, ": too many indices for tensor of dimension ", x.dim());
    for (int64_t k = 0; k < i.dim(); ++k)
      TP_CHECK(i.sizes()[k] == x.sizes()[dim + k], IndexError, op, ": the shape of the mask ",
               shape_str(i.sizes()), " at index ", k, " does not match the shape of the indexed tensor ",
               shape_str(x.sizes()), " at index ", dim + k);
    Tensor nz = nonzero(i);
    for (int64_t k = 0; k < i.dim(); ++k) out.push_back(select(nz, 1, k));
    dim += i.dim();
  }
  while (!out.empty() && !out.back().defined()) out.pop_back();
  return out;
}

bool any_defined(const std::vector<Tensor>& v) {
  for (auto& t : v)
    if (t.defined()) return true;
  return false;
}

// The shape x[idx] has (the index operator's inference, no data touched).
Shape index_shape_of(const Tensor& x, const std::vector<Tensor>& idx) {
  static const OpDef& op = get_op("index");
  std::vector<TensorMeta> metas{x.meta()};
  for (auto& t : idx) {
    TensorMeta m = t.defined() ? t.meta() : TensorMeta{};
    m.defined = t.defined();
    metas.push_back(m);
  }
  return op.infer(op, metas, {})[0].sizes;
}

bool all_defined(const std::vector<Tensor>& v) {
  for (auto& t : v)
    if (!t.defined()) return false;
  return true;
}

// While a graph is being captured, index/index_put get only leading, defined
// indices (the tracer records no absent tensors): self is permuted so that the
// indexed dims come first, which gives the layout [B, kept...]; `b_pos` is
// where B belongs in the real result (0 when the indexed dims are not adjacent).
struct Leading {
  std::vector<int64_t> perm;  // self -> permuted self
  std::vector<Tensor> idx;    // the defined indices, in order
  int64_t b_pos = 0, b_dims = 0;
};

Leading leading_form(const Tensor& x, const std::vector<Tensor>& idx) {
  Leading l;
  std::vector<int64_t> kept;
  int64_t first = -1, last = -1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < static_cast<int64_t>(idx.size()) && idx[d].defined()) {
      l.perm.push_back(d);
      l.idx.push_back(idx[d]);
      if (first < 0) first = d;
      last = d;
    } else {
      kept.push_back(d);
    }
  }
  l.perm.insert(l.perm.end(), kept.begin(), kept.end());
  const bool adjacent = last - first + 1 == static_cast<int64_t>(l.idx.size());
  l.b_pos = adjacent ? first : 0;
  Shape b;
  for (auto& t : l.idx) b = b.empty() ? t.sizes() : broadcast_shapes(b, t.sizes(), "index");
  l.b_dims = static_cast<int64_t>(b.size());
  return l;
}

// Moves B (the first b_dims dims of r) to position b_pos.
Tensor place_b(const Tensor& r, const Leading& l) {
  if (l.b_pos == 0) return r;
  std::vector<int64_t> order;
  for (int64_t i = 0; i < l.b_pos; ++i) order.push_back(l.b_dims + i);
  for (int64_t i = 0; i < l.b_dims; ++i) order.push_back(i);
  for (int64_t i = l.b_dims + l.b_pos; i < r.dim(); ++i) order.push_back(i);
  return permute(r, order);
}

// The inverse of place_b.
Tensor unplace_b(const Tensor& v, const Leading& l) {
  if (l.b_pos == 0) return v;
  std::vector<int64_t> order;
  for (int64_t i = 0; i < l.b_dims; ++i) order.push_back(l.b_pos + i);
  for (int64_t i = 0; i < l.b_pos; ++i) order.push_back(i);
  for (int64_t i = l.b_pos + l.b_dims; i < v.dim(); ++i) order.push_back(i);
  return permute(v, order);
}

std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
  return inv;
}
}  // namespace

// ---- views ----
Tensor as_strided(const Tensor& x, const Shape& size, const Shape& stride, std::optional<int64_t> storage_offset) {
  return call_op1(TP_OP("as_strided"), {x},
                  {{"size", size}, {"stride", stride}, {"storage_offset", opt_int(storage_offset)}});
}
Tensor diagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  return call_op1(TP_OP("diagonal"), {x}, {{"offset", offset}, {"dim1", dim1}, {"dim2", dim2}});
}
Tensor view_dtype(const Tensor& x, DType dtype) { return call_op1(TP_OP("view.dtype"), {x}, {{"dtype", dtype}}); }
Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  return call_op1(TP_OP("flatten"), {x}, {{"start_dim", start_dim}, {"end_dim", end_dim}});
}
Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes) {
  return call_op1(TP_OP("unflatten"), {x}, {{"dim", dim}, {"sizes", sizes}});
}
Tensor t(const Tensor& x) { return call_op1(TP_OP("t"), {x}); }
Tensor squeeze_dims(const Tensor& x, const std::vector<int64_t>& dims) {
  return call_op1(TP_OP("squeeze.dims"), {x}, {{"dim", dims}});
}
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  return call_op1(TP_OP("narrow"), {x}, {{"dim", dim}, {"start", start}, {"length", length}});
}
Tensor expand_as(const Tensor& x, const Tensor& other) { return call_op1(TP_OP("expand_as"), {x, other}); }
Tensor movedim(const Tensor& x, const std::vector<int64_t>& source, const std::vector<int64_t>& destination) {
  return call_op1(TP_OP("movedim"), {x}, {{"source", source}, {"destination", destination}});
}
std::vector<Tensor> unbind(const Tensor& x, int64_t dim) { return call_op(TP_OP("unbind"), {x}, {{"dim", dim}}); }
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  return call_op(TP_OP("split"), {x}, {{"split_size", split_size}, {"dim", dim}});
}
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim) {
  return call_op(TP_OP("split.sizes"), {x}, {{"split_size", split_sizes}, {"dim", dim}});
}
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  return call_op(TP_OP("chunk"), {x}, {{"chunks", chunks}, {"dim", dim}});
}

// ---- copies ----
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) { return call_op1(TP_OP("cat"), tensors, {{"dim", dim}}); }
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  return call_op1(TP_OP("stack"), tensors, {{"dim", dim}});
}
Tensor flip(const Tensor& x, const std::vector<int64_t>& dims) { return call_op1(TP_OP("flip"), {x}, {{"dims", dims}}); }
Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims) {
  return call_op1(TP_OP("roll"), {x}, {{"shifts", shifts}, {"dims", dims}});
}
Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats) {
  return call_op1(TP_OP("repeat"), {x}, {{"repeats", repeats}});
}
Tensor tile(const Tensor& x, const std::vector<int64_t>& dims) { return call_op1(TP_OP("tile"), {x}, {{"dims", dims}}); }
Tensor tril(const Tensor& x, int64_t diagonal) { return call_op1(TP_OP("tril"), {x}, {{"diagonal", diagonal}}); }
Tensor triu(const Tensor& x, int64_t diagonal) { return call_op1(TP_OP("triu"), {x}, {{"diagonal", diagonal}}); }

// ---- indexing ----
Tensor index(const Tensor& x, const std::vector<Tensor>& indices) {
  std::vector<Tensor> idx = expand_masks(x, indices, "index");
  if (!any_defined(idx)) return x;
  if (current_interceptor() && !all_defined(idx)) {
    Leading l = leading_form(x, idx);
    return place_b(call_op1(TP_OP("index"), with_self(permute(x, l.perm), l.idx)), l);
  }
  return call_op1(TP_OP("index"), with_self(x, idx));
}
Tensor& index_put_(Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) {
  std::vector<Tensor> idx = expand_masks(x, indices, "index_put_");
  if (!any_defined(idx)) {
    TP_CHECK(!accumulate, ValueError, "index_put_: accumulate needs at least one index tensor");
    return copy_(x, values);
  }
  std::vector<Tensor> in = with_self(x, idx);
  in.push_back(values);
  call_op(TP_OP("index_put_"), in, {{"accumulate", accumulate}});
  return x;
}
Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) {
  std::vector<Tensor> idx = expand_masks(x, indices, "index_put");
  TP_CHECK(any_defined(idx), ValueError, "index_put: expected at least one index tensor");
  if (current_interceptor() && !all_defined(idx)) {
    Leading l = leading_form(x, idx);
    Shape result = index_shape_of(x, idx);
    Tensor v = unplace_b(expand(values, result), l);
    std::vector<Tensor> in = with_self(permute(x, l.perm), l.idx);
    in.push_back(v);
    return permute(call_op1(TP_OP("index_put"), in, {{"accumulate", accumulate}}), inverse(l.perm));
  }
  std::vector<Tensor> in = with_self(x, idx);
  in.push_back(values);
  return call_op1(TP_OP("index_put"), in, {{"accumulate", accumulate}});
}
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  return call_op1(TP_OP("index_select"), {x, index}, {{"dim", dim}});
}
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  return call_op1(TP_OP("gather"), {x, index}, {{"dim", dim}, {"sparse_grad", false}});
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce) {
  return call_op1(TP_OP("scatter.src"), {x, index, src}, {{"dim", dim}, {"reduce", opt_str(reduce)}});
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value, const std::string& reduce) {
  return call_op1(TP_OP("scatter.value"), {x, index}, {{"dim", dim}, {"value", value}, {"reduce", opt_str(reduce)}});
}
Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce) {
  call_op(TP_OP("scatter_.src"), {x, index, src}, {{"dim", dim}, {"reduce", opt_str(reduce)}});
  return x;
}
Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, const Scalar& value, const std::string& reduce) {
  call_op(TP_OP("scatter_.value"), {x, index}, {{"dim", dim}, {"value", value}, {"reduce", opt_str(reduce)}});
  return x;
}
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return call_op1(TP_OP("scatter_add"), {x, index, src}, {{"dim", dim}});
}
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                      bool include_self) {
  return call_op1(TP_OP("scatter_reduce.two"), {x, index, src},
                  {{"dim", dim}, {"reduce", reduce}, {"include_self", include_self}});
}
Tensor& scatter_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  call_op(TP_OP("scatter_add_"), {x, index, src}, {{"dim", dim}});
  return x;
}
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  return call_op1(TP_OP("index_add"), {x, index, source}, {{"dim", dim}, {"alpha", alpha}});
}
Tensor& index_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  call_op(TP_OP("index_add_"), {x, index, source}, {{"dim", dim}, {"alpha", alpha}});
  return x;
}
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  return call_op1(TP_OP("masked_fill.Scalar"), {x, mask}, {{"value", value}});
}
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value) {
  return call_op1(TP_OP("masked_fill.Tensor"), {x, mask, value});
}
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Scalar& value) {
  call_op(TP_OP("masked_fill_.Scalar"), {x, mask}, {{"value", value}});
  return x;
}
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Tensor& value) {
  call_op(TP_OP("masked_fill_.Tensor"), {x, mask, value});
  return x;
}
Tensor masked_select(const Tensor& x, const Tensor& mask) { return call_op1(TP_OP("masked_select"), {x, mask}); }
Tensor nonzero(const Tensor& x) { return call_op1(TP_OP("nonzero"), {x}); }
std::vector<Tensor> nonzero_tuple(const Tensor& x) { return call_op(TP_OP("nonzero_tuple"), {x}); }
std::vector<Tensor> where(const Tensor& condition) { return call_op(TP_OP("where.cond"), {condition}); }
Tensor embedding(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx) {
  return call_op1(TP_OP("embedding"), {input, weight},
                  {{"padding_idx", opt_int(padding_idx)},
                   {"max_norm", std::monostate{}},
                   {"norm_type", Scalar(2.0)},
                   {"scale_grad_by_freq", false},
                   {"sparse", false}});
}
Tensor one_hot(const Tensor& x, int64_t num_classes) {
  return call_op1(TP_OP("one_hot"), {x}, {{"num_classes", num_classes}});
}

}  // namespace tp::ops
