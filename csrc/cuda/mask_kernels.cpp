#include "cuda/mask_kernels.h"

#include <algorithm>

#include "core/deterministic.h"
#include "core/error.h"
#include "cuda/copy.h"
#include "cuda/device_status.h"
#include "cuda/index_kernels.h"
#include "cuda/kernels.h"
#include "cuda/nn_kernels.h"
#include "cuda/stream.h"
#include "ops/ops.h"

namespace tp::cuda {
namespace {

constexpr int kThreads = 256;  // a multiple of the warp: the compaction ranks hits with warp ballots
constexpr int kMaxRank = 8;
// nonzero's blocks: at most this many, each taking a run of consecutive
// tiles of kThreads elements (the write pass sums the counts of the blocks
// before its own, so their number stays small).
constexpr int64_t kMaxBlocks = 1024;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ---- nonzero ----
// Elements are read as raw bits through the input's strides (no contiguous
// copy). A float counts as zero when no bit but the sign bit is set (-0.0 is
// zero, NaN is not), as on the CPU.
struct NzParams {
  long long n, nd, tiles_per_block;
  long long sizes[kMaxRank], strides[kMaxRank];
};

std::string nz_tag(size_t bytes, bool fp) { return str("b", bytes, fp ? "_f" : "_i"); }
std::string nz_count_name(size_t bytes, bool fp) { return "tp_nonzero_count_" + nz_tag(bytes, fp); }
std::string nz_write_name(size_t bytes, bool fp) { return "tp_nonzero_write_" + nz_tag(bytes, fp); }

std::string nz_prelude(size_t bytes, bool fp) {
  return str("typedef ", bits_ctype(bytes), " E;\n",
             "struct Q { long long n, nd, tpb; long long sizes[8], strides[8]; };\n",
             "__device__ __forceinline__ bool tp_hit(E v) { return ",
             fp ? "(E)(v << 1) != (E)0" : "v != (E)0", "; }\n",
             "__device__ __forceinline__ long long tp_at(long long i, const Q& p) {\n"
             "  long long off = 0;\n"
             "  for (int d = (int)p.nd - 1; d >= 0; --d) { off += (i % p.sizes[d]) * p.strides[d]; i /= p.sizes[d]; }\n"
             "  return off;\n}\n"
             // block b takes tiles [b * tpb, min((b + 1) * tpb, tiles)) of blockDim.x elements
             "#define TP_TILES \\\n"
             "  const long long tiles = (p.n + blockDim.x - 1) / blockDim.x; \\\n"
             "  const long long t0 = (long long)blockIdx.x * p.tpb; \\\n"
             "  const long long t1 = t0 + p.tpb < tiles ? t0 + p.tpb : tiles;\n");
}

// counts[b] = the hits of block b.
std::string nz_count_source(const std::string& name, size_t bytes, bool fp) {
  return nz_prelude(bytes, fp) + "extern \"C\" __global__ void " + name +
         "(const E* __restrict__ x, long long* __restrict__ counts, Q p) {\n"
         "  TP_TILES\n"
         "  long long c = 0;\n"
         "  for (long long t = t0; t < t1; ++t) {\n"
         "    const long long i = t * blockDim.x + threadIdx.x;\n"
         "    c += __syncthreads_count(i < p.n && tp_hit(x[tp_at(i, p)]));\n"
         "  }\n"
         "  if (threadIdx.x == 0) counts[blockIdx.x] = c;\n}\n";
}

// Each hit's coordinates at row (hits of the blocks before) + (hits before it
// in its block): tile by tile, a warp ranks its hits with a ballot and the
// warps' totals give each warp's start, so rows follow the elements' order.
std::string nz_write_source(const std::string& name, size_t bytes, bool fp) {
  return nz_prelude(bytes, fp) + "extern \"C\" __global__ void " + name +
         "(const E* __restrict__ x, const long long* __restrict__ counts, long long* __restrict__ out, Q p) {\n"
         "  __shared__ unsigned long long start;\n"
         "  __shared__ int warp_hits[32];\n"
         "  if (threadIdx.x == 0) start = 0ull;\n"
         "  __syncthreads();\n"
         "  unsigned long long part = 0ull;\n"
         "  for (long long b = threadIdx.x; b < blockIdx.x; b += blockDim.x) part += (unsigned long long)counts[b];\n"
         "  if (part) atomicAdd(&start, part);\n"
         "  __syncthreads();\n"
         "  long long row = (long long)start;\n"
         "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;\n"
         "  TP_TILES\n"
         "  for (long long t = t0; t < t1; ++t) {\n"
         "    const long long i = t * blockDim.x + threadIdx.x;\n"
         "    const bool hit = i < p.n && tp_hit(x[tp_at(i, p)]);\n"
         "    const unsigned m = __ballot_sync(0xffffffffu, hit);\n"
         "    if (lane == 0) warp_hits[warp] = __popc(m);\n"
         "    __syncthreads();\n"
         "    int before = 0, total = 0;\n"
         "    for (int w = 0; w < warps; ++w) { const int c = warp_hits[w]; before += w < warp ? c : 0; total += c; }\n"
         "    if (hit) {\n"
         "      const long long k = row + before + __popc(m & ((1u << lane) - 1u));\n"
         "      long long rest = i;\n"
         "      for (int d = (int)p.nd - 1; d >= 0; --d) { out[k * p.nd + d] = rest % p.sizes[d]; rest /= p.sizes[d]; }\n"
         "    }\n"
         "    row += total;\n"
         "    __syncthreads();\n"  // warp_hits is rewritten by the next tile
         "  }\n}\n";
}

Tensor nonzero_cuda(const Tensor& x) {
  const int dev = x.device().index;
  const int64_t n = x.numel(), nd = x.dim();
  if (n == 0) return empty({0, nd}, DType::Int64, dev);
  // The result's size is read back from the device: a CUDA graph cannot record that.
  check_not_capturing("nonzero (its result's size is read back from the device)");
  const size_t bytes = static_cast<size_t>(itemsize(x.dtype()));
  const bool fp = is_floating(x.dtype());
  NzParams p{};
  p.n = n;
  p.nd = nd;
  for (int64_t d = 0; d < nd; ++d) {
    p.sizes[d] = x.sizes()[static_cast<size_t>(d)];
    p.strides[d] = x.strides()[static_cast<size_t>(d)];
  }
  const int64_t tiles = ceil_div(n, kThreads);
  p.tiles_per_block = ceil_div(tiles, std::min(tiles, kMaxBlocks));
  const int64_t blocks = ceil_div(tiles, p.tiles_per_block);
  Tensor counts = empty({blocks}, DType::Int64, dev);
  void* px = x.data();
  void* pc = counts.data();
  {
    void* args[] = {&px, &pc, &p};
    const std::string k = nz_count_name(bytes, fp);
    launch_generated(dev, k, nz_count_source(k, bytes, fp), static_cast<unsigned>(blocks), kThreads, args);
  }
  const Tensor host = to_cpu(counts);  // synchronizes
  int64_t total = 0;
  for (int64_t b = 0; b < blocks; ++b) total += host.data_as<int64_t>()[b];
  Tensor out = empty({total, nd}, DType::Int64, dev);
  if (total > 0 && nd > 0) {
    void* po = out.data();
    void* args[] = {&px, &pc, &po, &p};
    const std::string k = nz_write_name(bytes, fp);
    launch_generated(dev, k, nz_write_source(k, bytes, fp), static_cast<unsigned>(blocks), kThreads, args);
  }
  return out;
}

// ---- advanced indexing with several index tensors ----
// The index tensors broadcast to B. off[b] = sum over the indexed dims d of
// index_d[b] (checked, negative from the end) * self.stride(d), one launch
// per indexed dim (so a bad index names its own dim and size).
struct OffParams {
  long long nb, brank, size, stride, first, tag;
  long long bsizes[kMaxRank], istrides[kMaxRank];
};

std::string off_name(DType idx) { return str("tp_advidx_offsets_", dtype_name(idx)); }
std::string off_source(const std::string& name, DType idx) {
  return str("typedef ", index_ctype(idx), " I;\n",
             "struct O { long long nb, brank, size, stride, first, tag; long long bsizes[8], istrides[8]; };\n",
             status_device_code(), "extern \"C\" __global__ void ", name,
             "(const I* __restrict__ idx, long long* __restrict__ off, long long* bad, O p) {\n"
             "  const long long step = (long long)gridDim.x * blockDim.x;\n"
             "  for (long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x; b < p.nb; b += step) {\n"
             "    long long rest = b, at = 0;\n"
             "    for (int d = (int)p.brank - 1; d >= 0; --d) { at += (rest % p.bsizes[d]) * p.istrides[d]; "
             "rest /= p.bsizes[d]; }\n"
             "    bool ok;\n"
             "    const long long v = tp_pos((long long)idx[at], p.size, 1, bad, p.tag, ok);\n"
             "    off[b] = (p.first ? 0 : off[b]) + v * p.stride;\n"
             "  }\n}\n");
}

// The move: one thread per element of the indexing result R (its sizes are
// W: the kept dims with B's dims at [bpos, bpos + brank)); self's element is
// at the kept dims' strides plus off[flat position in B], the values' (or the
// result's) at their own strides (0 along broadcast dims).
constexpr int kMaxWalk = 16;
struct MoveParams {
  long long total, rank, bpos, brank;
  long long sizes[kMaxWalk], sstrides[kMaxWalk], vstrides[kMaxWalk];
};
const char* kMoveStruct =
    "struct M { long long total, rank, bpos, brank; long long sizes[16], sstrides[16], vstrides[16]; };\n";
const char* kMoveLoop =
    "  const long long step = (long long)gridDim.x * blockDim.x;\n"
    "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.total; i += step) {\n"
    "    long long rest = i, so = 0, vo = 0, b = 0, scale = 1;\n"
    "    for (int d = (int)p.rank - 1; d >= 0; --d) {\n"
    "      const long long c = rest % p.sizes[d];\n"
    "      rest /= p.sizes[d];\n"
    "      if (d >= p.bpos && d < p.bpos + p.brank) { b += c * scale; scale *= p.sizes[d]; }\n"
    "      else so += c * p.sstrides[d];\n"
    "      vo += c * p.vstrides[d];\n"
    "    }\n"
    "    so += off[b];\n";

std::string adv_gather_name(size_t bytes) { return str("tp_advidx_gather_b", bytes); }
std::string adv_put_name(size_t bytes) { return str("tp_advidx_put_b", bytes); }
std::string adv_acc_name(DType dt) { return str("tp_advidx_acc_", dtype_name(dt)); }

// out[i] = self[...] (out contiguous: vstrides unused).
std::string adv_gather_source(const std::string& name, size_t bytes) {
  return str("typedef ", bits_ctype(bytes), " E;\n", kMoveStruct, "extern \"C\" __global__ void ", name,
             "(const E* __restrict__ x, const long long* __restrict__ off, E* __restrict__ out, M p) {\n", kMoveLoop,
             "    (void)vo;\n    out[i] = x[so];\n  }\n}\n");
}
// self[...] = val[...] (a position named twice keeps one of its values).
std::string adv_put_source(const std::string& name, size_t bytes) {
  return str("typedef ", bits_ctype(bytes), " E;\n", kMoveStruct, "extern \"C\" __global__ void ", name,
             "(E* x, const long long* __restrict__ off, const E* val, M p) {\n", kMoveLoop,
             "    x[so] = val[vo];\n  }\n}\n");
}
// self[...] += val[...] atomically; bool accumulates as `or` (every writer stores the same true).
std::string adv_acc_source(const std::string& name, DType dt) {
  const bool boolean = dt == DType::Bool;
  return str(boolean ? "typedef unsigned char E;\n" : accumulate_prelude(dt), kMoveStruct,
             "extern \"C\" __global__ void ", name, "(E* x, const long long* __restrict__ off, const E* val, M p) {\n",
             kMoveLoop, boolean ? "    if (val[vo]) x[so] = (E)1;\n  }\n}\n" : "    tp_acc(x + so, tp_ld(val[vo]));\n  }\n}\n");
}
bool can_accumulate(DType dt) { return dt == DType::Bool || !accumulate_prelude(dt).empty(); }

// The deterministic form (tp.use_deterministic_algorithms) of a float
// accumulation and of a put: keys[i] = self's offset of result element i,
// sorted stably (cuda/index_kernels.h); one thread per run of equal offsets
// folds the run in index order (the CPU's order and rounding) or, for a put,
// writes the run's last element (the last occurrence, as the CPU leaves it).
const char* kVoff =
    "__device__ __forceinline__ long long tp_voff(long long e, const M& p) {\n"
    "  long long v = 0;\n"
    "  for (int d = (int)p.rank - 1; d >= 0; --d) { v += (e % p.sizes[d]) * p.vstrides[d]; e /= p.sizes[d]; }\n"
    "  return v;\n}\n";
const char* kRunLoop =
    "  const long long step = (long long)gridDim.x * blockDim.x;\n"
    "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.total; i += step) {\n"
    "    const long long at = sk[i];\n";
std::string adv_keys_name() { return "tp_det_advidx_keys"; }
std::string adv_keys_source(const std::string& name) {
  return str(kMoveStruct, "extern \"C\" __global__ void ", name,
             "(const long long* __restrict__ off, long long* __restrict__ keys, M p) {\n", kMoveLoop,
             "    (void)vo;\n    keys[i] = so;\n  }\n}\n");
}
std::string adv_det_acc_name(DType dt) { return str("tp_det_advidx_acc_", dtype_name(dt)); }
std::string adv_det_acc_source(const std::string& name, DType dt) {
  return str(deterministic_prelude(dt), kMoveStruct, kVoff, "extern \"C\" __global__ void ", name,
             "(E* x, const long long* __restrict__ sk, const long long* __restrict__ perm, const E* val, M p) {\n",
             kRunLoop, "    if (i > 0 && sk[i - 1] == at) continue;\n", "    C a = tp_ld(x[at]);\n",
             "    for (long long m = i; m < p.total && sk[m] == at; ++m) a = tp_add(a, tp_ld(val[tp_voff(perm[m], p)]));\n",
             "    x[at] = tp_st(a);\n  }\n}\n");
}
std::string adv_det_put_name(size_t bytes) { return str("tp_det_advidx_put_b", bytes); }
std::string adv_det_put_source(const std::string& name, size_t bytes) {
  return str("typedef ", bits_ctype(bytes), " E;\n", kMoveStruct, kVoff, "extern \"C\" __global__ void ", name,
             "(E* x, const long long* __restrict__ sk, const long long* __restrict__ perm, const E* val, M p) {\n",
             kRunLoop, "    if (i + 1 < p.total && sk[i + 1] == at) continue;\n",
             "    x[at] = val[tp_voff(perm[i], p)];\n  }\n}\n");
}

struct Adv {
  std::vector<int64_t> dims;  // the indexed dims of self
  std::vector<Tensor> idx;    // their index tensors, on the device
  Shape b;                    // the shape they broadcast to
  int64_t bpos = 0;           // where B starts in the indexing result
  Shape result;               // the indexing result's sizes
  std::vector<int64_t> kept;  // self's other dims, in the result's order
};

// The geometry of self[entries begin..end) (an undefined entry is a whole
// dim); false when the kernels do not cover it.
bool adv_setup(const Tensor& self, const std::vector<Tensor>& in, size_t begin, size_t end, Adv& a) {
  const int dev = self.device().index;
  if (self.device().kind != Device::Kind::CUDA || self.dim() == 0 || self.dim() > kMaxRank ||
      end - begin > static_cast<size_t>(self.dim()))
    return false;
  for (size_t k = begin; k < end; ++k) {
    const Tensor& t = in[k];
    if (!t.defined()) continue;
    if (!index_ctype(t.dtype())) return false;
    Tensor on;
    if (t.device().kind == Device::Kind::CPU) {  // a host index list (x[[0, 2], [1, 1]]) is uploaded
      check_not_capturing("indexing a CUDA tensor with a CPU index tensor");
      on = to_device(ops::contiguous(t), dev);
    } else if (t.device().kind == Device::Kind::CUDA && t.device().index == dev) {
      on = t;  // read through its strides
    } else {
      return false;
    }
    a.b = a.idx.empty() ? on.sizes() : broadcast_shapes(a.b, on.sizes(), "index");
    a.dims.push_back(static_cast<int64_t>(k - begin));
    a.idx.push_back(on);
  }
  if (a.idx.empty() || a.b.size() > static_cast<size_t>(kMaxRank)) return false;
  const bool adjacent = a.dims.back() - a.dims.front() + 1 == static_cast<int64_t>(a.dims.size());
  a.bpos = adjacent ? a.dims.front() : 0;
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (std::find(a.dims.begin(), a.dims.end(), d) == a.dims.end()) kept.push_back(d);
  for (int64_t d : kept)
    if (adjacent && d < a.bpos) a.kept.push_back(d);
  const size_t before = a.kept.size();
  for (int64_t d : kept)
    if (!adjacent || d > a.bpos) a.kept.push_back(d);
  for (size_t j = 0; j < before; ++j) a.result.push_back(self.sizes()[static_cast<size_t>(a.kept[j])]);
  a.result.insert(a.result.end(), a.b.begin(), a.b.end());
  for (size_t j = before; j < a.kept.size(); ++j) a.result.push_back(self.sizes()[static_cast<size_t>(a.kept[j])]);
  return a.result.size() <= static_cast<size_t>(kMaxWalk);
}

// off[b] for every position of B, every index checked (IndexError naming the
// operator, the index, its dim and size).
Tensor adv_offsets(const Tensor& self, const Adv& a, const std::string& op) {
  const int dev = self.device().index;
  const int64_t nb = numel(a.b);
  Tensor off = empty({nb}, DType::Int64, dev);
  if (nb == 0) return off;
  for (size_t k = 0; k < a.idx.size(); ++k) {
    const Tensor& idx = a.idx[k];
    const size_t d = static_cast<size_t>(a.dims[k]);
    OffParams p{};
    p.nb = nb;
    p.brank = static_cast<long long>(a.b.size());
    p.size = self.sizes()[d];
    p.stride = self.strides()[d];
    p.first = k == 0 ? 1 : 0;
    p.tag = status_site(op, static_cast<int64_t>(d), p.size);
    const Shape is = broadcast_strides(idx.sizes(), idx.strides(), a.b);
    for (size_t j = 0; j < a.b.size(); ++j) {
      p.bsizes[j] = a.b[j];
      p.istrides[j] = is[j];
    }
    Tensor flag = launch_status(dev);
    void *pi = idx.data(), *po = off.data(), *pf = flag.data();
    void* args[] = {&pi, &po, &pf, &p};
    const std::string k_name = off_name(idx.dtype());
    launch_generated(dev, k_name, off_source(k_name, idx.dtype()), grid_1d(nb, kThreads), kThreads, args);
    check_launch_status(flag);
  }
  return off;
}

MoveParams move_params(const Tensor& self, const Adv& a, const Shape& vstrides) {
  MoveParams p{};
  p.total = numel(a.result);
  p.rank = static_cast<long long>(a.result.size());
  p.bpos = a.bpos;
  p.brank = static_cast<long long>(a.b.size());
  size_t kept = 0;
  for (size_t d = 0; d < a.result.size(); ++d) {
    p.sizes[d] = a.result[d];
    const bool in_b = static_cast<long long>(d) >= p.bpos && static_cast<long long>(d) < p.bpos + p.brank;
    if (!in_b) p.sstrides[d] = self.strides()[static_cast<size_t>(a.kept[kept++])];
    if (!vstrides.empty()) p.vstrides[d] = vstrides[d];
  }
  return p;
}

// A contiguous copy of t on its device (any dtype: a contiguous source moves as bytes).
Tensor fresh_copy(const Tensor& t) {
  if (!t.is_contiguous()) return ops::contiguous(t);
  Tensor r = empty(t.sizes(), t.dtype(), t.device().index);
  if (r.numel() > 0) copy_device_to_device(r, t);
  return r;
}

bool index_cuda(const OpDef& op, const std::vector<Tensor>& in, const std::vector<TensorMeta>& out_meta,
                std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  const size_t bytes = static_cast<size_t>(itemsize(x.dtype()));
  Adv a;
  if (!bits_ctype(bytes) || !adv_setup(x, in, 1, in.size(), a) || a.result != out_meta[0].sizes) return false;
  const int dev = x.device().index;
  Tensor r = empty(a.result, x.dtype(), dev);
  Tensor off = adv_offsets(x, a, op.name);
  if (r.numel() > 0) {
    MoveParams p = move_params(x, a, {});
    void *px = x.data(), *po = off.data(), *pr = r.data();
    void* args[] = {&px, &po, &pr, &p};
    const std::string k = adv_gather_name(bytes);
    launch_generated(dev, k, adv_gather_source(k, bytes), grid_1d(p.total, kThreads), kThreads, args);
  }
  out = {r};
  return true;
}

bool index_put_cuda(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  if (in.size() < 3) return false;
  const Tensor& self = in[0];
  const DType dt = self.dtype();
  const bool acc = attrs.get_or<bool>("accumulate", false);
  const size_t bytes = static_cast<size_t>(itemsize(dt));
  Adv a;
  if (!bits_ctype(bytes) || (acc && !can_accumulate(dt)) || !adv_setup(self, in, 1, in.size() - 1, a)) return false;
  const int dev = self.device().index;
  // The values, in self's dtype on the device, read through their strides
  // broadcast to the indexing result.
  Tensor v = in.back();
  if (v.device().kind == Device::Kind::CPU) {
    if (v.dim() == 0) {
      v = device_value(v, dt, dev);
    } else {
      check_not_capturing("index_put with CPU values");
      v = to_device(ops::contiguous(ops::to_dtype(v, dt)), dev);
    }
  } else if (v.device().index != dev) {
    return false;
  }
  if (!v.defined()) return false;
  if (v.dtype() != dt) v = ops::to_dtype(v, dt);
  const bool inplace = op.has(kInplace);
  // Values that alias self are read before anything is written.
  if (inplace && v.impl()->storage == self.impl()->storage) v = fresh_copy(v);
  Tensor target = inplace ? self : fresh_copy(self);
  const Tensor off = adv_offsets(target, a, op.name);
  const int64_t total = numel(a.result);
  if (total > 0) {
    MoveParams p = move_params(target, a, broadcast_strides(v.sizes(), v.strides(), a.result));
    void *pt = target.data(), *po = off.data(), *pv = v.data();
    // A put of one value (every vstride 0) stores the same bits whichever writer wins.
    bool one_value = true;
    for (long long d = 0; d < p.rank; ++d) one_value = one_value && p.vstrides[d] == 0;
    if (deterministic_algorithms() && total > 1 && (acc ? !deterministic_prelude(dt).empty() : !one_value)) {
      Tensor keys = empty({total}, DType::Int64, dev);
      void* pk = keys.data();
      {
        void* kargs[] = {&po, &pk, &p};
        const std::string k = adv_keys_name();
        launch_generated(dev, k, adv_keys_source(k), grid_1d(total, kThreads), kThreads, kargs);
      }
      Tensor sk, perm;
      sort_keys_stable(keys, sk, perm);
      void *ps = sk.data(), *pp = perm.data();
      void* args[] = {&pt, &ps, &pp, &pv, &p};
      const std::string k = acc ? adv_det_acc_name(dt) : adv_det_put_name(bytes);
      launch_generated(dev, k, acc ? adv_det_acc_source(k, dt) : adv_det_put_source(k, bytes),
                       grid_1d(total, kThreads), kThreads, args);
      out = {target};
      return true;
    }
    void* args[] = {&pt, &po, &pv, &p};
    std::string k, source;
    if (acc) {
      k = adv_acc_name(dt);
      source = adv_acc_source(k, dt);
    } else {
      k = adv_put_name(bytes);
      source = adv_put_source(k, bytes);
    }
    launch_generated(dev, k, source, grid_1d(total, kThreads), kThreads, args);
  }
  out = {target};
  return true;
}

}  // namespace

bool mask_kernel(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                 const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out) {
  const std::string name = op.name;
  if (name == "nonzero") {
    const Tensor& x = in[0];
    if (x.device().kind != Device::Kind::CUDA || x.dim() > kMaxRank || !bits_ctype(itemsize(x.dtype())))
      return false;
    out = {nonzero_cuda(x)};
    return true;
  }
  if (name == "index") return index_cuda(op, in, out_meta, out);
  if (name == "index_put" || name == "index_put_") return index_put_cuda(op, in, attrs, out);
  return false;
}

std::vector<std::pair<std::string, std::string>> mask_kernel_sources() {
  std::vector<std::pair<std::string, std::string>> v;
  for (size_t bytes : {1, 2, 4, 8}) {
    for (bool fp : {false, true}) {
      if (fp && bytes == 1) continue;
      v.emplace_back(nz_count_name(bytes, fp), nz_count_source(nz_count_name(bytes, fp), bytes, fp));
      v.emplace_back(nz_write_name(bytes, fp), nz_write_source(nz_write_name(bytes, fp), bytes, fp));
    }
    v.emplace_back(adv_gather_name(bytes), adv_gather_source(adv_gather_name(bytes), bytes));
    v.emplace_back(adv_put_name(bytes), adv_put_source(adv_put_name(bytes), bytes));
  }
  for (DType idx : {DType::Int64, DType::Int32}) v.emplace_back(off_name(idx), off_source(off_name(idx), idx));
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32, DType::Int64,
                   DType::Bool})
    v.emplace_back(adv_acc_name(dt), adv_acc_source(adv_acc_name(dt), dt));
  v.emplace_back(adv_keys_name(), adv_keys_source(adv_keys_name()));
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16})
    v.emplace_back(adv_det_acc_name(dt), adv_det_acc_source(adv_det_acc_name(dt), dt));
  for (size_t bytes : {1, 2, 4, 8}) v.emplace_back(adv_det_put_name(bytes), adv_det_put_source(adv_det_put_name(bytes), bytes));
  return v;
}

}  // namespace tp::cuda
