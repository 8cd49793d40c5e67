// Dynamic shapes through the lowering (issue 11): a graph captured at
// distinctive sizes is made symbolic (testing::mark_symbols), lowered,
// scheduled, printed and compiled ONCE, and that one region is called at other
// sizes — 2, primes, and rows longer than a cascade block — against the static
// program compiled at each of those sizes: pointwise results and GEMMs bit for
// bit, reductions within rounding (a short static row may be summed in another
// order than the vectorized symbolic loop).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "graph/tracer.h"
#include "ops/ops.h"
#include "passes/passes.h"
#include "stax/backend/stax_backend.h"
#include "stax/backend/testing_symbolic.h"
#include "stax/lowering/lower.h"
#include "stax/scheduler/schedule.h"
#include "../ops/test_util.h"

namespace tp::stax {
namespace {

using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
using Make = std::function<std::vector<Tensor>(const std::vector<int64_t>&)>;

std::unique_ptr<graph::Graph> capture(const Fn& fn, const std::vector<Tensor>& inputs) {
  auto tr = graph::trace(fn, inputs, {}, /*execute=*/false);
  testing::run_passes_keeping_mean(*tr.graph);
  return std::move(tr.graph);
}

std::shared_ptr<CompiledRegion> symbolic_region(const Fn& fn, const std::vector<Tensor>& inputs,
                                                const std::vector<int64_t>& hints) {
  auto g = capture(fn, inputs);
  testing::mark_symbols(*g, hints);
  return compile_region(*g);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.numel()) * itemsize(a.dtype())) == 0;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  Tensor d = ops::abs(ops::sub(a, b));
  return d.numel() == 0 ? 0.0 : ops::amax(d).item().to_double();
}

class SymbolicLowering : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::getenv("TP_CACHE_DIR")) {
      static char dir[] = "/tmp/tp_stax_symbolic_lowering_XXXXXX";
      ASSERT_NE(mkdtemp(dir), nullptr);
      setenv("TP_CACHE_DIR", dir, 1);
    }
  }
  // One symbolic region, called at every size; each compared with the static
  // region of that size (bit for bit, or within `tol` where the loop orders differ).
  void check(const Fn& fn, const Make& make, const std::vector<int64_t>& hints,
             const std::vector<std::vector<int64_t>>& sizes, double tol = 0.0) {
    auto region = symbolic_region(fn, make(hints), hints);
    EXPECT_NE(region->source().find("tp_size0"), std::string::npos);
    for (const auto& s : sizes) {
      std::vector<Tensor> in = make(s);
      std::vector<Tensor> got = region->run(in);
      // The reference keeps scalar tails: a static extent may get a masked vector
      // tail (vector exp differs from scalar exp in the last bit), a symbolic one does not.
      RegionOptions scalar_tails;
      scalar_tails.masked_tails = false;
      std::vector<Tensor> want = compile_region(*capture(fn, in), scalar_tails)->run(in);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].sizes(), want[i].sizes()) << "result " << i << " at size " << s[0];
        if (tol == 0.0) EXPECT_TRUE(same_bits(got[i], want[i])) << "result " << i << " at sizes " << shape_str(s);
        else EXPECT_LE(max_abs_diff(got[i], want[i]), tol) << "result " << i << " at sizes " << shape_str(s);
      }
    }
  }
};

// Rows of 2 and 7 elements: the static program may sum them in another order
// (scalar, in double) than the vectorized symbolic loop, so row sums compare within rounding.
const std::vector<std::vector<int64_t>> kSizes = {{2, 2}, {3, 7}, {7, 3}, {101, 1031}, {5, 9001}, {37, 53}};

TEST_F(SymbolicLowering, PointwiseWithBroadcastBitForBit) {
  check([](const std::vector<Tensor>& in) {
    Tensor y = ops::mul(ops::relu(ops::add(in[0], in[1])), ops::scalar(2.0));
    return std::vector<Tensor>{y, ops::exp(ops::sub(in[0], in[2]))};
  }, [](const std::vector<int64_t>& s) {
    return std::vector<Tensor>{ops::randn({s[0], s[1]}), ops::randn({s[1]}), ops::randn({s[0], 1})};
  }, {37, 53}, kSizes);
}

TEST_F(SymbolicLowering, Example11RowSumBothDims) {
  check([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::sum(ops::mul(ops::relu(ops::add(in[0], in[1])), ops::scalar(2.0)), {-1})};
  }, [](const std::vector<int64_t>& s) { return std::vector<Tensor>{ops::randn({s[0], s[1]}), ops::randn({s[1]})}; },
        // With AVX-512 the symbolic rest after the W-vector loop goes into vector
        // lanes (TailMode::MaskedLoop), the static one into a scalar: a row of 1031
        // sums to ~800, where a float's ulp is 6e-5 (one missing or doubled element
        // would be off by ~1).
        {37, 53}, kSizes, 1e-3);
}

TEST_F(SymbolicLowering, SoftmaxDecompositionBothDims) {
  check([](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::softmax(in[0], -1)}; },
        [](const std::vector<int64_t>& s) { return std::vector<Tensor>{ops::randn({s[0], s[1]})}; }, {37, 53}, kSizes,
        1e-6);
}

TEST_F(SymbolicLowering, ColumnSumMeanAndTransposedReshape) {
  // sum(0) runs a strided loop when symbolic, outer-vectorized when static: same terms, other order.
  check([](const std::vector<Tensor>& in) {
    Tensor t = ops::transpose(ops::add(in[0], ops::scalar(1.0)), 0, 1);  // computed, then read through // and %
    return std::vector<Tensor>{ops::sum(in[0], {0}), ops::mean(in[0], {1}), ops::exp(ops::reshape(t, {-1}))};
  }, [](const std::vector<int64_t>& s) { return std::vector<Tensor>{ops::randn({s[0], s[1]})}; }, {37, 53},
        {{2, 2}, {3, 7}, {101, 1031}, {37, 53}}, 1e-3);
}

TEST_F(SymbolicLowering, GemmWithSymbolicMKN) {
  tp::test::load_test_blas();
  check([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::relu(ops::matmul(in[0], in[1]))};
  }, [](const std::vector<int64_t>& s) {
    return std::vector<Tensor>{ops::randn({s[0], s[1]}), ops::randn({s[1], s[2]})};
  }, {37, 53, 61}, {{2, 3, 5}, {7, 2, 3}, {101, 67, 13}, {37, 53, 61}});
}

// The plan of a symbolic row sum: 32-bit indices and the cascade follow the
// declared ranges of the sizes, never the example sizes.
TEST(SymbolicSchedule, DeclaredRangesBoundIndexWidthAndCascade) {
  auto g = capture([](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::sum(in[0], {1})}; },
                   {Tensor::empty({37, 53}, DType::Float32)});
  testing::mark_symbols(*g, {37, 53});
  LoweredRegion r = lower(*g);
  ASSERT_EQ(r.program.num_sizes, 2);
  ScheduleOptions o;
  o.vector_bytes = 32;
  o.index32 = true;
  Schedule unbounded = schedule(r.program, o);
  ASSERT_EQ(unbounded.kernels.size(), 1u);
  EXPECT_TRUE(unbounded.kernels[0].symbolic);
  EXPECT_EQ(unbounded.kernels[0].index_bits, 64);  // sizes up to INT64_MAX
  EXPECT_GT(unbounded.kernels[0].nests[0].block, 0);
  EXPECT_EQ(unbounded.kernels[0].nests[0].cascade_levels, 0);  // blocks added serially in double: no stack
  o.size_ranges[ir::size_var_id(0)] = {2, 1 << 12};
  o.size_ranges[ir::size_var_id(1)] = {2, 1000};  // a row never longer than one block (4 x 8 x 64 floats)
  Schedule bounded = schedule(r.program, o);
  EXPECT_EQ(bounded.kernels[0].index_bits, 32);
  EXPECT_EQ(bounded.kernels[0].nests[0].block, 0);
  o.size_ranges[ir::size_var_id(1)] = {2, 10000};  // up to 5 blocks: cascaded
  Schedule longer = schedule(r.program, o);
  EXPECT_GT(longer.kernels[0].nests[0].block, 0);
  EXPECT_EQ(longer.kernels[0].nests[0].cascade_levels, 0);
}

// A reshape of a computed value divides by sizes; the symbols' declared
// minimum (2) proves the divisors positive, so the kernel uses C's / and %
// rather than the floor-division helpers.
TEST_F(SymbolicLowering, DivisionsBySizesUseDeclaredRanges) {
  auto region = symbolic_region([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::exp(ops::reshape(ops::transpose(ops::add(in[0], ops::scalar(1.0)), 0, 1), {-1}))};
  }, {Tensor::empty({37, 53}, DType::Float32)}, {37, 53});
  const std::string src = region->source().substr(region->source().find("static void fused"));  // kernels, not the prelude
  EXPECT_EQ(src.find("tp_floordiv("), std::string::npos) << src;
  EXPECT_EQ(src.find("tp_mod("), std::string::npos) << src;
  EXPECT_NE(src.find(" / tp_size"), std::string::npos) << src;
}

// An operator whose attribute is computed from sizes and that has no symbolic
// rule runs as an extern call that carries the attribute's expression (the
// backend evaluates it at every call), never the example's value alone.
TEST(SymbolicLoweringExterns, SizeDependentAttributeIsCarriedAsAnExpression) {
  auto g = capture([](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::reshape(ops::sum(in[0], {1}), {-1, 1})}; },
                   {Tensor::empty({37, 53}, DType::Float32)});
  testing::mark_symbols(*g, {37, 53});
  // Plant a size-dependent attribute on a node without a symbolic rule.
  for (auto& n : g->nodes())
    if (n->opcode == graph::Opcode::CallFunction && n->is_op("view")) {
      // A gradient operator whose result is its `size` attribute (the forward
      // input's shape): it runs as an extern call of its eager kernel.
      n->target = &get_op("avg_pool2d_grad");
      n->sym_attrs["size"] = {ir::size_var(0), ir::IndexExpr(1)};
      n->attrs.set("size", std::vector<int64_t>{37, 1});
    }
  LoweredRegion r = lower(*g);
  bool found = false;
  for (auto& e : r.program.externs)
    if (e.op == "avg_pool2d_grad") {
      ASSERT_EQ(e.sym_attrs.size(), 1u);
      EXPECT_EQ(e.sym_attrs[0].first, "size");
      ASSERT_EQ(e.sym_attrs[0].second.size(), 2u);
      EXPECT_TRUE(e.sym_attrs[0].second[0] == ir::size_var(0));
      EXPECT_NE(ir::to_string(e).find("sym size=["), std::string::npos) << ir::to_string(e);
      found = true;
    }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace tp::stax
