#include "cuda/allocator.h"

#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "core/error.h"
#include "cuda/driver.h"

namespace tp::cuda {
namespace {

constexpr size_t kRound = 512;
constexpr size_t kSmallSize = 1 << 20;        // requests up to 1 MiB come from the small pool
constexpr size_t kSmallSegment = 2 << 20;     // small-pool segments are 2 MiB
constexpr size_t kLargeRound = 2 << 20;       // large segments are multiples of 2 MiB
constexpr size_t kMinLargeSplit = 1 << 20;    // a large block keeps a remainder of at least 1 MiB

struct Block {
  CUdeviceptr ptr = 0;
  size_t size = 0;
  bool small = false;
  bool in_use = false;
  Block* prev = nullptr;  // neighbours inside the same cuMemAlloc segment
  Block* next = nullptr;
};

struct BySize {
  bool operator()(const Block* a, const Block* b) const {
    return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
  }
};

class DeviceCache {
 public:
  explicit DeviceCache(int index) : index_(index) {}

  Block* allocate(size_t nbytes) {
    const size_t size = nbytes == 0 ? kRound : (nbytes + kRound - 1) / kRound * kRound;
    const bool small = size <= kSmallSize;
    std::lock_guard<std::mutex> lock(mu_);
    auto& pool = small ? small_free_ : large_free_;
    Block key;
    key.size = size;
    auto it = pool.lower_bound(&key);
    Block* b = nullptr;
    if (it != pool.end()) {
      b = *it;
      pool.erase(it);
    } else {
      b = new_segment(small ? kSmallSegment : (size + kLargeRound - 1) / kLargeRound * kLargeRound, small);
    }
    const size_t rest = b->size - size;
    if (rest >= (small ? kRound : kMinLargeSplit)) {  // split: the tail stays free
      auto* tail = new Block{b->ptr + size, rest, small, false, b, b->next};
      if (b->next) b->next->prev = tail;
      b->next = tail;
      b->size = size;
      pool.insert(tail);
    }
    b->in_use = true;
    stats_.allocated += b->size;
    if (stats_.allocated > stats_.max_allocated) stats_.max_allocated = stats_.allocated;
    return b;
  }

  void free(Block* b) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& pool = b->small ? small_free_ : large_free_;
    stats_.allocated -= b->size;
    b->in_use = false;
    if (b->prev && !b->prev->in_use) {  // merge into the free block before
      Block* p = b->prev;
      pool.erase(p);
      p->size += b->size;
      p->next = b->next;
      if (b->next) b->next->prev = p;
      delete b;
      b = p;
    }
    if (b->next && !b->next->in_use) {  // absorb the free block after
      Block* n = b->next;
      pool.erase(n);
      b->size += n->size;
      b->next = n->next;
      if (n->next) n->next->prev = b;
      delete n;
    }
    pool.insert(b);
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    release_free_segments();
  }

  MemoryStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.max_allocated = stats_.allocated;
  }

 private:
  Block* new_segment(size_t size, bool small) {
    activate(index_);
    CUdeviceptr ptr = 0;
    CUresult r = driver().cuMemAlloc(&ptr, size);
    if (r != 0) {  // out of memory: give the cached segments back and try once more
      release_free_segments();
      r = driver().cuMemAlloc(&ptr, size);
    }
    if (r != 0) {
      const char* msg = nullptr;
      driver().cuGetErrorString(r, &msg);
      throw Error(str("CUDA out of memory: tried to allocate ", size, " bytes on cuda:", index_, " (",
                      stats_.allocated, " bytes allocated, ", stats_.reserved, " reserved): ", msg ? msg : "?"));
    }
    stats_.reserved += size;
    segments_[ptr] = size;
    return new Block{ptr, size, small, false, nullptr, nullptr};
  }

  // A free block without neighbours spans a whole segment.
  void release_free_segments() {
    for (auto* pool : {&small_free_, &large_free_}) {
      for (auto it = pool->begin(); it != pool->end();) {
        Block* b = *it;
        if (!b->prev && !b->next) {
          activate(index_);
          check(driver().cuMemFree(b->ptr), "cuMemFree");
          stats_.reserved -= b->size;
          segments_.erase(b->ptr);
          delete b;
          it = pool->erase(it);
        } else {
          ++it;
        }
      }
    }
  }

  int index_;
  std::mutex mu_;
  std::set<Block*, BySize> small_free_, large_free_;
  std::map<CUdeviceptr, size_t> segments_;
  MemoryStats stats_;
};

DeviceCache& cache(int index) {
  static std::mutex mu;
  static auto* caches = new std::vector<DeviceCache*>();  // leaked: blocks may be freed at exit
  std::lock_guard<std::mutex> lock(mu);
  if (caches->empty()) caches->assign(static_cast<size_t>(device_count()), nullptr);
  TP_CHECK(index >= 0 && index < static_cast<int>(caches->size()), Error, "invalid CUDA device ", index);
  auto& c = (*caches)[static_cast<size_t>(index)];
  if (!c) c = new DeviceCache(index);
  return *c;
}

}  // namespace

std::shared_ptr<StorageImpl> allocate_storage(size_t nbytes, int index) {
  activate(index);
  DeviceCache& c = cache(index);
  Block* b = c.allocate(nbytes);
  Device dev;
  dev.kind = Device::Kind::CUDA;
  dev.index = static_cast<int16_t>(index);
  return StorageImpl::wrap(reinterpret_cast<void*>(b->ptr), nbytes, [&c, b] { c.free(b); }, dev);
}

MemoryStats memory_stats(int index) {
  if (!is_available()) return {};
  return cache(index).stats();
}
void reset_peak_memory_stats(int index) {
  if (is_available()) cache(index).reset_peak();
}
void empty_cache(int index) {
  if (is_available()) cache(index).empty_cache();
}

}  // namespace tp::cuda
