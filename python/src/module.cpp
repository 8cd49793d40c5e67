// tensorplay._C: the binding. Everything here converts between Python and the
// C++ layers; no decision about tensors or compilation is taken here.
#include <Python.h>

#include "autograd/engine.h"
#include "common.h"
#include "core/warning.h"
#include "graph/tracer.h"

namespace tp::py {
namespace {

PyObject* g_capture_error = nullptr;
PyObject* g_linalg_error = nullptr;
PyObject* g_backend_error = nullptr;
PyObject* g_value_error = nullptr;
PyObject* g_type_error = nullptr;

// PyTorch reports a bad shape or a bad dtype inside an operator as a
// RuntimeError, where Python's conventions (and our C++ classes) say
// ValueError / TypeError. The Python classes derive from both, so user code
// written for either (`except RuntimeError:` ported from PyTorch, or
// `except ValueError:`) catches them.
PyObject* dual_exception(const char* name, PyObject* base, const char* doc) {
  PyObject* bases = PyTuple_Pack(2, base, PyExc_RuntimeError);
  PyObject* cls = PyErr_NewExceptionWithDoc(name, doc, bases, nullptr);
  Py_DECREF(bases);
  return cls;
}

void python_warning(const std::string& msg) {
  // Called from C++ code that holds the GIL (compilation runs on the caller's thread).
  // A filter that turns the warning into an error (warnings.simplefilter("error"),
  // python -W error, pytest's filterwarnings = error) makes PyErr_WarnEx fail
  // with the exception set: it is raised, as for a warning from Python code.
  // Clearing it instead dropped the warning silently, so a fallback to eager
  // (or a nondeterministic kernel under warn_only) passed unnoticed exactly
  // where the user had asked for it to stop the program.
  if (PyErr_WarnEx(PyExc_UserWarning, msg.c_str(), 1) < 0) throw nb::python_error();
}

}  // namespace

nb::dlpack::dtype to_dlpack_dtype(DType t) {
  using nb::dlpack::dtype_code;
  auto make = [](dtype_code c, int bits) {
    return nb::dlpack::dtype{static_cast<uint8_t>(c), static_cast<uint8_t>(bits), 1};
  };
  switch (t) {
    case DType::Bool: return make(dtype_code::Bool, 8);
    case DType::UInt8: return make(dtype_code::UInt, 8);
    case DType::Int8: return make(dtype_code::Int, 8);
    case DType::Int16: return make(dtype_code::Int, 16);
    case DType::Int32: return make(dtype_code::Int, 32);
    case DType::Int64: return make(dtype_code::Int, 64);
    case DType::Float16: return make(dtype_code::Float, 16);
    case DType::BFloat16: return make(dtype_code::Bfloat, 16);
    case DType::Float32: return make(dtype_code::Float, 32);
    case DType::Float64: return make(dtype_code::Float, 64);
  }
  return make(dtype_code::Float, 32);
}

std::optional<DType> from_dlpack_dtype(nb::dlpack::dtype d) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType t = static_cast<DType>(i);
    if (to_dlpack_dtype(t) == d) return t;
  }
  // NumPy reports bool as an 8-bit unsigned "bool" code; both spellings map to bool.
  if (d.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Bool)) return DType::Bool;
  return std::nullopt;
}

std::optional<Scalar> to_scalar(nb::handle h) {
  PyObject* o = h.ptr();
  if (PyBool_Check(o)) return Scalar(o == Py_True);
  if (PyLong_Check(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow) throw ValueError("integer value out of range for int64");
    return Scalar(static_cast<int64_t>(v));
  }
  if (PyFloat_Check(o)) return Scalar(PyFloat_AS_DOUBLE(o));
  // A symbolic size used as a number (`x * x.shape[0]`): its value, specialized.
  if (is_symint(h)) return Scalar(symint_specialize(h));
  // NumPy scalars (np.float32(2), np.int64(3)) behave like Python numbers.
  if (PyObject_HasAttrString(o, "dtype") && PyObject_HasAttrString(o, "item") && !nb::isinstance<Tensor>(h)) {
    nb::object shape = nb::getattr(h, "shape", nb::none());
    if (!shape.is_none() && nb::len(shape) == 0) return to_scalar(h.attr("item")());
  }
  return std::nullopt;
}

std::optional<Tensor> to_operand(nb::handle h) {
  if (nb::isinstance<Tensor>(h)) return nb::cast<Tensor>(h);
  if (auto v = symint_value_tensor(h)) return v;  // an int argument made symbolic: its value input
  if (auto s = to_scalar(h)) return Tensor::wrapped_scalar(*s);
  return std::nullopt;
}

Tensor require_operand(nb::handle h, const char* op) {
  if (auto t = to_operand(h)) return *t;
  throw TypeError(str(op, ": expected a Tensor or a number but got ", nb::inst_name(h).c_str()));
}

nb::object scalar_to_py(const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool: return nb::bool_(s.to_bool());
    case Scalar::Kind::Int: return nb::int_(s.to_int());
    case Scalar::Kind::Float: return nb::float_(s.to_double());
  }
  return nb::none();
}

Shape shape_from_args(const nb::args& args, const char* op) {
  Shape s;
  nb::handle src = args;
  if (args.size() == 1 && !PyLong_Check(args[0].ptr())) src = args[0];
  for (nb::handle x : src) {
    TP_CHECK(PyLong_Check(x.ptr()), TypeError, op, ": size must be a sequence of ints, got ",
             nb::inst_name(x).c_str());
    int64_t v = nb::cast<int64_t>(x);
    TP_CHECK(v >= -1, ValueError, op, ": invalid size ", v);
    s.push_back(v);
  }
  return s;
}

std::optional<DType> to_dtype(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  if (nb::isinstance<DType>(h)) return nb::cast<DType>(h);
  throw TypeError(str("expected a tensorplay dtype but got ", nb::inst_name(h).c_str()));
}

std::vector<int64_t> dims_from(nb::handle h) {
  if (h.is_none()) return {};
  if (PyLong_Check(h.ptr())) return {nb::cast<int64_t>(h)};
  std::vector<int64_t> d;
  for (nb::handle x : h) d.push_back(nb::cast<int64_t>(x));
  TP_CHECK(!d.empty(), ValueError, "dim must not be an empty sequence");
  return d;
}

}  // namespace tp::py

using namespace tp;
using namespace tp::py;

namespace tp::py { void bind_forward_ad(nb::module_& m); }  // forward_ad_bind.cpp
namespace tp::py { void bind_inplace_views(nb::module_& m); }  // inplace_view_bind.cpp
namespace tp::py { void bind_profiler(nb::module_& m); }  // profiler_bind.cpp
namespace tp::py { void bind_saved_hooks(nb::module_& m); }  // saved_hooks_bind.cpp

NB_MODULE(_C, m) {
  // Compiled functions hold Python callables that the interpreter may not
  // collect at exit; that is not a leak worth a message on every shutdown.
  nb::set_leak_warnings(false);
  autograd::install();
  set_warning_handler(&python_warning);
  // Names the user's line in a gate the tracer records itself (a data-dependent size).
  graph::set_source_line_provider(+[]() { return PyGILState_Check() ? python_source_line() : std::string(); });

  nb::object runtime_error = nb::borrow(PyExc_RuntimeError);
  g_capture_error = PyErr_NewExceptionWithDoc("tensorplay.compiler.CaptureError",
                                              "A function could not be captured into a graph (Section 11.3).",
                                              PyExc_RuntimeError, nullptr);
  g_backend_error = PyErr_NewExceptionWithDoc("tensorplay.compiler.BackendError",
                                              "Stax could not generate code for a region (raised under strict_native).",
                                              PyExc_RuntimeError, nullptr);
  g_linalg_error = PyErr_NewExceptionWithDoc("tensorplay.linalg.LinAlgError",
                                             "A matrix could not be factored (singular, not positive-definite, ...).",
                                             PyExc_RuntimeError, nullptr);
  g_value_error = dual_exception("tensorplay._C.TensorValueError", PyExc_ValueError,
                                 "A bad shape or argument value (a ValueError and, as in PyTorch, a RuntimeError).");
  g_type_error = dual_exception("tensorplay._C.TensorTypeError", PyExc_TypeError,
                                "A bad dtype or argument kind (a TypeError and, as in PyTorch, a RuntimeError).");
  m.attr("TensorValueError") = nb::handle(g_value_error);
  m.attr("TensorTypeError") = nb::handle(g_type_error);
  m.attr("LinAlgError") = nb::handle(g_linalg_error);
  m.attr("CaptureError") = nb::handle(g_capture_error);
  m.attr("BackendError") = nb::handle(g_backend_error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const CaptureError& e) {
      PyErr_SetString(g_capture_error, e.what());
    } catch (const BackendError& e) {
      PyErr_SetString(g_backend_error, e.what());
    } catch (const tp::LinAlgError& e) {
      PyErr_SetString(g_linalg_error, e.what());
    } catch (const tp::TypeError& e) {
      PyErr_SetString(g_type_error, e.what());
    } catch (const tp::ValueError& e) {
      PyErr_SetString(g_value_error, e.what());
    } catch (const tp::NotImplementedError& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what());
    } catch (const tp::IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what());
    } catch (const tp::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  nb::enum_<DType>(m, "dtype")
      .value("bool", DType::Bool)
      .value("uint8", DType::UInt8)
      .value("int8", DType::Int8)
      .value("int16", DType::Int16)
      .value("int32", DType::Int32)
      .value("int64", DType::Int64)
      .value("float16", DType::Float16)
      .value("bfloat16", DType::BFloat16)
      .value("float32", DType::Float32)
      .value("float64", DType::Float64)
      .def_prop_ro("is_signed", [](DType d) { return d != DType::Bool && d != DType::UInt8; })
      .def_prop_ro("itemsize", [](DType d) { return itemsize(d); })
      .def_prop_ro("is_floating_point", [](DType d) { return is_floating(d); })
      .def("__repr__", [](DType d) { return std::string("tensorplay.") + dtype_name(d); })
      .def("__str__", [](DType d) { return std::string("tensorplay.") + dtype_name(d); });

  bind_device(m);
  bind_memory_format(m);
  bind_tensor(m);
  bind_symint(m);
  bind_functions(m);
  bind_generator(m);  // after bind_functions: its manual_seed returns the default generator
  bind_compile(m);
  // Last: generated bindings replace hand-written ones of the same name.
  bind_generated_ops(m);
  // Indexing and the shape methods whose Python forms no schema describes (varargs, view(dtype)).
  bind_indexing(m);
  // Autograd members of Tensor (detach, grad, ...) are not plain operators: they win.
  bind_autograd(m);
  bind_dlpack(m);
  bind_forward_ad(m);
  bind_inplace_views(m);
  bind_profiler(m);
  bind_saved_hooks(m);
  bind_cuda(m);
}
