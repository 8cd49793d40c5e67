#include "core/storage.h"

#include <cstdlib>
#include <new>

#include <sys/mman.h>

#include "core/error.h"

namespace tp {

std::shared_ptr<StorageImpl> StorageImpl::allocate(size_t nbytes, Device device) {
  auto s = std::shared_ptr<StorageImpl>(new StorageImpl());
  // 64-byte alignment: one cache line, and full AVX-512 vectors never split a line.
  // Large blocks are 2 MiB aligned and marked for transparent huge pages: a
  // fresh 64 MiB output otherwise costs ~16k page faults (about 40 ms here),
  // more than the kernel that writes it.
  constexpr size_t kHuge = size_t(2) << 20;
  size_t align = nbytes >= kHuge ? kHuge : 64;
  size_t rounded = (nbytes + align - 1) / align * align;
  if (rounded == 0) rounded = 64;
  s->data_ = std::aligned_alloc(align, rounded);
#ifdef MADV_HUGEPAGE
  if (s->data_ && align == kHuge) madvise(s->data_, rounded, MADV_HUGEPAGE);
#endif
  if (!s->data_) throw Error(str("out of memory allocating ", nbytes, " bytes"));
  s->nbytes_ = nbytes;
  s->device_ = device;
  return s;
}

std::shared_ptr<StorageImpl> StorageImpl::wrap(void* data, size_t nbytes, std::function<void()> release,
                                               Device device) {
  auto s = std::shared_ptr<StorageImpl>(new StorageImpl());
  s->data_ = data;
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->release_ = std::move(release);
  if (!s->release_) s->release_ = [] {};
  return s;
}

StorageImpl::~StorageImpl() {
  if (release_) {
    release_();
  } else {
    std::free(data_);
  }
}

}  // namespace tp
