// Scheduler decisions: what fuses into one kernel, what stays in a local,
// which loops vectorize, which run in parallel.
#include <gtest/gtest.h>

#include "graph/tracer.h"
#include "ops/ops.h"
#include "passes/passes.h"
#include "stax/lowering/lower.h"
#include "stax/scheduler/schedule.h"

namespace tp::stax {
namespace {

using ir::BufferKind;

struct Scheduled {
  LoweredRegion lowered;
  Schedule schedule;
};

Scheduled schedule_fn(const graph::TraceableFn& fn, const std::vector<Tensor>& inputs) {
  auto tr = graph::trace(fn, inputs, {}, /*execute=*/false);
  passes::run_default_passes(*tr.graph);
  Scheduled s{lower(*tr.graph), {}};
  ScheduleOptions o;
  o.vector_bytes = 64;
  s.schedule = schedule(s.lowered.program, o);
  return s;
}

TEST(Scheduler, Example11IsOneVectorizedParallelReduction) {
  Tensor x = Tensor::empty({8192, 2048}, DType::Float32), w = Tensor::empty({8192, 2048}, DType::Float32);
  auto s = schedule_fn([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::sum(ops::mul(ops::relu(ops::add(in[0], in[1])), ops::scalar(2.0)), {-1})};
  }, {x, w});
  ASSERT_EQ(s.schedule.kernels.size(), 1u);
  const KernelPlan& k = s.schedule.kernels[0];
  ASSERT_EQ(k.nests.size(), 1u);
  EXPECT_EQ(k.outer_extent, 8192);
  EXPECT_TRUE(k.parallel);
  EXPECT_TRUE(k.nests[0].vectorize);
  EXPECT_EQ(k.nests[0].inner_ranges, Shape({2048}));
  // No intermediate buffer: inputs + one output of 8192 floats.
  int temps = 0, outputs = 0;
  for (auto& b : s.lowered.program.buffers) {
    temps += b.kind == BufferKind::Temp;
    if (b.kind == BufferKind::Output) { outputs++; EXPECT_EQ(b.numel, 8192); }
  }
  EXPECT_EQ(temps, 0);
  EXPECT_EQ(outputs, 1);
}

TEST(Scheduler, SoftmaxFusesIntoOneKernelWithLocals) {
  Tensor x = Tensor::empty({16384, 1000}, DType::Float32);
  auto s = schedule_fn([](const std::vector<Tensor>& in) {
    Tensor m = ops::amax(in[0], {-1}, true);
    Tensor e = ops::exp(ops::sub(in[0], m));
    return std::vector<Tensor>{ops::div(e, ops::sum(e, {-1}, true))};
  }, {x});
  ASSERT_EQ(s.schedule.kernels.size(), 1u);
  const KernelPlan& k = s.schedule.kernels[0];
  EXPECT_EQ(k.nests.size(), 3u);  // amax, sum, div
  EXPECT_EQ(k.local_buffers.size(), 2u);
  EXPECT_FALSE(k.nests[0].store_to_memory);
  EXPECT_FALSE(k.nests[1].store_to_memory);
  EXPECT_TRUE(k.nests[2].store_to_memory);
  for (auto& n : k.nests) EXPECT_TRUE(n.vectorize);
}

TEST(Scheduler, TransposedInputIsNotVectorizedButCorrectlyIndexed) {
  Tensor x = Tensor::empty({64, 32}, DType::Float32);
  auto s = schedule_fn([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::exp(ops::transpose(in[0], 0, 1))};
  }, {x});
  ASSERT_EQ(s.schedule.kernels.size(), 1u);
  EXPECT_FALSE(s.schedule.kernels[0].nests[0].vectorize);
}

TEST(Scheduler, ContiguousPointwiseCoalescesAndSmallStaysSerial) {
  Tensor x = Tensor::empty({8}, DType::Float32);
  auto s = schedule_fn([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::add(ops::mul(in[0], ops::scalar(2.0)), ops::scalar(1.0))};
  }, {x});
  ASSERT_EQ(s.schedule.kernels.size(), 1u);
  EXPECT_FALSE(s.schedule.kernels[0].parallel);
  EXPECT_EQ(s.schedule.kernels[0].chunk, 0);

  Tensor big = Tensor::empty({4, 1 << 18}, DType::Float32);
  auto b = schedule_fn([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::exp(ops::reshape(in[0], {-1}))};
  }, {big});
  ASSERT_EQ(b.schedule.kernels.size(), 1u);
  EXPECT_TRUE(b.schedule.kernels[0].parallel);
  EXPECT_GT(b.schedule.kernels[0].chunk, 0);  // one long loop split across threads
  EXPECT_TRUE(b.schedule.kernels[0].nests[0].vectorize);
}

TEST(Scheduler, ReductionOverFirstDimStartsANewKernelForItsConsumer) {
  // sum over dim 0 then a pointwise op on the (32,) result against a (64, 32)
  // input: the consumer's outer space (64) does not match the reduction's (32).
  Tensor x = Tensor::empty({64, 32}, DType::Float32);
  auto s = schedule_fn([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::sub(in[0], ops::sum(in[0], {0}))};
  }, {x});
  EXPECT_EQ(s.schedule.kernels.size(), 2u);
}

TEST(Scheduler, ReductionOverLeadingDimVectorizesAcrossTheOuterLoop) {
  Tensor x = Tensor::empty({512, 96}, DType::Float32);
  auto s = schedule_fn([](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::sum(in[0], {0})}; }, {x});
  ASSERT_EQ(s.schedule.kernels.size(), 1u);
  const KernelPlan& k = s.schedule.kernels[0];
  EXPECT_FALSE(k.nests[0].vectorize);  // the reduced dim is strided
  EXPECT_TRUE(k.vectorize_outer);      // the kept dim is contiguous
  // Over the last dim the usual inner vectorization applies instead.
  auto t = schedule_fn([](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::sum(in[0], {1})}; }, {x});
  EXPECT_TRUE(t.schedule.kernels[0].nests[0].vectorize);
  EXPECT_FALSE(t.schedule.kernels[0].vectorize_outer);
}

TEST(Scheduler, CanFuseRejectsReadsAtAnotherIteration) {
  // Hand-built program: node 0 reduces into b1[i]; node 1 reads b1[i + 1].
  ir::LoopProgram p;
  p.buffers.resize(3);
  for (int i = 0; i < 3; ++i) { p.buffers[i].id = i; p.buffers[i].dtype = DType::Float32; }
  p.buffers[0].kind = BufferKind::Input;
  p.buffers[1].kind = BufferKind::Temp;
  p.buffers[2].kind = BufferKind::Output;
  ir::IndexExpr i0 = p.new_var("i"), r0 = p.new_var("r"), i1 = p.new_var("i"), j1 = p.new_var("j");
  ir::ComputeNode a;
  a.id = 0; a.out_buffer = 1; a.ranges = {16}; a.vars = {i0}; a.reduce = ir::ReduceOp::Sum;
  a.reduce_ranges = {8}; a.rvars = {r0};
  a.body = ir::load(0, i0 * 8 + r0, DType::Float32);
  a.store_index = i0;
  p.nodes.push_back(a);
  auto consumer = [&](ir::IndexExpr read) {
    ir::ComputeNode b;
    b.id = 1; b.out_buffer = 2; b.ranges = {16, 8}; b.vars = {i1, j1};
    b.body = ir::call(ir::CallOp::Add, {ir::load(0, i1 * 8 + j1, DType::Float32), ir::load(1, read, DType::Float32)},
                      DType::Float32);
    b.store_index = i1 * 8 + j1;
    return b;
  };
  p.nodes.push_back(consumer(i1));
  EXPECT_TRUE(can_fuse(p, {0}, {16}, 1));
  p.nodes[1] = consumer(i1 + 1);
  EXPECT_FALSE(can_fuse(p, {0}, {16}, 1));
}

}  // namespace
}  // namespace tp::stax
