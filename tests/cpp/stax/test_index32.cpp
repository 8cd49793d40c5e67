// 32-bit indices (Section 6.8): the scheduler plans them only where range
// analysis proves every index fits, and a kernel printed with them computes
// exactly what the 64-bit one does.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "graph/tracer.h"
#include "ops/ops.h"
#include "passes/passes.h"
#include "stax/codegen/cpp/cpp_codegen.h"
#include "stax/lowering/lower.h"
#include "stax/runtime/cached_kernel.h"
#include "stax/runtime/isa.h"

namespace tp::stax {
namespace {

class Index32 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::getenv("TP_CACHE_DIR")) {
      static char dir[] = "/tmp/tp_stax_index32_XXXXXX";
      ASSERT_NE(mkdtemp(dir), nullptr);
      setenv("TP_CACHE_DIR", dir, 1);
    }
  }
};

// Runs the program's float32 kernels with 64- and 32-bit indices on the same
// random inputs; the outputs must be equal bit for bit.
void expect_same_with_index32(const graph::TraceableFn& fn, const std::vector<Tensor>& inputs) {
  auto tr = graph::trace(fn, inputs, {}, /*execute=*/false);
  passes::run_default_passes(*tr.graph);
  LoweredRegion lowered = lower(*tr.graph);
  const ir::LoopProgram& p = lowered.program;
  ScheduleOptions o;
  o.vector_bytes = runtime::host_isa().vector_bytes;
  Schedule wide = schedule(p, o);
  o.index32 = true;
  Schedule narrow = schedule(p, o);
  for (const KernelPlan& k : wide.kernels) EXPECT_EQ(k.index_bits, 64);
  for (const KernelPlan& k : narrow.kernels) EXPECT_EQ(k.index_bits, 32) << k.name;
  codegen::PrintedUnit a = codegen::CppPrinter().print(p, wide), b = codegen::CppPrinter().print(p, narrow);
  ASSERT_EQ(a.slot_buffer, b.slot_buffer);
  // The outer loop variable (o<id>) is an int in one, an i64 in the other.
  EXPECT_NE(b.source.find("for (int o"), std::string::npos);
  EXPECT_EQ(a.source.find("for (int o"), std::string::npos);

  std::vector<std::vector<float>> in_bufs, out_a, out_b;
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<void*> pa, pb;
  in_bufs.reserve(a.slot_buffer.size());
  out_a.reserve(a.slot_buffer.size());
  out_b.reserve(a.slot_buffer.size());
  for (int id : a.slot_buffer) {
    const ir::Buffer& buf = p.buffers[id];
    ASSERT_EQ(buf.dtype, DType::Float32);
    if (buf.kind == ir::BufferKind::Input) {
      in_bufs.emplace_back(std::max<int64_t>(numel(buf.sizes), 1));
      for (float& v : in_bufs.back()) v = dist(gen);
      pa.push_back(in_bufs.back().data());
      pb.push_back(in_bufs.back().data());
    } else {
      ASSERT_NE(buf.kind, ir::BufferKind::Constant);
      out_a.emplace_back(std::max<int64_t>(buf.numel, 1), -1.0f);
      out_b.emplace_back(std::max<int64_t>(buf.numel, 1), -2.0f);
      pa.push_back(out_a.back().data());
      pb.push_back(out_b.back().data());
    }
  }
  runtime::CachedKernel ka(a.source, a.entry), kb(b.source, b.entry);
  using Entry = void (*)(void* const*, const long long*);
  reinterpret_cast<Entry>(ka.pin().symbol)(pa.data(), nullptr);
  reinterpret_cast<Entry>(kb.pin().symbol)(pb.data(), nullptr);
  for (size_t i = 0; i < out_a.size(); ++i)
    EXPECT_EQ(std::memcmp(out_a[i].data(), out_b[i].data(), out_a[i].size() * sizeof(float)), 0) << "output " << i;
}

TEST_F(Index32, Example11SoftmaxColumnSumAndChunkedSumAgree) {
  Tensor x = Tensor::empty({64, 2048}, DType::Float32), w = Tensor::empty({64, 2048}, DType::Float32);
  expect_same_with_index32([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::sum(ops::mul(ops::relu(ops::add(in[0], in[1])), ops::scalar(2.0)), {-1})};
  }, {x, w});
  Tensor s = Tensor::empty({32, 1000}, DType::Float32);
  expect_same_with_index32([](const std::vector<Tensor>& in) {
    Tensor m = ops::amax(in[0], {-1}, true);
    Tensor e = ops::exp(ops::sub(in[0], m));
    return std::vector<Tensor>{ops::div(e, ops::sum(e, {-1}, true))};
  }, {s});
  Tensor c = Tensor::empty({300, 37}, DType::Float32);
  expect_same_with_index32([](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::sum(in[0], {0})}; },
                           {c});
  Tensor l = Tensor::empty({1 << 17}, DType::Float32);
  expect_same_with_index32([](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::sum(in[0], {0})}; },
                           {l});
  Tensor t = Tensor::empty({40, 30}, DType::Float32);
  expect_same_with_index32([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::exp(ops::transpose(in[0], 0, 1))};
  }, {t});
}

TEST(Index32Plan, OnlyWhenEveryIndexProvablyFits) {
  // in0[i * 4096 + j] over 2^20 x 2^12: the flat index reaches 2^32.
  ir::LoopProgram p;
  p.buffers.resize(2);
  for (int i = 0; i < 2; ++i) { p.buffers[i].id = i; p.buffers[i].name = i ? "out0" : "in0"; }
  p.buffers[0].kind = ir::BufferKind::Input;
  p.buffers[1].kind = ir::BufferKind::Output;
  ir::IndexExpr i = p.new_var("i"), j = p.new_var("j");
  ir::ComputeNode n;
  n.out_buffer = 1; n.origin = "exp"; n.vars = {i, j};
  n.body = ir::call(ir::CallOp::Exp, {ir::load(0, i * 4096 + j, DType::Float32)}, DType::Float32);
  n.store_index = i * 4096 + j;
  n.ranges = {1 << 20, 1 << 12};
  p.nodes.push_back(n);
  ScheduleOptions o;
  o.index32 = true;
  EXPECT_EQ(schedule(p, o).kernels[0].index_bits, 64);
  p.nodes[0].ranges = {1 << 10, 1 << 12};  // 2^22 elements
  EXPECT_EQ(schedule(p, o).kernels[0].index_bits, 32);
  o.index32 = false;  // the CPU default
  EXPECT_EQ(schedule(p, o).kernels[0].index_bits, 64);
  // An intermediate value out of range is enough to refuse: min(i * j * 2^20, 5)
  // lies in [0, 5], but i * j * 2^20 reaches 2^42.
  o.index32 = true;
  p.nodes[0].body = ir::load(0, ir::min(i * j * 1048576, 5), DType::Float32);
  EXPECT_EQ(schedule(p, o).kernels[0].index_bits, 64);
}

}  // namespace
}  // namespace tp::stax
