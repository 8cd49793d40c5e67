// Functional random operators: the random draws of a compiled region, with their
// randomness an explicit input (ops/random_functional_ops.cpp).
//
// `philox_random(state, size, dtype, distribution, offset[, low, high])` draws
// what the eager operator of `distribution` ("uniform" = rand, "normal" =
// randn, "randint" = randint.low, "randperm" = randperm with n = size[0])
// draws from a generator whose Philox key is state[0] and whose next counter
// is state[1] + offset. `state` is an int64 tensor [seed, first counter]: the
// region's generator state, reserved once per call for all of the region's
// draws (reserve_philox_state); `offset` places this draw inside that range
// exactly where eager's sequence of calls would have put it. The operator is a
// pure function of its input and attributes (no generator is touched), so
// graph passes may treat it as any other operator.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace tp {

// Reserves `counters` counters from generator `gen`, as eager's random calls of
// one region would, and returns the region's state input [seed, first counter].
Tensor reserve_philox_state(int64_t gen, uint64_t counters);
// The state input for the generator's current position, without reserving
// (example inputs for a backend that compiles ahead of the first call).
Tensor peek_philox_state(int64_t gen);

}  // namespace tp
