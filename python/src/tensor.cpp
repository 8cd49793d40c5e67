// The Tensor class: properties, operators, methods, NumPy interop, indexing.
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <utility>

#include "autograd/engine.h"
#include "common.h"
#include "compile/compiled_function.h"
#include "cuda/copy.h"
#include "graph/tracer.h"
#include "ops/ops.h"

namespace tp::py {
namespace {

using ops::Dims;

// A NumPy array beside a tensor in an arithmetic operator (`x + pe` with pe
// computed in NumPy) is a tensor of its dtype, as torch reads it; otherwise
// NumPy took the operator over and the result was an ndarray, detached from
// autograd (and an error about numpy() when x requires grad).
std::optional<Tensor> ndarray_operand(nb::handle h) {
  if (nb::isinstance<Tensor>(h) || !PyObject_HasAttrString(h.ptr(), "__array_interface__")) return std::nullopt;
  nb::object type = nb::borrow(reinterpret_cast<PyObject*>(Py_TYPE(h.ptr())));
  if (nb::cast<std::string>(type.attr("__module__")) != "numpy") return std::nullopt;
  return nb::cast<Tensor>(nb::module_::import_("tensorplay").attr("as_tensor")(h));
}

nb::object binary(nb::handle a, nb::handle b, Tensor (*fn)(const Tensor&, const Tensor&)) {
  auto x = to_operand(a), y = to_operand(b);
  if (!x && y) x = ndarray_operand(a);
  if (x && !y) y = ndarray_operand(b);
  if (!x || !y) return nb::borrow(Py_NotImplemented);
  return nb::cast(fn(*x, *y));
}

nb::object inplace(nb::handle self, nb::handle other, Tensor& (*fn)(Tensor&, const Tensor&), const char* name) {
  Tensor& t = nb::cast<Tensor&>(self);
  // A tensor or a number first: the NumPy check looks up an attribute, which
  // `x += 1.0` should not pay for.
  auto y = to_operand(other);
  if (!y) y = ndarray_operand(other);
  fn(t, y ? *y : require_operand(other, name));
  return nb::borrow(self);
}

// Tensor.to: PyTorch's argument forms (dtype, device, other tensor, copy=,
// non_blocking=, memory_format=); a move between devices is recorded for autograd.
nb::object to_any(nb::handle self, const nb::args& args, const nb::kwargs& kwargs) {
  const Tensor& t = nb::cast<const Tensor&>(self);
  std::optional<DType> dtype;
  std::optional<MemoryFormat> format;
  std::optional<std::optional<int>> target;  // set: a device was named (inner nullopt: the CPU)
  bool copy = false;
  bool non_blocking = false;
  auto take = [&](nb::handle h) {
    if (nb::isinstance<DType>(h)) {
      dtype = nb::cast<DType>(h);
    } else if (nb::isinstance<Tensor>(h)) {
      const Tensor& o = nb::cast<const Tensor&>(h);
      dtype = o.dtype();
      target = o.device().kind == Device::Kind::CUDA ? std::optional<int>(o.device().index) : std::nullopt;
    } else if (is_device_arg(h) || nb::hasattr(h, "type")) {
      target = cuda_target(h, "to");
    } else {
      throw TypeError(str("to() received an invalid argument of type ", nb::inst_name(h).c_str(),
                          "; expected a dtype, a device or a Tensor"));
    }
  };
  for (nb::handle a : args) {
    // to(dtype, non_blocking, copy) / to(device, dtype, non_blocking, copy): trailing bools.
    if (PyBool_Check(a.ptr())) continue;
    take(a);
  }
  const size_t nargs = args.size();
  if (nargs >= 2 && PyBool_Check(args[nargs - 1].ptr()) && PyBool_Check(args[nargs - 2].ptr()))
    copy = args[nargs - 1].ptr() == Py_True;
  for (auto [k, v] : kwargs) {
    const std::string key = nb::cast<std::string>(k);
    if (key == "dtype" || key == "device" || key == "other") {
      if (!v.is_none()) take(v);
    } else if (key == "copy") {
      copy = nb::cast<bool>(v);
    } else if (key == "memory_format") {
      format = to_memory_format(v, "to");
    } else if (key == "non_blocking") {
      non_blocking = PyObject_IsTrue(v.ptr()) == 1;
    } else {
      throw TypeError(str("to() got an unexpected keyword argument '", key, "'"));
    }
  }
  const DType d = dtype.value_or(t.dtype());
  const bool on_cuda = t.device().kind == Device::Kind::CUDA;
  const bool moves = target && (on_cuda ? (!*target || **target != t.device().index) : bool(*target));
  Tensor r;
  if (moves) {  // the dtype changes on the CPU side: before an upload, after a download
    const bool to_cuda = bool(*target);
    Tensor src = to_cuda && d != t.dtype() ? ops::to_dtype(t, d) : t;
    r = move_recorded(src, *target, non_blocking, "Tensor.to");  // autograd: ToCopyBackward0
    if (!to_cuda && d != r.dtype()) r = ops::to_dtype(r, d);
  } else {
    r = d == t.dtype() ? (copy ? ops::clone(t) : t) : ops::to_dtype(t, d);
  }
  if (format) r = apply_memory_format(r, *format, "to");
  if (r.impl() == t.impl()) return nb::borrow(self);  // PyTorch returns self itself
  return nb::cast(std::move(r));
}

// x.float(), x.long(), ...: to(dtype) with PyTorch's optional memory_format=.
nb::object convert(nb::handle self, DType d, nb::handle memory_format) {
  const Tensor& t = nb::cast<const Tensor&>(self);
  Tensor r = ops::to_dtype(t, d);
  if (auto f = to_memory_format(memory_format, dtype_name(d))) r = apply_memory_format(r, *f, dtype_name(d));
  if (r.impl() == t.impl()) return nb::borrow(self);
  return nb::cast(std::move(r));
}

void refuse_while_tracing(const char* what) {
  if (graph::is_tracing())
    throw CaptureError(str("cannot capture ", what,
                           ": it copies tensor data out of the captured program; use tensor operators instead (bool(t), int(t), "
                           "float(t) and t.item() are supported: they become data gates)"));
}

}  // namespace

// "file.py:12" of the user's Python code running now: the innermost frame outside
// the tensorplay package (a read inside nn.functional names the user's call).
std::string python_source_line() {
  static const std::string package = [] {
    nb::object os = nb::module_::import_("os");
    return nb::cast<std::string>(os.attr("path").attr("dirname")(nb::module_::import_("tensorplay").attr("__file__")));
  }();
  PyFrameObject* f = PyEval_GetFrame();  // borrowed
  Py_XINCREF(f);
  std::string where;
  while (f) {
    PyCodeObject* code = PyFrame_GetCode(f);  // new reference
    std::string file = nb::cast<std::string>(nb::handle(code->co_filename));
    Py_DECREF(code);
    where = file + ":" + std::to_string(PyFrame_GetLineNumber(f));
    if (file.compare(0, package.size(), package) != 0) {
      Py_DECREF(f);
      break;
    }
    PyFrameObject* back = PyFrame_GetBack(f);  // new reference
    Py_DECREF(f);
    f = back;
  }
  return where;
}

// bool(t), int(t), float(t), t.item() inside a capture are data gates (Section 3):
// the value joins the key of the captured program, and the computation that
// produced `t` is replayed on later calls to choose the program.
void note_base_object(nb::handle src, const Tensor& result) {
  TensorImpl* r = result.impl();
  if (!r->view_base || r->base_py || !nb::isinstance<Tensor>(src)) return;
  const TensorImpl* s = nb::cast<const Tensor&>(src).impl();
  if (s == r->view_base.get()) r->base_py = keep_py(nb::borrow(src));
  else if (s->view_base == r->view_base) r->base_py = s->base_py;  // a view of a view: the root's object
}

Scalar gate(const Tensor& t, const char* kind) {
  if (!graph::is_tracing()) return graph::read_gate_value(kind, t);
  return graph::record_data_gate(t, kind, python_source_line());
}

namespace {

// Dynamic shapes: sizes of a traced tensor as SymInts where symbolic (dim -1: all).
nb::object sym_sizes_py(const Tensor& t, int64_t dim) {
  graph::SymShape s = graph::sym_sizes_of(t);
  if (s.size() != static_cast<size_t>(t.dim())) {
    if (dim >= 0) return nb::int_(t.sizes()[dim]);
    return nb::tuple(nb::cast(t.sizes()));
  }
  if (dim >= 0) return make_size(s[dim], t.sizes()[dim]);
  nb::list l;
  for (int64_t d = 0; d < t.dim(); ++d) l.append(make_size(s[d], t.sizes()[d]));
  return nb::tuple(l);
}

// Strides: symbolic for a contiguous tensor (products of the later sizes); for
// any other layout the sizes are specialized and the strides are plain ints.
nb::object sym_strides_py(const Tensor& t, int64_t dim) {
  graph::SymShape s = graph::sym_sizes_of(t);
  nb::list l;
  if (s.size() == static_cast<size_t>(t.dim()) && t.is_contiguous()) {
    graph::SymDim acc(1);
    std::vector<graph::SymDim> st(s.size());
    for (size_t i = s.size(); i-- > 0;) {
      st[i] = stax::ir::simplify(acc);
      acc = acc * s[i];
    }
    if (dim >= 0) return make_size(st[dim], t.strides()[dim]);
    for (int64_t d = 0; d < t.dim(); ++d) l.append(make_size(st[d], t.strides()[d]));
    return nb::tuple(l);
  }
  for (auto& d : s)
    if (!d.is_const()) graph::specialize_shape(d, python_source_line());
  if (dim >= 0) return nb::int_(t.strides()[dim]);
  return nb::tuple(nb::cast(t.strides()));
}

// `peek`: printing inside a capture (repr, format) reads the call's values,
// which the capture runs on, without making them part of the program.
nb::object to_numpy(const Tensor& t, bool peek = false) {
  if (!peek) refuse_while_tracing("Tensor.numpy()");
  TP_CHECK(t.device().kind == Device::Kind::CPU, TypeError, "can't convert ", t.device().str(),
           " device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first.");
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
  // Weakly referenceable as PyTorch's tensors are (weakref.ref, WeakKeyDictionary,
  // and the post-accumulate-grad hook, which hands the hooked object back).
  nb::class_<Tensor> cls(m, "Tensor", nb::is_weak_referenceable());
  // t.float(), t.double(), ...: the conversion methods differ only in the dtype.
  static constexpr std::pair<const char*, DType> kConversionMethods[] = {
      {"float", DType::Float32}, {"double", DType::Float64}, {"long", DType::Int64},  {"bool", DType::Bool},
      {"half", DType::Float16},  {"bfloat16", DType::BFloat16}, {"int", DType::Int32}, {"short", DType::Int16},
      {"char", DType::Int8},     {"byte", DType::UInt8}};
  for (auto [name, dtype] : kConversionMethods)
    cls.def(name, [dtype](nb::handle t, nb::handle f) { return convert(t, dtype, f); }, nb::kw_only(),
            nb::arg("memory_format") = nb::none());
  // Tensor(other) shares other's TensorImpl; it exists so that Python subclasses
  // (nn.Parameter) can initialize their C++ part from an existing tensor.
  cls.def(nb::init<const Tensor&>(), nb::arg("other"))
      .def_prop_ro("shape", [](const Tensor& t) -> nb::object {
        if (graph::symbolic_tracing()) return sym_sizes_py(t, -1);
        return nb::tuple(nb::cast(t.sizes()));
      })
      .def("size", [](const Tensor& t, std::optional<int64_t> d) -> nb::object {
            if (graph::symbolic_tracing()) return sym_sizes_py(t, d ? wrap_dim(*d, t.dim(), "size") : -1);
            if (d) return nb::cast(t.size(*d));
            return nb::tuple(nb::cast(t.sizes()));
          }, nb::arg("dim") = nb::none())
      .def("stride", [](const Tensor& t, std::optional<int64_t> d) -> nb::object {
            if (graph::symbolic_tracing()) return sym_strides_py(t, d ? wrap_dim(*d, t.dim(), "stride") : -1);
            if (d) return nb::cast(t.strides()[wrap_dim(*d, t.dim(), "stride")]);
            return nb::tuple(nb::cast(t.strides()));
          }, nb::arg("dim") = nb::none())
      .def_prop_ro("dtype", &Tensor::dtype)
      .def_prop_ro("ndim", &Tensor::dim)
      .def("dim", &Tensor::dim)
      .def("numel", [](const Tensor& t) -> nb::object {
        if (graph::symbolic_tracing()) {
          graph::SymShape s = graph::sym_sizes_of(t);
          if (!s.empty()) {
            graph::SymDim p(1);
            for (auto& d : s) p = p * d;
            return make_size(stax::ir::simplify(p), t.numel());
          }
        }
        return nb::int_(t.numel());
      })
      .def("__len__", [](const Tensor& t) {
        TP_CHECK(t.dim() > 0, TypeError, "len() of a 0-d tensor");
        if (graph::symbolic_tracing()) {  // len() must be an int: the size is specialized
          graph::SymShape s = graph::sym_sizes_of(t);
          if (!s.empty() && !s[0].is_const()) return graph::specialize_shape(s[0], python_source_line());
        }
        return t.sizes()[0];
      })
      .def("is_contiguous", [](const Tensor& t, nb::handle memory_format) {
            auto f = to_memory_format(memory_format, "is_contiguous");
            return f ? is_contiguous_as(t, *f) : t.is_contiguous();
          }, nb::arg("memory_format") = nb::none())
      .def("storage_offset", &Tensor::offset)
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data()); })
      // (base address, bytes) of the memory behind the tensor: Tensor.untyped_storage() (tensorplay/_storage.py).
      .def("_storage_info", [](const Tensor& t) {
        const auto& st = t.impl()->storage;
        if (!st) return std::make_pair(uintptr_t{0}, size_t{0});
        return std::make_pair(reinterpret_cast<uintptr_t>(st->data()), st->nbytes());
      })
      .def_prop_ro("_version", &Tensor::autograd_version)
      .def_prop_ro("device", &device_of)
      // requires_grad, grad, grad_fn, backward, detach, ...: autograd_bind.cpp
      .def("item", [](const Tensor& t) -> nb::object {
        // During capture a floating item() stays a 0-d tensor of the graph (see
        // ARCHITECTURE.md: a value used in arithmetic must not specialize the
        // program per value); an integer or bool one is a data gate.
        if (graph::is_tracing() && is_floating(t.dtype())) {
          graph::read_gate_value("item", t);  // the same error as eager for several elements
          Tensor r = ops::clone(ops::view(t, {}));
          note_capture_item(r);
          return nb::cast(std::move(r));
        }
        return scalar_to_py(gate(host_copy(t), "item"));  // a CUDA tensor is read on the host
      })
      .def("numpy", [](const Tensor& t) { return to_numpy(t); })
      // The values as a NumPy array, also while a call is captured (printing
      // there shows that call's values; Python runs at capture only).
      .def("_peek_numpy", [](const Tensor& t) { return to_numpy(t, true); })
      .def("__array__", [](const Tensor& t, nb::handle dtype, nb::handle copy) {
            nb::object a = to_numpy(ops::contiguous(t));
            return dtype.is_none() ? a : a.attr("astype")(dtype);
          }, nb::arg("dtype") = nb::none(), nb::arg("copy") = nb::none())
      .def("tolist", [](const Tensor& t) {
        refuse_while_tracing("Tensor.tolist()");
        // Values only, as PyTorch: allowed on tensors that require grad; bfloat16 through float32 (exact).
        Tensor v = autograd::detach(host_copy(t));
        if (v.dtype() == DType::BFloat16) v = ops::to_dtype(v, DType::Float32);
        return to_numpy(v).attr("tolist")();
      })
      .def("__bool__", [](const Tensor& t) { return gate(host_copy(t), "bool").to_bool(); })
      .def("__float__", [](const Tensor& t) { return gate(host_copy(t), "float").to_double(); })
      .def("__int__", [](const Tensor& t) { return gate(host_copy(t), "int").to_int(); })
      // ---- arithmetic ----
      // (`other` may be None: `t == None` is False and `t != None` True, as in PyTorch,
      // through NotImplemented; nanobind refused None with a TypeError.)
      .def("__add__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::add); }, nb::arg("other").none())
      .def("__radd__", [](nb::handle a, nb::handle b) { return binary(b, a, ops::add); }, nb::arg("other").none())
      .def("__sub__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::sub); }, nb::arg("other").none())
      .def("__rsub__", [](nb::handle a, nb::handle b) { return binary(b, a, ops::sub); }, nb::arg("other").none())
      .def("__mul__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::mul); }, nb::arg("other").none())
      .def("__rmul__", [](nb::handle a, nb::handle b) { return binary(b, a, ops::mul); }, nb::arg("other").none())
      .def("__truediv__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::div); }, nb::arg("other").none())
      .def("__rtruediv__", [](nb::handle a, nb::handle b) { return binary(b, a, ops::div); }, nb::arg("other").none())
      .def("__matmul__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::matmul); }, nb::arg("other").none())
      .def("__rmatmul__", [](nb::handle a, nb::handle b) { return binary(b, a, ops::matmul); }, nb::arg("other").none())
      .def("__eq__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::eq); }, nb::arg("other").none())
      .def("__ne__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::ne); }, nb::arg("other").none())
      .def("__lt__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::lt); }, nb::arg("other").none())
      .def("__le__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::le); }, nb::arg("other").none())
      .def("__gt__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::gt); }, nb::arg("other").none())
      .def("__ge__", [](nb::handle a, nb::handle b) { return binary(a, b, ops::ge); }, nb::arg("other").none())
      .def("__neg__", &ops::neg)
      .def("__abs__", &ops::abs)
      .def("__hash__", [](const Tensor& t) { return reinterpret_cast<intptr_t>(t.impl()); })
      // In-place operators return the very object (an nn.Parameter stays one).
      .def("__iadd__", [](nb::handle a, nb::handle b) { return inplace(a, b, ops::add_, "add_"); }, nb::arg("other").none())
      .def("__isub__", [](nb::handle a, nb::handle b) { return inplace(a, b, ops::sub_, "sub_"); }, nb::arg("other").none())
      .def("__imul__", [](nb::handle a, nb::handle b) { return inplace(a, b, ops::mul_, "mul_"); }, nb::arg("other").none())
      .def("__itruediv__", [](nb::handle a, nb::handle b) { return inplace(a, b, ops::div_, "div_"); }, nb::arg("other").none())
      // ---- methods that are not operators (operators are generated: op_binding.cpp) ----
      // .data: the same memory without autograd history and with a version counter
      // of its own; assigning it swaps the tensor's memory and shape while the
      // object (its requires_grad and version count) stays.
      .def_prop_rw("data", [](const Tensor& t) {
                     Tensor d = autograd::data_alias(t);
                     if (graph::is_tracing()) compile::note_data_read(d, t);  // read through t at every call
                     return d;
                   },
                   [](Tensor& t, const Tensor& src) {
                     // The swap replaces the tensor's storage and sizes outside the
                     // dispatcher, so a capture records nothing of it: the compiled
                     // program kept reading the old tensor (`w.data = x * 2; return
                     // w + 1` gave the first call's w + 1 and left w unchanged at
                     // every later call; an intermediate's swap was lost even at the
                     // first). Refused, as the capture's other unrecordable effects.
                     if (graph::is_tracing())
                       throw CaptureError(
                           "cannot capture an assignment to Tensor.data inside a compiled function (tp.compile): "
                           "swapping a tensor's memory is not recorded in the compiled program, so later calls would "
                           "not make it; assign .data outside the compiled function, or write the new values in place "
                           "(with tp.no_grad(): w.copy_(new))");
                     autograd::set_data(t, src);
                   })
      .def_prop_ro("T", [](const Tensor& t) {
        Dims d;
        for (int64_t i = t.dim() - 1; i >= 0; --i) d.push_back(i);
        return ops::permute(t, d);
      })
      // PyTorch's forms: to(dtype), to(device), to(other), to(device, dtype), with copy= / non_blocking=.
      .def("to", [](nb::handle self, nb::args args, nb::kwargs kwargs) { return to_any(self, args, kwargs); })
      // x.cpu() is x itself for a CPU tensor (memory_format= as in PyTorch), a
      // host copy for a CUDA one; x.cuda() without a GPU names what is missing.
      .def("cpu", [](nb::handle self, nb::handle memory_format) {
            const Tensor& t = nb::cast<const Tensor&>(self);
            auto f = to_memory_format(memory_format, "cpu");
            const Tensor h = move_recorded(t, std::nullopt, false, "Tensor.cpu()");
            if (!f) return h.impl() == t.impl() ? nb::borrow(self) : nb::cast(h);
            Tensor r = apply_memory_format(h, *f, "cpu");
            return r.impl() == t.impl() ? nb::borrow(self) : nb::cast(std::move(r));
          }, nb::kw_only(), nb::arg("memory_format") = nb::none())
      .def("pin_memory", [](const Tensor& t) { return cuda::pin_memory(t); })
      .def("is_pinned", [](const Tensor& t) { return cuda::is_pinned(t); })
      .def("cuda", [](nb::handle self, nb::handle device, bool non_blocking, nb::handle memory_format) -> nb::object {
            const Tensor& t = nb::cast<const Tensor&>(self);
            nb::object spec = device.is_none() ? nb::object(nb::str("cuda"))
                              : PyLong_Check(device.ptr()) ? nb::object(nb::str(("cuda:" + std::to_string(nb::cast<int>(device))).c_str()))
                                                           : nb::borrow(device);
            std::optional<int> target = cuda_target(spec, "cuda");
            TP_CHECK(target, Error, "cuda: expected a CUDA device but got '", to_device(spec).str(), "'");
            Tensor r = move_recorded(t, target, non_blocking, "Tensor.cuda()");
            if (auto f = to_memory_format(memory_format, "cuda")) r = apply_memory_format(r, *f, "cuda");
            return r.impl() == t.impl() ? nb::borrow(self) : nb::cast(std::move(r));
          }, nb::arg("device").none() = nb::none(), nb::arg("non_blocking") = false, nb::kw_only(),
          nb::arg("memory_format") = nb::none())
      .def_prop_ro("is_cuda", [](const Tensor& t) { return t.device().kind == Device::Kind::CUDA; })
      .def_prop_ro("is_cpu", [](const Tensor& t) { return t.device().kind == Device::Kind::CPU; })
      .def_prop_ro("is_meta", [](const Tensor&) { return false; })
      .def("get_device", [](const Tensor& t) {  // -1: PyTorch's answer for CPU tensors
        return t.device().kind == Device::Kind::CUDA ? static_cast<int>(t.device().index) : -1;
      })
      .def("is_floating_point", [](const Tensor& t) { return is_floating(t.dtype()); })
      .def("element_size", [](const Tensor& t) { return itemsize(t.dtype()); })
      .def("zero_", [](nb::handle a) {
        Tensor& t = nb::cast<Tensor&>(a);
        ops::zero_(t);
        return nb::borrow(a);
      });
}

}  // namespace tp::py
