// The dispatcher: the single entry point through which every operator call
// passes. Two layers above hook into it without ops depending on them:
//   - an interceptor (thread-local): the tracer of the graph layer records each
//     call into a Graph (Section 3: capture at dispatcher level, so C++ and
//     Python callers are captured by the same code);
//   - the autograd recorder: attaches a backward Node to results that need grad.
#pragma once
#include <vector>

#include "ops/registry.h"

namespace tp {

std::vector<Tensor> call_op(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs = {});
Tensor call_op1(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs = {});

// Runs the eager kernel only: no interceptor, no autograd (used by the tracer
// and by autograd itself).
std::vector<Tensor> run_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs);
// Arithmetic among Python numbers only (every tensor operand a wrapped number:
// a float or int argument or attribute lifted to a graph input, and results
// computed from them, `1 - t`, `t > 0.5`): the result is a Python number too, as
// in eager where Python computes it, so a pointwise operator's 0-d results are
// wrapped numbers computed at full width (float64 / int64: result_type), not
// rounded to the default float dtype; run_kernel marks them.
bool yields_python_number(const OpDef& op, const std::vector<Tensor>& inputs);
void mark_python_numbers(std::vector<Tensor>& out);

class DispatchInterceptor {
 public:
  virtual ~DispatchInterceptor() = default;
  virtual std::vector<Tensor> intercept(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs) = 0;
};
DispatchInterceptor* current_interceptor();
class ScopedInterceptor {  // installs (or, with nullptr, suspends) the interceptor of this thread
 public:
  explicit ScopedInterceptor(DispatchInterceptor* i);
  ~ScopedInterceptor();
  ScopedInterceptor(const ScopedInterceptor&) = delete;
  ScopedInterceptor& operator=(const ScopedInterceptor&) = delete;
 private:
  DispatchInterceptor* prev_;
};

// The autograd layer wraps every eager kernel call (it decides from grad mode and
// requires_grad whether to record, and must see in-place inputs before the kernel
// overwrites them).
using AutogradHook = std::vector<Tensor> (*)(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs);
void set_autograd_hook(AutogradHook h);

// When the dispatcher runs a pointwise or in-place kernel in float32 for a
// float16/bfloat16 result, it adds this attribute (the result's DType) to the
// kernel's attrs: a kernel whose PyTorch counterpart rounds to the 16-bit type
// after every step (floor / trunc division of two tensors) reads it; the
// others ignore it.
inline constexpr char kNarrowDTypeAttr[] = "_narrow_dtype";

// The CUDA layer (csrc/cuda, above ops) runs operators whose inputs live on a
// CUDA device. It returns false when it has no kernel for the op / dtypes; the
// dispatcher then raises NotImplementedError naming the op and device. A CPU
// kernel never sees a CUDA tensor: it would read device memory as host memory.
using CudaKernelHook = bool (*)(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                                const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);
void set_cuda_kernel_hook(CudaKernelHook h);
// A host copy of a device tensor (the CUDA layer installs it), for the few
// composites that must read a value to decide, as PyTorch's do with a sync
// (unravel_index's range check). A CPU tensor comes back as it is.
using HostCopyHook = Tensor (*)(const Tensor& t);
void set_host_copy_hook(HostCopyHook h);
Tensor host_copy_of(const Tensor& t);
CudaKernelHook cuda_kernel_hook();  // the installed one (tests swap it and put it back)
// A copy of a tensor on another device (the CUDA layer installs it): the
// kernel of `_to_device`, the graph's form of Tensor.to(device) / .cuda() / .cpu().
using DeviceMoveHook = Tensor (*)(const Tensor& t, Device target);
void set_device_move_hook(DeviceMoveHook h);
Tensor move_to_device(const Tensor& t, Device target);
// The recorded form (operator `_to_device`, ops/device_move_ops.cpp): traced by
// a capture, differentiated by autograd (the gradient moves back).
Tensor to_device(const Tensor& t, Device target);

}  // namespace tp
