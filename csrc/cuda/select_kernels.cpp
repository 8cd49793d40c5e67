// kthvalue and median.dim on CUDA (see gap_kernels.h).
#include "core/error.h"
#include "cuda/copy.h"
#include "cuda/gap_kernels.h"
#include "cuda/kernels.h"
#include "cuda/nn_kernels.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace tp::cuda {
namespace {

constexpr int kThreads = 256;

DType pick_type(DType d) {
  switch (d) {
    case DType::Float32:
    case DType::Float64: return d;
    case DType::Float16:
    case DType::BFloat16: return DType::Float32;
    default: return DType::Int64;
  }
}
std::string pick_tag(DType c) { return c == DType::Int64 ? "i64" : c == DType::Float64 ? "f64" : "f32"; }
std::string pick_name(DType c) { return "tp_kth_pick_" + pick_tag(c); }

// Slice (o, i) of the sorted [outer, D, inner] values: entry kth, or for a
// median whose slice ends in NaN (NaN sorts last) the first NaN.
std::string pick_source(const std::string& name, DType c) {
  const bool fp = c != DType::Int64;
  return str("typedef ", fp ? float_ctype(c) : "long long", " T;\n",
             fp ? "__device__ __forceinline__ bool tp_nan(T v) { return v != v; }\n"
                : "__device__ __forceinline__ bool tp_nan(T) { return false; }\n",
             "extern \"C\" __global__ void ", name,
             "(const T* __restrict__ sv, const long long* __restrict__ si, T* __restrict__ val,\n"
             "    long long* __restrict__ ind, long long outer, long long D, long long inner, long long kth, int median) {\n"
             "  for (long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x; s < outer * inner;\n"
             "       s += (long long)gridDim.x * blockDim.x) {\n"
             "    const long long base = (s / inner) * D * inner + s % inner;\n"
             "    long long j = kth;\n"
             "    if (median && tp_nan(sv[base + (D - 1) * inner])) {\n"
             "      long long lo = 0, hi = D - 1;\n"
             "      while (lo < hi) { const long long mid = lo + (hi - lo) / 2; if (tp_nan(sv[base + mid * inner])) hi = mid; "
             "else lo = mid + 1; }\n"
             "      j = lo;\n"
             "    }\n"
             "    val[s] = sv[base + j * inner];\n"
             "    ind[s] = si[base + j * inner];\n"
             "  }\n}\n");
}

std::string qsel_name(DType c) { return "tp_kth_qsel_" + pick_tag(c); }

// kthvalue: each slice's values and positions copied into its own rows of the work buffers, then the
// CPU kernel's quickselect (`ops/sort_ops.cpp` quickselect_index: the same swaps, so the same index
// among ties) run by one thread per slice.
std::string qsel_source(const std::string& name, DType c) {
  const bool fp = c != DType::Int64;
  return str("typedef ", fp ? float_ctype(c) : "long long", " T;\n",
             fp ? "__device__ __forceinline__ bool tp_gt(T a, T b) { return (a != a && b == b) || a > b; }\n"
                : "__device__ __forceinline__ bool tp_gt(T a, T b) { return a > b; }\n",
             "extern \"C\" __global__ void ", name,
             "(const T* __restrict__ x, T* __restrict__ wv, long long* __restrict__ wi, T* __restrict__ val,\n"
             "    long long* __restrict__ ind, long long outer, long long D, long long inner, long long k) {\n"
             "  for (long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x; s < outer * inner;\n"
             "       s += (long long)gridDim.x * blockDim.x) {\n"
             "    const long long base = (s / inner) * D * inner + s % inner;\n"
             "    T* a = wv + s * D;\n"
             "    long long* ix = wi + s * D;\n"
             "    for (long long i = 0; i < D; ++i) { a[i] = x[base + i * inner]; ix[i] = i; }\n"
             "#define TP_SWP(p, q) { T tv = a[p]; a[p] = a[q]; a[q] = tv; long long ti = ix[p]; ix[p] = ix[q]; ix[q] = ti; }\n"
             "    long long lo = 0, hi = D - 1;\n"
             "    while (hi > lo) {\n"
             "      if (hi == lo + 1) { if (tp_gt(a[lo], a[hi])) TP_SWP(lo, hi); break; }\n"
             "      const long long mid = lo + (hi - lo) / 2;\n"
             "      TP_SWP(mid, lo + 1);\n"
             "      if (tp_gt(a[lo + 1], a[hi])) TP_SWP(lo + 1, hi);\n"
             "      if (tp_gt(a[lo], a[hi])) TP_SWP(lo, hi);\n"
             "      if (tp_gt(a[lo + 1], a[lo])) TP_SWP(lo + 1, lo);\n"
             "      const T pivot = a[lo];\n"
             "      long long i = lo + 1, j = hi;\n"
             "      for (;;) {\n"
             "        do ++i; while (tp_gt(pivot, a[i]));\n"
             "        do --j; while (tp_gt(a[j], pivot));\n"
             "        if (j < i) break;\n"
             "        TP_SWP(i, j);\n"
             "      }\n"
             "      TP_SWP(lo, j);\n"
             "      if (j <= k) lo = i;\n"
             "      if (j >= k) hi = j - 1;\n"
             "    }\n"
             "#undef TP_SWP\n"
             "    val[s] = a[k];\n"
             "    ind[s] = ix[k];\n"
             "  }\n}\n");
}

}  // namespace

bool select_kernel(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                   const std::vector<TensorMeta>& om, std::vector<Tensor>& out) {
  const std::string name = op.name;
  if (name != "kthvalue" && name != "median.dim") return false;
  const Tensor& x0 = in[0];
  if (x0.device().kind != Device::Kind::CUDA || om.size() != 2) return false;
  const DType dt = x0.dtype();
  if (!is_floating(dt) && dt != DType::Int64 && dt != DType::Bool) return false;  // the sort kernel's dtypes
  const int dev = x0.device().index;
  Tensor x = x0.dim() == 0 ? ops::reshape(x0, {1}) : x0;
  const int64_t dim = wrap_dim(attrs.get_or("dim", int64_t{-1}), x.dim(), op.name);
  const int64_t D = x.sizes()[static_cast<size_t>(dim)];
  const DType c = pick_type(dt);
  Tensor val = empty(om[0].sizes, c, dev), ind = empty(om[1].sizes, DType::Int64, dev);
  if (val.numel() > 0 && name == "kthvalue") {
    Tensor xc = ops::contiguous(ops::to_dtype(x, c));
    long long outer = 1, inner = 1, d = D, kth = attrs.get_int("k") - 1;
    for (int64_t k = 0; k < dim; ++k) outer *= x.sizes()[static_cast<size_t>(k)];
    for (int64_t k = dim + 1; k < x.dim(); ++k) inner *= x.sizes()[static_cast<size_t>(k)];
    Tensor wv = empty({outer * inner * D}, c, dev), wi = empty({outer * inner * D}, DType::Int64, dev);
    void* px = xc.data();
    void* pwv = wv.data();
    void* pwi = wi.data();
    void* pv = val.data();
    void* pi = ind.data();
    void* args[] = {&px, &pwv, &pwi, &pv, &pi, &outer, &d, &inner, &kth};
    launch_generated(dev, qsel_name(c), qsel_source(qsel_name(c), c), grid_1d(outer * inner, kThreads), kThreads,
                     args);
  } else if (val.numel() > 0) {
    static const OpDef& sort = get_op("sort");
    std::vector<Tensor> sorted = run_kernel(sort, {x}, {{"dim", dim}, {"descending", false}, {"stable", true}});
    Tensor sv = ops::contiguous(ops::to_dtype(sorted[0], c));
    Tensor si = ops::contiguous(sorted[1]);
    long long outer = 1, inner = 1, d = D;
    for (int64_t k = 0; k < dim; ++k) outer *= x.sizes()[static_cast<size_t>(k)];
    for (int64_t k = dim + 1; k < x.dim(); ++k) inner *= x.sizes()[static_cast<size_t>(k)];
    const bool median = name == "median.dim";
    long long kth = median ? (D - 1) / 2 : attrs.get_int("k") - 1;
    int med = median ? 1 : 0;
    void* psv = sv.data();
    void* psi = si.data();
    void* pv = val.data();
    void* pi = ind.data();
    void* args[] = {&psv, &psi, &pv, &pi, &outer, &d, &inner, &kth, &med};
    launch_generated(dev, pick_name(c), pick_source(pick_name(c), c), grid_1d(outer * inner, kThreads), kThreads,
                     args);
  }
  out = {c == dt ? val : ops::to_dtype(val, dt), ind};
  return true;
}

std::vector<std::pair<std::string, std::string>> select_kernel_sources() {
  std::vector<std::pair<std::string, std::string>> v;
  for (DType c : {DType::Float32, DType::Float64, DType::Int64}) {
    v.emplace_back(pick_name(c), pick_source(pick_name(c), c));
    v.emplace_back(qsel_name(c), qsel_source(qsel_name(c), c));
  }
  return v;
}

}  // namespace tp::cuda
