#include "ops/registry.h"
#include "test_util.h"

namespace tp {
namespace {
using test::expect_values;
using test::iota;
using test::make;
using test::values;

TEST(Views, ViewSharesStorage) {
  Tensor x = iota({2, 6});
  Tensor v = ops::view(x, {3, -1});
  EXPECT_EQ(v.sizes(), (Shape{3, 4}));
  EXPECT_EQ(v.impl()->storage, x.impl()->storage);
  v.data_as<float>()[0] = 42;
  EXPECT_EQ(x.data_as<float>()[0], 42);
  EXPECT_EQ(ops::view(x, {12}).sizes(), (Shape{12}));
  EXPECT_EQ(ops::view(Tensor::scalar_tensor(Scalar(1.0), DType::Float32), {1, 1}).sizes(), (Shape{1, 1}));
}

TEST(Views, ViewErrors) {
  Tensor x = iota({2, 6});
  EXPECT_THROW_MSG(ops::view(x, {5, -1}), ValueError, "view", "[5, -1]", "12");
  EXPECT_THROW_MSG(ops::view(x, {-1, -1}), ValueError, "only one dimension");
  EXPECT_THROW_MSG(ops::view(x, {-2, 6}), ValueError, "view");
  Tensor t = ops::transpose(x, 0, 1);  // [6, 2] strides (1, 6)
  EXPECT_THROW_MSG(ops::view(t, {12}), Error, "view size is not compatible", "Use .reshape(...) instead");
  EXPECT_THROW_MSG(ops::view(Tensor::empty({0, 3}, DType::Float32), {0, -1}), ValueError, "ambiguous");
}

TEST(Views, ViewOfStridedWhenPossible) {
  Tensor x = iota({4, 6});
  Tensor s = ops::slice(x, 0, 1, 3, 1);  // rows 1..2: still viewable as [12]
  Tensor v = ops::view(s, {2, 3, 2});
  expect_values(v, {6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17});
  Tensor c = ops::slice(x, 1, 0, 4, 1);  // [4, 4] with row stride 6: splitting a dim works
  Tensor w = ops::view(c, {4, 2, 2});
  EXPECT_EQ(w.strides(), (Shape{6, 2, 1}));
  EXPECT_THROW(ops::view(c, {16}), Error);
}

TEST(Views, Reshape) {
  Tensor x = iota({2, 3});
  Tensor t = ops::transpose(x, 0, 1);
  Tensor r = ops::reshape(t, {6});
  expect_values(r, {0, 3, 1, 4, 2, 5});
  EXPECT_NE(r.impl()->storage, x.impl()->storage);
  Tensor r2 = ops::reshape(x, {3, 2});
  EXPECT_EQ(r2.impl()->storage, x.impl()->storage);
}

TEST(Views, Permute) {
  Tensor x = iota({2, 3, 4});
  Tensor p = ops::permute(x, {2, 0, 1});
  EXPECT_EQ(p.sizes(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  EXPECT_EQ(ops::permute(x, {-1, 0, 1}).sizes(), (Shape{4, 2, 3}));
  EXPECT_THROW_MSG(ops::permute(x, {0, 1}), ValueError, "permute");
  EXPECT_THROW_MSG(ops::permute(x, {0, 1, 1}), ValueError, "permute", "repeated");
  EXPECT_THROW_MSG(ops::permute(x, {0, 1, 3}), IndexError, "permute");
  Tensor t = ops::transpose(x, -1, 0);
  EXPECT_EQ(t.sizes(), (Shape{4, 3, 2}));
}

TEST(Views, Expand) {
  Tensor x = make({1, 2, 3}, {3, 1});
  Tensor e = ops::expand(x, {2, 3, 4});
  EXPECT_EQ(e.sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(e.strides(), (Shape{0, 1, 0}));
  EXPECT_EQ(ops::expand(x, {-1, 5}).sizes(), (Shape{3, 5}));
  EXPECT_THROW_MSG(ops::expand(x, {4, 4}), ValueError, "expand", "[4, 4]", "[3, 1]");
  EXPECT_THROW_MSG(ops::expand(x, {4}), ValueError, "expand");
  EXPECT_THROW_MSG(ops::expand(x, {-1, 3, 4}), ValueError, "expand");
  EXPECT_EQ(ops::expand(x, {0, 3, 4}).numel(), 0);
}

TEST(Views, Slice) {
  Tensor x = iota({10});
  expect_values(ops::slice(x, 0, 2, 8, 3), {2, 5});
  expect_values(ops::slice(x, 0, -3, std::nullopt, 1), {7, 8, 9});
  expect_values(ops::slice(x, 0, std::nullopt, -7, 1), {0, 1, 2});
  expect_values(ops::slice(x, 0, -100, 100, 4), {0, 4, 8});
  EXPECT_EQ(ops::slice(x, 0, 8, 2, 1).numel(), 0);
  EXPECT_EQ(ops::slice(x, 0, 20, 30, 1).numel(), 0);
  EXPECT_EQ(ops::slice(x, 0, 0, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max()).numel(), 1);
  EXPECT_THROW_MSG(ops::slice(x, 0, 0, 5, 0), ValueError, "slice", "step");
  EXPECT_THROW_MSG(ops::slice(x, 0, 0, 5, -1), ValueError, "slice");
  EXPECT_THROW_MSG(ops::slice(x, 1, 0, 5, 1), IndexError, "slice");
  Tensor m = iota({3, 4});
  Tensor s = ops::slice(m, 1, 1, 3, 1);
  EXPECT_EQ(s.offset(), 1);
  expect_values(s, {1, 2, 5, 6, 9, 10});
  Tensor ss = ops::slice(s, 0, 1, 3, 1);
  expect_values(ss, {5, 6, 9, 10});
}

TEST(Views, Select) {
  Tensor m = iota({3, 4});
  expect_values(ops::select(m, 0, 1), {4, 5, 6, 7});
  expect_values(ops::select(m, 1, -1), {3, 7, 11});
  EXPECT_EQ(ops::select(ops::select(m, 0, 2), 0, 3).dim(), 0);
  EXPECT_THROW_MSG(ops::select(m, 0, 3), IndexError, "select", "3", "[3, 4]");
  EXPECT_THROW_MSG(ops::select(m, 1, -5), IndexError, "select");
  EXPECT_THROW_MSG(ops::select(Tensor::scalar_tensor(Scalar(1.0), DType::Float32), 0, 0), IndexError, "select");
  EXPECT_THROW(ops::select(Tensor::empty({0}, DType::Float32), 0, 0), IndexError);
}

TEST(Views, SqueezeUnsqueezeContiguous) {
  Tensor x = iota({2, 1, 3});
  EXPECT_EQ(ops::squeeze(x).sizes(), (Shape{2, 3}));
  EXPECT_EQ(ops::squeeze(x, 1).sizes(), (Shape{2, 3}));
  EXPECT_EQ(ops::squeeze(x, 0).sizes(), (Shape{2, 1, 3}));
  EXPECT_EQ(ops::unsqueeze(x, 0).sizes(), (Shape{1, 2, 1, 3}));
  EXPECT_EQ(ops::unsqueeze(x, -1).sizes(), (Shape{2, 1, 3, 1}));
  EXPECT_THROW(ops::unsqueeze(x, 5), IndexError);
  Tensor t = ops::transpose(iota({2, 3}), 0, 1);
  Tensor c = ops::contiguous(t);
  EXPECT_TRUE(c.is_contiguous());
  expect_values(c, {0, 3, 1, 4, 2, 5});
  EXPECT_EQ(ops::contiguous(c).impl(), c.impl());
  // unsqueeze of a transposed view stays a view
  EXPECT_EQ(ops::unsqueeze(t, 1).impl()->storage, t.impl()->storage);
}

TEST(Views, Tags) {
  for (const char* name : {"view", "permute", "expand", "slice", "select"}) EXPECT_TRUE(get_op(name).has(kView)) << name;
}

}  // namespace
}  // namespace tp

namespace tp {
namespace {
TEST(Views, HugeSizesAreRejectedNotOverflowed) {
  Tensor x = test::iota({2, 3});
  int64_t big = int64_t{1} << 40;
  EXPECT_THROW(ops::view(x, {big, big, 0}), ValueError);
  EXPECT_THROW(ops::view(x, {big, big}), ValueError);
  EXPECT_THROW(ops::expand(ops::view(x, {6, 1, 1}), {6, big, big}), ValueError);
  EXPECT_THROW(ops::zeros({big, big}), ValueError);
  EXPECT_THROW(ops::reshape(x, {-1, big, big}), ValueError);
}
}  // namespace
}  // namespace tp
