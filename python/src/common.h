// Shared helpers of the nanobind module: converting Python values to tensors
// and numbers, and building shapes from *args.
#pragma once
#include <nanobind/nanobind.h>

#include <memory>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "core/tensor.h"

namespace nb = nanobind;

namespace tp::py {

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

void bind_tensor(nb::module_& m);
void bind_functions(nb::module_& m);
void bind_compile(nb::module_& m);

}  // namespace tp::py
