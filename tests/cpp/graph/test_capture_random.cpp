// Capture of random operators: draws become philox_random nodes whose
// randomness is the generator-state input, the trace reports eager's counter
// count and leaves the generator where it was, and interpreting the graph with
// a state reserved from the generator reproduces eager's numbers exactly.
#include <gtest/gtest.h>

#include <cstring>

#include "graph/interpreter.h"
#include "graph/tracer.h"
#include "ops/generator.h"
#include "ops/ops.h"
#include "ops/random_functional.h"

namespace tp::graph {
namespace {

std::vector<Tensor> noisy(const std::vector<Tensor>& in) {
  // randn(10) float32: 3 counters; dropout of 6 float32: 2 counters; rand(3) float64: 2 counters.
  return {ops::add(in[0], ops::randn({10})), ops::dropout(in[1], 0.3, true), ops::rand({3}, DType::Float64)};
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() &&
         std::memcmp(ops::contiguous(a).data(), ops::contiguous(b).data(),
                     static_cast<size_t>(a.numel() * itemsize(a.dtype()))) == 0;
}

TEST(CaptureRandom, DrawsReadTheGeneratorStateInputAtEagersOffsets) {
  Tensor x = ops::zeros({10}), y = ops::ones({2, 3});
  ops::manual_seed(17);
  const GeneratorState before = generator_get_state(kDefaultGenerator);
  TraceResult r = trace(noisy, {x, y}, {"x", "y"});
  const GeneratorState after = generator_get_state(kDefaultGenerator);
  EXPECT_EQ(after.seed, before.seed);
  EXPECT_EQ(after.offset, before.offset);  // the trace's own draws are undone
  // One state input per draw, each placed by the call after the draws before it.
  ASSERT_EQ(r.rng_inputs.size(), 3u);
  const uint64_t counters[] = {3, 2, 2};
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(r.rng_inputs[k].generator, kDefaultGenerator);
    EXPECT_EQ(r.rng_inputs[k].counters, counters[k]);
  }
  std::string code = r.graph->code();
  EXPECT_NE(code.find("def forward(x, y, rng_state, rng_state_1, rng_state_2):"), std::string::npos) << code;
  EXPECT_NE(code.find("distribution='normal', offset=0)"), std::string::npos) << code;
  r.graph->lint();

  // Eager twice from seed 17, then the graph twice with the call's reservations.
  ops::manual_seed(17);
  auto e1 = noisy({x, y}), e2 = noisy({x, y});
  const GeneratorState eager_end = generator_get_state(kDefaultGenerator);
  ops::manual_seed(17);
  std::vector<PhiloxDraw> draws;
  for (auto& d : r.rng_inputs) draws.push_back({d.generator, d.counters});
  auto call = [&] {
    std::vector<Tensor> in{x, y};
    for (Tensor& t : philox_draw_states(draws, true)) in.push_back(t);
    return interpret(*r.graph, in);
  };
  auto c1 = call(), c2 = call();
  EXPECT_EQ(generator_get_state(kDefaultGenerator).offset, eager_end.offset);
  for (size_t i = 0; i < e1.size(); ++i) {
    EXPECT_TRUE(same_bits(e1[i], c1[i])) << i;
    EXPECT_TRUE(same_bits(e2[i], c2[i])) << i;
  }
  EXPECT_FALSE(same_bits(c1[0], c2[0]));
}

TEST(CaptureRandom, ReseedInsideTheFunctionIsACaptureError) {
  auto f = [](const std::vector<Tensor>& in) {
    ops::manual_seed(3);
    return std::vector<Tensor>{ops::add(in[0], ops::rand({4}))};
  };
  EXPECT_THROW(trace(f, {ops::zeros({4})}), CaptureError);
}

}  // namespace
}  // namespace tp::graph
