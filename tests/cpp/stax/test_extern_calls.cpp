// Extern calls in the loop IR: what the lowering records (operands read in
// place with their strides, planned results), that the IR stays printable and
// comparable, and where the scheduler places the calls between kernels.
#include <gtest/gtest.h>

#include "graph/tracer.h"
#include "ops/dispatch.h"
#include "ops/ops.h"
#include "passes/passes.h"
#include "stax/lowering/lower.h"
#include "stax/scheduler/schedule.h"

namespace tp::stax {
namespace {

using ir::ExternKind;
using ir::ExternOperand;

struct Scheduled {
  LoweredRegion lowered;
  Schedule schedule;
};

Scheduled schedule_fn(const graph::TraceableFn& fn, const std::vector<Tensor>& inputs) {
  auto tr = graph::trace(fn, inputs, {}, /*execute=*/false);
  passes::run_default_passes(*tr.graph);
  Scheduled s{lower(*tr.graph), {}};
  s.schedule = schedule(s.lowered.program, ScheduleOptions{});
  return s;
}

TEST(ExternCalls, TransposedOperandIsReadInPlaceAndTheCallSplitsKernels) {
  Tensor x = Tensor::empty({8, 6}, DType::Float32), w = Tensor::empty({5, 6}, DType::Float32);
  auto s = schedule_fn([](const std::vector<Tensor>& in) {
    Tensor pro = ops::relu(ops::add(in[0], ops::scalar(1.0)));
    return std::vector<Tensor>{ops::exp(ops::matmul(pro, ops::transpose(in[1], 0, 1)))};
  }, {x, w});
  const ir::LoopProgram& p = s.lowered.program;
  ASSERT_EQ(p.externs.size(), 1u);
  const ir::ExternCall& e = p.externs[0];
  EXPECT_EQ(e.op, "matmul");
  EXPECT_EQ(e.kind, ExternKind::Gemm);
  ASSERT_EQ(e.inputs.size(), 2u);
  // Operand 0 was computed (relu(x + 1)): realized contiguous by the prologue node.
  EXPECT_EQ(e.inputs[0].strides, Shape({6, 1}));
  EXPECT_EQ(p.buffers[e.inputs[0].buffer].kind, ir::BufferKind::Temp);
  // Operand 1 is the input w read through the transpose: strides (1, 6), no copy.
  EXPECT_EQ(p.buffers[e.inputs[1].buffer].kind, ir::BufferKind::Input);
  EXPECT_EQ(e.inputs[1].sizes, Shape({6, 5}));
  EXPECT_EQ(e.inputs[1].strides, Shape({1, 6}));
  EXPECT_EQ(e.before_node, 1);
  ASSERT_EQ(e.outputs.size(), 1u);
  EXPECT_EQ(p.buffers[e.outputs[0]].strides, Shape({5, 1}));
  // kernel0 (prologue), the GEMM, kernel1 (epilogue).
  ASSERT_EQ(s.schedule.kernels.size(), 2u);
  ASSERT_EQ(s.schedule.steps.size(), 3u);
  EXPECT_FALSE(s.schedule.steps[0].is_extern);
  EXPECT_TRUE(s.schedule.steps[1].is_extern);
  EXPECT_FALSE(s.schedule.steps[2].is_extern);
  EXPECT_TRUE(s.schedule.kernels[0].nests[0].store_to_memory);
  // Printable: the program's text names the call and its operand layout.
  std::string text = p.to_string();
  EXPECT_NE(text.find("extern 0 matmul("), std::string::npos) << text;
  EXPECT_NE(text.find("strides [1, 6]"), std::string::npos) << text;
}

TEST(ExternCalls, EqualCallsCompareAndHashEqual) {
  ir::ExternCall a;
  a.op = "addmm";
  a.attrs = "beta=1, alpha=1";
  a.kind = ExternKind::Gemm;
  ExternOperand o;
  o.buffer = 2;
  o.sizes = {3, 4};
  o.strides = {1, 3};
  a.inputs = {o, o};
  a.outputs = {5};
  ir::ExternCall b = a;
  b.origin = "a comment";  // not part of the call
  EXPECT_TRUE(a == b);
  EXPECT_EQ(ir::hash(a), ir::hash(b));
  b.inputs[1].strides = {4, 1};
  EXPECT_FALSE(a == b);
  EXPECT_NE(ir::to_string(a), ir::to_string(b));
  ir::ExternCall c = a;
  c.inputs[0].kind = ExternOperand::Kind::Absent;
  EXPECT_NE(ir::to_string(c).find("None"), std::string::npos);
}

TEST(ExternCalls, MultiResultOperatorFeedsItsGetitems) {
  Tensor x = Tensor::empty({4, 7}, DType::Float32);
  auto s = schedule_fn([](const std::vector<Tensor>& in) {
    auto r = call_op(get_op("topk"), {ops::mul(in[0], in[0])},
                     Attrs{{"k", int64_t{3}}, {"dim", int64_t{-1}}, {"largest", true}, {"sorted", true}});
    return std::vector<Tensor>{ops::add(r[0], ops::scalar(1.0)), ops::mul(r[1], ops::scalar(2))};
  }, {x});
  const ir::LoopProgram& p = s.lowered.program;
  ASSERT_EQ(p.externs.size(), 1u);
  EXPECT_EQ(p.externs[0].op, "topk");
  EXPECT_EQ(p.externs[0].kind, ExternKind::Kernel);
  ASSERT_EQ(p.externs[0].outputs.size(), 2u);
  EXPECT_EQ(p.buffers[p.externs[0].outputs[1]].dtype, DType::Int64);
}

}  // namespace
}  // namespace tp::stax
