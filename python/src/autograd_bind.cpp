// Autograd in Python: the engine entry points, grad/inference modes, backward
// nodes as Python objects (grad_fn), hooks, custom Functions, and the
// autograd-related Tensor members.
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <nanobind/stl/shared_ptr.h>

#include <unordered_set>

#include "aot/region_node.h"
#include "autograd/engine.h"
#include "common.h"
#include "compile/compiled_function.h"
#include "core/grad_mode.h"
#include "graph/tracer.h"
#include "ops/ops.h"

namespace tp::py {
namespace {

using autograd::Node;

std::vector<Tensor> defined_or_empty(const std::vector<std::optional<Tensor>>& v) {
  std::vector<Tensor> out;
  for (auto& x : v) out.push_back(x ? *x : Tensor());
  return out;
}

std::vector<std::optional<Tensor>> to_optional(const std::vector<Tensor>& v) {
  std::vector<std::optional<Tensor>> out;
  for (auto& t : v) out.push_back(t.defined() ? std::optional<Tensor>(t) : std::nullopt);
  return out;
}

// A Python callable kept by C++ state (a hook or a backward) that may outlive the call.
std::shared_ptr<nb::object> hold(nb::handle fn) { return keep_py(nb::borrow(fn)); }

autograd::GradHook python_hook(nb::handle fn) {
  auto f = hold(fn);
  return [f](const Tensor& g) -> Tensor {
    nb::gil_scoped_acquire gil;
    nb::object r = (*f)(g);
    if (r.is_none()) return Tensor();
    TP_CHECK(nb::isinstance<Tensor>(r), TypeError, "a tensor hook must return None or a Tensor, got ",
             nb::inst_name(r).c_str());
    return nb::cast<Tensor>(r);
  };
}

// Returned by register_hook: remove() unregisters, also after the tensor is gone.
struct HookHandle {
  autograd::HookOwner owner;
  int64_t id;
  void remove() { autograd::remove_hook(owner, id); }
};

nb::object node_or_none(const std::shared_ptr<Node>& n) { return n ? nb::cast(n) : nb::none(); }

void bind_node(nb::module_& m) {
  nb::class_<Node>(m, "_Node")
      .def("name", &Node::name)
      .def_prop_ro("next_functions", [](const Node& n) {
        nb::list l;
        for (auto& e : n.next_edges) l.append(nb::make_tuple(node_or_none(e.fn), e.input_nr));
        return nb::tuple(l);
      })
      // The tensors the node keeps for its backward (bench: eager's saved
      // activation bytes next to a compiled region's).
      .def_prop_ro("_saved_tensors", [](const Node& n) {
        nb::list l;
        if (auto* op = dynamic_cast<const autograd::OpNode*>(&n)) {
          for (auto* v : {&op->saved_inputs, &op->saved_outputs})
            for (const autograd::SavedTensor& t : *v)
              if (t.defined()) l.append(nb::cast(t.raw()));
        } else if (auto* region = dynamic_cast<const aot::CompiledRegionNode*>(&n)) {
          for (const Tensor& t : region->saved)
            if (t.defined()) l.append(nb::cast(t));
        }
        return nb::tuple(l);
      })
      .def("register_hook", [](const std::shared_ptr<Node>&, nb::handle) {
        throw Error("grad_fn.register_hook is not supported; use Tensor.register_hook");
      })
      .def("__repr__", [](const Node& n) {
        return str("<", n.name(), " object at ", static_cast<const void*>(&n), ">");
      });
  nb::class_<HookHandle>(m, "_HookHandle")
      .def("remove", &HookHandle::remove)
      .def("__enter__", [](nb::handle self) { return self; })
      .def("__exit__", [](HookHandle& h, nb::args) { h.remove(); });
}

// Autograd calls a capture cannot turn into graph operators: the capture runs the
// function once without recording autograd (the compiled backward is built from
// the forward graph), so they would fail with a misleading message (the tensor
// "does not require grad") or take effect only at capture (a hook registered on
// an input, `p.grad = None` of optimizer.zero_grad()). Refused with the way out.
void refuse_in_capture(const char* what, const char* instead) {
  if (!graph::is_tracing()) return;
  note_step_refusal();  // (an autograd call: a step-wise run makes it eagerly, compile.cpp)
  throw CaptureError(str(what, " inside a compiled function (tp.compile) is not supported: the capture runs the "
                           "function once, without autograd; ", instead, ", or run the function without tp.compile"));
}
// `x.detach()` during a capture: a view of x recorded with grad mode off, so the
// graph has it (eager's detach makes a tensor outside the operators, which the
// capture could only refuse), it shares x's memory as eager's does (a write
// through it reaches x), and the AOT layer sends no gradient through it.
Tensor detach_or_trace(const Tensor& t) {
  if (!graph::is_tracing()) return autograd::detach(t);
  AutoGradMode no_grad(false);
  Tensor v = ops::view(t, t.sizes());
  graph::note_detached(v);
  return v;
}

constexpr const char* kHookInstead =
    "call it on a tensor outside the compiled function (an argument before the call, or a result after it)";
constexpr const char* kBackwardInstead = "return the loss and call backward() on it after the compiled call";

void bind_engine(nb::module_& m) {
  // grad_fn as recorded, without the capture's refusal of Tensor.grad_fn: the
  // tensor repr (_tensor_str.py) shows it, and a print(loss) inside a compiled
  // function (its values at capture, as eager's print) must not break the graph.
  m.def("_recorded_grad_fn", [](const Tensor& t) { return node_or_none(autograd::grad_fn(t)); });
  m.def("_backward", [](std::vector<Tensor> roots, std::vector<std::optional<Tensor>> grads, bool retain,
                        bool create_graph, std::vector<Tensor> inputs) {
    refuse_in_capture("backward()", kBackwardInstead);
    autograd::backward(roots, defined_or_empty(grads), retain, create_graph, inputs);
  }, nb::arg("roots"), nb::arg("grads"), nb::arg("retain_graph"), nb::arg("create_graph") = false,
        nb::arg("inputs") = std::vector<Tensor>{});
  // Tests: force what nodes of an operator keep (bit masks over inputs/outputs;
  // None: the operator's own declaration), and read that declaration.
  m.def("_set_saved_override", [](const std::string& name, std::optional<std::pair<uint64_t, uint64_t>> masks) {
    if (!masks) return autograd::set_saved_override(get_op(name), nullptr);
    SavedSet s{masks->first, masks->second};
    autograd::set_saved_override(get_op(name), &s);
  }, nb::arg("name"), nb::arg("masks").none());
  m.def("_saved_declaration", [](const std::string& name, std::vector<bool> needs_grad)
            -> std::optional<std::pair<uint64_t, uint64_t>> {
    const OpDef& op = get_op(name);
    if (!op.saved) return std::nullopt;
    SavedSet s = op.saved(needs_grad);
    return std::make_pair(s.inputs, s.outputs);
  }, nb::arg("name"), nb::arg("needs_grad"));
  m.def("_grad", [](std::vector<Tensor> roots, std::vector<Tensor> inputs, std::vector<std::optional<Tensor>> grads,
                    bool retain, bool allow_unused, bool create_graph) {
    refuse_in_capture("tp.autograd.grad", kBackwardInstead);
    return to_optional(autograd::grad(roots, inputs, defined_or_empty(grads), retain, allow_unused, create_graph));
  }, nb::arg("roots"), nb::arg("inputs"), nb::arg("grads"), nb::arg("retain_graph"), nb::arg("allow_unused"),
        nb::arg("create_graph") = false);
  // tp.func: whether the history of `roots` reaches a leaf that requires grad
  // other than `leaves` (a tensor an enclosing transform, or the caller's
  // autograd, tracks): then the transform's gradients keep their graph.
  m.def("_reaches_other_leaves", [](const std::vector<Tensor>& roots, const std::vector<Tensor>& leaves) {
    std::unordered_set<const TensorImpl*> own;
    for (const Tensor& l : leaves)
      if (l.defined()) own.insert(l.impl());
    std::unordered_set<const Node*> seen;
    std::vector<const Node*> stack;
    auto push = [&](const Node* n) {
      if (n && seen.insert(n).second) stack.push_back(n);
    };
    for (const Tensor& r : roots) {
      if (!r.defined() || !r.requires_grad()) continue;
      if (!r.impl()->grad_fn) {  // a leaf itself
        if (!own.count(r.impl())) return true;
        continue;
      }
      push(r.impl()->grad_fn.get());
    }
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      if (auto* acc = dynamic_cast<const autograd::AccumulateGrad*>(n)) {
        auto leaf = acc->leaf_.lock();
        if (!leaf || !own.count(leaf.get())) return true;
        continue;
      }
      for (const autograd::Edge& e : n->next_edges) push(e.fn.get());
    }
    return false;
  }, nb::arg("roots"), nb::arg("leaves"));
  // gradcheck: a 0-d alias of element k (row-major) of `t`, to move it in place.
  m.def("_element_alias", [](const Tensor& t, int64_t k) {
    TP_CHECK(k >= 0 && k < t.numel(), IndexError, "_element_alias: index ", k, " out of range");
    int64_t off = t.offset();
    for (int64_t d = t.dim() - 1; d >= 0; --d) {
      off += (k % t.sizes()[d]) * t.strides()[d];
      k /= t.sizes()[d];
    }
    return autograd::detach(t).as_strided({}, {}, off);
  });
  m.def("is_grad_enabled", &GradMode::is_enabled);
  m.def("_engine_accumulates", &autograd::engine_accumulates);
  m.def("_set_grad_enabled", &GradMode::set_enabled);
  m.def("_set_anomaly_enabled", &autograd::set_anomaly_enabled);
  m.def("_is_anomaly_enabled", &autograd::anomaly_enabled);
  m.def("is_inference_mode_enabled", &autograd::inference_mode_enabled);
  m.def("_set_inference_mode", &autograd::set_inference_mode);
  // tp.autograd.Function.apply: `backward` maps grads of the outputs (None where
  // none flowed) to grads of `inputs` (None where there is none).
  m.def("_record_function", [](const std::string& name, std::vector<std::optional<Tensor>> inputs,
                               std::vector<Tensor> outputs, nb::handle backward, std::vector<bool> non_diff) {
    auto fn = hold(backward);
    auto call = [fn](const std::vector<Tensor>& grads) {
      nb::gil_scoped_acquire gil;
      nb::object r = (*fn)(to_optional(grads));
      return defined_or_empty(nb::cast<std::vector<std::optional<Tensor>>>(r));
    };
    return autograd::record_function(name, defined_or_empty(inputs), outputs, call, non_diff);
  });
}

void bind_tensor_autograd() {
  nb::handle cls = nb::type<Tensor>();
  nb::object property = nb::module_::import_("builtins").attr("property");
  auto method = [&](const char* name, auto&& f, auto... extra) {
    cls.attr(name) = nb::cpp_function(f, nb::scope(cls), nb::name(name), nb::is_method(), extra...);
  };
  auto prop = [&](const char* name, auto&& get) { cls.attr(name) = property(nb::cpp_function(get)); };

  // While a call is captured the operators run without autograd, so an
  // intermediate's own flag is False: it reads what eager would give (`return
  // y, y.requires_grad`, `if h.requires_grad: h.register_hook(...)` took the
  // no-grad branch at every call).
  cls.attr("requires_grad") = property(
      nb::cpp_function([](const Tensor& t) {
        return graph::is_tracing() ? graph::traced_requires_grad(t) : t.requires_grad();
      }),
      nb::cpp_function([](const Tensor& t, bool v) {
        refuse_requires_grad_change(t, v);
        autograd::set_requires_grad(t, v);
      }));
  // The tensor's own flag, whatever a capture would read (tensor repr: a traced
  // intermediate that eager gives a grad_fn is not shown as a leaf requiring grad).
  method("_own_requires_grad", [](const Tensor& t) { return t.requires_grad(); });
  // requires_grad_ and detach_ return the very object (an nn.Parameter stays one).
  method("requires_grad_", [](nb::handle self, bool v) {
    refuse_requires_grad_change(nb::cast<const Tensor&>(self), v);
    autograd::set_requires_grad(nb::cast<const Tensor&>(self), v);
    return nb::borrow(self);
  }, nb::arg("requires_grad") = true);
  // .grad gives the same Python object while it is the same tensor (PyTorch's
  // identity: `g = p.grad; ...; p.grad is g` after an in-place accumulation,
  // id(p.grad) as a key, `p.grad = g; p.grad is g`).
  cls.attr("grad") = property(
      nb::cpp_function([](const Tensor& t) -> nb::object {
        TensorImpl* impl = t.impl();
        if (graph::is_tracing()) compile::note_grad_read(t);  // `p.grad is None` selects the version
        if (impl->grad_fn && !impl->retains_grad && !impl->grad)
          PyErr_WarnEx(PyExc_UserWarning,
                       "The .grad attribute of a non-leaf Tensor is being accessed; it is not populated during "
                       "backward() unless you call .retain_grad() on it first.", 1);
        if (!impl->grad) {
          autograd::drop_grad_wrapper(*impl);
          return nb::none();
        }
        autograd::AutogradMeta& m = autograd::meta(t);
        if (auto* o = static_cast<nb::object*>(m.grad_wrapper.get()); o && nb::inst_check(*o) &&
                                                                     nb::cast<const Tensor&>(*o).impl() == impl->grad.get())
          return *o;
        nb::object o = nb::cast(Tensor(impl->grad));
        m.grad_wrapper = keep_py(o);
        return o;
      }),
      nb::cpp_function([](const Tensor& t, nb::handle gh) {
        std::optional<Tensor> g;
        if (!gh.is_none()) {
          TP_CHECK(nb::isinstance<Tensor>(gh), TypeError, "assigned grad expected to be a Tensor or None but got "
                   "grad of type ", nb::type_name(gh.type()).c_str());
          g = nb::cast<Tensor>(gh);
        }
        refuse_in_capture("setting Tensor.grad (optimizer.zero_grad())",
                          "call it outside the compiled function (or zero_grad(set_to_none=False))");
        if (g) {
          TP_CHECK(g->sizes() == t.sizes(), ValueError, "assigned grad has shape ", shape_str(g->sizes()),
                   " but the tensor has shape ", shape_str(t.sizes()));
          TP_CHECK(g->dtype() == t.dtype(), TypeError, "assigned grad has dtype ", dtype_name(g->dtype()),
                   " but the tensor has dtype ", dtype_name(t.dtype()));
        }
        t.impl()->grad = g ? g->impl_ptr() : nullptr;
        autograd::drop_grad_wrapper(*t.impl());
        if (g) autograd::meta(t).grad_wrapper = keep_py(nb::borrow(gh));
      }, nb::arg("self"), nb::arg("grad").none()));
  // In a capture an intermediate has no grad_fn of its own: it is a leaf only where
  // eager's would be (it does not require grad there; see requires_grad).
  prop("is_leaf", [](const Tensor& t) {
    if (t.impl()->grad_fn != nullptr) return false;
    return !graph::is_tracing() || t.requires_grad() || !graph::traced_requires_grad(t);
  });
  // In a capture an intermediate that eager would give a backward node has none
  // (the capture records no autograd): answering None sent `if h.grad_fn is None`
  // down the wrong branch, silently. It is refused instead (a graph break).
  prop("grad_fn", [](const Tensor& t) {
    if (graph::is_tracing() && !t.impl()->grad_fn && !t.requires_grad() && graph::traced_requires_grad(t))
      throw CaptureError(
          "reading grad_fn of a result computed from tensors that require grad inside a compiled function "
          "(tp.compile) is not supported: the capture records no autograd, so it has none; read it on a result "
          "of the compiled call, or run the function without tp.compile");
    return node_or_none(autograd::grad_fn(t));
  });
  prop("retains_grad", [](const Tensor& t) { return t.impl()->retains_grad; });
  // The tensor a view reads (the root of a chain of views); None for a non-view.
  // The very Python object the view was made from when known (note_base_object),
  // else one wrapper, kept so that repeated reads give the same object.
  prop("_base", [](const Tensor& t) -> nb::object {
    TensorImpl* impl = t.impl();
    if (!impl->view_base) return nb::none();
    if (auto* o = static_cast<nb::object*>(impl->base_py.get());
        o && nb::inst_check(*o) && nb::cast<const Tensor&>(*o).impl() == impl->view_base.get())
      return *o;
    nb::object o = nb::cast(Tensor(impl->view_base));
    impl->base_py = keep_py(o);
    return o;
  });
  prop("output_nr", [](const Tensor& t) { return t.impl()->output_nr; });
  method("is_inference", [](const Tensor& t) { return autograd::is_inference(t); });
  method("backward", [](const Tensor& t, std::optional<Tensor> gradient, std::optional<bool> retain_graph,
                        bool create_graph, nb::handle inputs) {
    refuse_in_capture("backward()", kBackwardInstead);
    std::vector<Tensor> ins;
    if (nb::isinstance<Tensor>(inputs)) ins.push_back(nb::cast<Tensor>(inputs));
    else if (!inputs.is_none()) ins = nb::cast<std::vector<Tensor>>(inputs);
    autograd::backward({t}, {gradient ? *gradient : Tensor()}, retain_graph.value_or(create_graph), create_graph,
                       ins);
  }, nb::arg("gradient") = nb::none(), nb::arg("retain_graph") = nb::none(), nb::arg("create_graph") = false,
     nb::arg("inputs") = nb::none());
  method("detach", [](const Tensor& t) { return detach_or_trace(t); });
  method("detach_", [](nb::handle self) {
    const Tensor& t = nb::cast<const Tensor&>(self);
    // As PyTorch: a view shares its base's autograd history, so it cannot leave it alone.
    if (t.impl()->view_base)
      throw Error(str("Tensor.detach_(): a view (shape ", shape_str(t.sizes()),
                      ") cannot be detached in place; use y = x.detach() instead"));
    if (graph::is_tracing()) {
      // detach_ only clears autograd fields, which the capture's tensors do not
      // use: the graph went on differentiating through t (`h = lin(x);
      // h.detach_()` still sent gradients into lin's parameters under
      // tp.compile). A tensor the function made stands for its detached view
      // from here on, as detach() records it; an argument's, a parameter's or
      // a view's autograd state the compiled program cannot change at later
      // calls (nor tell a view's base apart), so that is refused.
      if (!graph::is_own_value(t))
        throw CaptureError(
            "Tensor.detach_() of an argument, a module's tensor or a view inside a compiled function (tp.compile) is "
            "not supported: the capture cannot change its autograd state at later calls; use y = x.detach() instead");
      AutoGradMode no_grad(false);
      Tensor v = ops::view(t, t.sizes());
      graph::note_detached(v);
      graph::rebind_value(t, v);
    }
    autograd::detach_(t);
    return nb::borrow(self);
  });
  method("retain_grad", [](const Tensor& t) {
    refuse_in_capture("Tensor.retain_grad", kHookInstead);
    autograd::retain_grad(t);
  });
  method("register_hook", [](const Tensor& t, nb::handle fn) {
    refuse_in_capture("Tensor.register_hook", kHookInstead);
    int64_t id = autograd::register_hook(t, python_hook(fn));
    return HookHandle{autograd::hook_owner(t), id};
  }, nb::arg("hook"));
  // The hook gets the very object it was registered on (an nn.Parameter, a key of
  // the user's dict of per-parameter optimizers), held weakly: the hook lives on
  // the tensor, and a strong reference would keep the object alive forever.
  method("register_post_accumulate_grad_hook", [](nb::handle self, nb::handle fn) {
    const Tensor& t = nb::cast<const Tensor&>(self);
    refuse_in_capture("Tensor.register_post_accumulate_grad_hook", kHookInstead);
    auto f = hold(fn);
    auto owner = keep_py(nb::steal(PyWeakref_NewRef(self.ptr(), nullptr)));
    int64_t id = autograd::register_hook(t, [f, owner](const Tensor& leaf) {
      nb::gil_scoped_acquire gil;
#if PY_VERSION_HEX >= 0x030D0000
      PyObject* ref = nullptr;
      PyWeakref_GetRef(owner->ptr(), &ref);
      nb::object obj = ref ? nb::steal(ref) : nb::none();
#else
      nb::object obj = nb::borrow(PyWeakref_GetObject(owner->ptr()));  // None once dead
#endif
      if (!obj.is_none() && nb::cast<const Tensor&>(obj).impl() == leaf.impl())
        (*f)(obj);
      else
        (*f)(leaf);
      return Tensor();
    }, true);
    return HookHandle{autograd::hook_owner(t), id};
  }, nb::arg("hook"));
}

}  // namespace

// Turning requires_grad on or off inside a capture: the graph's values carry no
// autograd state of their own (a new leaf made inside the function would come
// out of the compiled call without requires_grad, its uses without grad_fn),
// and switching an argument's flag is a change to the caller's tensor that the
// compiled call would not repeat. Refused like the other autograd calls.
void refuse_requires_grad_change(const Tensor& t, bool v) {
  if (graph::is_tracing() && v != graph::traced_requires_grad(t))
    refuse_in_capture(v ? "making a tensor require grad (requires_grad_(), requires_grad=True, nn.Parameter)"
                        : "requires_grad_(False)",
                      "create the tensor outside the compiled function and pass it in (or make it a module "
                      "parameter)");
}

void bind_autograd(nb::module_& m) {
  bind_node(m);
  bind_engine(m);
  bind_tensor_autograd();
}

}  // namespace tp::py
