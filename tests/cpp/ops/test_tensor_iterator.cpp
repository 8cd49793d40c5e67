#include "ops/tensor_iterator.h"

#include "test_util.h"

namespace tp {
namespace {

TEST(TensorIterator, CoalescesContiguousOperands) {
  Tensor out = Tensor::empty({4, 5, 6}, DType::Float32), a = Tensor::empty({4, 5, 6}, DType::Float32);
  TensorIterator it({out, a});
  EXPECT_EQ(it.ndim(), 1);
  EXPECT_EQ(it.shape()[0], 120);
  EXPECT_EQ(it.stride(1, 0), 4);
}

TEST(TensorIterator, BroadcastDimsGetZeroStride) {
  Tensor out = Tensor::empty({4, 5}, DType::Float64), row = Tensor::empty({5}, DType::Float64);
  TensorIterator it({out, row});
  ASSERT_EQ(it.ndim(), 2);
  EXPECT_EQ(it.stride(1, 0), 0);
  EXPECT_EQ(it.stride(1, 1), 8);
  Tensor col = Tensor::empty({4, 1}, DType::Float64);
  TensorIterator it2({out, col});
  EXPECT_EQ(it2.stride(1, 1), 0);
}

TEST(TensorIterator, ReordersByOutputStrides) {
  Tensor base = Tensor::empty({5, 4}, DType::Float32);
  Tensor out = ops::transpose(base, 0, 1);  // [4, 5] strides (1, 4)
  Tensor a = Tensor::empty({4, 5}, DType::Float32);
  TensorIterator it({out, a});
  ASSERT_EQ(it.ndim(), 2);
  EXPECT_EQ(it.stride(0, 1), 4);  // innermost: the output's unit stride
  EXPECT_EQ(it.stride(1, 1), 20);
}

TEST(TensorIterator, VisitsEveryElementOnceInRanges) {
  Tensor out = Tensor::empty({3, 7, 5}, DType::Int64);
  Tensor sl = ops::slice(out, 1, 0, 7, 2);  // non-coalescable
  TensorIterator it({sl});
  std::vector<int> seen(out.numel(), 0);
  int64_t* base = out.data_as<int64_t>();
  auto loop = [&](char** d, const int64_t* s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) seen[reinterpret_cast<int64_t*>(d[0] + i * s[0]) - base]++;
  };
  for (int64_t b = 0; b < it.numel(); b += 4) it.serial_for_each(loop, b, std::min(it.numel(), b + 4));
  int total = 0;
  for (int v : seen) {
    EXPECT_LE(v, 1);
    total += v;
  }
  EXPECT_EQ(total, sl.numel());
}

TEST(TensorIterator, ZeroDimAndEmpty) {
  Tensor s = Tensor::empty({}, DType::Float32);
  TensorIterator it({s});
  EXPECT_EQ(it.numel(), 1);
  int calls = 0;
  it.for_each([&](char**, const int64_t*, int64_t n) { calls += static_cast<int>(n); });
  EXPECT_EQ(calls, 1);
  Tensor e = Tensor::empty({3, 0}, DType::Float32);
  TensorIterator ie({e});
  ie.for_each([&](char**, const int64_t*, int64_t) { ADD_FAILURE(); });
}

}  // namespace
}  // namespace tp
