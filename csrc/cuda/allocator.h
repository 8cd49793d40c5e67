// The caching allocator for device memory. cuMemAlloc/cuMemFree synchronize
// the device and cost tens of microseconds, so freed blocks are kept and
// reused. Requests are rounded to 512 bytes; small ones (<= 1 MiB) are cut
// from 2 MiB segments, large ones from segments rounded to 2 MiB. A free
// block is found best-fit (size-ordered set per pool), split when the rest is
// worth keeping, and merged with free neighbours of its segment when freed.
//
// Stream-ordered: a segment belongs to the stream current when it was
// obtained, and its blocks are handed out only to allocations on that
// stream. A block freed on the host is reusable at once by its own stream
// (the next use is queued after every earlier use there). A tensor used on
// another stream is announced with record_stream: its block then waits, when
// freed, until an event recorded on each such stream has completed.
//
// Graph pools: while a CUDA graph is captured (cuda/graph.h), the capturing
// thread's allocations come from a private pool owned by the graph, so the
// addresses its kernels were recorded with are never handed to anyone else.
#pragma once
#include <cstddef>
#include <memory>

#include "core/storage.h"
#include "cuda/driver.h"

namespace tp::cuda {

struct MemoryStats {
  size_t allocated = 0;      // bytes in blocks handed out (rounded sizes)
  size_t max_allocated = 0;  // peak of `allocated` since start or reset
  size_t reserved = 0;       // bytes in segments obtained from cuMemAlloc
};

// A storage of `nbytes` on device `index`, for the current stream; the block
// returns to the cache when the last tensor viewing it dies.
std::shared_ptr<StorageImpl> allocate_storage(size_t nbytes, int index);
MemoryStats memory_stats(int index);
void reset_peak_memory_stats(int index);
// Frees every completely unused segment back to the driver.
void empty_cache(int index);
// The storage (made by allocate_storage) is also used on stream `s`: its block
// is not reused before the work queued on `s` up to its free has completed.
void record_stream(const StorageImpl& storage, CUstream s);

// A private memory pool (one per captured graph). Its segments are freed when
// the pool and every storage cut from it are gone.
class DevicePool;
std::shared_ptr<DevicePool> new_private_pool(int index);
// Routes this thread's allocations on `pool`'s device to `pool` (nullptr: back
// to the shared cache).
void set_capture_pool(std::shared_ptr<DevicePool> pool);
// Bytes held in segments by a private pool.
size_t pool_reserved(const DevicePool& pool);

}  // namespace tp::cuda
