#include "compile/metrics.h"

#include <mutex>

#include "stax/runtime/code_cache.h"

namespace tp::compile {
namespace {
std::atomic<uint64_t> g_epoch{0};
std::mutex g_saved_mutex;
std::map<std::string, int64_t> g_saved;
}  // namespace

void record_saved_bytes(const std::string& region, int64_t bytes) {
  std::lock_guard<std::mutex> lock(g_saved_mutex);
  g_saved[region] = bytes;
}

std::map<std::string, int64_t> saved_bytes_per_region() {
  std::lock_guard<std::mutex> lock(g_saved_mutex);
  return g_saved;
}

void Metrics::reset() {
  for (auto* c : {&generated_kernel_count, &compile_count, &cache_hits, &cache_misses, &fallback_count, &recompiles,
                  &first_level_hits, &specialization_hits, &captures, &gate_replays, &aot_regions, &saved_bytes, &inplace_writes})
    c->store(0);
  std::lock_guard<std::mutex> lock(g_saved_mutex);
  g_saved.clear();
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
