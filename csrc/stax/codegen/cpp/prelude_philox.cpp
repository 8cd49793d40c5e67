// The prelude's counter-based random draws: Philox4x32-10 and the transforms of
// eager's random_fill (ops/generator.h, ops/factory_ops.cpp), as scalar C++.
// Element i of a draw whose first counter is `first` uses counter
// first + i / 4 (float32: one 32-bit word per element, word i % 4) or
// first + i / 2 (float64: two words per element), so generated code draws the
// very numbers eager draws, in any order and on any number of threads.
// Box-Muller uses libm's logf/sinf/cosf (log/sin/cos) as eager does. FMA
// contraction: the uniform scalings are exact (a power-of-two scale), and the
// normal's final product is made opaque (empty asm), so a consumer's add
// (`randn(...) + y`) cannot absorb it into a fused multiply-add.
#include "stax/codegen/cpp/prelude.h"

namespace tp::stax::codegen {

const char* philox_prelude() {
  return R"TP(
static inline void tp_philox4x32(unsigned long long ctr, unsigned long long key, unsigned int o[4]) {
  unsigned int c0 = (unsigned int)ctr, c1 = (unsigned int)(ctr >> 32), c2 = 0, c3 = 0;
  unsigned int k0 = (unsigned int)key, k1 = (unsigned int)(key >> 32);
  for (int r = 0; r < 10; ++r) {
    unsigned long long p0 = 0xD2511F53ull * c0, p1 = 0xCD9E8D57ull * c2;
    unsigned int n0 = (unsigned int)(p1 >> 32) ^ c1 ^ k0, n2 = (unsigned int)(p0 >> 32) ^ c3 ^ k1;
    c1 = (unsigned int)p1; c3 = (unsigned int)p0; c0 = n0; c2 = n2;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  o[0] = c0; o[1] = c1; o[2] = c2; o[3] = c3;
}
// Consecutive elements share a block (4 float32 / 2 float64 per counter) and a
// scalar loop visits them in order: remember this thread's last block.
static inline void tp_philox_block(unsigned long long ctr, unsigned long long key, unsigned int o[4]) {
  static __thread unsigned long long last_ctr, last_key;
  static __thread unsigned int last[4];
  static __thread int valid;
  if (!valid || ctr != last_ctr || key != last_key) {
    tp_philox4x32(ctr, key, last);
    last_ctr = ctr; last_key = key; valid = 1;
  }
  o[0] = last[0]; o[1] = last[1]; o[2] = last[2]; o[3] = last[3];
}
static inline float tp_unit_f32(unsigned int x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }
static inline double tp_unit_f64(unsigned int hi, unsigned int lo) {
  return (double)((((unsigned long long)hi << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}
static inline float tp_philox_uniform_f32(i64 key, i64 first, i64 i) {
  unsigned int w[4];
  tp_philox_block((unsigned long long)first + (unsigned long long)(i >> 2), (unsigned long long)key, w);
  return tp_unit_f32(w[i & 3]);
}
static inline float tp_philox_normal_f32(i64 key, i64 first, i64 i) {
  unsigned int w[4];
  tp_philox_block((unsigned long long)first + (unsigned long long)(i >> 2), (unsigned long long)key, w);
  const int p = (int)((i & 3) >> 1);
  float u1 = tp_unit_f32(w[2 * p]) + (1.0f / 16777216.0f);
  float u2 = tp_unit_f32(w[2 * p + 1]);
  float rad = __builtin_sqrtf(-2.0f * __builtin_logf(u1));
  float a = 6.28318530717958647692f * u2;
  float v = (i & 1) ? rad * __builtin_sinf(a) : rad * __builtin_cosf(a);
  __asm__("" : "+v"(v));  // rounded here: not contracted into a consumer's add
  return v;
}
static inline double tp_philox_uniform_f64(i64 key, i64 first, i64 i) {
  unsigned int w[4];
  tp_philox_block((unsigned long long)first + (unsigned long long)(i >> 1), (unsigned long long)key, w);
  return (i & 1) ? tp_unit_f64(w[2], w[3]) : tp_unit_f64(w[0], w[1]);
}
static inline double tp_philox_normal_f64(i64 key, i64 first, i64 i) {
  unsigned int w[4];
  tp_philox_block((unsigned long long)first + (unsigned long long)(i >> 1), (unsigned long long)key, w);
  double u1 = tp_unit_f64(w[0], w[1]), u2 = tp_unit_f64(w[2], w[3]);
  double rad = __builtin_sqrt(-2.0 * __builtin_log(1.0 - u1));
  double a = 6.28318530717958647692 * u2;
  double v = (i & 1) ? rad * __builtin_sin(a) : rad * __builtin_cos(a);
  __asm__("" : "+v"(v));  // rounded here: not contracted into a consumer's add
  return v;
}
)TP";
}

}  // namespace tp::stax::codegen
