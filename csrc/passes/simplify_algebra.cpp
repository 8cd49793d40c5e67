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
    bool identity = ((n->is_op("add") || n->is_op("sub")) && is_number(n->args[1], 0.0)) ||
                    ((n->is_op("mul") || n->is_op("div")) && is_number(n->args[1], 1.0));
    // Never x * 0 -> 0 (NaN, inf), never reassociation: they change values (Section 4.2).
    if (identity) {
      g.replace_all_uses(n, *x);
      dead.push_back(n);
    }
  }
  for (Node* n : dead) g.erase(n);
  return !dead.empty();
}

void run_default_passes(Graph& g, const PassOptions& options) {
  // Each pass strictly shrinks the graph or removes a composite node, so the
  // loop terminates (a well-founded measure: #composites, then #nodes).
  for (int iter = 0; iter < 100; ++iter) {
    bool changed = false;
    if (options.decompose) changed |= decompose_composites(g);
    changed |= simplify_algebra(g);
    changed |= eliminate_common_subexpressions(g);
    changed |= eliminate_dead_code(g);
    if (!changed) break;
  }
  g.lint();
}

}  // namespace tp::passes
