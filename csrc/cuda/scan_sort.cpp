#include "cuda/scan_sort.h"

#include <algorithm>

#include "core/error.h"
#include "cuda/copy.h"
#include "cuda/kernels.h"
#include "cuda/nn_kernels.h"
#include "ops/ops.h"

namespace tp::cuda {
DType scan_compute_type(DType d) {
  switch (d) {
    case DType::Float32:
    case DType::Float64: return d;
    case DType::Float16:
    case DType::BFloat16: return DType::Float32;
    default: return DType::Int64;
  }
}
const char* scan_ctype(DType c) { return c == DType::Int64 ? "long long" : float_ctype(c); }
std::string scan_type_tag(DType c) { return c == DType::Int64 ? "i64" : c == DType::Float64 ? "f64" : "f32"; }

namespace {

// The input is first converted on the device to a compute type C that holds
// every value exactly (16-bit floats -> float32; bool and integers -> int64,
// which is also eager's cumsum result type for them), so one kernel per C
// serves every dtype; results are converted back. Slices are addressed as
// eager's kernels address them: element d of slice (o, i) of a contiguous
// [outer, D, inner] tensor is at (o * D + d) * inner + i.
constexpr int kThreads = 256;



// One thread per slice, in order along the dim: the accumulation order and
// type of eager's cum_cpu (double for floats, wrapping 64-bit integers), so
// the results are eager's bit for bit.
std::string scan_name(DType c, bool prod) { return std::string(prod ? "tp_cumprod_" : "tp_cumsum_") + scan_type_tag(c); }
std::string scan_source(const std::string& name, DType c, bool prod) {
  const std::string t = scan_ctype(c), a = c == DType::Int64 ? "unsigned long long" : "double";
  return "extern \"C\" __global__ void " + name + "(const " + t + "* __restrict__ x, " + t +
         "* __restrict__ y, long long outer, long long D, long long inner) {\n"
         "  for (long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x; s < outer * inner;\n"
         "       s += (long long)gridDim.x * blockDim.x) {\n"  // grid_1d caps the grid
         "    const long long base = (s / inner) * D * inner + s % inner;\n"
         "    " + a + " acc = " + (prod ? "1" : "0") + ";\n"
         "    for (long long d = 0; d < D; ++d) {\n"
         "      acc = acc " + (prod ? "*" : "+") + " (" + a + ")x[base + d * inner];\n"
         "      y[base + d * inner] = (" + t + ")acc;\n"
         "    }\n"
         "  }\n}\n";
}

// One block per slice: the slice and its positions go to a scratch row of P
// (the next power of two) entries, a bitonic network orders them by (value,
// position) — NaN above every number, padding after everything — and the
// first `take` are written. Ordering ties by position makes the sort stable,
// as eager's is, so values and indices equal the CPU's.
std::string sort_name(DType c) { return "tp_sort_" + scan_type_tag(c); }
std::string sort_source(const std::string& name, DType c) {
  const std::string t = scan_ctype(c);
  return "__device__ __forceinline__ bool tp_before(" + t + " a, long long ia, " + t +
         " b, long long ib, int desc, long long n) {\n"
         "  if (ia >= n) return false;\n"
         "  if (ib >= n) return true;\n"
         "  const bool an = a != a, bn = b != b;\n"
         "  const bool lt = (!an && bn) || (!an && !bn && a < b);\n"
         "  const bool gt = (an && !bn) || (!an && !bn && a > b);\n"
         "  if (desc ? gt : lt) return true;\n"
         "  if (desc ? lt : gt) return false;\n"
         "  return ia < ib;\n}\n"
         "extern \"C\" __global__ void " + name + "(const " + t + "* __restrict__ x, " + t +
         "* sk, long long* si, " + t + "* __restrict__ vals, long long* __restrict__ inds, long long D, "
         "long long inner, long long P, long long take, int desc) {\n"
         "  const long long s = blockIdx.x;\n"
         "  const long long o = s / inner, i = s % inner;\n"
         "  const " + t + "* px = x + o * D * inner + i;\n"
         "  " + t + "* k = sk + s * P;\n"
         "  long long* q = si + s * P;\n"
         "  for (long long u = threadIdx.x; u < P; u += blockDim.x) { q[u] = u; k[u] = u < D ? px[u * inner] : (" + t +
         ")0; }\n"
         "  __syncthreads();\n"
         "  for (long long w = 2; w <= P; w <<= 1) {\n"
         "    for (long long j = w >> 1; j > 0; j >>= 1) {\n"
         "      for (long long u = threadIdx.x; u < P; u += blockDim.x) {\n"
         "        const long long l = u ^ j;\n"
         "        if (l <= u) continue;\n"
         "        const " + t + " a = k[u], b = k[l];\n"
         "        const long long ia = q[u], ib = q[l];\n"
         "        const bool swap = (u & w) == 0 ? tp_before(b, ib, a, ia, desc, D) : tp_before(a, ia, b, ib, desc, D);\n"
         "        if (swap) { k[u] = b; k[l] = a; q[u] = ib; q[l] = ia; }\n"
         "      }\n"
         "      __syncthreads();\n"
         "    }\n"
         "  }\n"
         "  for (long long u = threadIdx.x; u < take; u += blockDim.x) {\n"
         "    const long long ob = (o * take + u) * inner + i;\n"
         "    vals[ob] = k[u];\n"
         "    inds[ob] = q[u];\n"
         "  }\n}\n";
}

struct Slices {
  int64_t outer = 1, D = 1, inner = 1;
};
Slices slices_of(const Tensor& x, int64_t dim) {
  Slices s;
  const int64_t nd = x.dim();
  if (nd == 0) return s;
  s.D = x.sizes()[dim];
  for (int64_t d = 0; d < dim; ++d) s.outer *= x.sizes()[d];
  for (int64_t d = dim + 1; d < nd; ++d) s.inner *= x.sizes()[d];
  return s;
}

int64_t wrapped_dim(const Tensor& x, int64_t dim, const char* op) {
  const int64_t nd = std::max<int64_t>(1, x.dim());
  if (dim < 0) dim += nd;
  TP_CHECK(dim >= 0 && dim < nd, IndexError, op, ": dim out of range for a tensor of shape ", shape_str(x.sizes()));
  return x.dim() == 0 ? 0 : dim;
}

bool scan(const OpDef& op, const Tensor& in, const Attrs& attrs, const TensorMeta& om, bool prod,
          std::vector<Tensor>& out) {
  const int dev = in.device().index;
  const DType c = scan_compute_type(om.dtype);
  Tensor y = empty(om.sizes, c, dev);
  if (y.numel() > 0) {
    // eager's order: the input converted to the result type, then accumulated
    Tensor x = ops::contiguous(ops::to_dtype(ops::to_dtype(in, om.dtype), c));
    const Slices s = slices_of(x, wrapped_dim(x, attrs.get_int("dim"), op.name));
    const std::string name = scan_name(c, prod);
    void* px = x.data();
    void* py = y.data();
    long long outer = s.outer, D = s.D, inner = s.inner;
    void* args[] = {&px, &py, &outer, &D, &inner};
    launch_generated(dev, name, scan_source(name, c, prod), grid_1d(s.outer * s.inner, kThreads), kThreads, args);
  }
  out = {ops::to_dtype(y, om.dtype)};
  return true;
}

bool order(const OpDef& op, const Tensor& in, int64_t dim, int64_t take, bool desc,
           const std::vector<TensorMeta>& om, std::vector<Tensor>& out) {
  const int dev = in.device().index;
  const DType c = scan_compute_type(in.dtype());
  Tensor vals = empty(om[0].sizes, c, dev), inds = empty(om[1].sizes, DType::Int64, dev);
  if (vals.numel() > 0) {
    Tensor x = ops::contiguous(ops::to_dtype(in, c));
    const Slices s = slices_of(x, wrapped_dim(x, dim, op.name));
    int64_t p = 1;
    while (p < s.D) p <<= 1;
    const int64_t rows = s.outer * s.inner;
    // The scratch holds every slice at once: refused past 2^28 entries (4 GB).
    if (rows > (int64_t{1} << 28) / p) return false;
    Tensor sk = empty({rows * p}, c, dev), si = empty({rows * p}, DType::Int64, dev);
    const std::string name = sort_name(c);
    void* px = x.data();
    void* pk = sk.data();
    void* pi = si.data();
    void* pv = vals.data();
    void* po = inds.data();
    long long D = s.D, inner = s.inner, P = p, tk = take;
    int ds = desc ? 1 : 0;
    void* args[] = {&px, &pk, &pi, &pv, &po, &D, &inner, &P, &tk, &ds};
    launch_generated(dev, name, sort_source(name, c), static_cast<unsigned>(rows),
                     static_cast<unsigned>(std::min<int64_t>(kThreads, std::max<int64_t>(32, p / 2))), args);
  }
  out = {ops::to_dtype(vals, in.dtype()), inds};
  return true;
}

}  // namespace

bool scan_sort_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                      const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out) {
  const std::string name = op.name;
  if (name != "cumsum" && name != "cumprod" && name != "sort" && name != "topk") return false;
  if (inputs.empty() || !inputs[0].defined() || inputs[0].device().kind != Device::Kind::CUDA) return false;
  const Tensor& x = inputs[0];
  if (!is_floating(x.dtype()) && x.dtype() != DType::Int64 && x.dtype() != DType::Bool)
    return false;
  if (name == "cumsum" || name == "cumprod") {
    if (out_meta.size() != 1) return false;
    const DType r = out_meta[0].dtype;
    if (!is_floating(r) && r != DType::Int64) return false;
    return scan(op, x, attrs, out_meta[0], name == "cumprod", out);
  }
  if (out_meta.size() != 2) return false;
  if (name == "sort") {
    const int64_t dim = attrs.get_or("dim", int64_t{-1});
    const int64_t D = x.dim() == 0 ? 1 : x.sizes()[static_cast<size_t>(wrapped_dim(x, dim, op.name))];
    return order(op, x, dim, D, attrs.get_or("descending", false), out_meta, out);
  }
  return order(op, x, attrs.get_or("dim", int64_t{-1}), attrs.get_int("k"), attrs.get_or("largest", true), out_meta,
               out);
}

std::vector<std::pair<std::string, std::string>> scan_sort_kernel_sources() {
  std::vector<std::pair<std::string, std::string>> v;
  for (DType c : {DType::Float32, DType::Float64, DType::Int64}) {
    for (bool prod : {false, true}) v.emplace_back(scan_name(c, prod), scan_source(scan_name(c, prod), c, prod));
    v.emplace_back(sort_name(c), sort_source(sort_name(c), c));
  }
  return v;
}

}  // namespace tp::cuda
