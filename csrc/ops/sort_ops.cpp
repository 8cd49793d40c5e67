// Ordering operators: sort/argsort, topk, kthvalue, median, unique,
// count_nonzero, repeat_interleave, searchsorted/bucketize, randperm.
//
// Kernels view the (contiguous) input as [outer, D, inner] around the working
// dim: each (outer, inner) pair is one slice of D elements at stride `inner`.
// A slice is copied into a small buffer, ordered through an index array with a
// NaN-aware comparator (NaN ranks above +inf, as PyTorch orders it), and the
// results are written back at the same stride. Ties always break by position,
// so every result is deterministic (sort is always stable).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/parallel.h"
#include "ops/dispatch.h"
#include "ops/families.h"
#include "ops/generator.h"
#include "ops/kernel_util.h"
#include "ops/ops.h"
#include "ops/registry.h"

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace tp {
namespace {

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  else return false;
}
// Strict "a ranks below b" with NaN as the largest value.
template <class T>
bool ranks_below(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return is_nan(b) ? !is_nan(a) : a < b;
  else return a < b;
}

struct Slices {
  int64_t outer = 1, D = 1, inner = 1;
  int64_t count() const { return outer * inner; }
  int64_t base(int64_t s) const { return (s / inner) * D * inner + s % inner; }
};
Slices slices_of(const Shape& sizes, int64_t dim) {
  Slices s;
  if (sizes.empty()) return s;
  s.D = sizes[dim];
  for (int64_t d = 0; d < dim; ++d) s.outer *= sizes[d];
  for (int64_t d = dim + 1; d < static_cast<int64_t>(sizes.size()); ++d) s.inner *= sizes[d];
  return s;
}
// Runs body(base) for every slice, on several threads only when there is enough work.
template <class F>
void for_slices(const Slices& s, const F& body) {
  parallel_for(0, s.count(), std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, s.D * 8)),
               [&](int64_t b, int64_t e) {
                 for (int64_t i = b; i < e; ++i) body(s.base(i));
               });
}
int64_t dim_of(const TensorMeta& m, const Attrs& attrs, const char* op) {
  const int64_t nd = static_cast<int64_t>(m.sizes.size());
  return wrap_dim(attrs.get_int("dim"), std::max<int64_t>(nd, 1), op);
}
int64_t dim_of(const Tensor& t, const Attrs& attrs, const char* op) {
  return wrap_dim(attrs.get_int("dim"), std::max<int64_t>(t.dim(), 1), op);
}

// Gradient of a selection: grad_output lands at the selected indices along
// `dim`, zeros elsewhere.
std::vector<Tensor> select_backward(const BackwardArgs& a, bool keepdim) {
  const Tensor& g = a.grad_outputs[0];
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const Tensor& x = a.inputs[0];
  if (x.dim() == 0) return {ops::reshape(g, {})};
  const int64_t dim = wrap_dim(a.attrs.get_int("dim"), x.dim(), "sort backward");
  Tensor gi = g, idx = a.outputs[1];
  if (!keepdim) {
    gi = ops::unsqueeze(gi, dim);
    idx = ops::unsqueeze(idx, dim);
  }
  return {ops::scatter(ops::full_on(g, x.sizes(), Scalar(int64_t{0}), g.dtype()), dim, idx, gi)};
}
std::vector<Tensor> sort_backward(const BackwardArgs& a) { return select_backward(a, true); }
std::vector<Tensor> reduce_select_backward(const BackwardArgs& a) {
  return select_backward(a, a.attrs.get_or("keepdim", false));
}

// ---------------------------------------------------------------------------
// sort / argsort
std::vector<TensorMeta> sort_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  dim_of(in[0], attrs, op.name);
  return {TensorMeta::contiguous(in[0].sizes, in[0].dtype), TensorMeta::contiguous(in[0].sizes, DType::Int64)};
}

// Orders the positions 0..D-1 of one slice; `first` elements are fully ordered
// (partial ordering for topk), descending puts the largest (NaN) first.
template <class T>
void order_slice(const T* x, int64_t stride, int64_t D, int64_t first, bool descending, std::vector<T>& buf,
                 std::vector<int64_t>& idx) {
  buf.resize(static_cast<size_t>(D));
  idx.resize(static_cast<size_t>(D));
  for (int64_t i = 0; i < D; ++i) buf[i] = x[i * stride];
  std::iota(idx.begin(), idx.end(), int64_t{0});
  auto cmp = [&](int64_t i, int64_t j) {
    const T a = buf[i], b = buf[j];
    if (descending ? ranks_below(b, a) : ranks_below(a, b)) return true;
    if (descending ? ranks_below(a, b) : ranks_below(b, a)) return false;
    return i < j;  // equal (or both NaN): keep the original order
  };
  if (first >= D) std::sort(idx.begin(), idx.end(), cmp);
  else std::partial_sort(idx.begin(), idx.begin() + first, idx.end(), cmp);
}

std::vector<Tensor> sort_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                             const std::vector<TensorMeta>& om) {
  Tensor val = alloc_out(om[0]), ind = alloc_out(om[1]);
  if (val.numel() == 0) return {val, ind};
  Tensor x = as_contiguous(in[0]);
  const Slices s = slices_of(x.sizes(), dim_of(x, attrs, op.name));
  const bool desc = attrs.get_or("descending", false);
  TP_DISPATCH_ALL(x.dtype(), op.name, ([&]<class T>() {
    const T* p = x.data_as<T>();
    T* v = val.data_as<T>();
    int64_t* o = ind.data_as<int64_t>();
    for_slices(s, [&](int64_t base) {
      thread_local std::vector<T> buf;
      thread_local std::vector<int64_t> idx;
      order_slice<T>(p + base, s.inner, s.D, s.D, desc, buf, idx);
      for (int64_t i = 0; i < s.D; ++i) {
        o[base + i * s.inner] = idx[i];
        v[base + i * s.inner] = buf[idx[i]];
      }
    });
  }));
  return {val, ind};
}

std::vector<Tensor> argsort_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  return {call_op(TP_OP("sort"), {in[0]}, attrs)[1]};
}
std::vector<Tensor> msort_decompose(const std::vector<Tensor>& in, const Attrs&) {
  return {call_op(TP_OP("sort"), {in[0]}, {{"dim", int64_t{0}}, {"descending", false}})[0]};
}

// ---------------------------------------------------------------------------
// topk
int64_t checked_k(const char* op, const TensorMeta& m, int64_t dim, int64_t k, bool one_based) {
  const int64_t D = m.sizes.empty() ? 1 : m.sizes[dim];
  const bool ok = one_based ? (k >= 1 && k <= D) : (k >= 0 && k <= D);
  TP_CHECK(ok, IndexError, op, ": k=", k, " is out of range for dimension ", dim, " of size ", D, " (input shape ",
           shape_str(m.sizes), ")");
  return k;
}

std::vector<TensorMeta> topk_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const int64_t dim = dim_of(in[0], attrs, op.name);
  const int64_t k = checked_k(op.name, in[0], dim, attrs.get_int("k"), false);
  Shape s = in[0].sizes;
  if (!s.empty()) s[dim] = k;
  return {TensorMeta::contiguous(s, in[0].dtype), TensorMeta::contiguous(s, DType::Int64)};
}

std::vector<Tensor> topk_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                             const std::vector<TensorMeta>& om) {
  Tensor val = alloc_out(om[0]), ind = alloc_out(om[1]);
  if (val.numel() == 0) return {val, ind};
  Tensor x = as_contiguous(in[0]);
  const Slices s = slices_of(x.sizes(), dim_of(x, attrs, op.name));
  const Slices so = slices_of(val.sizes(), dim_of(x, attrs, op.name));
  const int64_t k = attrs.get_int("k");
  const bool largest = attrs.get_or("largest", true);
  TP_DISPATCH_ALL(x.dtype(), op.name, ([&]<class T>() {
    const T* p = x.data_as<T>();
    T* v = val.data_as<T>();
    int64_t* o = ind.data_as<int64_t>();
    parallel_for(0, s.count(), std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, s.D * 8)),
                 [&](int64_t b, int64_t e) {
                   std::vector<T> buf;
                   std::vector<int64_t> idx;
                   for (int64_t sl = b; sl < e; ++sl) {
                     order_slice<T>(p + s.base(sl), s.inner, s.D, k, largest, buf, idx);
                     const int64_t ob = so.base(sl);
                     for (int64_t i = 0; i < k; ++i) {
                       o[ob + i * so.inner] = idx[i];
                       v[ob + i * so.inner] = buf[idx[i]];
                     }
                   }
                 });
  }));
  return {val, ind};
}

// ---------------------------------------------------------------------------
// kthvalue / median.dim: one order statistic per slice (nth_element).
Shape reduced(const TensorMeta& m, int64_t dim, bool keepdim) {
  Shape s = m.sizes;
  if (s.empty()) return s;
  if (keepdim) s[dim] = 1;
  else s.erase(s.begin() + dim);
  return s;
}

template <bool IsMedian>
std::vector<TensorMeta> kth_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const int64_t dim = dim_of(in[0], attrs, op.name);
  if (IsMedian) {
    const int64_t D = in[0].sizes.empty() ? 1 : in[0].sizes[dim];
    TP_CHECK(D > 0, IndexError, op.name,
             ": cannot compute the median of dimension ", dim, " of size 0 (input shape ", shape_str(in[0].sizes), ")");
  } else {
    checked_k(op.name, in[0], dim, attrs.get_int("k"), true);
  }
  Shape s = reduced(in[0], dim, attrs.get_or("keepdim", false));
  return {TensorMeta::contiguous(s, in[0].dtype), TensorMeta::contiguous(s, DType::Int64)};
}

// kthvalue's pick among equal values is the one PyTorch's CPU kernel returns: its selection is the
// classic quickselect with a median-of-three pivot (the middle element swapped next to the left end,
// the three ordered, then a two-sided partition around the left one), so the same swaps are made here
// on (value, original index) pairs. NaN ranks as the largest value.
template <class T>
int64_t quickselect_index(std::vector<T>& a, std::vector<int64_t>& ix, int64_t k) {
  auto gt = [](T x, T y) { return ranks_below(y, x); };
  auto swp = [&](int64_t i, int64_t j) {
    std::swap(a[static_cast<size_t>(i)], a[static_cast<size_t>(j)]);
    std::swap(ix[static_cast<size_t>(i)], ix[static_cast<size_t>(j)]);
  };
  auto at = [&](int64_t i) { return a[static_cast<size_t>(i)]; };
  int64_t lo = 0, hi = static_cast<int64_t>(a.size()) - 1;
  while (hi > lo) {
    if (hi == lo + 1) {
      if (gt(at(lo), at(hi))) swp(lo, hi);
      break;
    }
    swp(lo + (hi - lo) / 2, lo + 1);
    if (gt(at(lo + 1), at(hi))) swp(lo + 1, hi);
    if (gt(at(lo), at(hi))) swp(lo, hi);
    if (gt(at(lo + 1), at(lo))) swp(lo + 1, lo);
    const T pivot = at(lo);  // a[lo + 1] <= pivot <= a[hi]: both scans stop inside the range
    int64_t i = lo + 1, j = hi;
    for (;;) {
      do ++i; while (gt(pivot, at(i)));
      do --j; while (gt(at(j), pivot));
      if (j < i) break;
      swp(i, j);
    }
    swp(lo, j);
    if (j <= k) lo = i;
    if (j >= k) hi = j - 1;
  }
  return ix[static_cast<size_t>(k)];
}

// The median propagates NaN (the first NaN is the answer); kthvalue ranks NaN
// as the largest value.
template <bool IsMedian>
std::vector<Tensor> kth_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                            const std::vector<TensorMeta>& om) {
  Tensor val = alloc_out(om[0]), ind = alloc_out(om[1]);
  if (val.numel() == 0) return {val, ind};
  Tensor x = as_contiguous(in[0]);
  const Slices s = slices_of(x.sizes(), dim_of(x, attrs, op.name));
  const int64_t kth = IsMedian ? (s.D - 1) / 2 : attrs.get_int("k") - 1;
  TP_DISPATCH_ALL(x.dtype(), op.name, ([&]<class T>() {
    const T* p = x.data_as<T>();
    T* v = val.data_as<T>();
    int64_t* o = ind.data_as<int64_t>();
    parallel_for(0, s.count(), std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, s.D * 4)),
                 [&](int64_t b, int64_t e) {
                   std::vector<int64_t> idx(static_cast<size_t>(s.D));
                   using Stored = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;  // not vector<bool>
                   std::vector<Stored> vals(IsMedian ? 0 : static_cast<size_t>(s.D));
                   for (int64_t sl = b; sl < e; ++sl) {
                     const T* row = p + s.base(sl);
                     int64_t pick = -1;
                     if (!IsMedian) {
                       for (int64_t i = 0; i < s.D; ++i) vals[static_cast<size_t>(i)] = static_cast<Stored>(row[i * s.inner]);
                       std::iota(idx.begin(), idx.end(), int64_t{0});
                       pick = quickselect_index(vals, idx, kth);
                     }
                     if (IsMedian)
                       for (int64_t i = 0; i < s.D && pick < 0; ++i)
                         if (is_nan(row[i * s.inner])) pick = i;
                     if (pick < 0) {
                       std::iota(idx.begin(), idx.end(), int64_t{0});
                       auto cmp = [&](int64_t i, int64_t j) {
                         const T a = row[i * s.inner], c = row[j * s.inner];
                         if (ranks_below(a, c)) return true;
                         if (ranks_below(c, a)) return false;
                         return i < j;
                       };
                       std::nth_element(idx.begin(), idx.begin() + kth, idx.end(), cmp);
                       pick = idx[kth];
                     }
                     o[sl] = pick;
                     v[sl] = row[pick * s.inner];
                   }
                 });
  }));
  return {val, ind};
}

// median(self): the lower median of all elements (NaN if there is one); its
// gradient flows through median.dim to the chosen element.
std::vector<Tensor> median_decompose(const std::vector<Tensor>& in, const Attrs&) {
  const Tensor& x = in[0];
  if (x.numel() == 0) return {ops::full({}, Scalar(std::nan("")), x.dtype())};
  Tensor flat = ops::reshape(x, {-1});
  return {call_op(TP_OP("median.dim"), {flat}, {{"dim", int64_t{0}}, {"keepdim", false}})[0]};
}

// ---------------------------------------------------------------------------
// unique / unique_consecutive: sort the slices along `dim` (every element when dim is None),
// then merge equal neighbours. NaN never equals NaN, so each NaN stays
// separate, as PyTorch's CPU kernel does. Results are always sorted.
std::vector<TensorMeta> unique_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const auto d = attrs.get_optional_int("dim");
  Shape vs{-1}, inv = in[0].sizes;
  if (d) {
    const int64_t dim = wrap_dim(*d, std::max<int64_t>(1, static_cast<int64_t>(in[0].sizes.size())), op.name);
    TP_CHECK(!in[0].sizes.empty(), IndexError, op.name, ": dim=", *d, " given for a 0-d tensor");
    vs = in[0].sizes;
    vs[dim] = -1;
    inv = {in[0].sizes[dim]};
  }
  return {TensorMeta::contiguous(vs, in[0].dtype), TensorMeta::contiguous(inv, DType::Int64),
          TensorMeta::contiguous({-1}, DType::Int64)};
}

// unique_consecutive skips the sort: only equal neighbours in input order merge.
template <bool Sort>
std::vector<Tensor> unique_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                               const std::vector<TensorMeta>&) {
  Tensor x = as_contiguous(in[0]);
  const auto d = attrs.get_optional_int("dim");
  Slices s;  // a "slice" here is one entry along dim: outer*inner elements
  if (d) s = slices_of(x.sizes(), wrap_dim(*d, x.dim(), op.name));
  else s.D = x.numel();
  std::vector<Tensor> res;
  TP_DISPATCH_ALL(x.dtype(), op.name, ([&]<class T>() {
    const T* p = x.data_as<T>();
    auto at = [&](int64_t e, int64_t o, int64_t i) { return p[o * s.D * s.inner + e * s.inner + i]; };
    // -1 / 0 / 1 comparison of entries a and b (lexicographic over their elements).
    auto compare = [&](int64_t a, int64_t b) {
      for (int64_t o = 0; o < s.outer; ++o)
        for (int64_t i = 0; i < s.inner; ++i) {
          const T u = at(a, o, i), v = at(b, o, i);
          if (ranks_below(u, v)) return -1;
          if (ranks_below(v, u)) return 1;
        }
      return 0;
    };
    auto same = [&](int64_t a, int64_t b) {
      for (int64_t o = 0; o < s.outer; ++o)
        for (int64_t i = 0; i < s.inner; ++i)
          if (!(at(a, o, i) == at(b, o, i))) return false;
      return true;
    };
    std::vector<int64_t> idx(static_cast<size_t>(s.D));
    std::iota(idx.begin(), idx.end(), int64_t{0});
    if (Sort) std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return compare(a, b) < 0; });
    std::vector<int64_t> firsts, counts, inverse(static_cast<size_t>(s.D));
    for (int64_t r = 0; r < s.D; ++r) {
      if (r == 0 || !same(idx[r - 1], idx[r])) {
        firsts.push_back(idx[r]);
        counts.push_back(0);
      }
      ++counts.back();
      inverse[idx[r]] = static_cast<int64_t>(firsts.size()) - 1;
    }
    const int64_t U = static_cast<int64_t>(firsts.size());
    Shape vs{U};
    if (d) {
      vs = x.sizes();
      vs[wrap_dim(*d, x.dim(), op.name)] = U;
    }
    Tensor val = Tensor::empty(vs, x.dtype());
    T* v = val.data_as<T>();
    for (int64_t u = 0; u < U; ++u)
      for (int64_t o = 0; o < s.outer; ++o)
        for (int64_t i = 0; i < s.inner; ++i) v[o * U * s.inner + u * s.inner + i] = at(firsts[u], o, i);
    Tensor inv = Tensor::empty(d ? Shape{s.D} : x.sizes(), DType::Int64);
    std::copy(inverse.begin(), inverse.end(), inv.data_as<int64_t>());
    Tensor cnt = Tensor::empty({U}, DType::Int64);
    std::copy(counts.begin(), counts.end(), cnt.data_as<int64_t>());
    res = {val, inv, cnt};
  }));
  return res;
}

// ---------------------------------------------------------------------------
// count_nonzero = sum(self != 0) over the dims.
std::vector<Tensor> count_nonzero_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  std::vector<int64_t> dims;
  if (!attrs.is_none("dim")) dims = attrs.get<std::vector<int64_t>>("dim");
  Tensor nz = ops::ne(in[0], ops::scalar(Scalar(int64_t{0})));
  return {ops::to_dtype(ops::sum(nz, dims, false), DType::Int64)};
}

// ---------------------------------------------------------------------------
// repeat_interleave: index_select with the index repeat_interleave(repeats)
// builds, so the gradient is index_select's.
// output_size= is PyTorch's hint of the result length (to skip a device sync);
// here it is only checked, so a wrong hint is an error rather than a wrong shape.
void check_output_size(const Attrs& attrs, int64_t actual) {
  if (!attrs.has("output_size") || attrs.is_none("output_size")) return;
  const int64_t hint = attrs.get_int("output_size");
  TP_CHECK(hint == actual, ValueError, "repeat_interleave: output_size=", hint,
           " does not match the size of the result along the repeated dimension (", actual, ")");
}

std::vector<TensorMeta> ri_index_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  TP_CHECK(in[0].sizes.size() <= 1, ValueError, op.name, ": repeats must be 0-d or 1-d, got shape ",
           shape_str(in[0].sizes));
  TP_CHECK(is_integral(in[0].dtype, false), TypeError, op.name, ": repeats must be an integer tensor, got dtype ",
           dtype_name(in[0].dtype));
  return {TensorMeta::contiguous({-1}, DType::Int64)};
}
std::vector<Tensor> ri_index_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                 const std::vector<TensorMeta>&) {
  Tensor r = as_contiguous(in[0]);
  const int64_t* rp = r.data_as<int64_t>();
  const int64_t n = r.numel();
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    TP_CHECK(rp[i] >= 0, ValueError, op.name, ": repeats must be non-negative, got ", rp[i], " at position ", i);
    total += rp[i];
  }
  check_output_size(attrs, total);
  Tensor out = Tensor::empty({total}, DType::Int64);
  int64_t* o = out.data_as<int64_t>();
  for (int64_t i = 0, k = 0; i < n; ++i)
    for (int64_t j = 0; j < rp[i]; ++j) o[k++] = i;
  return {out};
}

std::vector<Tensor> ri_apply(const Tensor& self, Tensor repeats, const Attrs& attrs) {
  const auto d = attrs.get_optional_int("dim");
  Tensor x = d ? self : ops::reshape(self, {-1});
  const int64_t dim = d ? wrap_dim(*d, std::max<int64_t>(1, x.dim()), "repeat_interleave") : 0;
  if (x.dim() == 0) x = ops::reshape(x, {1});
  const int64_t D = x.sizes()[dim];
  if (repeats.dim() == 0 || repeats.numel() == 1) repeats = ops::expand(ops::reshape(repeats, {1}), {D});
  TP_CHECK(repeats.numel() == D, ValueError, "repeat_interleave: repeats has ", repeats.numel(),
           " entries but dimension ", dim, " of the input (shape ", shape_str(self.sizes()), ") has size ", D);
  Tensor idx = call_op1(TP_OP("repeat_interleave.Tensor"), {ops::contiguous(repeats)}, {});
  check_output_size(attrs, idx.numel());
  return {ops::index_select(x, dim, idx)};
}
// An int count needs no index tensor: each entry along dim, broadcast over a
// new dim of r after it, merged with it. A view and one copy, on any device
// (the index tensor of ri_apply is built on the host).
std::vector<Tensor> ri_int_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  const int64_t r = attrs.get_int("repeats");
  TP_CHECK(r >= 0, ValueError, "repeat_interleave: repeats must be non-negative, got ", r);
  const auto d = attrs.get_optional_int("dim");
  Tensor x = d ? in[0] : ops::reshape(in[0], {-1});
  const int64_t dim = d ? wrap_dim(*d, std::max<int64_t>(1, x.dim()), "repeat_interleave") : 0;
  if (x.dim() == 0) x = ops::reshape(x, {1});
  Shape wide = x.sizes(), merged = x.sizes();
  wide.insert(wide.begin() + dim + 1, r);
  merged[static_cast<size_t>(dim)] *= r;
  check_output_size(attrs, merged[static_cast<size_t>(dim)]);
  return {ops::reshape(ops::expand(ops::unsqueeze(x, dim + 1), wide), merged)};
}
std::vector<Tensor> ri_tensor_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  return ri_apply(in[0], in[1], attrs);
}

// ---------------------------------------------------------------------------
// searchsorted / bucketize: binary search of each value in its row of the
// sorted sequence (a 1-D sequence serves every value). Both sides compare in
// float64 when either is floating, else in int64.
// side='left'/'right' is PyTorch's spelling of right=False/True; both given must agree.
bool ss_right(const char* op, const Attrs& attrs) {
  const bool right = attrs.get_or("right", false);
  if (!attrs.has("side") || attrs.is_none("side")) return right;
  const std::string& side = attrs.get_str("side");
  TP_CHECK(side == "left" || side == "right", ValueError, op, ": side can only be 'left' or 'right', got '", side,
           "'");
  TP_CHECK(!(right && side == "left"), ValueError, op,
           ": side and right can't be set to opposites, got side of left while right was True");
  return side == "right";
}

std::vector<TensorMeta> ss_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  ss_right(op.name, attrs);
  const TensorMeta &seq = in[0], &v = in[1];
  TP_CHECK(!seq.sizes.empty(), ValueError, op.name, ": sorted_sequence must have at least one dimension, got a 0-d tensor");
  if (seq.sizes.size() > 1) {
    bool ok = v.sizes.size() == seq.sizes.size();
    for (size_t i = 0; ok && i + 1 < seq.sizes.size(); ++i) ok = seq.sizes[i] == v.sizes[i];
    TP_CHECK(ok, ValueError, op.name, ": sorted_sequence of shape ", shape_str(seq.sizes),
             " and values of shape ", shape_str(v.sizes), " must match in all but the last dimension");
  }
  if (in.size() > 2 && in[2].defined) {
    TP_CHECK(in[2].sizes == seq.sizes, ValueError, op.name, ": sorter of shape ", shape_str(in[2].sizes),
             " must have the shape of sorted_sequence ", shape_str(seq.sizes));
    TP_CHECK(in[2].dtype == DType::Int64, TypeError, op.name, ": sorter must be an int64 tensor, got ",
             dtype_name(in[2].dtype));
  }
  return {TensorMeta::contiguous(v.sizes, attrs.get_or("out_int32", false) ? DType::Int32 : DType::Int64)};
}
std::vector<Tensor> ss_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                           const std::vector<TensorMeta>& om) {
  // The search writes int64 positions; out_int32 narrows them afterwards.
  Tensor out = om[0].dtype == DType::Int64 ? alloc_out(om[0]) : Tensor::empty(om[0].sizes, DType::Int64);
  if (out.numel() == 0) return {convert(out, om[0].dtype)};
  const DType ct = is_floating(in[0].dtype()) || is_floating(in[1].dtype()) ? DType::Float64 : DType::Int64;
  // sorter: the sequence is sorted_sequence taken in sorter's order along the last dim.
  Tensor sorted = in.size() > 2 && in[2].defined() ? ops::gather(in[0], -1, in[2]) : in[0];
  Tensor seq = as_contiguous(convert(sorted, ct)), v = as_contiguous(convert(in[1], ct));
  const bool right = ss_right(op.name, attrs);
  const int64_t L = seq.sizes().back(), n = v.numel();
  const int64_t per_row = seq.dim() > 1 ? std::max<int64_t>(1, v.dim() ? v.sizes().back() : 1) : n;
  TP_DISPATCH_ALL(ct, "searchsorted", ([&]<class T>() {
    const T* sp = seq.data_as<T>();
    const T* vp = v.data_as<T>();
    int64_t* o = out.data_as<int64_t>();
    parallel_for(0, n, kGrainSize / 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const T* row = sp + (seq.dim() > 1 ? (i / per_row) * L : 0);
        const T x = vp[i];
        // NaN ranks above everything, consistent with sort.
        const T* pos = right ? std::upper_bound(row, row + L, x, [](T a, T c) { return ranks_below(a, c); })
                             : std::lower_bound(row, row + L, x, [](T a, T c) { return ranks_below(a, c); });
        o[i] = pos - row;
      }
    });
  }));
  return {convert(out, om[0].dtype)};
}
std::vector<Tensor> bucketize_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  return call_op(TP_OP("searchsorted"), {in[1], in[0], Tensor()},
                 {{"right", attrs.get_or("right", false)}, {"out_int32", attrs.get_or("out_int32", false)}});
}

// ---------------------------------------------------------------------------
// randperm: every position draws a 64-bit Philox key; the permutation is the
// order of the keys (ties by position). Keys depend only on (seed, counter),
// so the result does not depend on the thread count.
std::vector<TensorMeta> randperm_infer(const OpDef& op, const std::vector<TensorMeta>&, const Attrs& attrs) {
  const int64_t n = attrs.get_int("n");
  TP_CHECK(n >= 0, ValueError, op.name, ": n must be non-negative, got ", n);
  return {TensorMeta::contiguous({n}, attrs.get_or<DType>("dtype", DType::Int64))};
}
std::vector<Tensor> randperm_cpu(const OpDef& op, const std::vector<Tensor>&, const Attrs& attrs,
                                 const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  const int64_t n = out.numel();
  if (n == 0) return {out};
  const int64_t counters = (n + 1) / 2;
  const PhiloxRange pr = generator_reserve(generator_attr(attrs), static_cast<uint64_t>(counters));
  std::vector<uint64_t> key(static_cast<size_t>(n));
  parallel_for(0, counters, kGrainSize / 8, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      uint32_t w[4];
      philox4x32(pr.first + static_cast<uint64_t>(c), pr.key, w);
      for (int64_t j = 0; j < 2 && 2 * c + j < n; ++j) key[2 * c + j] = (uint64_t{w[2 * j]} << 32) | w[2 * j + 1];
    }
  });
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), int64_t{0});
  std::sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return key[a] != key[b] ? key[a] < key[b] : a < b; });
  TP_DISPATCH_ALL(out.dtype(), op.name, ([&]<class T>() {
    T* o = out.data_as<T>();
    for (int64_t i = 0; i < n; ++i) o[i] = cast_value<T>(idx[i]);
  }));
  return {out};
}

}  // namespace

void register_sort_ops() {
  auto reg = [](OpDef d) { register_op(d); };
  reg({.name = "sort",
       .schema = "sort(Tensor self, int dim=-1, bool descending=False, *, bool? stable=False) -> (Tensor values, Tensor indices)",
       .infer = &sort_infer, .cpu = &sort_cpu, .backward = &sort_backward});
  reg({.name = "argsort",
       .schema = "argsort(Tensor self, int dim=-1, bool descending=False, *, bool stable=False) -> Tensor",
       .decompose = &argsort_decompose});
  reg({.name = "msort", .schema = "msort(Tensor self) -> Tensor", .decompose = &msort_decompose});
  reg({.name = "topk",
       .schema = "topk(Tensor self, int k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)",
       .infer = &topk_infer, .cpu = &topk_cpu, .backward = &sort_backward});
  reg({.name = "kthvalue",
       .schema = "kthvalue(Tensor self, int k, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)",
       .tags = kReduction, .infer = &kth_infer<false>, .cpu = &kth_cpu<false>, .backward = &reduce_select_backward});
  reg({.name = "median.dim",
       .schema = "median.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
       .tags = kReduction, .infer = &kth_infer<true>, .cpu = &kth_cpu<true>, .backward = &reduce_select_backward});
  reg({.name = "median", .schema = "median(Tensor self) -> Tensor", .decompose = &median_decompose});
  reg({.name = "unique",
       .schema = "unique(Tensor self, bool sorted=True, bool return_inverse=False, bool return_counts=False, int? dim=None) -> (Tensor, Tensor, Tensor)",
       .tags = kNondeterministicShape, .infer = &unique_infer, .cpu = &unique_cpu<true>});
  reg({.name = "unique_consecutive",
       .schema = "unique_consecutive(Tensor self, bool return_inverse=False, bool return_counts=False, int? dim=None) -> (Tensor, Tensor, Tensor)",
       .tags = kNondeterministicShape, .infer = &unique_infer, .cpu = &unique_cpu<false>});
  reg({.name = "count_nonzero", .schema = "count_nonzero(Tensor self, int[1]? dim=None) -> Tensor",
       .decompose = &count_nonzero_decompose});
  reg({.name = "repeat_interleave.self_int",
       .schema = "repeat_interleave.self_int(Tensor self, int repeats, int? dim=None, *, int? output_size=None) -> Tensor",
       .decompose = &ri_int_decompose});
  reg({.name = "repeat_interleave.self_Tensor",
       .schema = "repeat_interleave.self_Tensor(Tensor self, Tensor repeats, int? dim=None, *, int? output_size=None) -> Tensor",
       .num_inputs = 2, .decompose = &ri_tensor_decompose});
  reg({.name = "repeat_interleave.Tensor", .schema = "repeat_interleave.Tensor(Tensor repeats, *, int? output_size=None) -> Tensor",
       .tags = kNondeterministicShape, .infer = &ri_index_infer, .cpu = &ri_index_cpu});
  reg({.name = "searchsorted",
       .schema = "searchsorted(Tensor sorted_sequence, Tensor self, *, bool out_int32=False, bool right=False, "
                 "str? side=None, Tensor? sorter=None) -> Tensor",
       .num_inputs = 3, .infer = &ss_infer, .cpu = &ss_cpu});
  reg({.name = "bucketize", .schema = "bucketize(Tensor self, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor",
       .num_inputs = 2, .decompose = &bucketize_decompose});
  reg({.name = "randperm",
       .schema = "randperm(int n, *, Generator? generator=None, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor",
       .tags = kRandom | kFactory, .num_inputs = 0, .infer = &randperm_infer, .cpu = &randperm_cpu});
}

}  // namespace tp
