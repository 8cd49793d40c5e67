// Testing only: planted faults for the bisection tests (tp.compiler.bisect must
// name the layer a fault is in). Each hook is a clearly named private function
// of tensorplay._C; nothing calls them outside tests.
#include <nanobind/stl/function.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/tuple.h>

#include "common.h"
#include "graph/tracer.h"
#include "passes/passes.h"
#include "stax/backend/stax_backend.h"
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
// Dynamic shapes without the front end: a static capture made symbolic by a
// test-only heuristic. Every size equal to hints[k] becomes size_var(k), one
// equal to hints[i] * hints[j] (a flattened pair) their product, in every
// node's sizes and every int / int-list attribute, one equal to hints[k] - 1
// size_var(k) - 1, one equal to 2 * hints[k] twice it; the example call's sizes
// must therefore be distinctive (37, 53, 1031). Symbol k is read from the
// first input dim whose size is hints[k].
graph::SymDim symbolize(int64_t v, const std::vector<int64_t>& hints) {
  for (size_t k = 0; k < hints.size(); ++k)
    if (v == hints[k]) return stax::ir::size_var(static_cast<int>(k));
  for (size_t k = 0; k < hints.size(); ++k)  // one short of it (x[:, 1:])
    if (v == hints[k] - 1) return stax::ir::size_var(static_cast<int>(k)) - 1;
  for (size_t k = 0; k < hints.size(); ++k)  // two copies (cat of x with itself)
    if (v == 2 * hints[k]) return stax::ir::size_var(static_cast<int>(k)) * 2;
  for (size_t i = 0; i < hints.size(); ++i)
    for (size_t j = i + 1; j < hints.size(); ++j)
      if (v == hints[i] * hints[j])
        return stax::ir::size_var(static_cast<int>(i)) * stax::ir::size_var(static_cast<int>(j));
  return graph::SymDim(v);
}

void mark_symbols(graph::Graph& g, const std::vector<int64_t>& hints) {
  for (size_t k = 0; k < hints.size(); ++k) {
    graph::SymbolInfo s;
    s.hint = hints[k];
    for (graph::Node* p : g.placeholders())
      for (size_t d = 0; d < p->meta.sizes.size() && s.input_index < 0; ++d)
        if (p->meta.sizes[d] == hints[k]) {
          s.input_index = p->input_index;
          s.input_dim = static_cast<int>(d);
          s.origin = str(p->name, ".size(", d, ")");
        }
    TP_CHECK(s.input_index >= 0, ValueError, "_testing_stax_symbolic: no input has a dim of size ", hints[k]);
    g.symbols.push_back(s);
  }
  auto sym = [&](const Shape& sizes) {
    graph::SymShape out;
    for (auto v : sizes) out.push_back(symbolize(v, hints));
    return out;
  };
  for (auto& up : g.nodes()) {
    graph::Node* n = up.get();
    if (n->opcode == graph::Opcode::Output) continue;
    n->sym_sizes = sym(n->meta.sizes);
    n->output_sym_sizes.clear();
    for (auto& m : n->output_metas) n->output_sym_sizes.push_back(sym(m.sizes));
    n->sym_attrs.clear();
    for (auto& [name, value] : n->attrs.items()) {
      std::vector<graph::SymDim> e;
      if (auto* one = std::get_if<int64_t>(&value)) e.push_back(symbolize(*one, hints));
      else if (auto* many = std::get_if<std::vector<int64_t>>(&value))
        for (auto x : *many) e.push_back(symbolize(x, hints));
      bool any = false;
      for (auto& x : e) any = any || !x.is_const();
      if (any) n->sym_attrs[name] = e;
    }
  }
}

}  // namespace

void bind_testing_hooks(nb::module_& m) {
  m.def("_testing_plant_pass", [](std::string name, std::string kind, bool stax_only) {
    TP_CHECK(kind == "mul_to_add", ValueError, "_testing_plant_pass: unknown fault '", kind, "' (expected 'mul_to_add')");
    passes::register_testing_pass(name, mul_to_add, stax_only);
  }, nb::arg("name"), nb::arg("kind") = "mul_to_add", nb::arg("stax_only") = true);
  m.def("_testing_plant_stax_fault", &stax::testing::plant_fault, nb::arg("kind"), nb::arg("op") = "");
  // Captures fn on `inputs`, runs the Stax passes (decompositions, except
  // `mean`, whose count becomes a run-time size), makes the graph symbolic over
  // `hints` (see mark_symbols) and compiles it with the Stax backend. Returns
  // (run, source, graph code, extern count): run(list of tensors) -> list of tensors calls the
  // one compiled region at any sizes.
  m.def("_testing_stax_symbolic", [](nb::object fn, std::vector<Tensor> inputs, std::vector<int64_t> hints) {
    auto r = graph::trace([&](const std::vector<Tensor>& proxies) {
      nb::list l;
      for (auto& t : proxies) l.append(nb::cast(t));
      nb::object out = fn(*nb::tuple(l));
      std::vector<Tensor> outs;
      if (nb::isinstance<Tensor>(out)) outs.push_back(nb::cast<Tensor>(out));
      else
        for (nb::handle h : out) outs.push_back(nb::cast<Tensor>(h));
      return outs;
    }, inputs);
    graph::Graph& g = *r.graph;
    // mean stays whole: a stand-in operator with the same name and no decomposition.
    static const OpDef mean_whole = [] {
      OpDef d = get_op("mean");
      d.decompose = nullptr;
      return d;
    }();
    const OpDef* mean = &get_op("mean");
    for (auto& n : g.nodes())
      if (n->target == mean) n->target = &mean_whole;
    passes::run_default_passes(g);
    for (auto& n : g.nodes())
      if (n->target == &mean_whole) n->target = mean;
    mark_symbols(g, hints);
    std::shared_ptr<stax::CompiledRegion> region = stax::compile_region(g);
    std::function<std::vector<Tensor>(std::vector<Tensor>)> run = [region](std::vector<Tensor> in) {
      return region->run(in);
    };
    return std::make_tuple(run, region->source(), g.code(), region->extern_count());
  }, nb::arg("fn"), nb::arg("inputs"), nb::arg("hints"));
  m.def("_testing_clear_faults", [] {
    passes::clear_testing_passes();
    stax::testing::clear_faults();
  });
}

}  // namespace tp::py
