// Python functions and Tensor methods generated from the operator registry.
//
// Every OpDef with a schema becomes `tensorplay.<name>` and, when its first
// parameter is `self`, `Tensor.<name>`. Overloads ("max", "max.dim",
// "max.other") share one Python name and are tried in registration order, the
// first whose parameters accept the arguments wins (PyTorch's rule). Parsing
// is driven by the parsed Schema, so a new operator needs no binding code.
#include <cstring>
#include <Python.h>

#include <cctype>
#include <deque>
#include <map>
#include <utility>

#include "autograd/engine.h"
#include "common.h"
#include "core/grad_mode.h"
#include "core/warning.h"
#include "cuda/device_status.h"
#include "graph/tracer.h"
#include "ops/dispatch.h"
#include "ops/kernel_util.h"
#include "ops/ops.h"
#include "ops/schema.h"
#include "ops/type_promotion.h"

namespace tp::py {
// device.cpp: the CUDA index tp.set_default_device chose (factories without device= build there).
std::optional<int> default_cuda_device();
}  // namespace tp::py

namespace tp::py {
namespace {

struct Overload {
  const OpDef* op;
  const Schema* schema;
  std::vector<nb::object> names;  // interned Python strings, one per parameter
  // NumPy spellings PyTorch also accepts as keywords (axis for dim, keepdims
  // for keepdim); None where a parameter has no alias.
  std::vector<nb::object> aliases;
  nb::object result_type;         // a namedtuple class for named multi-results, else None
  bool accepts_out;
  bool has_requires_grad;
};

struct OpFunction {
  std::string name;
  std::vector<Overload> overloads;
  bool is_method = false;  // some overload's first parameter is `self`
  bool inplace = false;    // name ends in '_': a method only
};

// The parse of one call against one overload.
struct Parsed {
  std::vector<Tensor> inputs;
  Attrs attrs;
  std::optional<MemoryFormat> memory_format;  // applied to the result (memory_format.cpp)
  std::optional<int> cuda_device;  // device="cuda:N": the result is built on the host, then moved
  bool device_named = false;       // a device= was given (even the CPU)
  // Dynamic shapes (only while a symbolic capture runs): int attributes given as
  // SymInts (their hints are in attrs), and the plain ints of the call.
  std::map<std::string, std::vector<graph::SymDim>> sym_attrs;
  std::vector<int64_t> literals;
};

// A bool is never an int here (PyTorch's rule): var(x, True) is unbiased=True, not dim=1.
bool is_int_like(PyObject* o) {
  if (PyBool_Check(o)) return false;
  if (PyLong_Check(o)) return true;
  return PyIndex_Check(o) && !PyFloat_Check(o) && !nb::isinstance<Tensor>(nb::handle(o));
}

int64_t as_int(PyObject* o) {
  nb::object idx = nb::steal(PyNumber_Index(o));
  if (!idx.is_valid()) throw nb::python_error();
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(idx.ptr(), &overflow);
  if (overflow) throw ValueError("integer value out of range for int64");
  return v;
}

// A one-element integer tensor where an int is expected (x.narrow(0, t, 2)),
// as PyTorch reads it through __index__. Its value becomes an attribute, so a
// capture (which would bake it into the graph) refuses it like item().
// Only tried once no overload accepts the call as written: otherwise
// max(x, tensor(1)) would bind max.dim (dim=1) before max.other.
thread_local bool t_tensor_as_int = false;
std::optional<int64_t> int_from_tensor(nb::handle h, const std::string& op) {
  if (!t_tensor_as_int || !nb::isinstance<Tensor>(h)) return std::nullopt;
  const Tensor& t = nb::cast<const Tensor&>(h);
  if (t.numel() != 1 || !is_integral(t.dtype(), false)) return std::nullopt;
  if (graph::is_tracing())
    throw CaptureError(str("cannot capture ", op, "() with a tensor where an int is expected: its value is tensor "
                           "data (data-dependent shapes are not supported yet); pass an int"));
  return host_copy(t).item().to_int();  // a CUDA tensor is read on the host
}

std::string py_type_name(PyObject* o) {
  if (o == Py_None) return "None";
  if (nb::isinstance<Tensor>(nb::handle(o))) return "Tensor";
  return Py_TYPE(o)->tp_name;
}

// An int attribute that names dims (dim, dims, dim0, start_dim, source, ...):
// shape rules read it as the number it had at capture, so a SymInt given there
// (an int argument of a compiled function made symbolic) is specialized: kept as
// a symbolic attribute, a version would serve another dim with the first one's
// shapes.
bool dim_like(const char* name) {
  return std::strstr(name, "dim") != nullptr || std::strcmp(name, "source") == 0 ||
         std::strcmp(name, "destination") == 0 || std::strcmp(name, "axis") == 0;
}

// Converts one Python value for parameter `a`; false (and `why`) when it does not fit.
bool convert_arg(const Schema& s, const SchemaArg& a, PyObject* v, Parsed& p, std::string& why) {
  auto mismatch = [&](const char* expected) {
    why = str("argument '", a.name, "' must be ", expected, ", not ", py_type_name(v));
    return false;
  };
  if (v == Py_None) {
    // x.amax(dim=None), x.roll(1, dims=None): PyTorch takes None for a dims list
    // with a default as that default (all dims / the flattened tensor).
    if (!a.optional && a.type == ArgType::IntList && a.has_default && dim_like(a.attr_name)) {
      p.attrs.set(a.attr_name, a.default_value);
      return true;
    }
    if (!a.optional) return mismatch(arg_type_name(a).c_str());
    if (a.type == ArgType::Tensor) p.inputs.emplace_back();
    else if (a.type == ArgType::Device || a.type == ArgType::MemoryFormat) return true;
    else p.attrs.set(a.attr_name, std::monostate{});
    return true;
  }
  nb::handle h(v);
  switch (a.type) {
    case ArgType::Tensor:
      if (nb::isinstance<Tensor>(h)) {
        p.inputs.push_back(nb::cast<Tensor>(h));
        return true;
      }
      if (auto t = symint_value_tensor(h)) {  // an int argument made symbolic: its value input
        p.inputs.push_back(*t);
        return true;
      }
      if (auto s = to_scalar(h)) {  // Python numbers take part as wrapped scalars
        p.inputs.push_back(Tensor::wrapped_scalar(*s));
        return true;
      }
      return mismatch("Tensor");
    case ArgType::TensorList: {
      if (!PyList_Check(v) && !PyTuple_Check(v)) return mismatch("a list or tuple of Tensors");
      for (nb::handle x : h) {
        if (!nb::isinstance<Tensor>(x)) {
          why = str("argument '", a.name, "' must be a sequence of Tensors, but it contains ",
                    py_type_name(x.ptr()));
          return false;
        }
        p.inputs.push_back(nb::cast<Tensor>(x));
      }
      return true;
    }
    case ArgType::Int:
      if (is_symint(h) && dim_like(a.attr_name)) {  // a dim index: no shape rule reads it symbolically
        p.attrs.set(a.attr_name, symint_specialize(h));
        return true;
      }
      if (is_symint(h)) {  // a symbolic size: its hint, and its expression for the recorded node
        p.attrs.set(a.attr_name, symint_hint(h));
        p.sym_attrs[a.attr_name] = {symint_expr(h)};
        return true;
      }
      if (is_int_like(v)) {
        p.attrs.set(a.attr_name, as_int(v));
        if (graph::symbolic_tracing()) p.literals.push_back(std::get<int64_t>(*p.attrs.find(a.attr_name)));
        return true;
      }
      if (auto i = int_from_tensor(h, s.name)) {
        p.attrs.set(a.attr_name, *i);
        return true;
      }
      return mismatch("int");
    case ArgType::IntList: {
      std::vector<int64_t> xs;
      std::vector<graph::SymDim> syms;  // with a SymInt element: one expression per element
      if (is_int_like(v)) {
        if (is_symint(h) && a.list_len <= 1 && !dim_like(a.attr_name)) {  // tp.zeros(n): one symbolic size
          xs.assign(1, symint_hint(h));
          syms.assign(1, symint_expr(h));
        } else {
          xs.assign(a.list_len > 0 ? a.list_len : 1, is_symint(h) ? symint_specialize(h) : as_int(v));
        }
      } else if (PyList_Check(v) || PyTuple_Check(v)) {
        for (nb::handle x : h) {
          if (!is_int_like(x.ptr())) return mismatch(str("a sequence of ints (", arg_type_name(a), ")").c_str());
          if (is_symint(x) && dim_like(a.attr_name)) {
            xs.push_back(symint_specialize(x));
            if (!syms.empty()) syms.push_back(graph::SymDim(xs.back()));
            continue;
          }
          if (is_symint(x)) {
            if (syms.empty())  // the plain ints before the first SymInt
              for (int64_t v : xs) syms.push_back(graph::SymDim(v));
            xs.push_back(symint_hint(x));
            syms.push_back(symint_expr(x));
            continue;
          }
          xs.push_back(as_int(x.ptr()));
          if (!syms.empty()) syms.push_back(graph::SymDim(xs.back()));
        }
        if (!syms.empty() && a.list_len > 0 && xs.size() == 1) {
          xs.assign(1, symint_specialize(h[0]));  // int[2] given one SymInt: the plain value
          syms.clear();
        }
        if (a.list_len > 0 && xs.size() == 1) xs.assign(a.list_len, xs[0]);
        // int[1] (reduction dims) is PyTorch's "an int or a list of any length".
        if (a.list_len > 1 && static_cast<int>(xs.size()) != a.list_len) {
          why = str("argument '", a.name, "' must have ", a.list_len, " elements, got ", xs.size());
          return false;
        }
      } else {
        return mismatch(arg_type_name(a).c_str());
      }
      if (graph::symbolic_tracing())
        for (size_t j = 0; j < xs.size(); ++j)
          if (syms.empty() || syms[j].is_const()) p.literals.push_back(xs[j]);
      if (!syms.empty()) p.sym_attrs[a.attr_name] = std::move(syms);
      p.attrs.set(a.attr_name, std::move(xs));
      return true;
    }
    case ArgType::Float: {
      auto s = to_scalar(h);
      if (!s || s->is_bool()) return mismatch("float");
      p.attrs.set(a.attr_name, Scalar(s->to_double()));
      return true;
    }
    case ArgType::Bool:
      if (!PyBool_Check(v)) return mismatch("bool");
      p.attrs.set(a.attr_name, v == Py_True);
      return true;
    case ArgType::Scalar: {
      auto s = to_scalar(h);
      if (!s && nb::isinstance<Tensor>(h)) {
        const Tensor& t = nb::cast<const Tensor&>(h);
        // The value becomes an attribute: inside a capture it is a data gate, so a
        // later call with another value does not run the first one's program.
        if (t.numel() == 1) s = graph::is_tracing() ? gate(t, "Tensor as a number") : host_copy(t).item();
      }
      if (!s) return mismatch("a number");
      p.attrs.set(a.attr_name, *s);
      return true;
    }
    case ArgType::Str:
      if (!PyUnicode_Check(v)) return mismatch("str");
      p.attrs.set(a.attr_name, std::string(nb::cast<std::string>(h)));
      return true;
    case ArgType::ScalarType:
      if (!nb::isinstance<DType>(h)) return mismatch("a tensorplay dtype");
      p.attrs.set(a.attr_name, nb::cast<DType>(h));
      return true;
    case ArgType::Generator: {
      nb::object id = nb::getattr(h, "_id", nb::none());
      if (id.is_none() || !PyLong_Check(id.ptr())) return mismatch("a tensorplay.Generator");
      p.attrs.set(a.attr_name, nb::cast<int64_t>(id));
      return true;
    }
    case ArgType::Device:
      if (!is_device_arg(h) && !nb::hasattr(h, "type")) return mismatch("a device (str or tensorplay.device)");
      p.cuda_device = cuda_target(h, s.name);  // another device raises here: no overload could run on it
      p.device_named = true;
      return true;
    case ArgType::MemoryFormat:
      p.memory_format = to_memory_format(h, s.name);
      return true;
  }
  return mismatch("?");
}

// Matches positional and keyword arguments to the overload's parameters.
bool parse(const Overload& o, PyObject* const* pos, size_t npos, PyObject* kwargs, Parsed& p, std::string& why) {
  const auto& args = o.schema->args;
  size_t n_positional = 0;
  while (n_positional < args.size() && !args[n_positional].kwarg_only) ++n_positional;
  // f(x, 2, 3) for a single int[] parameter after the tensors: gather the ints
  // (x.view(2, 3), tp.zeros(2, 3), x.permute(1, 0)).
  nb::object packed;
  if (npos > n_positional && n_positional >= 1 && args[n_positional - 1].type == ArgType::IntList) {
    bool all_ints = true;
    // A bool is no size or dim (x.var(1, False) is var.dim's unbiased=False).
    for (size_t i = n_positional - 1; i < npos; ++i) all_ints &= is_int_like(pos[i]);
    if (all_ints) {
      packed = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(npos - n_positional + 1)));
      for (size_t i = n_positional - 1; i < npos; ++i) {
        Py_INCREF(pos[i]);
        PyTuple_SET_ITEM(packed.ptr(), static_cast<Py_ssize_t>(i - n_positional + 1), pos[i]);
      }
      npos = n_positional;
    }
  }
  if (npos > n_positional) {
    why = str("takes ", n_positional, " positional arguments but ", npos, " were given");
    return false;
  }
  size_t kw_used = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const SchemaArg& a = args[i];
    PyObject* v = nullptr;
    if (i < npos) v = (packed.is_valid() && i == npos - 1) ? packed.ptr() : pos[i];
    PyObject* kv = kwargs ? PyDict_GetItem(kwargs, o.names[i].ptr()) : nullptr;
    if (kwargs && !o.aliases[i].is_none()) {
      if (PyObject* av = PyDict_GetItem(kwargs, o.aliases[i].ptr())) {
        if (kv) {
          why = str("got both '", a.name, "' and its alias '", nb::cast<std::string>(o.aliases[i]), "'");
          return false;
        }
        kv = av;
      }
    }
    if (kv) {
      if (v) {
        why = str("got multiple values for argument '", a.name, "'");
        return false;
      }
      v = kv;
      kw_used++;
    }
    if (!v) {
      if (a.has_default) {
        if (a.type == ArgType::Tensor) p.inputs.emplace_back();
        else if (a.type != ArgType::TensorList && a.type != ArgType::Device && a.type != ArgType::MemoryFormat)
          p.attrs.set(a.attr_name, a.default_value);
        continue;
      }
      why = str("missing required argument '", a.name, "'");
      return false;
    }
    if (!convert_arg(*o.schema, a, v, p, why)) return false;
  }
  const size_t n_kwargs = kwargs ? static_cast<size_t>(PyDict_Size(kwargs)) : 0;
  const bool has_out = kwargs && PyDict_GetItemString(kwargs, "out");
  if (kw_used + (has_out ? 1 : 0) != n_kwargs || (has_out && !o.accepts_out)) {
    for (auto [k, _] : nb::borrow<nb::dict>(kwargs)) {
      bool known = false;
      for (auto& nm : o.names) known |= PyObject_RichCompareBool(k.ptr(), nm.ptr(), Py_EQ) == 1;
      for (auto& nm : o.aliases) known |= !nm.is_none() && PyObject_RichCompareBool(k.ptr(), nm.ptr(), Py_EQ) == 1;
      if (!known && !(o.accepts_out && nb::cast<std::string>(k) == "out")) {
        why = str("got an unexpected keyword argument '", nb::cast<std::string>(k), "'");
        return false;
      }
    }
  }
  return true;
}

// out=: PyTorch's contract: resize if the shape differs (warning when the
// tensor was not empty), cast into out's dtype when that cast is allowed.
void write_out(const std::string& name, Tensor& out, const Tensor& result) {
  TP_CHECK(can_cast(result.dtype(), out.dtype()), TypeError, name, ": result type ", dtype_name(result.dtype()),
           " can't be cast to the desired output type ", dtype_name(out.dtype()));
  if (out.sizes() != result.sizes()) {
    // The resize below swaps the tensor's storage and sizes behind the
    // dispatcher: a capture records nothing of it, so for an argument (or a
    // parameter, a view) its graph kept out's old shape and then copied the
    // result into it: an error at the compiled call (out=tp.empty(0), the
    // common idiom) or, where the result broadcasts to the old shape
    // (sum(x, 0, out=<[2, 3]>)), a silently wrong out. Refused; a tensor the
    // function made itself is fine (the copy into it is traced at its new shape).
    if (graph::is_tracing() && !graph::is_own_value(out))
      throw CaptureError(str("cannot capture ", name, "(out=...) resizing its out= tensor of shape ",
                             shape_str(out.sizes()), " to the result's shape ", shape_str(result.sizes()),
                             ": the resize is not recorded in the compiled program; pass an out= tensor of the "
                             "result's shape, or use the returned tensor"));
    if (out.numel() != 0)
      warn(str(name, ": an output with shape ", shape_str(out.sizes()), " was resized to ",
               shape_str(result.sizes()), " (resizing non-empty out= tensors is deprecated)"));
    Tensor fresh = Tensor::empty(result.sizes(), out.dtype());
    TensorImpl* impl = out.impl();
    impl->storage = fresh.impl()->storage;
    impl->sizes = fresh.sizes();
    impl->strides = fresh.strides();
    impl->offset = 0;
  }
  ops::copy_(out, result);
}

// The overload that accepts the call: first as written, then (only if none
// does) reading one-element integer tensors as ints.
const Overload* resolve(const OpFunction& f, PyObject* const* pos, size_t npos, PyObject* kwargs, Parsed& p,
                        std::string& first_why) {
  for (int pass = 0; pass < 2; ++pass) {
    struct Restore {
      ~Restore() { t_tensor_as_int = false; }
    } restore;
    t_tensor_as_int = pass == 1;
    for (const Overload& o : f.overloads) {
      p = Parsed{};
      p.inputs.reserve(4);
      std::string why;
      if (parse(o, pos, npos, kwargs, p, why)) return &o;
      if (first_why.empty()) first_why = why;
    }
  }
  return nullptr;
}

nb::object call(const OpFunction& f, PyObject* const* pos, size_t npos, PyObject* kwargs) {
  std::string first_why;
  Parsed p;
  if (const Overload* found = resolve(f, pos, npos, kwargs, p, first_why)) {
    const Overload& o = *found;
    PyObject* out_obj = kwargs ? PyDict_GetItemString(kwargs, "out") : nullptr;
    if (out_obj == Py_None) out_obj = nullptr;
    if (out_obj && GradMode::is_enabled()) {
      for (auto& t : p.inputs)
        TP_CHECK(!(t.defined() && t.requires_grad()), Error, f.name,
                 "(): functions with out=... arguments don't support automatic differentiation, but one of the "
                 "arguments requires grad");
    }
    // zeros_like & co.: the result lives where self does unless device= says
    // otherwise, as in PyTorch. The filled ones already follow self's device in
    // C++ (then the move is none, or a download for device="cpu"); the random
    // ones draw on the host and are moved here.
    const bool like_of_cuda = f.name.size() > 5 && f.name.compare(f.name.size() - 5, 5, "_like") == 0 &&
                              !p.inputs.empty() && p.inputs[0].defined() &&
                              p.inputs[0].device().kind == Device::Kind::CUDA;
    if (like_of_cuda && !p.device_named && !p.cuda_device) p.cuda_device = p.inputs[0].device().index;
    // A factory (no tensor inputs, a device= parameter) without device= builds on the default device.
    if (!p.device_named && !p.cuda_device && p.inputs.empty())
      if (const std::optional<int> d = default_cuda_device())
        for (const auto& a : o.schema->args)
          if (a.type == ArgType::Device) {
            p.cuda_device = d;
            break;
          }
    const bool like_to_host = like_of_cuda && p.device_named && !p.cuda_device;
    std::vector<Tensor> results;
    if (graph::symbolic_tracing()) {
      // Dynamic shapes: the call's SymInt attributes reach the node(s) it records.
      graph::UserCall uc;
      uc.op = o.op;
      uc.sym_attrs = std::move(p.sym_attrs);
      uc.literals = std::move(p.literals);
      uc.attrs = p.attrs;
      uc.where_fn = &python_source_line;
      graph::UserCallScope scope(std::move(uc));
      results = with_op_name(f.name, [&] { return call_op(*o.op, p.inputs, p.attrs); });
    } else {
      results = with_op_name(f.name, [&] { return call_op(*o.op, p.inputs, p.attrs); });
    }
    if (p.memory_format) results[0] = apply_memory_format(results[0], *p.memory_format, f.name);
    if (p.cuda_device || like_to_host)
      // Recorded when tracing: rand_like of a CUDA tensor drew on the host, and an
      // unrecorded copy would be a free tensor of the graph (the capture's numbers
      // at every call).
      // (move_recorded moves an untraced result with a plain copy, like move_to.)
      for (auto& r : results) r = move_recorded(r, p.cuda_device, false, f.name.c_str());
    if (o.has_requires_grad && p.attrs.get_or<bool>("requires_grad", false))
      for (auto& r : results) {
        refuse_requires_grad_change(r, true);
        autograd::set_requires_grad(r, true);
      }
    if (o.op->has(kInplace)) return nb::borrow(pos[0]);  // the very object, as PyTorch does
    if (out_obj) {
      if (results.size() == 1) {
        TP_CHECK(nb::isinstance<Tensor>(nb::handle(out_obj)), TypeError, f.name, ": out must be a Tensor");
        Tensor& out = nb::cast<Tensor&>(nb::handle(out_obj));
        write_out(f.name, out, results[0]);
      } else {
        nb::handle outs(out_obj);
        TP_CHECK(PyTuple_Check(out_obj) && nb::len(outs) == results.size(), TypeError, f.name,
                 ": out must be a tuple of ", results.size(), " tensors");
        for (size_t i = 0; i < results.size(); ++i) write_out(f.name, nb::cast<Tensor&>(outs[i]), results[i]);
      }
      return nb::borrow(out_obj);
    }
    if (results.size() == 1 && !o.schema->returns_list) {
      // An operator that hands back an argument unchanged (contiguous() of a
      // contiguous tensor, to() of its own dtype) gives that very object, as
      // PyTorch does: an nn.Parameter stays one, `is` and id() hold.
      if (results[0].defined())
        for (size_t i = 0; i < npos; ++i)
          if (nb::isinstance<Tensor>(nb::handle(pos[i])) &&
              nb::cast<const Tensor&>(nb::handle(pos[i])).impl() == results[0].impl())
            return nb::borrow(pos[i]);
      if (npos > 0 && results[0].defined() && results[0].impl()->view_base) note_base_object(pos[0], results[0]);
      return nb::cast(std::move(results[0]));
    }
    nb::list items;
    for (auto& r : results) {
      if (npos > 0 && r.defined() && r.impl()->view_base) note_base_object(pos[0], r);
      items.append(nb::cast(std::move(r)));
    }
    if (!o.result_type.is_none()) return o.result_type(*nb::tuple(items));
    return nb::tuple(items);
  }
  // No overload fits: list them all, like PyTorch's message.
  std::string got;
  for (size_t i = 0; i < npos; ++i) got += (i ? ", " : "") + py_type_name(pos[i]);
  if (kwargs)
    for (auto [k, v] : nb::borrow<nb::dict>(kwargs))
      got += (got.empty() ? "" : ", ") + nb::cast<std::string>(k) + "=" + py_type_name(v.ptr());
  if (f.overloads.size() == 1)
    throw TypeError(str(f.name, "(): ", first_why, " (got (", got, "); expected ", f.overloads[0].schema->text, ")"));
  std::string sigs;
  for (auto& o : f.overloads) sigs += "\n  " + o.schema->text;
  throw TypeError(str(f.name, "() received an invalid combination of arguments - got (", got,
                      "), but expected one of:", sigs));
}

std::deque<OpFunction>& functions() {
  static auto* fs = new std::deque<OpFunction>();  // leaked: lives as long as the functions bound to it
  return *fs;
}

nb::object make_result_type(const OpFunction& f, const Schema& s) {
  if (s.returns.size() < 2) return nb::none();
  for (auto& n : s.returns)
    if (n.empty()) return nb::none();
  nb::list fields;
  for (auto& n : s.returns) fields.append(nb::str(n.c_str()));
  return nb::module_::import_("collections").attr("namedtuple")(nb::str(f.name.c_str()), fields);
}

// PyTorch's other names for operators registered under one name (torch.arccos
// is torch.acos, ...). Each alias gets its own OpFunction sharing the target's
// overloads, so argument errors name the function the user called; the
// dispatcher, autograd and the tracer only ever see the target operator.
constexpr std::pair<const char*, const char*> kAliases[] = {
    {"arccos", "acos"},         {"arccos_", "acos_"},         {"arcsin", "asin"},
    {"arcsin_", "asin_"},       {"arctan", "atan"},           {"arctan_", "atan_"},
    {"arccosh", "acosh"},       {"arccosh_", "acosh_"},       {"arcsinh", "asinh"},
    {"arcsinh_", "asinh_"},     {"arctanh", "atanh"},         {"arctanh_", "atanh_"},
    {"arctan2", "atan2"},       {"arctan2_", "atan2_"},       {"greater", "gt"},
    {"greater_", "gt_"},        {"greater_equal", "ge"},      {"greater_equal_", "ge_"},
    {"less", "lt"},             {"less_", "lt_"},             {"less_equal", "le"},
    {"less_equal_", "le_"},     {"not_equal", "ne"},          {"not_equal_", "ne_"},
    {"concat", "cat"},          {"concatenate", "cat"},       {"ger", "outer"},
    {"argwhere", "nonzero"},    {"clip", "clamp"},            {"clip_", "clamp_"},
    {"absolute", "abs"},        {"absolute_", "abs_"},        {"negative", "neg"},
    {"negative_", "neg_"},      {"multiply", "mul"},          {"multiply_", "mul_"},
    {"divide", "div"},          {"divide_", "div_"},          {"true_divide", "div"},
    {"true_divide_", "div_"},   {"subtract", "sub"},          {"subtract_", "sub_"},
    {"fix", "trunc"},           {"fix_", "trunc_"},           {"swapaxes", "transpose"},
    {"swapdims", "transpose"},  {"moveaxis", "movedim"},      {"row_stack", "vstack"},
    {"broadcast_to", "expand"},
};

void add_aliases(std::map<std::string, size_t>& index) {
  auto& fs = functions();
  for (auto [alias, target] : kAliases) {
    auto t = index.find(target);
    if (t == index.end() || index.count(alias)) continue;  // registered under its own name already
    OpFunction f = fs[t->second];  // copied before emplace_back: a deque reference stays valid, a copy is simplest
    f.name = alias;
    index.emplace(alias, fs.size());
    fs.push_back(std::move(f));
  }
}

void build_functions() {
  auto& fs = functions();
  if (!fs.empty()) return;
  std::map<std::string, size_t> index;
  for (const OpDef* op : all_ops()) {
    const Schema* s = op_schema(*op);
    if (!s || s->name.empty() || s->name[0] == '_') continue;
    auto it = index.find(s->name);
    if (it == index.end()) {
      it = index.emplace(s->name, fs.size()).first;
      fs.emplace_back();
      fs.back().name = s->name;
      fs.back().inplace = s->name.back() == '_';
    }
    OpFunction& f = fs[it->second];
    Overload o{op, s, {}, {}, nb::none(), !op->has(kView) && !op->has(kInplace), false};
    for (auto& a : s->args) {
      o.names.push_back(nb::steal(PyUnicode_InternFromString(a.name.c_str())));
      const char* alias = a.name == "dim" ? "axis" : a.name == "keepdim" ? "keepdims" : nullptr;
      o.aliases.push_back(alias ? nb::steal(PyUnicode_InternFromString(alias)) : nb::none());
      o.has_requires_grad |= a.name == "requires_grad" && a.type == ArgType::Bool;
    }
    o.result_type = make_result_type(f, *s);
    if (!s->args.empty() && s->args[0].name == "self") f.is_method = true;
    f.overloads.push_back(std::move(o));
  }
  add_aliases(index);
}

nb::object call_from_python(const OpFunction* f, nb::args args, nb::kwargs kwargs) {
  const size_t n = args.size();
  PyObject* const* pos = n ? &PyTuple_GET_ITEM(args.ptr(), 0) : nullptr;
  return call(*f, pos, n, kwargs.ptr());
}

}  // namespace

void rethrow_named(const std::string& called) {
  try {
    throw;
  } catch (const CaptureError&) {
    throw;
  } catch (const BackendError&) {
    throw;
  } catch (const cuda::DeviceIndexError&) {  // names the operator that passed the bad index, not this one
    throw;
  } catch (const tp::LinAlgError& e) {
    throw tp::LinAlgError(named_message(e.what(), called));
  } catch (const tp::TypeError& e) {
    throw tp::TypeError(named_message(e.what(), called));
  } catch (const tp::ValueError& e) {
    throw tp::ValueError(named_message(e.what(), called));
  } catch (const tp::IndexError& e) {
    throw tp::IndexError(named_message(e.what(), called));
  } catch (const tp::NotImplementedError& e) {  // no kernel for the device (CUDA)
    throw tp::NotImplementedError(named_message(e.what(), called));
  } catch (const tp::Error& e) {
    throw tp::Error(named_message(e.what(), called));
  }
}

void bind_generated_ops(nb::module_& m) {
  build_functions();
  nb::dict table;
  nb::handle tensor_cls = nb::type<Tensor>();
  for (const OpFunction& f : functions()) {
    const OpFunction* fp = &f;
    if (!f.inplace) {
      table[f.name.c_str()] = nb::cpp_function(
          [fp](nb::args a, nb::kwargs k) { return call_from_python(fp, std::move(a), std::move(k)); },
          nb::name(f.name.c_str()));
    }
    if (f.is_method) {
      // A method: `self` arrives as the first positional argument. A hand-written
      // method of the same name is removed first: nanobind would otherwise chain
      // the two as overloads and try the old one first.
      if (nb::hasattr(tensor_cls, f.name.c_str())) nb::delattr(tensor_cls, f.name.c_str());
      nb::object meth = nb::cpp_function(
          [fp](nb::args a, nb::kwargs k) { return call_from_python(fp, std::move(a), std::move(k)); },
          nb::name(f.name.c_str()), nb::scope(tensor_cls), nb::is_method());
      nb::setattr(tensor_cls, f.name.c_str(), meth);
    }
  }
  m.attr("_op_functions") = table;
  // The same contract for out= of functions written in Python (tp.linalg, composites).
  m.def("_write_out", [](const std::string& name, Tensor& out, const Tensor& result) { write_out(name, out, result); },
        nb::arg("name"), nb::arg("out"), nb::arg("result"));
  m.def("_op_schemas", [] {
    nb::dict d;
    for (const OpDef* op : all_ops())
      if (const Schema* s = op_schema(*op)) d[op->name] = nb::str(s->text.c_str());
    return d;
  });
}

}  // namespace tp::py
