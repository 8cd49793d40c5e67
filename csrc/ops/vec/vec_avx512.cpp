// The pointwise kernels compiled for AVX-512 (F/DQ/BW/VL + FMA): 16 float lanes.
// CMakeLists.txt gives this file its ISA flags; see vec_impl.h.
#define TP_VEC_NS avx512
#define TP_VEC_NAME "avx512"
#define TP_VEC_BYTES 64
#define TP_MVEC(f) _ZGVeN16v_##f
#define TP_MVEC2(f) _ZGVeN16vv_##f
#if defined(__AVX512F__)
#include <cstdint>
namespace tp::vec::avx512 {
// sgemm_avx512.cpp
void sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
}
#define TP_VEC_SGEMM sgemm
#endif
#include "ops/vec/vec_impl.h"
