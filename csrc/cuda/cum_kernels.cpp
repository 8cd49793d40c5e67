// Scans with no CUDA path before (see gap_kernels.h), one thread per slice in
// order along the dim, slices addressed as the CPU kernels address them
// (element d of slice (o, i) of a contiguous [outer, D, inner] tensor is at
// (o * D + d) * inner + i):
//   _cumprod_backward (cumprod's gradient, exact with zeros in a slice): the
//     CPU's recurrences (ops/reduction_extra_ops.cpp, cumprod_bw_slice) in
//     double, the prefix products in a double scratch tensor; products and
//     sums with __dmul_rn / __dadd_rn, which are never contracted into FMAs,
//     so the results are the CPU's bit for bit;
//   cummax / cummin (values and int64 indices): a later element takes over
//     when it is NaN, or when the running value is not NaN and the element is
//     >= (cummax) / <= (cummin) it — the CPU's rule (ops/counting_ops.cpp),
//     so ties and NaN go to the latest position, as in PyTorch.
// Inputs are converted on the device to an exact compute type first (16-bit
// floats -> float32, bool and integers -> int64) and results converted back.
#include "core/error.h"
#include "cuda/copy.h"
#include "cuda/gap_kernels.h"
#include "cuda/kernels.h"
#include "cuda/nn_kernels.h"
#include "ops/ops.h"

namespace tp::cuda {
namespace {

constexpr int kThreads = 256;

std::string tag(DType c) { return c == DType::Int64 ? "i64" : c == DType::Float64 ? "f64" : "f32"; }
const char* ctype_of(DType c) { return c == DType::Int64 ? "long long" : c == DType::Float64 ? "double" : "float"; }

constexpr const char* kSliceLoop =
    "  for (long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x; s < outer * inner;\n"
    "       s += (long long)gridDim.x * blockDim.x) {\n"
    "    const long long base = (s / inner) * D * inner + s % inner;\n";

std::string cumprod_bw_name(DType c) { return "tp_cumprod_bw_" + tag(c); }
std::string cumprod_bw_source(DType c) {
  return str("typedef ", ctype_of(c), " T;\n", "extern \"C\" __global__ void ", cumprod_bw_name(c),
             "(const T* __restrict__ g, const T* __restrict__ x, T* __restrict__ o, double* __restrict__ prod,\n"
             "    long long outer, long long D, long long inner) {\n",
             kSliceLoop,
             "    long long z = D;\n"  // the first zero of the slice (D: none)
             "    for (long long i = 0; i < D; ++i)\n"
             "      if (x[base + i * inner] == (T)0) { z = i; break; }\n"
             "    double prefix = 1, tail = 0;\n"
             "    for (long long i = 0; i < z; ++i) {\n"
             "      prefix = __dmul_rn(prefix, (double)x[base + i * inner]);\n"
             "      prod[base + i * inner] = prefix;\n"
             "    }\n"
             "    for (long long i = D - 1; i > z; --i) o[base + i * inner] = (T)0;\n"
             "    if (z < D) {\n"
             "      const double before = z ? prod[base + (z - 1) * inner] : 1.0;\n"
             "      double run = 1, acc = 0;\n"
             "      for (long long j = z; j < D; ++j) {\n"
             "        if (j > z) run = __dmul_rn(run, (double)x[base + j * inner]);\n"
             "        acc = __dadd_rn(acc, __dmul_rn((double)g[base + j * inner], run));\n"
             "      }\n"
             "      o[base + z * inner] = (T)__dmul_rn(before, acc);\n"
             "    }\n"
             "    for (long long i = z - 1; i >= 0; --i) {\n"
             "      tail = __dadd_rn(tail, __dmul_rn((double)g[base + i * inner], prod[base + i * inner]));\n"
             "      o[base + i * inner] = (T)(tail / (double)x[base + i * inner]);\n"
             "    }\n"
             "  }\n}\n");
}

std::string cumext_name(DType c, bool is_max) { return str(is_max ? "tp_cummax_" : "tp_cummin_", tag(c)); }
std::string cumext_source(DType c, bool is_max) {
  const bool flt = c != DType::Int64;
  const std::string cmp = is_max ? "cur >= best" : "cur <= best";
  return str("typedef ", ctype_of(c), " T;\n", "extern \"C\" __global__ void ", cumext_name(c, is_max),
             "(const T* __restrict__ x, T* __restrict__ v, long long* __restrict__ ind,\n"
             "    long long outer, long long D, long long inner) {\n",
             kSliceLoop,
             "    T best = x[base];\n"
             "    long long at = 0;\n"
             "    v[base] = best;\n"
             "    ind[base] = 0;\n"
             "    for (long long k = 1; k < D; ++k) {\n"
             "      const T cur = x[base + k * inner];\n"
             "      const bool take = ",
             flt ? "cur != cur || (best == best && (" + cmp + "))" : cmp,
             ";\n"
             "      if (take) { best = cur; at = k; }\n"
             "      v[base + k * inner] = best;\n"
             "      ind[base + k * inner] = at;\n"
             "    }\n"
             "  }\n}\n");
}

DType compute_type(DType d) {
  if (d == DType::Float64) return DType::Float64;
  if (is_floating(d)) return DType::Float32;
  return DType::Int64;
}

struct Slices {
  long long outer = 1, D = 1, inner = 1;
};
Slices slices_of(const Shape& s, int64_t dim) {
  Slices r;
  if (s.empty()) return r;
  r.D = s[static_cast<size_t>(dim)];
  for (int64_t d = 0; d < dim; ++d) r.outer *= s[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(dim) + 1; d < s.size(); ++d) r.inner *= s[d];
  return r;
}

int64_t wrap(int64_t dim, int64_t nd, const char* op) {
  const int64_t n = std::max<int64_t>(1, nd);
  if (dim < 0) dim += n;
  TP_CHECK(dim >= 0 && dim < n, IndexError, op, ": dim out of range (expected to be in range of [", -n, ", ", n - 1,
           "], but got ", dim, ")");
  return dim;
}

bool cumprod_backward(const std::vector<Tensor>& in, const Attrs& attrs, const TensorMeta& om, std::vector<Tensor>& out,
                      const char* op) {
  if (in.size() != 2 || !in[0].defined() || !in[1].defined() || !is_floating(om.dtype)) return false;
  const int dev = in[1].device().index;
  if (in[0].device().kind != Device::Kind::CUDA || in[0].device().index != dev) return false;
  if (in[1].numel() == 0) {  // nothing to convert or launch
    out = {empty(om.sizes, om.dtype, dev)};
    return true;
  }
  const DType c = compute_type(om.dtype);
  const Tensor g = ops::contiguous(ops::to_dtype(ops::to_dtype(in[0], om.dtype), c));
  const Tensor x = ops::contiguous(ops::to_dtype(in[1], c));
  TP_CHECK(g.sizes() == x.sizes(), ValueError, op, ": expected grad of size ", shape_str(x.sizes()), " but got ",
           shape_str(g.sizes()));
  Tensor y = empty(om.sizes, c, dev);
  if (y.numel() > 0) {
    const Slices s = slices_of(x.sizes(), wrap(attrs.get_int("dim"), x.dim(), op));
    Tensor prod = empty(x.sizes(), DType::Float64, dev);
    void* pg = g.data();
    void* px = x.data();
    void* py = y.data();
    void* pp = prod.data();
    long long outer = s.outer, D = s.D, inner = s.inner;
    void* args[] = {&pg, &px, &py, &pp, &outer, &D, &inner};
    launch_generated(dev, cumprod_bw_name(c), cumprod_bw_source(c), grid_1d(outer * inner, kThreads), kThreads, args);
  }
  out = {c == om.dtype ? y : ops::to_dtype(y, om.dtype)};
  return true;
}

bool cum_extreme(const Tensor& in, const Attrs& attrs, const std::vector<TensorMeta>& om, bool is_max,
                 std::vector<Tensor>& out, const char* op) {
  if (om.size() != 2) return false;
  const DType dt = in.dtype();
  const DType c = compute_type(dt);
  if (c == DType::Int64 && dt != DType::Bool && dt != DType::Int64 && dt != DType::Int32 && dt != DType::Int16 &&
      dt != DType::Int8 && dt != DType::UInt8)
    return false;
  const int dev = in.device().index;
  if (in.numel() == 0) {  // nothing to convert or launch
    out = {empty(om[0].sizes, om[0].dtype, dev), empty(om[1].sizes, DType::Int64, dev)};
    return true;
  }
  const Tensor x = ops::contiguous(ops::to_dtype(in, c));
  Tensor v = empty(om[0].sizes, c, dev), ind = empty(om[1].sizes, DType::Int64, dev);
  if (x.numel() > 0) {
    const Slices s = slices_of(x.sizes(), wrap(attrs.get_int("dim"), x.dim(), op));
    void* px = x.data();
    void* pv = v.data();
    void* pi = ind.data();
    long long outer = s.outer, D = s.D, inner = s.inner;
    void* args[] = {&px, &pv, &pi, &outer, &D, &inner};
    launch_generated(dev, cumext_name(c, is_max), cumext_source(c, is_max), grid_1d(outer * inner, kThreads),
                     kThreads, args);
  }
  out = {c == om[0].dtype ? v : ops::to_dtype(v, om[0].dtype), ind};
  return true;
}

}  // namespace

bool cum_kernel(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<TensorMeta>& om,
                std::vector<Tensor>& out) {
  const std::string name = op.name;
  if (name != "_cumprod_backward" && name != "cummax" && name != "cummin") return false;
  const Tensor& x = name == "_cumprod_backward" ? in.at(1) : in.at(0);
  if (!x.defined() || x.device().kind != Device::Kind::CUDA) return false;
  if (name == "_cumprod_backward") return om.size() == 1 && cumprod_backward(in, attrs, om[0], out, op.name);
  return cum_extreme(x, attrs, om, name == "cummax", out, op.name);
}

std::vector<std::pair<std::string, std::string>> cum_kernel_sources() {
  std::vector<std::pair<std::string, std::string>> v;
  for (DType c : {DType::Float32, DType::Float64}) v.emplace_back(cumprod_bw_name(c), cumprod_bw_source(c));
  for (DType c : {DType::Float32, DType::Float64, DType::Int64})
    for (bool m : {true, false}) v.emplace_back(cumext_name(c, m), cumext_source(c, m));
  return v;
}

}  // namespace tp::cuda
