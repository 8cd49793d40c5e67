#include "core/host_allocator.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "core/error.h"

namespace tp {
namespace {

constexpr size_t kHuge = size_t(2) << 20;
// At most this much memory is held for reuse; beyond it blocks go back to the system.
constexpr size_t kCacheLimit = size_t(1) << 30;

struct Cache {
  std::mutex mutex;
  std::map<size_t, std::vector<void*>> free_blocks;  // rounded size -> blocks
  size_t bytes = 0;
};
Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: tensors may be freed during exit
  return *c;
}

std::atomic<size_t> g_live{0}, g_peak{0};

void note_allocated(size_t size) {
  const size_t now = g_live.fetch_add(size, std::memory_order_relaxed) + size;
  size_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

size_t rounded_size(size_t nbytes) {
  size_t align = nbytes >= kHuge ? kHuge : 64;
  size_t r = (nbytes + align - 1) / align * align;
  return r == 0 ? 64 : r;
}

}  // namespace

void* host_allocate(size_t nbytes) {
  size_t size = rounded_size(nbytes);
  if (size >= kHuge) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.free_blocks.find(size);
    if (it != c.free_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.bytes -= size;
      note_allocated(size);
      return p;
    }
  }
  void* p = std::aligned_alloc(size >= kHuge ? kHuge : 64, size);
  if (!p) throw Error(str("out of memory allocating ", nbytes, " bytes"));
#ifdef MADV_HUGEPAGE
  if (size >= kHuge) madvise(p, size, MADV_HUGEPAGE);
#endif
  note_allocated(size);
  return p;
}

void host_free(void* p, size_t nbytes) {
  if (!p) return;
  size_t size = rounded_size(nbytes);
  g_live.fetch_sub(size, std::memory_order_relaxed);
  if (size >= kHuge) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.bytes + size <= kCacheLimit) {
      c.free_blocks[size].push_back(p);
      c.bytes += size;
      return;
    }
  }
  std::free(p);
}

void host_empty_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (auto& [size, blocks] : c.free_blocks)
    for (void* p : blocks) std::free(p);
  c.free_blocks.clear();
  c.bytes = 0;
}

size_t host_cached_bytes() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.bytes;
}

size_t host_live_bytes() { return g_live.load(std::memory_order_relaxed); }
size_t host_peak_bytes() { return g_peak.load(std::memory_order_relaxed); }
void reset_host_peak() { g_peak.store(g_live.load(std::memory_order_relaxed), std::memory_order_relaxed); }

}  // namespace tp
