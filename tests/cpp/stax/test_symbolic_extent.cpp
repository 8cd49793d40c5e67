// Symbolic extents (size variables): one generated source serves every size.
//
// The LoopProgram is built by hand (the lowering only produces static shapes
// so far): over a rows x cols input whose sizes are size variables s0, s1,
//   y[i, j] = x[i, j] * 2 + 1      (pointwise)
//   r[i]    = sum_j x[i, j]        (row sum: vectorized, cascaded)
//   c[j]    = sum_i x[i, j]        (column sum: strided)
// It is scheduled and printed once, compiled through the code cache as the
// backend does, and run for several sizes against plain loops in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "stax/codegen/cpp/cpp_codegen.h"
#include "stax/ir/expr_visitor.h"
#include "stax/runtime/cached_kernel.h"
#include "stax/runtime/isa.h"
#include "stax/scheduler/schedule.h"

namespace tp::stax {
namespace {

using ir::BufferKind;
using ir::IndexExpr;

ir::LoopProgram symbolic_program() {
  ir::LoopProgram p;
  p.num_sizes = 2;
  const IndexExpr rows = ir::size_var(0), cols = ir::size_var(1);
  const char* names[] = {"in0", "out0", "out1", "out2"};
  const BufferKind kinds[] = {BufferKind::Input, BufferKind::Output, BufferKind::Output, BufferKind::Output};
  for (int b = 0; b < 4; ++b) {
    ir::Buffer buf;
    buf.id = b;
    buf.name = names[b];
    buf.kind = kinds[b];
    buf.dtype = DType::Float32;
    buf.arg_index = b == 0 ? 0 : b - 1;
    p.buffers.push_back(buf);
  }
  p.buffers[0].sizes = p.buffers[1].sizes = {4, 1000};  // an example call's sizes
  p.buffers[0].size_exprs = p.buffers[1].size_exprs = {rows, cols};
  p.buffers[2].sizes = {4};
  p.buffers[2].size_exprs = {rows};
  p.buffers[3].sizes = {1000};
  p.buffers[3].size_exprs = {cols};
  auto x = [&](const IndexExpr& i, const IndexExpr& j) { return ir::load(0, i * cols + j, DType::Float32); };
  auto f32 = [](double v) { return ir::constant(Scalar(v), DType::Float32); };

  ir::ComputeNode y;
  IndexExpr i = p.new_var("i"), j = p.new_var("j");
  y.id = 0; y.origin = "mul, add"; y.out_buffer = 1;
  y.ranges = {4, 1000};
  y.range_exprs = {rows, cols};
  y.vars = {i, j};
  y.body = ir::call(ir::CallOp::Add, {ir::call(ir::CallOp::Mul, {x(i, j), f32(2.0)}, DType::Float32), f32(1.0)},
                    DType::Float32);
  y.store_index = i * cols + j;
  p.nodes.push_back(y);

  ir::ComputeNode r;
  IndexExpr ri = p.new_var("i"), rj = p.new_var("r");
  r.id = 1; r.origin = "sum"; r.out_buffer = 2; r.reduce = ir::ReduceOp::Sum;
  r.ranges = {4}; r.range_exprs = {rows}; r.vars = {ri};
  r.reduce_ranges = {1000}; r.reduce_range_exprs = {cols}; r.rvars = {rj};
  r.body = x(ri, rj);
  r.store_index = ri;
  p.nodes.push_back(r);

  ir::ComputeNode c;
  IndexExpr cj = p.new_var("j"), ci = p.new_var("r");
  c.id = 2; c.origin = "sum"; c.out_buffer = 3; c.reduce = ir::ReduceOp::Sum;
  c.ranges = {1000}; c.range_exprs = {cols}; c.vars = {cj};
  c.reduce_ranges = {4}; c.reduce_range_exprs = {rows}; c.rvars = {ci};
  c.body = x(ci, cj);
  c.store_index = cj;
  p.nodes.push_back(c);
  return p;
}

class SymbolicExtent : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // A private cache unless the caller chose one.
    if (!std::getenv("TP_CACHE_DIR")) {
      static char dir[] = "/tmp/tp_stax_symbolic_XXXXXX";
      ASSERT_NE(mkdtemp(dir), nullptr);
      setenv("TP_CACHE_DIR", dir, 1);
    }
  }
};

TEST_F(SymbolicExtent, OneSourceRunsForEverySize) {
  ir::LoopProgram p = symbolic_program();
  ScheduleOptions o;
  o.vector_bytes = runtime::host_isa().vector_bytes;
  Schedule s = schedule(p, o);
  int outer_vectorized = 0;
  for (const KernelPlan& k : s.kernels) {
    EXPECT_TRUE(k.symbolic);
    EXPECT_EQ(k.chunk, 0);  // chunk counts would depend on the size
    outer_vectorized += k.vectorize_outer;
  }
  // The column sum is vectorized across its outputs; the number of whole
  // vector groups is computed from the size at run time (the rest: scalar tail).
  EXPECT_EQ(outer_vectorized, 1);
  codegen::PrintedUnit u = codegen::CppPrinter().print(p, s);
  EXPECT_EQ(u.size_count, 2);
  // The extents are read from sizes[], not baked in.
  EXPECT_NE(u.source.find("const i64 tp_size0 = sizes[0];"), std::string::npos);
  EXPECT_NE(u.source.find("const i64 tp_size1 = sizes[1];"), std::string::npos);
  EXPECT_EQ(u.source.find("1000"), std::string::npos) << u.source;
  ASSERT_EQ(u.slot_buffer, (std::vector<int>{0, 1, 2, 3}));

  runtime::CachedKernel kernel(u.source, u.entry);
  auto entry = reinterpret_cast<void (*)(void* const*, const long long*)>(kernel.pin().symbol);
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  // Short and long rows (the row sum's cascade blocks), a ragged vector tail,
  // and an empty input.
  for (auto [rows, cols] : std::vector<std::pair<long long, long long>>{{3, 37}, {5, 9000}, {64, 1}, {0, 5}}) {
    std::vector<float> x(rows * cols), y(rows * cols, -7.0f), r(rows, -7.0f), c(cols, -7.0f);
    for (float& v : x) v = dist(gen);
    void* bufs[] = {x.data(), y.data(), r.data(), c.data()};
    long long sizes[] = {rows, cols};
    entry(bufs, sizes);
    for (long long i = 0; i < rows; ++i) {
      double sum = 0;
      for (long long j = 0; j < cols; ++j) {
        ASSERT_EQ(y[i * cols + j], x[i * cols + j] * 2.0f + 1.0f) << rows << "x" << cols;
        sum += x[i * cols + j];
      }
      // float accumulation of at most 9000 terms of magnitude <= 1
      EXPECT_NEAR(r[i], sum, 1e-5 * cols) << "row " << i << " of " << rows << "x" << cols;
    }
    for (long long j = 0; j < cols; ++j) {
      double sum = 0;
      for (long long i = 0; i < rows; ++i) sum += x[i * cols + j];
      EXPECT_NEAR(c[j], sum, 1e-5 * (rows + 1)) << "column " << j << " of " << rows << "x" << cols;
    }
  }
}

TEST(SymbolicExtentPlan, StaticProgramsPrintNoSizes) {
  // The same program with the example sizes as constants: nothing symbolic.
  ir::LoopProgram p = symbolic_program();
  p.num_sizes = 0;
  for (auto& b : p.buffers) b.size_exprs.clear();
  for (auto& n : p.nodes) { n.range_exprs.clear(); n.reduce_range_exprs.clear(); }
  ir::IndexExpr cols = 1000;
  std::unordered_map<int, ir::IndexExpr> bind{{ir::size_var_id(1), cols}};
  for (auto& n : p.nodes) {
    n.store_index = ir::simplify(ir::substitute(n.store_index, bind));
    // Rebuild the loads with the size bound (the body is a small DAG).
    struct Bind : ir::ExprMutator {
      const std::unordered_map<int, ir::IndexExpr>& m;
      explicit Bind(const std::unordered_map<int, ir::IndexExpr>& map) : m(map) {}
      ir::Expr mutate_load(const ir::Expr& e, std::vector<ir::Expr>) override {
        return ir::load(e->buffer, ir::simplify(ir::substitute(e->index, m)), e->dtype);
      }
    } b(bind);
    n.body = b.mutate(n.body);
  }
  Schedule s = schedule(p, ScheduleOptions{});
  for (const KernelPlan& k : s.kernels) EXPECT_FALSE(k.symbolic);
  codegen::PrintedUnit u = codegen::CppPrinter().print(p, s);
  EXPECT_EQ(u.source.find("tp_size"), std::string::npos);
  EXPECT_EQ(u.source.find("sizes["), std::string::npos);
}

}  // namespace
}  // namespace tp::stax
