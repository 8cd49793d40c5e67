#include "ops/generator.h"

#include <mutex>

namespace tp {
namespace {
struct GeneratorState {
  std::mutex mu;
  uint64_t seed = 67280421310721ull;  // PyTorch's default seed
  uint64_t next = 0;
};
GeneratorState& state() {
  static GeneratorState s;
  return s;
}
}  // namespace

void generator_manual_seed(uint64_t seed) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.seed = seed;
  s.next = 0;
}

PhiloxRange generator_reserve(uint64_t n) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  PhiloxRange r{s.seed, s.next};
  s.next += n;
  return r;
}

}  // namespace tp
