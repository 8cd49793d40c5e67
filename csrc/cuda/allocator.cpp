#include "cuda/allocator.h"

#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "cuda/stream.h"

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
  CUstream stream = nullptr;      // the stream its segment belongs to
  std::vector<CUstream> uses;     // other streams it was used on (record_stream)
};

// Free blocks ordered by (stream, size, address): lower_bound finds the best
// fit among the blocks of one stream.
struct BySize {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return a->stream < b->stream;
    return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
  }
};

}  // namespace

class DevicePool {
 public:
  DevicePool(int index, bool is_private) : index_(index), private_(is_private) {}
  ~DevicePool() {
    // Only private pools die (with their graph and the last storage cut from
    // them); their blocks are all free and merged back into whole segments.
    if (capturing()) return;  // cuMemFree would break the capture: leak instead
    if (!driver().initialized) return;
    activate(index_);
    driver().cuCtxSynchronize();  // a replay may still be reading the memory
    for (auto* pool : {&small_free_, &large_free_}) {
      for (Block* b : *pool) delete b;
      pool->clear();
    }
    for (const auto& [ptr, size] : segments_) driver().cuMemFree(ptr);
  }

  Block* allocate(size_t nbytes, CUstream stream) {
    const size_t size = nbytes == 0 ? kRound : (nbytes + kRound - 1) / kRound * kRound;
    const bool small = size <= kSmallSize;
    std::lock_guard<std::mutex> lock(mu_);
    if (!pending_.empty()) process_pending();
    auto& pool = small ? small_free_ : large_free_;
    Block key;
    key.size = size;
    key.stream = stream;
    auto it = pool.lower_bound(&key);
    Block* b = nullptr;
    if (it != pool.end() && (*it)->stream == stream) {
      b = *it;
      pool.erase(it);
    } else {
      b = new_segment(small ? kSmallSegment : (size + kLargeRound - 1) / kLargeRound * kLargeRound, small, stream);
    }
    const size_t rest = b->size - size;
    if (rest >= (small ? kRound : kMinLargeSplit)) {  // split: the tail stays free
      auto* tail = new Block{b->ptr + size, rest, small, false, b, b->next, stream, {}};
      if (b->next) b->next->prev = tail;
      b->next = tail;
      b->size = size;
      pool.insert(tail);
    }
    b->in_use = true;
    active_[b->ptr] = b;
    stats_.allocated += b->size;
    if (stats_.allocated > stats_.max_allocated) stats_.max_allocated = stats_.allocated;
    return b;
  }

  void free(Block* b) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!b->uses.empty()) {
      // Used on other streams: reusable once each has passed this point.
      // The release may run on any thread, with any context current: the
      // events and the legacy stream (handle 0) must be this device's.
      try {
        activate(index_);
      } catch (const Error&) {  // never throws out of a storage release
      }
      Pending p{b, {}};
      for (CUstream s : b->uses) {
        CUevent e = take_event();
        if (driver().cuEventRecord(e, s) != 0) {  // cannot order: wait on the host instead
          driver().cuCtxSynchronize();
          events_.push_back(e);
          continue;
        }
        p.events.push_back(e);
      }
      b->uses.clear();
      pending_.push_back(std::move(p));
      return;
    }
    release(b);
  }

  void record_stream(CUdeviceptr ptr, CUstream s) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(ptr);
    if (it == active_.end()) return;  // not a block of this pool (a view of foreign memory)
    Block* b = it->second;
    if (s == b->stream) return;
    for (CUstream u : b->uses)
      if (u == s) return;
    b->uses.push_back(s);
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    process_pending();
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
  int index() const { return index_; }
  bool is_private() const { return private_; }

 private:
  struct Pending {
    Block* block;
    std::vector<CUevent> events;
  };

  CUevent take_event() {
    if (!events_.empty()) {
      CUevent e = events_.back();
      events_.pop_back();
      return e;
    }
    activate(index_);
    CUevent e = nullptr;
    check(driver().cuEventCreate(&e, kEventDisableTiming), "cuEventCreate");
    return e;
  }

  // Frees the blocks whose other-stream uses have all completed.
  void process_pending() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      bool done = true;
      for (CUevent e : it->events) done = done && driver().cuEventQuery(e) == 0;
      if (!done) {
        ++it;
        continue;
      }
      for (CUevent e : it->events) events_.push_back(e);
      release(it->block);
      it = pending_.erase(it);
    }
  }

  void release(Block* b) {
    auto& pool = b->small ? small_free_ : large_free_;
    active_.erase(b->ptr);
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

  Block* new_segment(size_t size, bool small, CUstream stream) {
    activate(index_);
    CUdeviceptr ptr = 0;
    CUresult r = driver().cuMemAlloc(&ptr, size);
    if (r != 0 && !private_) {  // out of memory: give the cached segments back and try once more
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
    return new Block{ptr, size, small, false, nullptr, nullptr, stream, {}};
  }

  // A free block without neighbours spans a whole segment.
  void release_free_segments() {
    if (capturing()) return;  // cuMemFree during a capture would invalidate it
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

  friend size_t pool_reserved(const DevicePool& pool);
  int index_;
  bool private_;
  std::mutex mu_;
  std::set<Block*, BySize> small_free_, large_free_;
  std::map<CUdeviceptr, size_t> segments_;
  std::unordered_map<CUdeviceptr, Block*> active_;  // blocks handed out, by address (record_stream)
  std::vector<Pending> pending_;
  std::vector<CUevent> events_;  // spare events for pending frees
  MemoryStats stats_;
};

namespace {

DevicePool& cache(int index) {
  static std::mutex mu;
  static auto* caches = new std::vector<DevicePool*>();  // leaked: blocks may be freed at exit
  std::lock_guard<std::mutex> lock(mu);
  if (caches->empty()) caches->assign(static_cast<size_t>(device_count()), nullptr);
  TP_CHECK(index >= 0 && index < static_cast<int>(caches->size()), Error, "invalid CUDA device ", index);
  auto& c = (*caches)[static_cast<size_t>(index)];
  if (!c) c = new DevicePool(index, false);
  return *c;
}

thread_local std::shared_ptr<DevicePool> t_capture_pool;

Device cuda_dev(int index) {
  Device dev;
  dev.kind = Device::Kind::CUDA;
  dev.index = static_cast<int16_t>(index);
  return dev;
}

}  // namespace

std::shared_ptr<StorageImpl> allocate_storage(size_t nbytes, int index) {
  activate(index);
  const CUstream stream = current_stream(index);
  if (t_capture_pool && t_capture_pool->index() == index) {
    std::shared_ptr<DevicePool> p = t_capture_pool;
    Block* b = p->allocate(nbytes, stream);
    // The storage keeps the pool (and so the graph's memory) alive.
    return StorageImpl::wrap(reinterpret_cast<void*>(b->ptr), nbytes, [p, b] { p->free(b); }, cuda_dev(index));
  }
  DevicePool& c = cache(index);
  Block* b = c.allocate(nbytes, stream);
  return StorageImpl::wrap(reinterpret_cast<void*>(b->ptr), nbytes, [&c, b] { c.free(b); }, cuda_dev(index));
}

void record_stream(const StorageImpl& storage, CUstream s) {
  if (storage.device().kind != Device::Kind::CUDA) return;
  cache(storage.device().index).record_stream(reinterpret_cast<CUdeviceptr>(storage.data()), s);
}

std::shared_ptr<DevicePool> new_private_pool(int index) { return std::make_shared<DevicePool>(index, true); }
void set_capture_pool(std::shared_ptr<DevicePool> pool) { t_capture_pool = std::move(pool); }
size_t pool_reserved(const DevicePool& pool) {
  size_t n = 0;
  for (const auto& kv : pool.segments_) n += kv.second;
  return n;
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
