// Scheduler decisions: what fuses into one kernel, what stays in a local,
// which loops vectorize, which run in parallel.
#include <gtest/gtest.h>

#include <cctype>

#include "graph/tracer.h"
#include "ops/ops.h"
#include "passes/passes.h"
#include "stax/lowering/lower.h"
#include "stax/lowering/registry.h"
#include "stax/scheduler/schedule.h"

namespace tp::stax {
namespace {

using ir::BufferKind;

struct Scheduled {
  LoweredRegion lowered;
  Schedule schedule;
};

Scheduled schedule_fn(const graph::TraceableFn& fn, const std::vector<Tensor>& inputs, bool fuse = true,
                      ScheduleOptions o = {}) {
  auto tr = graph::trace(fn, inputs, {}, /*execute=*/false);
  passes::PassOptions po;
  po.keep_whole = &keeps_whole_for_stax;  // as the Stax backend
  passes::run_default_passes(*tr.graph, po);
  Scheduled s{lower(*tr.graph), {}};
  o.vector_bytes = 64;
  o.fuse = fuse;
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

TEST(Scheduler, WithoutFusionEveryNodeIsItsOwnKernel) {
  // options={"stax_fusion": False} (bisection): the row max and row sum go through memory.
  Tensor x = Tensor::empty({64, 100}, DType::Float32);
  auto s = schedule_fn([](const std::vector<Tensor>& in) {
    Tensor m = ops::amax(in[0], {-1}, true);
    Tensor e = ops::exp(ops::sub(in[0], m));
    return std::vector<Tensor>{ops::div(e, ops::sum(e, {-1}, true))};
  }, {x}, /*fuse=*/false);
  ASSERT_EQ(s.schedule.kernels.size(), 3u);
  for (auto& k : s.schedule.kernels) {
    ASSERT_EQ(k.nests.size(), 1u);
    EXPECT_TRUE(k.nests[0].store_to_memory) << k.origin;
  }
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


// ---- Loop policy: every decision is in the plan (the printer only prints) ----

Scheduled schedule_with(const graph::TraceableFn& fn, const std::vector<Tensor>& inputs, const ScheduleOptions& o) {
  auto tr = graph::trace(fn, inputs, {}, /*execute=*/false);
  passes::run_default_passes(*tr.graph);
  Scheduled s{lower(*tr.graph), {}};
  s.schedule = schedule(s.lowered.program, o);
  return s;
}

std::vector<Tensor> row_sum(const std::vector<Tensor>& in) { return {ops::sum(in[0], {-1})}; }
std::vector<Tensor> col_sum(const std::vector<Tensor>& in) { return {ops::sum(in[0], {0})}; }

TEST(SchedulerPlan, Example11RowFitsOneBlockWithFourAccumulators) {
  Tensor x = Tensor::empty({8192, 2048}, DType::Float32), w = Tensor::empty({8192, 2048}, DType::Float32);
  auto s = schedule_fn([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::sum(ops::mul(ops::relu(ops::add(in[0], in[1])), ops::scalar(2.0)), {-1})};
  }, {x, w});
  const KernelPlan& k = s.schedule.kernels[0];
  EXPECT_EQ(k.name, "fused_add_relu_mul_sum_0");
  const LoopNest& n = k.nests[0];
  EXPECT_EQ(n.lanes, 16);          // 64 bytes of float
  EXPECT_EQ(n.accumulators, 4);
  EXPECT_EQ(n.tail, TailMode::Scalar);
  EXPECT_EQ(n.block, 0);           // 2048 <= 4 * 16 * 64: a row is one block, no cascade
  EXPECT_FALSE(n.wide_scalar_acc);
  EXPECT_EQ(k.chunk, 0);
}

TEST(SchedulerPlan, LongRowSumIsCascadedInBlocksOfSixtyFourStepsPerAccumulator) {
  Tensor x = Tensor::empty({4, 300000}, DType::Float32);
  auto s = schedule_fn(row_sum, {x});
  const LoopNest& n = s.schedule.kernels[0].nests[0];
  ASSERT_TRUE(n.vectorize);
  EXPECT_EQ(n.block, 4 * 16 * 64);
  EXPECT_EQ(n.cascade_levels, 7);  // ceil(300000 / 4096) = 74 blocks < 2^7
  // The same with other options: the decisions follow them.
  ScheduleOptions o;
  o.vector_bytes = 32;
  o.accumulators = 2;
  o.vector_block_steps = 128;
  auto t = schedule_with(row_sum, {x}, o);
  const LoopNest& m = t.schedule.kernels[0].nests[0];
  EXPECT_EQ(t.schedule.vector_bytes, 32);
  EXPECT_EQ(m.lanes, 8);
  EXPECT_EQ(m.accumulators, 2);
  EXPECT_EQ(m.block, 2 * 8 * 128);
}

TEST(SchedulerPlan, StridedScalarSumAccumulatesInDoubleInBlocksOf256) {
  Tensor x = Tensor::empty({3000, 5}, DType::Float32);
  auto s = schedule_fn([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::sum(ops::transpose(in[0], 0, 1), {-1})};
  }, {x});
  const LoopNest& n = s.schedule.kernels[0].nests[0];
  ASSERT_FALSE(n.vectorize);
  EXPECT_EQ(n.accumulators, 1);
  EXPECT_TRUE(n.wide_scalar_acc);
  EXPECT_EQ(n.block, 256);
  EXPECT_EQ(n.cascade_levels, 4);  // 12 blocks < 2^4
  // A float64 sum is already double: no widening.
  Tensor d = Tensor::empty({3000, 5}, DType::Float64);
  auto t = schedule_fn([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::sum(ops::transpose(in[0], 0, 1), {-1})};
  }, {d});
  EXPECT_FALSE(t.schedule.kernels[0].nests[0].wide_scalar_acc);
}

TEST(SchedulerPlan, ColumnSumVectorizesAcrossOutputsWithUnrollAndRowBlocks) {
  Tensor x = Tensor::empty({8192, 2048}, DType::Float32);
  auto s = schedule_fn(col_sum, {x});
  const KernelPlan& k = s.schedule.kernels[0];
  ASSERT_TRUE(k.vectorize_outer);
  const OuterVectorPlan& v = k.outer_vector;
  EXPECT_EQ(v.lanes, 16);
  EXPECT_EQ(v.unroll, 8);             // 8 vectors = 512 bytes of a row
  EXPECT_EQ(v.groups, 2048 / 128);
  EXPECT_EQ(v.block_rows, 128);       // eager's flush interval
  EXPECT_EQ(v.cascade_levels, 7);     // 64 blocks < 2^7
  EXPECT_FALSE(v.tail.vectorize);
  EXPECT_TRUE(v.tail.wide_scalar_acc);
  // 37 columns: no group of vectors divides 37, so unroll falls to 1 and
  // 37 - 2 * 16 = 5 outputs are left to the tail.
  Tensor y = Tensor::empty({300, 37}, DType::Float32);
  auto t = schedule_fn(col_sum, {y});
  const OuterVectorPlan& w = t.schedule.kernels[0].outer_vector;
  EXPECT_EQ(w.unroll, 1);
  EXPECT_EQ(w.groups, 2);
  EXPECT_EQ(w.block_rows, 128);
  // Few rows: no blocks.
  Tensor z = Tensor::empty({100, 64}, DType::Float32);
  auto u = schedule_fn(col_sum, {z});
  EXPECT_EQ(u.schedule.kernels[0].outer_vector.unroll, 4);
  EXPECT_EQ(u.schedule.kernels[0].outer_vector.block_rows, 0);
  ScheduleOptions o;
  o.max_outer_unroll = 2;
  o.outer_block_rows = 64;
  auto q = schedule_with(col_sum, {z}, o);
  EXPECT_EQ(q.schedule.kernels[0].outer_vector.unroll, 2);
  EXPECT_EQ(q.schedule.kernels[0].outer_vector.block_rows, 64);
}

TEST(SchedulerPlan, OneLongReductionIsChunkedAndCombinedPairwiseInDouble) {
  Tensor x = Tensor::empty({1 << 20}, DType::Float32);
  auto s = schedule_fn([](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::sum(in[0], {0})}; }, {x});
  const KernelPlan& k = s.schedule.kernels[0];
  EXPECT_EQ(k.chunk, 32768);
  EXPECT_EQ(k.chunks, 32);
  EXPECT_EQ(k.combine, ChunkCombine::PairwiseTree);
  EXPECT_TRUE(k.partials_in_double);
  // The cascade is planned for one chunk, not for the whole loop.
  EXPECT_EQ(k.nests[0].block, 4096);
  EXPECT_EQ(k.nests[0].cascade_levels, 4);  // 8 blocks per chunk < 2^4
  auto m = schedule_fn([](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::amax(in[0], {0})}; }, {x});
  EXPECT_FALSE(m.schedule.kernels[0].partials_in_double);
  EXPECT_EQ(m.schedule.kernels[0].nests[0].block, 0);  // only sums are cascaded
}

TEST(SchedulerPlan, KernelsAreNamedAfterWhatTheyFuseAsBoundedIdentifiers) {
  Tensor x = Tensor::empty({16, 1000}, DType::Float32);
  auto s = schedule_fn([](const std::vector<Tensor>& in) {
    Tensor m = ops::amax(in[0], {-1}, true);
    Tensor e = ops::exp(ops::sub(in[0], m));
    return std::vector<Tensor>{ops::div(e, ops::sum(e, {-1}, true))};
  }, {x});
  EXPECT_EQ(s.schedule.kernels[0].name, "fused_amax_sub_exp_sum_div_0");  // each operator once

  ir::LoopProgram p;
  p.buffers.resize(2);
  for (int i = 0; i < 2; ++i) { p.buffers[i].id = i; p.buffers[i].name = i ? "out0" : "in0"; }
  p.buffers[0].kind = BufferKind::Input;
  p.buffers[1].kind = BufferKind::Output;
  ir::IndexExpr i0 = p.new_var("i");
  ir::ComputeNode n;
  n.out_buffer = 1; n.ranges = {4}; n.vars = {i0};
  n.body = ir::load(0, i0, DType::Float32);
  n.store_index = i0;
  n.origin = "aten::Weird.op-name, very_long_operator_name_number_one, very_long_operator_name_number_two";
  p.nodes.push_back(n);
  ScheduleOptions o;
  o.max_kernel_name = 40;
  std::string name = schedule(p, o).kernels[0].name;
  // Non-identifier characters split words; the next operator would pass 40 characters.
  EXPECT_EQ(name, "fused_aten_weird_op_name_0");
  for (char c : name) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '_') << name;
  p.nodes[0].origin = "";
  EXPECT_EQ(schedule(p, o).kernels[0].name, "kernel_0");
}
// --- Welford, arg reductions, masked tails ---------------------------------

const LoopNest& only_nest_of(const Scheduled& s, ir::ReduceOp op) {
  for (const KernelPlan& k : s.schedule.kernels)
    for (const LoopNest& n : k.nests)
      if (s.lowered.program.nodes[n.node].reduce == op) return n;
  throw std::runtime_error("no such nest");
}

TEST(SchedulerWelford, ShortRowsInCacheTakeTwoPassesLongRowsOne) {
  auto var_rows = [](int64_t cols, ScheduleOptions o = {}) {
    Tensor x = Tensor::empty({8, cols}, DType::Float32);
    return schedule_fn([](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{ops::var(in[0], std::vector<int64_t>{-1}, 1.0, false)};
    }, {x}, true, o);
  };
  // One vector cascade block: 4 accumulators * 16 lanes * 64 steps = 4096 floats.
  EXPECT_EQ(only_nest_of(var_rows(1000), ir::ReduceOp::Welford).welford, WelfordMode::TwoPass);
  EXPECT_EQ(only_nest_of(var_rows(4096), ir::ReduceOp::Welford).welford, WelfordMode::TwoPass);
  EXPECT_EQ(only_nest_of(var_rows(4097), ir::ReduceOp::Welford).welford, WelfordMode::OnePass);
  ScheduleOptions one;
  one.welford_two_pass_max = 0;
  EXPECT_EQ(only_nest_of(var_rows(1000, one), ir::ReduceOp::Welford).welford, WelfordMode::OnePass);
  // Neither chunks nor outer vectors for a pair reduction; the row loop vectorizes.
  auto s = var_rows(100000);
  EXPECT_EQ(s.schedule.kernels.size(), 1u);
  EXPECT_EQ(s.schedule.kernels[0].chunk, 0);
  EXPECT_FALSE(s.schedule.kernels[0].vectorize_outer);
  EXPECT_TRUE(only_nest_of(s, ir::ReduceOp::Welford).vectorize);
  EXPECT_EQ(only_nest_of(s, ir::ReduceOp::Welford).block, 0);  // M2 in double: no cascade
}

TEST(SchedulerWelford, LayerNormWithEpilogueIsOneKernelWithPerRowLocals) {
  Tensor x = Tensor::empty({64, 768}, DType::Float32), w = Tensor::empty({768}, DType::Float32),
         b = Tensor::empty({768}, DType::Float32);
  auto s = schedule_fn([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::gelu(ops::layer_norm(in[0], {768}, in[1], in[2], 1e-5), "tanh")};
  }, {x, w, b});
  ASSERT_EQ(s.schedule.kernels.size(), 1u);
  const KernelPlan& k = s.schedule.kernels[0];
  ASSERT_EQ(k.nests.size(), 3u);  // statistics, rstd (one value per row), output
  const auto& prog = s.lowered.program;
  const auto& stats = prog.nodes[k.nests[0].node];
  EXPECT_EQ(stats.reduce, ir::ReduceOp::Welford);
  EXPECT_TRUE(k.local_buffers.count(stats.out_buffer) && k.local_buffers.count(stats.aux_buffer));
  EXPECT_EQ(prog.buffers[stats.aux_buffer].dtype, DType::Float64);  // M2 in double
  EXPECT_TRUE(k.nests[1].inner_vars.empty());
  EXPECT_TRUE(k.local_buffers.count(prog.nodes[k.nests[1].node].out_buffer));
  EXPECT_FALSE(k.nests[0].store_to_memory);
  EXPECT_FALSE(k.nests[1].store_to_memory);
  EXPECT_TRUE(k.nests[2].vectorize);
}

TEST(SchedulerArg, ArgmaxIsOnePairNodeFusedWithItsConsumer) {
  Tensor x = Tensor::empty({32, 100}, DType::Float32);
  auto s = schedule_fn([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::add(ops::argmax(ops::mul(in[0], ops::scalar(2.0)), 1, false), ops::scalar(1))};
  }, {x});
  ASSERT_EQ(s.schedule.kernels.size(), 1u);
  int pair_nodes = 0, reductions = 0;
  for (const auto& n : s.lowered.program.nodes) {
    reductions += n.is_reduction();
    pair_nodes += n.has_pair_result();
  }
  EXPECT_EQ(reductions, 1);  // not amax + a Min over positions
  EXPECT_EQ(pair_nodes, 1);
  const LoopNest& n = only_nest_of(s, ir::ReduceOp::ArgMax);
  EXPECT_TRUE(n.vectorize);  // lanes carry (value, position); the position moves with the loop by 1
  EXPECT_TRUE(n.position != nullptr);
}

TEST(SchedulerTails, MaskedForCostlyBodiesWithAPartialVectorOnly) {
  ScheduleOptions o;
  o.masked_tails = true;
  auto tail_of = [&](int64_t cols, bool costly, bool reduce) {
    Tensor x = Tensor::empty({4, cols}, DType::Float32);
    auto s = schedule_fn([costly, reduce](const std::vector<Tensor>& in) {
      Tensor y = costly ? ops::exp(in[0]) : ops::mul(in[0], ops::scalar(2.0));
      return std::vector<Tensor>{reduce ? ops::sum(y, {-1}) : y};
    }, {x}, true, o);
    return s.schedule.kernels.at(0).nests.at(0).tail;
  };
  EXPECT_EQ(tail_of(1000, true, false), TailMode::Masked);
  EXPECT_EQ(tail_of(1000, true, true), TailMode::Masked);
  EXPECT_EQ(tail_of(1024, true, false), TailMode::Scalar);  // no partial vector
  EXPECT_EQ(tail_of(1000, false, false), TailMode::Scalar);  // cheap body: the scalar tail measured faster
  EXPECT_EQ(tail_of(1000, false, true), TailMode::Scalar);
  o.masked_tails = false;  // a target without masked moves
  EXPECT_EQ(tail_of(1000, true, false), TailMode::Scalar);
}

}  // namespace
}  // namespace tp::stax
