// The Python state a capture bakes in and that must select the version of a
// compiled function (CompiledFunction::set_state_reader): see ModuleState.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common.h"

namespace tp::py {

// Automatic dynamic floats take a Python float, a float subclass (numpy.float64)
// or a NumPy floating scalar (numpy.float32, numpy.float16: not float subclasses);
// by value, a schedule of NumPy floats made a new version at every call.
inline bool is_float_number(PyObject* v) {
  return PyFloat_Check(v) || std::string_view(Py_TYPE(v)->tp_name).substr(0, 11) == "numpy.float";
}
// Its value (float(v): exact for the NumPy scalars, whose values are doubles' subsets).
inline double float_number_value(PyObject* v) {
  if (PyFloat_Check(v)) return PyFloat_AS_DOUBLE(v);
  const double d = PyFloat_AsDouble(v);
  if (d == -1.0 && PyErr_Occurred()) throw nb::python_error();
  return d;
}

// CPython 3.11 stamps every dict with a version that changes whenever the dict
// does (PEP 509; deprecated from 3.12): an unchanged version proves unchanged
// contents, so per-call checks of module state and of the paths to free
// tensors compare one number per dict instead of walking entries or repeating
// attribute lookups. Without it (3.12+) they take the walk every call.
#if PY_VERSION_HEX < 0x030C0000
#define TP_DICT_VERSIONS 1
inline uint64_t dict_version(PyObject* d) { return reinterpret_cast<PyDictObject*>(d)->ma_version_tag; }

// The result of walking a path of item / attribute / cell steps from a fixed
// root, valid while nothing a step depends on changed: an item of a dict (or of
// a subclass keeping dict's lookup) on the dict's version; an attribute found in
// an object's own __dict__ (generic lookup, no class attribute of that name) on
// the object's class and its version tag (any change to the class or a base
// resets it), the dict the object holds and that dict's version; a cell on its
// content. Any other step (properties, __getattr__ results, lists, custom
// containers, modules) leaves the path uncached: it is walked every call. The
// objects along the path are held while cached (until the next walk).
class PathCache {
 public:
  // A walk starts: forget the last one.
  void start() {
    steps_.clear();
    value_ = nb::object();
    ok_ = true;
  }
  // Before each step of the walk, from `cur`.
  void note_item(const nb::object& cur, PyObject* key) {
    if (!ok_) return;
    PyObject* o = cur.ptr();
    if (!plain_dict(o) || !found(o, key)) {
      ok_ = false;
      return;
    }
    steps_.push_back({cur, cur, dict_version(o), nullptr, 0});
  }
  void note_attr(const nb::object& cur, PyObject* key) {
    if (!ok_) return;
    ok_ = false;
    PyObject* o = cur.ptr();
    if (!PyUnicode_CheckExact(key)) return;
    PyTypeObject* type = Py_TYPE(o);
    static PyObject* const getattribute = PyUnicode_InternFromString("__getattribute__");
    static PyObject* const generic = _PyType_Lookup(&PyBaseObject_Type, getattribute);
    if (type->tp_getattro != PyObject_GenericGetAttr && _PyType_Lookup(type, getattribute) != generic) return;
    if (_PyType_Lookup(type, key) != nullptr) return;  // (assigns the class a version tag when it can)
    if (!(type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) return;
    PyObject** dp = _PyObject_GetDictPtr(o);
    if (!dp || !*dp || !PyDict_CheckExact(*dp) || !found(*dp, key)) return;
    steps_.push_back({cur, nb::borrow(*dp), dict_version(*dp), type, type->tp_version_tag});
    ok_ = true;
  }
  // A step whose result no version stamps (a container's length): walked every call.
  void note_uncached() { ok_ = false; }
  void note_cell(const nb::object& cell) {
    if (!ok_) return;
    PyObject* v = PyCell_Check(cell.ptr()) ? PyCell_GET(cell.ptr()) : nullptr;
    if (!v) {
      ok_ = false;
      return;
    }
    steps_.push_back({cell, nb::borrow(v), 0, nullptr, 0, true});
  }
  // The walk ended at `value` (null: a step failed; not cached).
  void finish(const nb::object& value) {
    if (ok_ && value.is_valid()) value_ = value;
    else steps_.clear();
  }
  // The path's value: the cached one when nothing changed, else walk() again
  // (noting its steps).
  template <class Walk>
  nb::object through(Walk&& walk) {
    if (const nb::object* v = hit()) return *v;
    start();
    nb::object cur = walk();
    finish(cur);
    return cur;
  }
  // The last walk's value when nothing it depends on changed; null otherwise.
  const nb::object* hit() const {
    if (!value_.is_valid()) return nullptr;
    for (const Step& st : steps_) {
      PyObject* o = st.object.ptr();
      if (st.cell) {
        if (PyCell_GET(o) != st.dict.ptr()) return nullptr;
        continue;
      }
      if (st.type) {
        if (Py_TYPE(o) != st.type || !(st.type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ||
            st.type->tp_version_tag != st.type_version)
          return nullptr;
        PyObject** dp = _PyObject_GetDictPtr(o);
        if (!dp || *dp != st.dict.ptr()) return nullptr;
      } else if (!plain_dict(o)) {  // (its class may have changed)
        return nullptr;
      }
      if (dict_version(st.dict.ptr()) != st.dict_version) return nullptr;
    }
    return &value_;
  }

 private:
  struct Step {
    nb::object object, dict;  // cell steps: the cell and its content
    uint64_t dict_version = 0;
    PyTypeObject* type = nullptr;  // attribute steps
    unsigned type_version = 0;
    bool cell = false;
  };
  // A dict, or a subclass that keeps dict's item lookup (no __getitem__ of its own).
  static bool plain_dict(PyObject* o) {
    if (PyDict_CheckExact(o)) return true;
    PyMappingMethods* m = Py_TYPE(o)->tp_as_mapping;
    return PyDict_Check(o) && m && m->mp_subscript == PyDict_Type.tp_as_mapping->mp_subscript;
  }
  // (present: a subclass's __missing__ is not involved)
  static bool found(PyObject* d, PyObject* key) {
    PyObject* v = PyDict_GetItemWithError(d, key);
    if (!v) PyErr_Clear();
    return v != nullptr;
  }
  std::vector<Step> steps_;
  nb::object value_;
  bool ok_ = true;
};
#endif

// One attribute or item step of a path (an exact dict read without a
// KeyError); null, with the error cleared, when it fails.
inline nb::object path_step(const nb::object& cur, PyObject* key, bool attr) {
  PyObject* r;
  if (attr) {
    r = PyObject_GetAttr(cur.ptr(), key);
  } else if (PyDict_CheckExact(cur.ptr())) {
    r = PyDict_GetItemWithError(cur.ptr(), key);
    Py_XINCREF(r);
  } else {
    r = PyObject_GetItem(cur.ptr(), key);
  }
  if (!r) {
    PyErr_Clear();
    return nb::object();
  }
  return nb::steal(r);
}

// The dict that holds attribute `name` of `obj` as Python reads it (the
// instance's own __dict__, with no data descriptor of that name on its class and
// no __getattribute__ of its own), so that putting another object there changes
// what `obj.name` gives; false otherwise (a property, __slots__, a proxy).
inline bool instance_dict_slot(const nb::object& obj, const nb::object& name, nb::object* dict) {
  if (!PyUnicode_CheckExact(name.ptr())) return false;
  PyTypeObject* type = Py_TYPE(obj.ptr());
  static PyObject* const getattribute = PyUnicode_InternFromString("__getattribute__");
  static PyObject* const generic = _PyType_Lookup(&PyBaseObject_Type, getattribute);
  if (_PyType_Lookup(type, getattribute) != generic) return false;
  if (PyObject* d = _PyType_Lookup(type, name.ptr()); d && Py_TYPE(d)->tp_descr_set) return false;
  PyObject* dp = PyObject_GenericGetDict(obj.ptr(), nullptr);
  if (!dp) {
    PyErr_Clear();
    return false;
  }
  nb::object dd = nb::steal(dp);
  if (!PyDict_CheckExact(dp) || !PyDict_GetItemWithError(dp, name.ptr())) {
    PyErr_Clear();
    return false;
  }
  *dict = std::move(dd);
  return true;
}

// The Python state a capture bakes in and that must select the version (read at
// every call, part of the first-level entry and the key):
// - per nn.Module, its `training` flag (dropout, batch norm trace one branch), its
//   forward (pre-)hooks (traced into the capture: a hook added or removed later
//   must not be skipped or kept silently) and its number and short string
//   attributes (`self.scale`, a dropout's `p`, an `eps`, a loss's `reduction`);
// - the lengths of lists, tuples and dicts holding tensors or modules that the code
//   can iterate (`for t in self.extra`, `sum(cache)`): appending one changes the
//   program as a changed number does;
// - numbers, short strings, None (and short lists/tuples of numbers) the code can
//   read, and the identity of the functions it calls through a rebindable name
//   (`ACT = F.gelu`, `self.act = tp.tanh`, `cfg.loss_fn`): in the globals and closure cells the compiled function's code names
//   (`lr * g`, `x * k[0]`) and along attribute / item paths from them or from the
//   compiled object (`CFG.scale`, `self.cfg.dropout`, `cfg["lr"]`, `config.LR`,
//   a helper's or a method's reads), found by compiler._python_state_sources.
// The hook dicts and `__dict__`s are made once, in Module.__init__, so they are
// held, not looked up per call.
struct ModuleState {
  bool resolved = false;
  // At the first call and after the module tree changed: (modules, [(name, dict or
  // cell, key or None)]), or only the modules when `modules_only`.
  std::shared_ptr<nb::object> finder;
  bool modules_only = false;
  int generation = 0;  // bumped when the tree changed: no version of an older tree is reused
  std::vector<std::shared_ptr<nb::object>> mods, hook_dicts, attr_dicts;  // two hook dicts per module
  // Two per module: full backward (pre-)hooks (Python autograd Functions around a
  // module call, which a capture cannot hold): only has_hooks() reads them.
  std::vector<std::shared_ptr<nb::object>> backward_hook_dicts;
  // Per module, its `_modules` dict and the children it held when listed: a
  // submodule replaced, added or removed (`model[1] = nn.ReLU()`) changes the
  // program the capture traced, and modules not listed have unread state.
  std::vector<std::shared_ptr<nb::object>> child_dicts;
  std::vector<std::vector<nb::object>> children;
  struct Source {
    std::string name;
    // Where the walk starts: a dict and its key, a cell (key None), or an object
    // itself (key None: a compiled module, a method's self, a function's defaults).
    std::shared_ptr<nb::object> owner, key;
    // Then attribute / item steps (`cfg.optim.lr`, `CFG["lr"]`), re-walked per call;
    // a last `len` step reads a container's length (how many tensors a loop adds).
    struct Step {
      bool attr;
      nb::object key;
      bool len = false;
    };
    std::vector<Step> steps;
    // An nn.Module when listed (a global `model`): rebound to another, the
    // program may differ, as for a changed tree.
    nb::object object;
#ifdef TP_DICT_VERSIONS
    mutable PathCache cache;
#endif
    // The value now (null when a step fails: the attribute is gone).
    nb::object value() const {
#ifdef TP_DICT_VERSIONS
      return cache.through([this] { return walk(); });
#else
      return walk();
#endif
    }
    // Where the value lives, to put another object there while a capture runs
    // (automatic dynamic floats): a dict and a key (a global, an item, an
    // attribute in an instance's __dict__) or a cell (key None). Walked afresh;
    // false where it cannot be replaced so (a tuple's item, a default argument,
    // a property, a length).
    bool place(nb::object* where, nb::object* at) const {
      PyObject* o = owner->ptr();
      if (steps.empty()) {
        if (PyCell_Check(o) || (PyDict_CheckExact(o) && !key->is_none())) {
          *where = nb::borrow(o);
          *at = PyCell_Check(o) ? nb::none() : *key;
          return true;
        }
        return false;
      }
      nb::object cur;
      if (PyCell_Check(o)) {
        PyObject* v = PyCell_GET(o);
        if (!v) return false;
        cur = nb::borrow(v);
      } else if (PyDict_Check(o) && !key->is_none()) {
        PyObject* v = PyDict_GetItem(o, key->ptr());
        if (!v) return false;
        cur = nb::borrow(v);
      } else {
        cur = nb::borrow(o);
      }
      for (size_t i = 0; i + 1 < steps.size(); ++i) {
        if (steps[i].len) return false;
        cur = path_step(cur, steps[i].key.ptr(), steps[i].attr);
        if (!cur.is_valid()) return false;
      }
      const Step& last = steps.back();
      if (last.len) return false;
      if (!last.attr) {
        if (!PyDict_CheckExact(cur.ptr())) return false;
        *where = cur;
        *at = last.key;
        return true;
      }
      *at = last.key;
      return instance_dict_slot(cur, last.key, where);
    }
    nb::object walk() const {
      PyObject* o = owner->ptr();
      nb::object cur;
      if (PyCell_Check(o)) {
#ifdef TP_DICT_VERSIONS
        cache.note_cell(*owner);
#endif
        PyObject* v = PyCell_GET(o);
        if (!v) return {};
        cur = nb::borrow(v);
      } else if (PyDict_Check(o) && !key->is_none()) {
#ifdef TP_DICT_VERSIONS
        cache.note_item(*owner, key->ptr());
#endif
        PyObject* v = PyDict_GetItem(o, key->ptr());
        if (!v) return {};
        cur = nb::borrow(v);
      } else {
        cur = nb::borrow(o);
      }
      for (const Step& st : steps) {
        if (st.len) {
#ifdef TP_DICT_VERSIONS
          cache.note_uncached();  // (a list's length has no version; a dict's would, kept simple)
#endif
          Py_ssize_t n = PyObject_Length(cur.ptr());
          if (n < 0) {
            PyErr_Clear();
            return {};
          }
          cur = nb::steal(PyLong_FromSsize_t(n));
          continue;
        }
#ifdef TP_DICT_VERSIONS
        if (st.attr) cache.note_attr(cur, st.key.ptr());
        else cache.note_item(cur, st.key.ptr());
#endif
        cur = path_step(cur, st.key.ptr(), st.attr);
        if (!cur.is_valid()) return {};
      }
      return cur;
    }
  };
  std::vector<Source> sources;
  // Automatic dynamic float attributes (PyCompiled::lift_attrs): per Python float
  // the capture can read (a module's attribute, a source path: `self.temperature`,
  // `cfg.kl_weight`, a global `BETA`), its first value and whether it changed
  // between calls (then it is a graph input, shown as `<input>` in the state text,
  // so one version serves every value) or was refused (a capture failed with it,
  // or read it as a Python number: kept by value from then on). Keyed "m<module
  // index>.<name>" / "s<source index>"; cleared when the modules are listed again.
  struct FloatState {
    double first = 0;
    bool dynamic = false, refused = false;
  };
  std::map<std::string, FloatState> floats;
  // The floats passed as inputs in the current call, in input order (made with
  // the state text, so valid while the reader returns the same text).
  struct Lift {
    std::string id, name;  // floats' key; for logs ("Net.temperature", "cfg.lr")
    nb::object value;      // the float read (an object of the owner's, compared by identity)
    int module = -1;       // where it lives: attr_dicts[module][key], or sources[source]
    int source = -1;
    nb::object key;        // the attribute name (module attributes)
  };
  std::vector<Lift> lifted;
  bool lift_floats = true;    // options={"dynamic_float_attrs": False} turns it off
  bool rebuild = false;       // a float was refused: the reader builds the text again
  bool fresh = false;         // the reader ran just before this call: its text stands
  // Functions (and other callables) a source path held when the text was built,
  // shown in it by address (`act = F.gelu` after `F.relu` is another program):
  // held here so that no other object can take a shown address while a version
  // built for it may still be selected. Past kMaxPinned the text starts a new
  // generation (no older version is reused) and the old ones are let go.
  std::map<PyObject*, nb::object> pinned;
  static constexpr size_t kMaxPinned = 512;
  void add(nb::handle modules) {
    for (nb::handle mod : modules) {
      mods.push_back(keep_py(nb::borrow(mod)));
      for (const char* name : {"_forward_pre_hooks", "_forward_hooks"}) {
        nb::object d = nb::getattr(mod, name, nb::none());
        hook_dicts.push_back(PyDict_Check(d.ptr()) ? keep_py(d) : nullptr);
      }
      for (const char* name : {"_backward_pre_hooks", "_backward_hooks"}) {
        nb::object d = nb::getattr(mod, name, nb::none());
        backward_hook_dicts.push_back(PyDict_Check(d.ptr()) ? keep_py(d) : nullptr);
      }
      nb::object d = nb::getattr(mod, "__dict__", nb::none());
      attr_dicts.push_back(PyDict_Check(d.ptr()) ? keep_py(d) : nullptr);
      nb::object c = nb::getattr(mod, "_modules", nb::none());
      child_dicts.push_back(PyDict_Check(c.ptr()) ? keep_py(c) : nullptr);
      children.push_back(child_list(child_dicts.back()));
    }
  }
  static std::vector<nb::object> child_list(const std::shared_ptr<nb::object>& d) {
    std::vector<nb::object> v;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (d && PyDict_Next(d->ptr(), &pos, &key, &value)) {
      v.push_back(nb::borrow(key));
      v.push_back(value ? nb::borrow(value) : nb::none());
    }
    return v;
  }
  bool tree_changed() const {
    for (auto& src : sources)
      if (src.object.is_valid() && src.value().ptr() != src.object.ptr()) return true;
    for (size_t m = 0; m < mods.size(); ++m) {
      std::vector<nb::object> now = child_list(child_dicts[m]);
      if (now.size() != children[m].size()) return true;
      for (size_t i = 0; i < now.size(); ++i)
        if (now[i].ptr() != children[m][i].ptr()) return true;
    }
    return false;
  }
  // Whether a module of the tree has forward or full backward (pre-)hooks now (listed at the first
  // call): tp.compile(module) then runs them eagerly around its compiled forward.
  bool has_hooks() {
    if (!resolved) {
      resolved = true;
      resolve();
    }
    for (auto* dicts : {&hook_dicts, &backward_hook_dicts})
      for (auto& d : *dicts)
        if (d && PyDict_Check(d->ptr()) && PyDict_Size(d->ptr()) > 0) return true;
    return false;
  }
  void resolve() {
    mods.clear();
    hook_dicts.clear();
    backward_hook_dicts.clear();
    attr_dicts.clear();
    child_dicts.clear();
    children.clear();
    sources.clear();
    floats.clear();
    lifted.clear();
    nb::object found = (*finder)();
    if (modules_only) {
      add(found);
      return;
    }
    add(found[0]);
    for (nb::handle src : found[1]) {
      // (name, owner, key, ((kind, key), ...)), kind "attr" or "item"
      Source s{nb::cast<std::string>(src[0]), keep_py(nb::borrow(src[1])), keep_py(nb::borrow(src[2])), {}, {}};
      for (nb::handle st : src[3]) {
        std::string kind = nb::cast<std::string>(st[0]);
        s.steps.push_back({kind == "attr", nb::borrow(st[1]), kind == "len"});
      }
      sources.push_back(std::move(s));
      nb::object v = sources.back().value();
      if (v.is_valid() && PyObject_HasAttrString(v.ptr(), "_modules") &&
          PyObject_HasAttrString(v.ptr(), "training"))
        sources.back().object = v;
    }
  }
};

// The reader given to CompiledFunction::set_state_reader: the state's text,
// rebuilt only when one of its objects changed.
std::function<const std::string&()> module_state_reader(std::shared_ptr<ModuleState> st);

}  // namespace tp::py
