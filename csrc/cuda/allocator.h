// The caching allocator for device memory. cuMemAlloc/cuMemFree synchronize
// the device and cost tens of microseconds, so freed blocks are kept and
// reused. Requests are rounded to 512 bytes; small ones (<= 1 MiB) are cut
// from 2 MiB segments, large ones from segments rounded to 2 MiB. A free
// block is found best-fit (size-ordered set per pool), split when the rest is
// worth keeping, and merged with free neighbours of its segment when freed.
//
// Stream-ordered: every kernel and copy runs on the device's legacy default
// stream, so a block freed on the host may be handed out again at once — the
// next use is queued after every earlier use of it.
#pragma once
#include <cstddef>
#include <memory>

#include "core/storage.h"

namespace tp::cuda {

struct MemoryStats {
  size_t allocated = 0;      // bytes in blocks handed out (rounded sizes)
  size_t max_allocated = 0;  // peak of `allocated` since start or reset
  size_t reserved = 0;       // bytes in segments obtained from cuMemAlloc
};

// A storage of `nbytes` on device `index`; the block returns to the cache when
// the last tensor viewing it dies.
std::shared_ptr<StorageImpl> allocate_storage(size_t nbytes, int index);
MemoryStats memory_stats(int index);
void reset_peak_memory_stats(int index);
// Frees every completely unused segment back to the driver.
void empty_cache(int index);

}  // namespace tp::cuda
