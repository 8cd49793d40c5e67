// Joint graph and min-cut partition on small C++ functions: what the forward
// saves, what the backward recomputes, and that the two graphs give eager's
// gradients when interpreted.
#include <gtest/gtest.h>

#include <algorithm>

#include "aot/joint_graph.h"
#include "aot/partition.h"
#include "autograd/engine.h"
#include "graph/interpreter.h"
#include "graph/tracer.h"
#include "ops/api_math.h"
#include "ops/ops.h"

namespace tp::aot {
namespace {

std::shared_ptr<graph::Graph> capture(const graph::TraceableFn& f, const std::vector<Tensor>& in) {
  graph::TraceResult r = graph::trace(f, in, {"x"});
  return std::shared_ptr<graph::Graph>(std::move(r.graph));
}

bool contains(const std::vector<std::string>& v, const std::string& prefix) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.rfind(prefix, 0) == 0; });
}

TEST(Partition, PointwiseChainIsRecomputedFromTheInput) {
  autograd::install();
  Tensor x = ops::randn({4, 8});
  auto fw = capture([](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::sum(ops::exp(ops::sin(in[0])), {})}; }, {x});
  JointGraph j = trace_joint(*fw, {x}, {true});
  ASSERT_EQ(j.differentiable, std::vector<bool>{true});
  Partition p = min_cut_partition(j);
  EXPECT_EQ(p.saved_bytes, 0) << p.report();  // sin and exp come back from x (kept by reference)
  ASSERT_EQ(p.saved.size(), 1u);
  EXPECT_EQ(p.saved[0].primal, 0);
  EXPECT_TRUE(contains(p.recomputed, "exp")) << p.report();
  EXPECT_TRUE(contains(p.recomputed, "sin")) << p.report();

  // forward + backward interpreted = eager autograd.
  std::vector<Tensor> fo = graph::interpret(*p.forward, {x});
  ASSERT_EQ(fo.size(), 1u);
  Tensor g = ops::ones({}, DType::Float32);
  std::vector<Tensor> grads = graph::interpret(*p.backward, {x, g});
  Tensor leaf = ops::clone(x);
  autograd::set_requires_grad(leaf, true);
  autograd::backward({ops::sum(ops::exp(ops::sin(leaf)), {})}, {}, false);
  Tensor want(leaf.impl()->grad);
  for (int64_t i = 0; i < 32; ++i) EXPECT_FLOAT_EQ(grads[0].data_as<float>()[i], want.data_as<float>()[i]);
}

TEST(Partition, AReductionTheBackwardReadsIsSaved) {
  autograd::install();
  Tensor x = ops::randn({3, 5});
  auto fw = capture([](const std::vector<Tensor>& in) {
    Tensor s = ops::sum(ops::exp(in[0]), {1}, true);
    return std::vector<Tensor>{ops::sum(ops::mul(in[0], s), {})};
  }, {x});
  Partition p = min_cut_partition(trace_joint(*fw, {x}, {true}));
  bool saved_sum = false;
  for (auto& v : p.saved) saved_sum |= v.name.rfind("sum", 0) == 0 && v.primal < 0;
  EXPECT_TRUE(saved_sum) << p.report();  // U ∩ B (Exercise 10)
  EXPECT_EQ(p.saved_bytes, 3 * 4) << p.report();
}

TEST(Partition, BudgetZeroSavesNothingAndRecomputesTheReduction) {
  autograd::install();
  Tensor x = ops::randn({3, 5});
  auto fw = capture([](const std::vector<Tensor>& in) {
    Tensor s = ops::sum(ops::exp(in[0]), {1}, true);
    return std::vector<Tensor>{ops::sum(ops::mul(in[0], s), {})};
  }, {x});
  PartitionOptions o;
  o.budget_bytes = 0;
  Partition p = min_cut_partition(trace_joint(*fw, {x}, {true}), o);
  EXPECT_EQ(p.saved_bytes, 0) << p.report();
  EXPECT_EQ(p.default_saved_bytes, 12);
  EXPECT_TRUE(contains(p.checkpointed, "sum")) << p.report();
}

}  // namespace
}  // namespace tp::aot
