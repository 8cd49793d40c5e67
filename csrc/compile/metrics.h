// Counters users and tests read through tp.compiler.metrics.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <string>

namespace tp::compile {

struct Metrics {
  std::atomic<int64_t> generated_kernel_count{0};  // kernels in regions Stax generated
  std::atomic<int64_t> compile_count{0};           // regions compiled by Stax
  std::atomic<int64_t> cache_hits{0};              // disk cache: artifact found, compiler not run
  std::atomic<int64_t> cache_misses{0};            // disk cache: compiler ran
  std::atomic<int64_t> fallback_count{0};          // regions Stax could not generate, run eagerly
  std::atomic<int64_t> recompiles{0};              // specialization misses after the first version
  std::atomic<int64_t> first_level_hits{0};        // same tensor objects and versions as last call
  std::atomic<int64_t> specialization_hits{0};     // found by specialization key
  std::atomic<int64_t> captures{0};                // functions traced into graphs
  std::atomic<int64_t> gate_replays{0};            // data-gate guard subgraphs evaluated to choose a version
  std::atomic<int64_t> aot_regions{0};             // training regions split into forward + backward (AOT layer)
  std::atomic<int64_t> saved_bytes{0};             // activation bytes those forwards save for their backwards
  // Mutated inputs whose final value the region wrote into the input's own
  // memory (in-place reuse): the call's write-back copy was skipped.
  std::atomic<int64_t> inplace_writes{0};
  void reset();
};

Metrics& metrics();
// Saved activation bytes per training region ("'f'", "'f' #2"), since the last reset.
void record_saved_bytes(const std::string& region, int64_t bytes);
std::map<std::string, int64_t> saved_bytes_per_region();
// Clears metrics and every in-process cache (specialization caches, loaded
// artifacts); the next call of any compiled function recompiles (the disk cache
// still answers).
void reset();
// Bumped by reset(); compiled functions drop their caches when it changes.
uint64_t cache_epoch();

}  // namespace tp::compile
