#include <gtest/gtest.h>
#include "ops/ops.h"
TEST(Smoke, Add) { auto a = tp::ops::ones({3}); auto b = tp::ops::add(a, a); EXPECT_EQ(b.data_as<float>()[2], 2.0f); }
