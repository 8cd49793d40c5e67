// The Python state a compiled function's version depends on (python_state.h).
#include "python_state.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tp::py {
namespace {

// Appends a number's value (a bool, an int or a float; exactly, floats by their
// shortest round-trip text) and returns true; false for anything else.
bool append_number(std::string& s, PyObject* v, int depth = 0) {
  char buf[32];
  if (PyBool_Check(v)) {
    s += v == Py_True ? "True" : "False";
  } else if (PyLong_CheckExact(v)) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow) {
      s += "<big int>";  // not compared: such a value is not a size or a scale
      return true;
    }
    auto r = std::to_chars(buf, buf + sizeof(buf), x);
    s.append(buf, r.ptr);
  } else if (PyFloat_CheckExact(v)) {
    auto r = std::to_chars(buf, buf + sizeof(buf), PyFloat_AS_DOUBLE(v));
    s.append(buf, r.ptr);
  } else if (PyLong_Check(v) || PyFloat_Check(v) ||
             (std::strncmp(Py_TYPE(v)->tp_name, "numpy.", 6) == 0 &&
              std::strcmp(Py_TYPE(v)->tp_name, "numpy.ndarray") != 0 && PyObject_HasAttrString(v, "dtype"))) {
    // A subclass (an IntEnum, numpy.float64) or a numpy scalar (numpy.float32):
    // the capture baked its value in as a number's (it used to be left out of the
    // state, so a changed `self.t = np.float64(3.0)` kept running the old value).
    PyObject* r = PyObject_Repr(v);
    const char* u = r ? PyUnicode_AsUTF8(r) : nullptr;
    if (!u) {
      PyErr_Clear();
      Py_XDECREF(r);
      return false;
    }
    ((((s += Py_TYPE(v)->tp_name) += '(') += u) += ')');
    Py_DECREF(r);
  } else if (depth == 0 && v == Py_None) {
    s += "None";
  } else if (depth == 0 && PyUnicode_CheckExact(v) && PyUnicode_GET_LENGTH(v) <= 64) {
    // A mode string (`cfg.act == "relu"`) selects a branch as a number does.
    const char* u = PyUnicode_AsUTF8(v);
    if (!u) {
      PyErr_Clear();
      return false;
    }
    ((s += '"') += u) += '"';
  } else if (depth == 0 && (PyList_CheckExact(v) || PyTuple_CheckExact(v))) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
    if (n > 16) return false;
    size_t mark = s.size();
    s += '[';
    for (Py_ssize_t i = 0; i < n; ++i) {
      if (i) s += ',';
      if (!append_number(s, PySequence_Fast_GET_ITEM(v, i), 1)) {
        s.resize(mark);
        return false;
      }
    }
    s += ']';
  } else {
    return false;
  }
  return true;
}

// Appends an object's identity (its address, held in `st.pinned` so that no
// other object takes it) and its qualified name (for the recompile log).
void append_identity(ModuleState& st, std::string& s, PyObject* o) {
  st.pinned.try_emplace(o, nb::borrow(o));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", static_cast<void*>(o));
  s += '<';
  PyObject* q = PyObject_GetAttrString(o, "__qualname__");
  const char* u = q && PyUnicode_Check(q) ? PyUnicode_AsUTF8(q) : nullptr;
  if (!u) PyErr_Clear();
  (s += u ? u : Py_TYPE(o)->tp_name) += ' ';
  Py_XDECREF(q);
  (s += buf) += '>';
}

// A member of an enum.Enum (`self.mode = Mode.EVAL`): compared as a mode string
// is, by identity (members are singletons). Int enums are numbers already.
bool append_enum(ModuleState& st, std::string& s, PyObject* v) {
  const char* meta = Py_TYPE(reinterpret_cast<PyObject*>(Py_TYPE(v)))->tp_name;
  if (std::strcmp(meta, "EnumType") != 0 && std::strcmp(meta, "EnumMeta") != 0) return false;
  append_identity(st, s, v);
  return true;
}

// A function, bound method, functools.partial or other callable object (not a
// class) held by a module or read through a source path: the capture traced the code it runs, so
// another one there is another program (`ACT = tp.tanh` after `ACT = F.relu`
// kept running relu). Shown by identity; a bound method by its function and
// its self (a fresh method object per lookup is still the same program).
bool append_callable(ModuleState& st, std::string& s, PyObject* v, int depth = 0) {
  if (PyType_Check(v) || !PyCallable_Check(v)) return false;
  if (depth == 0 && std::strcmp(Py_TYPE(v)->tp_name, "functools.partial") == 0) {
    // A partial made anew at every step (`functools.partial(F.leaky_relu,
    // negative_slope=0.2)`) is the same program: its function and its arguments.
    nb::object fn = nb::steal(PyObject_GetAttrString(v, "func"));
    nb::object args = nb::steal(PyObject_GetAttrString(v, "args"));
    nb::object kw = nb::steal(PyObject_GetAttrString(v, "keywords"));
    if (fn.is_valid() && args.is_valid() && kw.is_valid() && PyTuple_Check(args.ptr()) && PyDict_Check(kw.ptr())) {
      s += "partial(";
      auto arg = [&](PyObject* a) {
        if (!append_number(s, a) && !append_enum(st, s, a) && !append_callable(st, s, a, 1)) append_identity(st, s, a);
      };
      arg(fn.ptr());
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args.ptr()); ++i) arg(((s += ','), PyTuple_GET_ITEM(args.ptr(), i)));
      Py_ssize_t pos = 0;
      PyObject *key, *value;
      while (PyDict_Next(kw.ptr(), &pos, &key, &value)) {
        const char* u = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : nullptr;
        if (!u) PyErr_Clear();
        ((s += ',') += u ? u : "?") += '=';
        arg(value);
      }
      s += ')';
      return true;
    }
    PyErr_Clear();
  }
  if (PyMethod_Check(v)) {
    append_identity(st, s, PyMethod_GET_FUNCTION(v));
    append_identity(st, s, PyMethod_GET_SELF(v));
    return true;
  }
  append_identity(st, s, v);
  return true;
}

// Appends a module attribute's value: a number (as append_number), a short
// string (a loss's `reduction`, an RNN's `nonlinearity`, a user's `self.mode`),
// None (`self.mask = None`, later a tensor) or an enum member: each selects a
// branch as a number does (they used to be left out, so `criterion.reduction =
// "sum"` kept running the mean, and a mask set later was never applied); and a
// function or other callable by identity (`self.act = F.gelu`, an instance's own
// `model.forward = ...` or `self.helper = ...`, set before or after the first
// call). Lists and other objects are not shown (the source paths see what the
// code reads of them).
bool append_module_attr(ModuleState& st, std::string& s, PyObject* v) {
  if (v == Py_None || (PyUnicode_CheckExact(v) && PyUnicode_GET_LENGTH(v) <= 64)) return append_number(s, v, 0);
  if ((PyList_CheckExact(v) || PyTuple_CheckExact(v)) && PySequence_Fast_GET_SIZE(v) <= 16) {
    // (a short tuple of mode strings, `self.acts = ("relu", "tanh")`, as well as of numbers)
    size_t mark = s.size();
    s += '[';
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(v); ++i) {
      PyObject* e = PySequence_Fast_GET_ITEM(v, i);
      if (i) s += ',';
      bool text = PyUnicode_CheckExact(e) && PyUnicode_GET_LENGTH(e) <= 64;
      if (!(text ? append_number(s, e, 0) : append_number(s, e, 1))) {
        s.resize(mark);
        return false;
      }
    }
    s += ']';
    return true;
  }
  if (PyAnySet_CheckExact(v) && PySet_GET_SIZE(v) <= 16) {
    // A set of flags (`"triple" in self.flags`): its members, sorted (a set's
    // order depends on its history, not only on what it holds).
    std::vector<std::string> items;
    Py_ssize_t pos = 0;
    PyObject* e;
    Py_hash_t hash;
    while (_PySet_NextEntry(v, &pos, &e, &hash)) {
      std::string one;
      if (!append_number(one, e, PyUnicode_CheckExact(e) ? 0 : 1)) return false;
      items.push_back(std::move(one));
    }
    std::sort(items.begin(), items.end());
    s += '{';
    for (size_t i = 0; i < items.size(); ++i) (s += i ? "," : "") += items[i];
    s += '}';
    return true;
  }
  return append_number(s, v, 1) || append_enum(st, s, v) || append_callable(st, s, v);
}

// The methods (and other descriptors) of a module's class and of its bases up
// to nn.Module, by identity: the capture traced the code `self.helper(x)` ran,
// so `Net.helper = other` (or `Net.forward = other`) after the first call is
// another program. Read only when the class changed (its version tag).
void append_class_methods(ModuleState& st, std::string& s, PyTypeObject* type) {
  static PyObject* const module_base = [] {
    PyObject* nn = PyImport_ImportModule("tensorplay.nn");
    PyObject* m = nn ? PyObject_GetAttrString(nn, "Module") : nullptr;
    Py_XDECREF(nn);
    if (!m) PyErr_Clear();
    return m;  // (kept for the process)
  }();
  PyObject* mro = type->tp_mro;
  if (!mro || !PyTuple_Check(mro)) return;
  (s += " class ") += type->tp_name;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    PyObject* cls = PyTuple_GET_ITEM(mro, i);
    if (cls == module_base || cls == reinterpret_cast<PyObject*>(&PyBaseObject_Type)) break;
    PyObject* d = reinterpret_cast<PyTypeObject*>(cls)->tp_dict;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (d && PyDict_Next(d, &pos, &key, &value)) {
      if (!PyUnicode_Check(key) || PyType_Check(value)) continue;
      Py_ssize_t n = PyUnicode_GET_LENGTH(key);
      if (n > 4 && PyUnicode_READ_CHAR(key, 0) == '_' && PyUnicode_READ_CHAR(key, 1) == '_' &&
          PyUnicode_READ_CHAR(key, n - 1) == '_' && PyUnicode_CompareWithASCIIString(key, "__call__") != 0)
        continue;  // (__init__, __module__, __doc__: not what a call runs)
      if (!PyCallable_Check(value) && !Py_TYPE(value)->tp_descr_get) continue;  // numbers: the sources
      const char* u = PyUnicode_AsUTF8(key);
      if (!u) {
        PyErr_Clear();
        continue;
      }
      ((s += ' ') += u) += '=';
      append_identity(st, s, value);
    }
  }
}

// The objects the state is made of, in a fixed order (nullptr separates groups):
// Python numbers are immutable, so while every one is the same object as at the
// last call the state is the same, and a call costs one pointer comparison per
// entry; any difference rebuilds the text (which may well be equal again).
template <class Visit>
void visit_modules(const ModuleState& st, Visit&& visit) {
  for (size_t m = 0; m < st.mods.size(); ++m) {
    for (auto* dicts : {&st.hook_dicts, &st.backward_hook_dicts})
      for (size_t k = 2 * m; k < 2 * m + 2; ++k) {
        PyObject* d = (*dicts)[k] ? (*dicts)[k]->ptr() : nullptr;
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (d && PyDict_Next(d, &pos, &key, &value)) visit(key);
        visit(nullptr);
      }
    for (auto& dict : {st.attr_dicts[m], st.child_dicts[m]}) {
      PyObject* d = dict ? dict->ptr() : nullptr;
      Py_ssize_t pos = 0;
      PyObject *key, *value;
      while (d && PyDict_Next(d, &pos, &key, &value)) {
        visit(key);
        visit(value);
      }
      visit(nullptr);
    }
  }
}

template <class Visit>
void visit_sources(const ModuleState& st, Visit&& visit) {
  for (auto& src : st.sources) {
    nb::object held = src.value();
    PyObject* v = held.ptr();
    visit(v);
    if (v && (PyList_CheckExact(v) || PyTuple_CheckExact(v)) && PySequence_Fast_GET_SIZE(v) <= 16)
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(v); ++i) visit(PySequence_Fast_GET_ITEM(v, i));
    visit(nullptr);
  }
}

#ifdef TP_DICT_VERSIONS
// The version of every dict visit_modules walks, in its order (0 for none).
template <class Visit>
void visit_module_dict_versions(const ModuleState& st, Visit&& visit) {
  auto version = [](const std::shared_ptr<nb::object>& d) { return d ? dict_version(d->ptr()) : 0; };
  for (size_t m = 0; m < st.mods.size(); ++m) {
    visit(version(st.hook_dicts[2 * m]));
    visit(version(st.hook_dicts[2 * m + 1]));
    visit(version(st.backward_hook_dicts[2 * m]));
    visit(version(st.backward_hook_dicts[2 * m + 1]));
    visit(version(st.attr_dicts[m]));
    visit(version(st.child_dicts[m]));
  }
}
#endif

// Automatic dynamic floats (ModuleState::floats): whether the float `v` read at
// `id` is passed as an input in this call (it changed since the first value
// seen there and was not refused); notes it in `st.lifted` then.
bool lift_float(ModuleState& st, const std::string& id, PyObject* v, ModuleState::Lift lift) {
  const double d = float_number_value(v);
  auto [it, inserted] = st.floats.try_emplace(id);
  ModuleState::FloatState& f = it->second;
  if (inserted) {
    f.first = d;
    return false;
  }
  if (!st.lift_floats || f.refused) return false;
  if (!f.dynamic) {
    if (std::memcmp(&d, &f.first, sizeof d) == 0) return false;  // (bitwise: -0.0 and NaN too)
    f.dynamic = true;
    if (const char* e = std::getenv("TP_LOGS"); e && std::string(e).find("recompiles") != std::string::npos)
      std::fprintf(stderr, "[tp.compile] %s: a float that changed between calls is an input from now on\n",
                   lift.name.c_str());
  }
  lift.id = id;
  lift.value = nb::borrow(v);
  st.lifted.push_back(std::move(lift));
  return true;
}

// Each module's class and its version tag (CPython gives a class a new tag
// whenever it or a base is changed: `Net.helper = other`), assigned first when
// a change reset it.
std::vector<std::pair<PyTypeObject*, unsigned>> class_tags(const ModuleState& st) {
  static PyObject* const forward = PyUnicode_InternFromString("forward");
  std::vector<std::pair<PyTypeObject*, unsigned>> tags;
  tags.reserve(st.mods.size());
  for (auto& mod : st.mods) {
    PyTypeObject* type = Py_TYPE(mod->ptr());
    if (!(type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) _PyType_Lookup(type, forward);  // (assigns one)
    tags.emplace_back(type, type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG ? type->tp_version_tag : 0);
  }
  return tags;
}

bool same_classes(const ModuleState& st, const std::vector<std::pair<PyTypeObject*, unsigned>>& last) {
  if (last.size() != st.mods.size()) return false;
  for (size_t m = 0; m < last.size(); ++m) {
    PyTypeObject* type = Py_TYPE(st.mods[m]->ptr());
    if (type != last[m].first || last[m].second == 0 || !(type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ||
        type->tp_version_tag != last[m].second)
      return false;
  }
  return true;
}

// The items of a list or set (in iteration order).
void container_items_of(PyObject* c, std::vector<nb::object>& out) {
  if (PyList_CheckExact(c)) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(c); ++i) out.push_back(nb::borrow(PyList_GET_ITEM(c, i)));
    return;
  }
  Py_ssize_t pos = 0;
  PyObject* e;
  Py_hash_t hash;
  while (_PySet_NextEntry(c, &pos, &e, &hash)) out.push_back(nb::borrow(e));
}

std::vector<std::pair<nb::object, std::vector<nb::object>>> container_items(const ModuleState& st) {
  std::vector<std::pair<nb::object, std::vector<nb::object>>> out;
  for (auto& dict : st.attr_dicts) {
    PyObject* d = dict ? dict->ptr() : nullptr;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (d && PyDict_Next(d, &pos, &key, &value)) {
      if (!PyList_CheckExact(value) && !PySet_CheckExact(value)) continue;
      if (PyObject_Length(value) > 16) continue;  // (not shown in the text either)
      out.emplace_back(nb::borrow(value), std::vector<nb::object>{});
      container_items_of(value, out.back().second);
    }
  }
  return out;
}

bool same_containers(const std::vector<std::pair<nb::object, std::vector<nb::object>>>& last) {
  for (auto& [c, items] : last) {
    PyObject* o = c.ptr();
    if (PyList_CheckExact(o)) {
      if (PyList_GET_SIZE(o) != static_cast<Py_ssize_t>(items.size())) return false;
      for (size_t i = 0; i < items.size(); ++i)
        if (PyList_GET_ITEM(o, i) != items[i].ptr()) return false;
      continue;
    }
    if (PySet_GET_SIZE(o) != static_cast<Py_ssize_t>(items.size())) return false;
    Py_ssize_t pos = 0;
    PyObject* e;
    Py_hash_t hash;
    for (size_t i = 0; _PySet_NextEntry(o, &pos, &e, &hash); ++i)
      if (i >= items.size() || e != items[i].ptr()) return false;
  }
  return true;
}

std::string state_text(ModuleState& st) {
  st.lifted.clear();
  if (st.pinned.size() > ModuleState::kMaxPinned) {  // (a new function at every call: let the old ones go)
    st.pinned.clear();
    ++st.generation;
  }
  std::string s;
  if (st.generation) s += "tree " + std::to_string(st.generation) + ": ";
  static PyObject* const training = PyUnicode_InternFromString("training");
  for (size_t m = 0; m < st.mods.size(); ++m) {
    PyObject* t = PyObject_GetAttr(st.mods[m]->ptr(), training);
    if (!t) {
      PyErr_Clear();
      s += '?';
    } else {
      s += PyObject_IsTrue(t) == 1 ? '1' : '0';
      Py_DECREF(t);
    }
    // Forward hooks, then full backward hooks: a capture that met the latter
    // refused (module.py), so one registered after a capture selects a new one.
    for (size_t k = 0; k < 4; ++k) {
      const auto& dict = k < 2 ? st.hook_dicts[2 * m + k] : st.backward_hook_dicts[2 * m + k - 2];
      PyObject* d = dict ? dict->ptr() : nullptr;
      if (!d || PyDict_Size(d) == 0) continue;
      static const char* const kinds[] = {" pre hooks", " hooks", " backward pre hooks", " backward hooks"};
      s += kinds[k];
      Py_ssize_t pos = 0;
      PyObject *key, *value;
      while (PyDict_Next(d, &pos, &key, &value)) {
        PyObject* r = PyObject_Repr(key);
        const char* u = r ? PyUnicode_AsUTF8(r) : nullptr;
        if (u) (s += ' ') += u;
        else PyErr_Clear();
        Py_XDECREF(r);
      }
      s += ';';
    }
    if (PyObject* d = st.attr_dicts[m] ? st.attr_dicts[m]->ptr() : nullptr) {
      Py_ssize_t pos = 0;
      PyObject *key, *value;
      while (PyDict_Next(d, &pos, &key, &value)) {
        if (!PyUnicode_Check(key) || PyUnicode_CompareWithASCIIString(key, "training") == 0) continue;
        size_t mark = s.size();
        const char* u = PyUnicode_AsUTF8(key);
        if (!u) {
          PyErr_Clear();
          continue;
        }
        ((s += ' ') += u) += '=';
        if (is_float_number(value) &&  // (numpy.float64 / numpy.float32 too)
            lift_float(st, "m" + std::to_string(m) + "." + u, value,
                       {{}, std::string(Py_TYPE(st.mods[m]->ptr())->tp_name) + "." + u, {}, static_cast<int>(m), -1,
                        nb::borrow(key)})) {
          s += "<input>";  // any value: the version takes it as a graph input
          continue;
        }
        if (!append_module_attr(st, s, value)) s.resize(mark);  // module attributes: numbers and mode strings
      }
    }
    s += " |";
  }
  std::vector<PyTypeObject*> classes;
  for (auto& mod : st.mods) {
    PyTypeObject* type = Py_TYPE(mod->ptr());
    if (std::find(classes.begin(), classes.end(), type) != classes.end()) continue;
    classes.push_back(type);
    append_class_methods(st, s, type);
  }
  for (size_t i = 0; i < st.sources.size(); ++i) {
    const ModuleState::Source& src = st.sources[i];
    nb::object held = src.value();
    PyObject* v = held.ptr();
    size_t mark = s.size();
    ((s += ' ') += src.name) += '=';
    if (v && is_float_number(v) &&  // (numpy.float64 / numpy.float32 too)
        lift_float(st, "s" + std::to_string(i), v, {{}, src.name, {}, -1, static_cast<int>(i), {}})) {
      s += "<input>";
      continue;
    }
    if (!v || !(append_number(s, v) || append_enum(st, s, v) || (!src.object.is_valid() && append_callable(st, s, v))))
      s.resize(mark);  // not a number (now): the fingerprint still sees a change
  }
  return s;
}

}  // namespace

std::function<const std::string&()> module_state_reader(std::shared_ptr<ModuleState> st) {
  // The last call's objects (held, so an address cannot be reused) and text;
  // the modules' part of the objects ends at `module_objects`.
  struct Last {
    std::vector<nb::object> objects;
    size_t module_objects = 0;
    std::vector<uint64_t> dict_versions;
    // Each module's class and its version tag (0: none valid; a class whose
    // tag cannot be kept is read again at every call).
    std::vector<std::pair<PyTypeObject*, unsigned>> classes;
    // The lists and sets the modules' __dicts__ held, with their items: changed
    // in place (`self.flags.add("x")`), they leave every dict as it was.
    std::vector<std::pair<nb::object, std::vector<nb::object>>> containers;
    std::string text;
  };
  auto last = std::make_shared<Last>();
  auto valid = std::make_shared<bool>(false);
  return [st, last, valid]() -> const std::string& {
    if (!st->resolved) {
      st->resolved = true;
      st->resolve();
    }
    if (st->fresh && *valid) {  // PyCompiled read it just before this call (lift_attrs)
      st->fresh = false;
      return last->text;
    }
    st->fresh = false;
    if (*valid && !st->rebuild) {
      size_t i = 0;
      bool same = true;
      auto compare = [&](PyObject* o) {
        same = same && i < last->objects.size() && last->objects[i].ptr() == o;
        ++i;
      };
#ifdef TP_DICT_VERSIONS
      // The modules' dicts unchanged: their entries are the same objects.
      size_t k = 0;
      visit_module_dict_versions(*st, [&](uint64_t v) {
        same = same && k < last->dict_versions.size() && last->dict_versions[k] == v;
        ++k;
      });
      same = same && k == last->dict_versions.size();
      i = last->module_objects;
#else
      visit_modules(*st, compare);
#endif
      if (same) visit_sources(*st, compare);
      same = same && same_classes(*st, last->classes) && same_containers(last->containers);
      if (same && i == last->objects.size()) return last->text;
    }
    if (st->tree_changed()) {  // list the modules again; versions of the old tree are not reused
      st->resolve();
      ++st->generation;
    }
    last->objects.clear();
    auto keep = [&](PyObject* o) { last->objects.push_back(o ? nb::borrow(o) : nb::object()); };
    visit_modules(*st, keep);
    last->module_objects = last->objects.size();
    visit_sources(*st, keep);
#ifdef TP_DICT_VERSIONS
    last->dict_versions.clear();
    visit_module_dict_versions(*st, [&](uint64_t v) { last->dict_versions.push_back(v); });
#endif
    last->classes = class_tags(*st);
    last->containers = container_items(*st);
    st->rebuild = false;
    last->text = state_text(*st);
    *valid = true;
    return last->text;
  };
}

}  // namespace tp::py
