// Random generators behind rand/randn/randint/dropout: Philox4x32-10 (Salmon
// et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), a
// counter-based generator. Element blocks are a pure function of (key,
// counter), so kernels fill tensors in parallel with results independent of
// the thread count, and a call only has to reserve a range of counters.
//
// Generators live in a table and are named by an int64 id; operators receive
// the id as the attribute "generator" (absent or None = the default generator,
// id 0), so a call stays plain data for the tracer and the graph printer.
#pragma once
#include <cstdint>

#include "ops/attrs.h"

namespace tp {

// Philox4x32-10 of a 64-bit counter under a 64-bit key: four 32-bit words.
inline void philox4x32(uint64_t counter, uint64_t key, uint32_t out[4]) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{0xD2511F53u} * c0;
    const uint64_t p1 = uint64_t{0xCD9E8D57u} * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

constexpr int64_t kDefaultGenerator = 0;

// The whole state: the seed (the Philox key) and the next unused counter.
struct GeneratorState {
  uint64_t seed;
  uint64_t offset;
};

// A fresh generator seeded with the default seed; returns its id.
int64_t generator_create();
// A fresh generator at the given state (a scratch generator: not counted by generator_epoch).
int64_t generator_create(GeneratorState initial);
// Counts reseeds and set_state calls on any generator: a capture refuses random
// operators when the function reseeds (compiled code draws at call time and
// cannot replay a reseed).
uint64_t generator_epoch();
// Forgets a generator (its Python object died). The default one stays.
void generator_destroy(int64_t id);
// Every function below throws ValueError for an unknown id.
void generator_manual_seed(int64_t id, uint64_t seed);
uint64_t generator_seed(int64_t id);  // reseeds non-deterministically, returns the seed
uint64_t generator_initial_seed(int64_t id);
GeneratorState generator_get_state(int64_t id);
void generator_set_state(int64_t id, GeneratorState s);

// Reserves `n` consecutive counters; returns the key and the first counter.
struct PhiloxRange {
  uint64_t key;
  uint64_t first;
};
PhiloxRange generator_reserve(int64_t id, uint64_t n);
// The generator an operator call names (attribute "generator"; absent = default).
int64_t generator_attr(const Attrs& attrs);

// Sees every reservation made on this thread while installed (the tracer learns
// which generator a random operator drew from, where and how many counters, by
// running the operator: the count is then eager's by construction).
class ReservationObserver {
 public:
  virtual ~ReservationObserver() = default;
  virtual void reserved(int64_t id, PhiloxRange range, uint64_t n) = 0;
};
class ScopedReservationObserver {
 public:
  explicit ScopedReservationObserver(ReservationObserver* o);
  ~ScopedReservationObserver();
  ScopedReservationObserver(const ScopedReservationObserver&) = delete;
  ScopedReservationObserver& operator=(const ScopedReservationObserver&) = delete;

 private:
  ReservationObserver* prev_;
};

// The default generator (tp.manual_seed, and callers that predate the table).
inline void generator_manual_seed(uint64_t seed) { generator_manual_seed(kDefaultGenerator, seed); }
inline PhiloxRange generator_reserve(uint64_t n) { return generator_reserve(kDefaultGenerator, n); }

// Fills a contiguous float32/float64 tensor with uniform [0, 1) or standard
// normal samples from generator `gen` (ops/factory_ops.cpp; rand/randn and the
// in-place random ops share it, so a seed gives the same numbers through both).
class Tensor;
void random_fill(const Tensor& out, int64_t gen, bool normal);

// Uniform numbers from Philox words.
inline float unit_float(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }  // [0, 1)
inline double unit_double(uint32_t hi, uint32_t lo) {                                            // [0, 1)
  return static_cast<double>(((uint64_t{hi} << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace tp
