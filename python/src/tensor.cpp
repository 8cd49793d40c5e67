// The Tensor class: properties, operators, methods, NumPy interop, indexing.
#include <nanobind/ndarray.h>

#include "autograd/engine.h"
#include "autograd/node.h"
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

void refuse_while_tracing(const char* what) {
  if (graph::is_tracing())
    throw CaptureError(str("cannot capture ", what,
                           ": it reads tensor data during tracing (data-dependent control flow is not supported yet)"));
}

// Indexing with ints, slices, None and Ellipsis (basic indexing); views only.
Tensor index(const Tensor& self, nb::handle idx) {
  std::vector<nb::handle> items;
  if (PyTuple_Check(idx.ptr())) {
    for (nb::handle h : idx) items.push_back(h);
  } else {
    items.push_back(idx);
  }
  int64_t consumed = 0;  // dims of self the index refers to
  for (auto h : items)
    if (!h.is_none() && h.ptr() != Py_Ellipsis) consumed++;
  TP_CHECK(consumed <= self.dim(), IndexError, "too many indices for tensor of dimension ", self.dim());
  Tensor t = self;
  int64_t dim = 0;
  for (auto h : items) {
    if (h.ptr() == Py_Ellipsis) {
      dim += self.dim() - consumed;
      continue;
    }
    if (h.is_none()) {
      t = ops::unsqueeze(t, dim++);
    } else if (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr())) {
      t = ops::select(t, dim, nb::cast<int64_t>(h));
    } else if (PySlice_Check(h.ptr())) {
      auto* s = reinterpret_cast<PySliceObject*>(h.ptr());
      auto opt = [](PyObject* o) -> std::optional<int64_t> {
        if (o == Py_None) return std::nullopt;
        return nb::cast<int64_t>(nb::handle(o));
      };
      std::optional<int64_t> step = opt(s->step);
      TP_CHECK(!step || *step > 0, ValueError, "slice: step must be greater than zero (got ", step.value_or(0), ")");
      t = ops::slice(t, dim++, opt(s->start), opt(s->stop), step.value_or(1));
    } else {
      throw TypeError(str("only integers, slices, None and Ellipsis are valid indices (got ",
                          nb::inst_name(h).c_str(), "); advanced indexing is not supported yet"));
    }
  }
  return t;
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
  nb::dlpack::dtype dt;
  switch (t.dtype()) {
    case DType::Bool: dt = nb::dtype<bool>(); break;
    case DType::Int64: dt = nb::dtype<int64_t>(); break;
    case DType::Float32: dt = nb::dtype<float>(); break;
    case DType::Float64: dt = nb::dtype<double>(); break;
  }
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
      .def_prop_rw("requires_grad", &Tensor::requires_grad,
                   [](Tensor& t, bool v) { autograd::set_requires_grad(t, v); })
      .def("requires_grad_", [](Tensor& t, bool v) { autograd::set_requires_grad(t, v); return t; },
           nb::arg("requires_grad") = true)
      .def_prop_rw("grad",
                   [](const Tensor& t) -> std::optional<Tensor> {
                     if (!t.impl()->grad) return std::nullopt;
                     return Tensor(t.impl()->grad);
                   },
                   [](Tensor& t, std::optional<Tensor> g) { t.impl()->grad = g ? g->impl_ptr() : nullptr; })
      .def_prop_ro("is_leaf", [](const Tensor& t) { return t.impl()->grad_fn == nullptr; })
      .def_prop_ro("grad_fn", [](const Tensor& t) -> nb::object {
        if (!t.impl()->grad_fn) return nb::none();
        return nb::str(t.impl()->grad_fn->name().c_str());
      })
      .def("backward", [](const Tensor& t, std::optional<Tensor> gradient, bool retain_graph) {
            autograd::backward({t}, {gradient ? *gradient : Tensor()}, retain_graph);
          }, nb::arg("gradient") = nb::none(), nb::arg("retain_graph") = false)
      .def("detach", &autograd::detach)
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
        return to_numpy(t).attr("tolist")();
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
      .def("__iadd__", [](Tensor& a, nb::handle b) { return ops::add_(a, require_operand(b, "add_")); })
      .def("__isub__", [](Tensor& a, nb::handle b) { return ops::sub_(a, require_operand(b, "sub_")); })
      .def("__imul__", [](Tensor& a, nb::handle b) { return ops::mul_(a, require_operand(b, "mul_")); })
      .def("__itruediv__", [](Tensor& a, nb::handle b) { return ops::div_(a, require_operand(b, "div_")); })
      // ---- methods ----
      .def("add", [](const Tensor& a, nb::handle b) { return ops::add(a, require_operand(b, "add")); })
      .def("sub", [](const Tensor& a, nb::handle b) { return ops::sub(a, require_operand(b, "sub")); })
      .def("mul", [](const Tensor& a, nb::handle b) { return ops::mul(a, require_operand(b, "mul")); })
      .def("div", [](const Tensor& a, nb::handle b) { return ops::div(a, require_operand(b, "div")); })
      .def("maximum", [](const Tensor& a, nb::handle b) { return ops::maximum(a, require_operand(b, "maximum")); })
      .def("minimum", [](const Tensor& a, nb::handle b) { return ops::minimum(a, require_operand(b, "minimum")); })
      .def("eq", [](const Tensor& a, nb::handle b) { return ops::eq(a, require_operand(b, "eq")); })
      .def("ne", [](const Tensor& a, nb::handle b) { return ops::ne(a, require_operand(b, "ne")); })
      .def("lt", [](const Tensor& a, nb::handle b) { return ops::lt(a, require_operand(b, "lt")); })
      .def("le", [](const Tensor& a, nb::handle b) { return ops::le(a, require_operand(b, "le")); })
      .def("gt", [](const Tensor& a, nb::handle b) { return ops::gt(a, require_operand(b, "gt")); })
      .def("ge", [](const Tensor& a, nb::handle b) { return ops::ge(a, require_operand(b, "ge")); })
      .def("neg", &ops::neg)
      .def("relu", &ops::relu)
      .def("abs", &ops::abs)
      .def("exp", &ops::exp)
      .def("log", &ops::log)
      .def("sqrt", &ops::sqrt)
      .def("tanh", &ops::tanh)
      .def("sigmoid", &ops::sigmoid)
      .def("sum", [](const Tensor& t, nb::handle dim, bool keepdim) { return ops::sum(t, dims_from(dim), keepdim); },
           nb::arg("dim") = nb::none(), nb::arg("keepdim") = false)
      .def("amax", [](const Tensor& t, nb::handle dim, bool keepdim) { return ops::amax(t, dims_from(dim), keepdim); },
           nb::arg("dim") = nb::none(), nb::arg("keepdim") = false)
      .def("mean", [](const Tensor& t, nb::handle dim, bool keepdim) { return ops::mean(t, dims_from(dim), keepdim); },
           nb::arg("dim") = nb::none(), nb::arg("keepdim") = false)
      .def("softmax", &ops::softmax, nb::arg("dim"))
      .def("matmul", &ops::matmul)
      .def("view", [](const Tensor& t, nb::args a) { return ops::view(t, shape_from_args(a, "view")); })
      .def("reshape", [](const Tensor& t, nb::args a) { return ops::reshape(t, shape_from_args(a, "reshape")); })
      .def("flatten", [](const Tensor& t) { return ops::reshape(t, {-1}); })
      .def("expand", [](const Tensor& t, nb::args a) { return ops::expand(t, shape_from_args(a, "expand")); })
      .def("permute", [](const Tensor& t, nb::args a) { return ops::permute(t, shape_from_args(a, "permute")); })
      .def("transpose", &ops::transpose)
      .def("t", [](const Tensor& t) {
        TP_CHECK(t.dim() <= 2, ValueError, "t() expects a tensor with <= 2 dimensions, but self is ", t.dim(), "D");
        return t.dim() < 2 ? t : ops::transpose(t, 0, 1);
      })
      .def_prop_ro("T", [](const Tensor& t) {
        Dims d;
        for (int64_t i = t.dim() - 1; i >= 0; --i) d.push_back(i);
        return ops::permute(t, d);
      })
      .def("unsqueeze", &ops::unsqueeze)
      .def("squeeze", &ops::squeeze, nb::arg("dim") = nb::none())
      .def("contiguous", &ops::contiguous)
      .def("clone", &ops::clone)
      .def("to", [](const Tensor& t, DType d) { return ops::to_dtype(t, d); })
      .def("float", [](const Tensor& t) { return ops::to_dtype(t, DType::Float32); })
      .def("double", [](const Tensor& t) { return ops::to_dtype(t, DType::Float64); })
      .def("long", [](const Tensor& t) { return ops::to_dtype(t, DType::Int64); })
      .def("bool", [](const Tensor& t) { return ops::to_dtype(t, DType::Bool); })
      .def("add_", [](Tensor& a, nb::handle b) { return ops::add_(a, require_operand(b, "add_")); })
      .def("sub_", [](Tensor& a, nb::handle b) { return ops::sub_(a, require_operand(b, "sub_")); })
      .def("mul_", [](Tensor& a, nb::handle b) { return ops::mul_(a, require_operand(b, "mul_")); })
      .def("div_", [](Tensor& a, nb::handle b) { return ops::div_(a, require_operand(b, "div_")); })
      .def("fill_", [](Tensor& a, nb::handle v) {
        auto s = to_scalar(v);
        TP_CHECK(s, TypeError, "fill_: expected a number but got ", nb::inst_name(v).c_str());
        return ops::fill_(a, *s);
      })
      .def("zero_", [](Tensor& a) { return ops::zero_(a); })
      .def("copy_", [](Tensor& a, const Tensor& b) { return ops::copy_(a, b); })
      .def("__getitem__", &index)
      .def("__setitem__", [](Tensor& self, nb::handle idx, nb::handle value) {
        Tensor v = index(self, idx);
        if (auto s = to_scalar(value)) {
          ops::fill_(v, *s);
        } else {
          ops::copy_(v, nb::cast<Tensor>(value));
        }
      });
}

}  // namespace tp::py
