// The expression IR: hash-consing (equal subexpressions are one node), the typed
// operator table, and the memoized visitor / mutator on DAGs whose number of
// paths is exponential in their size.
#include <gtest/gtest.h>

#include <cmath>

#include "stax/ir/expr_visitor.h"
#include "stax/ir/loop_ir.h"

namespace tp::stax::ir {
namespace {

Expr f32(double v) { return constant(Scalar(v), DType::Float32); }
Expr x0() { return load(0, var(1, "i") * 4, DType::Float32); }

TEST(ExprIr, EqualExpressionsAreOneNode) {
  Expr a = call(CallOp::Add, {x0(), f32(1.0)}, DType::Float32);
  Expr b = call(CallOp::Add, {x0(), f32(1.0)}, DType::Float32);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), call(CallOp::Sub, {x0(), f32(1.0)}, DType::Float32).get());
  EXPECT_NE(a.get(), call(CallOp::Add, {x0(), f32(1.0)}, DType::Float64).get());
  EXPECT_NE(x0().get(), load(1, var(1, "i") * 4, DType::Float32).get());
  EXPECT_NE(x0().get(), load(0, var(1, "i") * 4 + 1, DType::Float32).get());
  // Constants compare by their bits: 0.0 and -0.0 stay apart, NaN equals itself.
  EXPECT_NE(f32(0.0).get(), f32(-0.0).get());
  EXPECT_EQ(f32(std::nan("")).get(), f32(std::nan("")).get());
  // A float32 constant holds its float32 value: 0.1 rounds to 0.1f.
  EXPECT_EQ(f32(0.1).get(), f32(static_cast<double>(0.1f)).get());
  // Casts fold on constants and vanish to the same dtype.
  EXPECT_EQ(cast(x0(), DType::Float32).get(), x0().get());
  EXPECT_EQ(cast(f32(2.5), DType::Int64).get(), constant(Scalar(int64_t{2}), DType::Int64).get());
}

// The table is process-wide and index equality is by variable id: a live
// program's load of id 0 named i0 must not be handed to a program naming that
// id r0, whose printed code would read an undeclared i0 (issue 12/11).
TEST(ExprIr, InterningKeepsEachProgramsVariableNames) {
  Expr held = load(0, var(0, "i0") * 10 + var(2, "o2"), DType::Float32);
  Expr mine = load(0, var(0, "r0") * 10 + var(2, "o2"), DType::Float32);
  EXPECT_NE(held.get(), mine.get());
  EXPECT_EQ(mine->index.to_string(), "((r0 * 10) + o2)");
  EXPECT_EQ(held->index.to_string(), "((i0 * 10) + o2)");
  Expr held_ix = index_value(var(3, "i3") + 1);
  EXPECT_EQ(index_value(var(3, "r3") + 1)->index.to_string(), "(r3 + 1)");
  // The same spelling is still one node.
  EXPECT_EQ(load(0, var(0, "r0") * 10 + var(2, "o2"), DType::Float32).get(), mine.get());
  EXPECT_EQ(index_value(var(3, "i3") + 1).get(), held_ix.get());
}

TEST(ExprIr, OperatorTableIsConsistent) {
  for (int i = 0; i <= static_cast<int>(CallOp::PhiloxNormalF64); ++i) {
    CallOp op = static_cast<CallOp>(i);
    EXPECT_EQ(info(op).op, op);
    ASSERT_TRUE(call_op_named(name(op)).has_value()) << name(op);
    EXPECT_EQ(*call_op_named(name(op)), op);
    EXPECT_GE(info(op).arity, 1);
  }
  EXPECT_FALSE(call_op_named("no_such_op").has_value());
  EXPECT_TRUE(is_comparison(CallOp::Le));
  EXPECT_TRUE(is_libm(CallOp::Sin));
  EXPECT_TRUE(info(CallOp::Exp).expensive);
  EXPECT_FALSE(info(CallOp::Add).expensive);
}

// x_{k+1} = x_k * x_k + x_k: k levels, 2^k paths from the root to the leaf.
Expr chain(int k) {
  Expr e = x0();
  for (int i = 0; i < k; ++i)
    e = call(CallOp::Add, {call(CallOp::Mul, {e, e}, DType::Float32), e}, DType::Float32);
  return e;
}

struct Counter : ExprVisitor {
  int loads = 0, calls = 0;
  std::vector<const ExprNode*> order;
  void visit_load(const ExprNode& n) override { loads++, order.push_back(&n); }
  void visit_call(const ExprNode& n) override { calls++, order.push_back(&n); }
};

TEST(ExprIr, VisitorVisitsEachNodeOnceArgumentsFirst) {
  Expr e = chain(60);  // 2^60 paths: only a memoized traversal finishes
  Counter c;
  c.visit(e);
  EXPECT_EQ(c.loads, 1);
  EXPECT_EQ(c.calls, 120);
  EXPECT_EQ(c.order.back(), e.get());  // post-order: the root last
  c.visit(e);                          // a second root already seen: nothing new
  EXPECT_EQ(c.calls, 120);
  EXPECT_EQ(loads_of(e).size(), 1u);
  EXPECT_EQ(preorder(e).front(), e.get());
  EXPECT_EQ(preorder(e).size(), 121u);
}

// Replaces every load of buffer 0 by buffer 3 and counts its calls.
struct Rebuffer : ExprMutator {
  int load_calls = 0;
  Expr mutate_load(const Expr& e, std::vector<Expr>) override {
    load_calls++;
    return load(3, e->index, e->dtype);
  }
};

TEST(ExprIr, MutatorIsMemoizedAndKeepsSharing) {
  Expr e = chain(60);
  Rebuffer m;
  Expr out = m.mutate(e);
  EXPECT_EQ(m.load_calls, 1);
  Counter c;
  c.visit(out);
  EXPECT_EQ(c.calls, 120);  // still a DAG of the same size
  ASSERT_EQ(loads_of(out).size(), 1u);
  EXPECT_EQ(loads_of(out)[0]->buffer, 3);
  // A mutator that changes nothing returns the very same node.
  struct Identity : ExprMutator {} id;
  EXPECT_EQ(id.mutate(e).get(), e.get());
}

TEST(ExprIr, PrintingBindsSharedValuesOnce) {
  std::string s = to_string(chain(40));
  EXPECT_LT(s.size(), 20000u);  // linear in the DAG, not in its 2^40 paths
  EXPECT_NE(s.find("$0 = "), std::string::npos);
}

}  // namespace
}  // namespace tp::stax::ir
