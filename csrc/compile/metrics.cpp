#include "compile/metrics.h"

#include "stax/runtime/code_cache.h"

namespace tp::compile {
namespace {
std::atomic<uint64_t> g_epoch{0};
}

void Metrics::reset() {
  for (auto* c : {&generated_kernel_count, &compile_count, &cache_hits, &cache_misses, &fallback_count, &recompiles,
                  &first_level_hits, &specialization_hits, &captures, &gate_replays})
    c->store(0);
}

Metrics& metrics() {
  static Metrics m;
  return m;
}

void reset() {
  metrics().reset();
  g_epoch.fetch_add(1);
  stax::runtime::CodeCache::instance().reset_for_testing();
}

uint64_t cache_epoch() { return g_epoch.load(std::memory_order_relaxed); }

}  // namespace tp::compile
