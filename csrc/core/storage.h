// A block of memory shared by a tensor and all of its views. The version
// counter lives here because every view of the same memory must see an
// in-place write (the compiled front end's first-level entry relies on it).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/device.h"

namespace tp {

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

 private:
  StorageImpl() = default;
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_ = Device::cpu();
  std::function<void()> release_;  // empty: we own data_ and free it
  std::atomic<uint64_t> version_{0};
};

}  // namespace tp
