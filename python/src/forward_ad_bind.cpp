// Forward-mode AD in Python: the dual-level and dual-tensor primitives under
// tensorplay._C (tensorplay/autograd/forward_ad.py builds PyTorch's API on them).
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "autograd/forward_ad.h"
#include "common.h"
#include "graph/tracer.h"
#include "ops/registry.h"

namespace tp::py {
namespace {

// A capture (tp.compile) records operators without forward AD: a dual level
// opened (or a dual tensor made) inside a compiled function would give no
// tangents at all. Refused, as reverse-mode transforms are.
void refuse_in_capture(const char* what) {
  if (graph::is_tracing())
    throw CaptureError(str(what, " inside a compiled function (tp.compile) is not supported: the capture records "
                           "no tangents (forward-mode AD: tp.func.jvp, tp.func.jacfwd, forward_ad.dual_level, "
                           "make_dual); compute the tangents outside the compiled function, or run the function "
                           "without tp.compile"));
}

}  // namespace

void bind_forward_ad(nb::module_& m) {
  namespace fad = autograd::forward_ad;
  m.def("_fwd_enter_dual_level", [] {
    refuse_in_capture("forward_ad.dual_level (opening a dual level)");
    return fad::enter_dual_level();
  });
  m.def("_fwd_exit_dual_level", &fad::exit_dual_level, nb::arg("level"));
  m.def("_fwd_current_level", &fad::current_level);
  m.def("_fwd_make_dual", [](const Tensor& primal, const Tensor& tangent, int64_t level) {
    refuse_in_capture("forward_ad.make_dual");
    return fad::make_dual(primal, tangent, level);
  }, nb::arg("primal"), nb::arg("tangent"), nb::arg("level"));
  m.def("_fwd_unpack_dual", [](const Tensor& t, int64_t level) {
    if (fad::current_level() >= 0) refuse_in_capture("forward_ad.unpack_dual");
    auto [p, g] = fad::unpack_dual(t, level);
    return std::make_pair(p, g.defined() ? nb::cast(g) : nb::none());
  }, nb::arg("tensor"), nb::arg("level"));
  m.def("_fwd_formula_names", &fad::ops_with_formula);  // every name a tangent formula was registered under
  // (name, has a reverse-mode formula, has a tangent formula, is an implicit composite) per operator.
  m.def("_fwd_coverage", [] {
    nb::list l;
    for (const OpDef* op : all_ops())
      l.append(nb::make_tuple(op->name, op->backward != nullptr, fad::find_jvp(op->name) != nullptr,
                              op->is_implicit_composite(), op->tags));
    return l;
  });
}

}  // namespace tp::py
