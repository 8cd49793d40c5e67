// Module-level functions: factories, NumPy import, operators, runtime settings (autograd: autograd_bind.cpp).
#include <nanobind/ndarray.h>

#include "autograd/engine.h"
#include "common.h"
#include "core/parallel.h"
#include "ops/blas.h"
#include "ops/ops.h"
#include "ops/type_promotion.h"

namespace tp::py {

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

std::shared_ptr<nb::object> keep_py(nb::object o) {
  return std::shared_ptr<nb::object>(new nb::object(std::move(o)), [](nb::object* p) {
    if (!Py_IsInitialized() || interpreter_finalizing()) {
      p->release();  // leak the reference: the interpreter is gone
    } else {
      nb::gil_scoped_acquire gil;
      delete p;
      return;
    }
    delete p;
  });
}

namespace {

Tensor from_numpy(nb::ndarray<nb::numpy, nb::device::cpu> a) {
  auto mapped = from_dlpack_dtype(a.dtype());
  TP_CHECK(mapped, TypeError, "from_numpy: unsupported NumPy dtype (code ", int(a.dtype().code), ", ",
           int(a.dtype().bits), " bits); supported: bool, uint8, int8, int16, int32, int64, float16, float32, float64");
  const DType dt = *mapped;
  Shape sizes, strides;
  int64_t span = 1;
  for (size_t i = 0; i < a.ndim(); ++i) {
    sizes.push_back(static_cast<int64_t>(a.shape(i)));
    int64_t st = a.stride(i);  // in elements
    TP_CHECK(st >= 0, ValueError,
             "from_numpy: arrays with negative strides are not supported; make a copy with numpy.ascontiguousarray");
    strides.push_back(st);
    if (a.shape(i) == 0) span = 0;
    else if (span) span += (static_cast<int64_t>(a.shape(i)) - 1) * st;
  }
  // The storage holds a reference to the array; releasing it needs the GIL
  // because the last tensor may die on any thread.
  nb::object owner = nb::cast(a);
  PyObject* ref = owner.release().ptr();
  auto storage = StorageImpl::wrap(a.data(), static_cast<size_t>(span) * itemsize(dt), [ref] {
    // A tensor outliving the interpreter (held by a C++ static) must not touch it.
    if (!Py_IsInitialized() || interpreter_finalizing()) return;
    nb::gil_scoped_acquire gil;
    Py_DECREF(ref);
  });
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->sizes = sizes;
  impl->strides = strides;
  impl->dtype = dt;
  return Tensor(std::move(impl));
}

DType dtype_or(nb::handle h, DType fallback) { return to_dtype(h).value_or(fallback); }

Tensor with_grad(Tensor t, bool requires_grad) {
  if (requires_grad) autograd::set_requires_grad(t, true);
  return t;
}

}  // namespace

void bind_functions(nb::module_& m) {
  m.def("from_numpy", &from_numpy, nb::arg("array"));
  // ---- factories ----
  m.def("empty", [](nb::args a, nb::handle dtype, bool rg) {
        return with_grad(ops::empty(shape_from_args(a, "empty"), dtype_or(dtype, DType::Float32)), rg);
      }, nb::arg("size"), nb::kw_only(), nb::arg("dtype") = nb::none(), nb::arg("requires_grad") = false);
  m.def("zeros", [](nb::args a, nb::handle dtype, bool rg) {
        return with_grad(ops::zeros(shape_from_args(a, "zeros"), dtype_or(dtype, DType::Float32)), rg);
      }, nb::arg("size"), nb::kw_only(), nb::arg("dtype") = nb::none(), nb::arg("requires_grad") = false);
  m.def("ones", [](nb::args a, nb::handle dtype, bool rg) {
        return with_grad(ops::ones(shape_from_args(a, "ones"), dtype_or(dtype, DType::Float32)), rg);
      }, nb::arg("size"), nb::kw_only(), nb::arg("dtype") = nb::none(), nb::arg("requires_grad") = false);
  m.def("randn", [](nb::args a, nb::handle dtype, bool rg) {
        return with_grad(ops::randn(shape_from_args(a, "randn"), dtype_or(dtype, DType::Float32)), rg);
      }, nb::arg("size"), nb::kw_only(), nb::arg("dtype") = nb::none(), nb::arg("requires_grad") = false);
  m.def("rand", [](nb::args a, nb::handle dtype, bool rg) {
        return with_grad(ops::rand(shape_from_args(a, "rand"), dtype_or(dtype, DType::Float32)), rg);
      }, nb::arg("size"), nb::kw_only(), nb::arg("dtype") = nb::none(), nb::arg("requires_grad") = false);
  m.def("full", [](nb::handle size, nb::handle value, nb::handle dtype, bool rg) {
        Shape s;
        if (PyLong_Check(size.ptr())) s.push_back(nb::cast<int64_t>(size));
        else for (nb::handle x : size) s.push_back(nb::cast<int64_t>(x));
        auto v = to_scalar(value);
        TP_CHECK(v, TypeError, "full: fill_value must be a number, got ", nb::inst_name(value).c_str());
        return with_grad(ops::full(s, *v, to_dtype(dtype)), rg);
      }, nb::arg("size"), nb::arg("fill_value"), nb::kw_only(), nb::arg("dtype") = nb::none(),
      nb::arg("requires_grad") = false);
  m.def("arange", [](nb::handle start, nb::handle end, nb::handle step, nb::handle dtype, bool rg) {
        auto a = to_scalar(start);
        TP_CHECK(a, TypeError, "arange: start must be a number");
        std::optional<Scalar> b = end.is_none() ? std::nullopt : to_scalar(end);
        auto st = to_scalar(step);
        TP_CHECK(st, TypeError, "arange: step must be a number");
        Scalar lo = b ? *a : Scalar(int64_t(0)), hi = b ? *b : *a;
        return with_grad(ops::arange(lo, hi, *st, to_dtype(dtype)), rg);
      }, nb::arg("start"), nb::arg("end") = nb::none(), nb::arg("step") = 1, nb::kw_only(),
      nb::arg("dtype") = nb::none(), nb::arg("requires_grad") = false);
  m.def("manual_seed", [](uint64_t s) { ops::manual_seed(s); });
  // ---- operators as functions ----
  auto bin = [&](const char* name, Tensor (*fn)(const Tensor&, const Tensor&)) {
    m.def(name, [fn, name](nb::handle a, nb::handle b) { return fn(require_operand(a, name), require_operand(b, name)); });
  };
  bin("add", ops::add); bin("sub", ops::sub); bin("mul", ops::mul); bin("div", ops::div);
  bin("maximum", ops::maximum); bin("minimum", ops::minimum); bin("matmul", ops::matmul);
  bin("eq", ops::eq); bin("ne", ops::ne); bin("lt", ops::lt); bin("le", ops::le); bin("gt", ops::gt); bin("ge", ops::ge);
  m.def("neg", &ops::neg); m.def("relu", &ops::relu); m.def("abs", &ops::abs); m.def("exp", &ops::exp);
  m.def("log", &ops::log); m.def("sqrt", &ops::sqrt); m.def("tanh", &ops::tanh); m.def("sigmoid", &ops::sigmoid);
  m.def("where", [](nb::handle c, nb::handle a, nb::handle b) {
    return ops::where(require_operand(c, "where"), require_operand(a, "where"), require_operand(b, "where"));
  });
  m.def("sum", [](const Tensor& t, nb::handle dim, bool keepdim) { return ops::sum(t, dims_from(dim), keepdim); },
        nb::arg("input"), nb::arg("dim") = nb::none(), nb::arg("keepdim") = false);
  m.def("amax", [](const Tensor& t, nb::handle dim, bool keepdim) { return ops::amax(t, dims_from(dim), keepdim); },
        nb::arg("input"), nb::arg("dim") = nb::none(), nb::arg("keepdim") = false);
  m.def("mean", [](const Tensor& t, nb::handle dim, bool keepdim) { return ops::mean(t, dims_from(dim), keepdim); },
        nb::arg("input"), nb::arg("dim") = nb::none(), nb::arg("keepdim") = false);
  m.def("transpose", &ops::transpose);
  m.def("reshape", [](const Tensor& t, nb::handle shape) {
    Shape s;
    for (nb::handle x : shape) s.push_back(nb::cast<int64_t>(x));
    return ops::reshape(t, s);
  });
  // ---- dtypes ----
  m.def("promote_types", &promote_types, nb::arg("type1"), nb::arg("type2"));
  m.def("can_cast", &can_cast, nb::arg("from_"), nb::arg("to"));
  m.def("result_type", [](nb::handle a, nb::handle b) {
        return result_type(std::vector<Tensor>{require_operand(a, "result_type"), require_operand(b, "result_type")});
      }, nb::arg("tensor1"), nb::arg("tensor2"));
  m.def("get_default_dtype", &default_float_dtype);
  m.def("set_default_dtype", &set_default_float_dtype, nb::arg("d"));
  // ---- runtime ----
  m.def("set_num_threads", &set_num_threads);
  m.def("get_num_threads", &num_threads);
  m.def("_set_blas_library", &set_blas_library);
}

}  // namespace tp::py
