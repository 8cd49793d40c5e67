#include "ops/type_promotion.h"

#include "test_util.h"

namespace tp {
namespace {

constexpr DType B = DType::Bool, I = DType::Int64, F = DType::Float32, D = DType::Float64;

DType rt(std::vector<PromotionOperand> ops) { return result_type(ops); }
PromotionOperand tensor(DType t) { return {t, 1, false}; }
PromotionOperand zero_dim(DType t) { return {t, 0, false}; }
PromotionOperand number(DType t) { return {t, 0, true}; }

TEST(TypePromotion, TensorsFollowTheLattice) {
  const DType all[] = {B, I, F, D};
  for (DType a : all)
    for (DType b : all) EXPECT_EQ(rt({tensor(a), tensor(b)}), promote_types(a, b));
  EXPECT_EQ(rt({tensor(B), tensor(I)}), I);
  EXPECT_EQ(rt({tensor(I), tensor(F)}), F);
  EXPECT_EQ(rt({tensor(F), tensor(D)}), D);
}

TEST(TypePromotion, WrappedNumbersOnlyRaiseTheCategory) {
  EXPECT_EQ(rt({tensor(I), number(D)}), F);  // int tensor * 2.5 -> default float
  EXPECT_EQ(rt({tensor(F), number(D)}), F);  // float32 tensor * 2.0 -> float32
  EXPECT_EQ(rt({tensor(D), number(D)}), D);
  EXPECT_EQ(rt({tensor(B), number(I)}), I);  // bool tensor + 1 -> int64
  EXPECT_EQ(rt({tensor(B), number(B)}), B);
  EXPECT_EQ(rt({tensor(I), number(I)}), I);
  EXPECT_EQ(rt({tensor(F), number(I)}), F);
  EXPECT_EQ(rt({tensor(I), number(B)}), I);
  EXPECT_EQ(rt({number(D), tensor(I)}), F);  // order does not matter
}

TEST(TypePromotion, ZeroDimTensorsRankBetweenTensorsAndNumbers) {
  EXPECT_EQ(rt({tensor(F), zero_dim(D)}), F);
  EXPECT_EQ(rt({tensor(I), zero_dim(D)}), D);  // category raised: the 0-d tensor's own dtype
  EXPECT_EQ(rt({tensor(B), zero_dim(I)}), I);
  EXPECT_EQ(rt({zero_dim(F), zero_dim(D)}), D);
  EXPECT_EQ(rt({zero_dim(F), number(D)}), F);
  EXPECT_EQ(rt({zero_dim(I), number(D)}), F);
  EXPECT_EQ(rt({zero_dim(B), number(I)}), I);
}

TEST(TypePromotion, NumbersAloneBehaveNormally) {
  EXPECT_EQ(rt({number(D)}), F);
  EXPECT_EQ(rt({number(I)}), I);
  EXPECT_EQ(rt({number(I), number(D)}), F);
  EXPECT_EQ(rt({number(B)}), B);
}

TEST(TypePromotion, CanCast) {
  EXPECT_TRUE(can_cast(I, F));
  EXPECT_TRUE(can_cast(F, D));
  EXPECT_TRUE(can_cast(D, F));
  EXPECT_TRUE(can_cast(B, I));
  EXPECT_FALSE(can_cast(F, I));
  EXPECT_FALSE(can_cast(D, I));
  EXPECT_FALSE(can_cast(I, B));
  EXPECT_FALSE(can_cast(F, B));
  EXPECT_TRUE(can_cast(B, B));
}

TEST(TypePromotion, ThroughOperators) {
  Tensor i = test::iota({3}, I), f = test::iota({3}, F), b = test::make({1, 0, 1}, {3}, B);
  EXPECT_EQ(ops::add(i, f).dtype(), F);
  EXPECT_EQ(ops::add(b, ops::scalar(Scalar(int64_t{1}))).dtype(), I);
  EXPECT_EQ(ops::mul(f, ops::scalar(2.0)).dtype(), F);
  EXPECT_EQ(ops::div(i, i).dtype(), F);
  EXPECT_EQ(ops::add(b, b).dtype(), B);
  test::expect_values(ops::add(b, ops::scalar(Scalar(int64_t{1}))), {2, 1, 2});
}

TEST(TypePromotion, WrappedFloatWithIntTensor) {
  Tensor w = ops::scalar(2.5);
  if (!meta_is_wrapped(w.meta())) GTEST_SKIP() << "TensorMeta has no wrapped_number field yet";
  Tensor i = test::iota({3}, I);
  Tensor r = ops::mul(i, w);
  EXPECT_EQ(r.dtype(), F);
  test::expect_values(r, {0, 2.5, 5});
  Tensor z = Tensor::scalar_tensor(Scalar(1.0), F);
  EXPECT_EQ(ops::mul(z, ops::scalar(2.0)).dtype(), F);
}

}  // namespace
}  // namespace tp
