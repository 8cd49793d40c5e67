#include "graph/guard_replay.h"

#include <unordered_map>
#include <unordered_set>

#include "graph/interpreter.h"
#include "graph/tracer.h"

namespace tp::graph {

std::unique_ptr<Graph> slice_to(const Graph& g, const Node* target) {
  // Reverse reachability from the target.
  std::unordered_set<const Node*> needed;
  std::vector<const Node*> stack{target};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!n || !needed.insert(n).second) continue;
    for (Node* in : n->input_nodes()) stack.push_back(in);
  }
  auto out = std::make_unique<Graph>();
  std::unordered_map<const Node*, Node*> map;
  for (auto& up : g.nodes()) {
    const Node* n = up.get();
    if (!needed.count(n)) continue;
    Node* m = nullptr;
    switch (n->opcode) {
      case Opcode::Placeholder:
        m = out->placeholder(n->name, n->meta, n->input_index);
        break;
      case Opcode::GetAttr:
        m = out->get_attr(n->name, n->constant);
        break;
      case Opcode::CallFunction: {
        std::vector<Arg> args;
        for (auto& a : n->args) {
          if (auto* p = std::get_if<Node*>(&a)) args.push_back(*p ? Arg(map.at(*p)) : Arg(static_cast<Node*>(nullptr)));
          else args.push_back(a);
        }
        m = out->call(*n->target, std::move(args), n->attrs, n->meta);
        m->output_metas = n->output_metas;
        break;
      }
      default:
        TP_CHECK(false, Error, "guard slice: unexpected node ", n->name);
    }
    m->sym_sizes = n->sym_sizes;
    m->output_sym_sizes = n->output_sym_sizes;
    m->sym_attrs = n->sym_attrs;
    map[n] = m;
  }
  out->symbols = g.symbols;
  out->output({map.at(target)});
  return out;
}

std::string DataGate::describe() const {
  if (kind == "numel") return "the data-dependent element count of " + where;  // where: "nonzero's result at f.py:3"
  std::string what = kind == "item"    ? "Tensor.item()"
                     : kind == "index" ? "the value of a 0-d index tensor (x[i])"
                                       : kind + "(Tensor)";
  return where.empty() ? what : what + " at " + where;
}

Scalar replay_gate(const DataGate& gate, const std::vector<Tensor>& inputs) {
  Tensor t = interpret(*gate.guard, inputs).at(0);
  return read_gate_value(gate.kind, t);
}

}  // namespace tp::graph
