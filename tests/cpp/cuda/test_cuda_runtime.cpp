// The CUDA layer on any machine: without a GPU it reports none and raises a
// clear error; with one, the caching allocator reuses and splits blocks.
#include <gtest/gtest.h>

#include "cuda/allocator.h"
#include "cuda/copy.h"
#include "cuda/driver.h"
#include "cuda/kernels.h"

namespace tp::cuda {

TEST(CudaRuntime, DeviceCountMatchesAvailability) {
  EXPECT_EQ(is_available(), device_count() > 0);
  if (!is_available()) EXPECT_FALSE(driver().why_unavailable.empty());
}

TEST(CudaRuntime, NoGpuRaisesClearError) {
  if (is_available()) GTEST_SKIP() << "a GPU is present";
  try {
    empty({3}, DType::Float32, 0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA is not available"), std::string::npos) << e.what();
  }
  EXPECT_EQ(memory_stats(0).reserved, 0u);
}

TEST(CudaRuntime, KernelSourcesNameTheirKernels) {
  auto sources = all_kernel_sources();
  ASSERT_FALSE(sources.empty());
  for (auto& [name, src] : sources) EXPECT_NE(src.find("void " + name + "("), std::string::npos) << name;
}

TEST(CudaAllocator, ReusesAndSplitsBlocks) {
  if (!is_available()) GTEST_SKIP() << "no GPU";
  empty_cache(0);
  const size_t base = memory_stats(0).allocated;
  void* first = nullptr;
  {
    Tensor a = empty({1000}, DType::Float32, 0);  // 4000 bytes -> 4096 in a 2 MiB segment
    first = a.data();
    EXPECT_EQ(memory_stats(0).allocated - base, 4096u);
    Tensor b = empty({1000}, DType::Float32, 0);  // split from the same segment
    EXPECT_EQ(static_cast<char*>(b.data()) - static_cast<char*>(first), 4096);
  }
  EXPECT_EQ(memory_stats(0).allocated, base);
  Tensor c = empty({1000}, DType::Float32, 0);
  EXPECT_EQ(c.data(), first);  // the merged free block is reused
}

}  // namespace tp::cuda
