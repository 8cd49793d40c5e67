// 16-bit floating-point storage types. TensorPlay stores float16 and bfloat16
// but computes in float32 (the dispatcher converts around kernels, see
// ops/dispatch.cpp), so these types only need exact conversions, with
// round-to-nearest-even on the way down.
#pragma once
#include <cstdint>
#include <cstring>

namespace tp {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE 754 binary16.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f) : bits(from_float(f)) {}  // NOLINT: implicit like a builtin float type
  operator float() const { return to_float(bits); }

  static uint16_t from_float(float f) {
    const uint32_t u = float_bits(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t absu = u & 0x7FFFFFFFu;
    if (absu >= 0x7F800000u)  // inf or NaN (NaN stays quiet NaN)
      return static_cast<uint16_t>(sign | 0x7C00u | (absu > 0x7F800000u ? 0x200u : 0u));
    if (absu >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to inf
    if (absu < 0x38800000u) {
      // Subnormal half (or zero): scale into the integer range and round once.
      const float scaled = bits_float(absu) * 16777216.0f;  // 2^24: units of the smallest subnormal
      return static_cast<uint16_t>(sign | static_cast<uint32_t>(__builtin_nearbyintf(scaled)));
    }
    // Normal: rebias the exponent, round the mantissa to 10 bits (ties to even).
    uint32_t mant_odd = (absu >> 13) & 1u;
    uint32_t v = absu + 0xFFFu + mant_odd;
    v -= (127u - 15u) << 23;
    return static_cast<uint16_t>(sign | (v >> 13));
  }
  static float to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1Fu;
    const uint32_t mant = h & 0x3FFu;
    if (exp == 0) {  // zero or subnormal: mant * 2^-24
      const float f = static_cast<float>(mant) * (1.0f / 16777216.0f);
      return bits_float(float_bits(f) | sign);
    }
    if (exp == 31) return bits_float(sign | 0x7F800000u | (mant << 13));
    return bits_float(sign | ((exp + 127 - 15) << 23) | (mant << 13));
  }
};

// bfloat16: the upper half of a float32.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) : bits(from_float(f)) {}  // NOLINT
  operator float() const { return bits_float(static_cast<uint32_t>(bits) << 16); }

  static uint16_t from_float(float f) {
    const uint32_t u = float_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
    const uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);
    return static_cast<uint16_t>((u + rounding) >> 16);
  }
};

}  // namespace tp
