// Testing only: planted faults for the bisection tests (tp.compiler.bisect must
// name the layer a fault is in). Each hook is a clearly named private function
// of tensorplay._C; nothing calls them outside tests.
#include "common.h"
#include "passes/passes.h"
#include "stax/backend/testing_faults.h"

namespace tp::py {

namespace {
// A broken graph pass: every float `mul` becomes `add` (same arguments, same
// result metadata), so the graph computes a wrong value.
bool mul_to_add(graph::Graph& g) {
  const OpDef* add = find_op("add");
  bool changed = false;
  for (auto& n : g.nodes())
    if (n->opcode == graph::Opcode::CallFunction && n->is_op("mul") && is_floating(n->meta.dtype)) {
      n->target = add;
      changed = true;
    }
  return changed;
}
}  // namespace

void bind_testing_hooks(nb::module_& m) {
  m.def("_testing_plant_pass", [](std::string name, std::string kind, bool stax_only) {
    TP_CHECK(kind == "mul_to_add", ValueError, "_testing_plant_pass: unknown fault '", kind, "' (expected 'mul_to_add')");
    passes::register_testing_pass(name, mul_to_add, stax_only);
  }, nb::arg("name"), nb::arg("kind") = "mul_to_add", nb::arg("stax_only") = true);
  m.def("_testing_plant_stax_fault", &stax::testing::plant_fault, nb::arg("kind"), nb::arg("op") = "");
  m.def("_testing_clear_faults", [] {
    passes::clear_testing_passes();
    stax::testing::clear_faults();
  });
}

}  // namespace tp::py
