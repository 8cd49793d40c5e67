#include "cuda/cublas.h"

#include <atomic>
#include <map>
#include <mutex>

#include "core/error.h"
#include "cuda/dynlib.h"
#include "cuda/allocator.h"
#include "cuda/driver.h"
#include "cuda/stream.h"

namespace tp::cuda {
namespace {

// The C ABI of the few cuBLASLt entry points used (facts from cublasLt.h and
// library_types.h: statuses and enums are ints, descriptors opaque pointers).
using Status = int;
using Handle = struct LtContext*;
using Desc = struct LtDesc*;
using Layout = struct LtLayout*;
using Pref = struct LtPref*;
struct Algo {
  uint64_t data[8];
};
struct Heuristic {
  Algo algo;
  size_t workspace_size;
  Status state;
  float waves;
  int reserved[4];
};

// cudaDataType_t values.
constexpr int kR32F = 0, kR64F = 1, kR16F = 2, kR16BF = 14;
// cublasComputeType_t values.
constexpr int kCompute32F = 68, kCompute32FFastTF32 = 77, kCompute64F = 70;
// cublasLtMatmulDescAttributes_t / cublasLtMatrixLayoutAttribute_t /
// cublasLtMatmulPreferenceAttributes_t / cublasLtEpilogue_t values.
constexpr int kDescTransA = 3, kDescTransB = 4, kDescEpilogue = 7, kDescBiasPointer = 8, kDescAuxPointer = 11,
              kDescAuxLd = 12;
constexpr int kLayoutBatchCount = 5, kLayoutBatchStride = 6;
constexpr int kPrefMaxWorkspace = 1, kPrefMinAlignA = 5;  // then B, C, D at 6, 7, 8
// cublasLtEpilogue_t: RELU 2, BIAS 4 (RELU_BIAS = 6), GELU 32 (GELU_BIAS = 36).
constexpr uint32_t kEpilogueRelu = 2, kEpilogueBias = 4, kEpilogueGelu = 32;
constexpr int kOpN = 0, kOpT = 1;

// 32 MiB: what NVIDIA advises for Hopper; taken from the caching allocator
// per call (stream-ordered, so it is reused at once by the next call).
constexpr size_t kWorkspace = size_t{32} << 20;

struct Lt {
  bool loaded = false;
  std::string why, path;
  Status (*Create)(Handle*) = nullptr;
  Status (*DescCreate)(Desc*, int, int) = nullptr;
  Status (*DescDestroy)(Desc) = nullptr;
  Status (*DescSetAttribute)(Desc, int, const void*, size_t) = nullptr;
  Status (*LayoutCreate)(Layout*, int, uint64_t, uint64_t, int64_t) = nullptr;
  Status (*LayoutDestroy)(Layout) = nullptr;
  Status (*LayoutSetAttribute)(Layout, int, const void*, size_t) = nullptr;
  Status (*PrefCreate)(Pref*) = nullptr;
  Status (*PrefDestroy)(Pref) = nullptr;
  Status (*PrefSetAttribute)(Pref, int, const void*, size_t) = nullptr;
  Status (*Heuristic)(Handle, Desc, Layout, Layout, Layout, Layout, Pref, int, struct Heuristic*, int*) = nullptr;
  Status (*Matmul)(Handle, Desc, const void*, const void*, Layout, const void*, Layout, const void*, const void*,
                   Layout, void*, Layout, const Algo*, void*, size_t, CUstream) = nullptr;
};

std::mutex g_mutex;
std::atomic<bool> g_tf32{false};

std::vector<std::string>& candidates() {
  static auto* v = new std::vector<std::string>();
  return *v;
}

Lt* load() {
  auto* lt = new Lt();  // leaked with the library, like the driver's table
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    names = candidates();
  }
  for (const char* s : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}) names.push_back(s);
  void* lib = open_first(names, &lt->path);
  if (!lib) {
    lt->why = "cuBLASLt (libcublasLt.so.13/.12) was not found; install it with `pip install tensorplay[cuda]` "
              "(nvidia-cublas)";
    return lt;
  }
  const bool ok = resolve(lib, lt->Create, "cublasLtCreate") && resolve(lib, lt->DescCreate, "cublasLtMatmulDescCreate") &&
                  resolve(lib, lt->DescDestroy, "cublasLtMatmulDescDestroy") &&
                  resolve(lib, lt->DescSetAttribute, "cublasLtMatmulDescSetAttribute") &&
                  resolve(lib, lt->LayoutCreate, "cublasLtMatrixLayoutCreate") &&
                  resolve(lib, lt->LayoutDestroy, "cublasLtMatrixLayoutDestroy") &&
                  resolve(lib, lt->LayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute") &&
                  resolve(lib, lt->PrefCreate, "cublasLtMatmulPreferenceCreate") &&
                  resolve(lib, lt->PrefDestroy, "cublasLtMatmulPreferenceDestroy") &&
                  resolve(lib, lt->PrefSetAttribute, "cublasLtMatmulPreferenceSetAttribute") &&
                  resolve(lib, lt->Heuristic, "cublasLtMatmulAlgoGetHeuristic") &&
                  resolve(lib, lt->Matmul, "cublasLtMatmul");
  if (!ok) {
    lt->why = "cuBLASLt at " + lt->path + " lacks an entry point";
    return lt;
  }
  lt->loaded = true;
  return lt;
}

// Loaded on first use, after tensorplay.cuda registered the wheel's paths.
const Lt& lt() {
  static Lt* l = load();
  return *l;
}

void ok(Status s, const char* what, const char* call) {
  TP_CHECK(s == 0, Error, what, ": ", call, " failed with cuBLAS status ", s);
}

// One handle per device, created on first use (with its context current).
Handle handle_for(int device) {
  static auto* handles = new std::map<int, Handle>();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (auto it = handles->find(device); it != handles->end()) return it->second;
  Handle h = nullptr;
  ok(lt().Create(&h), "matmul", "cublasLtCreate");
  (*handles)[device] = h;
  return h;
}

// Descriptors freed at scope exit (also when a call throws).
struct Owned {
  Desc desc = nullptr;
  Layout layouts[3] = {nullptr, nullptr, nullptr};
  Pref pref = nullptr;
  ~Owned() {
    for (Layout l : layouts)
      if (l) lt().LayoutDestroy(l);
    if (desc) lt().DescDestroy(desc);
    if (pref) lt().PrefDestroy(pref);
  }
};

int data_type(DType d, const char* what) {
  switch (d) {
    case DType::Float32: return kR32F;
    case DType::Float64: return kR64F;
    case DType::Float16: return kR16F;
    case DType::BFloat16: return kR16BF;
    default: throw TypeError(str(what, ": cuBLASLt has no kernel for dtype ", dtype_name(d)));
  }
}

Layout make_layout(int type, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride, const char* what) {
  Layout l = nullptr;
  ok(lt().LayoutCreate(&l, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld), what,
     "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    lt().LayoutSetAttribute(l, kLayoutBatchCount, &count, sizeof(count));
    lt().LayoutSetAttribute(l, kLayoutBatchStride, &stride, sizeof(stride));
  }
  return l;
}

// The heuristic's choice per problem, asked once: the query costs more than
// the rest of the call.
using AlgoKey = std::vector<int64_t>;

// The largest power of two up to 256 dividing the address.
uint32_t alignment(const void* p) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && v % al != 0) al /= 2;
  return al;
}

}  // namespace

void add_cublaslt_candidates(const std::vector<std::string>& paths) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const auto& p : paths) candidates().push_back(p);
}
bool cublaslt_available() { return lt().loaded; }
std::string cublaslt_why_unavailable() { return lt().why; }
std::string cublaslt_path() { return lt().path; }
void set_allow_tf32(bool on) { g_tf32 = on; }
bool allow_tf32() { return g_tf32; }

namespace {

// One cublasLtMatmul: the epilogue code (0: DEFAULT), its bias / bias-gradient
// pointer and auxiliary matrix.
void run_matmul(int device, DType dtype, const LtMatrix& a, const LtMatrix& b, void* d, int64_t rows, int64_t cols,
                int64_t ld_d, int64_t d_batch_stride, int64_t batch, double alpha, double beta, uint32_t epilogue,
                const void* bias, const void* aux, int64_t aux_ld, const char* what) {
  if (!is_available()) throw_unavailable(what);
  const Lt& l = lt();
  TP_CHECK(l.loaded, Error, what, ": ", l.why);
  TP_CHECK(batch < (int64_t{1} << 31), Error, what, ": batch of ", batch, " is too large for cuBLASLt");
  activate(device);
  Handle h = handle_for(device);
  const int type = data_type(dtype, what);
  const bool f64 = dtype == DType::Float64;
  const bool tf32 = dtype == DType::Float32 && allow_tf32();
  const int compute = f64 ? kCompute64F : tf32 ? kCompute32FFastTF32 : kCompute32F;
  Owned o;
  ok(l.DescCreate(&o.desc, compute, f64 ? kR64F : kR32F), what, "cublasLtMatmulDescCreate");
  const int32_t ta = a.trans ? kOpT : kOpN, tb = b.trans ? kOpT : kOpN;
  l.DescSetAttribute(o.desc, kDescTransA, &ta, sizeof(ta));
  l.DescSetAttribute(o.desc, kDescTransB, &tb, sizeof(tb));
  if (epilogue) l.DescSetAttribute(o.desc, kDescEpilogue, &epilogue, sizeof(epilogue));  // else DEFAULT (1)
  if (bias) l.DescSetAttribute(o.desc, kDescBiasPointer, &bias, sizeof(bias));
  if (aux) {
    l.DescSetAttribute(o.desc, kDescAuxPointer, &aux, sizeof(aux));
    l.DescSetAttribute(o.desc, kDescAuxLd, &aux_ld, sizeof(aux_ld));
  }
  o.layouts[0] = make_layout(type, a.rows, a.cols, a.ld, batch, a.batch_stride, what);
  o.layouts[1] = make_layout(type, b.rows, b.cols, b.ld, batch, b.batch_stride, what);
  o.layouts[2] = make_layout(type, rows, cols, ld_d, batch, d_batch_stride, what);

  // Alignment of the pointers changes which kernels are eligible: part of the key.
  const AlgoKey key{device, type, compute, a.trans, b.trans, a.rows, a.cols, a.ld, b.rows, b.cols, b.ld, rows,
                    cols, ld_d, batch, a.batch_stride, b.batch_stride, d_batch_stride, bias != nullptr, epilogue,
                    alignment(a.data), alignment(b.data), alignment(d), alignment(bias), aux_ld, alignment(aux)};
  static auto* algos = new std::map<AlgoKey, Heuristic>();
  Heuristic best{};
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (auto it = algos->find(key); it != algos->end()) {
      best = it->second;
      found = true;
    }
  }
  if (!found) {
    ok(l.PrefCreate(&o.pref), what, "cublasLtMatmulPreferenceCreate");
    const uint64_t ws = kWorkspace;
    l.PrefSetAttribute(o.pref, kPrefMaxWorkspace, &ws, sizeof(ws));
    // The heuristic assumes 256-byte aligned operands unless told: sliced
    // operands start anywhere, so give each pointer's real alignment.
    const void* ptrs[4] = {a.data, b.data, d, d};
    for (int i = 0; i < 4; ++i) {
      const uint32_t al = alignment(ptrs[i]);
      l.PrefSetAttribute(o.pref, kPrefMinAlignA + i, &al, sizeof(al));
    }
    int n = 0;
    const Status s = l.Heuristic(h, o.desc, o.layouts[0], o.layouts[1], o.layouts[2], o.layouts[2], o.pref, 1, &best, &n);
    TP_CHECK(s == 0 && n > 0, Error, what, ": cuBLASLt found no algorithm for ", dtype_name(dtype), " (", rows, "x",
             cols, ", batch ", batch, ", status ", s, ")");
    std::lock_guard<std::mutex> lock(g_mutex);
    (*algos)[key] = best;
  }
  std::shared_ptr<StorageImpl> ws;
  if (best.workspace_size > 0) ws = allocate_storage(best.workspace_size, device);
  const float af = static_cast<float>(alpha), bf = static_cast<float>(beta);
  const void* pa = f64 ? static_cast<const void*>(&alpha) : &af;
  const void* pb = f64 ? static_cast<const void*>(&beta) : &bf;
  ok(l.Matmul(h, o.desc, pa, a.data, o.layouts[0], b.data, o.layouts[1], pb, d, o.layouts[2], d, o.layouts[2],
              &best.algo, ws ? ws->data() : nullptr, best.workspace_size, current_stream(device)),
     what, "cublasLtMatmul");
}

}  // namespace

void lt_matmul(int device, DType dtype, const LtMatrix& a, const LtMatrix& b, void* d, int64_t rows, int64_t cols,
               int64_t ld_d, int64_t d_batch_stride, int64_t batch, double alpha, double beta, const void* bias,
               const char* what, LtActivation act) {
  const uint32_t epilogue = (act == LtActivation::Relu ? kEpilogueRelu : act == LtActivation::GeluTanh ? kEpilogueGelu : 0) |
                            (bias ? kEpilogueBias : 0);
  run_matmul(device, dtype, a, b, d, rows, cols, ld_d, d_batch_stride, batch, alpha, beta, epilogue, bias, nullptr, 0,
             what);
}

void lt_matmul_epilogue(int device, DType dtype, const LtMatrix& a, const LtMatrix& b, void* d, int64_t rows,
                        int64_t cols, int64_t ld_d, const LtEpilogue& e, const char* what) {
  run_matmul(device, dtype, a, b, d, rows, cols, ld_d, 0, 1, 1.0, 0.0, static_cast<uint32_t>(e.kind), e.bias, e.aux,
             e.aux ? e.aux_ld : 0, what);
}

}  // namespace tp::cuda
