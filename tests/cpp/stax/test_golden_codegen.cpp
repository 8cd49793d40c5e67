// Golden printed-code tests: the C++ printer's output for a few kernels is
// compared with expected text under tests/cpp/stax/golden/, so that a change
// of the generated loops (a different accumulator count, block size, index
// form) shows up in review as a diff of those files.
//
// To regenerate them after an intended change, run the test with
//     TP_UPDATE_GOLDEN=1 ./test_stax --gtest_filter='GoldenCodegen.*'
// and review the diff. Only the kernels and the entry are compared, from the
// first kernel's comment on: the runtime prelude is tested on its own
// (test_prelude.cpp). The schedule uses 32-byte vectors, whatever the host.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "core/error.h"
#include "graph/tracer.h"
#include "ops/ops.h"
#include "passes/passes.h"
#include "stax/codegen/cpp/cpp_codegen.h"
#include "stax/lowering/lower.h"
#include "stax/lowering/registry.h"

namespace tp::stax {
namespace {

// Next to this file. __FILE__ may be relative to the build directory (Ninja
// passes relative paths), which is where the test executable lives.
std::string golden_dir() {
  std::string here = __FILE__;
  if (!here.empty() && here[0] != '/') {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
      std::string dir(exe, static_cast<size_t>(n));
      here = dir.substr(0, dir.find_last_of('/')) + "/" + here;
    }
  }
  return here.substr(0, here.find_last_of('/')) + "/golden/";
}

std::string printed_kernels(const graph::TraceableFn& fn, const std::vector<Tensor>& inputs,
                            int vector_bytes = 32, bool masked_tails = false) {
  auto tr = graph::trace(fn, inputs, {}, /*execute=*/false);
  passes::PassOptions po;
  po.keep_whole = &keeps_whole_for_stax;  // as the Stax backend: var, layer_norm stay whole
  passes::run_default_passes(*tr.graph, po);
  LoweredRegion lowered = lower(*tr.graph);
  ScheduleOptions o;
  o.vector_bytes = vector_bytes;
  o.masked_tails = masked_tails;
  Schedule s = schedule(lowered.program, o);
  codegen::PrintedUnit u = codegen::CppPrinter().print(lowered.program, s);
  EXPECT_EQ(u.language, "c++");
  EXPECT_EQ(u.entry, "tp_entry");
  EXPECT_EQ(u.kernel_names.size(), s.kernels.size());
  size_t at = u.source.find("\n// " + s.kernels.at(0).name + ":");
  EXPECT_NE(at, std::string::npos);
  return u.source.substr(at + 1);
}

void check_golden(const std::string& file, const std::string& actual) {
  std::string path = golden_dir() + file;
  const char* update = std::getenv("TP_UPDATE_GOLDEN");
  if (update && *update && std::string(update) != "0") {
    std::ofstream(path) << actual;
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "missing golden file " << path << " (run with TP_UPDATE_GOLDEN=1)";
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(actual, expected.str()) << "printed code differs from " << path
                                    << "; if intended, regenerate with TP_UPDATE_GOLDEN=1";
}

TEST(GoldenCodegen, PointwiseMulAdd) {
  Tensor x = Tensor::empty({37}, DType::Float32);
  check_golden("pointwise_mul_add.cpp.txt", printed_kernels([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::add(ops::mul(in[0], ops::scalar(2.0)), ops::scalar(1.0))};
  }, {x}));
}

TEST(GoldenCodegen, RowSum) {
  Tensor x = Tensor::empty({4, 1000}, DType::Float32);
  check_golden("row_sum.cpp.txt", printed_kernels([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::sum(in[0], {-1})};
  }, {x}));
}

TEST(GoldenCodegen, ColumnSum) {
  Tensor x = Tensor::empty({300, 37}, DType::Float32);
  check_golden("column_sum.cpp.txt", printed_kernels([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::sum(in[0], {0})};
  }, {x}));
}

// layer_norm with weight and bias: one kernel, the row's Welford statistics
// (two passes: a short row in cache), rstd as a per-row local, the output.
TEST(GoldenCodegen, LayerNormWelfordTwoPass) {
  Tensor x = Tensor::empty({6, 100}, DType::Float32), w = Tensor::empty({100}, DType::Float32),
         b = Tensor::empty({100}, DType::Float32);
  check_golden("layer_norm_welford.cpp.txt", printed_kernels([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::layer_norm(in[0], {100}, in[1], in[2], 1e-5)};
  }, {x, w, b}));
}

// A long row's variance: one pass, (count, mean, M2) per double lane.
TEST(GoldenCodegen, VarianceWelfordOnePass) {
  Tensor x = Tensor::empty({3, 5000}, DType::Float32);
  check_golden("var_welford_one_pass.cpp.txt", printed_kernels([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::var(in[0], std::vector<int64_t>{-1}, 1.0, false)};
  }, {x}));
}

// argmax over rows: one pass with a (value, position) accumulator per vector lane, merged in order.
TEST(GoldenCodegen, ArgmaxOnePass) {
  Tensor x = Tensor::empty({5, 37}, DType::Float32);
  check_golden("argmax_one_pass.cpp.txt", printed_kernels([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::argmax(in[0], 1, false)};
  }, {x}));
}

// exp of 100-element rows with 64-byte vectors: 6 vectors and a masked tail of 4.
TEST(GoldenCodegen, MaskedTailExp) {
  Tensor x = Tensor::empty({3, 100}, DType::Float32);
  check_golden("masked_tail_exp.cpp.txt", printed_kernels([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::exp(in[0])};
  }, {x}, 64, true));
}

TEST(CppPrinter, MaskedTailsNeedAvx512) {
  // A masked tail needs masked moves: with 64-byte vectors the printer prints
  // one masked step; at another width it says it cannot, rather than print
  // something else.
  Tensor x = Tensor::empty({37}, DType::Float32);
  auto tr = graph::trace([](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::exp(in[0])}; }, {x}, {},
                         /*execute=*/false);
  passes::run_default_passes(*tr.graph);
  LoweredRegion lowered = lower(*tr.graph);
  Schedule s = schedule(lowered.program, ScheduleOptions{});
  EXPECT_NO_THROW(codegen::CppPrinter().print(lowered.program, s));
  s.kernels[0].nests[0].tail = TailMode::Masked;
  EXPECT_NE(codegen::CppPrinter().print(lowered.program, s).source.find("// masked tail"), std::string::npos);
  ScheduleOptions narrow;
  narrow.vector_bytes = 32;
  Schedule s32 = schedule(lowered.program, narrow);
  s32.kernels[0].nests[0].tail = TailMode::Masked;
  EXPECT_THROW(codegen::CppPrinter().print(lowered.program, s32), ValueError);
  EXPECT_THROW(codegen::generate_cpp(lowered.program, s, s.vector_bytes * 2), ValueError);
}

}  // namespace
}  // namespace tp::stax
