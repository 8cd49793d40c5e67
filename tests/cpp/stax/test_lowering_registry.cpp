// The lowering registry: a rule is found by the operator's name, can be
// replaced (tests plant faulty rules this way) and restored, and an operator
// left without a rule runs as an extern call inside the region.
#include <gtest/gtest.h>

#include "graph/tracer.h"
#include "ops/ops.h"
#include "passes/passes.h"
#include "stax/ir/expr_visitor.h"
#include "stax/lowering/lower.h"
#include "stax/lowering/registry.h"

namespace tp::stax {
namespace {

LoweredRegion lower_neg_plus_one() {
  Tensor x = Tensor::empty({4, 8}, DType::Float32);
  auto tr = graph::trace([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::add(ops::neg(in[0]), ops::scalar(1.0))};
  }, {x}, {}, /*execute=*/false);
  passes::run_default_passes(*tr.graph);
  return lower(*tr.graph);
}

bool calls(const ir::LoopProgram& p, ir::CallOp op) {
  for (auto& n : p.nodes)
    for (const ir::ExprNode* e : ir::preorder(n.body))
      if (e->op == ir::ExprOp::Call && e->fn == op) return true;
  return false;
}

TEST(LoweringRegistry, RulesAreReplacedRestoredAndMissingOnesBecomeExterns) {
  ASSERT_TRUE(find_lowering("neg"));
  EXPECT_FALSE(find_lowering("no_such_operator"));
  LoweredRegion before = lower_neg_plus_one();
  EXPECT_TRUE(calls(before.program, ir::CallOp::Neg));
  EXPECT_TRUE(before.program.externs.empty());

  // A planted rule: neg lowered as abs.
  register_lowering("neg", [](LoweringContext& c) {
    DType dt = c.out_dtype();
    Value x = c.input(0);
    return c.pointwise([x, dt](const Index& idx) { return ir::call(ir::CallOp::Abs, {x.at(idx)}, dt); });
  });
  LoweredRegion planted = lower_neg_plus_one();
  EXPECT_TRUE(calls(planted.program, ir::CallOp::Abs));
  EXPECT_FALSE(calls(planted.program, ir::CallOp::Neg));

  // No rule at all: the operator's eager kernel runs as an extern call.
  unregister_lowering("neg");
  LoweredRegion without = lower_neg_plus_one();
  ASSERT_EQ(without.program.externs.size(), 1u);
  EXPECT_EQ(without.program.externs[0].op, "neg");

  restore_builtin_lowering("neg");
  LoweredRegion after = lower_neg_plus_one();
  EXPECT_EQ(after.program.to_string(), before.program.to_string());
}

}  // namespace
}  // namespace tp::stax
