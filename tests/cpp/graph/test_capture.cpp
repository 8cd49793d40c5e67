// Capture at the dispatcher: a C++ function is traced into a Graph that prints
// as readable code, and interpreting the graph reproduces the function.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/engine.h"
#include "graph/interpreter.h"
#include "graph/tracer.h"
#include "ops/ops.h"
#include "passes/passes.h"

namespace tp::graph {
namespace {

std::vector<Tensor> example11(const std::vector<Tensor>& in) {
  return {ops::sum(ops::mul(ops::relu(ops::add(in[0], in[1])), ops::scalar(2.0)), {-1})};
}

TEST(Capture, CppFunctionBecomesReadableGraph) {
  Tensor x = ops::randn({4, 8}), w = ops::randn({4, 8});
  TraceResult r = trace(example11, {x, w}, {"x", "w"});
  std::string code = r.graph->code();
  EXPECT_NE(code.find("def forward(x, w):"), std::string::npos) << code;
  EXPECT_NE(code.find("add = tp.add(x, w)"), std::string::npos) << code;
  EXPECT_NE(code.find("tp.relu(add)"), std::string::npos) << code;
  EXPECT_NE(code.find("tp.mul(relu, 2.0)"), std::string::npos) << code;  // the Python scalar is a constant
  EXPECT_NE(code.find("dim=[-1]"), std::string::npos) << code;
  EXPECT_NE(code.find("return sum_1"), std::string::npos) << code;
  r.graph->lint();
}

TEST(Capture, InterpretingTheGraphReproducesTheFunction) {
  Tensor x = ops::randn({4, 8}), w = ops::randn({4, 8});
  TraceResult r = trace(example11, {x, w});
  Tensor direct = example11({x, w})[0];
  Tensor replay = interpret(*r.graph, {x, w})[0];
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(direct.data_as<float>()[i], replay.data_as<float>()[i]);
  // Executed on the sample values during capture too.
  EXPECT_EQ(r.outputs[0].data_as<float>()[0], direct.data_as<float>()[0]);
}

// Functionalization: an in-place write becomes the out-of-place twin, a write
// through a view a scatter into the base; a written input is an extra output
// and keeps its data after the trace (the capture's own write is undone).
TEST(Capture, InPlaceWritesAreFunctionalized) {
  Tensor x = ops::randn({3, 4});
  Tensor before = ops::clone(x);
  auto fn = [](const std::vector<Tensor>& in) {
    Tensor y = ops::clone(in[0]);
    ops::add_(y, ops::scalar(1.0));
    Tensor col = ops::select(y, 1, 0);
    ops::mul_(col, ops::scalar(3.0));
    Tensor x0 = in[0];
    ops::add_(x0, ops::scalar(2.0));
    return std::vector<Tensor>{y};
  };
  TraceResult r = trace(fn, {x}, {"x"});
  std::string code = r.graph->code();
  EXPECT_EQ(code.find("add_("), std::string::npos) << code;
  EXPECT_EQ(code.find("mul_("), std::string::npos) << code;
  EXPECT_NE(code.find("select_scatter"), std::string::npos) << code;
  ASSERT_EQ(r.mutated_inputs, std::vector<int>{0});
  r.graph->lint();
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(x.data_as<float>()[i], before.data_as<float>()[i]);
  // The graph: (y, x's final value) for the original x.
  std::vector<Tensor> out = interpret(*r.graph, {x});
  ASSERT_EQ(out.size(), 2u);
  Tensor xe = ops::clone(before);
  Tensor want = fn({xe})[0];
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_FLOAT_EQ(out[0].data_as<float>()[i], want.data_as<float>()[i]);
    EXPECT_FLOAT_EQ(out[1].data_as<float>()[i], xe.data_as<float>()[i]);
  }
}

TEST(Capture, WriteIntoOverlappingInputsIsACaptureError) {
  Tensor base = ops::randn({4});
  Tensor tail = ops::slice(base, 0, 1, std::nullopt, 1);
  EXPECT_THROW(trace([](const std::vector<Tensor>& in) {
                 Tensor x = in[0];
                 ops::add_(x, ops::scalar(1.0));
                 return std::vector<Tensor>{ops::mul(in[1], ops::scalar(2.0))};
               }, {base, tail}),
               CaptureError);
}

// A data gate: the value read during capture, and a guard graph holding only what
// the read tensor depends on, which replays the read on other inputs.
TEST(Capture, DataGateRecordsItsValueAndAGuardSlice) {
  Tensor x = ops::full({3}, Scalar(2.0));
  TraceResult r = trace([](const std::vector<Tensor>& in) {
                   Tensor s = ops::sum(ops::mul(in[0], ops::scalar(3.0)), {});
                   Tensor unrelated = ops::exp(in[0]);
                   bool big = record_data_gate(ops::gt(s, ops::scalar(10.0)), "bool", "f.py:1").to_bool();
                   return std::vector<Tensor>{big ? unrelated : s};
                 }, {x}, {"x"});
  ASSERT_EQ(r.gates.size(), 1u);
  EXPECT_TRUE(r.gates[0].value.to_bool());
  EXPECT_EQ(r.gates[0].describe(), "bool(Tensor) at f.py:1");
  std::string guard = r.gates[0].guard->code();
  EXPECT_EQ(guard.find("exp"), std::string::npos) << guard;
  EXPECT_NE(guard.find("gt"), std::string::npos) << guard;
  r.gates[0].guard->lint();
  EXPECT_TRUE(replay_gate(r.gates[0], {ops::full({3}, Scalar(2.0))}).to_bool());
  EXPECT_FALSE(replay_gate(r.gates[0], {ops::full({3}, Scalar(1.0))}).to_bool());
}

TEST(Capture, FreeTensorIsLiftedAsConstant) {
  Tensor bias = ops::randn({8});
  Tensor x = ops::randn({4, 8});
  TraceResult r = trace([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::add(in[0], bias)}; }, {x});
  EXPECT_NE(r.graph->code().find("self.const"), std::string::npos) << r.graph->code();
}

TEST(Passes, CseAndDceShrinkTheGraph) {
  Tensor x = ops::randn({4});
  TraceResult r = trace([](const std::vector<Tensor>& in) {
    Tensor a = ops::exp(in[0]);
    Tensor b = ops::exp(in[0]);  // same value: CSE
    ops::tanh(in[0]);            // unused: DCE
    return std::vector<Tensor>{ops::add(a, b)};
  }, {x});
  size_t before = r.graph->nodes().size();
  passes::run_default_passes(*r.graph, {.decompose = false});
  EXPECT_EQ(r.graph->nodes().size(), before - 2) << r.graph->code();
}

TEST(Passes, IeeeSafeSimplificationKeepsMulByZero) {
  Tensor x = ops::randn({4});
  TraceResult r = trace([](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::add(ops::mul(ops::mul(in[0], ops::scalar(1.0)), ops::scalar(0.0)), ops::scalar(0.0))};
  }, {x});
  passes::run_default_passes(*r.graph, {.decompose = false});
  std::string code = r.graph->code();
  EXPECT_EQ(code.find("tp.mul(x, 1.0)"), std::string::npos) << code;  // x * 1 -> x
  EXPECT_NE(code.find(", 0.0)"), std::string::npos) << code;           // x * 0 stays (NaN, inf)
}

TEST(Passes, DisabledPassIsSkippedByName) {
  Tensor x = ops::randn({4});
  auto f = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::exp(ops::mul(in[0], ops::scalar(1.0)))};
  };
  TraceResult on = trace(f, {x}), off = trace(f, {x});
  passes::run_default_passes(*on.graph, {.decompose = false});
  passes::run_default_passes(*off.graph, {.decompose = false, .disabled = passes::parse_pass_list("['simplify_algebra']")});
  EXPECT_EQ(on.graph->code().find("tp.mul("), std::string::npos) << on.graph->code();
  EXPECT_NE(off.graph->code().find("tp.mul("), std::string::npos) << off.graph->code();
}

TEST(Passes, PassListParsingNamesTheKnownPasses) {
  EXPECT_EQ(passes::parse_pass_list("cse, dce"), (std::set<std::string>{"cse", "dce"}));
  EXPECT_TRUE(passes::parse_pass_list("").empty());
  try {
    passes::parse_pass_list("cse,fold");
    FAIL() << "an unknown pass name must raise";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("'fold' (known: decompose, simplify_algebra, transpose_products, cse, dce)"), std::string::npos)
        << e.what();
  }
}

TEST(Passes, SoftmaxDecomposesIntoFivePrimitives) {
  Tensor x = ops::randn({4, 8});
  TraceResult r = trace([](const std::vector<Tensor>& in) { return std::vector<Tensor>{ops::softmax(in[0], -1)}; }, {x});
  passes::run_default_passes(*r.graph, {.decompose = true});
  std::string code = r.graph->code();
  for (const char* op : {"tp.amax", "tp.sub", "tp.exp", "tp.sum", "tp.div"})
    EXPECT_NE(code.find(op), std::string::npos) << op << "\n" << code;
  EXPECT_EQ(code.find("tp.softmax"), std::string::npos) << code;
  Tensor ref = ops::softmax(x, -1), got = interpret(*r.graph, {x})[0];
  for (int64_t i = 0; i < 32; ++i) EXPECT_NEAR(ref.data_as<float>()[i], got.data_as<float>()[i], 1e-6);
}

}  // namespace
}  // namespace tp::graph
