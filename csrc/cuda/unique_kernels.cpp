#include "cuda/unique_kernels.h"

#include <algorithm>

#include "core/error.h"
#include "cuda/block_rank.h"
#include "cuda/copy.h"
#include "cuda/index_kernels.h"
#include "cuda/kernels.h"
#include "cuda/nn_kernels.h"
#include "cuda/scan_sort.h"
#include "cuda/stream.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace tp::cuda {
namespace {

constexpr int kThreads = 256;  // a multiple of 32: group starts are ranked with warp ballots
constexpr int kMaxRank = 8;
constexpr int64_t kMaxBlocks = 1024;  // the ranking pass sums the counts of the blocks before its own

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Entry r's element c (c = o * inner + i over the dims before / after dim) is
// element ((o * D + r) * inner + i) of the input in row-major order, read
// through the input's sizes and strides.
struct Params {
  long long D, L, inner, nd, tiles_per_block, ident, column, U;
  long long sizes[kMaxRank], strides[kMaxRank];
};

const char* kStruct =
    "struct P { long long D, L, inner, nd, tpb, ident, column, U; long long sizes[8], strides[8]; };\n"
    "__device__ __forceinline__ long long tp_at(long long i, const P& p) {\n"
    "  long long off = 0;\n"
    "  for (int d = (int)p.nd - 1; d >= 0; --d) { off += (i % p.sizes[d]) * p.strides[d]; i /= p.sizes[d]; }\n"
    "  return off;\n}\n"
    "__device__ __forceinline__ long long tp_input_pos(long long r, long long c, const P& p) {\n"
    "  return ((c / p.inner) * p.D + r) * p.inner + c % p.inner;\n}\n"
    // the input entry at sorted position j (perm is absent while the order is the input's)
    "__device__ __forceinline__ long long tp_row(long long j, const long long* perm, const P& p) {\n"
    "  return p.ident ? j : perm[j];\n}\n";


// The stored type S of an input dtype and its conversion to the key type K.
std::string load_prelude(DType dt) {
  const std::string k = std::string("typedef ") + scan_ctype(scan_compute_type(dt)) + " K;\n";
  switch (dt) {
    case DType::Float16:
      return k + "typedef unsigned short S;\n"
                 "__device__ __forceinline__ K tp_key(S h) { float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : "
                 "\"h\"(h)); return f; }\n";
    case DType::BFloat16:  // a bfloat16 is the top half of a float32
      return k + "typedef unsigned short S;\n"
                 "__device__ __forceinline__ K tp_key(S h) { return __uint_as_float(((unsigned)h) << 16); }\n";
    default: {
      const char* s = nullptr;
      switch (dt) {
        case DType::Bool:
        case DType::UInt8: s = "unsigned char"; break;
        case DType::Int8: s = "signed char"; break;
        case DType::Int16: s = "short"; break;
        case DType::Int32: s = "int"; break;
        case DType::Int64: s = "long long"; break;
        case DType::Float32: s = "float"; break;
        case DType::Float64: s = "double"; break;
        default: return "";
      }
      return k + "typedef " + s + " S;\n__device__ __forceinline__ K tp_key(S v) { return (K)v; }\n";
    }
  }
}

std::string key_name(DType dt) { return str("tp_unique_key_", dtype_name(dt)); }
std::string column_name(DType c) { return "tp_unique_column_" + scan_type_tag(c); }
std::string compose_name() { return "tp_unique_compose"; }
std::string count_name(DType c) { return "tp_unique_count_" + scan_type_tag(c); }
std::string group_name(DType c) { return "tp_unique_group_" + scan_type_tag(c); }
std::string values_name(size_t bytes) { return str("tp_unique_values_b", bytes); }

const char* kGridLoop =
    "  const long long step = (long long)gridDim.x * blockDim.x;\n"
    "  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += step) {\n";

// key[r * L + c] = the input's element c of entry r, converted.
std::string key_source(const std::string& name, DType dt) {
  return load_prelude(dt) + kStruct + "extern \"C\" __global__ void " + name +
         "(const S* __restrict__ x, K* __restrict__ key, P p) {\n"
         "  const long long total = p.D * p.L;\n" +
         kGridLoop + "    key[e] = tp_key(x[tp_at(tp_input_pos(e / p.L, e % p.L, p), p)]);\n  }\n}\n";
}

// col[j] = column p.column of the entry at sorted position j.
std::string column_source(const std::string& name, DType c) {
  return str("typedef ", scan_ctype(c), " K;\n", kStruct, "extern \"C\" __global__ void ", name,
             "(const K* __restrict__ key, const long long* __restrict__ perm, K* __restrict__ col, P p) {\n"
             "  const long long total = p.D;\n",
             kGridLoop, "    col[e] = key[tp_row(e, perm, p) * p.L + p.column];\n  }\n}\n");
}

// next[j] = perm[idx[j]]: the order sorted by one more column, ties kept in the previous order.
std::string compose_source(const std::string& name) {
  return str(kStruct, "extern \"C\" __global__ void ", name,
             "(const long long* __restrict__ perm, const long long* __restrict__ idx, long long* __restrict__ next, "
             "P p) {\n  const long long total = p.D;\n",
             kGridLoop, "    next[e] = tp_row(idx[e], perm, p);\n  }\n}\n");
}

// The group starts: sorted position j starts a group when j == 0 or its entry
// differs from the one before it in any element (NaN differs from itself).
std::string starts_prelude(DType c) {
  return str("typedef ", scan_ctype(c), " K;\n", kStruct,
             "__device__ __forceinline__ bool tp_starts(long long j, const K* key, const long long* perm, const P& p) {\n"
             "  if (j == 0) return true;\n"
             "  const K* a = key + tp_row(j, perm, p) * p.L;\n"
             "  const K* b = key + tp_row(j - 1, perm, p) * p.L;\n"
             "  for (long long c = 0; c < p.L; ++c) if (!(a[c] == b[c])) return true;\n"
             "  return false;\n}\n"
             "#define TP_BLOCK_TILES \\\n"
             "  const long long tiles = (p.D + blockDim.x - 1) / blockDim.x; \\\n"
             "  const long long t0 = (long long)blockIdx.x * p.tpb; \\\n"
             "  const long long t1 = t0 + p.tpb < tiles ? t0 + p.tpb : tiles;\n");
}

std::string count_source(const std::string& name, DType c) {
  return starts_prelude(c) + "extern \"C\" __global__ void " + name +
         "(const K* __restrict__ key, const long long* __restrict__ perm, long long* __restrict__ counts, P p) {\n"
         "  TP_BLOCK_TILES\n"
         "  long long n = 0;\n"
         "  for (long long t = t0; t < t1; ++t) {\n"
         "    const long long j = t * blockDim.x + threadIdx.x;\n"
         "    n += __syncthreads_count(j < p.D && tp_starts(j, key, perm, p));\n"
         "  }\n"
         "  if (threadIdx.x == 0) counts[blockIdx.x] = n;\n}\n";
}

// Sorted position j belongs to group g = (group starts at positions <= j) - 1:
// its entry's inverse index; a start also records first[g] = j.
std::string group_source(const std::string& name, DType c) {
  return starts_prelude(c) + "extern \"C\" __global__ void " + name +
         "(const K* __restrict__ key, const long long* __restrict__ perm, const long long* __restrict__ counts,\n"
         "    long long* __restrict__ inverse, long long* __restrict__ first, P p) {\n"
         + blocks_before_source("g0") +
         "  TP_BLOCK_TILES\n"
         "  for (long long t = t0; t < t1; ++t) {\n"
         "    const long long j = t * blockDim.x + threadIdx.x;\n"
         "    const bool in = j < p.D;\n"
         "    const bool start = in && tp_starts(j, key, perm, p);\n"
         "    const unsigned votes = __ballot_sync(0xffffffffu, start);\n"
         "    if (lane == 0) per_warp[warp] = __popc(votes);\n"
         "    __syncthreads();\n"
         "    int earlier = 0, tile = 0;\n"
         "    for (int w = 0; w < warps; ++w) { const int n = per_warp[w]; if (w < warp) earlier += n; tile += n; }\n"
         "    if (in) {\n"
         "      const long long g = g0 + earlier + __popc(votes & ((1u << lane) - 1u)) + (start ? 1 : 0) - 1;\n"
         "      inverse[tp_row(j, perm, p)] = g;\n"
         "      if (start) first[g] = j;\n"
         "    }\n"
         "    g0 += tile;\n"
         "    __syncthreads();\n"  // per_warp is rewritten by the next tile
         "  }\n}\n";
}

// values[group g's element c] = the input's element c of the group's first
// sorted entry (its own bits); counts[g] = the distance to the next start.
std::string values_source(const std::string& name, size_t bytes) {
  return str("typedef ", bits_ctype(bytes), " E;\n", kStruct, "extern \"C\" __global__ void ", name,
             "(const E* __restrict__ x, const long long* __restrict__ perm, const long long* __restrict__ first,\n"
             "    E* __restrict__ values, long long* __restrict__ counts, P p) {\n"
             "  const long long total = p.U * p.L;\n",
             kGridLoop,
             "    const long long g = e / p.L, c = e % p.L, j = first[g];\n"
             "    const long long o = c / p.inner, i = c % p.inner;\n"
             "    values[(o * p.U + g) * p.inner + i] = x[tp_at(tp_input_pos(tp_row(j, perm, p), c, p), p)];\n"
             "    if (c == 0) counts[g] = (g + 1 < p.U ? first[g + 1] : p.D) - j;\n"
             "  }\n}\n");
}

const DType kInputDTypes[] = {DType::Bool,  DType::UInt8,   DType::Int8,     DType::Int16,   DType::Int32,
                              DType::Int64, DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};

}  // namespace

bool unique_kernel(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                   const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out) {
  const std::string name = op.name;
  if (name != "unique" && name != "unique_consecutive") return false;
  const Tensor& x = in[0];
  const size_t bytes = static_cast<size_t>(itemsize(x.dtype()));
  if (x.device().kind != Device::Kind::CUDA || x.dim() > kMaxRank || load_prelude(x.dtype()).empty() ||
      !bits_ctype(bytes) || out_meta.size() != 3)
    return false;
  const int dev = x.device().index;
  const auto d = attrs.get_optional_int("dim");
  int64_t dim = -1, D = x.numel(), inner = 1, L = 1;
  if (d) {
    dim = wrap_dim(*d, x.dim(), op.name);
    D = x.sizes()[static_cast<size_t>(dim)];
    for (int64_t k = dim + 1; k < x.dim(); ++k) inner *= x.sizes()[static_cast<size_t>(k)];
    L = D == 0 ? 0 : x.numel() / D;
  }
  if (x.numel() == 0) {
    // Nothing to read: the CPU operator on an empty host tensor gives every shape.
    std::vector<Tensor> host = run_kernel(op, {Tensor::empty(x.sizes(), x.dtype())}, attrs);
    out.clear();
    for (const Tensor& t : host) out.push_back(to_device(t, dev));
    return true;
  }
  // The group count is read back from the device: a CUDA graph cannot record that.
  check_not_capturing(str(op.name, " (its result's size is read back from the device)").c_str());
  const DType c = scan_compute_type(x.dtype());
  Params p{};
  p.D = D;
  p.L = L;
  p.inner = inner;
  p.nd = x.dim();
  p.ident = 1;
  for (int64_t k = 0; k < x.dim(); ++k) {
    p.sizes[k] = x.sizes()[static_cast<size_t>(k)];
    p.strides[k] = x.strides()[static_cast<size_t>(k)];
  }
  Tensor key = empty({D * L}, c, dev);
  void* px = x.data();
  void* pk = key.data();
  {
    void* args[] = {&px, &pk, &p};
    launch_generated(dev, key_name(x.dtype()), key_source(key_name(x.dtype()), x.dtype()), grid_1d(D * L, kThreads),
                     kThreads, args);
  }
  // The sorted order of the entries, as positions into the input's entries.
  Tensor perm;
  void* pp = nullptr;
  if (name == "unique") {
    static const OpDef& sort = get_op("sort");
    const Attrs sort_attrs{{"dim", int64_t{0}}, {"descending", false}, {"stable", true}};
    for (int64_t col = L - 1; col >= 0; --col) {
      Tensor column = key;
      if (L > 1) {
        column = empty({D}, c, dev);
        p.column = col;
        void* pc = column.data();
        void* args[] = {&pk, &pp, &pc, &p};
        launch_generated(dev, column_name(c), column_source(column_name(c), c), grid_1d(D, kThreads), kThreads, args);
      }
      Tensor idx = run_kernel(sort, {column}, sort_attrs)[1];
      if (p.ident) {
        perm = idx;
      } else {
        Tensor next = empty({D}, DType::Int64, dev);
        void* pi = idx.data();
        void* pn = next.data();
        void* args[] = {&pp, &pi, &pn, &p};
        launch_generated(dev, compose_name(), compose_source(compose_name()), grid_1d(D, kThreads), kThreads, args);
        perm = next;
      }
      pp = perm.data();
      p.ident = 0;
    }
  }
  const int64_t tiles = ceil_div(D, kThreads);
  p.tiles_per_block = ceil_div(tiles, std::min(tiles, kMaxBlocks));
  const int64_t blocks = ceil_div(tiles, p.tiles_per_block);
  Tensor counts = empty({blocks}, DType::Int64, dev);
  void* pc = counts.data();
  {
    void* args[] = {&pk, &pp, &pc, &p};
    launch_generated(dev, count_name(c), count_source(count_name(c), c), static_cast<unsigned>(blocks), kThreads,
                     args);
  }
  const Tensor host = to_cpu(counts);  // synchronizes
  int64_t U = 0;
  for (int64_t b = 0; b < blocks; ++b) U += host.data_as<int64_t>()[b];
  p.U = U;
  Tensor inverse = empty(d ? Shape{D} : x.sizes(), DType::Int64, dev);
  Tensor first = empty({U}, DType::Int64, dev);
  void* pinv = inverse.data();
  void* pf = first.data();
  {
    void* args[] = {&pk, &pp, &pc, &pinv, &pf, &p};
    launch_generated(dev, group_name(c), group_source(group_name(c), c), static_cast<unsigned>(blocks), kThreads,
                     args);
  }
  Shape vs{U};
  if (d) {
    vs = x.sizes();
    vs[static_cast<size_t>(dim)] = U;
  }
  Tensor values = empty(vs, x.dtype(), dev);
  Tensor group_counts = empty({U}, DType::Int64, dev);
  {
    void* pv = values.data();
    void* pg = group_counts.data();
    void* args[] = {&px, &pp, &pf, &pv, &pg, &p};
    launch_generated(dev, values_name(bytes), values_source(values_name(bytes), bytes), grid_1d(U * L, kThreads),
                     kThreads, args);
  }
  out = {values, inverse, group_counts};
  return true;
}

std::vector<std::pair<std::string, std::string>> unique_kernel_sources() {
  std::vector<std::pair<std::string, std::string>> v;
  for (DType dt : kInputDTypes) v.emplace_back(key_name(dt), key_source(key_name(dt), dt));
  for (DType c : {DType::Float32, DType::Float64, DType::Int64}) {
    v.emplace_back(column_name(c), column_source(column_name(c), c));
    v.emplace_back(count_name(c), count_source(count_name(c), c));
    v.emplace_back(group_name(c), group_source(group_name(c), c));
  }
  v.emplace_back(compose_name(), compose_source(compose_name()));
  for (size_t bytes : {1, 2, 4, 8}) v.emplace_back(values_name(bytes), values_source(values_name(bytes), bytes));
  return v;
}

}  // namespace tp::cuda
