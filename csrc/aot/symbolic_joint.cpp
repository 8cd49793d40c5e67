// The joint graph of a symbolic forward graph (dynamic shapes in training).
//
// The joint trace runs with the forward's symbols on its primals (and on the
// tangents' dims that are forward symbols), so every recorded node gets its
// symbolic shape from the tracer's rules, as in a symbolic capture. The
// derivative formulas, though, are C++ that reads sizes as plain ints: an
// `expand(g, x.sizes())` is matched to the input's symbols by the rules, but a
// number computed from a size (mean's 1/N as a scalar argument) would be baked
// in silently. So the trace is checked: a second, static trace at other sizes
// must record the same program, with the attributes and sizes the symbolic
// trace predicts there. Only then is the symbolic joint graph used (one
// partition, one forward and one backward artifact for every size); otherwise
// the caller trains statically (a version per size, never a wrong gradient).
#include <unordered_set>

#include "aot/device_constants.h"
#include "aot/joint_graph.h"
#include "graph/same_program.h"
#include "graph/interpreter.h"
#include "graph/sym_shape_rules.h"
#include "ops/ops.h"
#include "passes/passes.h"

namespace tp::aot {
namespace {

using graph::Node;
using graph::Opcode;
using graph::SymDim;

bool same_shape_at(const graph::SymShape& s, const Shape& real, const std::unordered_map<int, int64_t>& values) {
  if (s.size() != real.size()) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if (stax::ir::evaluate(s[i], values) != real[i]) return false;
  return true;
}

// `a` (symbolic) evaluated at `values` is the program `b` (static) recorded.
bool same_program_at(const graph::Graph& a, const graph::Graph& b, const std::unordered_map<int, int64_t>& values,
                     std::string* why) {
  auto attrs = [&](const Node& x, const Node& y) -> std::string {
    return x.opcode != Opcode::CallFunction || graph::evaluate_sym_attrs(x, values) == y.attrs ? "" : "attributes";
  };
  auto sizes = [&](const Node& x, const Node& y) -> std::string {
    if (!same_shape_at(graph::sym_shape_of(x), y.meta.sizes, values)) return "sizes";
    if (x.output_sym_sizes.size() != y.output_metas.size()) return y.output_metas.empty() ? "" : "sizes";
    for (size_t o = 0; o < y.output_metas.size(); ++o)
      if (!same_shape_at(x.output_sym_sizes[o], y.output_metas[o].sizes, values)) return "sizes";
    return "";
  };
  *why = graph::program_difference(a, b, attrs, sizes);
  return why->empty();
}

}  // namespace

std::unique_ptr<JointGraph> trace_joint_symbolic(const graph::Graph& fw, const std::vector<Tensor>& inputs,
                                                 const std::vector<bool>& needs_grad,
                                                 std::vector<graph::ShapeGuard>* guards, std::string* why) {
  TP_CHECK(fw.is_symbolic(), Error, "internal: trace_joint_symbolic of a static graph");
  std::vector<const Node*> placeholder(inputs.size(), nullptr);
  for (Node* p : fw.placeholders())
    if (p->input_index >= 0 && static_cast<size_t>(p->input_index) < inputs.size())
      placeholder[static_cast<size_t>(p->input_index)] = p;
  std::vector<graph::ShapeGuard> jguards;
  JointGraph j = trace_joint_raw(fw, inputs, needs_grad, nullptr, &jguards);
  const graph::Graph& jg = *j.graph;
  auto fail = [&](std::string w) {
    *why = std::move(w);
    return std::unique_ptr<JointGraph>();
  };
  if (!jg.is_symbolic()) return fail("the joint trace specialized every size");
  // Joint symbol k -> the forward's expression (a bare symbol) at the same primal dim.
  std::unordered_map<int, SymDim> to_fw;
  for (size_t k = 0; k < jg.symbols.size(); ++k) {
    const graph::SymbolInfo& si = jg.symbols[k];
    if (si.input_index < 0 || static_cast<size_t>(si.input_index) >= inputs.size() ||
        !placeholder[static_cast<size_t>(si.input_index)])
      return fail(str("the joint trace has a size ", si.origin, " that is not a forward input's"));
    const graph::SymShape& f = placeholder[static_cast<size_t>(si.input_index)]->sym_sizes;
    if (static_cast<size_t>(si.input_dim) >= f.size() || !f[static_cast<size_t>(si.input_dim)].is_size())
      return fail(str("the joint trace's size ", si.origin, " is static in the forward"));
    to_fw[stax::ir::size_var_id(static_cast<int>(k))] = f[static_cast<size_t>(si.input_dim)];
    // The forward nodes' symbolic attributes were handed to the trace in the
    // forward's numbering: it must be the joint's.
    if (f[static_cast<size_t>(si.input_dim)].size_index() != static_cast<int>(k))
      return fail("the joint trace numbers the sizes differently from the forward");
  }
  // Every forward symbol must survive the joint trace as the same symbol (a
  // derivative formula that specialized or unified one changes the program).
  for (Node* p : jg.placeholders()) {
    if (p->input_index < 0 || static_cast<size_t>(p->input_index) >= inputs.size()) continue;
    const Node* f = placeholder[static_cast<size_t>(p->input_index)];
    if (!f) continue;
    graph::SymShape js = graph::sym_shape_of(*p);
    if (js.size() != f->sym_sizes.size()) return fail("internal: joint placeholder rank");
    for (size_t d = 0; d < js.size(); ++d)
      if (!(stax::ir::substitute(js[d], to_fw) == f->sym_sizes[d]))
        return fail(str("the joint trace specialized ", p->name, ".size(", d, ") (a derivative formula fixed it)"));
  }
  // Other sizes: each symbol moved off its hint, to values that stay distinct
  // and satisfy the capture's guards (a reshape's divisibility): the hints
  // scaled by 2, 3, ..., else shifted.
  std::unordered_map<int, int64_t> other;
  auto admissible = [&](const std::unordered_map<int, int64_t>& v) {
    std::unordered_set<int64_t> seen;
    for (size_t k = 0; k < jg.symbols.size(); ++k) {
      const int64_t x = v.at(stax::ir::size_var_id(static_cast<int>(k)));
      const graph::SymbolInfo& s = jg.symbols[k];
      if (x == s.hint || x < s.min || x > s.max || !seen.insert(x).second) return false;
    }
    for (auto& g : jguards)
      if (!g.holds(v)) return false;
    return true;
  };
  bool found = false;
  for (int64_t m = 2; m <= 8 && !found; ++m) {
    for (int shift = 0; shift <= 1 && !found; ++shift) {
      other.clear();
      for (size_t k = 0; k < jg.symbols.size(); ++k)
        other[stax::ir::size_var_id(static_cast<int>(k))] =
            shift ? jg.symbols[k].hint + m + 1 + static_cast<int64_t>(k) : jg.symbols[k].hint * m;
      found = admissible(other);
    }
  }
  if (!found) {
    std::string gs;
    for (auto& g : jguards) gs += "; " + g.describe(jg.symbols);
    return fail("no other sizes satisfy the capture's shape guards" + gs);
  }
  std::vector<Tensor> in2, tan2;
  for (Node* p : jg.placeholders()) {
    const size_t i = static_cast<size_t>(p->input_index);
    Shape sizes;
    for (auto& d : graph::sym_shape_of(*p)) sizes.push_back(stax::ir::evaluate(d, other));
    if (i < inputs.size()) {
      if (in2.size() <= i) in2.resize(i + 1);
      // Static inputs (parameters, generator states) as they are; symbolic ones
      // zeros: valid indices, and the formulas' programs do not depend on values
      // (one that did would record another program here and be refused).
      if (!inputs[i].defined() || inputs[i].sizes() == sizes) in2[i] = inputs[i];
      else in2[i] = zeros_on(sizes, inputs[i].dtype(), inputs[i].device());
    } else {
      if (tan2.size() <= i - inputs.size()) tan2.resize(i - inputs.size() + 1);
      tan2[i - inputs.size()] = ones_on(sizes, p->meta.dtype, region_device(inputs));
    }
  }
  in2.resize(inputs.size());
  try {
    JointGraph j2 = trace_joint_raw(fw, in2, needs_grad, &tan2, nullptr, &other);
    std::string w;
    if (!same_program_at(jg, *j2.graph, other, &w)) return fail(w);
  } catch (const Error& e) {
    return fail(str("the joint trace at other sizes failed: ", e.what()));
  }
  passes::PassOptions po;
  po.decompose = false;
  passes::run_default_passes(*j.graph, po);
  if (std::string w; !graph::propagate_sym_shapes(*j.graph, &w)) return fail("after the graph passes, " + w);
  if (guards) {
    guards->clear();
    for (auto& g : jguards) {
      graph::ShapeGuard t = g;
      t.expr = stax::ir::substitute(g.expr, to_fw);
      guards->push_back(std::move(t));
    }
  }
  return std::make_unique<JointGraph>(std::move(j));
}

}  // namespace tp::aot
