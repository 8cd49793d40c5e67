#include "cuda/cudnn.h"

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>

#include "core/deterministic.h"
#include "core/error.h"
#include "cuda/allocator.h"
#include "cuda/cublas.h"
#include "cuda/driver.h"
#include "cuda/dynlib.h"
#include "cuda/stream.h"

namespace tp::cuda {
namespace {

// The C ABI of the legacy entry points used (facts from cuDNN 9's
// cudnn_graph.h, cudnn_ops.h and cudnn_cnn.h): statuses and enums are ints,
// handles and descriptors opaque pointers, cudaStream_t is the driver's
// CUstream. Descriptors are passed as `const void*` where one signature
// serves the three passes (each pass orders its descriptors differently).
using Status = int;
using Handle = struct cudnnContext*;
using TensorDesc = struct cudnnTensorStruct*;
using FilterDesc = struct cudnnFilterStruct*;
using ConvDesc = struct cudnnConvolutionStruct*;
using Desc = const void*;

// cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t (one layout for the three).
struct AlgoPerf {
  int algo;
  Status status;
  float time;
  size_t memory;
  int determinism;
  int math_type;
  int reserved[3];
};
static_assert(sizeof(AlgoPerf) == 48, "cudnnConvolutionFwdAlgoPerf_t is 48 bytes");

// cudnnDataType_t.
constexpr int kFloat = 0, kDouble = 1, kHalf = 2, kBFloat16 = 9;
// cudnnMathType_t.
constexpr int kDefaultMath = 0, kTensorOpMath = 1, kTensorOpAllowConversion = 2, kFmaMath = 3;
constexpr int kCrossCorrelation = 1;  // cudnnConvolutionMode_t (what deep learning calls convolution)
constexpr int kDeterministic = 1;     // cudnnDeterminism_t
constexpr int kNCHW = 0;              // cudnnTensorFormat_t

// The most workspace the algorithm search offers an algorithm.
constexpr size_t kMaxWorkspace = size_t{256} << 20;

using FindEx = Status (*)(Handle, Desc, const void*, Desc, const void*, ConvDesc, Desc, void*, int, int*, AlgoPerf*,
                          void*, size_t);
using GetV7 = Status (*)(Handle, Desc, Desc, ConvDesc, Desc, int, int*, AlgoPerf*);
using WorkspaceSize = Status (*)(Handle, Desc, Desc, ConvDesc, Desc, int, size_t*);
using Run = Status (*)(Handle, const void*, Desc, const void*, Desc, const void*, ConvDesc, int, void*, size_t,
                       const void*, Desc, void*);
using MaxCount = Status (*)(Handle, int*);

struct Dnn {
  bool loaded = false;
  std::string why, path;
  int version = 0;
  size_t (*GetVersion)() = nullptr;
  const char* (*GetErrorString)(Status) = nullptr;
  Status (*Create)(Handle*) = nullptr;
  Status (*SetStream)(Handle, CUstream) = nullptr;
  Status (*CreateTensor)(TensorDesc*) = nullptr;
  Status (*SetTensor4dEx)(TensorDesc, int, int, int, int, int, int, int, int, int) = nullptr;
  Status (*CreateFilter)(FilterDesc*) = nullptr;
  Status (*SetFilter4d)(FilterDesc, int, int, int, int, int, int) = nullptr;
  Status (*CreateConv)(ConvDesc*) = nullptr;
  Status (*SetConv2d)(ConvDesc, int, int, int, int, int, int, int, int) = nullptr;
  Status (*SetGroupCount)(ConvDesc, int) = nullptr;
  Status (*SetMathType)(ConvDesc, int) = nullptr;
  Status (*AddTensor)(Handle, const void*, TensorDesc, const void*, const void*, TensorDesc, void*) = nullptr;
  // Per pass (ConvPass order).
  MaxCount max_count[3] = {};
  FindEx find[3] = {};
  GetV7 heuristic[3] = {};
  WorkspaceSize workspace[3] = {};
  Run run[3] = {};
};

std::mutex g_mutex;
std::atomic<bool> g_enabled{true};
std::atomic<int64_t> g_calls{0};

std::vector<std::string>& candidates() {
  static auto* v = new std::vector<std::string>();
  return *v;
}

Dnn* load() {
  auto* d = new Dnn();  // leaked with the library, like cuBLASLt's table
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    names = candidates();
  }
  names.push_back("libcudnn.so.9");
  // libcudnn.so.9 is a small front that opens its sub-libraries
  // (libcudnn_cnn, _ops, _graph, engines) itself, from its own folder.
  void* lib = open_first(names, &d->path);
  if (!lib) {
    d->why = "cuDNN (libcudnn.so.9) was not found; install it with `pip install nvidia-cudnn-cu13` (or -cu12)";
    return d;
  }
  static const char* const kPass[3][5] = {
      {"cudnnGetConvolutionForwardAlgorithmMaxCount", "cudnnFindConvolutionForwardAlgorithmEx",
       "cudnnGetConvolutionForwardAlgorithm_v7", "cudnnGetConvolutionForwardWorkspaceSize", "cudnnConvolutionForward"},
      {"cudnnGetConvolutionBackwardDataAlgorithmMaxCount", "cudnnFindConvolutionBackwardDataAlgorithmEx",
       "cudnnGetConvolutionBackwardDataAlgorithm_v7", "cudnnGetConvolutionBackwardDataWorkspaceSize",
       "cudnnConvolutionBackwardData"},
      {"cudnnGetConvolutionBackwardFilterAlgorithmMaxCount", "cudnnFindConvolutionBackwardFilterAlgorithmEx",
       "cudnnGetConvolutionBackwardFilterAlgorithm_v7", "cudnnGetConvolutionBackwardFilterWorkspaceSize",
       "cudnnConvolutionBackwardFilter"}};
  bool ok = resolve(lib, d->GetVersion, "cudnnGetVersion") &&
            resolve(lib, d->GetErrorString, "cudnnGetErrorString") && resolve(lib, d->Create, "cudnnCreate") &&
            resolve(lib, d->SetStream, "cudnnSetStream") &&
            resolve(lib, d->CreateTensor, "cudnnCreateTensorDescriptor") &&
            resolve(lib, d->SetTensor4dEx, "cudnnSetTensor4dDescriptorEx") &&
            resolve(lib, d->CreateFilter, "cudnnCreateFilterDescriptor") &&
            resolve(lib, d->SetFilter4d, "cudnnSetFilter4dDescriptor") &&
            resolve(lib, d->CreateConv, "cudnnCreateConvolutionDescriptor") &&
            resolve(lib, d->SetConv2d, "cudnnSetConvolution2dDescriptor") &&
            resolve(lib, d->SetGroupCount, "cudnnSetConvolutionGroupCount") &&
            resolve(lib, d->SetMathType, "cudnnSetConvolutionMathType") &&
            resolve(lib, d->AddTensor, "cudnnAddTensor");
  for (int p = 0; p < 3 && ok; ++p)
    ok = resolve(lib, d->max_count[p], kPass[p][0]) && resolve(lib, d->find[p], kPass[p][1]) &&
         resolve(lib, d->heuristic[p], kPass[p][2]) && resolve(lib, d->workspace[p], kPass[p][3]) &&
         resolve(lib, d->run[p], kPass[p][4]);
  if (!ok) {
    d->why = "cuDNN at " + d->path + " lacks an entry point of the legacy convolution API";
    return d;
  }
  d->version = static_cast<int>(d->GetVersion());
  if (d->version < 90000) {
    d->why = "cuDNN at " + d->path + " is version " + std::to_string(d->version) + "; 9.0 or newer is needed";
    return d;
  }
  d->loaded = true;
  return d;
}

// Loaded on first use, after tensorplay.cuda registered the wheel's paths.
const Dnn& dnn() {
  static Dnn* d = load();
  return *d;
}

void ok(Status s, const char* what, const char* call) {
  if (s == 0) return;
  const char* msg = dnn().GetErrorString ? dnn().GetErrorString(s) : nullptr;
  throw Error(str(what, ": ", call, " failed with cuDNN status ", s, msg ? str(" (", msg, ")") : std::string()));
}

// One handle per thread and device: cudnnSetStream changes a handle, so
// threads do not share one.
Handle handle_for(int device, const char* what) {
  thread_local std::map<int, Handle> handles;
  if (auto it = handles.find(device); it != handles.end()) return it->second;
  Handle h = nullptr;
  ok(dnn().Create(&h), what, "cudnnCreate");
  handles[device] = h;
  return h;
}

int data_type(DType d) {
  switch (d) {
    case DType::Float32: return kFloat;
    case DType::Float64: return kDouble;
    case DType::Float16: return kHalf;
    default: return kBFloat16;
  }
}

// The largest power of two up to 256 dividing the address: kernels with
// vector loads need aligned operands, so it is part of the algorithm key.
int64_t alignment(const void* p) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  int64_t al = 256;
  while (al > 1 && v % static_cast<uintptr_t>(al) != 0) al /= 2;
  return al;
}

// Descriptors and the chosen algorithm of one problem, kept for the
// process (cuDNN descriptors belong to no handle or device).
struct Plan {
  TensorDesc x = nullptr, y = nullptr;
  FilterDesc w = nullptr;
  ConvDesc conv = nullptr;
  int math = kDefaultMath;  // asked for (FMA: exact float32)
  int algo = 0;
  size_t workspace = 0;
  bool timed = false;  // chosen by timing (false: by the heuristic, during a capture)
  bool compute_double = false;  // float64 (alpha/beta are doubles)
  bool deterministic = true;  // the algorithm chosen is (tp.use_deterministic_algorithms re-chooses one that is not)
};

TensorDesc tensor_desc(int type, int64_t n, int64_t c, int64_t h, int64_t w, const char* what) {
  const Dnn& d = dnn();
  TensorDesc t = nullptr;
  ok(d.CreateTensor(&t), what, "cudnnCreateTensorDescriptor");
  const auto i = [](int64_t v) { return static_cast<int>(v); };
  ok(d.SetTensor4dEx(t, type, i(n), i(c), i(h), i(w), i(c * h * w), i(h * w), i(w), 1), what,
     "cudnnSetTensor4dDescriptorEx");
  return t;
}

Plan* make_plan(DType dtype, const ConvShape& s, const char* what) {
  const Dnn& d = dnn();
  const int type = data_type(dtype);
  auto* p = new Plan();
  p->x = tensor_desc(type, s.N, s.C, s.H, s.W, what);
  p->y = tensor_desc(type, s.N, s.O, s.Ho, s.Wo, what);
  ok(d.CreateFilter(&p->w), what, "cudnnCreateFilterDescriptor");
  const auto i = [](int64_t v) { return static_cast<int>(v); };
  ok(d.SetFilter4d(p->w, type, kNCHW, i(s.O), i(s.C / s.G), i(s.kh), i(s.kw)), what, "cudnnSetFilter4dDescriptor");
  ok(d.CreateConv(&p->conv), what, "cudnnCreateConvolutionDescriptor");
  // float16/bfloat16 accumulate in float32.
  ok(d.SetConv2d(p->conv, i(s.ph), i(s.pw), i(s.sh), i(s.sw), i(s.dh), i(s.dw), kCrossCorrelation,
                 dtype == DType::Float64 ? kDouble : kFloat),
     what, "cudnnSetConvolution2dDescriptor");
  ok(d.SetGroupCount(p->conv, i(s.G)), what, "cudnnSetConvolutionGroupCount");
  p->compute_double = dtype == DType::Float64;
  // DEFAULT math lets float32 use TF32 tensor cores on Ampere and later;
  // FMA math keeps it exact (float32 results as a float32 CPU convolution).
  if (dtype == DType::Float32) p->math = allow_tf32() ? kDefaultMath : kFmaMath;
  else if (dtype == DType::Float64) p->math = kDefaultMath;
  else p->math = kTensorOpMath;
  ok(d.SetMathType(p->conv, p->math), what, "cudnnSetConvolutionMathType");
  return p;
}

// The pass's descriptors in the library's order (see Run/FindEx above):
// forward (x, w) -> y, backward data (w, dy) -> dx, backward filter (x, dy) -> dw.
struct Order {
  Desc first, second, out;
};
Order order(const Plan& p, ConvPass pass) {
  switch (pass) {
    case ConvPass::Forward: return {p.x, p.w, p.y};
    case ConvPass::BackwardData: return {p.w, p.y, p.x};
    default: return {p.x, p.y, p.w};
  }
}

// A candidate the plan accepts: it ran, it keeps exact float32 exact, and
// (first round) it is deterministic, so repeated backward passes give the
// same bits (the forward algorithms all are).
bool acceptable(const AlgoPerf& r, const Plan& p, bool need_deterministic) {
  if (r.status != 0 || r.memory > kMaxWorkspace) return false;
  if (p.math == kFmaMath && (r.math_type == kTensorOpMath || r.math_type == kTensorOpAllowConversion)) return false;
  return !need_deterministic || r.determinism == kDeterministic;
}

// The per-call cost of the best few candidates as a caller sees it: calls
// queued back to back, then one synchronize, so the time is the larger of
// the host's work per call and the GPU's. cuDNN's own timing counts the GPU
// kernels only, but cuDNN 9 reaches some engines through its legacy API with
// host work per call, which a small convolution (the bench CNN's) cannot
// hide. nullptr when none ran.
const AlgoPerf* fastest_per_call(Plan& p, ConvPass pass, Handle h, int device, const void* first,
                                 const void* second, void* out, const std::vector<const AlgoPerf*>& list) {
  constexpr size_t kCandidates = 4;
  constexpr int kReps = 5;
  const Dnn& d = dnn();
  const int k = static_cast<int>(pass);
  const Order o = order(p, pass);
  const double one64 = 1.0, zero64 = 0.0;
  const float one32 = 1.0f, zero32 = 0.0f;
  const bool f64 = p.compute_double;
  const void* alpha = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = f64 ? static_cast<const void*>(&zero64) : &zero32;
  const AlgoPerf* best = nullptr;
  double best_s = 0;
  for (size_t c = 0; c < list.size() && c < kCandidates; ++c) {
    const AlgoPerf& r = *list[c];
    if (p.math != kFmaMath && d.SetMathType(p.conv, r.math_type) != 0) continue;
    size_t sz = 0;
    if (d.workspace[k](h, o.first, o.second, p.conv, o.out, r.algo, &sz) != 0 || sz > kMaxWorkspace) continue;
    std::shared_ptr<StorageImpl> ws;
    if (sz > 0) ws = allocate_storage(sz, device);
    void* wp = ws ? ws->data() : nullptr;
    auto once = [&] { return d.run[k](h, alpha, o.first, first, o.second, second, p.conv, r.algo, wp, sz, beta, o.out, out); };
    if (once() != 0) continue;  // warm-up; a candidate that refuses is skipped
    synchronize(device);
    const auto t0 = std::chrono::steady_clock::now();
    bool ran = true;
    for (int i = 0; i < kReps && ran; ++i) ran = once() == 0;
    synchronize(device);
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (ran && (!best || t < best_s)) {
      best = &r;
      best_s = t;
    }
  }
  if (p.math != kFmaMath) d.SetMathType(p.conv, p.math);  // choose() sets the winner's
  return best;
}

// Chooses the plan's algorithm: timing every candidate on the call's own
// buffers (the output is written anyway), or the heuristic while a graph is
// captured (timing synchronizes).
void choose(Plan& p, ConvPass pass, Handle h, int device, const void* first, const void* second, void* out,
            const char* what) {
  const Dnn& d = dnn();
  const int k = static_cast<int>(pass);
  const Order o = order(p, pass);
  // A plan chosen during a capture carries its winner's math type: search with the one asked for.
  ok(d.SetMathType(p.conv, p.math), what, "cudnnSetConvolutionMathType");
  int count = 0;
  ok(d.max_count[k](h, &count), what, "cudnnGetConvolution*AlgorithmMaxCount");
  std::vector<AlgoPerf> perf(static_cast<size_t>(std::max(count, 1)));
  int n = 0;
  const bool timed = !capturing();
  if (timed) {
    size_t most = 0;
    for (int a = 0; a < count; ++a) {
      size_t sz = 0;
      if (d.workspace[k](h, o.first, o.second, p.conv, o.out, a, &sz) == 0 && sz <= kMaxWorkspace)
        most = std::max(most, sz);
    }
    std::shared_ptr<StorageImpl> ws;
    if (most > 0) ws = allocate_storage(most, device);
    ok(d.find[k](h, o.first, first, o.second, second, p.conv, o.out, out, count, &n, perf.data(),
                 ws ? ws->data() : nullptr, most),
       what, "cudnnFindConvolution*AlgorithmEx");
  } else {
    ok(d.heuristic[k](h, o.first, o.second, p.conv, o.out, count, &n, perf.data()), what,
       "cudnnGetConvolution*Algorithm_v7");
  }
  // The acceptable candidates in cuDNN's order (fastest kernels first):
  // deterministic ones when there are any.
  std::vector<const AlgoPerf*> ok_list;
  for (bool det : {true, false}) {
    // Deterministic mode: a nondeterministic algorithm only after the alert (it raises unless warn_only).
    if (!det && n > 0)
      alert_not_deterministic(str(what, " through cuDNN (no deterministic ",
                                  pass == ConvPass::Forward ? "forward" : pass == ConvPass::BackwardData
                                                                              ? "backward-data"
                                                                              : "backward-filter",
                                  " algorithm for this problem)"));
    for (int i = 0; i < n; ++i)
      if (acceptable(perf[static_cast<size_t>(i)], p, det)) ok_list.push_back(&perf[static_cast<size_t>(i)]);
    p.deterministic = det;
    if (!ok_list.empty()) break;
  }
  TP_CHECK(!ok_list.empty(), Error, what, ": cuDNN found no algorithm (", n, " candidates)");
  const AlgoPerf* best = ok_list[0];
  if (timed && ok_list.size() > 1) {
    if (const AlgoPerf* b = fastest_per_call(p, pass, h, device, first, second, out, ok_list)) best = b;
  }
  // Exact float32 stays on FMA math whatever the candidate reports.
  if (p.math != kFmaMath) ok(d.SetMathType(p.conv, best->math_type), what, "cudnnSetConvolutionMathType");
  size_t sz = 0;
  ok(d.workspace[k](h, o.first, o.second, p.conv, o.out, best->algo, &sz), what,
     "cudnnGetConvolution*WorkspaceSize");
  p.algo = best->algo;
  p.workspace = sz;
  p.timed = timed;
}

}  // namespace

void add_cudnn_candidates(const std::vector<std::string>& paths) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const auto& p : paths) candidates().push_back(p);
}
bool cudnn_available() { return dnn().loaded; }
std::string cudnn_why_unavailable() { return dnn().why; }
std::string cudnn_path() { return dnn().path; }
int cudnn_version() { return dnn().loaded ? dnn().version : 0; }
void set_cudnn_enabled(bool on) { g_enabled = on; }
bool cudnn_enabled() { return g_enabled; }
int64_t cudnn_conv_calls() { return g_calls; }

bool cudnn_covers(DType dtype, const ConvShape& s) {
  if (dtype != DType::Float32 && dtype != DType::Float64 && dtype != DType::Float16 && dtype != DType::BFloat16)
    return false;
  if (!g_enabled || !dnn().loaded) return false;
  // The legacy API indexes with int: every tensor under 2^31 elements.
  constexpr int64_t kLimit = int64_t{1} << 31;
  for (int64_t v : {s.N * s.C * s.H * s.W, s.N * s.O * s.Ho * s.Wo, s.O * (s.C / s.G) * s.kh * s.kw})
    if (v >= kLimit) return false;
  return true;
}

void cudnn_convolution(int device, DType dtype, ConvPass pass, const ConvShape& s, const void* a, const void* b,
                       void* out, const char* what) {
  const Dnn& d = dnn();
  TP_CHECK(d.loaded, Error, what, ": ", d.why);
  activate(device);
  Handle h = handle_for(device, what);
  ok(d.SetStream(h, current_stream(device)), what, "cudnnSetStream");
  // The library's operand order (see order()).
  const void* first = pass == ConvPass::Forward ? a : b;
  const void* second = pass == ConvPass::Forward ? b : a;
  const int64_t math = dtype == DType::Float32 && allow_tf32() ? 1 : 0;
  const std::vector<int64_t> key{device, static_cast<int64_t>(dtype), static_cast<int64_t>(pass), s.N, s.C, s.H,
                                 s.W, s.O, s.G, s.kh, s.kw, s.ph, s.pw, s.sh, s.sw, s.dh, s.dw, math,
                                 alignment(first), alignment(second), alignment(out)};
  static auto* plans = new std::map<std::vector<int64_t>, Plan*>();
  Plan* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (auto it = plans->find(key); it != plans->end()) p = it->second;
  }
  // A nondeterministic plan chosen before the mode was set is chosen again (and alerts).
  const bool stale = p && !p->deterministic && deterministic_algorithms() && !deterministic_algorithms_warn_only();
  if (!p || (!p->timed && !capturing()) || stale) {
    Plan* fresh = p ? p : make_plan(dtype, s, what);
    choose(*fresh, pass, h, device, first, second, out, what);
    std::lock_guard<std::mutex> lock(g_mutex);
    (*plans)[key] = fresh;
    p = fresh;
  }
  const Order o = order(*p, pass);
  std::shared_ptr<StorageImpl> ws;
  if (p->workspace > 0) ws = allocate_storage(p->workspace, device);
  const double one64 = 1.0, zero64 = 0.0;
  const float one32 = 1.0f, zero32 = 0.0f;
  const bool f64 = dtype == DType::Float64;
  const void* alpha = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = f64 ? static_cast<const void*>(&zero64) : &zero32;
  ok(d.run[static_cast<int>(pass)](h, alpha, o.first, first, o.second, second, p->conv, p->algo,
                                    ws ? ws->data() : nullptr, p->workspace, beta, o.out, out),
     what, pass == ConvPass::Forward        ? "cudnnConvolutionForward"
           : pass == ConvPass::BackwardData ? "cudnnConvolutionBackwardData"
                                            : "cudnnConvolutionBackwardFilter");
  ++g_calls;
}

void cudnn_add_bias(int device, DType dtype, const ConvShape& s, const void* bias, void* y, const char* what) {
  const Dnn& d = dnn();
  TP_CHECK(d.loaded, Error, what, ": ", d.why);
  activate(device);
  Handle h = handle_for(device, what);
  ok(d.SetStream(h, current_stream(device)), what, "cudnnSetStream");
  const std::vector<int64_t> key{static_cast<int64_t>(dtype), s.N, s.O, s.Ho, s.Wo};
  static auto* descs = new std::map<std::vector<int64_t>, std::pair<TensorDesc, TensorDesc>>();
  std::pair<TensorDesc, TensorDesc> dd{nullptr, nullptr};
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (auto it = descs->find(key); it != descs->end()) dd = it->second;
  }
  if (!dd.first) {
    const int type = data_type(dtype);
    dd = {tensor_desc(type, 1, s.O, 1, 1, what), tensor_desc(type, s.N, s.O, s.Ho, s.Wo, what)};
    std::lock_guard<std::mutex> lock(g_mutex);
    (*descs)[key] = dd;
  }
  const double one64 = 1.0;
  const float one32 = 1.0f;
  const void* one = dtype == DType::Float64 ? static_cast<const void*>(&one64) : &one32;
  ok(d.AddTensor(h, one, dd.first, bias, one, dd.second, y), what, "cudnnAddTensor");
}

}  // namespace tp::cuda
