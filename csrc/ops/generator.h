// The global random generator behind rand/randn: Philox4x32-10 (Salmon et
// al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), a counter-based
// generator. Element blocks are a pure function of (seed, counter), so kernels
// fill tensors in parallel with results independent of the thread count, and
// a call only has to reserve a range of counters.
#pragma once
#include <cstdint>

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

// Resets the global generator (tp.manual_seed).
void generator_manual_seed(uint64_t seed);
// Reserves `n` consecutive counters; returns the key and the first counter.
struct PhiloxRange {
  uint64_t key;
  uint64_t first;
};
PhiloxRange generator_reserve(uint64_t n);

}  // namespace tp
