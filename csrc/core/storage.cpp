#include "core/storage.h"

#include <cstdlib>
#include <new>

#include "core/error.h"

namespace tp {

std::shared_ptr<StorageImpl> StorageImpl::allocate(size_t nbytes, Device device) {
  auto s = std::shared_ptr<StorageImpl>(new StorageImpl());
  // 64-byte alignment: one cache line, and full AVX-512 vectors never split a line.
  size_t rounded = (nbytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  s->data_ = std::aligned_alloc(64, rounded);
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
