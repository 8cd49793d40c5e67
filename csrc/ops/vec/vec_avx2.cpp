// The pointwise kernels compiled for AVX2 + FMA: 8 float lanes.
// CMakeLists.txt gives this file its ISA flags; see vec_impl.h.
#define TP_VEC_NS avx2
#define TP_VEC_NAME "avx2"
#define TP_VEC_BYTES 32
#define TP_MVEC(f) _ZGVdN8v_##f
#define TP_MVEC2(f) _ZGVdN8vv_##f
#include "ops/vec/vec_impl.h"
