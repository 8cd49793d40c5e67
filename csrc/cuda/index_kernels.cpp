#include "cuda/index_kernels.h"

#include "cuda/copy.h"
#include "cuda/driver.h"
#include "cuda/kernels.h"
#include "cuda/nn_kernels.h"
#include "cuda/stream.h"
#include "ops/dispatch.h"

namespace tp::cuda {
namespace {

constexpr int kThreads = 256;

// Rows move as bits: the element type only fixes the width.
const char* bits_ctype(size_t bytes) {
  switch (bytes) {
    case 1: return "unsigned char";
    case 2: return "unsigned short";
    case 4: return "unsigned int";
    case 8: return "unsigned long long";
    default: return nullptr;
  }
}

const char* index_ctype(DType d) {
  return d == DType::Int64 ? "long long" : d == DType::Int32 ? "int" : nullptr;
}

struct RowParams {
  long long outer, n, size, inner, allow_negative;
};
const char* kRowStruct = "struct P { long long outer, n, size, inner, allow_negative; };\n";

// The checked position of index k along a dim of `size` (bad: flag set, 0 returned).
const char* kPosition =
    "__device__ __forceinline__ long long tp_pos(long long v, const P& p, int* bad, bool& ok) {\n"
    "  if (p.allow_negative && v < 0) v += p.size;\n"
    "  ok = v >= 0 && v < p.size;\n"
    "  if (!ok) { *bad = 1; v = 0; }\n"
    "  return v;\n}\n";

std::string gather_name(size_t bytes, DType idx) { return str("tp_index_rows_b", bytes, "_", dtype_name(idx)); }
std::string scatter_name(DType dt, DType idx, bool acc) {
  return str(acc ? "tp_index_put_add_" : "tp_index_put_b", acc ? dtype_name(dt) : std::to_string(itemsize(dt)), "_",
             dtype_name(idx));
}

// out[o][k][c] = src[o][idx[k]][c] (src and out contiguous; outer x n x inner items).
std::string gather_source(const std::string& name, size_t bytes, DType idx) {
  std::string s = str("typedef ", bits_ctype(bytes), " E;\ntypedef ", index_ctype(idx), " I;\n", kRowStruct, kPosition);
  s += "extern \"C\" __global__ void " + name +
       "(const E* __restrict__ src, const I* __restrict__ idx, E* __restrict__ out, int* bad, P p) {\n";
  s += "  const long long total = p.outer * p.n * p.inner, step = (long long)gridDim.x * blockDim.x;\n";
  s += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {\n";
  s += "    const long long c = i % p.inner, r = i / p.inner, k = r % p.n, o = r / p.n;\n";
  s += "    bool ok;\n    const long long v = tp_pos((long long)idx[k], p, bad, ok);\n";
  s += "    out[i] = ok ? src[(o * p.size + v) * p.inner + c] : (E)0;\n  }\n}\n";
  return s;
}

// out[idx[k]][c] (+)= val[k][c] (out and val contiguous; n x inner items).
std::string scatter_source(const std::string& name, DType dt, DType idx, bool acc) {
  std::string s = str("typedef ", acc ? float_ctype(dt) : bits_ctype(itemsize(dt)), " E;\ntypedef ", index_ctype(idx),
                      " I;\n", kRowStruct, kPosition);
  s += "extern \"C\" __global__ void " + name +
       "(E* __restrict__ out, const I* __restrict__ idx, const E* __restrict__ val, int* bad, P p) {\n";
  s += "  const long long total = p.n * p.inner, step = (long long)gridDim.x * blockDim.x;\n";
  s += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {\n";
  s += "    const long long c = i % p.inner, k = i / p.inner;\n";
  s += "    bool ok;\n    const long long v = tp_pos((long long)idx[k], p, bad, ok);\n";
  s += "    if (!ok) continue;\n";
  s += acc ? "    atomicAdd(out + v * p.inner + c, val[i]);\n" : "    out[v * p.inner + c] = val[i];\n";
  s += "  }\n}\n";
  return s;
}

// gather: out[p] = x[p with p[dim] = idx[p]] (idx and out contiguous, x any strides; rank <= 8).
struct GatherParams {
  long long rank, dim, size, total;
  long long sizes[8], xstrides[8];
};
std::string gather_dim_name(size_t bytes, DType idx) { return str("tp_gather_b", bytes, "_", dtype_name(idx)); }
std::string gather_dim_source(const std::string& name, size_t bytes, DType idx) {
  std::string s = str("typedef ", bits_ctype(bytes), " E;\ntypedef ", index_ctype(idx), " I;\n");
  s += "struct G { long long rank, dim, size, total; long long sizes[8], xstrides[8]; };\n";
  s += "extern \"C\" __global__ void " + name +
       "(const E* __restrict__ x, const I* __restrict__ idx, E* __restrict__ out, int* bad, G p) {\n";
  s += "  const long long step = (long long)gridDim.x * blockDim.x;\n";
  s += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.total; i += step) {\n";
  s += "    long long v = (long long)idx[i];\n";
  s += "    const bool ok = v >= 0 && v < p.size;\n";
  s += "    if (!ok) { *bad = 1; v = 0; }\n";
  s += "    long long rest = i, off = 0;\n";
  s += "    for (int d = (int)p.rank - 1; d >= 0; --d) {\n";
  s += "      const long long c = rest % p.sizes[d];\n      rest /= p.sizes[d];\n";
  s += "      off += (d == p.dim ? v : c) * p.xstrides[d];\n    }\n";
  s += "    out[i] = ok ? x[off] : (E)0;\n  }\n}\n";
  return s;
}

Tensor contiguous_on_device(const Tensor& t) {
  static const OpDef& clone = get_op("clone");
  return t.is_contiguous() ? t : run_kernel(clone, {t}, {})[0];
}

// A zeroed device flag, and the check that raises once the kernel has run.
Tensor new_flag(int dev) {
  Tensor f = empty({1}, DType::Int32, dev);
  activate(dev);
  check(driver().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(f.data()), 0, 4, current_stream(dev)), "index flag");
  return f;
}
void raise_if_bad(const Tensor& flag, const std::string& op, int64_t dim, int64_t size, const Tensor& where) {
  if (to_cpu(flag).data_as<int32_t>()[0] != 0)
    throw IndexError(str(op, ": index out of range for dimension ", dim, " with size ", size, " (indices on ",
                         where.device().str(), ")"));
}

bool same_device(const std::vector<Tensor>& in, int dev) {
  for (const Tensor& t : in)
    if (t.defined() && (t.device().kind != Device::Kind::CUDA || t.device().index != dev)) return false;
  return true;
}

// outer x [index count] x inner rows of a contiguous source along `dim`.
Tensor gather_rows(const Tensor& src, int64_t dim, const Tensor& index, const Shape& out_sizes, bool allow_negative,
                   const std::string& op) {
  const int dev = src.device().index;
  Tensor s = contiguous_on_device(src), idx = contiguous_on_device(index);
  RowParams p{1, idx.numel(), src.dim() ? src.sizes()[static_cast<size_t>(dim)] : 1, 1, allow_negative ? 1 : 0};
  for (int64_t d = 0; d < dim; ++d) p.outer *= src.sizes()[static_cast<size_t>(d)];
  for (int64_t d = dim + 1; d < src.dim(); ++d) p.inner *= src.sizes()[static_cast<size_t>(d)];
  Tensor out = empty(out_sizes, src.dtype(), dev);
  const int64_t total = p.outer * p.n * p.inner;
  if (total == 0) return out;
  Tensor flag = new_flag(dev);
  void *ps = s.data(), *pi = idx.data(), *po = out.data(), *pf = flag.data();
  void* args[] = {&ps, &pi, &po, &pf, &p};
  const size_t bytes = itemsize(src.dtype());
  const std::string k = gather_name(bytes, idx.dtype());
  launch_generated(dev, k, gather_source(k, bytes, idx.dtype()), grid_1d(total, kThreads), kThreads, args);
  raise_if_bad(flag, op, dim, p.size, index);
  return out;
}

}  // namespace

bool index_kernel(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                  const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out) {
  const std::string name = op.name;
  if (name == "embedding") {  // (indices, weight): rows of weight
    const Tensor &idx = in[0], &w = in[1];
    if (!index_ctype(idx.dtype()) || !bits_ctype(itemsize(w.dtype())) || w.dim() != 2 || !attrs.is_none("max_norm"))
      return false;
    if (!same_device(in, w.device().index)) return false;
    out = {gather_rows(w, 0, idx, out_meta[0].sizes, /*allow_negative=*/false, name)};
    return true;
  }
  if (name == "index_select") {  // (self, index), dim
    const Tensor &x = in[0], &idx = in[1];
    if (!index_ctype(idx.dtype()) || !bits_ctype(itemsize(x.dtype())) || idx.dim() > 1) return false;
    if (!same_device(in, x.device().index)) return false;
    int64_t dim = attrs.get_int("dim");
    if (dim < 0) dim += std::max<int64_t>(x.dim(), 1);
    out = {gather_rows(x, x.dim() ? dim : 0, idx, out_meta[0].sizes, false, name)};
    return true;
  }
  if (name == "gather") {  // (self, index), dim; index of self's rank, no larger along the other dims
    const Tensor &x = in[0], &index = in[1];
    if (!index_ctype(index.dtype()) || !bits_ctype(itemsize(x.dtype())) || x.dim() > 8 || x.dim() == 0 ||
        index.dim() != x.dim())
      return false;
    const int dev = x.device().index;
    if (!same_device(in, dev)) return false;
    int64_t dim = attrs.get_int("dim");
    if (dim < 0) dim += x.dim();
    Tensor idx = contiguous_on_device(index);
    Tensor o = empty(out_meta[0].sizes, x.dtype(), dev);
    GatherParams p{};
    p.rank = x.dim();
    p.dim = dim;
    p.size = x.sizes()[static_cast<size_t>(dim)];
    p.total = idx.numel();
    for (int64_t d = 0; d < x.dim(); ++d) {
      p.sizes[d] = idx.sizes()[static_cast<size_t>(d)];
      p.xstrides[d] = x.strides()[static_cast<size_t>(d)];
    }
    if (p.total > 0) {
      Tensor flag = new_flag(dev);
      void *px = x.data(), *pi = idx.data(), *po = o.data(), *pf = flag.data();
      void* args[] = {&px, &pi, &po, &pf, &p};
      const size_t bytes = itemsize(x.dtype());
      const std::string k = gather_dim_name(bytes, idx.dtype());
      launch_generated(dev, k, gather_dim_source(k, bytes, idx.dtype()), grid_1d(p.total, kThreads), kThreads, args);
      raise_if_bad(flag, name, dim, p.size, index);
    }
    out = {o};
    return true;
  }
  if (name == "index_put" || name == "index_put_") {  // (self, one index tensor on dim 0, values)
    if (in.size() != 3 || !in[1].defined() || !index_ctype(in[1].dtype())) return false;
    const Tensor &self = in[0], &index = in[1];
    const bool acc = attrs.get_or<bool>("accumulate", false);
    const DType dt = self.dtype();
    if (self.dim() == 0 || in[2].dtype() != dt || !bits_ctype(itemsize(dt))) return false;
    if (acc && dt != DType::Float32 && dt != DType::Float64) return false;
    const int dev = self.device().index;
    if (!same_device(in, dev)) return false;
    const bool inplace = op.has(kInplace);
    if (inplace && !self.is_contiguous()) return false;
    static const OpDef& clone = get_op("clone");
    static const OpDef& expand = get_op("expand");
    Tensor target = inplace ? self : run_kernel(clone, {self}, {})[0];
    if (!target.is_contiguous()) target = contiguous_on_device(target);
    Tensor idx = contiguous_on_device(index);
    // values broadcast to the indexing result [index dims..., self dims 1...]
    Shape vs = idx.sizes();
    for (int64_t d = 1; d < self.dim(); ++d) vs.push_back(self.sizes()[static_cast<size_t>(d)]);
    Tensor val = contiguous_on_device(run_kernel(expand, {in[2]}, {{"size", vs}})[0]);
    RowParams p{1, idx.numel(), self.sizes()[0], 1, 1};
    for (int64_t d = 1; d < self.dim(); ++d) p.inner *= self.sizes()[static_cast<size_t>(d)];
    if (p.n * p.inner > 0) {
      Tensor flag = new_flag(dev);
      void *pt = target.data(), *pi = idx.data(), *pv = val.data(), *pf = flag.data();
      void* args[] = {&pt, &pi, &pv, &pf, &p};
      const std::string k = scatter_name(dt, idx.dtype(), acc);
      launch_generated(dev, k, scatter_source(k, dt, idx.dtype(), acc), grid_1d(p.n * p.inner, kThreads), kThreads,
                       args);
      raise_if_bad(flag, name, 0, p.size, index);
    }
    out = {inplace ? self : target};
    return true;
  }
  return false;
}

std::vector<std::pair<std::string, std::string>> index_kernel_sources() {
  std::vector<std::pair<std::string, std::string>> v;
  for (DType idx : {DType::Int64, DType::Int32}) {
    for (size_t bytes : {1, 2, 4, 8}) {
      const std::string g = gather_name(bytes, idx);
      v.emplace_back(g, gather_source(g, bytes, idx));
      const std::string gd = gather_dim_name(bytes, idx);
      v.emplace_back(gd, gather_dim_source(gd, bytes, idx));
    }
    for (DType dt : {DType::Float32, DType::Float64}) {
      const std::string a = scatter_name(dt, idx, true);
      v.emplace_back(a, scatter_source(a, dt, idx, true));
    }
    for (DType dt : {DType::Bool, DType::Float16, DType::Float32, DType::Int64}) {
      const std::string s = scatter_name(dt, idx, false);
      v.emplace_back(s, scatter_source(s, dt, idx, false));
    }
  }
  return v;
}

}  // namespace tp::cuda
