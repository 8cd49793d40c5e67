#include "cuda/kernels.h"

#include <cstring>
#include <map>
#include <mutex>

#include "core/grad_mode.h"
#include "cuda/copy.h"
#include "cuda/disk_cache.h"
#include "cuda/driver.h"
#include "cuda/stream.h"
#include "cuda/matmul.h"
#include "cuda/attention.h"
#include "cuda/index_kernels.h"
#include "cuda/mask_kernels.h"
#include "cuda/nn_kernels.h"
#include "cuda/nvrtc.h"
#include "cuda/scan_sort.h"
#include "cuda/gap_kernels.h"
#include "cuda/masked_scatter.h"
#include "cuda/scatter_reduce.h"
#include "cuda/unique_kernels.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace tp::cuda {
namespace {

constexpr int kMaxDims = 8;
constexpr int kThreads = 256;

// Kernel parameters for a strided pointwise kernel: output sizes and each
// input's element strides (0 along broadcast dims). Same layout as in the
// generated source.
struct PointwiseParams {
  long long size[kMaxDims];
  long long stride[2][kMaxDims];
};

struct UnaryDef {
  const char* op;
  const char* f32;
  const char* f64;
};
// The scalar expression of each operator in x (and y), for float and double.
constexpr UnaryDef kUnary[] = {
    {"neg", "-x", "-x"},
    {"exp", "expf(x)", "exp(x)"},
    {"log", "logf(x)", "log(x)"},
    {"relu", "(x < 0.0f ? 0.0f : x)", "(x < 0.0 ? 0.0 : x)"},  // NaN stays NaN, as in PyTorch
    {"sigmoid", "1.0f / (1.0f + expf(-x))", "1.0 / (1.0 + exp(-x))"},
    {"tanh", "tanhf(x)", "tanh(x)"},
    {"sqrt", "sqrtf(x)", "sqrt(x)"},
    {"copy", "x", "x"},
};
constexpr UnaryDef kBinary[] = {
    {"add", "x + (T)alpha * y", "x + alpha * y"},
    {"sub", "x - (T)alpha * y", "x - alpha * y"},
    {"mul", "x * y", "x * y"},
    {"div", "x / y", "x / y"},
};

// 16-bit floats only ever go through the copy kernel, which moves bits: an
// unsigned short carries them without NVRTC's cuda_fp16/bf16 headers.
const char* ctype(DType d) {
  if (d == DType::Float16 || d == DType::BFloat16) return "unsigned short";
  return d == DType::Float32 ? "float" : "double";
}

std::string pointwise_source(const std::string& name, DType dt, const std::string& expr, int nin, int nd) {
  std::string s = "typedef " + std::string(ctype(dt)) + " T;\n";
  s += "struct P { long long size[8]; long long stride[2][8]; };\n";
  s += "extern \"C\" __global__ void " + name + "(T* __restrict__ out, const T* __restrict__ a, ";
  s += "const T* __restrict__ b, long long n, double alpha, P p) {\n";
  s += "  const long long step = (long long)gridDim.x * blockDim.x;\n";
  s += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {\n";
  s += "    long long r = i, oa = 0, ob = 0;\n";
  s += "    #pragma unroll\n";
  s += "    for (int d = " + std::to_string(nd - 1) + "; d >= 0; --d) {\n";
  s += "      const long long c = r % p.size[d]; r /= p.size[d];\n";
  s += "      oa += c * p.stride[0][d];" + std::string(nin > 1 ? " ob += c * p.stride[1][d];" : "") + "\n    }\n";
  s += "    const T x = a[oa];\n";
  s += nin > 1 ? "    const T y = b[ob];\n" : "    (void)b; (void)ob; (void)alpha;\n";
  s += "    out[i] = " + expr + ";\n  }\n}\n";
  return s;
}

std::string rowsum_source(const std::string& name, DType dt) {
  std::string s = "typedef " + std::string(ctype(dt)) + " T;\n";
  s += "extern \"C\" __global__ void " + name + "(T* __restrict__ out, const T* __restrict__ in, long long cols) {\n";
  s += "  __shared__ T part[" + std::to_string(kThreads) + "];\n";
  s += "  const T* row = in + (long long)blockIdx.x * cols;\n";
  s += "  T acc = 0;\n";
  s += "  for (long long j = threadIdx.x; j < cols; j += blockDim.x) acc += row[j];\n";
  s += "  part[threadIdx.x] = acc;\n  __syncthreads();\n";
  s += "  for (int w = blockDim.x / 2; w > 0; w >>= 1) {\n";
  s += "    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];\n    __syncthreads();\n  }\n";
  s += "  if (threadIdx.x == 0) out[blockIdx.x] = part[0];\n}\n";
  return s;
}

std::string kernel_name(const std::string& op, DType dt, int nd) {
  return nd >= 0 ? str("tp_", op, "_", dtype_name(dt), "_", nd, "d") : str("tp_", op, "_", dtype_name(dt));
}

// Compiled functions by (device, source). Modules stay loaded for the process.
std::mutex g_mutex;
std::map<std::pair<int, std::string>, CUfunction>& kernel_cache() {
  static auto* m = new std::map<std::pair<int, std::string>, CUfunction>();
  return *m;
}

// Loaded modules by (device, source): a Stax region's source holds several
// kernels and is compiled (or read from disk) once.
std::map<std::pair<int, std::string>, CUmodule>& module_cache() {
  static auto* m = new std::map<std::pair<int, std::string>, CUmodule>();
  return *m;
}

CUfunction get_kernel(int device, const std::string& name, const std::string& source) {
  std::lock_guard<std::mutex> lock(g_mutex);
  // Keyed by name too: one source may hold several kernels (Stax regions).
  auto key = std::make_pair(device, name + '\n' + source);
  auto& cache = kernel_cache();
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  activate(device);
  CUmodule mod = nullptr;
  auto& modules = module_cache();
  if (auto it = modules.find({device, source}); it != modules.end()) {
    mod = it->second;
  } else {
    const int arch = compute_capability(device);
    const std::string disk_key = cubin_key(source, arch);
    // A CUBIN from disk that the driver refuses (damaged) is compiled afresh.
    std::optional<std::string> cubin = load_cubin(disk_key);
    if (!cubin || driver().cuModuleLoadData(&mod, cubin->data()) != 0) {
      cubin = nvrtc_compile(source, name, arch);
      check(driver().cuModuleLoadData(&mod, cubin->data()), "cuModuleLoadData");
      store_cubin(disk_key, *cubin);
    }
    modules[{device, source}] = mod;
  }
  CUfunction fn = nullptr;
  check(driver().cuModuleGetFunction(&fn, mod, name.c_str()), "cuModuleGetFunction");
  cache[key] = fn;
  return fn;
}

unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min<int64_t>(blocks, 65535 * 8));
}

// Output sizes and per-input strides with broadcast dims at stride 0, then
// adjacent dims merged where every operand is contiguous across them.
int collapse(const Shape& out, const std::vector<Tensor>& in, PointwiseParams& p) {
  const int64_t nd = static_cast<int64_t>(out.size());
  std::vector<int64_t> size(out.begin(), out.end());
  std::vector<std::vector<int64_t>> st(in.size(), std::vector<int64_t>(static_cast<size_t>(nd), 0));
  for (size_t k = 0; k < in.size(); ++k) {
    const int64_t off = nd - in[k].dim();
    for (int64_t d = 0; d < in[k].dim(); ++d)
      if (in[k].sizes()[d] != 1) st[k][static_cast<size_t>(d + off)] = in[k].strides()[d];
  }
  // Drop size-1 dims, then merge d into d+1 where strides chain.
  std::vector<int64_t> cs;
  std::vector<std::vector<int64_t>> cst(in.size());
  for (int64_t d = 0; d < nd; ++d) {
    if (size[d] == 1) continue;
    bool merge = !cs.empty();
    for (size_t k = 0; k < in.size() && merge; ++k) merge = cst[k].back() == st[k][d] * size[d];
    if (merge) {
      cs.back() *= size[d];
      for (size_t k = 0; k < in.size(); ++k) cst[k].back() = st[k][d];
    } else {
      cs.push_back(size[d]);
      for (size_t k = 0; k < in.size(); ++k) cst[k].push_back(st[k][d]);
    }
  }
  TP_CHECK(cs.size() <= kMaxDims, Error, "CUDA pointwise kernels take at most ", kMaxDims, " dims after merging");
  for (size_t d = 0; d < cs.size(); ++d) {
    p.size[d] = cs[d];
    for (size_t k = 0; k < in.size(); ++k) p.stride[k][d] = cst[k][d];
  }
  return static_cast<int>(cs.size());
}

void launch_pointwise(const std::string& op, const std::string& expr, const Tensor& out,
                      const std::vector<Tensor>& in, double alpha) {
  const int64_t n = out.numel();
  if (n == 0) return;
  PointwiseParams p{};
  const int nd = collapse(out.sizes(), in, p);
  const std::string name = kernel_name(op, out.dtype(), nd);
  const int dev = out.device().index;
  CUfunction fn = get_kernel(dev, name, pointwise_source(name, out.dtype(), expr, static_cast<int>(in.size()), nd));
  void* o = out.data();
  void* a = in[0].data();
  void* b = in.size() > 1 ? in[1].data() : in[0].data();
  long long count = n;
  void* args[] = {&o, &a, &b, &count, &alpha, &p};
  activate(dev);
  check(driver().cuLaunchKernel(fn, grid_for(n), 1, 1, kThreads, 1, 1, 0, current_stream(dev), args, nullptr), op.c_str());
}

const UnaryDef* find_def(const UnaryDef* table, size_t count, const std::string& op) {
  for (size_t i = 0; i < count; ++i)
    if (op == table[i].op) return &table[i];
  return nullptr;
}

bool is_float(DType d) { return d == DType::Float32 || d == DType::Float64; }

[[noreturn]] void different_devices(const Tensor& a, const Tensor& b, const char* op) {
  throw Error(str(op, ": Expected all tensors to be on the same device, but found at least two devices, ",
                  a.device().str(), " and ", b.device().str(), "!"));
}

// A 0-d CPU tensor next to a CUDA tensor is a number (PyTorch allows it):
// it goes to the device as a one-element tensor of the result's dtype.
bool to_operand(Tensor& t, const Tensor& other, DType dt, int dev, const char* op) {
  if (t.device().kind == Device::Kind::CPU) {
    if (t.dim() != 0) different_devices(other, t, op);
    Tensor host = Tensor::scalar_tensor(t.item(), dt);
    if (capturing() && itemsize(dt) % 4 == 0) {
      // In a CUDA graph capture an upload would read freed host memory at
      // replay: the value is written by memsets whose words the graph keeps.
      t = empty(Shape{}, dt, dev);
      for (int64_t w = 0; w < itemsize(dt) / 4; ++w) {
        unsigned word = 0;
        std::memcpy(&word, static_cast<const char*>(host.data()) + 4 * w, 4);
        check(driver().cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(t.data()) + 4 * w, word, 1,
                                        current_stream(dev)),
              "cuMemsetD32Async");
      }
    } else {
      t = to_device(host, dev);
    }
  }
  if (t.device().index != dev) different_devices(other, t, op);
  return t.dtype() == dt;
}

// Sum over the last dim (or every dim) of a contiguous float tensor.
bool row_sum(const Tensor& x, const Attrs& attrs, const TensorMeta& om, std::vector<Tensor>& out) {
  if (!is_float(x.dtype()) || om.dtype != x.dtype() || (x.numel() > 0 && !x.is_contiguous())) return false;
  std::vector<int64_t> dims = attrs.get_or<std::vector<int64_t>>("dim", {});
  int64_t cols = x.numel();
  if (!dims.empty()) {
    if (dims.size() != 1 || x.dim() == 0) return false;
    const int64_t d = dims[0] < 0 ? dims[0] + x.dim() : dims[0];
    if (d != x.dim() - 1) return false;
    cols = x.sizes().back();
  }
  const int dev = x.device().index;
  Tensor r = empty(om.sizes, om.dtype, dev);
  const int64_t rows = r.numel();
  if (rows > 0) {
    const std::string name = kernel_name("rowsum", x.dtype(), -1);
    CUfunction fn = get_kernel(dev, name, rowsum_source(name, x.dtype()));
    void* o = r.data();
    void* i = x.data();
    long long c = cols;
    void* args[] = {&o, &i, &c};
    activate(dev);
    TP_CHECK(rows < (1ll << 31), Error, "sum: too many rows for the CUDA row-sum kernel");
    check(driver().cuLaunchKernel(fn, static_cast<unsigned>(rows), 1, 1, kThreads, 1, 1, 0, current_stream(dev), args,
                                  nullptr),
          "sum");
  }
  out = {r};
  return true;
}

GeneratedOpFn g_generated_op = nullptr;


// copy_ into a CUDA tensor from any device, dtype, layout and broadcastable
// shape (PyTorch's copy_ semantics): the source is brought to dst's device,
// dtype and shape as a contiguous tensor that shares no memory with dst, then
// written in one device copy (contiguous dst) or through dst's strides. Each
// step is an operator with its own CUDA kernel; grad mode is off (a kernel
// records no history).
bool copy_into_device(const std::vector<Tensor>& inputs, std::vector<Tensor>& out) {
  const Tensor& dst = inputs[0];
  Tensor src = inputs[1];
  const int dev = dst.device().index;
  AutoGradMode no_grad(false);
  if (src.device().kind == Device::Kind::CPU) {
    src = to_device(src.is_contiguous() ? src : ops::contiguous(src), dev);
  } else if (src.device().index != dev) {
    src = copy_to_device(src, dev);
  }
  if (src.dtype() != dst.dtype()) src = ops::to_dtype(src, dst.dtype());
  if (src.sizes() != dst.sizes()) src = ops::expand(src, dst.sizes());
  // A source reading dst's memory (x.t().copy_(x), overlapping slices) is
  // materialized first, so no element is overwritten before it is read.
  if (!src.is_contiguous() || src.impl()->storage == dst.impl()->storage) src = ops::clone(src);
  if (dst.numel() == 0) {
    out = {dst};
    return true;
  }
  if (dst.is_contiguous()) {
    copy_device_to_device(dst, src);
  } else if (!put_strided(dst, src)) {
    return false;
  }
  out = {dst};
  return true;
}

bool handwritten_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                        const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out) {
  const std::string name = op.name;
  // Views only re-describe the storage (no data is read): the CPU kernel is
  // device-neutral for them.
  if (op.has(kView)) {
    for (size_t i = 1; i < inputs.size(); ++i)
      if (inputs[i].defined()) return false;
    out = op.cpu(op, inputs, attrs, out_meta);
    for (auto& t : out) TP_CHECK(t.impl()->storage == inputs[0].impl()->storage, Error, op.name, ": view copied");
    return true;
  }
  if (matmul_kernel(op, inputs, attrs, out_meta, out)) return true;  // cuBLASLt, 16-bit dtypes included
  if (conv_kernel(op, inputs, attrs, out_meta, out) || pool_kernel(op, inputs, attrs, out_meta, out) ||
      batch_norm_kernel(op, inputs, attrs, out_meta, out) || loss_kernel(op, inputs, attrs, out_meta, out) ||
      dropout_kernel(op, inputs, attrs, out_meta, out) || index_kernel(op, inputs, attrs, out_meta, out) ||
      attention_kernel(op, inputs, attrs, out_meta, out) || scan_sort_kernel(op, inputs, attrs, out_meta, out) ||
      mask_kernel(op, inputs, attrs, out_meta, out) || scatter_reduce_kernel(op, inputs, attrs, out_meta, out) ||
      unique_kernel(op, inputs, attrs, out_meta, out) || masked_scatter_kernel(op, inputs, attrs, out_meta, out) ||
      gap_kernel(op, inputs, attrs, out_meta, out))
    return true;
  if (out_meta.size() != 1) return false;
  const TensorMeta& om = out_meta[0];
  // Same-layout device copies of any dtype move bytes (an int64 counter's
  // `num_batches_tracked += 1` in batch_norm training ends in one).
  if (name == "copy_" && inputs[1].device().kind == Device::Kind::CUDA &&
      inputs[1].device().index == inputs[0].device().index && inputs[0].dtype() == inputs[1].dtype() &&
      inputs[0].sizes() == inputs[1].sizes() && inputs[0].is_contiguous() && inputs[1].is_contiguous()) {
    copy_device_to_device(inputs[0], inputs[1]);
    out = {inputs[0]};
    return true;
  }
  if (name == "copy_" && inputs[0].device().kind == Device::Kind::CUDA) return copy_into_device(inputs, out);
  const bool bit_copy = (name == "clone" || name == "copy_") &&
                        (om.dtype == DType::Float16 || om.dtype == DType::BFloat16);
  if (!is_float(om.dtype) && !bit_copy) return false;
  if (const UnaryDef* u = find_def(kUnary, std::size(kUnary), name == "clone" ? "copy" : name)) {
    const Tensor& x = inputs[0];
    if (inputs.size() != 1 || x.dtype() != om.dtype || om.strides != contiguous_strides(om.sizes)) return false;
    Tensor r = empty(om.sizes, om.dtype, x.device().index);
    if (name == "clone" && x.is_contiguous()) {
      copy_device_to_device(r, x);
    } else {
      launch_pointwise(u->op, om.dtype == DType::Float32 ? u->f32 : u->f64, r, {x}, 1.0);
    }
    out = {r};
    return true;
  }
  if (const UnaryDef* b = find_def(kBinary, std::size(kBinary), name)) {
    if (inputs.size() != 2) return false;
    if (name == "div" && !attrs.is_none("rounding_mode")) return false;
    Tensor x = inputs[0], y = inputs[1];
    const Tensor& on = x.device().kind == Device::Kind::CUDA ? x : y;
    const int dev = on.device().index;
    if (!to_operand(x, on, om.dtype, dev, op.name) || !to_operand(y, on, om.dtype, dev, op.name)) return false;
    double alpha = 1.0;
    if ((name == "add" || name == "sub") && !attrs.is_none("alpha")) alpha = attrs.get_scalar("alpha").to_double();
    Tensor r = empty(om.sizes, om.dtype, dev);
    launch_pointwise(name, om.dtype == DType::Float32 ? b->f32 : b->f64, r, {x, y}, alpha);
    out = {r};
    return true;
  }
  if (name == "sum") return row_sum(inputs[0], attrs, om, out);
  return false;
}

// An in-place operator without its own kernel (mul_, clamp_, ...): its
// out-of-place twin (add_ -> add, scatter_.src -> scatter.src) computes the
// value on the device, which is then copied into input 0.
bool inplace_through_twin(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                          std::vector<Tensor>& out) {
  const std::string name = op.name;
  const size_t dot = name.find('.');
  const std::string base = name.substr(0, dot), overload = dot == std::string::npos ? "" : name.substr(dot);
  if (base.size() < 2 || base.back() != '_' || inputs.empty() || !inputs[0].defined()) return false;
  const OpDef* twin = find_op(base.substr(0, base.size() - 1) + overload);
  if (!twin || twin->has(kInplace) || twin->num_inputs != op.num_inputs) return false;
  std::vector<Tensor> r = run_kernel(*twin, inputs, attrs);
  if (r.size() != 1 || r[0].sizes() != inputs[0].sizes()) return false;
  run_kernel(get_op("copy_"), {inputs[0], r[0]}, {});
  out = {inputs[0]};
  return true;
}

bool cuda_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                 const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out) {
  // The operator activates its device's context; the caller's stays current
  // after it (PyTorch code in the same thread reads it as its current device).
  DeviceGuard guard;
  if (op.name == std::string("copy_") && inputs.size() == 2 && inputs[0].defined() && inputs[1].defined() &&
      inputs[1].device().kind == Device::Kind::CUDA && !(inputs[0].device() == inputs[1].device())) {
    if (inputs[0].device().kind == Device::Kind::CPU) {  // a download into a host tensor
      run_kernel(op, {inputs[0], to_cpu(inputs[1])}, attrs);
      out = {inputs[0]};
      return true;
    }
    const Tensor& dst = inputs[0];
    const Tensor& src = inputs[1];
    if (dst.dtype() == src.dtype() && dst.sizes() == src.sizes() && dst.is_contiguous() && src.is_contiguous()) {
      copy_device_to_device(dst, src);  // one peer copy straight into dst
      out = {dst};
      return true;
    }
    // Else another GPU's source comes over first (a peer copy); the rest is one device's copy.
    return cuda_kernel(op, {dst, copy_to_device(src, dst.device().index)}, attrs, out_meta, out);
  }
  if (handwritten_kernel(op, inputs, attrs, out_meta, out)) return true;
  if (op.has(kInplace) && op.name != std::string("copy_")) return inplace_through_twin(op, inputs, attrs, out);
  return g_generated_op && g_generated_op(op, inputs, attrs, out_meta, out);
}

}  // namespace

void set_generated_op_fallback(GeneratedOpFn fn) { g_generated_op = fn; }

void install_dispatch_hook() {
  set_cuda_kernel_hook(&cuda_kernel);
  set_host_copy_hook(&to_cpu);
}

std::vector<std::pair<std::string, std::string>> all_kernel_sources() {
  std::vector<std::pair<std::string, std::string>> v;
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const auto& u : kUnary) {
      for (int nd : {1, 3}) {
        const std::string n = kernel_name(u.op, dt, nd);
        v.emplace_back(n, pointwise_source(n, dt, dt == DType::Float32 ? u.f32 : u.f64, 1, nd));
      }
    }
    for (const auto& b : kBinary) {
      for (int nd : {1, 3}) {
        const std::string n = kernel_name(b.op, dt, nd);
        v.emplace_back(n, pointwise_source(n, dt, dt == DType::Float32 ? b.f32 : b.f64, 2, nd));
      }
    }
    const std::string n = kernel_name("rowsum", dt, -1);
    v.emplace_back(n, rowsum_source(n, dt));
  }
  for (auto& s : conv_kernel_sources()) v.push_back(std::move(s));
  for (auto& s : pool_kernel_sources()) v.push_back(std::move(s));
  for (auto& s : loss_kernel_sources()) v.push_back(std::move(s));
  for (auto& s : dropout_kernel_sources()) v.push_back(std::move(s));
  for (auto& s : index_kernel_sources()) v.push_back(std::move(s));
  for (auto& s : attention_kernel_sources()) v.push_back(std::move(s));
  for (auto& s : scan_sort_kernel_sources()) v.push_back(std::move(s));
  for (auto& s : mask_kernel_sources()) v.push_back(std::move(s));
  for (auto& s : scatter_reduce_kernel_sources()) v.push_back(std::move(s));
  for (auto& s : unique_kernel_sources()) v.push_back(std::move(s));
  for (auto& s : masked_scatter_kernel_sources()) v.push_back(std::move(s));
  for (auto* f : {&fill_kernel_sources, &lookup_kernel_sources, &select_kernel_sources,
                 &special_kernel_sources, &cum_kernel_sources})
    for (auto& s : (*f)()) v.push_back(std::move(s));
  return v;
}

size_t compiled_kernel_count() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return kernel_cache().size();
}

void launch_generated(int device, const std::string& name, const std::string& source, unsigned grid,
                      unsigned block, void** args) {
  CUfunction fn = get_kernel(device, name, source);
  activate(device);
  check(driver().cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, current_stream(device), args, nullptr), name.c_str());
}

}  // namespace tp::cuda

namespace tp::cuda {

void* generated_function(int device, const std::string& name, const std::string& source) {
  return get_kernel(device, name, source);
}

void launch_function(int device, void* function, unsigned grid, unsigned block_x, unsigned block_y, void** args,
                     const char* what) {
  activate(device);
  check(driver().cuLaunchKernel(static_cast<CUfunction>(function), grid, 1, 1, block_x, block_y, 1, 0,
                                current_stream(device), args, nullptr),
        what);
}

}  // namespace tp::cuda
