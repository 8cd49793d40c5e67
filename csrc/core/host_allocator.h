// CPU memory for tensors. Blocks of 2 MiB and more are 2 MiB aligned, marked
// for transparent huge pages, and kept in a size-keyed cache when freed: a
// fresh 64 MiB block costs thousands of page faults on first touch (tens of
// milliseconds here), more than the kernel that writes it, and a training or
// benchmark loop asks for the same sizes again and again.
#pragma once
#include <cstddef>

namespace tp {

void* host_allocate(size_t nbytes);
void host_free(void* p, size_t nbytes);
// Returns every cached block to the system (tests, memory pressure).
void host_empty_cache();
size_t host_cached_bytes();
// Bytes of live tensor memory (rounded block sizes) and their peak since the
// last reset_host_peak(): how much memory a step really holds at once.
size_t host_live_bytes();
size_t host_peak_bytes();
void reset_host_peak();

}  // namespace tp
