#include "cuda/masked_scatter.h"

#include <algorithm>

#include "core/error.h"
#include "cuda/block_rank.h"
#include "cuda/copy.h"
#include "cuda/index_kernels.h"
#include "cuda/kernels.h"
#include "cuda/stream.h"
#include "ops/ops.h"

namespace tp::cuda {
namespace {

constexpr int kThreads = 256;  // a multiple of 32: positions are ranked with warp ballots
constexpr int kMaxRank = 8;
// At most this many blocks, each taking a run of consecutive tiles of
// kThreads elements: every block of the second pass sums the counts of the
// blocks before it, so their number stays small.
constexpr int64_t kMaxBlocks = 1024;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Params {
  long long n, nd, tiles_per_block, src_nd, inplace;
  long long sizes[kMaxRank], xs[kMaxRank], ms[kMaxRank], os[kMaxRank], ssz[kMaxRank], sst[kMaxRank];
};

std::string count_name() { return "tp_mscatter_count"; }
std::string write_name(size_t bytes) { return str("tp_mscatter_write_b", bytes); }

const char* kPrelude =
    "struct P { long long n, nd, tpb, snd, inplace; long long sizes[8], xs[8], ms[8], os[8], ssz[8], sst[8]; };\n"
    // the offset of row-major position i of a tensor of sizes `sz` read through strides `st`
    "__device__ __forceinline__ long long tp_off(long long i, const long long* sz, const long long* st, long long nd) {\n"
    "  long long off = 0;\n"
    "  for (int d = (int)nd - 1; d >= 0; --d) { off += (i % sz[d]) * st[d]; i /= sz[d]; }\n"
    "  return off;\n}\n"
    // block b covers tiles [t0, t1) of blockDim.x positions each
    "#define TP_BLOCK_TILES \\\n"
    "  const long long tiles = (p.n + blockDim.x - 1) / blockDim.x; \\\n"
    "  const long long t0 = (long long)blockIdx.x * p.tpb; \\\n"
    "  const long long t1 = t0 + p.tpb < tiles ? t0 + p.tpb : tiles;\n";

// counts[b] = the true mask positions of block b.
std::string count_source(const std::string& name) {
  return std::string(kPrelude) + "extern \"C\" __global__ void " + name +
         "(const unsigned char* __restrict__ m, long long* __restrict__ counts, P p) {\n"
         "  TP_BLOCK_TILES\n"
         "  long long c = 0;\n"
         "  for (long long t = t0; t < t1; ++t) {\n"
         "    const long long i = t * blockDim.x + threadIdx.x;\n"
         "    c += __syncthreads_count(i < p.n && m[tp_off(i, p.sizes, p.ms, p.nd)] != 0);\n"
         "  }\n"
         "  if (threadIdx.x == 0) counts[blockIdx.x] = c;\n}\n";
}

// The k-th true position (row-major) takes source's k-th element, the others
// self's. k = the true positions of the blocks before + those of the warps
// before in this tile + the lanes before in this warp.
std::string write_source(const std::string& name, size_t bytes) {
  return str("typedef ", bits_ctype(bytes), " E;\n", kPrelude, "extern \"C\" __global__ void ", name,
             "(const E* x, const unsigned char* __restrict__ m, const E* src, E* out,\n"
             "    const long long* __restrict__ counts, P p) {\n"
             + blocks_before_source("k0") +
             "  TP_BLOCK_TILES\n"
             "  for (long long t = t0; t < t1; ++t) {\n"
             "    const long long i = t * blockDim.x + threadIdx.x;\n"
             "    const bool in = i < p.n;\n"
             "    const bool hit = in && m[tp_off(i, p.sizes, p.ms, p.nd)] != 0;\n"
             "    const unsigned votes = __ballot_sync(0xffffffffu, hit);\n"
             "    if (lane == 0) per_warp[warp] = __popc(votes);\n"
             "    __syncthreads();\n"
             "    int earlier = 0, tile = 0;\n"
             "    for (int w = 0; w < warps; ++w) { const int c = per_warp[w]; if (w < warp) earlier += c; tile += c; }\n"
             "    if (hit) {\n"
             "      const long long k = k0 + earlier + __popc(votes & ((1u << lane) - 1u));\n"
             "      out[tp_off(i, p.sizes, p.os, p.nd)] = src[tp_off(k, p.ssz, p.sst, p.snd)];\n"
             "    } else if (in && !p.inplace) {\n"
             "      out[tp_off(i, p.sizes, p.os, p.nd)] = x[tp_off(i, p.sizes, p.xs, p.nd)];\n"
             "    }\n"
             "    k0 += tile;\n"
             "    __syncthreads();\n"  // per_warp is rewritten by the next tile
             "  }\n}\n");
}

}  // namespace

bool masked_scatter_kernel(const OpDef& op, const std::vector<Tensor>& in, const Attrs&,
                           const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out) {
  const std::string name = op.name;
  if (name != "masked_scatter" && name != "masked_scatter_") return false;
  const bool inplace = op.has(kInplace);
  const Tensor& self = in[0];
  if (self.device().kind != Device::Kind::CUDA) return false;
  // A 0-d host mask or source (the dispatcher lets them through as numbers) is uploaded.
  auto on_device = [&](const Tensor& t) { return t.device().kind == Device::Kind::CPU ? to_device(t, self.device().index) : t; };
  const Tensor mask = on_device(in[1]);
  Tensor src = on_device(in[2]);
  const Shape& shape = out_meta[0].sizes;
  const size_t bytes = static_cast<size_t>(itemsize(self.dtype()));
  if (!(mask.device() == self.device()) || !(src.device() == self.device()) ||
      !bits_ctype(bytes) || static_cast<int64_t>(shape.size()) > kMaxRank || src.dim() > kMaxRank)
    return false;
  const int dev = self.device().index;
  const int64_t n = numel(shape);
  Tensor r = inplace ? self : empty(shape, self.dtype(), dev);
  if (n == 0) {
    out = {r};
    return true;
  }
  // The source count is checked on the host before anything is written: a CUDA graph cannot record that.
  check_not_capturing("masked_scatter (it reads the mask's count back from the device)");
  // Written in place, a source that shares self's memory is read from a copy.
  if (inplace && src.impl()->storage == self.impl()->storage) {
    Tensor copy = empty(src.sizes(), src.dtype(), dev);
    if (src.is_contiguous()) {
      copy_device_to_device(copy, src);
      src = copy;
    } else {
      src = ops::contiguous(src);
    }
  }
  Params p{};
  p.n = n;
  p.nd = static_cast<long long>(shape.size());
  p.src_nd = src.dim();
  p.inplace = inplace ? 1 : 0;
  const Shape xs = broadcast_strides(self.sizes(), self.strides(), shape);
  const Shape ms = broadcast_strides(mask.sizes(), mask.strides(), shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    p.sizes[d] = shape[d];
    p.xs[d] = xs[d];
    p.ms[d] = ms[d];
    p.os[d] = inplace ? self.strides()[d] : r.strides()[d];
  }
  for (int64_t d = 0; d < src.dim(); ++d) {
    p.ssz[d] = src.sizes()[static_cast<size_t>(d)];
    p.sst[d] = src.strides()[static_cast<size_t>(d)];
  }
  const int64_t tiles = ceil_div(n, kThreads);
  p.tiles_per_block = ceil_div(tiles, std::min(tiles, kMaxBlocks));
  const int64_t blocks = ceil_div(tiles, p.tiles_per_block);
  Tensor counts = empty({blocks}, DType::Int64, dev);
  void* pm = mask.data();
  void* pc = counts.data();
  {
    void* args[] = {&pm, &pc, &p};
    launch_generated(dev, count_name(), count_source(count_name()), static_cast<unsigned>(blocks), kThreads, args);
  }
  const Tensor host = to_cpu(counts);  // synchronizes
  int64_t hits = 0;
  for (int64_t b = 0; b < blocks; ++b) hits += host.data_as<int64_t>()[b];
  TP_CHECK(hits <= src.numel(), Error, op.name, ": source has ", src.numel(), " elements (shape ",
           shape_str(src.sizes()), ") but the mask (shape ", shape_str(mask.sizes()), ", broadcast to ",
           shape_str(shape), ") has ", hits, " true positions; source needs at least as many elements");
  if (hits > 0 || !inplace) {
    void* px = self.data();
    void* ps = src.data();
    void* po = r.data();
    void* args[] = {&px, &pm, &ps, &po, &pc, &p};
    const std::string k = write_name(bytes);
    launch_generated(dev, k, write_source(k, bytes), static_cast<unsigned>(blocks), kThreads, args);
  }
  out = {r};
  return true;
}

std::vector<std::pair<std::string, std::string>> masked_scatter_kernel_sources() {
  std::vector<std::pair<std::string, std::string>> v;
  v.emplace_back(count_name(), count_source(count_name()));
  for (size_t bytes : {1, 2, 4, 8}) v.emplace_back(write_name(bytes), write_source(write_name(bytes), bytes));
  return v;
}

}  // namespace tp::cuda
