#include "cuda/index_kernels.h"

#include <cstring>

#include "core/deterministic.h"
#include "cuda/copy.h"
#include "cuda/device_status.h"
#include "cuda/driver.h"
#include "cuda/kernels.h"
#include "cuda/nn_kernels.h"
#include "cuda/stream.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace tp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxRank = 8;


// Accumulation (index_add, scatter_add, index_put with accumulate=True): E is
// the stored type, C the type the addend is computed in, tp_ld reads an E as
// C and tp_acc adds a C into memory atomically. 16-bit floats have no atomic
// add before sm_90 (bf16) / sm_70 (f16) and NVRTC wheels may lack the headers,
// so they take a compare-and-swap loop on the aligned 32-bit word holding the
// element (the caching allocator rounds blocks to 512 bytes, so the word never
// leaves the allocation), rounding the float sum to nearest even.
const char* kAcc16 =
    "typedef unsigned short E;\ntypedef float C;\n"
    "__device__ __forceinline__ C tp_ld(E h) { return TP_TO_F(h); }\n"
    "__device__ __forceinline__ void tp_acc(E* p, C v) {\n"
    "  unsigned int* w = (unsigned int*)((unsigned long long)p & ~3ull);\n"
    "  const unsigned int shift = ((unsigned long long)p & 2ull) ? 16u : 0u;\n"
    "  unsigned int old = *w, seen;\n"
    "  do {\n"
    "    seen = old;\n"
    "    const unsigned int h = TP_FROM_F(TP_TO_F((E)(seen >> shift)) + v);\n"
    "    old = atomicCAS(w, seen, (seen & ~(0xffffu << shift)) | (h << shift));\n"
    "  } while (old != seen);\n}\n";

std::string acc_prelude(DType dt) {
  switch (dt) {
    case DType::Float32:
    case DType::Float64: {
      const std::string t = float_ctype(dt);
      return "typedef " + t + " E;\ntypedef " + t +
             " C;\n#define TP_ALPHA(p) ((C)(p).alpha_f)\n"
             "__device__ __forceinline__ C tp_ld(E x) { return x; }\n"
             "__device__ __forceinline__ void tp_acc(E* p, C v) { atomicAdd(p, v); }\n";
    }
    case DType::Int32:
      return "typedef int E;\ntypedef int C;\n#define TP_ALPHA(p) ((C)(p).alpha_i)\n"
             "__device__ __forceinline__ C tp_ld(E x) { return x; }\n"
             "__device__ __forceinline__ void tp_acc(E* p, C v) { atomicAdd(p, v); }\n";
    case DType::Int64:  // two's complement: the unsigned add wraps like the signed one
      return "typedef long long E;\ntypedef long long C;\n#define TP_ALPHA(p) ((C)(p).alpha_i)\n"
             "__device__ __forceinline__ C tp_ld(E x) { return x; }\n"
             "__device__ __forceinline__ void tp_acc(E* p, C v) {\n"
             "  atomicAdd((unsigned long long*)p, (unsigned long long)v);\n}\n";
    case DType::BFloat16:  // the top half of a float32
      return std::string(
                 "#define TP_ALPHA(p) ((float)(p).alpha_f)\n"
                 "__device__ __forceinline__ float TP_TO_F(unsigned short h) { return __uint_as_float(((unsigned)h) "
                 "<< 16); }\n"
                 "__device__ __forceinline__ unsigned int TP_FROM_F(float f) {\n"
                 "  const unsigned int u = __float_as_uint(f);\n"
                 "  if ((u & 0x7fffffffu) > 0x7f800000u) return ((u >> 16) | 0x40u) & 0xffffu;\n"
                 "  return ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16) & 0xffffu;\n}\n") +
             kAcc16;
    case DType::Float16:
      return std::string(
                 "#define TP_ALPHA(p) ((float)(p).alpha_f)\n"
                 "__device__ __forceinline__ float TP_TO_F(unsigned short h) { float f; asm(\"cvt.f32.f16 %0, %1;\" "
                 ": \"=f\"(f) : \"h\"(h)); return f; }\n"
                 "__device__ __forceinline__ unsigned int TP_FROM_F(float f) { unsigned short h; "
                 "asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n") +
             kAcc16;
    default: return "";
  }
}
bool can_accumulate(DType dt) { return !acc_prelude(dt).empty(); }

// The deterministic form of a float accumulation (tp.use_deterministic_algorithms,
// core/deterministic.h): instead of one atomic add per element, the
// destinations are sorted (stably: equal ones keep the index order) and one
// thread per destination folds its run of addends in that order, in C (float
// for 16-bit floats, rounded once at the end), so the result is the same bits
// on every run and the CPU's (which adds in index order in the compute dtype).
// tp_add / tp_mul round each step and are never fused into an FMA, as the
// CPU's separate multiply and add are not. Integer sums stay atomic: integer
// addition does not depend on the order.
std::string det_prelude(DType dt) {
  switch (dt) {
    case DType::Float32:
      return acc_prelude(dt) +
             "__device__ __forceinline__ E tp_st(C v) { return v; }\n"
             "__device__ __forceinline__ C tp_add(C a, C b) { return __fadd_rn(a, b); }\n"
             "__device__ __forceinline__ C tp_mul(C a, C b) { return __fmul_rn(a, b); }\n";
    case DType::Float64:
      return acc_prelude(dt) +
             "__device__ __forceinline__ E tp_st(C v) { return v; }\n"
             "__device__ __forceinline__ C tp_add(C a, C b) { return __dadd_rn(a, b); }\n"
             "__device__ __forceinline__ C tp_mul(C a, C b) { return __dmul_rn(a, b); }\n";
    case DType::Float16:
    case DType::BFloat16:
      return acc_prelude(dt) +
             "__device__ __forceinline__ E tp_st(C v) { return (E)TP_FROM_F(v); }\n"
             "__device__ __forceinline__ C tp_add(C a, C b) { return __fadd_rn(a, b); }\n"
             "__device__ __forceinline__ C tp_mul(C a, C b) { return __fmul_rn(a, b); }\n";
    default: return "";
  }
}
bool det_float(DType dt) { return !det_prelude(dt).empty(); }

// Stable ascending sort of int64 keys (a vector on the device) by the CUDA
// sort (cuda/scan_sort.cpp, which orders ties by position): sorted keys and
// the permutation.
void sort_keys(const Tensor& keys, Tensor& sorted, Tensor& order) {
  static const OpDef& sort = get_op("sort");
  std::vector<Tensor> r = run_kernel(sort, {keys}, {{"dim", int64_t{0}}, {"descending", false}});
  sorted = r[0];
  order = r[1];
}

// A segment kernel's grid-stride loop over i < `total` (its sorted position j
// is read from i; a negative key is a bad index, skipped).
std::string seg_loop(const std::string& total) {
  return "  const long long step = (long long)gridDim.x * blockDim.x;\n"
         "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < " + total + "; i += step) {\n";
}

// ---- row kernels: outer x n x inner items, n indices along the middle dim ----
struct RowParams {
  long long outer, n, size, inner, allow_negative, alpha_i;
  double alpha_f;
  long long tag;
};
const char* kRowStruct =
    "struct P { long long outer, n, size, inner, allow_negative, alpha_i; double alpha_f; long long tag; };\n";
const char* kRowLoop =
    "  const long long total = p.outer * p.n * p.inner, step = (long long)gridDim.x * blockDim.x;\n"
    "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {\n"
    "    const long long c = i % p.inner, r = i / p.inner, k = r % p.n, o = r / p.n;\n"
    "    bool ok;\n    const long long v = tp_pos((long long)idx[k], p.size, p.allow_negative, bad, p.tag, ok);\n";

std::string gather_name(size_t bytes, DType idx) { return str("tp_index_rows_b", bytes, "_", dtype_name(idx)); }
std::string put_name(size_t bytes, DType idx) { return str("tp_index_put_b", bytes, "_", dtype_name(idx)); }
std::string add_name(DType dt, DType idx) { return str("tp_index_add_", dtype_name(dt), "_", dtype_name(idx)); }

// out[o][k][c] = src[o][idx[k]][c] (src and out contiguous).
std::string gather_source(const std::string& name, size_t bytes, DType idx) {
  std::string s = str("typedef ", bits_ctype(bytes), " E;\ntypedef ", index_ctype(idx), " I;\n", kRowStruct,
                      status_device_code());
  s += "extern \"C\" __global__ void " + name +
       "(const E* __restrict__ src, const I* __restrict__ idx, E* __restrict__ out, long long* bad, P p) {\n";
  s += kRowLoop;
  s += "    out[i] = ok ? src[(o * p.size + v) * p.inner + c] : (E)0;\n  }\n}\n";
  return s;
}

// out[o][idx[k]][c] = val[o][k][c] (out and val contiguous).
std::string put_source(const std::string& name, size_t bytes, DType idx) {
  std::string s = str("typedef ", bits_ctype(bytes), " E;\ntypedef ", index_ctype(idx), " I;\n", kRowStruct,
                      status_device_code());
  s += "extern \"C\" __global__ void " + name +
       "(E* __restrict__ out, const I* __restrict__ idx, const E* __restrict__ val, long long* bad, P p) {\n";
  s += kRowLoop;
  s += "    if (ok) out[(o * p.size + v) * p.inner + c] = val[i];\n  }\n}\n";
  return s;
}

// out[o][idx[k]][c] += alpha * val[o][k][c], atomically (repeated indices add up).
std::string add_source(const std::string& name, DType dt, DType idx) {
  std::string s = acc_prelude(dt) + str("typedef ", index_ctype(idx), " I;\n", kRowStruct,
                      status_device_code());
  s += "extern \"C\" __global__ void " + name +
       "(E* __restrict__ out, const I* __restrict__ idx, const E* __restrict__ val, long long* bad, P p) {\n";
  s += kRowLoop;
  s += "    if (ok) tp_acc(out + (o * p.size + v) * p.inner + c, tp_ld(val[i]) * TP_ALPHA(p));\n  }\n}\n";
  return s;
}

// Deterministic rows (see det_prelude): keys[k] = the checked position of
// idx[k] (-1 when bad), sorted; then one thread per (o, run start j, c) folds
// the run, or, for a plain put, the run's last element (the last occurrence,
// as the CPU leaves it) is written.
std::string row_keys_name(DType idx) { return str("tp_det_row_keys_", dtype_name(idx)); }
std::string row_keys_source(const std::string& name, DType idx) {
  return str("typedef ", index_ctype(idx), " I;\n", kRowStruct, status_device_code(), "extern \"C\" __global__ void ",
             name, "(const I* __restrict__ idx, long long* __restrict__ keys, long long* bad, P p) {\n",
             seg_loop("p.n"), "    bool ok;\n",
             "    const long long v = tp_pos((long long)idx[i], p.size, p.allow_negative, bad, p.tag, ok);\n",
             "    keys[i] = ok ? v : -1;\n  }\n}\n");
}
const char* kRowSegHead =
    "    const long long c = i % p.inner, r = i / p.inner, j = r % p.n, o = r / p.n, v = sk[j];\n";
std::string row_det_add_name(DType dt) { return str("tp_det_row_add_", dtype_name(dt)); }
std::string row_det_add_source(const std::string& name, DType dt) {
  return str(det_prelude(dt), kRowStruct, "extern \"C\" __global__ void ", name,
             "(E* __restrict__ out, const long long* __restrict__ sk, const long long* __restrict__ perm, "
             "const E* __restrict__ val, P p) {\n",
             seg_loop("p.outer * p.n * p.inner"), kRowSegHead,
             "    if (v < 0 || (j > 0 && sk[j - 1] == v)) continue;\n"
             "    E* q = out + (o * p.size + v) * p.inner + c;\n"
             "    const C al = TP_ALPHA(p);\n"
             "    C a = tp_ld(*q);\n"
             "    for (long long m = j; m < p.n && sk[m] == v; ++m)\n"
             "      a = tp_add(a, tp_mul(tp_ld(val[(o * p.n + perm[m]) * p.inner + c]), al));\n"
             "    *q = tp_st(a);\n  }\n}\n");
}
std::string row_det_put_name(size_t bytes) { return str("tp_det_row_put_b", bytes); }
std::string row_det_put_source(const std::string& name, size_t bytes) {
  return str("typedef ", bits_ctype(bytes), " E;\n", kRowStruct, "extern \"C\" __global__ void ", name,
             "(E* __restrict__ out, const long long* __restrict__ sk, const long long* __restrict__ perm, "
             "const E* __restrict__ val, P p) {\n",
             seg_loop("p.outer * p.n * p.inner"), kRowSegHead,
             "    if (v < 0 || (j + 1 < p.n && sk[j + 1] == v)) continue;\n"
             "    out[(o * p.size + v) * p.inner + c] = val[(o * p.n + perm[j]) * p.inner + c];\n  }\n}\n");
}

// ---- dim-wise kernels over the elements of an index of x's rank (<= 8) ----
// gather: out[e] = x[e with e[dim] = idx[e]]; scatter: dst[e with e[dim] =
// idx[e]] (+)= src[e]. idx and out contiguous; x, dst and src any strides (a
// 0-d src, a fill value, has stride 0 everywhere).
struct DimParams {
  long long rank, dim, size, total, tag;
  long long sizes[kMaxRank], xstrides[kMaxRank], sstrides[kMaxRank];
};
const char* kDimStruct =
    "struct G { long long rank, dim, size, total, tag; long long sizes[8], xstrides[8], sstrides[8]; };\n";
const char* kDimLoop =
    "  const long long step = (long long)gridDim.x * blockDim.x;\n"
    "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.total; i += step) {\n"
    "    bool ok;\n    const long long v = tp_pos((long long)idx[i], p.size, 0, bad, p.tag, ok);\n"
    "    long long rest = i, off = 0, soff = 0;\n"
    "    for (int d = (int)p.rank - 1; d >= 0; --d) {\n"
    "      const long long c = rest % p.sizes[d];\n      rest /= p.sizes[d];\n"
    "      off += (d == p.dim ? v : c) * p.xstrides[d];\n      soff += c * p.sstrides[d];\n    }\n";

std::string gather_dim_name(size_t bytes, DType idx) { return str("tp_gather_b", bytes, "_", dtype_name(idx)); }
std::string scatter_name(size_t bytes, DType idx) { return str("tp_scatter_b", bytes, "_", dtype_name(idx)); }
std::string scatter_add_name(DType dt, DType idx) {
  return str("tp_scatter_add_", dtype_name(dt), "_", dtype_name(idx));
}

std::string gather_dim_source(const std::string& name, size_t bytes, DType idx) {
  std::string s = str("typedef ", bits_ctype(bytes), " E;\ntypedef ", index_ctype(idx), " I;\n", kDimStruct,
                      status_device_code());
  s += "extern \"C\" __global__ void " + name +
       "(const E* __restrict__ x, const I* __restrict__ idx, E* __restrict__ out, long long* bad, G p) {\n";
  s += kDimLoop;
  s += "    out[i] = ok ? x[off] : (E)0;\n  }\n}\n";
  return s;
}

std::string scatter_source(const std::string& name, const std::string& prelude, bool add, DType idx) {
  std::string s = prelude + str("typedef ", index_ctype(idx), " I;\n", kDimStruct,
                      status_device_code());
  s += "extern \"C\" __global__ void " + name +
       "(E* __restrict__ dst, const I* __restrict__ idx, const E* __restrict__ src, long long* bad, G p) {\n";
  s += kDimLoop;
  s += add ? "    if (ok) tp_acc(dst + off, tp_ld(src[soff]));\n  }\n}\n" : "    if (ok) dst[off] = src[soff];\n  }\n}\n";
  return s;
}
std::string scatter_bits_source(const std::string& name, size_t bytes, DType idx) {
  return scatter_source(name, str("typedef ", bits_ctype(bytes), " E;\n"), false, idx);
}
std::string scatter_add_source(const std::string& name, DType dt, DType idx) {
  return scatter_source(name, acc_prelude(dt), true, idx);
}

// Deterministic scatters (see det_prelude): keys[i] = the offset in dst of
// index element i (-1 when bad), sorted; one thread per run start folds the
// run in index order, or, for a plain scatter, the run's last element is
// written (the last occurrence). tp_soff finds src's element of index element e.
const char* kDimSoff =
    "__device__ __forceinline__ long long tp_soff(long long e, const G& p) {\n"
    "  long long s = 0;\n"
    "  for (int d = (int)p.rank - 1; d >= 0; --d) { s += (e % p.sizes[d]) * p.sstrides[d]; e /= p.sizes[d]; }\n"
    "  return s;\n}\n";
std::string dim_keys_name(DType idx) { return str("tp_det_dim_keys_", dtype_name(idx)); }
std::string dim_keys_source(const std::string& name, DType idx) {
  return str("typedef ", index_ctype(idx), " I;\n", kDimStruct, status_device_code(), "extern \"C\" __global__ void ",
             name, "(const I* __restrict__ idx, long long* __restrict__ keys, long long* bad, G p) {\n", kDimLoop,
             "    (void)soff;\n    keys[i] = ok ? off : -1;\n  }\n}\n");
}
std::string dim_det_add_name(DType dt) { return str("tp_det_scatter_add_", dtype_name(dt)); }
std::string dim_det_add_source(const std::string& name, DType dt) {
  return str(det_prelude(dt), kDimStruct, kDimSoff, "extern \"C\" __global__ void ", name,
             "(E* dst, const long long* __restrict__ sk, const long long* __restrict__ perm, const E* src, G p) {\n",
             seg_loop("p.total"),
             "    const long long v = sk[i];\n"
             "    if (v < 0 || (i > 0 && sk[i - 1] == v)) continue;\n"
             "    C a = tp_ld(dst[v]);\n"
             "    for (long long m = i; m < p.total && sk[m] == v; ++m) a = tp_add(a, tp_ld(src[tp_soff(perm[m], p)]));\n"
             "    dst[v] = tp_st(a);\n  }\n}\n");
}
std::string dim_det_put_name(size_t bytes) { return str("tp_det_scatter_b", bytes); }
std::string dim_det_put_source(const std::string& name, size_t bytes) {
  return str("typedef ", bits_ctype(bytes), " E;\n", kDimStruct, kDimSoff, "extern \"C\" __global__ void ", name,
             "(E* dst, const long long* __restrict__ sk, const long long* __restrict__ perm, const E* src, G p) {\n",
             seg_loop("p.total"),
             "    const long long v = sk[i];\n"
             "    if (v < 0 || (i + 1 < p.total && sk[i + 1] == v)) continue;\n"
             "    dst[v] = src[tp_soff(perm[i], p)];\n  }\n}\n");
}

// ---- host side ----
Tensor contiguous_on_device(const Tensor& t) {
  static const OpDef& clone = get_op("clone");
  return t.is_contiguous() ? t : run_kernel(clone, {t}, {})[0];
}

// A contiguous copy of self for an out-of-place operator's result (a
// contiguous self of any dtype moves as bytes: no elementwise kernel needed).
Tensor contiguous_clone(const Tensor& self) {
  static const OpDef& clone = get_op("clone");
  if (!self.is_contiguous()) return contiguous_on_device(run_kernel(clone, {self}, {})[0]);
  Tensor r = empty(self.sizes(), self.dtype(), self.device().index);
  if (r.numel() > 0) copy_device_to_device(r, self);
  return r;
}

// One checked launch: a bad index is recorded in the device's status
// (cuda/device_status.h) and reported at the next synchronization point; the
// launch itself does not synchronize unless synchronous checks are on.
void launch_checked(int dev, const std::string& kernel, const std::string& source, int64_t total, void** args,
                    const Tensor& status) {
  launch_generated(dev, kernel, source, grid_1d(total, kThreads), kThreads, args);
  check_launch_status(status);
}

bool same_device(const std::vector<Tensor>& in, int dev) {
  for (const Tensor& t : in)
    if (t.defined() && (t.device().kind != Device::Kind::CUDA || t.device().index != dev)) return false;
  return true;
}

// A 0-d tensor of `dt` on the device holding s, written by memsets (no
// upload: nothing waits for the host, and a CUDA graph capture records the
// value itself, where an upload would read freed host memory at replay).
Tensor device_scalar(const Scalar& s, DType dt, int dev) {
  const Tensor host = Tensor::scalar_tensor(s, dt);
  Tensor t = empty(Shape{}, dt, dev);
  const auto* b = static_cast<const unsigned char*>(host.data());
  const CUdeviceptr d = reinterpret_cast<CUdeviceptr>(t.data());
  activate(dev);
  if (itemsize(dt) % 4 == 0) {
    for (int64_t w = 0; w < itemsize(dt) / 4; ++w) {
      unsigned word = 0;
      std::memcpy(&word, b + 4 * w, 4);
      check(driver().cuMemsetD32Async(d + 4 * w, word, 1, current_stream(dev)), "cuMemsetD32Async");
    }
  } else {
    for (int64_t k = 0; k < itemsize(dt); ++k)
      check(driver().cuMemsetD8Async(d + k, b[k], 1, current_stream(dev)), "cuMemsetD8Async");
  }
  return t;
}

// An index tensor on self's device: advanced indexing takes host indices too,
// as PyTorch does (x[[0, 2]] builds a CPU tensor), and uploads them (not in a
// CUDA graph capture: the replay would read the host memory long freed).
Tensor index_on(const Tensor& index, int dev) {
  if (index.device().kind == Device::Kind::CPU) {
    check_not_capturing("indexing a CUDA tensor with a CPU index tensor");
    return to_device(index, dev);
  }
  return index.device().index == dev ? contiguous_on_device(index) : Tensor();
}

// A 0-d value (a wrapped Python number or a fill value) as a 0-d tensor of
// `dt` on the device; a larger value must already have `dt` (else undefined).
Tensor value_on(const Tensor& v, DType dt, int dev) {
  if (v.dim() == 0 && (v.dtype() != dt || v.device().kind == Device::Kind::CPU)) {
    if (v.device().kind == Device::Kind::CPU) return device_scalar(v.item(), dt, dev);
    return run_kernel(get_op("to"), {v}, {{"dtype", dt}})[0];  // a device number of another dtype
  }
  if (v.dtype() != dt || v.device().kind != Device::Kind::CUDA || v.device().index != dev) return Tensor();
  return v;
}

void set_alpha(RowParams& p, const Scalar& alpha) {
  p.alpha_f = alpha.to_double();
  p.alpha_i = alpha.is_float() ? static_cast<long long>(alpha.to_double()) : alpha.to<int64_t>();
}

// outer x n x inner: the sizes around dim `dim` of `sizes`.
RowParams row_params(const Shape& sizes, int64_t dim, int64_t n, bool allow_negative) {
  RowParams p{1, n, sizes.empty() ? 1 : sizes[static_cast<size_t>(dim)], 1, allow_negative ? 1 : 0, 1, 1.0, 0};
  for (int64_t d = 0; d < dim; ++d) p.outer *= sizes[static_cast<size_t>(d)];
  for (int64_t d = dim + 1; d < static_cast<int64_t>(sizes.size()); ++d) p.inner *= sizes[static_cast<size_t>(d)];
  return p;
}

// outer x [index count] x inner rows of a source along `dim`.
Tensor gather_rows(const Tensor& src, int64_t dim, const Tensor& index, const Shape& out_sizes, bool allow_negative,
                   const std::string& op) {
  const int dev = src.device().index;
  Tensor s = contiguous_on_device(src), idx = contiguous_on_device(index);
  RowParams p = row_params(src.sizes(), dim, idx.numel(), allow_negative);
  Tensor out = empty(out_sizes, src.dtype(), dev);
  const int64_t total = p.outer * p.n * p.inner;
  if (total == 0) return out;
  p.tag = status_site(op, dim, p.size);
  Tensor flag = launch_status(dev);
  void *ps = s.data(), *pi = idx.data(), *po = out.data(), *pf = flag.data();
  void* args[] = {&ps, &pi, &po, &pf, &p};
  const size_t bytes = itemsize(src.dtype());
  const std::string k = gather_name(bytes, idx.dtype());
  launch_checked(dev, k, gather_source(k, bytes, idx.dtype()), total, args, flag);
  return out;
}

// The one defined index tensor among entries [begin, end) of `in` (the others
// are whole dims), as its position; -1 when there is not exactly one.
int64_t single_index(const std::vector<Tensor>& in, size_t begin, size_t end) {
  int64_t at = -1;
  for (size_t i = begin; i < end; ++i) {
    if (!in[i].defined()) continue;
    if (at >= 0 || !index_ctype(in[i].dtype())) return -1;
    at = static_cast<int64_t>(i - begin);
  }
  return at;
}

// index_add(_) and index_put(_) with one index tensor: alpha * values added
// (accumulate) or written into the rows of a contiguous target along `dim`.
void put_rows(const Tensor& target, int64_t dim, const Tensor& idx, const Tensor& val, bool accumulate,
              bool allow_negative, const Scalar& alpha, const std::string& op) {
  const int dev = target.device().index;
  RowParams p = row_params(target.dim() ? target.sizes() : Shape{1}, dim, idx.numel(), allow_negative);
  set_alpha(p, alpha);
  const int64_t total = p.outer * p.n * p.inner;
  if (total == 0) return;
  p.tag = status_site(op, dim, p.size);
  Tensor flag = launch_status(dev);
  const DType dt = target.dtype();
  // Deterministic mode: float sums and puts that may repeat a position.
  if (deterministic_algorithms() && (accumulate ? det_float(dt) : p.n > 1)) {
    Tensor keys = empty({p.n}, DType::Int64, dev);
    {
      void *pi = idx.data(), *pk = keys.data(), *pf = flag.data();
      void* args[] = {&pi, &pk, &pf, &p};
      const std::string k = row_keys_name(idx.dtype());
      launch_checked(dev, k, row_keys_source(k, idx.dtype()), p.n, args, flag);
    }
    Tensor sk, perm;
    sort_keys(keys, sk, perm);
    void *pt = target.data(), *ps = sk.data(), *pp = perm.data(), *pv = val.data();
    void* args[] = {&pt, &ps, &pp, &pv, &p};
    const std::string k = accumulate ? row_det_add_name(dt) : row_det_put_name(itemsize(dt));
    launch_generated(dev, k, accumulate ? row_det_add_source(k, dt) : row_det_put_source(k, itemsize(dt)),
                     grid_1d(total, kThreads), kThreads, args);
    return;
  }
  void *pt = target.data(), *pi = idx.data(), *pv = val.data(), *pf = flag.data();
  void* args[] = {&pt, &pi, &pv, &pf, &p};
  if (accumulate) {
    const std::string k = add_name(dt, idx.dtype());
    launch_checked(dev, k, add_source(k, dt, idx.dtype()), total, args, flag);
  } else {
    const std::string k = put_name(itemsize(dt), idx.dtype());
    launch_checked(dev, k, put_source(k, itemsize(dt), idx.dtype()), total, args, flag);
  }
}

// Sizes and strides as the dim-wise kernels read them (a 0-d tensor as [1]).
void fill_dims(long long* dst, const Shape& v, long long zero_d) {
  if (v.empty()) dst[0] = zero_d;
  for (size_t d = 0; d < v.size(); ++d) dst[d] = v[d];
}

bool dim_op(const std::string& name, const std::vector<Tensor>& in, const Attrs& attrs,
            const std::vector<TensorMeta>& out_meta, bool inplace, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  // The CPU operators take any integer index (PyTorch: int32/int64, and any
  // dtype when the index is empty, e.g. gather's gradient scatter_add with an
  // empty uint8 index); the kernels are written for int32/int64, so a narrower
  // index is widened on the device first (exact).
  const DType in_it = in[1].dtype();
  const bool narrow = in_it == DType::UInt8 || in_it == DType::Int8 || in_it == DType::Int16;
  const Tensor index = narrow && in[1].device().kind == Device::Kind::CUDA ? ops::to_dtype(in[1], DType::Int64) : in[1];
  const DType dt = x.dtype();
  if (!index_ctype(index.dtype()) || !bits_ctype(itemsize(dt)) || x.dim() > kMaxRank) return false;
  const int dev = x.device().index;
  if (!same_device({x, index}, dev)) return false;
  const int64_t rank = std::max<int64_t>(x.dim(), 1);
  if (index.numel() > 0 && std::max<int64_t>(index.dim(), 1) != rank) return false;
  int64_t dim = attrs.get_int("dim");
  if (dim < 0) dim += rank;
  const bool gather = name == "gather";
  bool add = name.rfind("scatter_add", 0) == 0;
  if (!gather && !add && attrs.has("reduce") && !attrs.is_none("reduce")) {
    const std::string& r = attrs.get_str("reduce");
    if (r != "add" && r != "sum") return false;  // multiply: no kernel
    add = true;
  }
  if (add && !can_accumulate(dt)) return false;
  // The source: gather reads x; scatter writes into a copy of x (or x itself) from src.
  Tensor dst, src;
  if (gather) {
    dst = empty(out_meta[0].sizes, dt, dev);
    src = x;
  } else {
    src = in.size() > 2 ? value_on(in[2], dt, dev)
                        : device_scalar(attrs.get_scalar("value"), dt, dev);
    if (!src.defined()) return false;
    dst = inplace ? x : contiguous_clone(x);
  }
  Tensor idx = contiguous_on_device(index);
  DimParams p{};
  p.rank = rank;
  p.dim = dim;
  p.size = x.dim() ? x.sizes()[static_cast<size_t>(dim)] : 1;
  p.total = idx.numel();
  fill_dims(p.sizes, idx.sizes(), 1);
  const Tensor& moved = gather ? x : dst;  // the tensor addressed through idx
  fill_dims(p.xstrides, moved.strides(), 1);
  if (!gather) fill_dims(p.sstrides, src.dim() ? src.strides() : Shape(static_cast<size_t>(rank), 0), 0);
  if (p.total > 0) {
    const size_t dot = name.find('.');
    p.tag = status_site(dot == std::string::npos ? name : name.substr(0, dot), dim, p.size);
    Tensor flag = launch_status(dev);
    // Deterministic mode: float scatter sums, and scatters of a src that may repeat a position.
    if (deterministic_algorithms() && !gather && (add ? det_float(dt) : src.dim() > 0) && p.total > 1) {
      Tensor keys = empty({p.total}, DType::Int64, dev);
      {
        void *pi = idx.data(), *pk = keys.data(), *pf = flag.data();
        void* args[] = {&pi, &pk, &pf, &p};
        const std::string k = dim_keys_name(idx.dtype());
        launch_checked(dev, k, dim_keys_source(k, idx.dtype()), p.total, args, flag);
      }
      Tensor sk, perm;
      sort_keys(keys, sk, perm);
      void *pd = dst.data(), *ps = sk.data(), *pp = perm.data(), *pv = src.data();
      void* args[] = {&pd, &ps, &pp, &pv, &p};
      const size_t bytes = itemsize(dt);
      const std::string k = add ? dim_det_add_name(dt) : dim_det_put_name(bytes);
      launch_generated(dev, k, add ? dim_det_add_source(k, dt) : dim_det_put_source(k, bytes),
                       grid_1d(p.total, kThreads), kThreads, args);
      out = {dst};
      return true;
    }
    void *pa = gather ? x.data() : dst.data(), *pi = idx.data(), *pb = gather ? dst.data() : src.data(),
         *pf = flag.data();
    void* args[] = {&pa, &pi, &pb, &pf, &p};
    const size_t bytes = itemsize(dt);
    const DType it = idx.dtype();
    std::string k, source;
    if (gather) {
      k = gather_dim_name(bytes, it);
      source = gather_dim_source(k, bytes, it);
    } else if (add) {
      k = scatter_add_name(dt, it);
      source = scatter_add_source(k, dt, it);
    } else {
      k = scatter_name(bytes, it);
      source = scatter_bits_source(k, bytes, it);
    }
    launch_checked(dev, k, source, p.total, args, flag);
  }
  out = {dst};
  return true;
}

}  // namespace

bool index_kernel(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                  const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out) {
  const std::string name = op.name;
  const bool inplace = op.has(kInplace);
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
  if (name == "index") {  // (self, entries...): one index tensor at entry d, whole dims elsewhere
    const Tensor& x = in[0];
    const int64_t d = single_index(in, 1, in.size());
    if (d < 0 || x.dim() == 0 || !bits_ctype(itemsize(x.dtype())) || x.device().kind != Device::Kind::CUDA)
      return false;
    Tensor idx = index_on(in[static_cast<size_t>(d) + 1], x.device().index);
    if (!idx.defined()) return false;
    out = {gather_rows(x, d, idx, out_meta[0].sizes, /*allow_negative=*/true, name)};
    return true;
  }
  if (name == "index_add" || name == "index_add_") {  // (self, index, source), dim, alpha
    const Tensor &self = in[0], &index = in[1];
    const DType dt = self.dtype();
    if (!index_ctype(index.dtype()) || index.dim() > 1 || !can_accumulate(dt) || in[2].dtype() != dt) return false;
    const int dev = self.device().index;
    if (!same_device(in, dev) || (inplace && !self.is_contiguous())) return false;  // else: out-of-place, copied in
    int64_t dim = attrs.get_int("dim");
    if (dim < 0) dim += std::max<int64_t>(self.dim(), 1);
    Tensor target = inplace ? self : contiguous_clone(self);
    put_rows(target, self.dim() ? dim : 0, contiguous_on_device(index), contiguous_on_device(in[2]), true,
             /*allow_negative=*/false, attrs.get_scalar("alpha"), name);
    out = {target};
    return true;
  }
  if (name.rfind("scatter", 0) == 0 && name.rfind("scatter_reduce", 0) != 0) return dim_op(name, in, attrs, out_meta, inplace, out);
  if (name == "gather") {  // (self, index), dim; index of self's rank, no larger along the other dims
    if (in[0].dim() == 0) return false;
    return dim_op(name, in, attrs, out_meta, false, out);
  }
  if (name == "index_put" || name == "index_put_") {  // (self, entries..., values): one index tensor
    if (in.size() < 3) return false;
    const Tensor& self = in[0];
    const int64_t d = single_index(in, 1, in.size() - 1);
    const bool acc = attrs.get_or<bool>("accumulate", false);
    const DType dt = self.dtype();
    if (d < 0 || self.dim() == 0 || !bits_ctype(itemsize(dt)) || (acc && !can_accumulate(dt))) return false;
    const int dev = self.device().index;
    if (self.device().kind != Device::Kind::CUDA || (inplace && !self.is_contiguous())) return false;
    Tensor idx = index_on(in[static_cast<size_t>(d) + 1], dev);
    Tensor values = value_on(in.back(), dt, dev);
    if (!idx.defined() || !values.defined()) return false;
    static const OpDef& expand = get_op("expand");
    Tensor target = inplace ? self : contiguous_clone(self);
    // values broadcast to the indexing result: self's sizes with dim d replaced by the index's
    Shape vs(self.sizes().begin(), self.sizes().begin() + d);
    for (int64_t s : idx.sizes()) vs.push_back(s);
    for (int64_t k = d + 1; k < self.dim(); ++k) vs.push_back(self.sizes()[static_cast<size_t>(k)]);
    Tensor val = contiguous_on_device(run_kernel(expand, {values}, {{"size", vs}})[0]);
    put_rows(target, d, idx, val, acc, /*allow_negative=*/true, Scalar(int64_t{1}), name);
    out = {target};
    return true;
  }
  return false;
}

std::vector<std::pair<std::string, std::string>> index_kernel_sources() {
  std::vector<std::pair<std::string, std::string>> v;
  for (DType idx : {DType::Int64, DType::Int32}) {
    for (size_t bytes : {1, 2, 4, 8}) {
      for (auto [n, s] : {std::pair{gather_name(bytes, idx), &gather_source}, std::pair{put_name(bytes, idx), &put_source},
                          std::pair{gather_dim_name(bytes, idx), &gather_dim_source},
                          std::pair{scatter_name(bytes, idx), &scatter_bits_source}})
        v.emplace_back(n, s(n, bytes, idx));
    }
    for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32, DType::Int64}) {
      const std::string a = add_name(dt, idx), b = scatter_add_name(dt, idx);
      v.emplace_back(a, add_source(a, dt, idx));
      v.emplace_back(b, scatter_add_source(b, dt, idx));
    }
    v.emplace_back(row_keys_name(idx), row_keys_source(row_keys_name(idx), idx));
    v.emplace_back(dim_keys_name(idx), dim_keys_source(dim_keys_name(idx), idx));
  }
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    v.emplace_back(row_det_add_name(dt), row_det_add_source(row_det_add_name(dt), dt));
    v.emplace_back(dim_det_add_name(dt), dim_det_add_source(dim_det_add_name(dt), dt));
  }
  for (size_t bytes : {1, 2, 4, 8}) {
    v.emplace_back(row_det_put_name(bytes), row_det_put_source(row_det_put_name(bytes), bytes));
    v.emplace_back(dim_det_put_name(bytes), dim_det_put_source(dim_det_put_name(bytes), bytes));
  }
  return v;
}

std::string accumulate_prelude(DType dt) { return acc_prelude(dt); }
std::string deterministic_prelude(DType dt) { return det_prelude(dt); }
void sort_keys_stable(const Tensor& keys, Tensor& sorted, Tensor& order) { sort_keys(keys, sorted, order); }
Tensor device_value(const Tensor& v, DType dt, int dev) { return value_on(v, dt, dev); }

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

}  // namespace tp::cuda
