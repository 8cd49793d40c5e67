// Shared helpers of the nanobind module: converting Python values to tensors
// and numbers, and building shapes from *args.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <memory>
#include <string_view>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "core/named_message.h"
#include "core/tensor.h"
#include "graph/sym_shape.h"

namespace nb = nanobind;

namespace tp::py {

// symint.cpp (dynamic shapes): tp.SymInt, a size of a traced tensor that is a
// symbol expression while a symbolic capture runs.
bool is_symint(nb::handle h);
// Its expression and hint, without a guard (an operator argument that records it).
graph::SymDim symint_expr(nb::handle h);
int64_t symint_hint(nb::handle h);
// Taken as a plain int: records `expr == hint` and returns the hint.
int64_t symint_specialize(nb::handle h);
// A size for Python: a SymInt when e has symbols, else a plain int.
nb::object make_size(const graph::SymDim& e, int64_t hint);
// Automatic dynamic ints: during a capture, the int argument carried by the
// size symbol `size` (= value + 2) has its value in the 0-d tensor input `value`
// (registered by the compiled function's capture, cleared after it).
// symint_value_tensor gives the tensor of a SymInt that is an affine function of
// one such value (`pos`, `pos + 1`, `2 * pos`), computed in the graph; nullopt
// for any other SymInt or object.
void push_int_value(const graph::SymDim& size, const Tensor& value);
void clear_int_values();
std::optional<Tensor> symint_value_tensor(nb::handle h);

// A Python bool/int/float (or NumPy scalar) as a Scalar; nullopt for anything else.
std::optional<Scalar> to_scalar(nb::handle h);
// A tensor operand: a Tensor, or a Python number wrapped as a 0-d tensor.
// nullopt for unsupported types (so dunders can return NotImplemented).
std::optional<Tensor> to_operand(nb::handle h);
Tensor require_operand(nb::handle h, const char* op);
nb::object scalar_to_py(const Scalar& s);
// sizes from f(2, 3), f((2, 3)) or f([2, 3])
Shape shape_from_args(const nb::args& args, const char* op);
std::optional<DType> to_dtype(nb::handle h);  // None -> nullopt
std::vector<int64_t> dims_from(nb::handle h);  // None -> {}, int -> {d}, sequence -> dims

// A Python object held by C++ state that may outlive the interpreter (static
// registries, caches): released with the GIL, or deliberately leaked when the
// interpreter is already finalizing.
std::shared_ptr<nb::object> keep_py(nb::object o);
bool interpreter_finalizing();

// `result` was made from the Python tensor `src` by a view operator: remember
// src as the Python object of result._base when src is that base (so that
// `x.view(...)._base is x`, as in PyTorch). No-op for anything else.
void note_base_object(nb::handle src, const Tensor& result);

// requires_grad set to `v` on `t` inside a capture where that changes it: a
// CaptureError (autograd_bind.cpp says why). No-op outside a capture.
void refuse_requires_grad_change(const Tensor& t, bool v);

// A capture refused a training-step call (backward(), autograd.grad, setting
// .grad, optimizer.zero_grad() or step()): noted so that the compiled call that
// started the capture can run the function step-wise instead of raising
// (compiler's _stepwise.py; compile.cpp). take_step_refusal() reads and clears it.
void note_step_refusal();
bool take_step_refusal();

// A floating `t.item()` during a capture returns a 0-d tensor of the graph
// (tensor.cpp); a compiled function that returns that tensor as it is gives the
// caller a Python float, as eager does (compile.cpp, PyOutputStructure).
void note_capture_item(const Tensor& t);
bool is_capture_item(const Tensor& t);

// DType <-> DLPack dtype codes (NumPy interop and DLPack share them).
nb::dlpack::dtype to_dlpack_dtype(DType t);
std::optional<DType> from_dlpack_dtype(nb::dlpack::dtype d);  // nullopt: no TensorPlay dtype

// tp.device (device.cpp). index -1: none given ("cpu" rather than "cpu:0").
struct PyDevice {
  std::string type = "cpu";
  int index = -1;
  std::string str() const;
};
PyDevice to_device(nb::handle h);  // a str, tp.device, torch.device or accelerator ordinal
bool is_device_arg(nb::handle h);  // None or a value to_device reads without looking inside
// Accepts None and any CPU device; raises RuntimeError naming `op` for every other device.
void check_device(nb::handle h, std::string_view op);
nb::object cpu_device();  // the tp.device('cpu') that Tensor.device returns
// Where a `device=` argument puts a result: nullopt for None and the CPU, the
// CUDA ordinal for "cuda"/"cuda:N" (the current device when no index is given)
// when a GPU exists; every other device, and CUDA without a GPU, raises the
// check_device error naming `op`.
std::optional<int> cuda_target(nb::handle h, std::string_view op);
// The Tensor.device object of `t` (cuda.cpp).
nb::object device_of(const Tensor& t);
// `t` on the CPU: itself, or a copy of a CUDA tensor (cuda.cpp).
Tensor host_copy(const Tensor& t);
// `t` on `target` (nullopt: the CPU), a copy only when it moves (cuda.cpp).
Tensor move_to(const Tensor& t, std::optional<int> target, bool non_blocking = false);
// The same for the user's moves (Tensor.to/.cuda/.cpu, `what` names it): recorded
// for autograd (ToCopyBackward0), refused in a capture when the value comes from
// the call (cuda.cpp).
Tensor move_recorded(const Tensor& t, std::optional<int> target, bool non_blocking, const char* what);
void bind_cuda(nb::module_& m);  // cuda.cpp: tensorplay._C._cuda

// tp.contiguous_format / preserve_format / channels_last / channels_last_3d (memory_format.cpp).
enum class MemoryFormat : uint8_t { Contiguous, Preserve, ChannelsLast, ChannelsLast3d };
// `t` laid out as `f` asks (a copy when it is not already): contiguous, or
// channels-last strides over an unchanged logical shape. Preserve keeps `t`.
Tensor apply_memory_format(const Tensor& t, MemoryFormat f, std::string_view op);
bool is_contiguous_as(const Tensor& t, MemoryFormat f);
std::optional<MemoryFormat> to_memory_format(nb::handle h, std::string_view op);  // None -> nullopt

// An error from an operator's parts ("mul: shapes ...") re-raised naming the
// function the user called: "multiply: shapes ... (in mul)" (tp::named_message).
[[noreturn]] void rethrow_named(const std::string& called);  // call inside a catch block
template <class F>
auto with_op_name(const std::string& called, F&& f) {
  try {
    return f();
  } catch (const Error&) {
    rethrow_named(called);
  }
}

void bind_tensor(nb::module_& m);
void bind_functions(nb::module_& m);
void bind_compile(nb::module_& m);
void bind_autograd(nb::module_& m);  // autograd_bind.cpp (after bind_tensor: adds Tensor members)
void bind_dlpack(nb::module_& m);     // dlpack.cpp
void bind_symint(nb::module_& m);     // symint.cpp: tp.SymInt
void bind_generated_ops(nb::module_& m);  // op_binding.cpp: tp.<op> / Tensor.<op> from schemas
void bind_generator(nb::module_& m);  // generator_bind.cpp: tp.Generator, manual_seed, default_generator
void bind_indexing(nb::module_& m);   // indexing.cpp: __getitem__/__setitem__, varargs shape methods
void bind_device(nb::module_& m);     // device.cpp: tp.device
void bind_memory_format(nb::module_& m);  // memory_format.cpp: tp.contiguous_format, ...

// tensor.cpp: "file.py:12" of the user's code running now, and a data gate
// (Section 3): reading tensor `t`'s value as a Python number during a capture
// records it (its value joins the program's key), otherwise it just reads it.
std::string python_source_line();
Scalar gate(const Tensor& t, const char* kind);

}  // namespace tp::py
