#include <cmath>

#include "passes/passes.h"

namespace tp::passes {
using namespace tp::graph;

namespace {
bool is_number(const Arg& a, double v) {
  auto* s = std::get_if<Scalar>(&a);
  return s && !s->is_bool() && s->to_double() == v;
}
}  // namespace

bool simplify_algebra(Graph& g) {
  std::vector<Node*> dead;
  for (auto& up : g.nodes()) {
    Node* n = up.get();
    if (n->opcode != Opcode::CallFunction || n->args.size() != 2) continue;
    auto* x = std::get_if<Node*>(&n->args[0]);
    if (!x || !*x) continue;
    // Identity only if neither broadcasting nor promotion changes the value's type.
    if ((*x)->meta.sizes != n->meta.sizes || (*x)->meta.dtype != n->meta.dtype) continue;
    // Adding a zero is an identity only for the zero of the opposite sign of
    // the result IEEE picks: -0 + (+0) is +0, so x + 0 keeps x only for
    // integers or when the zero is -0.0; x - 0 keeps x only when the zero is +0.
    // An alpha other than 1 (alpha * 0 may be NaN) keeps the node.
    bool add_or_sub = (n->is_op("add") || n->is_op("sub")) && is_number(n->args[1], 0.0) &&
                      (n->attrs.is_none("alpha") || n->attrs.get_double("alpha") == 1.0);
    if (add_or_sub && is_floating(n->meta.dtype)) {
      const Scalar& z = std::get<Scalar>(n->args[1]);
      bool negative_zero = z.is_float() && std::signbit(z.to_double());
      add_or_sub = n->is_op("add") ? negative_zero : !negative_zero;
    }
    bool identity = add_or_sub || ((n->is_op("mul") || n->is_op("div")) && is_number(n->args[1], 1.0));
    // Never x * 0 -> 0 (NaN, inf), never reassociation: they change values (Section 4.2).
    if (identity) {
      g.replace_all_uses(n, *x);
      dead.push_back(n);
    }
  }
  for (Node* n : dead) g.erase(n);
  return !dead.empty();
}

}  // namespace tp::passes
