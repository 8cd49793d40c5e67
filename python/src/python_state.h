// The Python state a capture bakes in and that must select the version of a
// compiled function (CompiledFunction::set_state_reader): see ModuleState.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common.h"

namespace tp::py {

// The Python state a capture bakes in and that must select the version (read at
// every call, part of the first-level entry and the key):
// - per nn.Module, its `training` flag (dropout, batch norm trace one branch), its
//   forward (pre-)hooks (traced into the capture: a hook added or removed later
//   must not be skipped or kept silently) and its number attributes (`self.scale`,
//   a dropout's `p`, an `eps`);
// - numbers (and short lists/tuples of numbers) in the globals and closure cells
//   the compiled function's code names (`lr * g`, `x * k[0]`).
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
  // Per module, its `_modules` dict and the children it held when listed: a
  // submodule replaced, added or removed (`model[1] = nn.ReLU()`) changes the
  // program the capture traced, and modules not listed have unread state.
  std::vector<std::shared_ptr<nb::object>> child_dicts;
  std::vector<std::vector<nb::object>> children;
  struct Source {
    std::string name;
    std::shared_ptr<nb::object> owner, key;  // a dict and its key, or a cell and None
    // An nn.Module when listed (a global `model`): rebound to another, the
    // program may differ, as for a changed tree.
    nb::object object;
    PyObject* value() const {
      PyObject* o = owner->ptr();
      return PyCell_Check(o) ? PyCell_GET(o) : PyDict_Check(o) ? PyDict_GetItem(o, key->ptr()) : nullptr;
    }
  };
  std::vector<Source> sources;
  void add(nb::handle modules) {
    for (nb::handle mod : modules) {
      mods.push_back(keep_py(nb::borrow(mod)));
      for (const char* name : {"_forward_pre_hooks", "_forward_hooks"}) {
        nb::object d = nb::getattr(mod, name, nb::none());
        hook_dicts.push_back(PyDict_Check(d.ptr()) ? keep_py(d) : nullptr);
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
      if (src.object.is_valid() && src.value() != src.object.ptr()) return true;
    for (size_t m = 0; m < mods.size(); ++m) {
      std::vector<nb::object> now = child_list(child_dicts[m]);
      if (now.size() != children[m].size()) return true;
      for (size_t i = 0; i < now.size(); ++i)
        if (now[i].ptr() != children[m][i].ptr()) return true;
    }
    return false;
  }
  void resolve() {
    mods.clear();
    hook_dicts.clear();
    attr_dicts.clear();
    child_dicts.clear();
    children.clear();
    sources.clear();
    nb::object found = (*finder)();
    if (modules_only) {
      add(found);
      return;
    }
    add(found[0]);
    for (nb::handle src : found[1]) {
      sources.push_back({nb::cast<std::string>(src[0]), keep_py(nb::borrow(src[1])), keep_py(nb::borrow(src[2])), {}});
      PyObject* v = sources.back().value();
      if (v && PyObject_HasAttrString(v, "_modules") && PyObject_HasAttrString(v, "training"))
        sources.back().object = nb::borrow(v);
    }
  }
};

// The reader given to CompiledFunction::set_state_reader: the state's text,
// rebuilt only when one of its objects changed.
std::function<std::string()> module_state_reader(std::shared_ptr<ModuleState> st);

}  // namespace tp::py
