// tp.compile's binding: the CompiledFunction object (its __call__ is the hot
// path of every compiled call), GraphModule, metrics, backend registration.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include <nanobind/stl/function.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>

#include "common.h"
#include "python_state.h"
#include "compile/dynamic_marks.h"
#include "autograd/forward_ad.h"
#include "compile/compiled_function.h"
#include "compile/metrics.h"
#include "graph/custom_function.h"
#include "graph/interpreter.h"
#include "graph/tracer.h"
#include "ops/dispatch.h"
#include "ops/ops.h"
#include "ops/schema.h"
#include "passes/passes.h"
#include "stax/backend/cuda_region.h"
#include "stax/backend/attention_fusion.h"
#include "stax/backend/gemm_epilogue.h"
#include "stax/runtime/region_times.h"
#include "stax/lowering/lower.h"
#include "stax/runtime/code_cache.h"
#include "stax/runtime/isa.h"

namespace tp::py {
namespace {

using compile::ArgValue;

// The Python type of CaptureError (tensorplay._C.CaptureError), looked up once.
PyObject* capture_error_type() {
  static PyObject* const t = nb::object(nb::module_::import_("tensorplay._C").attr("CaptureError")).release().ptr();
  return t;
}

// A capture failure raised inside the user's function: re-raised naming the
// user's source line (the innermost traceback frame outside the tensorplay
// package) and its text, so the message says where to change the code.
void name_user_line(nb::python_error& e) {
  if (!graph::is_tracing()) return;
  if (!e.matches(capture_error_type())) return;
  std::string msg = nb::cast<std::string>(nb::str(e.value()));
  if (msg.find("\n  at ") != std::string::npos) return;  // an inner capture already named it
  nb::object os = nb::module_::import_("os");
  std::string package =
      nb::cast<std::string>(os.attr("path").attr("dirname")(nb::module_::import_("tensorplay").attr("__file__")));
  std::string where, text;
  for (nb::object tb = e.traceback(); !tb.is_none(); tb = tb.attr("tb_next")) {
    std::string file = nb::cast<std::string>(tb.attr("tb_frame").attr("f_code").attr("co_filename"));
    if (file.compare(0, package.size(), package) == 0) continue;
    int line = nb::cast<int>(tb.attr("tb_lineno"));
    where = file + ":" + std::to_string(line);
    text = nb::cast<std::string>(nb::module_::import_("linecache").attr("getline")(file, line).attr("strip")());
  }
  if (where.empty()) return;
  throw CaptureError(str(msg, "\n  at ", where, text.empty() ? "" : ": " + text));
}

// An exception of the user's own (`raise ValueError`, an operator's error in
// eager's place) rather than a capture failure: the trace keeps the writes
// eager would have made before it (graph::note_user_exception).
void note_if_users_exception(nb::python_error& e) {
  static PyObject* const backend_error =
      nb::object(nb::module_::import_("tensorplay._C").attr("BackendError")).release().ptr();
  graph::note_user_exception(!e.matches(capture_error_type()) && !e.matches(backend_error));
}

// The graph handed to user backends and returned by tp.compiler.capture.
struct GraphModule {
  std::shared_ptr<const graph::Graph> graph;
  // Data gates of the capture (each with its guard-replay subgraph) and the inputs
  // it writes (their final values are the graph's last outputs, in this order).
  std::vector<graph::DataGate> gates;
  std::vector<int> mutated_inputs;
  std::string code() const { return graph->code(); }
  std::vector<Tensor> call(const std::vector<Tensor>& in) const { return graph::interpret(*graph, in); }
};

std::vector<Tensor> outputs_from_python(nb::handle r, bool* is_tuple) {
  std::vector<Tensor> out;
  if (nb::isinstance<Tensor>(r)) {
    *is_tuple = false;
    out.push_back(nb::cast<Tensor>(r));
    return out;
  }
  if (PyTuple_Check(r.ptr()) || PyList_Check(r.ptr())) {
    *is_tuple = true;
    for (nb::handle x : r) {
      TP_CHECK(nb::isinstance<Tensor>(x), CaptureError, "compiled functions must return a Tensor or a tuple of Tensors, got an element of type ",
               nb::inst_name(x).c_str());
      out.push_back(nb::cast<Tensor>(x));
    }
    return out;
  }
  throw CaptureError(str("compiled functions must return a Tensor or a tuple of Tensors, got ",
                         nb::inst_name(r).c_str()));
}

nb::object outputs_to_python(std::vector<Tensor>&& out, bool is_tuple) {
  if (!is_tuple && out.size() == 1) return nb::cast(std::move(out[0]));
  nb::list l;
  for (auto& t : out) l.append(nb::cast(std::move(t)));
  return nb::tuple(l);
}

// The 0-d tensors floating item() returned during captures (weak: a capture's
// values die with it; expired entries are dropped as the list grows).
std::vector<std::weak_ptr<TensorImpl>>& capture_items() {
  static std::vector<std::weak_ptr<TensorImpl>> items;  // the GIL serializes captures' Python code
  return items;
}

}  // namespace

void note_capture_item(const Tensor& t) {
  auto& v = capture_items();
  if (v.size() >= 64)
    v.erase(std::remove_if(v.begin(), v.end(), [](const auto& w) { return w.expired(); }), v.end());
  v.push_back(t.impl_ptr());
}

bool is_capture_item(const Tensor& t) {
  std::vector<Tensor> roots;
  for (const auto& w : capture_items()) {
    if (w.expired()) continue;
    if (w.lock().get() == t.impl()) return true;
    roots.push_back(Tensor(w.lock()));
  }
  // Arithmetic on item() values (`x.sum().item() * 2`): a Python float in eager.
  return !roots.empty() && t.dim() == 0 && is_floating(t.dtype()) && graph::computed_only_from(t, roots);
}

// (common.h) Set by the binding's refusals of autograd calls during a capture.
namespace {
thread_local bool t_step_refusal_flag = false;
}  // namespace
void note_step_refusal() { t_step_refusal_flag = true; }
bool take_step_refusal() { return std::exchange(t_step_refusal_flag, false); }

namespace {

// What a compiled function returned, with its tensors taken out: containers
// (tuple, list, dict, namedtuple), None and Python numbers/strings are kept, so
// every call gives back eager's structure (a 1-tuple stays a 1-tuple).
struct PyOutputStructure : compile::OutputStructure {
  // kItem: a tensor that is `t.item()` of a floating t in eager: returned as a Python float
  // (or the value of an int argument made symbolic: returned as a Python int).
  // kDataclass: a dataclass instance (a model's output record, as transformers'
  // ModelOutput) rebuilt from its fields; kOrderedDict: an OrderedDict (or a subclass
  // built from its pairs).
  enum Kind { kTensor, kItem, kTuple, kList, kDict, kNamedTuple, kConstant, kDataclass, kOrderedDict } kind = kTensor;
  size_t index = 0;                                        // kTensor: position among the tensors
  std::vector<std::unique_ptr<PyOutputStructure>> items;   // containers
  // kConstant value, kDict keys, kNamedTuple type, kDataclass (type, field names, init flags),
  // kOrderedDict (type, keys)
  std::shared_ptr<nb::object> object;

  static std::unique_ptr<PyOutputStructure> flatten(nb::handle r, std::vector<Tensor>* tensors) {
    auto s = std::make_unique<PyOutputStructure>();
    if (nb::isinstance<Tensor>(r)) {
      s->index = tensors->size();
      tensors->push_back(nb::cast<Tensor>(r));
      if (is_capture_item(tensors->back())) s->kind = kItem;
      return s;
    }
    PyObject* p = r.ptr();
    if (auto v = is_symint(r) ? symint_value_tensor(r) : std::nullopt) {
      // An int argument made symbolic (plus a constant) returned: its value input,
      // read back as a Python int at every call.
      s->kind = kItem;
      s->index = tensors->size();
      tensors->push_back(ops::add(*v, Tensor::wrapped_scalar(Scalar(int64_t{0}))));
      return s;
    }
    if (is_symint(r)) {  // a size returned as a number: the version is for that size (specialized)
      s->kind = kConstant;
      s->object = keep_py(nb::int_(symint_specialize(r)));
      return s;
    }
    // A dtype (`return y, y.dtype`) is immutable and fixed by the specialization key (input dtypes,
    // the default dtype), so it is a constant of the version like a number; it used to be refused.
    if (p == Py_None || PyBool_Check(p) || PyLong_Check(p) || PyFloat_Check(p) || PyComplex_Check(p) ||
        PyUnicode_Check(p) || nb::isinstance<DType>(r)) {
      s->kind = kConstant;
      s->object = keep_py(nb::borrow(r));
      return s;
    }
    if (PyTuple_Check(p) || PyList_Check(p)) {
      s->kind = PyTuple_CheckExact(p) ? kTuple : PyList_CheckExact(p) ? kList : kNamedTuple;
      if (s->kind == kNamedTuple) {
        TP_CHECK(PyTuple_Check(p) && nb::hasattr(r, "_make"), CaptureError,
                 "compiled functions must return tensors, numbers, None, or tuples/lists/dicts of them, got ",
                 nb::inst_name(r).c_str());
        s->object = keep_py(nb::borrow(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(p)))));
      }
      for (nb::handle x : r) s->items.push_back(flatten(x, tensors));
      return s;
    }
    if (PyDict_CheckExact(p)) {
      s->kind = kDict;
      nb::list keys;
      for (auto [k, v] : nb::borrow<nb::dict>(r)) {
        keys.append(k);
        s->items.push_back(flatten(v, tensors));
      }
      s->object = keep_py(std::move(keys));
      return s;
    }
    if (!PyType_Check(p) && nb::hasattr(r, "__dataclass_fields__")) {
      // A dataclass instance (checked before dicts: transformers' ModelOutput is both).
      s->kind = kDataclass;
      nb::list names, inits;
      for (nb::handle f : nb::module_::import_("dataclasses").attr("fields")(r)) {
        nb::object name = f.attr("name");
        names.append(name);
        inits.append(f.attr("init"));
        s->items.push_back(flatten(nb::getattr(r, name), tensors));
      }
      s->object = keep_py(nb::make_tuple(nb::borrow(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(p)))), names, inits));
      return s;
    }
    if (PyDict_Check(p) && PyObject_IsInstance(p, nb::module_::import_("collections").attr("OrderedDict").ptr()) == 1) {
      s->kind = kOrderedDict;
      nb::list keys;
      for (auto [k, v] : nb::borrow<nb::dict>(r)) {
        keys.append(k);
        s->items.push_back(flatten(v, tensors));
      }
      s->object = keep_py(nb::make_tuple(nb::borrow(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(p)))), keys));
      return s;
    }
    throw CaptureError(str("compiled functions must return tensors, numbers, None, or tuples/lists/dicts ",
                           "(OrderedDicts, dataclasses) of them, got ", nb::inst_name(r).c_str()));
  }

  // `tensors`: the Python objects of the results, in flattening order.
  nb::object build(const std::vector<nb::object>& tensors) const {
    switch (kind) {
      case kTensor: return tensors.at(index);
      case kItem: {  // (a float argument returned as it is: the caller's float object already)
        const nb::object& o = tensors.at(index);
        return PyFloat_Check(o.ptr()) ? o : o.attr("item")();
      }
      case kConstant: return *object;
      case kTuple:
      case kNamedTuple: {
        nb::object t = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(items.size())));
        for (size_t i = 0; i < items.size(); ++i)
          PyTuple_SET_ITEM(t.ptr(), static_cast<Py_ssize_t>(i), items[i]->build(tensors).release().ptr());
        return kind == kTuple ? t : (*object).attr("_make")(t);
      }
      case kList: {
        nb::list l;
        for (auto& it : items) l.append(it->build(tensors));
        return l;
      }
      case kDict: {
        nb::dict d;
        nb::list keys = nb::borrow<nb::list>(*object);
        for (size_t i = 0; i < items.size(); ++i) d[keys[i]] = items[i]->build(tensors);
        return d;
      }
      case kDataclass: {
        nb::tuple spec = nb::borrow<nb::tuple>(*object);
        nb::list names = nb::borrow<nb::list>(spec[1]), inits = nb::borrow<nb::list>(spec[2]);
        nb::dict kw;
        std::vector<std::pair<nb::object, nb::object>> later;  // init=False fields: set after construction
        for (size_t i = 0; i < items.size(); ++i) {
          nb::object v = items[i]->build(tensors);
          if (nb::cast<bool>(inits[i])) kw[names[i]] = v;
          else later.emplace_back(names[i], std::move(v));
        }
        nb::object args = nb::steal(PyTuple_New(0));
        PyObject* made = PyObject_Call(spec[0].ptr(), args.ptr(), kw.ptr());
        if (!made) throw nb::python_error();
        nb::object obj = nb::steal(made);
        nb::object setattr = nb::module_::import_("builtins").attr("object").attr("__setattr__");
        for (auto& [k, v] : later) setattr(obj, k, v);  // (a frozen dataclass refuses setattr)
        return obj;
      }
      case kOrderedDict: {
        nb::tuple spec = nb::borrow<nb::tuple>(*object);
        nb::list keys = nb::borrow<nb::list>(spec[1]);
        nb::list pairs;
        for (size_t i = 0; i < items.size(); ++i) pairs.append(nb::make_tuple(keys[i], items[i]->build(tensors)));
        return spec[0](pairs);
      }
    }
    return nb::none();
  }
};

// Re-reads a free tensor through its owner at every call: a root object (a
// module, a function's globals dict, a closure cell) and attribute / item / cell
// steps from it, found by compiler._locate_free_tensors at capture.
struct FreeTensorPath {
  enum Kind { kAttr, kItem, kCell };
  std::shared_ptr<nb::object> root;
  std::vector<std::pair<Kind, std::shared_ptr<nb::object>>> steps;
#ifdef TP_DICT_VERSIONS
  PathCache cache;  // walked again only when something along the path changed
#endif

  // The object at the end of the path (null when a step fails).
  nb::object value() {
#ifdef TP_DICT_VERSIONS
    return cache.through([this] { return walk(); });
#else
    return walk();
#endif
  }
  nb::object walk() {
    nb::object cur = *root;
    for (auto& [kind, key] : steps) {
#ifdef TP_DICT_VERSIONS
      if (kind == kAttr) cache.note_attr(cur, key->ptr());
      else if (kind == kItem) cache.note_item(cur, key->ptr());
      else cache.note_cell(cur);
#endif
      if (kind == kCell) {
        PyObject* r = PyCell_Check(cur.ptr()) ? PyCell_Get(cur.ptr()) : nullptr;
        if (!r) PyErr_Clear();
        cur = r ? nb::steal(r) : nb::object();
      } else {
        cur = path_step(cur, key->ptr(), kind == kAttr);
      }
      if (!cur.is_valid()) return cur;  // gone: the guard fails and the next capture sees what eager sees
    }
    return cur;
  }

  Tensor read() {
    nb::object cur = value();
    if (!cur.is_valid() || !nb::isinstance<Tensor>(cur)) return Tensor();
    return nb::cast<Tensor>(cur);
  }
};

// The free tensors a compiled function's captures found through an owner, by
// their tensor at capture: a result that is one of them (eager returned
// `self.buf` or `self.weight`) is handed back as the Python object the path
// reads now, as eager does (the same object, an nn.Parameter still one), not a
// new wrapper of the same tensor.
struct FreeObjects {
  std::unordered_map<const TensorImpl*, std::shared_ptr<FreeTensorPath>> by_impl;
  void note(const TensorImpl* t, const std::shared_ptr<FreeTensorPath>& path) {
    if (by_impl.size() >= 4096) by_impl.clear();  // stale entries (find() checks each hit anyway)
    by_impl[t] = path;
  }
  // The object the owner holds now when it is the tensor `t`, else an invalid handle.
  nb::object find(const Tensor& t) const {
    if (by_impl.empty() || !t.defined()) return nb::object();
    auto it = by_impl.find(t.impl());
    if (it == by_impl.end()) return nb::object();
    nb::object v = it->second->value();
    if (v.is_valid() && nb::isinstance<Tensor>(v) && nb::cast<const Tensor&>(v).impl() == t.impl()) return v;
    return nb::object();
  }
};

compile::FreeTensorLocator python_locator(std::shared_ptr<nb::object> fn, std::shared_ptr<FreeObjects> objects) {
  return [fn, objects](const std::vector<Tensor>& found) {
    std::vector<compile::FreeTensorSource> out;
    if (found.empty()) return out;
    nb::list ids;
    for (auto& t : found) ids.append(reinterpret_cast<uintptr_t>(t.impl()));
    nb::object paths = nb::module_::import_("tensorplay.compiler").attr("_locate_free_tensors")(*fn, ids);
    for (size_t k = 0; k < found.size(); ++k) {
      nb::object p = paths[k];
      Tensor t = found[k];
      if (!p.is_none()) {
        // (root, ((kind, key), ...), name), kind in "attr" / "item" / "cell"
        auto path = std::make_shared<FreeTensorPath>();
        path->root = keep_py(nb::borrow(p[0]));
        for (nb::handle st : p[1]) {
          std::string kind = nb::cast<std::string>(st[0]);
          auto k2 = kind == "attr" ? FreeTensorPath::kAttr : kind == "item" ? FreeTensorPath::kItem : FreeTensorPath::kCell;
          path->steps.emplace_back(k2, keep_py(nb::borrow(st[1])));
        }
        // Only a path that leads to this very tensor now is trusted.
        Tensor now = path->read();
        if (now.defined() && now.impl() == t.impl()) {
          objects->note(t.impl(), path);
          // The owner may be given another tensor later (`self.buf = ...`): noted when read.
          auto last = std::make_shared<const TensorImpl*>(t.impl());
          out.push_back({[path, objects, last] {
                           Tensor r = path->read();
                           if (r.defined() && r.impl() != *last) {
                             *last = r.impl();
                             objects->note(r.impl(), path);
                           }
                           return r;
                         },
                         nb::cast<std::string>(p[2]), true});
          continue;
        }
      }
      out.push_back({[t] { return t; }, str("free tensor ", dtype_name(t.dtype()), shape_str(t.sizes())), false});
    }
    return out;
  };
}

// The Python-level entry of a compiled call (CPython's vectorcall protocol: the
// arguments arrive as an array, no tuple or dict is built for a positional call).
PyObject* compiled_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) noexcept;

// Borrowed view of a call's positional arguments.
struct ArgArray {
  PyObject* const* items;
  size_t n;
  size_t size() const { return n; }
  nb::handle operator[](size_t i) const { return items[i]; }
  nb::tuple tuple() const {
    nb::object t = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(n)));
    if (!t.is_valid()) throw nb::python_error();
    for (size_t i = 0; i < n; ++i) PyTuple_SET_ITEM(t.ptr(), static_cast<Py_ssize_t>(i), Py_NewRef(items[i]));
    return nb::borrow<nb::tuple>(t);
  }
};

// Automatic dynamic float attributes: while a capture runs, the owners of the
// floats lifted to inputs (ModuleState::lifted) hold the graph inputs in their
// place, so `self.temperature` or `cfg.beta` reads the 0-d float64 wrapped number
// the graph takes (a result computed from it alone is a float again, as for float
// arguments); restored afterwards. A write to one of them in the function
// (`self.t *= 0.99`, `self.t = self.t * 2`, an in-place update of the tensor) is
// Python state a compiled version would not repeat: finish() says so, and the
// call is captured again with the numbers (kept by value from then on).
struct AttrInstall {
  struct Slot {
    nb::object where, at, old, installed;  // a dict and key, or a cell (key None)
    Tensor t;
    uint64_t version = 0;
  };
  std::vector<Slot> slots;
  static nb::object get(const Slot& s) {
    PyObject* v = s.at.is_none() ? PyCell_GET(s.where.ptr()) : PyDict_GetItemWithError(s.where.ptr(), s.at.ptr());
    if (!v) PyErr_Clear();
    return v ? nb::borrow(v) : nb::object();
  }
  static void put(const Slot& s, const nb::object& v) {
    int rc = s.at.is_none() ? PyCell_Set(s.where.ptr(), v.ptr()) : PyDict_SetItem(s.where.ptr(), s.at.ptr(), v.ptr());
    if (rc != 0) PyErr_Clear();
  }
  void install(ModuleState& st, const ArgValue* inputs, size_t n) {
    for (size_t j = 0; j < n; ++j) {
      const ModuleState::Lift& lift = st.lifted.at(j);
      Slot s;
      bool ok;
      if (lift.module >= 0) {
        ok = instance_dict_slot(*st.mods.at(static_cast<size_t>(lift.module)), lift.key, &s.where);
        s.at = lift.key;
      } else {
        ok = st.sources.at(static_cast<size_t>(lift.source)).place(&s.where, &s.at);
      }
      if (ok) s.old = get(s);
      TP_CHECK(ok && s.old.ptr() == lift.value.ptr(), CaptureError, "the float ", lift.name,
               " cannot be passed to the compiled code as an input (its owner cannot hold another object while "
               "the call is captured)");
      s.t = std::get<Tensor>(inputs[j]);
      s.version = s.t.version();
      s.installed = nb::cast(s.t);
      note_capture_item(s.t);
      put(s, s.installed);
      slots.push_back(std::move(s));
    }
  }
  // Puts the floats back; the name of one the function wrote, or empty. Also
  // a number computed from them alone and stored in the state the function reads
  // (`self.scale = self.t * 2`, `cfg.derived = cfg.t + 1`: a float in eager)
  // counts: left there, the graph's tensor would reach the user's Python code.
  // `written_id`: the written float's ModuleState::floats key (empty for a stored number).
  std::string restore(const ModuleState* st, std::string* written_id = nullptr) {
    std::string written;
    for (size_t j = slots.size(); j-- > 0;) {
      Slot& s = slots[j];
      nb::object now = get(s);
      if (written.empty() && st && (now.ptr() != s.installed.ptr() || s.t.version() != s.version)) {
        written = st->lifted.at(j).name;
        if (written_id) *written_id = st->lifted.at(j).id;
      }
      put(s, s.old);
    }
    const bool check = st && written.empty() && !slots.empty();
    slots.clear();
    if (!check) return written;
    auto number_of_capture = [](PyObject* v) {
      return v && nb::isinstance<Tensor>(v) && is_capture_item(nb::cast<const Tensor&>(nb::handle(v)));
    };
    for (size_t m = 0; m < st->attr_dicts.size(); ++m) {
      PyObject* d = st->attr_dicts[m] ? st->attr_dicts[m]->ptr() : nullptr;
      Py_ssize_t pos = 0;
      PyObject *key, *value;
      while (d && PyDict_Next(d, &pos, &key, &value))
        if (number_of_capture(value)) {
          nb::object k = nb::str(key);
          return str(Py_TYPE(st->mods[m]->ptr())->tp_name, ".", nb::cast<std::string>(k));
        }
    }
    for (const ModuleState::Source& src : st->sources)
      if (number_of_capture(src.value().ptr())) return src.name;
    return written;
  }
  ~AttrInstall() { restore(nullptr); }
};

struct PyCompiled {
  // First member, at the offset the type's tp_vectorcall_offset names (every
  // instance is made inline by _compile, so that offset is the same for all).
  vectorcallfunc vectorcall = compiled_vectorcall;
  std::unique_ptr<compile::CompiledFunction> fn;
  nb::object wrapped;  // the user's function (kept for __wrapped__)

  nb::object binder;   // compiler._make_binder(fn): resolves keywords and defaults, or None
  // The binder runs for every call, positional ones too (a function with *args,
  // whose tuple is one argument of the compiled function: any count of positional
  // arguments may be a call that needs binding). Set by `binder._tp_always`.
  bool bind_always = false;
  // compiler._NestedInputs: calls with tuple/list/dict arguments go there (flattened
  // into a compiled function of the leaves, one per argument structure).
  nb::object nested;
  // tp.compile(module): while a module of its tree has forward hooks, calls go to
  // `hooked` (compiler._CompiledModule: the hooks run eagerly at every call, as
  // module.compile() does) rather than into a capture that would run them once.
  nb::object hooked;
  // compiler's _stepwise.Runner (None under fullgraph=True or strict_native): a
  // function whose capture was refused (an autograd call of a training step:
  // loss.backward(), opt.zero_grad(), opt.step(); or any other CaptureError, a
  // graph break) runs as Python from then on, its module calls and optimizer
  // steps compiled; `stepwise_on` once switched.
  nb::object stepwise;
  bool stepwise_on = false;
  std::shared_ptr<ModuleState> state;
  std::shared_ptr<FreeObjects> free_objects = std::make_shared<FreeObjects>();
  // Automatic dynamic floats: a Python float argument whose value changed between
  // calls is passed from then on as a 0-d float64 wrapped-number tensor (promoted
  // as a Python number, a graph input): one version serves every value, as
  // PyTorch 2's automatic dynamic does. A capture that fails with it (the value
  // used where an operator needs a number, `alpha=t`) retries with the number,
  // and that argument stays specialized by value.
  struct FloatArg {
    double first = 0;
    bool seen = false, dynamic = false, refused = false;
  };
  std::vector<FloatArg> float_args;
  // Shared with the function the capture calls: the positions passed as such
  // tensors in this call (noted as item()-like values: returned, they are floats
  // again) and whether a capture ran.
  std::shared_ptr<std::vector<char>> lifted = std::make_shared<std::vector<char>>();
  std::shared_ptr<bool> captured = std::make_shared<bool>(false);
  // Automatic dynamic ints: a Python int argument whose value changed between
  // calls (with dynamic=None; from the first call with dynamic=True) is passed
  // from then on as two tensors: in its place a uint8 tensor of size value + 2,
  // whose dim the capture makes symbolic (the int is a size symbol of the shape
  // env like any tensor dim, offset by 2 so that 0 and 1 are in its range), and
  // appended after the user's arguments a 0-d int64 wrapped-number tensor with
  // its value, which the capture uses where the int meets tensors as a number
  // (`x + pos`: promoted as a Python int, symint_value_tensor). The function sees
  // `size - 2`: a tp.SymInt while a symbolic capture runs. A capture that fails
  // with it, or specializes it (`range(pos)`, `int(pos)`, an operator that has no
  // symbolic form for it), keeps that argument by value from then on.
  struct IntArg {
    int64_t first = 0;
    bool seen = false, dynamic = false, refused = false;
    int64_t last = -1;
    Tensor size, value;  // the tensors of the last value (reused while it repeats)
  };
  std::vector<IntArg> int_args;
  struct IntLift {
    std::vector<char> pos;  // per user argument: passed as a size tensor
    size_t extra = 0;       // value tensors appended (one per lifted int, in order)
    size_t total = 0;       // the call's argument count with them
  };
  std::shared_ptr<IntLift> int_lift = std::make_shared<IntLift>();
  // Automatic dynamic float attributes (ModuleState::floats): the floats of the
  // Python state the capture can read (module attributes, `cfg.x`, globals,
  // closure variables) that changed between calls are appended after the user's
  // arguments and the int value tensors as 0-d float64 wrapped numbers, and put
  // in their owners' place while a capture runs (AttrInstall): one version
  // serves every value, as for float arguments.
  struct AttrLift {
    std::shared_ptr<ModuleState> state;
    size_t count = 0, total = 0;  // appended this call; the call's argument count with them
    std::string written;          // the float the failed capture wrote (its floats key)
  };
  std::shared_ptr<AttrLift> attr_lift = std::make_shared<AttrLift>();
  // module_state_reader(state), also given to fn (which then takes the text read here).
  std::function<const std::string&()> module_reader;
  // Per lifted float: the float object and its tensor, reused while it repeats
  // (so the first-level entry still hits while the value does not change).
  std::vector<std::pair<nb::object, Tensor>> attr_tensors;
  std::vector<ArgValue> values_scratch;  // call_positional's argument vector, reused
  bool values_busy = false;
  // The state reader is module_state_reader(state), not yet found to read nothing.
  bool state_reader_droppable = false;

  // args[0..n) positional, then one value per name of `kwnames` (a tuple, or null).
  nb::object call(PyObject* const* args, size_t n, PyObject* kwnames) {
    // The slow paths below take the arguments as Python calls do.
    auto forward = [&](nb::handle callee) {
      PyObject* r = PyObject_Vectorcall(callee.ptr(), args, n, kwnames);
      if (!r) throw nb::python_error();
      return nb::steal(r);
    };
    if (stepwise_on) return forward(stepwise);
    if (state && hooked.is_valid() && !hooked.is_none() && state->has_hooks()) return forward(hooked);
    if (stepwise.is_valid() && !stepwise.is_none() && !graph::is_tracing()) {
      take_step_refusal();  // (a refusal left over from a capture the user's code caught)
      std::string graph_break;  // a capture refused for another reason: its message
      try {
        return call_unhooked(args, n, kwnames, forward);
      } catch (nb::python_error& e) {
        // The failed capture put back the writes and draws it made, so the
        // step-wise run starts from the caller's state (Python side effects
        // before the refused call ran once more: the static check in compiler.py
        // switches a function that names backward/zero_grad before any capture).
        if (!take_step_refusal()) {
          if (!e.matches(capture_error_type())) throw;
          graph_break = nb::cast<std::string>(nb::str(e.value()));
        }
      } catch (const CaptureError& e) {
        if (!take_step_refusal()) graph_break = e.what();
      }
      // fullgraph=False (PyTorch's default): what the capture refuses (t.numpy(),
      // a dual level, a hook on an interior result...) is a graph break. The
      // function runs as Python from then on, its modules and optimizer steps
      // compiled, with one warning naming the reason (the Runner warns).
      stepwise.attr("switched")(graph_break.empty() ? nb::none() : nb::object(nb::str(graph_break.c_str())));
      stepwise_on = true;
      if (const char* e = std::getenv("TP_LOGS"); e && std::string(e).find("recompiles") != std::string::npos)
        std::fprintf(stderr, "[tp.compile] %s: it runs step-wise from now on\n",
                     graph_break.empty() ? "an autograd call inside the function" : "a graph break");
      return forward(stepwise);
    }
    return call_unhooked(args, n, kwnames, forward);
  }

  template <class Forward>
  nb::object call_unhooked(PyObject* const* args, size_t n, PyObject* kwnames, Forward& forward) {
    const size_t nkw = kwnames ? static_cast<size_t>(PyTuple_GET_SIZE(kwnames)) : 0;
    // Forward-mode AD propagates tangents in the dispatcher hook, which the
    // generated code and the first-level entry never reach: while a dual level
    // is open the function runs eagerly, so its results carry tangents as
    // without tp.compile (a compiled run would drop them silently).
    if (autograd::forward_ad::current_level() >= 0 && !wrapped.is_none()) {
      TP_CHECK(!fn->options().strict_native, BackendError,
               "tp.compile(strict_native=True): forward-mode AD (a tp.autograd.forward_ad.dual_level is open) is not "
               "compiled; call the function outside the dual level or without strict_native");
      return forward(wrapped);
    }
    // Keyword arguments and defaults are resolved against the signature on a
    // slow path; the common positional call goes straight to C++.
    int num_params = fn->num_params();
    if ((nkw > 0 || bind_always || (num_params >= 0 && static_cast<int>(n) != num_params)) && !binder.is_none()) {
      nb::dict kwargs;
      for (size_t k = 0; k < nkw; ++k) kwargs[nb::handle(PyTuple_GET_ITEM(kwnames, static_cast<Py_ssize_t>(k)))] = nb::handle(args[n + k]);
      nb::object bound = binder(ArgArray{args, n}.tuple(), kwargs);
      nb::tuple t = nb::borrow<nb::tuple>(bound);
      return call_positional(ArgArray{&PyTuple_GET_ITEM(t.ptr(), 0), static_cast<size_t>(PyTuple_GET_SIZE(t.ptr()))});
    }
    TP_CHECK(nkw == 0, TypeError, "compiled function: keyword arguments are not supported for this callable");
    return call_positional(ArgArray{args, n});
  }

  void refuse_int(size_t i, const char* why) {
    IntArg& ia = int_args[i];
    if (ia.refused) return;
    ia.refused = true;
    ia.size = Tensor();
    ia.value = Tensor();
    if (const char* e = std::getenv("TP_LOGS"); e && std::string(e).find("recompiles") != std::string::npos)
      std::fprintf(stderr, "[tp.compile] argument %zu: an int kept by value from now on: %s\n", i, why);
  }

  // Automatic dynamic ints (see IntArg): replaces the lifted ints of `values` by
  // their size tensors and appends their value tensors; returns how many.
  size_t lift_ints(ArgArray args, std::vector<ArgValue>& values) {
    using D = compile::CompileOptions::Dynamic;
    const compile::CompileOptions& o = fn->options();
    // Shape buckets pad dynamic dims: a padded size tensor would change the int.
    if (graph::is_tracing() || o.dynamic == D::Off || o.options.count("shape_buckets")) return 0;
    // options={"dynamic_ints": False}: every int argument by value (the opt-out).
    if (auto it = o.options.find("dynamic_ints");
        it != o.options.end() && (it->second == "0" || it->second == "False" || it->second == "false"))
      return 0;
    // A size tensor of (value + 2) bytes is allocated (untouched) per new value: larger ints stay by value.
    constexpr int64_t kMaxLifted = int64_t{1} << 24;
    if (int_args.size() < values.size()) int_args.resize(values.size());
    size_t count = 0;
    std::vector<Tensor> extra;
    for (size_t i = 0; i < args.size(); ++i) {
      PyObject* h = args[i].ptr();
      if (!PyLong_CheckExact(h)) continue;  // (bool is not: True/False stay by value, as in PyTorch)
      IntArg& ia = int_args[i];
      const int64_t v = std::get<Scalar>(values[i]).to_int();
      if (!ia.seen) {
        ia.seen = true;
        ia.first = v;
        ia.dynamic = o.dynamic == D::On;
      } else if (!ia.dynamic && !ia.refused && v != ia.first) {
        ia.dynamic = true;
        if (const char* e = std::getenv("TP_LOGS"); e && std::string(e).find("recompiles") != std::string::npos)
          std::fprintf(stderr, "[tp.compile] argument %zu: an int that changed between calls is symbolic from now on\n", i);
      }
      if (!ia.dynamic || ia.refused || v < 0 || v > kMaxLifted) continue;
      if (!ia.size.defined() || ia.last != v) {
        ia.size = ops::empty({v + 2}, DType::UInt8);
        compile::DimMark mk;
        mk.dynamic = true;
        compile::mark_dim(ia.size, 0, mk);
        ia.value = Tensor::wrapped_scalar(Scalar(v));
        ia.last = v;
      }
      if (count == 0) int_lift->pos.assign(args.size(), 0);
      int_lift->pos[i] = 1;
      values[i] = ia.size;
      extra.push_back(ia.value);
      ++count;
    }
    if (count == 0) return 0;
    for (Tensor& t : extra) values.emplace_back(std::move(t));
    int_lift->extra = count;
    int_lift->total = values.size();
    fn->set_extra_args(static_cast<int>(count));
    return count;
  }

  // Automatic dynamic float attributes (AttrLift): reads the state (its text then
  // stands for this call) and appends the lifted floats' tensors; returns how many.
  size_t lift_attrs(std::vector<ArgValue>& values) {
    attr_lift->count = 0;
    attr_lift->total = 0;
    if (!module_reader || !state || graph::is_tracing()) return 0;
    state->fresh = false;
    module_reader();
    state->fresh = true;
    const auto& lifted_now = state->lifted;
    if (lifted_now.empty()) return 0;
    if (attr_tensors.size() < lifted_now.size()) attr_tensors.resize(lifted_now.size());
    for (size_t j = 0; j < lifted_now.size(); ++j) {
      auto& [obj, t] = attr_tensors[j];
      if (obj.ptr() != lifted_now[j].value.ptr() || !t.defined()) {
        obj = lifted_now[j].value;
        t = Tensor::wrapped_scalar(Scalar(float_number_value(obj.ptr())));
      }
      values.emplace_back(t);
    }
    attr_lift->count = lifted_now.size();
    attr_lift->total = values.size();
    return lifted_now.size();
  }

  // After a version was built with lifted floats: one that a data gate reads as a
  // Python number (`float(self.t)`, `math.exp(self.t)`, `round(self.t, 2)`,
  // `int(...)`) has its value baked in behind a guard on that value, so every new
  // value would be one more gated version: it is kept by value from now on. A
  // branch (`if self.t > 0.5:`, a bool gate) is a guard on the comparison and
  // stays: a version per side.
  void refuse_specialized_attrs(const std::vector<ArgValue>& values) {
    size_t tensors = 0;
    for (const ArgValue& v : values)
      if (std::holds_alternative<Tensor>(v)) ++tensors;
    const size_t first = tensors - attr_lift->count;  // the lifted floats are the call's last tensors
    std::vector<size_t> which;
    for (const graph::DataGate& gate : fn->last_gates()) {
      if (gate.kind == "bool" || gate.kind == "numel" || !gate.guard) continue;
      for (auto& n : gate.guard->nodes())
        if (n->opcode == graph::Opcode::Placeholder && n->input_index >= static_cast<int>(first) &&
            n->input_index < static_cast<int>(tensors) && !n->users.empty())
          which.push_back(static_cast<size_t>(n->input_index) - first);
    }
    if (!which.empty()) refuse_attrs("the capture read it as a Python number (float(), int(), round(), math.*)", &which);
  }

  // Keeps the lifted floats of this call (all, or those at `which`) by value from now on.
  void refuse_attrs(const char* why, const std::vector<size_t>* which = nullptr) {
    const size_t n = std::min(attr_lift->count, state->lifted.size());
    for (size_t j = 0; j < n; ++j) {
      if (which && std::find(which->begin(), which->end(), j) == which->end()) continue;
      const ModuleState::Lift& lift = state->lifted[j];
      state->floats[lift.id].refused = true;
      if (const char* e = std::getenv("TP_LOGS"); e && std::string(e).find("recompiles") != std::string::npos)
        std::fprintf(stderr, "[tp.compile] %s: a float kept by value from now on: %s\n", lift.name.c_str(), why);
    }
    state->rebuild = true;
  }

  // A result that is a view of an argument: its `_base` is the caller's object,
  // as in eager (`f(x)._base is x` for `f = lambda x: x[1:]`).
  static void note_output_base(ArgArray args, const Tensor& out) {
    if (!out.defined() || !out.impl()->view_base) return;
    for (size_t i = 0; i < args.size() && !out.impl()->base_py; ++i) note_base_object(args[i], out);
  }

  nb::object call_positional(ArgArray args) {
    // The argument vector is kept between calls (no allocation per call), and
    // emptied before returning: a call holds no reference to its arguments after.
    // A call made while one runs (a capture calling this very function) uses its own.
    std::vector<ArgValue> own;
    const bool reuse = !values_busy;
    std::vector<ArgValue>& values = reuse ? values_scratch : own;
    struct Release {
      std::vector<ArgValue>& v;
      bool* busy;
      ~Release() {
        v.clear();
        if (busy) *busy = false;
      }
    } release{values, reuse ? &values_busy : nullptr};
    values_busy = true;
    values.reserve(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      nb::handle h = args[i];
      if (nb::isinstance<Tensor>(h)) {
        values.emplace_back(nb::cast<Tensor>(h));
      } else if (auto s = to_scalar(h)) {
        values.emplace_back(*s);
      } else if (nested.is_valid() && !nested.is_none()) {
        // Containers, None (an omitted optional such as optimizer.step's closure),
        // strings and other objects (a module, a generator, a config): the nested
        // path passes them through as part of the key (objects by identity).
        return nested(args.tuple());
      } else {
        throw TypeError(str("compiled function: argument ", i, " has unsupported type ", nb::inst_name(h).c_str(),
                            " (expected a Tensor, a number, or a tuple/list/dict of them)"));
      }
    }
    const compile::OutputStructure* structure = nullptr;
    std::vector<Tensor> out;
    bool any_lifted = false;
    if (!graph::is_tracing()) {
      if (float_args.size() < values.size()) float_args.resize(values.size());
      for (size_t i = 0; i < values.size(); ++i) {
        PyObject* h = args[i].ptr();
        if (!is_float_number(h)) continue;  // (numpy.float64 / numpy.float32 too)
        FloatArg& fa = float_args[i];
        double v = float_number_value(h);
        if (!fa.seen) {
          fa.seen = true;
          fa.first = v;
        } else if (!fa.dynamic && !fa.refused && std::memcmp(&v, &fa.first, sizeof v) != 0) {
          fa.dynamic = true;
          if (const char* e = std::getenv("TP_LOGS"); e && std::string(e).find("recompiles") != std::string::npos)
            std::fprintf(stderr, "[tp.compile] argument %zu: a float that changed between calls is an input from now on\n", i);
        }
        if (fa.dynamic && !fa.refused) {
          if (!any_lifted) lifted->assign(values.size(), 0);
          values[i] = Tensor::wrapped_scalar(Scalar(v));
          (*lifted)[i] = 1;
          any_lifted = true;
        }
      }
    }
    const size_t ints = lift_ints(args, values);
    const size_t attrs = lift_attrs(values);
    if (attrs > 0) fn->set_extra_args(static_cast<int>(ints + attrs));
    struct ClearInts {
      PyCompiled* c;
      bool on;
      ~ClearInts() {
        if (!on) return;
        c->int_lift->pos.clear();
        c->int_lift->extra = 0;
        c->int_lift->total = 0;
        c->attr_lift->count = 0;
        c->attr_lift->total = 0;
        c->fn->set_extra_args(0);
      }
    } clear_ints{this, ints > 0 || attrs > 0 || any_lifted};
    if (any_lifted || ints > 0 || attrs > 0) {
      *captured = false;
      const uint64_t builds = fn->builds();
      size_t attrs_now = attrs;
      for (;;) {
        attr_lift->written.clear();
        try {
          graph::RestoreWritesOnError retried;  // (a failure here is captured again below)
          out = fn->call(values, &structure);
        } catch (...) {
          if (!*captured) {
            lifted->clear();
            throw;
          }
          std::vector<size_t> written;
          for (size_t j = 0; attrs_now > 0 && j < attr_lift->count && j < state->lifted.size(); ++j)
            if (!attr_lift->written.empty() && state->lifted[j].id == attr_lift->written) written.push_back(j);
          if (!written.empty()) {
            // The function wrote one lifted float (`self.t *= 0.99`): that one is
            // kept by value, the others stay inputs; captured again (each round
            // refuses one more float, so this ends).
            refuse_attrs("the function assigns it", &written);
            values.resize(values.size() - attrs_now);
            attrs_now = lift_attrs(values);
            fn->set_extra_args(static_cast<int>(ints + attrs_now));
            *captured = false;
            continue;
          }
          // Retry with the numbers; those arguments (and lifted floats of the
          // Python state) stay by value.
          std::vector<std::string> refused_attrs;
          if (attrs_now > 0) {
            for (size_t j = 0; j < attr_lift->count && j < state->lifted.size(); ++j)
              refused_attrs.push_back(state->lifted[j].id);
            refuse_attrs("the capture failed with it as an input");
          }
          std::vector<size_t> refused_ints;
          for (size_t i = 0; i < args.size(); ++i) {
            if (i < lifted->size() && (*lifted)[i]) {
              float_args[i].refused = true;
              values[i] = *to_scalar(args[i]);
            }
            if (ints > 0 && i < int_lift->pos.size() && int_lift->pos[i]) {
              refuse_int(i, "the capture failed with it symbolic");
              refused_ints.push_back(i);
              values[i] = *to_scalar(args[i]);
            }
          }
          values.resize(args.size());
          int_lift->extra = 0;
          int_lift->total = 0;
          fn->set_extra_args(0);
          lifted->clear();
          // (the refused floats are numbers in the state text now; others may still be inputs)
          if (const size_t again = lift_attrs(values); again > 0) fn->set_extra_args(static_cast<int>(again));
          try {
            out = fn->call(values, &structure);
          } catch (...) {
            // It fails by value too: the user's error at this value (an index out of
            // range), not the symbolic int's; the ints stay automatic for other values.
            for (size_t i : refused_ints) int_args[i].refused = false;
            for (const std::string& id : refused_attrs) state->floats[id].refused = false;
            if (!refused_attrs.empty()) state->rebuild = true;
            throw;
          }
        }
        break;
      }
      lifted->clear();
      if (attr_lift->count > 0 && fn->builds() != builds) refuse_specialized_attrs(values);
      if (ints > 0 && fn->builds() != builds) {
        // A version was built: an int it specialized is kept by value from now on.
        size_t ti = 0;
        for (size_t i = 0; i < args.size(); ++i) {
          if (!std::holds_alternative<Tensor>(values[i])) continue;
          // At 0 or 1 a size computed from the int (`x[:pos]`) is 0 or 1 and is guarded
          // to it (0/1 specialization): a later value tries again; at >= 2 it is the use.
          if (i < int_lift->pos.size() && int_lift->pos[i] && !fn->last_build_symbolic(ti, 0) &&
              int_args[i].last >= 2)
            refuse_int(i, "the capture specialized it (a use with no symbolic form: range(), int(), ...)");
          ++ti;
        }
      }
    } else {
      out = fn->call(values, &structure);
    }
    if (state_reader_droppable && state->resolved && state->mods.empty() && state->sources.empty()) {
      // The capture can read no module and no Python number: the state is empty
      // for good (nothing to re-list), so later calls skip the reader.
      fn->set_state_reader(nullptr);
      module_reader = nullptr;
      state_reader_droppable = false;
    }
    auto* s = static_cast<const PyOutputStructure*>(structure);
    if (!s) return outputs_to_python(std::move(out), out.size() != 1);
    if (s->kind == PyOutputStructure::kTensor) {
      for (size_t i = 0; i < args.size(); ++i)
        if (const Tensor* t = std::get_if<Tensor>(&values[i]); t && t->impl() == out.at(0).impl())
          return nb::borrow(args[i]);
      if (nb::object v = free_objects->find(out[0]); v.is_valid()) return v;
      note_output_base(args, out[0]);
      return nb::cast(std::move(out[0]));
    }
    // A result that is an argument (eager returned its input) is the very Python
    // object the caller passed, as in eager (an nn.Parameter stays itself); the
    // same tensor returned twice is one object.
    std::vector<nb::object> objs(out.size());
    for (size_t o = 0; o < out.size(); ++o) {
      for (size_t i = 0; i < args.size() && !objs[o].is_valid(); ++i)
        if (const Tensor* t = std::get_if<Tensor>(&values[i]); t && out[o].defined() && t->impl() == out[o].impl())
          objs[o] = nb::borrow(args[i]);
      for (size_t p = 0; p < o && !objs[o].is_valid(); ++p)
        if (out[p].defined() && out[p].impl() == out[o].impl()) objs[o] = objs[p];
      if (!objs[o].is_valid()) objs[o] = free_objects->find(out[o]);
      if (!objs[o].is_valid()) {
        note_output_base(args, out[o]);
        objs[o] = nb::cast(out[o]);
      }
    }
    // A result that views another result (`h, h[:, 0]`): its _base is that
    // result's object, as in eager.
    for (size_t o = 0; o < out.size(); ++o)
      if (out[o].defined() && out[o].impl()->view_base && !out[o].impl()->base_py)
        for (size_t p = 0; p < out.size(); ++p)
          if (p != o) note_base_object(objs[p], out[o]);
    return s->build(objs);
  }
};

// A C++ exception thrown on a compiled call, raised as Python sees it: rethrown
// inside a nanobind function (_C._raise_pending), so the module's exception
// translators (CaptureError, TypeError, ...) apply exactly as for any binding.
std::exception_ptr& pending_exception() {
  static std::exception_ptr p;  // set and taken under the GIL
  return p;
}
PyObject*& pending_raiser() {
  static PyObject* f = nullptr;  // _C._raise_pending (module-lifetime reference)
  return f;
}
PyObject* raise_pending(std::exception_ptr e) noexcept {
  pending_exception() = std::move(e);
  PyObject* r = PyObject_CallNoArgs(pending_raiser());
  Py_XDECREF(r);  // (never a value: the call raises)
  pending_exception() = nullptr;
  return nullptr;
}

PyObject* compiled_call(PyCompiled* c, PyObject* const* args, size_t n, PyObject* kwnames) noexcept {
  try {
    return c->call(args, n, kwnames).release().ptr();
  } catch (nb::python_error& e) {
    e.restore();
    return nullptr;
  } catch (...) {
    return raise_pending(std::current_exception());
  }
}

PyObject* compiled_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) noexcept {
  // (the slot is PyCompiled::vectorcall, the object's first member)
  auto* c = reinterpret_cast<PyCompiled*>(reinterpret_cast<char*>(self) + Py_TYPE(self)->tp_vectorcall_offset);
  return compiled_call(c, args, static_cast<size_t>(PyVectorcall_NARGS(nargsf)), kwnames);
}

// tp_call: a call from C with a tuple and a dict (PyObject_Call, functools.partial).
PyObject* compiled_tp_call(PyObject* self, PyObject* args, PyObject* kwargs) noexcept {
  auto* c = nb::inst_ptr<PyCompiled>(self);
  const size_t n = static_cast<size_t>(PyTuple_GET_SIZE(args));
  if (!kwargs || PyDict_GET_SIZE(kwargs) == 0) return compiled_call(c, &PyTuple_GET_ITEM(args, 0), n, nullptr);
  std::vector<PyObject*> flat(&PyTuple_GET_ITEM(args, 0), &PyTuple_GET_ITEM(args, 0) + n);
  PyObject* names = PyTuple_New(PyDict_GET_SIZE(kwargs));
  if (!names) return nullptr;
  Py_ssize_t pos = 0, k = 0;
  PyObject *key, *value;
  while (PyDict_Next(kwargs, &pos, &key, &value)) {
    PyTuple_SET_ITEM(names, k++, Py_NewRef(key));
    flat.push_back(value);
  }
  PyObject* r = compiled_call(c, flat.data(), n, names);
  Py_DECREF(names);
  return r;
}

PyType_Slot compiled_function_slots[] = {{Py_tp_call, reinterpret_cast<void*>(compiled_tp_call)}, {0, nullptr}};

// Makes calls of CompiledFunction objects vectorcalls (the type's
// tp_vectorcall_offset names PyCompiled::vectorcall inside the inline instance):
// where the offset cannot be established, calls go through tp_call.
void enable_vectorcall(nb::handle type) {
  nb::object probe = nb::inst_alloc(type);  // not ready: dropped without running a destructor
  const Py_ssize_t offset = reinterpret_cast<char*>(nb::inst_ptr<PyCompiled>(probe)) - reinterpret_cast<char*>(probe.ptr());
  if (offset <= 0 || offset >= Py_TYPE(probe.ptr())->tp_basicsize) return;
  auto* t = reinterpret_cast<PyTypeObject*>(type.ptr());
  t->tp_vectorcall_offset = offset;
  t->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
}

compile::RegionFn python_region(nb::object callable) {
  auto holder = keep_py(std::move(callable));
  return [holder](const std::vector<Tensor>& in) {
    nb::list l;
    for (auto& t : in) l.append(nb::cast(t));
    nb::object r = (*holder)(*nb::tuple(l));
    bool tuple = false;
    return outputs_from_python(r, &tuple);
  };
}

compile::CustomBackend python_backend(nb::object backend) {
  auto holder = keep_py(std::move(backend));
  return [holder](std::shared_ptr<const graph::Graph> g, const std::vector<Tensor>& examples) {
    nb::list ex;
    for (auto& t : examples) ex.append(nb::cast(t));
    nb::object fn = (*holder)(GraphModule{std::move(g)}, ex);
    TP_CHECK(PyCallable_Check(fn.ptr()), TypeError, "a compile backend must return a callable, got ",
             nb::inst_name(fn).c_str());
    return python_region(std::move(fn));
  };
}

// ---- node-level access for Python interpreters of a graph (tp.func.vmap) ----
nb::object attr_to_py(const AttrValue& v) {
  if (std::holds_alternative<std::monostate>(v)) return nb::none();
  if (auto* i = std::get_if<int64_t>(&v)) return nb::int_(*i);
  if (auto* b = std::get_if<bool>(&v)) return nb::bool_(*b);
  if (auto* s = std::get_if<Scalar>(&v)) return scalar_to_py(*s);
  if (auto* l = std::get_if<std::vector<int64_t>>(&v)) {
    nb::list out;
    for (int64_t x : *l) out.append(nb::int_(x));
    return out;
  }
  if (auto* d = std::get_if<DType>(&v)) return nb::cast(*d);
  return nb::str(std::get<std::string>(v).c_str());
}

// The inverse of attr_to_py. An int stays an int (an int attribute); a
// float/complex becomes a Scalar; a sequence of ints an int list.
AttrValue attr_from_py(nb::handle h, const char* name) {
  if (h.is_none()) return std::monostate{};
  if (PyBool_Check(h.ptr())) return nb::cast<bool>(h);
  if (PyLong_Check(h.ptr())) return nb::cast<int64_t>(h);
  if (nb::isinstance<nb::str>(h)) return nb::cast<std::string>(h);
  if (nb::isinstance<nb::list>(h) || nb::isinstance<nb::tuple>(h)) {
    std::vector<int64_t> xs;
    for (nb::handle x : h) {
      TP_CHECK(PyLong_Check(x.ptr()) && !PyBool_Check(x.ptr()), TypeError, "_call_op: attribute '", name,
               "' must be an int list");
      xs.push_back(nb::cast<int64_t>(x));
    }
    return xs;
  }
  if (PyFloat_Check(h.ptr()) || PyComplex_Check(h.ptr())) return *to_scalar(h);
  if (auto d = to_dtype(h)) return *d;
  throw TypeError(std::string("_call_op: unsupported value for attribute '") + name + "'");
}

nb::list node_info(const GraphModule& g) {
  // [{"op", "name", "target", "args", "attrs", "shape", "dtype", "results", ...}, ...]:
  // args are node names (str), Python numbers (constants folded in) or None
  // (an absent optional tensor).
  nb::list l;
  for (auto& n : g.graph->nodes()) {
    nb::dict d;
    d["op"] = graph::opcode_name(n->opcode);
    d["name"] = n->name;
    d["target"] = n->target ? n->target->name : "";
    nb::list args;
    for (auto& a : n->args) {
      if (auto* p = std::get_if<graph::Node*>(&a)) args.append(*p ? nb::object(nb::str((*p)->name.c_str())) : nb::none());
      else args.append(scalar_to_py(std::get<Scalar>(a)));
    }
    d["args"] = args;
    nb::dict attrs;
    for (auto& [k, v] : n->attrs.items()) attrs[k] = attr_to_py(v);
    d["attrs"] = attrs;
    d["shape"] = nb::tuple(nb::cast(std::vector<int64_t>(n->meta.sizes.begin(), n->meta.sizes.end())));
    d["dtype"] = nb::cast(n->meta.dtype);
    d["results"] = n->output_metas.size();
    d["input_index"] = n->input_index;
    d["grad_enabled"] = n->grad_enabled;
    d["constant"] = n->opcode == graph::Opcode::GetAttr ? nb::cast(n->constant) : nb::none();
    d["custom"] = n->target ? graph::is_custom_function(*n->target) : false;
    l.append(d);
  }
  return l;
}

std::vector<Tensor> call_op_py(const std::string& name, nb::list inputs, nb::dict attrs) {
  const OpDef* op = find_op(name);
  TP_CHECK(op, ValueError, "_call_op: no operator named '", name, "'");
  std::vector<Tensor> in;
  for (nb::handle h : inputs) {
    if (h.is_none()) in.push_back(Tensor());
    else if (nb::isinstance<Tensor>(h)) in.push_back(nb::cast<Tensor>(h));
    else if (auto s = to_scalar(h)) in.push_back(Tensor::wrapped_scalar(*s));
    else throw TypeError("_call_op(" + name + "): inputs must be Tensors, numbers or None");
  }
  // A Python int is an int attribute unless the schema says Scalar/float
  // (full's fill_value): the kernel reads the variant the schema stores.
  const Schema* schema = op_schema(*op);
  Attrs a;
  for (auto [k, v] : attrs) {
    const char* key = intern_attr_name(nb::cast<std::string>(k));
    AttrValue value = attr_from_py(v, key);
    if (schema && std::holds_alternative<int64_t>(value))
      for (const SchemaArg& s : schema->args)
        if (std::string_view(s.attr_name) == key && (s.type == ArgType::Scalar || s.type == ArgType::Float))
          value = Scalar(std::get<int64_t>(value));
    a.set(key, std::move(value));
  }
  return call_op(*op, in, a);
}

}  // namespace

void bind_testing_hooks(nb::module_& m);  // testing_hooks.cpp

void bind_compile(nb::module_& m) {
  bind_testing_hooks(m);
  nb::class_<GraphModule>(m, "GraphModule")
      .def_prop_ro("code", &GraphModule::code)
      .def("__call__", [](const GraphModule& g, nb::args a) {
        std::vector<Tensor> in;
        for (nb::handle h : a) in.push_back(nb::cast<Tensor>(h));
        auto out = g.call(in);
        return outputs_to_python(std::move(out), out.size() != 1);
      })
      .def("__repr__", [](const GraphModule& g) { return "GraphModule(\n" + g.code() + ")"; })
      .def("print_readable", [](const GraphModule& g) { nb::print(nb::str(g.code().c_str())); })
      .def_prop_ro("gates", [](const GraphModule& g) {
        // [{"read": "bool(Tensor) at f.py:3", "kind": "bool", "value": True, "guard": GraphModule}, ...]
        nb::list l;
        for (auto& gate : g.gates) {
          nb::dict d;
          d["read"] = gate.describe();
          d["kind"] = gate.kind;
          d["value"] = scalar_to_py(gate.value);
          d["guard"] = nb::cast(GraphModule{gate.guard, {}, {}});
          l.append(d);
        }
        return l;
      })
      .def_prop_ro("mutated_inputs", [](const GraphModule& g) { return g.mutated_inputs; })
      .def_prop_ro("_constants", [](const GraphModule& g) {
        // get_attr nodes' tensors by name (the printed code reads them as `self.<name>`)
        nb::dict d;
        for (auto& n : g.graph->nodes())
          if (n->opcode == graph::Opcode::GetAttr) d[n->name.c_str()] = nb::cast(n->constant);
        return d;
      })
      .def("_prefix", [](const GraphModule& g, const std::string& name) {
        // The graph up to node `name`, returning its value (bisection: the first
        // node whose compiled value differs from the interpreter's).
        auto c = g.graph->clone();
        graph::Node* target = nullptr;
        for (auto& n : c->nodes())
          if (n->name == name) target = n.get();
        TP_CHECK(target && target->opcode != graph::Opcode::Output, ValueError, "GraphModule._prefix: no node named '", name, "'");
        TP_CHECK(target->output_metas.empty(), ValueError, "GraphModule._prefix: node '", name,
                 "' has several results; take the prefix at one of its getitem nodes");
        graph::Node* out = c->output_node();
        out->args = {target};
        c->recompute_users();
        passes::eliminate_dead_code(*c);
        c->lint();
        return GraphModule{std::shared_ptr<const graph::Graph>(std::move(c)), {}, {}};
      })
      .def_prop_ro("_node_info", &node_info)
      .def_prop_ro("nodes", [](const GraphModule& g) {
        nb::list l;
        for (auto& n : g.graph->nodes())
          l.append(nb::make_tuple(graph::opcode_name(n->opcode), n->name, n->target ? n->target->name : ""));
        return l;
      });

  // One operator call by registry name, through the dispatcher (autograd
  // records it): the Python graph interpreter of tp.func.vmap runs nodes with it.
  m.def("_call_op", &call_op_py, nb::arg("name"), nb::arg("inputs"), nb::arg("attrs"));
  m.def("_raise_pending", [] {
    std::exception_ptr e = pending_exception();
    if (e) std::rethrow_exception(e);
  });
  pending_raiser() = m.attr("_raise_pending").inc_ref().ptr();
  nb::class_<PyCompiled>(m, "CompiledFunction", nb::type_slots(compiled_function_slots))
      .def_prop_ro("__wrapped__", [](const PyCompiled& c) { return c.wrapped; })
      .def("_set_nested", [](PyCompiled& c, nb::object n) { c.nested = std::move(n); })
      // compiler._NestedInputs: its compile options rebuild the function (copy.deepcopy, pickle).
      .def_prop_ro("_nested", [](const PyCompiled& c) { return c.nested.is_valid() ? c.nested : nb::none(); })
      // Python state the capture bakes in (an optimizer's state layout and
      // hyperparameters): `reader()` returns a str read at every call, part of the key.
      .def("_set_state_reader", [](PyCompiled& c, nb::object reader) {
        auto r = keep_py(std::move(reader));
        c.state_reader_droppable = false;
        auto text = std::make_shared<std::string>();
        c.fn->set_state_reader([r, text]() -> const std::string& { return *text = nb::cast<std::string>((*r)()); });
        c.module_reader = nullptr;  // (the Python state is this reader's: no float of it is lifted)
      })
      // A function that calls modules (a training step naming a global `model`):
      // `finder()` lists them, at the first call; their training flags and forward
      // hooks then select the version as for a compiled module.
      .def("_set_module_finder", [](PyCompiled& c, nb::object finder) {
        auto st = std::make_shared<ModuleState>();
        st->finder = keep_py(std::move(finder));
        c.state = st;
        c.state_reader_droppable = true;
        c.module_reader = module_state_reader(st);
        c.fn->set_state_reader(c.module_reader);
        c.attr_lift->state = st;
        // options={"dynamic_float_attrs": False}: the floats of the Python state stay by value.
        const auto& o = c.fn->options().options;
        if (auto it = o.find("dynamic_float_attrs");
            it != o.end() && (it->second == "0" || it->second == "False" || it->second == "false"))
          st->lift_floats = false;
      })
      .def("_set_hooked_call", [](PyCompiled& c, nb::object hooked) { c.hooked = std::move(hooked); })
      .def("_set_stepwise", [](PyCompiled& c, nb::object runner, bool on) {
        c.stepwise = std::move(runner);
        c.stepwise_on = on && !c.stepwise.is_none();
      }, nb::arg("runner").none(), nb::arg("on") = false)
      .def_prop_ro("_stepwise_on", [](const PyCompiled& c) { return c.stepwise_on; })
      .def_prop_ro("last_graph", [](const PyCompiled& c) -> nb::object {
        auto g = c.fn->last_graph();
        if (!g) return nb::none();
        return nb::cast(GraphModule{g, c.fn->last_gates(), c.fn->last_mutated_inputs()});
      })
      .def_prop_ro("last_source", [](const PyCompiled& c) { return c.fn->last_source(); })
      .def_prop_ro("last_aot", [](const PyCompiled& c) -> nb::object {
        // {"joint": code, "forward"/"backward": GraphModule, "saved": [(name, bytes, is_input)],
        //  "saved_bytes": activation bytes, "recomputed": [names]}; None without gradients
        auto a = c.fn->last_aot();
        if (!a) return nb::none();
        const aot::Partition& p = a->partition;
        nb::dict d;
        d["joint"] = a->joint_code;
        d["forward"] = nb::cast(GraphModule{p.forward, {}, {}});
        d["backward"] = nb::cast(GraphModule{p.backward, {}, {}});
        nb::list saved;
        for (auto& v : p.saved) saved.append(nb::make_tuple(v.name, v.bytes, v.primal >= 0));
        d["saved"] = saved;
        d["saved_bytes"] = p.saved_bytes;
        d["recomputed"] = p.recomputed;
        // binomial checkpointing of a chain (Theorem 5.4), or None
        if (p.chain.steps > 0) {
          nb::dict ck;
          ck["steps"] = p.chain.steps;
          ck["slots"] = p.chain.slots;
          ck["evaluations"] = p.chain.evaluations;
          d["checkpointing"] = ck;
        } else {
          d["checkpointing"] = nb::none();
        }
        return d;
      })
      .def_prop_ro("last_kernels", [](const PyCompiled& c) {
        // [{"name", "origin", "bytes_read", "bytes_written", "flops"}, ...] of the last Stax compile
        nb::list l;
        for (const stax::KernelInfo& k : c.fn->last_kernels()) {
          nb::dict d;
          d["name"] = k.name;
          d["origin"] = k.origin;
          d["bytes_read"] = k.bytes_read;
          d["bytes_written"] = k.bytes_written;
          d["flops"] = k.flops;
          l.append(d);
        }
        return l;
      })
      .def_prop_ro("last_fallback_reason", [](const PyCompiled& c) { return c.fn->last_fallback_reason(); })
      .def_prop_ro("num_specializations",
                   [](const PyCompiled& c) {
                     // Calls with structured or object arguments run in the nested
                     // compiled functions (one per argument structure): theirs count too.
                     size_t n = c.fn->num_specializations();
                     if (c.nested.is_valid() && !c.nested.is_none())
                       for (nb::handle inner : c.nested.attr("by_structure").attr("values")())
                         n += nb::cast<size_t>(inner.attr("num_specializations"));
                     return n;
                   })
      .def_prop_ro("last_call_bucketed", [](const PyCompiled& c) { return c.fn->last_call_bucketed(); })
      .def_prop_ro("bucketed_calls", [](const PyCompiled& c) { return c.fn->bucketed_calls(); })
      .def_prop_ro("last_bucket_refusal", [](const PyCompiled& c) { return c.fn->last_bucket_refusal(); });
  enable_vectorcall(nb::type<PyCompiled>());

  m.def("_compile", [](nb::object fn, std::string backend, nb::object custom, std::string mode,
                       std::map<std::string, std::string> options, nb::object dynamic, bool fullgraph, bool strict_native,
                       std::vector<std::string> arg_names, int num_params, nb::object binder) {
    compile::CompileOptions o;
    o.backend = backend;
    if (!custom.is_none()) o.custom_backend = python_backend(custom);
    o.mode = mode;
    o.options = options;
    // None: automatic (a dim whose size changes is recompiled as symbolic); True / False.
    using D = compile::CompileOptions::Dynamic;
    o.dynamic = dynamic.is_none() ? D::Auto : (PyObject_IsTrue(dynamic.ptr()) == 1 ? D::On : D::Off);
    o.fullgraph = fullgraph;
    o.strict_native = strict_native;
    // Made inline in its Python object, as enable_vectorcall requires.
    nb::object self = nb::inst_alloc(nb::type<PyCompiled>());
    PyCompiled* pc = new (nb::inst_ptr<PyCompiled>(self)) PyCompiled();
    nb::inst_mark_ready(self);
    pc->wrapped = fn;
    pc->binder = binder;
    pc->bind_always = !binder.is_none() && nb::hasattr(binder, "_tp_always");
    auto fn_ref = keep_py(fn);
    auto lifted = pc->lifted;
    auto captured = pc->captured;
    auto int_lift = pc->int_lift;
    auto attr_lift = pc->attr_lift;
    compile::StructuredUserFn user = [fn_ref, lifted, captured, int_lift, attr_lift](const std::vector<ArgValue>& args,
                                                                std::shared_ptr<const compile::OutputStructure>* structure) {
      nb::object& fn = *fn_ref;
      nb::list l;
      const bool tracing = graph::is_tracing();
      if (tracing) *captured = true;
      // Automatic dynamic float attributes (PyCompiled::AttrLift): the last
      // arguments; their owners hold them while a capture runs (not while the
      // function runs eagerly: the floats are in place then).
      const bool attrs = attr_lift->count > 0 && args.size() == attr_lift->total && attr_lift->state;
      const size_t n_args = attrs ? args.size() - attr_lift->count : args.size();
      AttrInstall install;
      if (attrs && tracing) install.install(*attr_lift->state, args.data() + n_args, attr_lift->count);
      // Automatic dynamic ints (PyCompiled::IntArg): the function gets `size - 2`
      // (a SymInt in a symbolic capture), not the tensors that carry it.
      const bool ints = int_lift->extra > 0 && n_args == int_lift->total;
      const size_t n_user = ints ? n_args - int_lift->extra : n_args;
      struct ClearValues {
        bool on;
        ~ClearValues() {
          if (on) clear_int_values();
        }
      } clear_values{ints && tracing};
      size_t next_value = n_user;
      for (size_t i = 0; i < n_user; ++i) {
        const ArgValue& a = args[i];
        if (ints && i < int_lift->pos.size() && int_lift->pos[i]) {
          nb::object size = nb::cast(std::get<Tensor>(a)).attr("size")(0);
          nb::object v = nb::steal(PyNumber_Subtract(size.ptr(), nb::int_(2).ptr()));
          if (!v.is_valid()) throw nb::python_error();
          const Tensor& value = std::get<Tensor>(args[next_value++]);
          if (tracing && is_symint(size)) push_int_value(symint_expr(size), value);
          l.append(v);
          continue;
        }
        if (const Tensor* t = std::get_if<Tensor>(&a)) {
          // A float argument passed as a tensor (PyCompiled::float_args): a result
          // computed from it alone is a float, as eager's arithmetic gives.
          if (tracing && i < lifted->size() && (*lifted)[i]) note_capture_item(*t);
          l.append(nb::cast(*t));
        } else {
          l.append(scalar_to_py(std::get<Scalar>(a)));
        }
      }
      nb::object r;
      // During a capture print() is watched (compiler._PrintWatch: it warns that
      // later calls will not print). A failed call only restores print.
      struct PrintWatch {
        nb::object w;
        void exit(bool failed) {
          nb::object o = std::move(w);
          if (o.is_valid()) o.attr("__exit__")(failed ? nb::object(nb::bool_(true)) : nb::none(), nb::none(), nb::none());
        }
        ~PrintWatch() {
          try {
            exit(true);
          } catch (...) {  // (restoring print cannot fail; nothing may leave a destructor)
          }
        }
      } watch;
      if (tracing) {
        static PyObject* watch_type =
            nb::object(nb::module_::import_("tensorplay.compiler").attr("_PrintWatch")).release().ptr();
        watch.w = nb::handle(watch_type)(fn);
        watch.w.attr("__enter__")();
      }
      try {
        r = fn(*nb::tuple(l));
        if (tracing) graph::note_user_exception(false);  // (an inner one the function caught is not its exit)
      } catch (nb::python_error& e) {
        if (tracing) note_if_users_exception(e);
        name_user_line(e);
        throw;
      }
      watch.exit(false);
      if (!install.slots.empty()) {
        std::string written = install.restore(attr_lift->state.get(), &attr_lift->written);
        TP_CHECK(written.empty(), CaptureError, "the compiled function assigns ", written,
                 " from a float it reads: a compiled version would not repeat the assignment (captured again "
                 "with the number)");
      }
      std::vector<Tensor> out;
      std::shared_ptr<const compile::OutputStructure> s = PyOutputStructure::flatten(r, &out);
      if (structure) *structure = std::move(s);
      return out;
    };
    pc->fn = std::make_unique<compile::CompiledFunction>(std::move(user), std::move(o), std::move(arg_names),
                                                         num_params);
    pc->fn->set_free_tensor_locator(python_locator(fn_ref, pc->free_objects));
    // Regions are named after the function (errors, TP_LOGS=aot, saved-bytes metric).
    nb::object qn = nb::getattr(fn, "__name__", nb::none());
    pc->fn->set_name(qn.is_none() ? std::string(nb::inst_name(fn).c_str()) : nb::cast<std::string>(nb::str(qn)));
    return self;
  }, nb::arg("fn"), nb::arg("backend"), nb::arg("custom").none(), nb::arg("mode"), nb::arg("options"),
     nb::arg("dynamic").none(), nb::arg("fullgraph"), nb::arg("strict_native"), nb::arg("arg_names"), nb::arg("num_params"),
     nb::arg("binder").none());

  m.def("_is_tracing", [] { return graph::is_tracing(); });
  // Python's refusals of training-step calls (optimizer.zero_grad(), step()) note themselves as the binding's do.
  m.def("_note_step_refusal", [] {
    if (graph::is_tracing()) note_step_refusal();
  });
  // A 0-d tensor that is a Python float in eager (`t.item()` during a capture,
  // and arithmetic on it): printing and round() treat it as that number.
  m.def("_is_capture_item", [](const Tensor& t) { return graph::is_tracing() && is_capture_item(t); });  // a capture is running on this thread
  // tp.autograd.Function.apply in a capture that needs gradients (graph/custom_function.h).
  m.def("_traced_requires_grad", [](const Tensor& t) { return graph::traced_requires_grad(t); });
  // `backward(grads, outputs, saved, tracing)` gives one gradient (or None) per
  // tensor in `inputs`; `outputs` are the forward's differentiable results.
  m.def("_custom_function_attach", [](nb::handle backward, const std::string& name, std::vector<Tensor> outputs,
                                      std::vector<Tensor> inputs, std::vector<Tensor> saved) {
    auto fn = keep_py(nb::borrow(backward));
    const std::string who = "tp.autograd.Function " + name + ".backward";
    auto opt = [](const std::vector<Tensor>& v) {
      std::vector<std::optional<Tensor>> r;
      for (const Tensor& t : v) r.push_back(t.defined() ? std::optional<Tensor>(t) : std::nullopt);
      return r;
    };
    const int64_t id = graph::register_custom_backward(
        [fn, who, opt](const std::vector<Tensor>& grads, const std::vector<Tensor>& outs,
                       const std::vector<Tensor>& kept) -> std::vector<Tensor> {
          nb::gil_scoped_acquire gil;
          // Traced into a joint graph, the backward runs once for every later call:
          // what it cannot record (a Python branch on a value, a tensor that is not
          // one of its values, numpy()) is an error the AOT layer answers by
          // running the region with eager autograd (or strict_native raises).
          const bool tracing = graph::is_tracing();
          const size_t gates = graph::trace_gate_count();
          const size_t draws = graph::trace_random_count();
          std::optional<graph::CustomBackwardScope> scope;
          if (tracing) scope.emplace(who);
          nb::object r;
          try {
            r = (*fn)(opt(grads), outs, kept, tracing);
          } catch (nb::python_error& e) {
            if (!tracing) throw;
            // The exception's type and text (what() would add the whole traceback).
            const std::string type = nb::cast<std::string>(nb::str(e.type().attr("__name__")));
            const std::string text = nb::cast<std::string>(nb::str(e.value()));
            throw CaptureError(str(who, " cannot be traced into the compiled backward: ", type, ": ", text));
          }
          TP_CHECK(!tracing || graph::trace_gate_count() == gates, CaptureError, who,
                   " reads a tensor's value in Python (bool(), int(), item() of an integer, an `if` on a "
                   "comparison): a compiled backward would repeat the branch taken at its first call");
          TP_CHECK(!tracing || graph::trace_random_count() == draws, CaptureError, who,
                   " draws random numbers: a compiled backward has no generator state of its own to draw from");
          std::vector<Tensor> out;
          for (auto& g : nb::cast<std::vector<std::optional<Tensor>>>(r)) out.push_back(g ? *g : Tensor());
          return out;
        });
    std::vector<Tensor> args = outputs;
    args.insert(args.end(), inputs.begin(), inputs.end());
    args.insert(args.end(), saved.begin(), saved.end());
    Attrs attrs{{"fn", id},
                {"num_outputs", static_cast<int64_t>(outputs.size())},
                {"num_inputs", static_cast<int64_t>(inputs.size())},
                {"name", name}};
    return call_op(graph::custom_function_op(), args, attrs);
  }, nb::arg("backward"), nb::arg("name"), nb::arg("outputs"), nb::arg("inputs"), nb::arg("saved"));

  // tp.mark_dynamic / tp.mark_static (compile/dynamic_marks.h).
  m.def("_mark_dim", [](const Tensor& t, int64_t dim, bool dynamic, std::optional<int64_t> min,
                        std::optional<int64_t> max) {
    compile::DimMark mk;
    mk.dynamic = dynamic;
    if (min) mk.min = *min;
    if (max) mk.max = *max;
    TP_CHECK(!dynamic || mk.max >= 2, ValueError, "mark_dynamic: max ", mk.max,
             " leaves no size >= 2 (sizes 0 and 1 are always static)");
    compile::mark_dim(t, dim, mk);
  }, nb::arg("t"), nb::arg("dim"), nb::arg("dynamic"), nb::arg("min").none() = nb::none(),
     nb::arg("max").none() = nb::none());

  m.def("_capture", [](nb::object fn, nb::args args) {
    std::vector<Tensor> in;
    for (nb::handle h : args) {
      TP_CHECK(nb::isinstance<Tensor>(h), TypeError, "capture: arguments must be tensors");
      in.push_back(nb::cast<Tensor>(h));
    }
    auto r = graph::trace([&](const std::vector<Tensor>& proxies) {
      nb::list l;
      for (auto& t : proxies) l.append(nb::cast(t));
      bool tuple = false;
      return outputs_from_python(fn(*nb::tuple(l)), &tuple);
    }, in);
    passes::PassOptions po;
    po.decompose = false;
    passes::run_default_passes(*r.graph, po);
    return GraphModule{std::shared_ptr<const graph::Graph>(std::move(r.graph)), r.gates, r.mutated_inputs};
  });

  m.def("_register_backend", [](std::string name, nb::object fn) {
    compile::register_backend(name, python_backend(std::move(fn)));
  });
  m.def("_metrics", []() {
    auto& mm = compile::metrics();
    nb::dict d;
    d["generated_kernel_count"] = mm.generated_kernel_count.load();
    d["compile_count"] = mm.compile_count.load();
    d["cache_hits"] = mm.cache_hits.load();
    d["cache_misses"] = mm.cache_misses.load();
    d["fallback_count"] = mm.fallback_count.load();
    d["recompiles"] = mm.recompiles.load();
    d["first_level_hits"] = mm.first_level_hits.load();
    d["gate_replays"] = mm.gate_replays.load();
    d["inplace_writes"] = mm.inplace_writes.load();
    d["specialization_hits"] = mm.specialization_hits.load();
    d["captures"] = mm.captures.load();
    d["aot_regions"] = mm.aot_regions.load();
    d["saved_bytes"] = mm.saved_bytes.load();
    return d;
  });
  m.def("_saved_bytes_per_region", []() { return compile::saved_bytes_per_region(); });
  m.def("_region_times", &stax::region_times::report);
  m.def("_reset", &compile::reset);
  m.def("_pass_names", &passes::pass_names);
  // The identity the compiler sees (the C++ tensor object), for matching free tensors.
  m.def("_impl_id", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.impl()); });
  m.def("_cache_dir", []() { return stax::runtime::CodeCache::instance().directory(); });
  m.def("_stax_cuda_source", [](const GraphModule& g, int row_block) { return stax::cuda_unit(*g.graph, row_block).unit.source; },
        nb::arg("gm"), nb::arg("row_block") = 0);
  // The CUDA source of gm printed while the lowering of `held` is alive, as
  // when an eager CUDA operator is generated while a compiled region holds its
  // lowered program (issue 12/11: loop-IR nodes are interned process-wide).
  m.def("_stax_cuda_source_beside", [](const GraphModule& held, const GraphModule& g) {
    stax::LoweredRegion alive = stax::lower(*held.graph, /*cuda=*/true);
    return stax::cuda_unit(*g.graph, 0).unit.source;
  }, nb::arg("held"), nb::arg("gm"));
  m.def("_stax_cuda_run", [](const GraphModule& g, std::vector<Tensor> inputs) { return stax::run_cuda(*g.graph, inputs); });
  // Per printed CUDA kernel: (name, form, block_x, block_y, work) — no GPU needed.
  m.def("_stax_cuda_kernels", [](const GraphModule& g, int row_block) {
    stax::codegen::CudaUnit u = stax::cuda_unit(*g.graph, row_block);
    std::vector<std::tuple<std::string, std::string, int, int, int64_t>> out;
    for (size_t k = 0; k < u.launches.size(); ++k) {
      const stax::codegen::CudaLaunch& l = u.launches[k];
      const char* form = l.form == stax::codegen::CudaForm::Flat ? "flat" : l.form == stax::codegen::CudaForm::Row ? "row" : "column";
      out.emplace_back(u.unit.kernel_names[k], form, l.block_x, l.block_y, l.work);
    }
    return out;
  }, nb::arg("gm"), nb::arg("row_block") = 0);
  // max-autotune (cuda_region.h): the search space as (name, candidates,
  // default) per parameter, a point's printed variant, the tuning a mode gets,
  // and this process's search counters — no GPU needed but for the counters' use.
  m.def("_stax_cuda_search_space", [](const GraphModule& g) {
    std::vector<std::tuple<std::string, std::vector<int64_t>, int64_t>> out;
    const stax::SearchSpace space = stax::cuda_search_space(*g.graph);
    for (const stax::SearchParam& p : space.params)
      out.emplace_back(p.name, p.values, p.values[static_cast<size_t>(p.default_index)]);
    return out;
  }, nb::arg("gm"));
  m.def("_stax_cuda_variant", [](const GraphModule& g, const std::map<std::string, int64_t>& point) {
    stax::CudaVariant v = stax::cuda_variant(*g.graph, point);
    std::vector<std::tuple<std::string, std::string, int, int, int64_t, int64_t>> kernels;
    for (size_t k = 0; k < v.unit.launches.size(); ++k) {
      const stax::codegen::CudaLaunch& l = v.unit.launches[k];
      const char* form = l.form == stax::codegen::CudaForm::Flat ? "flat" : l.form == stax::codegen::CudaForm::Row ? "row" : "column";
      kernels.emplace_back(v.unit.unit.kernel_names[k], form, l.block_x, l.block_y, l.work, l.scratch_bytes);
    }
    nb::dict grid;
    grid["flat_blocks_per_sm"] = v.choice.grid.flat_blocks_per_sm;
    grid["rows_per_block"] = v.choice.grid.rows_per_block;
    return nb::make_tuple(v.unit.unit.source, kernels, grid, v.point);
  }, nb::arg("gm"), nb::arg("point"));
  m.def("_stax_cuda_tuning", [](const std::string& mode, const std::map<std::string, std::string>& options) {
    switch (stax::cuda_tuning(stax::cuda_region_options(options, mode))) {
      case stax::CudaTuning::Off: return "off";
      case stax::CudaTuning::Default: return "default";
      case stax::CudaTuning::Max: return "max-autotune";
    }
    return "?";
  }, nb::arg("mode"), nb::arg("options") = std::map<std::string, std::string>{});
  m.def("_stax_cuda_tuning_stats", []() {
    stax::CudaTuningStats s = stax::cuda_tuning_stats();
    nb::dict d;
    d["searches"] = s.searches;
    d["evaluations"] = s.evaluations;
    d["invalid"] = s.invalid;
    d["cache_loads"] = s.cache_loads;
    return d;
  });
  m.def("_stax_cuda_externs", [](const GraphModule& g) { return stax::cuda_extern_calls(*g.graph); }, nb::arg("gm"));
  // The graph after the CUDA regions' GEMM epilogue fusion (run on the CPU, its
  // _gemm_epilogue nodes compute the unfused reference: a check of the rewrite).
  m.def("_stax_gemm_epilogue_pass", [](const GraphModule& g) {
    std::shared_ptr<graph::Graph> c = g.graph->clone();
    stax::fuse_gemm_epilogues(*c);
    return GraphModule{std::shared_ptr<const graph::Graph>(std::move(c)), g.gates, g.mutated_inputs};
  }, nb::arg("gm"));
  // The graph after the CUDA regions' attention fusion (its _attention nodes
  // compute the unfused reference on the CPU).
  m.def("_stax_attention_pass", [](const GraphModule& g) {
    std::shared_ptr<graph::Graph> c = g.graph->clone();
    stax::fuse_attention(*c);
    return GraphModule{std::shared_ptr<const graph::Graph>(std::move(c)), g.gates, g.mutated_inputs};
  }, nb::arg("gm"));
  m.def("_host_isa", []() { return stax::runtime::host_isa().name; });
}

}  // namespace tp::py
