#include <random>

#include "ops/registry.h"
#include "test_util.h"

namespace tp {
namespace {
using test::expect_values;
using test::iota;
using test::make;
using test::values;

// Reference matmul of two 2-D tensors (any strides).
std::vector<double> ref_mm(const Tensor& a, const Tensor& b) {
  auto va = values(a), vb = values(b);
  int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  std::vector<double> c(M * N, 0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k) c[i * N + j] += va[i * K + k] * vb[k * N + j];
  return c;
}

class Matmul : public ::testing::Test {
 protected:
  void SetUp() override { test::load_test_blas(); }
};

TEST_F(Matmul, TwoD) {
  Tensor a = make({1, 2, 3, 4, 5, 6}, {2, 3}), b = make({7, 8, 9, 10, 11, 12}, {3, 2});
  expect_values(ops::matmul(a, b), {58, 64, 139, 154});
  EXPECT_EQ(ops::matmul(a, b).sizes(), (Shape{2, 2}));
}

TEST_F(Matmul, OneDCases) {
  Tensor v = make({1, 2, 3}, {3}), m = iota({3, 2});
  Tensor vm = ops::matmul(v, m);
  EXPECT_EQ(vm.sizes(), (Shape{2}));
  expect_values(vm, {16, 22});
  Tensor mv = ops::matmul(ops::transpose(m, 0, 1), v);
  EXPECT_EQ(mv.sizes(), (Shape{2}));
  expect_values(mv, {16, 22});
  Tensor dot = ops::matmul(v, v);
  EXPECT_EQ(dot.dim(), 0);
  expect_values(dot, {14});
  // A strided 1-D operand.
  Tensor sv = ops::slice(iota({6}), 0, 0, 6, 2);  // [0, 2, 4]
  expect_values(ops::matmul(sv, m), {0 * 0 + 2 * 2 + 4 * 4, 0 + 2 * 3 + 4 * 5});
}

TEST_F(Matmul, TransposedAndStridedOperands) {
  std::mt19937 rng(1);
  std::normal_distribution<double> nd;
  auto rnd = [&](Shape s, DType dt) {
    std::vector<double> v(numel(s));
    for (auto& e : v) e = nd(rng);
    return make(v, s, dt);
  };
  for (DType dt : {DType::Float32, DType::Float64}) {
    double tol = dt == DType::Float32 ? 1e-5 : 1e-12;
    Tensor a = rnd({7, 5}, dt), b = rnd({6, 7}, dt);
    Tensor at = ops::transpose(a, 0, 1), bt = ops::transpose(b, 0, 1);  // [5,7], [7,6]
    expect_values(ops::matmul(at, bt), ref_mm(at, bt), tol);
    Tensor c = rnd({5, 7}, dt);
    expect_values(ops::matmul(c, bt), ref_mm(c, bt), tol);
    Tensor s = ops::slice(rnd({5, 14}, dt), 1, 0, 14, 2);  // column stride 2: copied first
    expect_values(ops::matmul(s, bt), ref_mm(s, bt), tol);
    Tensor e = ops::expand(rnd({1, 7}, dt), {5, 7});  // row stride 0
    expect_values(ops::matmul(e, bt), ref_mm(e, bt), tol);
  }
}

TEST_F(Matmul, BatchedBroadcast) {
  Tensor a = iota({2, 3, 4}, DType::Float64), b = iota({4, 5}, DType::Float64, 1);
  Tensor r = ops::matmul(a, b);  // folded into one [6,4] x [4,5] GEMM
  EXPECT_EQ(r.sizes(), (Shape{2, 3, 5}));
  auto rv = values(r);
  auto ref0 = ref_mm(ops::select(a, 0, 0), b), ref1 = ref_mm(ops::select(a, 0, 1), b);
  for (int i = 0; i < 15; ++i) {
    EXPECT_DOUBLE_EQ(rv[i], ref0[i]);
    EXPECT_DOUBLE_EQ(rv[15 + i], ref1[i]);
  }
  Tensor c = iota({3, 1, 2, 4}, DType::Float64), d = iota({2, 4, 3}, DType::Float64, 2);
  Tensor cd = ops::matmul(c, d);
  EXPECT_EQ(cd.sizes(), (Shape{3, 2, 2, 3}));
  auto cv = values(cd);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      auto ref = ref_mm(ops::select(ops::select(c, 0, i), 0, 0), ops::select(d, 0, j));
      for (int k = 0; k < 6; ++k) EXPECT_DOUBLE_EQ(cv[(i * 2 + j) * 6 + k], ref[k]);
    }
  // vector @ batch and batch @ vector
  Tensor v = make({1, 1, 1, 1}, {4}, DType::Float64);
  EXPECT_EQ(ops::matmul(v, d).sizes(), (Shape{2, 3}));
  EXPECT_EQ(ops::matmul(c, v).sizes(), (Shape{3, 1, 2}));
  // A transposed batch.
  Tensor at = ops::transpose(iota({2, 4, 3}, DType::Float64), 1, 2);  // [2,3,4]
  Tensor ab = ops::matmul(at, b);
  auto abv = values(ab);
  auto refa = ref_mm(ops::select(at, 0, 1), b);
  for (int k = 0; k < 15; ++k) EXPECT_DOUBLE_EQ(abv[15 + k], refa[k]);
}

TEST_F(Matmul, ZeroSizes) {
  Tensor a = Tensor::empty({2, 0}, DType::Float32), b = Tensor::empty({0, 3}, DType::Float32);
  Tensor r = ops::matmul(a, b);
  EXPECT_EQ(r.sizes(), (Shape{2, 3}));
  expect_values(r, {0, 0, 0, 0, 0, 0});
  EXPECT_EQ(ops::matmul(Tensor::empty({0, 4}, DType::Float32), iota({4, 2})).sizes(), (Shape{0, 2}));
  EXPECT_EQ(ops::matmul(Tensor::empty({0, 2, 4}, DType::Float32), iota({4, 2})).sizes(), (Shape{0, 2, 2}));
}

TEST_F(Matmul, Errors) {
  EXPECT_THROW_MSG(ops::matmul(iota({2, 3}), iota({4, 5})), ValueError,
                   "matmul: shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)");
  // int64 matmul is supported (a plain loop); bool is not.
  expect_values(ops::matmul(make({1, 2}, {1, 2}, DType::Int64), make({3, 4}, {2, 1}, DType::Int64)), {11});
  EXPECT_THROW_MSG(ops::matmul(make({1}, {1, 1}, DType::Bool), make({1}, {1, 1}, DType::Bool)), TypeError,
                   "matmul", "bool");
  EXPECT_THROW_MSG(ops::matmul(iota({2, 3}), iota({3, 2}, DType::Float64)), TypeError, "matmul", "float32",
                   "float64");
  EXPECT_THROW_MSG(ops::matmul(Tensor::scalar_tensor(Scalar(1.0), DType::Float32), iota({2})), ValueError, "matmul",
                   "1D");
  EXPECT_THROW_MSG(ops::matmul(iota({2, 2, 3}), iota({3, 3, 2})), ValueError, "matmul");
  EXPECT_THROW(set_blas_library("/nonexistent/libnothing.so"), Error);
  // A failed load keeps the library in use.
  expect_values(ops::matmul(make({1, 2}, {1, 2}), make({3, 4}, {2, 1})), {11});
}

}  // namespace
}  // namespace tp
