// Counting, scanning and sampling operators with their own CPU kernels:
// bincount, histc, histogram, mode, cummax / cummin, multinomial,
// tril_indices / triu_indices.
//
// They read their data to decide result sizes (bincount, histc's data range)
// or walk slices in order (mode, cummax), which no composite of existing
// operators does in one pass (a doubling scan of cummax built from where/cat
// was hundreds of times slower than PyTorch). Every kernel handles all dtypes itself (kAllDTypes): inputs are
// converted once to int64 / float64 / the compute type, results converted to
// the dtype PyTorch gives. On CUDA they run on the host (cuda/host_kernels.cpp).
#include <algorithm>
#include <cmath>
#include <mutex>
#include <numeric>

#include "core/parallel.h"
#include "ops/dispatch.h"
#include "ops/families.h"
#include "ops/generator.h"
#include "ops/kernel_util.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tp {
namespace {

using TVec = std::vector<Tensor>;
using MVec = std::vector<TensorMeta>;

DType compute_of(DType d) {
  if (d == DType::Bool) return DType::Bool;
  if (d == DType::Float64) return DType::Float64;
  if (is_floating(d)) return DType::Float32;
  return DType::Int64;
}

// ---- bincount ----
// Without weights the counts are int64; float32 weights give float32 sums and
// every other weight dtype float64 (PyTorch's rule).
DType bincount_dtype(const MVec& in) {
  if (!in[1].defined) return DType::Int64;
  return in[1].dtype == DType::Float32 ? DType::Float32 : DType::Float64;
}

MVec bincount_infer(const OpDef& op, const MVec& in, const Attrs& at) {
  TP_CHECK(in[0].sizes.size() == 1 && !is_floating(in[0].dtype) && in[0].dtype != DType::Bool, ValueError, op.name,
           ": expected a 1-D tensor of non-negative integers, got shape ", shape_str(in[0].sizes), " and dtype ",
           dtype_name(in[0].dtype));
  if (in[1].defined)
    TP_CHECK(in[1].sizes == in[0].sizes, ValueError, op.name, ": weights should have the same shape as input, got ",
             shape_str(in[1].sizes), " and ", shape_str(in[0].sizes));
  TP_CHECK(at.get_int("minlength") >= 0, ValueError, op.name, ": minlength should be >= 0, got ",
           at.get_int("minlength"));
  return {TensorMeta::contiguous({-1}, bincount_dtype(in))};
}

TVec bincount_cpu(const OpDef& op, const TVec& in, const Attrs& at, const MVec&) {
  const Tensor x = convert(as_contiguous(in[0]), DType::Int64);
  const int64_t* p = x.data_as<int64_t>();
  const int64_t n = x.numel();
  int64_t bins = at.get_int("minlength");
  for (int64_t i = 0; i < n; ++i) {
    TP_CHECK(p[i] >= 0, ValueError, op.name, ": expected non-negative input values, got ", p[i], " at position ", i);
    bins = std::max(bins, p[i] + 1);
  }
  const bool weighted = in[1].defined();
  const DType out_t = weighted ? (in[1].dtype() == DType::Float32 ? DType::Float32 : DType::Float64) : DType::Int64;
  if (!weighted) {
    Tensor out = alloc_out(TensorMeta::contiguous({bins}, DType::Int64));
    int64_t* o = out.data_as<int64_t>();
    std::fill(o, o + bins, int64_t{0});
    for (int64_t i = 0; i < n; ++i) ++o[p[i]];
    return {out};
  }
  const Tensor w = convert(as_contiguous(in[1]), DType::Float64);
  const double* wp = w.data_as<double>();
  Tensor acc = alloc_out(TensorMeta::contiguous({bins}, DType::Float64));
  double* o = acc.data_as<double>();
  std::fill(o, o + bins, 0.0);
  for (int64_t i = 0; i < n; ++i) o[p[i]] += wp[i];
  return {convert(acc, out_t)};
}

// The weights' gradient: each weight adds to the bin of its value, so it gets
// that bin's gradient (PyTorch defines none; a gather is the exact derivative).
TVec bincount_backward(const BackwardArgs& a) {
  if (a.needs_grad.size() < 2 || !a.needs_grad[1] || !a.grad_outputs[0].defined()) return {Tensor(), Tensor()};
  const Tensor idx = ops::to_dtype(a.inputs[0], DType::Int64);
  return {Tensor(), ops::to_dtype(ops::index_select(a.grad_outputs[0], 0, idx), a.inputs[1].dtype())};
}

// ---- histc / histogram ----
// Bin edges as PyTorch's CPU linspace computes them, in the input's floating
// type T: the first (bins + 1) / 2 count up from lo, the rest back from hi, each
// one fused multiply-add (so both ends are exact and the edges match its).
template <class T>
std::vector<T> linspace_edges(T lo, T hi, int64_t bins) {
  const int64_t n = bins + 1;
  std::vector<T> e(static_cast<size_t>(n));
  const T step = (hi - lo) / static_cast<T>(bins);
  for (int64_t i = 0; i < n; ++i)
    e[static_cast<size_t>(i)] =
        i < n / 2 ? std::fma(step, static_cast<T>(i), lo) : std::fma(-step, static_cast<T>(n - 1 - i), hi);
  return e;
}

// The bin of v among sorted edges (the last bin closed on the right), or -1.
// With uniform edges the position is computed, then settled against the edges
// themselves so a value on an edge lands where the edges say.
template <class T>
int64_t bin_of(T v, const std::vector<T>& e, bool uniform) {
  const int64_t bins = static_cast<int64_t>(e.size()) - 1;
  if (!(v >= e.front() && v <= e.back())) return -1;  // NaN too
  int64_t lo = 0, hi = bins + 1;
  if (uniform) {
    const int64_t guess = static_cast<int64_t>((v - e.front()) * static_cast<T>(bins) / (e.back() - e.front()));
    lo = std::clamp<int64_t>(guess - 1, 0, bins);
    hi = std::clamp<int64_t>(guess + 2, 0, bins + 1);
  }
  int64_t pos = std::upper_bound(e.begin() + lo, e.begin() + hi, v) - e.begin() - 1;
  return std::min(pos, bins - 1);
}

// float16 / bfloat16 (histc): PyTorch rounds the range ends to the 16-bit type
// and computes each value's bin in it, rounding after every operation, with no
// settling against edges: bin = (v - lo) * bins / (hi - lo), truncated (values
// are held in float and rounded through H).
template <class H>
float round16(float v) {
  return static_cast<float>(H(v));
}

template <class H>
int64_t bin_of16(float v, float lo, float hi, int64_t bins) {
  auto r = round16<H>;
  lo = r(lo), hi = r(hi);
  if (!(v >= lo && v <= hi)) return -1;
  const float q = r(r(r(v - lo) * r(static_cast<float>(bins))) / r(hi - lo));
  return std::min(static_cast<int64_t>(q), bins - 1);
}

// The data range when none is given: the smallest and largest value (NaNs
// skipped; an infinite value makes the range an error, as in PyTorch).
template <class T>
void data_range(const T* p, int64_t n, T& lo, T& hi) {
  bool any = false;
  for (int64_t i = 0; i < n; ++i) {
    if (p[i] != p[i]) continue;
    if (!any || p[i] < lo) lo = p[i];
    if (!any || p[i] > hi) hi = p[i];
    any = true;
  }
}

template <class T>
void check_range(const char* op, T lo, T hi) {
  TP_CHECK(std::isfinite(static_cast<double>(lo)) && std::isfinite(static_cast<double>(hi)), ValueError, op,
           ": range of [", static_cast<double>(lo), ", ", static_cast<double>(hi), "] is not finite");
  TP_CHECK(lo <= hi, ValueError, op, ": max must be larger than min, got min=", static_cast<double>(lo),
           " max=", static_cast<double>(hi));
}

MVec histc_infer(const OpDef& op, const MVec& in, const Attrs& at) {
  TP_CHECK(is_floating(in[0].dtype), TypeError, op.name, ": expected a floating-point tensor, got ",
           dtype_name(in[0].dtype));
  TP_CHECK(at.get_int("bins") > 0, ValueError, op.name, ": bins must be > 0, got ", at.get_int("bins"));
  return {TensorMeta::contiguous({at.get_int("bins")}, in[0].dtype)};
}

TVec histc_cpu(const OpDef& op, const TVec& in, const Attrs& at, const MVec& om) {
  const Tensor x = convert(as_contiguous(in[0]), compute_of(in[0].dtype()));
  const int64_t bins = at.get_int("bins");
  Tensor out;
  TP_DISPATCH_FLOATING(x.dtype(), op.name, ([&]<class T>() {
    const T* p = x.data_as<T>();
    T lo = static_cast<T>(at.get_scalar("min").to<double>()), hi = static_cast<T>(at.get_scalar("max").to<double>());
    if (lo == hi) data_range(p, x.numel(), lo, hi);
    if (lo == hi) lo -= 1, hi += 1;
    check_range(op.name, lo, hi);
    std::vector<double> h(static_cast<size_t>(bins), 0.0);
    // Counts are integers, so per-chunk histograms merged in any order are exact.
    std::mutex merge;
    auto count = [&](auto bin) {
      parallel_for(0, x.numel(), kGrainSize, [&](int64_t b0, int64_t e0) {
        std::vector<double> local(static_cast<size_t>(bins), 0.0);
        for (int64_t i = b0; i < e0; ++i) {
          const int64_t b = bin(p[i]);
          if (b >= 0) local[static_cast<size_t>(b)] += 1;
        }
        std::lock_guard<std::mutex> lock(merge);
        for (int64_t b = 0; b < bins; ++b) h[static_cast<size_t>(b)] += local[static_cast<size_t>(b)];
      });
    };
    const DType narrow = in[0].dtype();
    if (narrow == DType::Float16) {
      count([&](T v) { return bin_of16<Half>(static_cast<float>(v), static_cast<float>(lo), static_cast<float>(hi), bins); });
    } else if (narrow == DType::BFloat16) {
      count([&](T v) {
        return bin_of16<BFloat16>(static_cast<float>(v), static_cast<float>(lo), static_cast<float>(hi), bins);
      });
    } else {
      const std::vector<T> e = linspace_edges(lo, hi, bins);
      count([&](T v) { return bin_of(v, e, true); });
    }
    Tensor acc = alloc_out(TensorMeta::contiguous({bins}, DType::Float64));
    std::copy(h.begin(), h.end(), acc.data_as<double>());
    out = convert(acc, om[0].dtype);
  }));
  return {out};
}

MVec histogram_infer(const OpDef& op, const MVec& in, const Attrs& at) {
  TP_CHECK(is_floating(in[0].dtype), TypeError, op.name, ": expected a floating-point input, got ",
           dtype_name(in[0].dtype));
  const bool edges_given = in.size() == 3;
  const TensorMeta& w = in[edges_given ? 2 : 1];
  int64_t bins = 0;
  if (edges_given) {
    TP_CHECK(in[1].sizes.size() == 1 && in[1].sizes[0] >= 1 && in[1].dtype == in[0].dtype, ValueError, op.name,
             ": bins must be a 1-D tensor of at least one edge with the input's dtype, got shape ",
             shape_str(in[1].sizes), " and dtype ", dtype_name(in[1].dtype));
    bins = in[1].sizes[0] - 1;
  } else {
    bins = at.get_int("bins");
    TP_CHECK(bins > 0, ValueError, op.name, ": bins must be > 0, got ", bins);
  }
  if (w.defined)
    TP_CHECK(w.sizes == in[0].sizes && w.dtype == in[0].dtype, ValueError, op.name,
             ": weight must have the input's shape and dtype, got ", shape_str(w.sizes), " ", dtype_name(w.dtype),
             " for input ", shape_str(in[0].sizes), " ", dtype_name(in[0].dtype));
  return {TensorMeta::contiguous({bins}, in[0].dtype), TensorMeta::contiguous({bins + 1}, in[0].dtype)};
}

TVec histogram_cpu(const OpDef& op, const TVec& in, const Attrs& at, const MVec& om) {
  const bool edges_given = in.size() == 3;
  const DType ct = compute_of(in[0].dtype());
  const Tensor x = convert(as_contiguous(in[0]), ct);
  const Tensor& w0 = in[edges_given ? 2 : 1];
  const Tensor w = w0.defined() ? convert(as_contiguous(w0), DType::Float64) : Tensor();
  const bool density = at.get_or("density", false);
  Tensor hist, edges;
  TP_DISPATCH_FLOATING(ct, op.name, ([&]<class T>() {
    const T* p = x.data_as<T>();
    std::vector<T> e;
    if (edges_given) {
      const Tensor b = convert(as_contiguous(in[1]), ct);
      e.assign(b.data_as<T>(), b.data_as<T>() + b.numel());
      for (size_t i = 1; i < e.size(); ++i)
        TP_CHECK(e[i - 1] <= e[i], ValueError, op.name, ": bin edges must be increasing, got ",
                 static_cast<double>(e[i - 1]), " before ", static_cast<double>(e[i]));
    } else {
      T lo = 0, hi = 0;
      if (!at.is_none("range_min") || !at.is_none("range_max")) {
        TP_CHECK(!at.is_none("range_min") && !at.is_none("range_max"), ValueError, op.name,
                 ": range must be a pair (min, max)");
        lo = static_cast<T>(at.get_double("range_min"));
        hi = static_cast<T>(at.get_double("range_max"));
      } else if (x.numel() == 0) {
        hi = 1;  // PyTorch's range for no data: [0, 1]
      } else {
        data_range(p, x.numel(), lo, hi);
      }
      if (lo == hi) lo -= static_cast<T>(0.5), hi += static_cast<T>(0.5);
      check_range(op.name, lo, hi);
      e = linspace_edges(lo, hi, om[0].sizes[0]);
    }
    const int64_t bins = static_cast<int64_t>(e.size()) - 1;
    // Sums in the input's type, in element order, as PyTorch accumulates (float32 weights
    // summed in double would differ from it in the last digits).
    std::vector<T> h(static_cast<size_t>(bins), T(0));
    const double* wp = w.defined() ? w.data_as<double>() : nullptr;
    for (int64_t i = 0; i < x.numel() && bins > 0; ++i) {
      const int64_t b = bin_of(p[i], e, !edges_given);
      if (b >= 0) h[static_cast<size_t>(b)] += wp ? static_cast<T>(wp[i]) : T(1);
    }
    if (density) {  // in the input's type, as PyTorch: count / (total * bin width)
      T total = 0;
      for (T v : h) total += v;
      for (int64_t b = 0; b < bins; ++b)
        h[static_cast<size_t>(b)] /= total * (e[static_cast<size_t>(b + 1)] - e[static_cast<size_t>(b)]);
    }
    Tensor hacc = alloc_out(TensorMeta::contiguous({bins}, ct));
    std::copy(h.begin(), h.end(), hacc.data_as<T>());
    Tensor eacc = alloc_out(TensorMeta::contiguous({bins + 1}, ct));
    std::copy(e.begin(), e.end(), eacc.data_as<T>());
    hist = convert(hacc, om[0].dtype);
    edges = convert(eacc, om[1].dtype);
  }));
  return {hist, edges};
}

// ---- mode ----
// The most frequent value of each slice along dim; among equally frequent
// values the smallest, and as its index the last position holding it (what
// PyTorch returns). NaNs count as one value, ranked above every number.
int64_t mode_dim(const TensorMeta& m, const Attrs& at, const char* op) {
  const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(m.sizes.size()));
  const int64_t d = at.get_int("dim");
  TP_CHECK(d >= -n && d < n, IndexError, op, ": dimension out of range (expected to be in range of [", -n, ", ",
           n - 1, "], but got ", d, ")");
  return d < 0 ? d + n : d;
}

MVec mode_infer(const OpDef& op, const MVec& in, const Attrs& at) {
  const int64_t d = mode_dim(in[0], at, op.name);
  Shape s = in[0].sizes;
  if (!s.empty()) {
    TP_CHECK(s[static_cast<size_t>(d)] > 0, IndexError, op.name, ": cannot compute the mode of dimension ", d,
             " of size 0 (input shape ", shape_str(in[0].sizes), ")");
    if (at.get_or("keepdim", false)) s[static_cast<size_t>(d)] = 1;
    else s.erase(s.begin() + d);
  }
  return {TensorMeta::contiguous(s, in[0].dtype), TensorMeta::contiguous(s, DType::Int64)};
}

template <class T>
bool before(T a, T b) {  // strict order with NaN last
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return false;
    if (b != b) return true;
  }
  return a < b;
}
template <class T>
bool same(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a && b != b) return true;
  }
  return a == b;
}

TVec mode_cpu(const OpDef& op, const TVec& in, const Attrs& at, const MVec& om) {
  const DType ct = compute_of(in[0].dtype());
  const Tensor x = convert(as_contiguous(in[0]), ct);
  Tensor val = alloc_out(TensorMeta::contiguous(om[0].sizes, ct)), ind = alloc_out(om[1]);
  if (val.numel() == 0) return {convert(val, om[0].dtype), ind};
  const int64_t d = mode_dim(TensorMeta::contiguous(x.sizes(), x.dtype()), at, op.name);
  const Shape& s = x.sizes();
  int64_t D = 1, inner = 1, outer = 1;
  if (!s.empty()) {
    D = s[static_cast<size_t>(d)];
    for (size_t i = static_cast<size_t>(d) + 1; i < s.size(); ++i) inner *= s[i];
    for (size_t i = 0; i < static_cast<size_t>(d); ++i) outer *= s[i];
  }
  TP_DISPATCH_ALL(ct, op.name, ([&]<class T>() {
    const T* p = x.data_as<T>();
    T* v = val.data_as<T>();
    int64_t* o = ind.data_as<int64_t>();
    parallel_for(0, outer * inner, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, D * 8)),
                 [&](int64_t b, int64_t e) {
                   std::vector<int64_t> idx(static_cast<size_t>(D));
                   for (int64_t sl = b; sl < e; ++sl) {
                     const T* row = p + (sl / inner) * D * inner + sl % inner;
                     std::iota(idx.begin(), idx.end(), int64_t{0});
                     std::sort(idx.begin(), idx.end(), [&](int64_t i, int64_t j) {
                       const T a = row[i * inner], c = row[j * inner];
                       if (before(a, c)) return true;
                       if (before(c, a)) return false;
                       return i < j;
                     });
                     int64_t best = 0, best_count = 0;
                     for (int64_t i = 0; i < D;) {
                       int64_t j = i + 1;
                       while (j < D && same(row[idx[j] * inner], row[idx[i] * inner])) ++j;
                       if (j - i > best_count) best_count = j - i, best = idx[j - 1];
                       i = j;
                     }
                     v[sl] = row[best * inner];
                     o[sl] = best;
                   }
                 });
  }));
  return {convert(val, om[0].dtype), ind};
}

// The gradient goes to the chosen position of each slice (zeros made beside x:
// a host tensor would not combine with a CUDA x).
TVec mode_backward(const BackwardArgs& a) {
  if (!a.needs_grad[0] || !a.grad_outputs[0].defined()) return {Tensor()};
  const Tensor& x = a.inputs[0];
  if (x.dim() == 0) return {a.grad_outputs[0]};
  const int64_t d = mode_dim(TensorMeta::contiguous(x.sizes(), x.dtype()), a.attrs, "mode");
  Tensor g = a.grad_outputs[0], i = a.outputs[1];
  if (!a.attrs.get_or("keepdim", false)) g = ops::unsqueeze(g, d), i = ops::unsqueeze(i, d);
  return {ops::scatter(ops::zeros_like(x, g.dtype()), d, i, g)};
}

// ---- cummax / cummin ----
// One pass along dim per slice: a later element takes over when it is NaN, or
// when the running value is not NaN and the element is >= (cummax) / <= (cummin)
// it, so ties and NaN go to the latest position, as in PyTorch.
MVec cumext_infer(const OpDef& op, const MVec& in, const Attrs& at) {
  mode_dim(in[0], at, op.name);
  return {TensorMeta::contiguous(in[0].sizes, in[0].dtype), TensorMeta::contiguous(in[0].sizes, DType::Int64)};
}

template <bool IsMax>
TVec cumext_cpu(const OpDef& op, const TVec& in, const Attrs& at, const MVec& om) {
  const DType ct = compute_of(in[0].dtype());
  const Tensor x = convert(as_contiguous(in[0]), ct);
  Tensor val = alloc_out(TensorMeta::contiguous(om[0].sizes, ct)), ind = alloc_out(om[1]);
  if (x.numel() == 0) return {convert(val, om[0].dtype), ind};
  const int64_t d = mode_dim(TensorMeta::contiguous(x.sizes(), x.dtype()), at, op.name);
  const Shape& s = x.sizes();
  int64_t D = 1, inner = 1, outer = 1;
  if (!s.empty()) {
    D = s[static_cast<size_t>(d)];
    for (size_t i = static_cast<size_t>(d) + 1; i < s.size(); ++i) inner *= s[i];
    for (size_t i = 0; i < static_cast<size_t>(d); ++i) outer *= s[i];
  }
  TP_DISPATCH_ALL(ct, op.name, ([&]<class T>() {
    const T* p = x.data_as<T>();
    T* v = val.data_as<T>();
    int64_t* o = ind.data_as<int64_t>();
    // Slices of one outer index run side by side over `inner` (contiguous rows).
    parallel_for(0, outer, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, D * inner)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t ou = b; ou < e; ++ou) {
                     const int64_t base = ou * D * inner;
                     if (inner == 1) {  // the common last-dim scan: one running value in registers
                       T best = p[base];
                       int64_t at = 0;
                       v[base] = best;
                       o[base] = 0;
                       for (int64_t k = 1; k < D; ++k) {
                         const T cur = p[base + k];
                         bool take;
                         if constexpr (std::is_floating_point_v<T>) {
                           take = cur != cur || (best == best && (IsMax ? cur >= best : cur <= best));
                         } else {
                           take = IsMax ? cur >= best : cur <= best;
                         }
                         if (take) best = cur, at = k;
                         v[base + k] = best;
                         o[base + k] = at;
                       }
                       continue;
                     }
                     for (int64_t in_ = 0; in_ < inner; ++in_) {
                       v[base + in_] = p[base + in_];
                       o[base + in_] = 0;
                     }
                     for (int64_t k = 1; k < D; ++k) {
                       const int64_t row = base + k * inner, prev = row - inner;
                       for (int64_t in_ = 0; in_ < inner; ++in_) {
                         const T cur = p[row + in_], best = v[prev + in_];
                         bool take;
                         if constexpr (std::is_floating_point_v<T>) {
                           take = cur != cur || (best == best && (IsMax ? cur >= best : cur <= best));
                         } else {
                           take = IsMax ? cur >= best : cur <= best;
                         }
                         v[row + in_] = take ? cur : best;
                         o[row + in_] = take ? k : o[prev + in_];
                       }
                     }
                   }
                 });
  }));
  return {convert(val, om[0].dtype), ind};
}

// The gradient of each prefix's value goes to the position it came from.
TVec cumext_backward(const BackwardArgs& a) {
  if (!a.needs_grad[0] || !a.grad_outputs[0].defined()) return {Tensor()};
  const Tensor& x = a.inputs[0];
  if (x.dim() == 0) return {a.grad_outputs[0]};
  const int64_t d = mode_dim(TensorMeta::contiguous(x.sizes(), x.dtype()), a.attrs, "cummax");
  const Tensor& g = a.grad_outputs[0];
  return {ops::scatter_add(ops::zeros_like(x, g.dtype()), d, a.outputs[1], g)};
}

// ---- multinomial ----
// With replacement: inverse CDF of a uniform draw (binary search in the running
// sums). Without: the exponential race, key_i = E_i / w_i with E_i standard
// exponential; sorting by key gives the order of sequential draws without
// replacement (the first k keys are a sample of k), and a zero weight never wins.
MVec multinomial_infer(const OpDef& op, const MVec& in, const Attrs& at) {
  const auto& s = in[0].sizes;
  TP_CHECK(s.size() == 1 || s.size() == 2, ValueError, op.name, ": prob_dist must be 1 or 2 dim, got shape ",
           shape_str(s));
  TP_CHECK(is_floating(in[0].dtype), TypeError, op.name, ": prob_dist must be a floating-point tensor, got ",
           dtype_name(in[0].dtype));
  const int64_t k = at.get_int("num_samples"), cats = s.back();
  TP_CHECK(k > 0, ValueError, op.name, ": cannot sample n_sample <= 0 samples, got ", k);
  TP_CHECK(cats > 0, ValueError, op.name, ": number of categories cannot be zero (shape ", shape_str(s), ")");
  TP_CHECK(at.get_or("replacement", false) || k <= cats, ValueError, op.name, ": cannot sample n_sample > ",
           "prob_dist.size(-1) samples without replacement (n_sample=", k, ", categories=", cats, ")");
  Shape out = s;
  out.back() = k;
  return {TensorMeta::contiguous(out, DType::Int64)};
}

TVec multinomial_cpu(const OpDef& op, const TVec& in, const Attrs& at, const MVec& om) {
  const Tensor w = convert(as_contiguous(in[0]), DType::Float64);
  Tensor out = alloc_out(om[0]);
  const int64_t cats = w.sizes().back(), rows = w.numel() / cats, k = om[0].sizes.back();
  const bool repl = at.get_or("replacement", false);
  const double* wp = w.data_as<double>();
  for (int64_t r = 0; r < rows; ++r) {
    double total = 0;
    int64_t positive = 0;
    for (int64_t c = 0; c < cats; ++c) {
      const double v = wp[r * cats + c];
      TP_CHECK(std::isfinite(v) && v >= 0, ValueError, op.name,
               ": probability tensor contains either `inf`, `nan` or element < 0 (", v, " in row ", r, ")");
      total += v;
      positive += v > 0;
    }
    TP_CHECK(total > 0, ValueError, op.name, ": invalid multinomial distribution (sum of probabilities <= 0) in row ",
             r);
    TP_CHECK(repl || positive >= k, ValueError, op.name,
             ": invalid multinomial distribution (with replacement=False, not enough non-negative category to sample):"
             " row ", r, " has ", positive, " positive weights for ", k, " samples");
  }
  // One uniform double per draw; two per Philox counter.
  const int64_t per_row = repl ? k : cats;
  const int64_t draws = rows * per_row;
  const PhiloxRange pr = generator_reserve(generator_attr(at), static_cast<uint64_t>((draws + 1) / 2));
  auto uniform = [&](int64_t i) {
    uint32_t wd[4];
    philox4x32(pr.first + static_cast<uint64_t>(i / 2), pr.key, wd);
    return i % 2 == 0 ? unit_double(wd[0], wd[1]) : unit_double(wd[2], wd[3]);
  };
  int64_t* o = out.data_as<int64_t>();
  parallel_for(0, rows, 1, [&](int64_t b, int64_t e) {
    std::vector<double> acc(static_cast<size_t>(cats));
    std::vector<int64_t> idx(static_cast<size_t>(cats));
    for (int64_t r = b; r < e; ++r) {
      const double* row = wp + r * cats;
      if (repl) {
        std::partial_sum(row, row + cats, acc.begin());
        const double total = acc.back();
        for (int64_t j = 0; j < k; ++j) {
          const double t = uniform(r * per_row + j) * total;
          int64_t c = std::upper_bound(acc.begin(), acc.end(), t) - acc.begin();
          c = std::min(c, cats - 1);
          while (row[c] == 0 && c > 0) --c;  // rounding at the top end must not pick an empty category
          o[r * k + j] = c;
        }
      } else {
        for (int64_t c = 0; c < cats; ++c) {
          const double u = uniform(r * per_row + c);
          acc[static_cast<size_t>(c)] =
              row[c] > 0 ? -std::log1p(-u) / row[c] : std::numeric_limits<double>::infinity();
        }
        std::iota(idx.begin(), idx.end(), int64_t{0});
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t i, int64_t j) {
          return acc[static_cast<size_t>(i)] != acc[static_cast<size_t>(j)] ? acc[static_cast<size_t>(i)] < acc[static_cast<size_t>(j)] : i < j;
        });
        for (int64_t j = 0; j < k; ++j) o[r * k + j] = idx[static_cast<size_t>(j)];
      }
    }
  });
  return {out};
}

// ---- tril_indices / triu_indices ----
// The (row, col) coordinates of the lower (upper) triangle of a row x col
// matrix, diagonal `offset` included, in row-major order.
template <bool Lower>
int64_t tri_count(int64_t rows, int64_t cols, int64_t off) {
  int64_t n = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t c = Lower ? std::clamp<int64_t>(i + off + 1, 0, cols) : cols - std::clamp<int64_t>(i + off, 0, cols);
    n += c;
  }
  return n;
}

template <bool Lower>
MVec tri_infer(const OpDef& op, const MVec&, const Attrs& at) {
  const int64_t rows = at.get_int("row"), cols = at.get_int("col");
  TP_CHECK(rows >= 0 && cols >= 0, ValueError, op.name, ": row and col must be non-negative, got row=", rows,
           " col=", cols);
  const DType t = at.get_or<DType>("dtype", DType::Int64);
  TP_CHECK(t == DType::Int64 || t == DType::Int32, TypeError, op.name, ": dtype must be int64 or int32, got ",
           dtype_name(t));
  return {TensorMeta::contiguous({2, tri_count<Lower>(rows, cols, at.get_int("offset"))}, t)};
}

template <bool Lower>
TVec tri_cpu(const OpDef&, const TVec&, const Attrs& at, const MVec& om) {
  const int64_t rows = at.get_int("row"), cols = at.get_int("col"), off = at.get_int("offset");
  const int64_t n = om[0].sizes[1];
  Tensor acc = alloc_out(TensorMeta::contiguous({2, n}, DType::Int64));
  int64_t* r = acc.data_as<int64_t>();
  int64_t* c = r + n;
  int64_t k = 0;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t lo = Lower ? 0 : std::clamp<int64_t>(i + off, 0, cols);
    const int64_t hi = Lower ? std::clamp<int64_t>(i + off + 1, 0, cols) : cols;
    for (int64_t j = lo; j < hi; ++j, ++k) r[k] = i, c[k] = j;
  }
  return {convert(acc, om[0].dtype)};
}

void reg(OpDef d) { register_op(d); }

}  // namespace

void register_counting_ops() {
  reg({.name = "bincount", .schema = "bincount(Tensor self, Tensor? weights=None, int minlength=0) -> Tensor",
       .tags = kAllDTypes | kNondeterministicShape, .num_inputs = 2, .infer = &bincount_infer, .cpu = &bincount_cpu,
       .backward = &bincount_backward});
  reg({.name = "histc", .schema = "histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor",
       .tags = kAllDTypes, .num_inputs = 1, .infer = &histc_infer, .cpu = &histc_cpu});
  reg({.name = "histogram.bins_tensor",
       .schema = "histogram.bins_tensor(Tensor self, Tensor bins, *, Tensor? weight=None, bool density=False) -> "
                 "(Tensor hist, Tensor bin_edges)",
       .tags = kAllDTypes, .num_inputs = 3, .infer = &histogram_infer, .cpu = &histogram_cpu});
  reg({.name = "histogram.bin_ct",
       .schema = "histogram.bin_ct(Tensor self, int bins=100, *, float? range_min=None, float? range_max=None, "
                 "Tensor? weight=None, bool density=False) -> (Tensor hist, Tensor bin_edges)",
       .tags = kAllDTypes, .num_inputs = 2, .infer = &histogram_infer, .cpu = &histogram_cpu});
  reg({.name = "mode", .schema = "mode(Tensor self, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)",
       .tags = kAllDTypes | kReduction, .num_inputs = 1, .infer = &mode_infer, .cpu = &mode_cpu,
       .backward = &mode_backward});
  reg({.name = "cummax", .schema = "cummax(Tensor self, int dim) -> (Tensor values, Tensor indices)",
       .tags = kAllDTypes, .num_inputs = 1, .infer = &cumext_infer, .cpu = &cumext_cpu<true>,
       .backward = &cumext_backward});
  reg({.name = "cummin", .schema = "cummin(Tensor self, int dim) -> (Tensor values, Tensor indices)",
       .tags = kAllDTypes, .num_inputs = 1, .infer = &cumext_infer, .cpu = &cumext_cpu<false>,
       .backward = &cumext_backward});
  reg({.name = "multinomial",
       .schema = "multinomial(Tensor self, int num_samples, bool replacement=False, *, Generator? generator=None) -> Tensor",
       .tags = kAllDTypes | kRandom, .num_inputs = 1, .infer = &multinomial_infer, .cpu = &multinomial_cpu});
  reg({.name = "tril_indices",
       .schema = "tril_indices(int row, int col, int offset=0, *, ScalarType? dtype=None, Device? device=None) -> Tensor",
       .tags = kFactory | kAllDTypes, .num_inputs = 0, .infer = &tri_infer<true>, .cpu = &tri_cpu<true>});
  reg({.name = "triu_indices",
       .schema = "triu_indices(int row, int col, int offset=0, *, ScalarType? dtype=None, Device? device=None) -> Tensor",
       .tags = kFactory | kAllDTypes, .num_inputs = 0, .infer = &tri_infer<false>, .cpu = &tri_cpu<false>});
}

}  // namespace tp
