// Traversals of the expression DAG (after Halide's IRVisitor / IRMutator).
//
// Expressions are hash-consed, so a value used twice is one node reached along
// two paths; a traversal that does not remember where it has been costs the
// number of paths, which grows exponentially with nesting. Both classes below
// handle each node once per traversal object, whatever the number of paths.
#pragma once
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "stax/ir/loop_ir.h"

namespace tp::stax::ir {

// Calls the hook of every node reachable from the roots once, arguments
// before the node that uses them (post-order). Several roots may be visited
// with one object; a node seen under an earlier root is not visited again.
// Iterative, so a long chain does not exhaust the stack.
class ExprVisitor {
 public:
  virtual ~ExprVisitor() = default;
  void visit(const Expr& root);

 protected:
  virtual void visit_const(const ExprNode&) {}
  virtual void visit_load(const ExprNode&) {}
  virtual void visit_call(const ExprNode&) {}
  virtual void visit_where(const ExprNode&) {}
  virtual void visit_cast(const ExprNode&) {}
  virtual void visit_index(const ExprNode&) {}

 private:
  std::unordered_set<const ExprNode*> seen_;
};

// Rebuilds an expression bottom-up: each node's hook receives the node and
// its already mutated arguments and returns the replacement. The default
// hooks rebuild the node with the new arguments (interned, so the result is
// the node itself when nothing below it changed). Memoized per node, so the
// result is a DAG with the same sharing as the input.
class ExprMutator {
 public:
  virtual ~ExprMutator() = default;
  Expr mutate(const Expr& e);

 protected:
  virtual Expr mutate_const(const Expr& e) { return e; }
  virtual Expr mutate_load(const Expr& e, std::vector<Expr> args) { return rebuild(e, std::move(args)); }
  virtual Expr mutate_call(const Expr& e, std::vector<Expr> args) { return rebuild(e, std::move(args)); }
  virtual Expr mutate_where(const Expr& e, std::vector<Expr> args) { return rebuild(e, std::move(args)); }
  virtual Expr mutate_cast(const Expr& e, std::vector<Expr> args) { return rebuild(e, std::move(args)); }
  virtual Expr mutate_index(const Expr& e) { return e; }
  // e with its arguments replaced (e itself when they are the same nodes).
  static Expr rebuild(const Expr& e, std::vector<Expr> args);

 private:
  std::unordered_map<const ExprNode*, Expr> memo_;
};

// Every distinct Load node of e, each once (post-order).
std::vector<const ExprNode*> loads_of(const Expr& e);
// Every distinct node of e, each once, in pre-order (a node before its
// arguments; larger subexpressions first).
std::vector<const ExprNode*> preorder(const Expr& e);

}  // namespace tp::stax::ir
