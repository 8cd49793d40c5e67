// Scalar math written so that GCC auto-vectorizes loops that call it (libm's
// expf is an opaque call that keeps a loop scalar). Used by the float32 exp,
// sigmoid and softmax kernels.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace tp {

// e^x in float32 (Cephes expf polynomial, about 1 ulp): x = n ln2 + r with
// |r| <= ln2/2, e^r by a degree-6 polynomial, 2^n applied as two exponent-field
// factors so results down in the denormal range stay right. NaN propagates,
// overflow gives inf, underflow 0. No float->int conversion: n comes out of
// the mantissa of a magic-number sum, so NaN inputs are not undefined behaviour.
// A float select written with integer masks: GCC (with the default
// -ftrapping-math) will not if-convert `c ? k : x` on floats, which keeps the
// whole loop scalar.
template <class T>
inline T select(bool c, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    using I = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
    const I m = -static_cast<I>(c);
    return std::bit_cast<T>(static_cast<I>((m & std::bit_cast<I>(a)) | (~m & std::bit_cast<I>(b))));
  } else {
    return c ? a : b;
  }
}
inline float select_f32(bool c, float a, float b) { return select<float>(c, a, b); }

inline float exp_f32(float x) {
  x = select_f32(x < -104.0f, -104.0f, x);  // NaN passes both clamps unchanged
  x = select_f32(x > 89.0f, 89.0f, x);
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float t = x * 1.44269504088896341f + kMagic;
  const float n = t - kMagic;
  const int32_t ni = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kMagic);
  float r = x - n * 0.693359375f;  // ln2 split in two for an exact product
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t h = ni >> 1;
  const float s1 = std::bit_cast<float>(static_cast<int32_t>(static_cast<uint32_t>(h + 127) << 23));
  const float s2 = std::bit_cast<float>(static_cast<int32_t>(static_cast<uint32_t>(ni - h + 127) << 23));
  return p * s1 * s2;
}

}  // namespace tp

namespace tp {
// e^x for float (vectorizable, above) and double (libm).
template <class T>
inline T exp_any(T x) {
  if constexpr (sizeof(T) == 4) return exp_f32(x);
  else return std::exp(x);
}
}  // namespace tp
