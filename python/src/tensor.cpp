// The Tensor class: properties, operators, methods, NumPy interop, indexing.
#include <nanobind/ndarray.h>

#include "autograd/engine.h"
#include "common.h"
#include "graph/tracer.h"
#include "ops/ops.h"

namespace tp::py {
namespace {

using ops::Dims;

nb::object binary(nb::handle a, nb::handle b, Tensor (*fn)(const Tensor&, const Tensor&)) {
  auto x = to_operand(a), y = to_operand(b);
  if (!x || !y) return nb::borrow(Py_NotImplemented);
  return nb::cast(fn(*x, *y));
}

nb::object inplace(nb::handle self, nb::handle other, Tensor& (*fn)(Tensor&, const Tensor&), const char* name) {
  Tensor& t = nb::cast<Tensor&>(self);
  fn(t, require_operand(other, name));
  return nb::borrow(self);
}

// Tensor.to: picks the dtype out of PyTorch's argument forms; the only device is the CPU.
nb::object to_any(nb::handle self, const nb::args& args, const nb::kwargs& kwargs) {
  const Tensor& t = nb::cast<const Tensor&>(self);
  std::optional<DType> dtype;
  bool copy = false;
  auto take = [&](nb::handle h) {
    if (nb::isinstance<DType>(h)) {
      dtype = nb::cast<DType>(h);
    } else if (nb::isinstance<Tensor>(h)) {
      dtype = nb::cast<const Tensor&>(h).dtype();
    } else if (PyUnicode_Check(h.ptr()) || nb::hasattr(h, "type")) {
      std::string dev = nb::cast<std::string>(nb::str(h));
      TP_CHECK(dev == "cpu", ValueError, "to: only the 'cpu' device exists (got '", dev, "')");
    } else if (!h.is_none()) {
      throw TypeError(str("to() received an invalid argument of type ", nb::inst_name(h).c_str(),
                          "; expected a dtype, a device or a Tensor"));
    }
  };
  for (nb::handle a : args) take(a);
  for (auto [k, v] : kwargs) {
    const std::string key = nb::cast<std::string>(k);
    if (key == "dtype" || key == "device" || key == "other") take(v);
    else if (key == "copy") copy = nb::cast<bool>(v);
    else if (key == "non_blocking" || key == "memory_format") continue;
    else throw TypeError(str("to() got an unexpected keyword argument '", key, "'"));
  }
  const DType d = dtype.value_or(t.dtype());
  if (d == t.dtype() && !copy) return nb::borrow(self);  // PyTorch returns self itself
  return nb::cast(d == t.dtype() ? ops::clone(t) : ops::to_dtype(t, d));
}

void refuse_while_tracing(const char* what) {
  if (graph::is_tracing())
    throw CaptureError(str("cannot capture ", what,
                           ": it reads tensor data during tracing (data-dependent control flow is not supported yet)"));
}

nb::object to_numpy(const Tensor& t) {
  refuse_while_tracing("Tensor.numpy()");
  TP_CHECK(!t.requires_grad(), Error,
           "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.");
  std::vector<size_t> shape(t.sizes().begin(), t.sizes().end());
  std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
  // The capsule owns a Tensor handle: the array keeps the storage alive.
  auto* keep = new Tensor(t);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  TP_CHECK(t.dtype() != DType::BFloat16, TypeError,
           "numpy(): NumPy has no bfloat16 dtype; convert first, e.g. t.float().numpy()");
  const nb::dlpack::dtype dt = to_dlpack_dtype(t.dtype());
  nb::ndarray<nb::numpy> arr(t.data(), shape.size(), shape.data(), owner, strides.data(), dt);
  return nb::cast(arr, nb::rv_policy::reference);
}

}  // namespace

void bind_tensor(nb::module_& m) {
  nb::class_<Tensor> cls(m, "Tensor");
  // Tensor(other) shares other's TensorImpl; it exists so that Python subclasses
  // (nn.Parameter) can initialize their C++ part from an existing tensor.
  cls.def(nb::init<const Tensor&>(), nb::arg("other"))
      .def_prop_ro("shape", [](const Tensor& t) { return nb::tuple(nb::cast(t.sizes())); })
      .def("size", [](const Tensor& t, std::optional<int64_t> d) -> nb::object {
            if (d) return nb::cast(t.size(*d));
            return nb::tuple(nb::cast(t.sizes()));
          }, nb::arg("dim") = nb::none())
      .def("stride", [](const Tensor& t, std::optional<int64_t> d) -> nb::object {
            if (d) return nb::cast(t.strides()[wrap_dim(*d, t.dim(), "stride")]);
            return nb::tuple(nb::cast(t.strides()));
          }, nb::arg("dim") = nb::none())
      .def_prop_ro("dtype", &Tensor::dtype)
      .def_prop_ro("ndim", &Tensor::dim)
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("__len__", [](const Tensor& t) {
        TP_CHECK(t.dim() > 0, TypeError, "len() of a 0-d tensor");
        return t.sizes()[0];
      })
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("storage_offset", &Tensor::offset)
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data()); })
      .def_prop_ro("_version", &Tensor::version)
      .def_prop_ro("device", [](const Tensor& t) { return t.device().str(); })
      // requires_grad, grad, grad_fn, backward, detach, ...: autograd_bind.cpp
      .def("item", [](const Tensor& t) {
        refuse_while_tracing("Tensor.item()");
        return scalar_to_py(t.item());
      })
      .def("numpy", &to_numpy)
      .def("__array__", [](const Tensor& t, nb::handle dtype, nb::handle copy) {
            nb::object a = to_numpy(ops::contiguous(t));
            return dtype.is_none() ? a : a.attr("astype")(dtype);
          }, nb::arg("dtype") = nb::none(), nb::arg("copy") = nb::none())
      .def("tolist", [](const Tensor& t) {
        refuse_while_tracing("Tensor.tolist()");
        // Values only, as PyTorch: allowed on tensors that require grad; bfloat16 through float32 (exact).
        Tensor v = autograd::detach(t);
        if (v.dtype() == DType::BFloat16) v = ops::to_dtype(v, DType::Float32);
        return to_numpy(v).attr("tolist")();
      })
      .def("__bool__", [](const Tensor& t) {
        refuse_while_tracing("bool(Tensor)");
        return t.item().to_bool();
      })
      .def("__float__", [](const Tensor& t) { refuse_while_tracing("float(Tensor)"); return t.item().to_double(); })
      .def("__int__", [](const Tensor& t) { refuse_while_tracing("int(Tensor)"); return t.item().to_int(); })
      // ---- arithmetic ----
      .def("__add__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::add); })
      .def("__radd__", [](nb::handle a, nb::handle b) { return binary(b, a, ops::add); })
      .def("__sub__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::sub); })
      .def("__rsub__", [](nb::handle a, nb::handle b) { return binary(b, a, ops::sub); })
      .def("__mul__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::mul); })
      .def("__rmul__", [](nb::handle a, nb::handle b) { return binary(b, a, ops::mul); })
      .def("__truediv__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::div); })
      .def("__rtruediv__", [](nb::handle a, nb::handle b) { return binary(b, a, ops::div); })
      .def("__matmul__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::matmul); })
      .def("__rmatmul__", [](nb::handle a, nb::handle b) { return binary(b, a, ops::matmul); })
      .def("__eq__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::eq); })
      .def("__ne__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::ne); })
      .def("__lt__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::lt); })
      .def("__le__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::le); })
      .def("__gt__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::gt); })
      .def("__ge__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::ge); })
      .def("__neg__", &ops::neg)
      .def("__abs__", &ops::abs)
      .def("__hash__", [](const Tensor& t) { return reinterpret_cast<intptr_t>(t.impl()); })
      // In-place operators return the very object (an nn.Parameter stays one).
      .def("__iadd__", [](nb::handle a, nb::handle b) { return inplace(a, b, ops::add_, "add_"); })
      .def("__isub__", [](nb::handle a, nb::handle b) { return inplace(a, b, ops::sub_, "sub_"); })
      .def("__imul__", [](nb::handle a, nb::handle b) { return inplace(a, b, ops::mul_, "mul_"); })
      .def("__itruediv__", [](nb::handle a, nb::handle b) { return inplace(a, b, ops::div_, "div_"); })
      // ---- methods that are not operators (operators are generated: op_binding.cpp) ----
      // .data: the same memory without autograd history; assigning it swaps the
      // tensor's memory and shape while the object (and its requires_grad) stays.
      .def_prop_rw("data", [](const Tensor& t) { return autograd::detach(t); },
                   [](Tensor& t, const Tensor& src) {
                     TensorImpl* impl = t.impl();
                     impl->storage = src.impl()->storage;
                     impl->sizes = src.sizes();
                     impl->strides = src.strides();
                     impl->offset = src.offset();
                     impl->dtype = src.dtype();
                   })
      .def_prop_ro("T", [](const Tensor& t) {
        Dims d;
        for (int64_t i = t.dim() - 1; i >= 0; --i) d.push_back(i);
        return ops::permute(t, d);
      })
      // PyTorch's forms: to(dtype), to(device), to(other), to(device, dtype), with copy= / non_blocking=.
      .def("to", [](nb::handle self, nb::args args, nb::kwargs kwargs) { return to_any(self, args, kwargs); })
      .def("float", [](const Tensor& t) { return ops::to_dtype(t, DType::Float32); })
      .def("double", [](const Tensor& t) { return ops::to_dtype(t, DType::Float64); })
      .def("long", [](const Tensor& t) { return ops::to_dtype(t, DType::Int64); })
      .def("bool", [](const Tensor& t) { return ops::to_dtype(t, DType::Bool); })
      .def("half", [](const Tensor& t) { return ops::to_dtype(t, DType::Float16); })
      .def("bfloat16", [](const Tensor& t) { return ops::to_dtype(t, DType::BFloat16); })
      .def("int", [](const Tensor& t) { return ops::to_dtype(t, DType::Int32); })
      .def("short", [](const Tensor& t) { return ops::to_dtype(t, DType::Int16); })
      .def("char", [](const Tensor& t) { return ops::to_dtype(t, DType::Int8); })
      .def("byte", [](const Tensor& t) { return ops::to_dtype(t, DType::UInt8); })
      .def("is_floating_point", [](const Tensor& t) { return is_floating(t.dtype()); })
      .def("element_size", [](const Tensor& t) { return itemsize(t.dtype()); })
      .def("zero_", [](nb::handle a) {
        Tensor& t = nb::cast<Tensor&>(a);
        ops::zero_(t);
        return nb::borrow(a);
      });
}

}  // namespace tp::py
