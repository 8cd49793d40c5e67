#include "stax/ir/expr_visitor.h"

namespace tp::stax::ir {

void ExprVisitor::visit(const Expr& root) {
  if (!root || seen_.count(root.get())) return;
  // Explicit stack: (node, index of the next argument to descend into).
  std::vector<std::pair<const ExprNode*, size_t>> stack{{root.get(), 0}};
  seen_.insert(root.get());
  while (!stack.empty()) {
    auto& [n, i] = stack.back();
    if (i < n->args.size()) {
      const ExprNode* c = n->args[i++].get();
      if (seen_.insert(c).second) stack.push_back({c, 0});
      continue;
    }
    const ExprNode& node = *n;
    stack.pop_back();
    switch (node.op) {
      case ExprOp::Const: visit_const(node); break;
      case ExprOp::Load: visit_load(node); break;
      case ExprOp::Call: visit_call(node); break;
      case ExprOp::Where: visit_where(node); break;
      case ExprOp::Cast: visit_cast(node); break;
      case ExprOp::Index: visit_index(node); break;
    }
  }
}

Expr ExprMutator::rebuild(const Expr& e, std::vector<Expr> args) {
  bool same = args.size() == e->args.size();
  for (size_t i = 0; same && i < args.size(); ++i) same = args[i].get() == e->args[i].get();
  if (same) return e;
  ExprNode n = *e;
  n.args = std::move(args);
  return intern(std::move(n));
}

Expr ExprMutator::mutate(const Expr& e) {
  if (auto it = memo_.find(e.get()); it != memo_.end()) return it->second;
  std::vector<Expr> args;
  args.reserve(e->args.size());
  for (auto& a : e->args) args.push_back(mutate(a));
  Expr out;
  switch (e->op) {
    case ExprOp::Const: out = mutate_const(e); break;
    case ExprOp::Load: out = mutate_load(e, std::move(args)); break;
    case ExprOp::Call: out = mutate_call(e, std::move(args)); break;
    case ExprOp::Where: out = mutate_where(e, std::move(args)); break;
    case ExprOp::Cast: out = mutate_cast(e, std::move(args)); break;
    case ExprOp::Index: out = mutate_index(e); break;
  }
  memo_.emplace(e.get(), out);
  return out;
}

namespace {
struct LoadCollector : ExprVisitor {
  std::vector<const ExprNode*> loads;
  void visit_load(const ExprNode& n) override { loads.push_back(&n); }
};
}  // namespace

std::vector<const ExprNode*> loads_of(const Expr& e) {
  LoadCollector c;
  c.visit(e);
  return std::move(c.loads);
}

std::vector<const ExprNode*> preorder(const Expr& root) {
  std::vector<const ExprNode*> out;
  std::unordered_set<const ExprNode*> seen;
  std::vector<const ExprNode*> stack{root.get()};
  while (!stack.empty()) {
    const ExprNode* e = stack.back();
    stack.pop_back();
    if (!seen.insert(e).second) continue;
    out.push_back(e);
    for (auto it = e->args.rbegin(); it != e->args.rend(); ++it) stack.push_back(it->get());
  }
  return out;
}

}  // namespace tp::stax::ir
