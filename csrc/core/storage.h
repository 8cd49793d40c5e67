// A block of memory shared by a tensor and all of its views. It counts every
// write to the memory (version(): the compiled front end's first-level entry
// relies on it, whatever tensor the write went through) and holds the autograd
// version counter shared by the tensors that have none of their own (see
// TensorImpl::own_counter).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/device.h"

namespace tp {

// The counter autograd checks saved tensors against (Tensor._version). A tensor
// and its views and detach()es share one; `x.data` starts its own (PyTorch's
// contract: writes through `.data` are invisible to autograd).
struct VersionCounter {
  explicit VersionCounter(uint64_t v = 0) : value(v) {}
  std::atomic<uint64_t> value;
};

class StorageImpl {
 public:
  // Owns freshly allocated, 64-byte aligned memory.
  static std::shared_ptr<StorageImpl> allocate(size_t nbytes, Device device = Device::cpu());
  // Wraps memory owned elsewhere (NumPy, DLPack); `release` runs when the last view dies.
  static std::shared_ptr<StorageImpl> wrap(void* data, size_t nbytes, std::function<void()> release,
                                           Device device = Device::cpu());
  ~StorageImpl();
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }
  VersionCounter& shared_counter() { return shared_counter_; }

 private:
  StorageImpl() = default;
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_ = Device::cpu();
  std::function<void()> release_;  // empty: we own data_ and free it
  std::atomic<uint64_t> version_{0};
  VersionCounter shared_counter_;
};

}  // namespace tp
