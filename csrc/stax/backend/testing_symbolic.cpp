// Testing only: see testing_symbolic.h.
#include "stax/backend/testing_symbolic.h"

#include <map>

#include "passes/passes.h"

namespace tp::stax::testing {

namespace {
graph::SymDim symbolize(int64_t v, const std::vector<int64_t>& hints) {
  for (size_t k = 0; k < hints.size(); ++k)
    if (v == hints[k]) return stax::ir::size_var(static_cast<int>(k));
  for (size_t k = 0; k < hints.size(); ++k)  // one short of it (x[:, 1:])
    if (v == hints[k] - 1) return stax::ir::size_var(static_cast<int>(k)) - 1;
  for (size_t k = 0; k < hints.size(); ++k)  // two copies (cat of x with itself)
    if (v == 2 * hints[k]) return stax::ir::size_var(static_cast<int>(k)) * 2;
  for (size_t i = 0; i < hints.size(); ++i)  // two pieces side by side (cat)
    for (size_t j = i + 1; j < hints.size(); ++j)
      if (v == hints[i] + hints[j]) return stax::ir::size_var(static_cast<int>(i)) + stax::ir::size_var(static_cast<int>(j));
  for (size_t i = 0; i < hints.size(); ++i)
    for (size_t j = i + 1; j < hints.size(); ++j)
      if (v == hints[i] * hints[j])
        return stax::ir::size_var(static_cast<int>(i)) * stax::ir::size_var(static_cast<int>(j));
  return graph::SymDim(v);
}

}  // namespace

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
    TP_CHECK(s.input_index >= 0, ValueError, "mark_symbols: no input has a dim of size ", hints[k]);
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


void run_passes_keeping_mean(graph::Graph& g) {
  // Stand-in operators with the same names and no decomposition, for the passes only.
  static const std::map<const OpDef*, OpDef> whole = [] {
    std::map<const OpDef*, OpDef> m;
    for (const char* name : {"mean", "var", "var.dim", "var.unbiased", "std", "std.dim", "std.unbiased"}) {
      OpDef d = get_op(name);
      d.decompose = nullptr;
      m.emplace(&get_op(name), d);
    }
    return m;
  }();
  for (auto& n : g.nodes())
    if (auto it = whole.find(n->target); it != whole.end()) n->target = &it->second;
  passes::run_default_passes(g);
  for (auto& n : g.nodes())
    for (auto& [op, stand_in] : whole)
      if (n->target == &stand_in) n->target = op;
}

}  // namespace tp::stax::testing
