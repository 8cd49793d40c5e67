// The schema parser: what every generated Python binding is built from.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/registry.h"
#include "ops/schema.h"

namespace tp {
namespace {

TEST(Schema, ParsesNameOverloadArgsDefaultsAndReturns) {
  Schema s = parse_schema(
      "max.dim(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> (Tensor values, Tensor indices)");
  EXPECT_EQ(s.name, "max");
  EXPECT_EQ(s.overload, "dim");
  ASSERT_EQ(s.args.size(), 4u);
  EXPECT_EQ(s.args[0].type, ArgType::Tensor);
  EXPECT_EQ(s.args[1].type, ArgType::Int);
  EXPECT_FALSE(s.args[1].has_default);
  EXPECT_TRUE(s.args[2].has_default);
  EXPECT_EQ(std::get<bool>(s.args[2].default_value), false);
  EXPECT_TRUE(s.args[3].kwarg_only);
  EXPECT_TRUE(s.args[3].optional);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(s.args[3].default_value));
  ASSERT_EQ(s.returns.size(), 2u);
  EXPECT_EQ(s.returns[1], "indices");
  EXPECT_EQ(s.num_tensor_args(), 1);
}

TEST(Schema, IntListsBroadcastSingleDefaultsAndParseListLiterals) {
  Schema s = parse_schema("conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=1, int[2] padding=[0, 1]) -> Tensor");
  EXPECT_EQ(s.args[2].type, ArgType::Tensor);
  EXPECT_TRUE(s.args[2].optional);
  EXPECT_EQ(s.args[3].list_len, 2);
  EXPECT_EQ(std::get<std::vector<int64_t>>(s.args[3].default_value), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(std::get<std::vector<int64_t>>(s.args[4].default_value), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(s.num_tensor_args(), 3);
}

TEST(Schema, ScalarsFloatsStringsAndTensorLists) {
  Schema s = parse_schema(
      "f(Tensor[] tensors, Scalar alpha=1, float eps=1e-05, float hi=inf, str mode='mean', Tensor(a!) out) -> Tensor[]");
  EXPECT_TRUE(s.has_tensor_list());
  EXPECT_TRUE(s.returns_list);
  EXPECT_EQ(std::get<Scalar>(s.args[1].default_value).to_int(), 1);
  EXPECT_FALSE(std::get<Scalar>(s.args[1].default_value).is_float());
  EXPECT_DOUBLE_EQ(std::get<Scalar>(s.args[2].default_value).to_double(), 1e-5);
  EXPECT_TRUE(std::isinf(std::get<Scalar>(s.args[3].default_value).to_double()));
  EXPECT_EQ(std::get<std::string>(s.args[4].default_value), "mean");
  EXPECT_EQ(s.args[5].type, ArgType::Tensor);  // the alias annotation is informative only
}

TEST(Schema, DeviceAndMemoryFormatArgs) {
  // Checked by the binding, never stored in Attrs: only a None default is allowed.
  Schema s = parse_schema("f(int[] size, *, Device? device=None, MemoryFormat? memory_format=None) -> Tensor");
  ASSERT_EQ(s.args.size(), 3u);
  EXPECT_EQ(s.args[1].type, ArgType::Device);
  EXPECT_EQ(s.args[2].type, ArgType::MemoryFormat);
  EXPECT_TRUE(s.args[1].optional && s.args[1].kwarg_only && s.args[1].has_default);
  EXPECT_EQ(arg_type_name(s.args[2]), "MemoryFormat?");
  EXPECT_THROW(parse_schema("f(Device? device='cpu') -> Tensor"), Error);
}

TEST(Schema, SyntaxErrorsNameTheSchema) {
  EXPECT_THROW(parse_schema("f(Tensor self"), Error);
  EXPECT_THROW(parse_schema("f(Widget w) -> Tensor"), Error);
  EXPECT_THROW(parse_schema("f(int x=None) -> Tensor"), Error);  // None needs int?
  EXPECT_THROW(parse_schema("f(Tensor x=3) -> Tensor"), Error);
  try {
    parse_schema("f(Tensor self) Tensor");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f(Tensor self) Tensor"), std::string::npos);
  }
}

TEST(Schema, EveryRegisteredSchemaParsesAndMatchesItsOpDef) {
  // Registration already checks name and tensor-input count; this makes the
  // whole registry load, so a bad schema anywhere fails here first.
  int with_schema = 0;
  for (const OpDef* op : all_ops()) {
    const Schema* s = op_schema(*op);
    if (!s) continue;
    ++with_schema;
    EXPECT_EQ(s->overload.empty() ? s->name : s->name + "." + s->overload, op->name);
  }
  EXPECT_GT(with_schema, 150);
}

}  // namespace
}  // namespace tp
