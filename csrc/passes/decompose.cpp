// Expands composite operators into the primitives the Stax lowering knows, by
// tracing each OpDef::decompose in meta mode and splicing the result in place.
#include <algorithm>
#include <unordered_map>

#include "graph/same_program.h"
#include "graph/interpreter.h"
#include "graph/sym_shape_rules.h"
#include "graph/tracer.h"
#include "passes/passes.h"

namespace tp::passes {
using namespace tp::graph;

namespace {
// Splices `sub` (placeholders bound to `args`) before `at`; returns the values
// that replace `at`'s results.
std::vector<Arg> splice(Graph& g, Node* at, const Graph& sub, const std::vector<Arg>& args,
                        std::vector<Node*>* inserted) {
  const Device device = at->output_metas.empty() ? at->meta.device : at->output_metas.at(0).device;
  std::unordered_map<const Node*, Arg> map;
  for (auto& up : sub.nodes()) {
    const Node* n = up.get();
    switch (n->opcode) {
      case Opcode::Placeholder: map[n] = args.at(n->input_index); break;
      case Opcode::GetAttr: {
        // Constants created inside a decomposition are 0-d numbers (e.g. 1/count).
        if (n->constant.numel() == 1 && n->constant.dim() == 0) {
          map[n] = n->constant.item();
        } else {
          Node* c = g.get_attr("const", n->constant, at);  // before its users (a mask of select_scatter)
          inserted->push_back(c);
          map[n] = c;
        }
        break;
      }
      case Opcode::CallFunction: {
        std::vector<Arg> a;
        for (auto& x : n->args) a.push_back(std::holds_alternative<Node*>(x) && std::get<Node*>(x) ? map.at(std::get<Node*>(x)) : x);
        // The parts were traced in meta mode over CPU examples: their metas keep
        // sizes, strides and dtypes, but the values live where the replaced node's do.
        TensorMeta m = n->meta;
        m.device = device;
        Node* c = g.insert_call_before(at, *n->target, std::move(a), n->attrs, m);
        c->output_metas = n->output_metas;
        for (TensorMeta& om : c->output_metas) om.device = device;
        inserted->push_back(c);
        map[n] = c;
        break;
      }
      case Opcode::Output: {
        std::vector<Arg> outs;
        for (auto& x : n->args) outs.push_back(std::holds_alternative<Node*>(x) ? map.at(std::get<Node*>(x)) : x);
        return outs;
      }
      default: break;
    }
  }
  throw Error("internal: decomposition without output");
}
// Dynamic shapes: two traces of a decomposition (at the hints and at other
// sizes) that record the same program do not depend on the sizes.
bool same_program(const Graph& a, const Graph& b) {
  return graph::program_difference(a, b, [](const Node& x, const Node& y) {
           return x.attrs == y.attrs ? "" : "attributes";
         }).empty();
}

bool calls_itself(const Graph& sub, const OpDef& op) {
  for (auto& n : sub.nodes())
    if (n->opcode == Opcode::CallFunction && n->target == &op) return true;
  return false;
}
}  // namespace

bool decompose_composites(Graph& g, const std::function<bool(const std::string&)>& keep_whole) {
  std::vector<Node*> todo;
  for (auto& n : g.nodes())
    if (n->opcode == Opcode::CallFunction && n->target->decompose && !(keep_whole && keep_whole(n->target->name)))
      todo.push_back(n.get());
  bool changed = false;
  for (Node* n : todo) {
    std::vector<Tensor> examples;
    for (auto& a : n->args) {
      if (auto* p = std::get_if<Node*>(&a); p && !*p) {
        examples.emplace_back();  // absent optional argument
      } else if (p) {
        examples.push_back(Tensor::empty_strided((*p)->meta.sizes, (*p)->meta.strides, (*p)->meta.dtype));
      } else {
        examples.push_back(Tensor::wrapped_scalar(std::get<Scalar>(a)));
      }
    }
    // A node with no elements to compute stays whole (the lowering gives it no
    // loop): its decomposition may not accept the shape (softmax over a
    // zero-size dim would call amax over it, which has no identity).
    bool empty = n->output_metas.empty() ? numel(n->meta.sizes) == 0 : true;
    for (auto& m : n->output_metas) empty = empty && numel(m.sizes) == 0;
    if (empty) continue;
    const OpDef& op = *n->target;
    Attrs attrs = n->attrs;
    TraceResult sub = trace([&](const std::vector<Tensor>& in) { return op.decompose(in, attrs); }, examples, {},
                            /*execute=*/false);
    // A decomposition that calls its own operator says "not expressible for
    // these arguments" (gelu without tanh needs erf): the node stays, and the
    // lowering names it when it cannot lower it.
    if (calls_itself(*sub.graph, op)) continue;
    if (g.is_symbolic()) {
      // Symbolic sizes: the decomposition must not bake in a size (else the node stays whole).
      std::unordered_map<int, int64_t> other = hint_values(g.symbols);
      for (size_t k = 0; k < g.symbols.size(); ++k) {
        int64_t& v = other[stax::ir::size_var_id(static_cast<int>(k))];
        v = std::min(g.symbols[k].max, v + 3 + static_cast<int64_t>(k));
      }
      std::vector<Tensor> examples2;
      for (auto& a : n->args) {
        if (auto* p = std::get_if<Node*>(&a); p && !*p) {
          examples2.emplace_back();
        } else if (p) {
          Shape sizes;
          for (auto& d : sym_shape_of(**p)) sizes.push_back(stax::ir::evaluate(d, other));
          examples2.push_back(Tensor::empty(sizes, (*p)->meta.dtype));
        } else {
          examples2.push_back(Tensor::wrapped_scalar(std::get<Scalar>(a)));
        }
      }
      Attrs attrs2 = evaluate_sym_attrs(*n, other);
      bool independent = false;
      try {
        TraceResult sub2 = trace([&](const std::vector<Tensor>& in) { return op.decompose(in, attrs2); }, examples2,
                                 {}, /*execute=*/false);
        independent = n->sym_attrs.empty() && same_program(*sub.graph, *sub2.graph);
      } catch (const Error&) {
        independent = false;
      }
      if (!independent) continue;
    }
    std::vector<Node*> inserted;
    std::vector<Arg> outs = splice(g, n, *sub.graph, n->args, &inserted);
    if (g.is_symbolic() && !propagate_sym_shapes(g)) {
      // A part without a symbolic shape rule: undo the splice, the node stays whole.
      for (auto it = inserted.rbegin(); it != inserted.rend(); ++it) g.erase(*it);
      continue;
    }
    if (n->output_metas.empty()) {
      g.replace_all_uses(n, std::get<Node*>(outs.at(0)));
    } else {  // each getitem of the composite now reads the matching result of its parts
      for (Node* u : std::vector<Node*>(n->users)) {
        TP_CHECK(u->is_getitem(), Error, "internal: multi-result node ", n->name, " used directly by ", u->name);
        g.replace_all_uses(u, std::get<Node*>(outs.at(static_cast<size_t>(u->getitem_index()))));
        g.erase(u);
      }
    }
    g.erase(n);
    changed = true;
  }
  return changed;
}

}  // namespace tp::passes
