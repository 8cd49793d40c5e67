// Expands composite operators into the primitives the Stax lowering knows, by
// tracing each OpDef::decompose in meta mode and splicing the result in place.
#include <unordered_map>

#include "graph/tracer.h"
#include "passes/passes.h"

namespace tp::passes {
using namespace tp::graph;

namespace {
// Splices `sub` (placeholders bound to `args`) before `at`; returns the values
// that replace `at`'s results.
std::vector<Arg> splice(Graph& g, Node* at, const Graph& sub, const std::vector<Arg>& args) {
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
          map[n] = g.get_attr("const", n->constant, at);  // before its users (a mask of select_scatter)
        }
        break;
      }
      case Opcode::CallFunction: {
        std::vector<Arg> a;
        for (auto& x : n->args) a.push_back(std::holds_alternative<Node*>(x) && std::get<Node*>(x) ? map.at(std::get<Node*>(x)) : x);
        Node* c = g.insert_call_before(at, *n->target, std::move(a), n->attrs, n->meta);
        c->output_metas = n->output_metas;
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
    std::vector<Arg> outs = splice(g, n, *sub.graph, n->args);
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
