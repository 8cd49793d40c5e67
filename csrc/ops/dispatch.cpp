#include "ops/dispatch.h"

#include <cstring>
#include <string_view>

#include "core/grad_mode.h"
#include "core/profiler.h"
#include "ops/autocast.h"
#include "ops/composite_scope.h"
#include "ops/kernel_util.h"
#include "ops/type_promotion.h"

namespace tp {
namespace {
thread_local DispatchInterceptor* t_interceptor = nullptr;
thread_local const char* t_composite = nullptr;  // current_composite()
AutogradHook g_autograd_hook = nullptr;
CudaKernelHook g_cuda_hook = nullptr;
HostCopyHook g_host_copy_hook = nullptr;
DeviceMoveHook g_device_move_hook = nullptr;

const Tensor* first_cuda_input(const std::vector<Tensor>& in) {
  for (auto& t : in)
    if (t.defined() && t.device().kind == Device::Kind::CUDA) return &t;
  return nullptr;
}

// PyTorch's rule: one operator's tensors live on one device; a 0-d CPU tensor
// beside CUDA ones is a number (a Python scalar's tensor), and copy_'s source
// may be anywhere (the copy is the move). Advanced indexing (x[i], x[i] = v)
// also takes host integer/bool index tensors, which its CUDA kernel uploads.
// Checked before any kernel, so the error names the operator and both devices
// instead of "no kernel".
void check_same_device(const OpDef& op, const std::vector<Tensor>& in, const Tensor& first) {
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = in[i];
    if (!t.defined() || t.device() == first.device()) continue;
    // The exceptions are looked up only here, off the path of agreeing devices.
    const std::string_view name = op.name;
    if (name == "copy_" && i == 1) continue;
    if (t.device().kind == Device::Kind::CPU && t.dim() == 0) continue;
    const bool indexing = name == "index" || name == "index_put" || name == "index_put_";
    if (indexing && i > 0 && t.device().kind == Device::Kind::CPU && is_integral(t.dtype(), /*include_bool=*/true))
      continue;
    throw Error(str(op.name, ": Expected all tensors to be on the same device, but found at least two devices, ",
                    first.device().str(), " and ", t.device().str(), "! (input ", i, ")"));
  }
}

std::string describe_inputs(const std::vector<Tensor>& in) {
  std::string s;
  for (size_t i = 0; i < in.size(); ++i) {
    if (i) s += ", ";
    s += in[i].defined() ? str(dtype_name(in[i].dtype()), shape_str(in[i].sizes())) : "None";
  }
  return s;
}
bool all_compute_dtypes(const std::vector<TensorMeta>& metas) {
  for (auto& m : metas)
    if (m.defined && !is_compute_dtype(m.dtype)) return false;
  return true;
}

// Kernels are written for the compute dtypes (bool, int64, float32, float64).
// A narrow dtype (int8..int32, uint8, float16, bfloat16) is widened before the
// kernel and the results are narrowed to the dtypes inference gave: integer
// arithmetic then wraps exactly as in the narrow type, and 16-bit floats are
// computed in float32 and rounded once, as PyTorch does on CPU.
// Comparisons and maximum/minimum compute in their operands' promoted dtype,
// as PyTorch does: where that is a narrow type, an operand of another dtype (a
// Python number, a 0-d tensor) is first converted into it, so `uint8 == -1`
// compares with 255 and `maximum(uint8, -1)` is 255. Widening each operand on
// its own would compare the mathematical values instead (and disagree with the
// generated CUDA kernels). Arithmetic needs no such step: its result wraps
// when it is narrowed.
bool promotes_before_widening(const OpDef& op) {
  static const char* const names[] = {"eq", "ne", "lt", "le", "gt", "ge", "maximum", "minimum",
                                      "eq_", "ne_", "lt_", "le_", "gt_", "ge_"};
  for (const char* n : names)
    if (std::string_view(op.name) == n) return true;
  return false;
}

std::vector<Tensor> run_in_compute_dtypes(const OpDef& op, const std::vector<Tensor>& inputs_in,
                                          std::vector<TensorMeta> in_meta, const Attrs& attrs,
                                          const std::vector<TensorMeta>& out_meta) {
  std::vector<Tensor> promoted;
  if (inputs_in.size() == 2 && inputs_in[0].defined() && inputs_in[1].defined() && promotes_before_widening(op)) {
    const DType ct = result_type(inputs_in);
    if (!is_compute_dtype(ct) && inputs_in[0].dtype() != inputs_in[1].dtype()) {
      for (const Tensor& t : inputs_in) promoted.push_back(t.dtype() == ct ? t : convert(t, ct));
      for (size_t i = 0; i < promoted.size(); ++i) in_meta[i] = promoted[i].meta();
    }
  }
  const std::vector<Tensor>& inputs = promoted.empty() ? inputs_in : promoted;
  std::vector<Tensor> wide;
  wide.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (t.defined() && !is_compute_dtype(t.dtype())) {
      wide.push_back(convert(t, compute_dtype(t.dtype())));
      in_meta[i] = wide.back().meta();
    } else {
      wide.push_back(t);
    }
  }
  std::vector<TensorMeta> wide_meta = op.infer(op, in_meta, attrs);
  for (auto& m : wide_meta) {
    if (!is_compute_dtype(m.dtype)) {
      m.dtype = compute_dtype(m.dtype);
      m.strides = contiguous_strides(m.sizes);
    }
  }
  // 16-bit floats: for the kernels that round per step (floor/trunc division); narrow integers: for clamp,
  // whose bounds are converted to the result's own type first (PyTorch's uint8 clamp(-20) bound is 236).
  const bool narrow_float = (op.has(kPointwise) || op.has(kInplace)) && !out_meta.empty() &&
                            (out_meta[0].dtype == DType::Float16 || out_meta[0].dtype == DType::BFloat16 ||
                             (is_integral(out_meta[0].dtype, false) && std::strncmp(op.name, "clamp", 5) == 0));
  Attrs narrowed;
  if (narrow_float) {
    narrowed = attrs;
    narrowed.set(kNarrowDTypeAttr, AttrValue{out_meta[0].dtype});
  }
  std::vector<Tensor> out = op.cpu(op, wide, narrow_float ? narrowed : attrs, wide_meta);
  if (op.has(kInplace)) {
    if (wide[0].impl() != inputs_in[0].impl()) copy_into(inputs_in[0], wide[0]);
    out[0] = inputs_in[0];
    inputs_in[0].bump_version();
    return out;
  }
  for (size_t i = 0; i < out.size() && i < out_meta.size(); ++i)
    if (out[i].dtype() != out_meta[i].dtype) out[i] = convert(out[i], out_meta[i].dtype);
  return out;
}
}  // namespace

DispatchInterceptor* current_interceptor() { return t_interceptor; }
ScopedInterceptor::ScopedInterceptor(DispatchInterceptor* i) : prev_(t_interceptor) { t_interceptor = i; }
ScopedInterceptor::~ScopedInterceptor() { t_interceptor = prev_; }
void set_autograd_hook(AutogradHook h) { g_autograd_hook = h; }
void set_cuda_kernel_hook(CudaKernelHook h) { g_cuda_hook = h; }
void set_host_copy_hook(HostCopyHook h) { g_host_copy_hook = h; }
void set_device_move_hook(DeviceMoveHook h) { g_device_move_hook = h; }
Tensor move_to_device(const Tensor& t, Device target) {
  if (t.device() == target) return t;
  TP_CHECK(g_device_move_hook, Error, "cannot move a tensor from ", t.device().str(), " to ", target.str(),
           ": no CUDA layer is loaded");
  return g_device_move_hook(t, target);
}
Tensor host_copy_of(const Tensor& t) {
  if (!t.defined() || t.device().kind == Device::Kind::CPU) return t;
  TP_CHECK(g_host_copy_hook, Error, "no host copy for a tensor on ", t.device().str());
  return g_host_copy_hook(t);
}
CudaKernelHook cuda_kernel_hook() { return g_cuda_hook; }

bool yields_python_number(const OpDef& op, const std::vector<Tensor>& inputs) {
  if (!op.has(kPointwise) || op.has(kInplace) || inputs.empty()) return false;
  bool any = false;
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    if (!t.is_wrapped_number()) return false;
    any = true;
  }
  return any;
}

void mark_python_numbers(std::vector<Tensor>& out) {
  for (Tensor& t : out)
    if (t.defined() && t.dim() == 0) t.impl()->wrapped_number = true;
}

namespace {
std::vector<Tensor> run_kernel_unmarked(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs);
}  // namespace

std::vector<Tensor> run_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  if (!yields_python_number(op, inputs)) return run_kernel_unmarked(op, inputs, attrs);
  PythonNumberArithmetic numbers;
  std::vector<Tensor> out = run_kernel_unmarked(op, inputs, attrs);
  mark_python_numbers(out);
  return out;
}

namespace {
std::vector<Tensor> run_kernel_unmarked(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  if (op.num_inputs >= 0 && static_cast<int>(inputs.size()) != op.num_inputs)
    throw TypeError(str(op.name, ": expected ", op.num_inputs, " tensor arguments but got ", inputs.size()));
  std::vector<TensorMeta> in_meta;
  in_meta.reserve(inputs.size());
  for (auto& t : inputs) {
    if (t.defined()) {
      in_meta.push_back(t.meta());
    } else {  // an absent optional argument; infer and the kernel decide if that is allowed
      TensorMeta m;
      m.defined = false;
      in_meta.push_back(m);
    }
  }
  std::vector<TensorMeta> out_meta = op.infer(op, in_meta, attrs);
  if (op.has(kDeviceMove)) return op.cpu(op, inputs, attrs, out_meta);  // its own routing
  // Device check (CUDA): any input on a GPU sends the op to the CUDA layer or fails.
  if (const Tensor* c = first_cuda_input(inputs)) {
    // copy_ into a host tensor from a CUDA one is a download: its output stays on the CPU.
    if (!(op.name == std::string("copy_") && inputs[0].device().kind == Device::Kind::CPU)) {
      check_same_device(op, inputs, *c);
      for (auto& m : out_meta) m.device = c->device();
    }
    std::vector<Tensor> out;
    if (!g_cuda_hook || !g_cuda_hook(op, inputs, attrs, out_meta, out))
      throw NotImplementedError(str(op.name, ": no kernel for device '", c->device().str(), "' with inputs (",
                                    describe_inputs(inputs), "); move the tensors to the CPU with .cpu()"));
    if (op.has(kInplace)) inputs[0].bump_version();
    return out;
  }
  TP_CHECK(op.cpu, Error, op.name, ": no CPU kernel for inputs (", describe_inputs(inputs), ")");
  if (!op.has(kAllDTypes) && !op.has(kView) && (!all_compute_dtypes(in_meta) || !all_compute_dtypes(out_meta)))
    return run_in_compute_dtypes(op, inputs, in_meta, attrs, out_meta);
  std::vector<Tensor> out = op.cpu(op, inputs, attrs, out_meta);
  if (op.has(kInplace)) inputs[0].bump_version();
  return out;
}
}  // namespace

namespace {
std::vector<Tensor> call_op_unprofiled(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs);
}  // namespace

std::vector<Tensor> call_op(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  // tp.profiler: one range per call the program makes (a capture's tracing is
  // not a run: its calls are part of the compiled function's range).
  if (profiler::active() && !t_interceptor) [[unlikely]] {
    profiler::Range range("op", op.name);
    range.set_inputs(inputs);
    return call_op_unprofiled(op, inputs, attrs);
  }
  return call_op_unprofiled(op, inputs, attrs);
}

namespace {
std::vector<Tensor> call_op_unprofiled(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  // tp.autocast: before everything else, so the casts are ordinary `to` calls the
  // tracer and autograd below record. The op's own table is read first: an op
  // without a policy (most) costs no thread-local read.
  if ((op.autocast[0] | op.autocast[1]) != 0 && autocast_active()) {
    bool handled = false;
    std::vector<Tensor> r = autocast_call(op, inputs, attrs, &handled);
    if (handled) return r;
  }
  // Implicit composites run as their parts, each through this dispatcher.
  if (op.is_implicit_composite()) {
    if (t_composite) return op.decompose(inputs, attrs);
    struct Scope {
      explicit Scope(const char* name) { t_composite = name; }
      ~Scope() { t_composite = nullptr; }
    } scope(op.name);
    return op.decompose(inputs, attrs);
  }
  if (t_interceptor) return t_interceptor->intercept(op, inputs, attrs);
  if (g_autograd_hook) return g_autograd_hook(op, inputs, attrs);
  return run_kernel(op, inputs, attrs);
}
}  // namespace

const char* current_composite() { return t_composite; }

Tensor call_op1(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  return call_op(op, inputs, attrs)[0];
}

}  // namespace tp
