// C++ API of the math operators added for issue 3 (calls through the dispatcher,
// so C++ callers are traced and differentiated like Python ones). The basic
// ones (add, mul, exp, where, ...) are declared in ops.h.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/attrs.h"

namespace tp::ops {

// ---- unary (integer inputs of float-valued functions promote to the default float) ----
Tensor exp2(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log10(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor asinh(const Tensor& x);
Tensor acosh(const Tensor& x);
Tensor atanh(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor erfc(const Tensor& x);
Tensor erfinv(const Tensor& x);
Tensor logit(const Tensor& x, std::optional<double> eps = std::nullopt);
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor silu(const Tensor& x);
Tensor mish(const Tensor& x);
Tensor softplus(const Tensor& x, const Scalar& beta = Scalar(int64_t{1}), const Scalar& threshold = Scalar(int64_t{20}));
Tensor elu(const Tensor& x, const Scalar& alpha = Scalar(1.0));
Tensor leaky_relu(const Tensor& x, const Scalar& negative_slope = Scalar(0.01));
Tensor hardtanh(const Tensor& x, const Scalar& min_val = Scalar(int64_t{-1}), const Scalar& max_val = Scalar(int64_t{1}));
Tensor sign(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x, int64_t decimals = 0);
Tensor trunc(const Tensor& x);
Tensor frac(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor square(const Tensor& x);
Tensor isnan(const Tensor& x);  // -> bool
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);
Tensor logical_not(const Tensor& x);
Tensor bitwise_not(const Tensor& x);  // integer / bool only

// ---- binary (broadcasting, PyTorch type promotion) ----
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha);  // a + alpha * b
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha);  // a - alpha * b
// rounding_mode: nullopt (true division), "trunc" or "floor" (integers stay integers).
Tensor div(const Tensor& a, const Tensor& b, const std::optional<std::string>& rounding_mode);
Tensor floor_divide(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, const Tensor& b);  // sign of the divisor (Python's %)
Tensor fmod(const Tensor& a, const Tensor& b);       // sign of the dividend (C's fmod)
Tensor pow(const Tensor& a, const Tensor& b);        // a wrapped scalar on either side is fine
Tensor atan2(const Tensor& a, const Tensor& b);
Tensor hypot(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_and(const Tensor& a, const Tensor& b);
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_left_shift(const Tensor& a, const Tensor& b);
Tensor bitwise_right_shift(const Tensor& a, const Tensor& b);

// ---- ternary ----
Tensor addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value = Scalar(int64_t{1}));
Tensor addcdiv(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value = Scalar(int64_t{1}));
Tensor lerp(const Tensor& self, const Tensor& end, const Tensor& weight);  // weight may be a wrapped scalar
Tensor lerp(const Tensor& self, const Tensor& end, const Scalar& weight);
// Bounds may be undefined tensors (absent) or wrapped scalars.
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor clamp_min(const Tensor& x, const Tensor& min);
Tensor clamp_max(const Tensor& x, const Tensor& max);

// ---- in-place: any registered `name_` operator (exp_, clamp_, add_, ...) ----
Tensor& inplace(const char* name, Tensor& self, const std::vector<Tensor>& others = {}, const Attrs& attrs = {});

}  // namespace tp::ops
