// Common subexpression elimination: two calls of the same deterministic
// operator on the same arguments with the same attributes compute the same value.
#include <unordered_map>

#include "passes/passes.h"

namespace tp::passes {
using namespace tp::graph;

namespace {
struct Key {
  const OpDef* op;
  std::vector<Arg> args;
  const Attrs* attrs;
  bool grad_enabled;  // a value computed under no_grad is not the same value for autograd
  bool operator==(const Key& o) const {
    if (op != o.op || grad_enabled != o.grad_enabled || args.size() != o.args.size() || !(*attrs == *o.attrs))
      return false;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].index() != o.args[i].index()) return false;
      if (auto* n = std::get_if<Node*>(&args[i])) {
        if (*n != std::get<Node*>(o.args[i])) return false;
      } else if (!(std::get<Scalar>(args[i]) == std::get<Scalar>(o.args[i]))) {
        return false;
      }
    }
    return true;
  }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = std::hash<const void*>()(k.op) ^ k.attrs->hash();
    for (auto& a : k.args) {
      size_t v = std::holds_alternative<Node*>(a) ? std::hash<const void*>()(std::get<Node*>(a))
                                                   : std::hash<std::string>()(std::get<Scalar>(a).repr());
      h = h * 1000003u ^ v;
    }
    return h;
  }
};
}  // namespace

bool eliminate_common_subexpressions(Graph& g) {
  std::unordered_map<Key, Node*, KeyHash> seen;
  std::vector<Node*> dead;
  for (auto& up : g.nodes()) {
    Node* n = up.get();
    if (n->opcode != Opcode::CallFunction || n->target->has(kRandom) || n->target->has(kInplace)) continue;
    if (n->grad_identity_of) continue;  // the same value, not the same tensor for autograd
    Key k{n->target, n->args, &n->attrs, n->grad_enabled};
    auto [it, inserted] = seen.emplace(k, n);
    if (!inserted) {
      g.replace_all_uses(n, it->second);
      dead.push_back(n);
    }
  }
  for (Node* n : dead) g.erase(n);
  return !dead.empty();
}

bool eliminate_dead_code(Graph& g) {
  bool changed = false;
  // Reverse order: erasing a node can make its inputs dead.
  for (size_t i = g.nodes().size(); i-- > 0;) {
    Node* n = g.nodes()[i].get();
    bool removable = (n->opcode == Opcode::CallFunction || n->opcode == Opcode::GetAttr) && n->users.empty() &&
                     !(n->target && n->target->has(kInplace));
    if (removable) {
      g.erase(n);
      changed = true;
    }
  }
  return changed;
}

}  // namespace tp::passes
