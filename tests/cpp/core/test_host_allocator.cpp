#include <gtest/gtest.h>

#include <cstdint>

#include "core/host_allocator.h"
#include "core/tensor.h"

namespace tp {
namespace {

TEST(HostAllocator, LargeBlocksAreAlignedAndReused) {
  host_empty_cache();
  size_t n = size_t(5) << 20;
  void* a = host_allocate(n);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % (size_t(2) << 20), 0u);
  host_free(a, n);
  EXPECT_GE(host_cached_bytes(), n);
  void* b = host_allocate(n);
  EXPECT_EQ(a, b);  // the cached block comes back
  EXPECT_EQ(host_cached_bytes(), 0u);
  host_free(b, n);
  host_empty_cache();
  EXPECT_EQ(host_cached_bytes(), 0u);
}

TEST(HostAllocator, SmallBlocksAreCacheLineAlignedAndNotCached) {
  host_empty_cache();
  void* a = host_allocate(100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  host_free(a, 100);
  EXPECT_EQ(host_cached_bytes(), 0u);
}

TEST(HostAllocator, TensorStorageGoesThroughTheCache) {
  host_empty_cache();
  void* first;
  {
    Tensor t = Tensor::empty({1024, 1024}, DType::Float32);  // 4 MiB
    first = t.data();
  }
  Tensor u = Tensor::empty({1024, 1024}, DType::Float32);
  EXPECT_EQ(u.data(), first);
}

}  // namespace
}  // namespace tp
