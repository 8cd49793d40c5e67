#include "cuda/scatter_reduce.h"

#include <algorithm>
#include <limits>

#include "core/deterministic.h"
#include "core/error.h"
#include "cuda/copy.h"
#include "cuda/device_status.h"
#include "cuda/driver.h"
#include "cuda/index_kernels.h"
#include "cuda/kernels.h"
#include "cuda/nn_kernels.h"
#include "cuda/stream.h"
#include "ops/ops.h"

namespace tp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxRank = 8;

enum class Kind { Sum, Prod, Mean, Amax, Amin };
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Sum: return "sum";
    case Kind::Prod: return "prod";
    case Kind::Mean: return "mean";
    case Kind::Amax: return "amax";
    case Kind::Amin: return "amin";
  }
  return "";
}
bool kind_of(const std::string& r, Kind& k) {
  for (Kind c : {Kind::Sum, Kind::Prod, Kind::Mean, Kind::Amax, Kind::Amin})
    if (r == kind_name(c)) {
      k = c;
      return true;
    }
  return false;
}

// The compute dtypes with kernels: T the value, U the word a CAS swaps.
bool covered(DType c) {
  return c == DType::Float32 || c == DType::Float64 || c == DType::Int64 || c == DType::Bool;
}
std::string value_prelude(DType c) {
  switch (c) {
    case DType::Float32:
      return "typedef float T;\ntypedef unsigned int U;\n"
             "__device__ __forceinline__ U tp_bits(T v) { return __float_as_uint(v); }\n"
             "__device__ __forceinline__ T tp_val(U u) { return __uint_as_float(u); }\n";
    case DType::Float64:
      return "typedef double T;\ntypedef unsigned long long U;\n"
             "__device__ __forceinline__ U tp_bits(T v) { return (U)__double_as_longlong(v); }\n"
             "__device__ __forceinline__ T tp_val(U u) { return __longlong_as_double((long long)u); }\n";
    case DType::Int64:
      return "typedef long long T;\ntypedef unsigned long long U;\n"
             "__device__ __forceinline__ U tp_bits(T v) { return (U)v; }\n"
             "__device__ __forceinline__ T tp_val(U u) { return (T)u; }\n";
    default: return "typedef unsigned char T;\n";  // bool
  }
}

// Folds x into *p. Sums add atomically; the other reductions swap in the
// CPU's update of the current value (a NaN from src wins and a NaN already
// there stays, since no comparison with it is true).
std::string fold_source_body(DType c, Kind k) {
  if (c == DType::Bool) {  // or / and: every writer stores the same value
    const bool conj = k == Kind::Prod || k == Kind::Amin;
    return conj ? "__device__ __forceinline__ void tp_fold(T* p, T x) { if (!x) *p = (T)0; }\n"
                : "__device__ __forceinline__ void tp_fold(T* p, T x) { if (x) *p = (T)1; }\n";
  }
  if (k == Kind::Sum || k == Kind::Mean) {
    if (c == DType::Int64)  // two's complement: the unsigned add wraps like the signed one
      return "__device__ __forceinline__ void tp_fold(T* p, T x) { atomicAdd((unsigned long long*)p, (U)x); }\n";
    return "__device__ __forceinline__ void tp_fold(T* p, T x) { atomicAdd(p, x); }\n";
  }
  std::string next;
  if (k == Kind::Prod) next = c == DType::Int64 ? "(T)((U)o * (U)x)" : "o * x";
  if (k == Kind::Amax) next = "(x > o || x != x) ? x : o";
  if (k == Kind::Amin) next = "(x < o || x != x) ? x : o";
  return "__device__ __forceinline__ void tp_fold(T* p, T x) {\n"
         "  U* w = (U*)p;\n"
         "  U old = *(volatile U*)w, seen;\n"
         "  do {\n"
         "    seen = old;\n"
         "    const T o = tp_val(seen);\n"
         "    const U want = tp_bits(" + next + ");\n"
         "    if (want == seen) return;\n"
         "    old = atomicCAS(w, seen, want);\n"
         "  } while (old != seen);\n}\n";
}

// One thread per index element (index and src any strides, the result
// contiguous): its position in the result is the element's own, with the
// index value along dim.
struct Params {
  long long rank, dim, size, total, tag;
  long long sizes[kMaxRank], ostrides[kMaxRank], istrides[kMaxRank], sstrides[kMaxRank];
};
const char* kStruct =
    "struct G { long long rank, dim, size, total, tag; long long sizes[8], ostrides[8], istrides[8], sstrides[8]; };\n";
const std::string kLoopIdx =
    "  const long long step = (long long)gridDim.x * blockDim.x;\n"
    "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.total; i += step) {\n"
    "    long long rest = i, io = 0, so = 0, oo = 0;\n"
    "    for (int d = (int)p.rank - 1; d >= 0; --d) {\n"
    "      const long long c = rest % p.sizes[d];\n"
    "      rest /= p.sizes[d];\n"
    "      io += c * p.istrides[d];\n"
    "      so += c * p.sstrides[d];\n"
    "      if (d != p.dim) oo += c * p.ostrides[d];\n"
    "    }\n"
    "    bool ok;\n"
    "    const long long v = tp_pos((long long)idx[io], p.size, 0, bad, p.tag, ok);\n";
const std::string kLoop = kLoopIdx +
    "    if (!ok) continue;\n"
    "    const long long pos = oo + v * p.ostrides[p.dim];\n";

std::string tag_of(DType c, DType idx) { return str(dtype_name(c), "_", dtype_name(idx)); }
std::string fold_name(DType c, Kind k, DType idx) { return str("tp_sreduce_", kind_name(k), "_", tag_of(c, idx)); }
std::string init_name(DType c, DType idx) { return "tp_sreduce_init_" + tag_of(c, idx); }
std::string mean_name(DType c) { return str("tp_sreduce_mean_", dtype_name(c)); }

// out[pos] op= src[...]; mean also counts the position's contributions.
std::string fold_source(const std::string& name, DType c, Kind k, DType idx) {
  const bool count = k == Kind::Mean && c != DType::Bool;
  return str(value_prelude(c), "typedef ", index_ctype(idx), " I;\n", kStruct, status_device_code(),
             fold_source_body(c, k), "extern \"C\" __global__ void ", name,
             "(T* out, const I* __restrict__ idx, const T* __restrict__ src, long long* bad, unsigned long long* "
             "counts, G p) {\n",
             kLoop, "    tp_fold(out + pos, src[so]);\n", count ? "    atomicAdd(counts + pos, 1ull);\n" : "",
             count ? "" : "    (void)counts;\n", "  }\n}\n");
}

// The deterministic form of float sum, mean and prod (tp.use_deterministic_algorithms):
// keys[i] = the result position of index element i (-1 when bad), sorted
// stably (cuda/index_kernels.h); one thread per run of equal positions folds
// the run in index order with steps rounded as the CPU's (no FMA) and, for
// mean, stores the run's length as the count: the same bits on every run,
// and the CPU's.
bool det_kind(DType c, Kind k) {
  return (c == DType::Float32 || c == DType::Float64) && (k == Kind::Sum || k == Kind::Mean || k == Kind::Prod);
}
std::string keys_name(DType idx) { return "tp_sreduce_keys_" + std::string(dtype_name(idx)); }
std::string keys_source(const std::string& name, DType idx) {
  return str("typedef ", index_ctype(idx), " I;\n", kStruct, status_device_code(), "extern \"C\" __global__ void ",
             name, "(const I* __restrict__ idx, long long* __restrict__ keys, long long* bad, G p) {\n", kLoopIdx,
             "    (void)so;\n    keys[i] = ok ? oo + v * p.ostrides[p.dim] : -1;\n  }\n}\n");
}
std::string det_name(DType c, Kind k) { return str("tp_sreduce_det_", kind_name(k), "_", dtype_name(c)); }
std::string det_source(const std::string& name, DType c, Kind k) {
  const bool f = c == DType::Float32;
  const std::string op = k == Kind::Prod ? (f ? "__fmul_rn" : "__dmul_rn") : (f ? "__fadd_rn" : "__dadd_rn");
  return str(value_prelude(c), kStruct, "extern \"C\" __global__ void ", name,
             "(T* out, const long long* __restrict__ sk, const long long* __restrict__ perm, const T* __restrict__ "
             "src, unsigned long long* counts, G p) {\n"
             "  const long long step = (long long)gridDim.x * blockDim.x;\n"
             "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.total; i += step) {\n"
             "    const long long pos = sk[i];\n"
             "    if (pos < 0 || (i > 0 && sk[i - 1] == pos)) continue;\n"
             "    T a = out[pos];\n"
             "    long long m = i;\n"
             "    for (; m < p.total && sk[m] == pos; ++m) {\n"
             "      long long e = perm[m], so = 0;\n"
             "      for (int d = (int)p.rank - 1; d >= 0; --d) { so += (e % p.sizes[d]) * p.sstrides[d]; e /= p.sizes[d]; }\n"
             "      a = ", op, "(a, src[so]);\n"
             "    }\n"
             "    out[pos] = a;\n"
             "    if (counts) counts[pos] = (unsigned long long)(m - i);\n"
             "  }\n}\n");
}

// Without self's own value, a position that receives one starts from the
// reduction's identity (every writer stores the same value).
std::string init_source(const std::string& name, DType c, DType idx) {
  return str(value_prelude(c), "typedef ", index_ctype(idx), " I;\n", kStruct, status_device_code(),
             "extern \"C\" __global__ void ", name,
             "(T* out, const I* __restrict__ idx, long long* bad, T identity, G p) {\n", kLoop,
             "    (void)so;\n    out[pos] = identity;\n  }\n}\n");
}

// mean: the sum over the count (self's own value counted when included);
// integers floor-divide, as on the CPU.
std::string mean_source(const std::string& name, DType c) {
  const std::string div = c == DType::Int64 ? "    T q = out[e] / n;\n"
                                              "    if (out[e] % n != 0 && ((out[e] < 0) != (n < 0))) --q;\n"
                                              "    out[e] = q;\n"
                                            : "    out[e] = out[e] / (T)n;\n";
  return value_prelude(c) + "extern \"C\" __global__ void " + name +
         "(T* out, const unsigned long long* __restrict__ counts, long long total, long long self_count) {\n"
         "  const long long step = (long long)gridDim.x * blockDim.x;\n"
         "  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += step) {\n"
         "    const long long n = (long long)counts[e] + self_count;\n"
         "    if (n <= 1) continue;\n" + div + "  }\n}\n";
}

void fill(long long* dst, const Shape& v, long long zero_d) {
  if (v.empty()) dst[0] = zero_d;
  for (size_t d = 0; d < v.size(); ++d) dst[d] = v[d];
}

// Integer dtypes to and from int64 (narrow integers compute in int64; the
// dispatcher has no CUDA `to` between integer dtypes): one thread per element,
// read through the source's strides, a C cast (narrowing wraps, as on the CPU).
const char* int_ctype(DType d) {
  switch (d) {
    case DType::UInt8: return "unsigned char";
    case DType::Int8: return "signed char";
    case DType::Int16: return "short";
    case DType::Int32: return "int";
    case DType::Int64: return "long long";
    default: return nullptr;
  }
}
std::string cast_name(DType from, DType to) { return str("tp_sreduce_cast_", dtype_name(from), "_", dtype_name(to)); }
std::string cast_source(const std::string& name, DType from, DType to) {
  return str("typedef ", int_ctype(from), " A;\ntypedef ", int_ctype(to), " B;\n",
             "struct S { long long rank, total; long long sizes[8], strides[8]; };\n", "extern \"C\" __global__ void ",
             name,
             "(const A* __restrict__ x, B* __restrict__ y, S p) {\n"
             "  const long long step = (long long)gridDim.x * blockDim.x;\n"
             "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.total; i += step) {\n"
             "    long long rest = i, off = 0;\n"
             "    for (int d = (int)p.rank - 1; d >= 0; --d) { off += (rest % p.sizes[d]) * p.strides[d]; "
             "rest /= p.sizes[d]; }\n"
             "    y[i] = (B)x[off];\n  }\n}\n");
}
struct CastParams {
  long long rank, total;
  long long sizes[kMaxRank], strides[kMaxRank];
};
// t as a contiguous tensor of dtype `to`, both integer dtypes (t's rank <= 8).
Tensor int_cast(const Tensor& t, DType to) {
  const int dev = t.device().index;
  Tensor r = empty(t.sizes(), to, dev);
  if (r.numel() == 0) return r;
  CastParams p{};
  p.rank = t.dim();
  p.total = t.numel();
  for (int64_t d = 0; d < t.dim(); ++d) {
    p.sizes[d] = t.sizes()[static_cast<size_t>(d)];
    p.strides[d] = t.strides()[static_cast<size_t>(d)];
  }
  void *px = t.data(), *py = r.data();
  void* args[] = {&px, &py, &p};
  const std::string n = cast_name(t.dtype(), to);
  launch_generated(dev, n, cast_source(n, t.dtype(), to), grid_1d(p.total, kThreads), kThreads, args);
  return r;
}
// t in dtype c (a new tensor when converted).
Tensor in_dtype(const Tensor& t, DType c) {
  if (t.dtype() == c) return t;
  if (int_ctype(t.dtype()) && int_ctype(c)) return int_cast(t, c);
  return ops::to_dtype(t, c);
}

// A fresh contiguous copy of t in dtype c on its device.
Tensor fresh_in(const Tensor& t, DType c) {
  if (t.dtype() != c) return ops::contiguous(in_dtype(t, c));
  if (!t.is_contiguous()) return ops::contiguous(t);
  Tensor r = empty(t.sizes(), t.dtype(), t.device().index);
  if (r.numel() > 0) copy_device_to_device(r, t);
  return r;
}

// The identity of a reduction in c, as the kernel's T argument (8 bytes of room).
struct Identity {
  union {
    float f;
    double d;
    long long i;
    unsigned char b;
  };
};
Identity identity_of(DType c, Kind k) {
  Identity v{};
  v.i = 0;
  const bool one = k == Kind::Prod;
  switch (c) {
    case DType::Float32:
      v.f = one ? 1.0f : k == Kind::Amax ? -std::numeric_limits<float>::infinity()
                       : k == Kind::Amin ? std::numeric_limits<float>::infinity() : 0.0f;
      break;
    case DType::Float64:
      v.d = one ? 1.0 : k == Kind::Amax ? -std::numeric_limits<double>::infinity()
                      : k == Kind::Amin ? std::numeric_limits<double>::infinity() : 0.0;
      break;
    case DType::Int64:
      v.i = one ? 1 : k == Kind::Amax ? std::numeric_limits<long long>::lowest()
                    : k == Kind::Amin ? std::numeric_limits<long long>::max() : 0;
      break;
    default:  // bool: and starts true, or false
      v.b = (one || k == Kind::Amin) ? 1 : 0;
  }
  return v;
}

}  // namespace

bool scatter_reduce_kernel(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                           const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out) {
  if (std::string(op.name) != "scatter_reduce.two" || in.size() != 3) return false;
  const Tensor &self = in[0], &index = in[1], &src = in[2];
  Kind k;
  if (!kind_of(attrs.get_str("reduce"), k) || !index_ctype(index.dtype())) return false;
  const DType c = compute_dtype(self.dtype());
  if (!covered(c) || self.dim() > kMaxRank || src.dim() > kMaxRank || self.device().kind != Device::Kind::CUDA)
    return false;
  const int dev = self.device().index;
  const bool include_self = attrs.get_or<bool>("include_self", true);
  const int64_t rank = std::max<int64_t>(self.dim(), 1);
  if (index.numel() > 0 && std::max<int64_t>(index.dim(), 1) != rank) return false;
  int64_t dim = attrs.get_int("dim");
  if (dim < 0) dim += rank;
  Tensor acc = fresh_in(self, c);
  if (index.numel() > 0) {
    const Tensor s = in_dtype(src, c);
    Params p{};
    p.rank = rank;
    p.dim = dim;
    p.size = self.dim() ? self.sizes()[static_cast<size_t>(dim)] : 1;
    p.total = index.numel();
    p.tag = status_site(op.name, dim, p.size);  // the CPU's message names the overload too
    fill(p.sizes, index.sizes(), 1);
    fill(p.ostrides, acc.strides(), 1);
    fill(p.istrides, index.strides(), 0);
    fill(p.sstrides, s.strides(), 0);
    const DType it = index.dtype();
    void *po = acc.data(), *pi = index.data(), *ps = s.data();
    const unsigned grid = grid_1d(p.total, kThreads);
    if (!include_self) {
      Identity id = identity_of(c, k);
      Tensor flag = launch_status(dev);
      void* pf = flag.data();
      void* args[] = {&po, &pi, &pf, &id, &p};
      const std::string n = init_name(c, it);
      launch_generated(dev, n, init_source(n, c, it), grid, kThreads, args);
      check_launch_status(flag);
    }
    const bool mean = k == Kind::Mean && c != DType::Bool;
    Tensor counts;
    if (mean) {
      counts = empty({acc.numel()}, DType::Int64, dev);
      activate(dev);
      check(driver().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(counts.data()), 0,
                                     static_cast<size_t>(acc.numel()) * sizeof(int64_t), current_stream(dev)),
            "scatter_reduce counts");
    }
    Tensor flag = launch_status(dev);
    void *pf = flag.data(), *pc = mean ? counts.data() : nullptr;
    if (deterministic_algorithms() && det_kind(c, k)) {
      Tensor keys = empty({p.total}, DType::Int64, dev);
      void* pk = keys.data();
      void* kargs[] = {&pi, &pk, &pf, &p};
      const std::string kn = keys_name(it);
      launch_generated(dev, kn, keys_source(kn, it), grid, kThreads, kargs);
      check_launch_status(flag);
      Tensor sk, perm;
      sort_keys_stable(keys, sk, perm);
      void *psk = sk.data(), *pp = perm.data();
      void* args[] = {&po, &psk, &pp, &ps, &pc, &p};
      const std::string n = det_name(c, k);
      launch_generated(dev, n, det_source(n, c, k), grid, kThreads, args);
    } else {
      void* args[] = {&po, &pi, &ps, &pf, &pc, &p};
      const std::string n = fold_name(c, k, it);
      launch_generated(dev, n, fold_source(n, c, k, it), grid, kThreads, args);
      check_launch_status(flag);
    }
    if (mean) {
      long long total = acc.numel(), self_count = include_self ? 1 : 0;
      void* margs[] = {&po, &pc, &total, &self_count};
      const std::string m = mean_name(c);
      launch_generated(dev, m, mean_source(m, c), grid_1d(total, kThreads), kThreads, margs);
    }
  }
  Tensor r = in_dtype(acc, self.dtype());
  if (out_meta.size() != 1 || r.sizes() != out_meta[0].sizes) return false;
  out = {r};
  return true;
}

std::vector<std::pair<std::string, std::string>> scatter_reduce_kernel_sources() {
  std::vector<std::pair<std::string, std::string>> v;
  for (DType c : {DType::Float32, DType::Float64, DType::Int64, DType::Bool}) {
    for (DType idx : {DType::Int64, DType::Int32}) {
      for (Kind k : {Kind::Sum, Kind::Prod, Kind::Mean, Kind::Amax, Kind::Amin})
        v.emplace_back(fold_name(c, k, idx), fold_source(fold_name(c, k, idx), c, k, idx));
      v.emplace_back(init_name(c, idx), init_source(init_name(c, idx), c, idx));
    }
    for (Kind k : {Kind::Sum, Kind::Mean, Kind::Prod})
      if (det_kind(c, k)) v.emplace_back(det_name(c, k), det_source(det_name(c, k), c, k));
    if (c != DType::Bool) v.emplace_back(mean_name(c), mean_source(mean_name(c), c));
  }
  for (DType d : {DType::UInt8, DType::Int8, DType::Int16, DType::Int32}) {
    v.emplace_back(cast_name(d, DType::Int64), cast_source(cast_name(d, DType::Int64), d, DType::Int64));
    v.emplace_back(cast_name(DType::Int64, d), cast_source(cast_name(DType::Int64, d), DType::Int64, d));
  }
  for (DType idx : {DType::Int64, DType::Int32}) v.emplace_back(keys_name(idx), keys_source(keys_name(idx), idx));
  return v;
}

}  // namespace tp::cuda
