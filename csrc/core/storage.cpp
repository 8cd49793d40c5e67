#include "core/storage.h"

#include <cstdlib>
#include <new>

#include "core/error.h"
#include "core/host_allocator.h"

namespace tp {

std::shared_ptr<StorageImpl> StorageImpl::allocate(size_t nbytes, Device device) {
  auto s = std::shared_ptr<StorageImpl>(new StorageImpl());
  s->data_ = host_allocate(nbytes);
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
    host_free(data_, nbytes_);
  }
}

}  // namespace tp
