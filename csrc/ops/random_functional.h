// Functional random operators: the random draws of a compiled region, with their
// randomness an explicit input (ops/random_functional_ops.cpp).
//
// `philox_random(state, size, dtype, distribution, offset[, low, high])` draws
// what the eager operator of `distribution` ("uniform" = rand, "normal" =
// randn, "randint" = randint.low, "randperm" = randperm with n = size[0])
// draws from a generator whose Philox key is state[0] and whose next counter
// is state[1] + offset. `state` is an int64 tensor [seed, first counter]: the
// draw's own state input, placed by the call where eager's sequence of calls
// would have started this draw (philox_draw_states; captures use offset 0, so a
// draw's place can depend on the sizes of the draws before it). The operator is a
// pure function of its input and attributes (no generator is touched), so
// graph passes may treat it as any other operator.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace tp {

// Reserves `counters` counters from generator `gen`, as eager's random calls of
// one region would, and returns the region's state input [seed, first counter].
Tensor reserve_philox_state(int64_t gen, uint64_t counters);
// The state input for the generator's current position, without reserving
// (example inputs for a backend that compiles ahead of the first call).
Tensor peek_philox_state(int64_t gen);

// One call's draws in order: the generator each takes its counters from, and how
// many. Per generator, reserves (or, with reserve false, only reads) the sum of
// its draws' counters and returns each draw's state [seed, first counter of the
// draw]: eager's calls take them one after another from that range.
struct PhiloxDraw {
  int64_t generator;
  uint64_t counters;
};
std::vector<Tensor> philox_draw_states(const std::vector<PhiloxDraw>& draws, bool reserve);

}  // namespace tp
