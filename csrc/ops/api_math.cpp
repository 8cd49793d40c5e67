// The C++ API of the math operators (api_math.h): thin calls through the dispatcher.
#include "ops/api_math.h"

#include "ops/dispatch.h"
#include "ops/ops.h"

// GCC 12 warns falsely about the attribute initializer lists below.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace tp::ops {
#define TP_UNARY(name) \
  Tensor name(const Tensor& x) { return call_op1(TP_OP(#name), {x}); }
TP_UNARY(exp2)
TP_UNARY(expm1)
TP_UNARY(log2)
TP_UNARY(log10)
TP_UNARY(log1p)
TP_UNARY(rsqrt)
TP_UNARY(sin)
TP_UNARY(cos)
TP_UNARY(tan)
TP_UNARY(asin)
TP_UNARY(acos)
TP_UNARY(atan)
TP_UNARY(sinh)
TP_UNARY(cosh)
TP_UNARY(asinh)
TP_UNARY(acosh)
TP_UNARY(atanh)
TP_UNARY(erf)
TP_UNARY(erfc)
TP_UNARY(erfinv)
TP_UNARY(silu)
TP_UNARY(mish)
TP_UNARY(sign)
TP_UNARY(floor)
TP_UNARY(ceil)
TP_UNARY(trunc)
TP_UNARY(frac)
TP_UNARY(reciprocal)
TP_UNARY(square)
TP_UNARY(isnan)
TP_UNARY(isinf)
TP_UNARY(isfinite)
TP_UNARY(logical_not)
TP_UNARY(bitwise_not)
#undef TP_UNARY

Tensor logit(const Tensor& x, std::optional<double> eps) {
  return call_op1(TP_OP("logit"), {x}, {{"eps", eps ? AttrValue(Scalar(*eps)) : AttrValue(std::monostate{})}});
}
Tensor gelu(const Tensor& x, const std::string& approximate) {
  return call_op1(TP_OP("gelu"), {x}, {{"approximate", approximate}});
}
Tensor softplus(const Tensor& x, const Scalar& beta, const Scalar& threshold) {
  return call_op1(TP_OP("softplus"), {x}, {{"beta", beta}, {"threshold", threshold}});
}
Tensor elu(const Tensor& x, const Scalar& alpha) { return call_op1(TP_OP("elu"), {x}, {{"alpha", alpha}}); }
Tensor leaky_relu(const Tensor& x, const Scalar& slope) {
  return call_op1(TP_OP("leaky_relu"), {x}, {{"negative_slope", slope}});
}
Tensor hardtanh(const Tensor& x, const Scalar& min_val, const Scalar& max_val) {
  return call_op1(TP_OP("hardtanh"), {x}, {{"min_val", min_val}, {"max_val", max_val}});
}
Tensor round(const Tensor& x, int64_t decimals) { return call_op1(TP_OP("round"), {x}, {{"decimals", decimals}}); }

#define TP_BINARY(name) \
  Tensor name(const Tensor& a, const Tensor& b) { return call_op1(TP_OP(#name), {a, b}); }
TP_BINARY(floor_divide)
TP_BINARY(remainder)
TP_BINARY(fmod)
TP_BINARY(pow)
TP_BINARY(atan2)
TP_BINARY(hypot)
TP_BINARY(logical_and)
TP_BINARY(logical_or)
TP_BINARY(logical_xor)
TP_BINARY(bitwise_and)
TP_BINARY(bitwise_or)
TP_BINARY(bitwise_xor)
TP_BINARY(bitwise_left_shift)
TP_BINARY(bitwise_right_shift)
TP_BINARY(clamp_min)
TP_BINARY(clamp_max)
#undef TP_BINARY

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return call_op1(TP_OP("add"), {a, b}, {{"alpha", alpha}});
}
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  return call_op1(TP_OP("sub"), {a, b}, {{"alpha", alpha}});
}
Tensor div(const Tensor& a, const Tensor& b, const std::optional<std::string>& mode) {
  return call_op1(TP_OP("div"), {a, b}, {{"rounding_mode", mode ? AttrValue(*mode) : AttrValue(std::monostate{})}});
}
Tensor addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return call_op1(TP_OP("addcmul"), {self, t1, t2}, {{"value", value}});
}
Tensor addcdiv(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return call_op1(TP_OP("addcdiv"), {self, t1, t2}, {{"value", value}});
}
Tensor lerp(const Tensor& self, const Tensor& end, const Tensor& weight) {
  return call_op1(TP_OP("lerp"), {self, end, weight});
}
Tensor lerp(const Tensor& self, const Tensor& end, const Scalar& weight) {
  return lerp(self, end, scalar(weight));
}
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max) {
  return call_op1(TP_OP("clamp"), {x, min, max});
}
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  return clamp(x, min ? scalar(*min) : Tensor(), max ? scalar(*max) : Tensor());
}

Tensor& inplace(const char* name, Tensor& self, const std::vector<Tensor>& others, const Attrs& attrs) {
  std::vector<Tensor> in{self};
  in.insert(in.end(), others.begin(), others.end());
  call_op(get_op(name), in, attrs);
  return self;
}

}  // namespace tp::ops
