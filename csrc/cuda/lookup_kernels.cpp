// one_hot, searchsorted (bucketize decomposes to it) and repeat_interleave's
// index (repeat_interleave.Tensor) on CUDA (see gap_kernels.h).
#include "core/error.h"
#include "cuda/copy.h"
#include "cuda/gap_kernels.h"
#include "cuda/kernels.h"
#include "cuda/nn_kernels.h"
#include "cuda/stream.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace tp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxRank = 8;

const char* kAt =
    "struct Q { long long n, nd, classes; long long sizes[8], strides[8]; };\n"
    "__device__ __forceinline__ long long tp_at(long long i, const Q& p) {\n"
    "  long long off = 0;\n"
    "  for (int d = (int)p.nd - 1; d >= 0; --d) { off += (i % p.sizes[d]) * p.strides[d]; i /= p.sizes[d]; }\n"
    "  return off;\n}\n"
    "#define TP_GRID_LOOP(total) \\\n"
    "  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < (total); \\\n"
    "       e += (long long)gridDim.x * blockDim.x)\n";
struct AtParams {
  long long n, nd, classes;
  long long sizes[kMaxRank], strides[kMaxRank];
};

// ---- one_hot ----
// range[0] = min(0, smallest value), range[1] = max(-1, largest): the CPU's
// starting points, so the checks and messages are the same.
std::string range_name(DType d) { return str("tp_one_hot_range_", dtype_name(d)); }
std::string range_source(const std::string& name, DType d) {
  return str("typedef ", int_ctype(d), " I;\n", kAt, "extern \"C\" __global__ void ", name,
             "(const I* __restrict__ x, long long* range, Q p) {\n"
             "  long long lo = 0, hi = -1;\n"
             "  TP_GRID_LOOP(p.n) { const long long v = (long long)x[tp_at(e, p)]; lo = v < lo ? v : lo; hi = v > hi ? v : hi; }\n"
             "  atomicMin(range, lo);\n  atomicMax(range + 1, hi);\n}\n");
}
std::string one_hot_name(DType d) { return str("tp_one_hot_", dtype_name(d)); }
std::string one_hot_source(const std::string& name, DType d) {
  return str("typedef ", int_ctype(d), " I;\n", kAt, "extern \"C\" __global__ void ", name,
             "(const I* __restrict__ x, long long* __restrict__ out, Q p) {\n"
             "  TP_GRID_LOOP(p.n * p.classes) out[e] = (long long)x[tp_at(e / p.classes, p)] == e % p.classes;\n}\n");
}

AtParams at_params(const Tensor& x) {
  AtParams p{};
  p.n = x.numel();
  p.nd = x.dim();
  for (int64_t d = 0; d < x.dim(); ++d) {
    p.sizes[d] = x.sizes()[static_cast<size_t>(d)];
    p.strides[d] = x.strides()[static_cast<size_t>(d)];
  }
  return p;
}

bool one_hot(const OpDef& op, const Tensor& x, const Attrs& attrs, std::vector<Tensor>& out) {
  if (x.dim() > kMaxRank) return false;
  TP_CHECK(int_ctype(x.dtype()) && x.dtype() != DType::Bool, TypeError, op.name,
           ": tensors used as indices must be long, int, byte or bool tensors, got ", dtype_name(x.dtype()));
  const int dev = x.device().index;
  if (x.numel() == 0) {  // nothing to read: the CPU operator on an empty host tensor
    out = {to_device(run_kernel(op, {Tensor::empty(x.sizes(), x.dtype())}, attrs)[0], dev)};
    return true;
  }
  check_not_capturing("one_hot (its class range is read back from the device)");
  AtParams p = at_params(x);
  Tensor init = Tensor::empty({2}, DType::Int64);
  init.data_as<int64_t>()[0] = 0;
  init.data_as<int64_t>()[1] = -1;
  Tensor range = to_device(init, dev);
  void* px = x.data();
  void* pr = range.data();
  {
    void* args[] = {&px, &pr, &p};
    launch_generated(dev, range_name(x.dtype()), range_source(range_name(x.dtype()), x.dtype()),
                     std::min<unsigned>(grid_1d(p.n, kThreads), 1024u), kThreads, args);
  }
  const Tensor host = to_cpu(range);  // synchronizes
  const int64_t lo = host.data_as<int64_t>()[0], hi = host.data_as<int64_t>()[1];
  int64_t c = attrs.get_int("num_classes");
  TP_CHECK(lo >= 0, ValueError, op.name, ": class values must be non-negative, got ", lo);
  if (c < 0) c = hi + 1;
  TP_CHECK(hi < c, ValueError, op.name, ": class values must be smaller than num_classes ", c, ", got ", hi);
  Shape s = x.sizes();
  s.push_back(c);
  Tensor r = empty(s, DType::Int64, dev);
  p.classes = c;
  if (r.numel() > 0) {
    void* po = r.data();
    void* args[] = {&px, &po, &p};
    launch_generated(dev, one_hot_name(x.dtype()), one_hot_source(one_hot_name(x.dtype()), x.dtype()),
                     grid_1d(r.numel(), kThreads), kThreads, args);
  }
  out = {r};
  return true;
}

// ---- searchsorted ----
// Both sides compare in double when either is floating, else in int64, as on
// the CPU; NaN ranks above every number (sort's order).
std::string search_name(DType c) { return c == DType::Int64 ? "tp_searchsorted_i64" : "tp_searchsorted_f64"; }
std::string search_source(const std::string& name, DType c) {
  const bool fp = c != DType::Int64;
  return str("typedef ", fp ? "double" : "long long", " T;\n",
             fp ? "__device__ __forceinline__ bool tp_below(T a, T b) { return a < b || (b != b && a == a); }\n"
                : "__device__ __forceinline__ bool tp_below(T a, T b) { return a < b; }\n",
             "extern \"C\" __global__ void ", name,
             "(const T* __restrict__ seq, const T* __restrict__ v, long long* __restrict__ out, long long n,\n"
             "    long long L, long long per_row, int multi_row, int right) {\n"
             "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
             "       i += (long long)gridDim.x * blockDim.x) {\n"
             "    const T* row = seq + (multi_row ? (i / per_row) * L : 0);\n"
             "    const T x = v[i];\n"
             "    long long lo = 0, hi = L;\n"  // the first position whose entry is not below x (left) / x not below it (right)
             "    while (lo < hi) {\n"
             "      const long long mid = lo + (hi - lo) / 2;\n"
             "      const bool go_right = right ? !tp_below(x, row[mid]) : tp_below(row[mid], x);\n"
             "      if (go_right) lo = mid + 1; else hi = mid;\n"
             "    }\n"
             "    out[i] = lo;\n"
             "  }\n}\n");
}

bool searchsorted(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs, const TensorMeta& om,
                  std::vector<Tensor>& out) {
  const Tensor& seq0 = in[0];
  Tensor v = in[1];
  const int dev = seq0.device().index;
  if (v.device().kind == Device::Kind::CPU) v = to_device(v, dev);  // a 0-d host value
  Tensor r = empty(om.sizes, DType::Int64, dev);
  if (r.numel() > 0 && seq0.sizes().back() > 0) {
    const DType c = is_floating(seq0.dtype()) || is_floating(v.dtype()) ? DType::Float64 : DType::Int64;
    const bool sorter = in.size() > 2 && in[2].defined();
    Tensor seq = ops::contiguous(ops::to_dtype(sorter ? ops::gather(seq0, -1, in[2]) : seq0, c));
    v = ops::contiguous(ops::to_dtype(v, c));
    bool right = attrs.get_or("right", false);
    if (attrs.has("side") && !attrs.is_none("side")) right = attrs.get_str("side") == "right";
    long long n = v.numel(), L = seq.sizes().back();
    long long per_row = seq.dim() > 1 ? std::max<int64_t>(1, v.dim() ? v.sizes().back() : 1) : n;
    int multi = seq.dim() > 1 ? 1 : 0, rt = right ? 1 : 0;
    void* ps = seq.data();
    void* pv = v.data();
    void* po = r.data();
    void* args[] = {&ps, &pv, &po, &n, &L, &per_row, &multi, &rt};
    launch_generated(dev, search_name(c), search_source(search_name(c), c), grid_1d(n, kThreads), kThreads, args);
  } else if (r.numel() > 0) {  // an empty sequence: every value goes to position 0
    static const OpDef& fill = get_op("fill_");
    run_kernel(fill, {r}, {{"value", Scalar(int64_t{0})}});
  }
  out = {om.dtype == DType::Int64 ? r : ops::to_dtype(r, om.dtype)};
  return true;
}

// ---- repeat_interleave.Tensor: entry i written repeats[i] times ----
// ends = the inclusive cumsum of repeats (the CUDA cumsum kernel); thread i
// writes i at [ends[i] - repeats[i], ends[i]).
std::string repeat_name() { return "tp_repeat_index"; }
std::string repeat_source(const std::string& name) {
  return "extern \"C\" __global__ void " + name +
         "(const long long* __restrict__ reps, const long long* __restrict__ ends, long long* __restrict__ out,\n"
         "    long long n) {\n"
         "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
         "       i += (long long)gridDim.x * blockDim.x)\n"
         "    for (long long k = ends[i] - reps[i]; k < ends[i]; ++k) out[k] = i;\n}\n";
}

bool repeat_index(const OpDef& op, const Tensor& r0, const Attrs& attrs, std::vector<Tensor>& out) {
  if (!int_ctype(r0.dtype()) || r0.dtype() == DType::Bool || r0.dim() > 1) return false;
  const int dev = r0.device().index;
  const Tensor r = ops::contiguous(ops::to_dtype(ops::reshape(r0, {-1}), DType::Int64));
  long long n = r.numel();
  int64_t total = 0;
  Tensor ends;
  if (n > 0) {
    check_not_capturing("repeat_interleave (its result's size is read back from the device)");
    static const OpDef& cumsum = get_op("cumsum");
    ends = run_kernel(cumsum, {r}, {{"dim", int64_t{0}}})[0];
    AtParams p = at_params(r);
    Tensor init = Tensor::empty({2}, DType::Int64);
    init.data_as<int64_t>()[0] = 0;
    init.data_as<int64_t>()[1] = -1;
    Tensor range = to_device(init, dev);
    void* pr = r.data();
    void* pg = range.data();
    void* args[] = {&pr, &pg, &p};
    launch_generated(dev, range_name(DType::Int64), range_source(range_name(DType::Int64), DType::Int64),
                     std::min<unsigned>(grid_1d(n, kThreads), 1024u), kThreads, args);
    if (to_cpu(range).data_as<int64_t>()[0] < 0) {  // the error path names the first negative entry
      const Tensor host = to_cpu(r);
      for (int64_t i = 0; i < n; ++i)
        TP_CHECK(host.data_as<int64_t>()[i] >= 0, ValueError, op.name, ": repeats must be non-negative, got ",
                 host.data_as<int64_t>()[i], " at position ", i);
    }
    total = to_cpu(ops::narrow(ends, 0, n - 1, 1)).data_as<int64_t>()[0];
  }
  if (attrs.has("output_size") && !attrs.is_none("output_size")) {
    const int64_t hint = attrs.get_int("output_size");
    TP_CHECK(hint == total, ValueError, "repeat_interleave: output_size=", hint,
             " does not match the size of the result along the repeated dimension (", total, ")");
  }
  Tensor o = empty({total}, DType::Int64, dev);
  if (total > 0) {
    void* pr = r.data();
    void* pe = ends.data();
    void* po = o.data();
    void* args[] = {&pr, &pe, &po, &n};
    launch_generated(dev, repeat_name(), repeat_source(repeat_name()), grid_1d(n, kThreads), kThreads, args);
  }
  out = {o};
  return true;
}

}  // namespace

bool lookup_kernel(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                   const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out) {
  const std::string name = op.name;
  if (name == "one_hot" && in[0].device().kind == Device::Kind::CUDA) return one_hot(op, in[0], attrs, out);
  if (name == "repeat_interleave.Tensor" && in[0].device().kind == Device::Kind::CUDA)
    return repeat_index(op, in[0], attrs, out);
  if (name == "searchsorted" && in[0].device().kind == Device::Kind::CUDA)
    return searchsorted(op, in, attrs, out_meta[0], out);
  return false;
}

std::vector<std::pair<std::string, std::string>> lookup_kernel_sources() {
  std::vector<std::pair<std::string, std::string>> v;
  for (DType d : {DType::Int64, DType::Int32, DType::Int16, DType::Int8, DType::UInt8}) {
    v.emplace_back(range_name(d), range_source(range_name(d), d));
    v.emplace_back(one_hot_name(d), one_hot_source(one_hot_name(d), d));
  }
  for (DType c : {DType::Int64, DType::Float64}) v.emplace_back(search_name(c), search_source(search_name(c), c));
  v.emplace_back(repeat_name(), repeat_source(repeat_name()));
  return v;
}

}  // namespace tp::cuda
