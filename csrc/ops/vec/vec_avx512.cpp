// The pointwise kernels compiled for AVX-512 (F/DQ/BW/VL + FMA): 16 float lanes.
// CMakeLists.txt gives this file its ISA flags; see vec_impl.h.
#define TP_VEC_NS avx512
#define TP_VEC_NAME "avx512"
#define TP_VEC_BYTES 64
#define TP_MVEC(f) _ZGVeN16v_##f
#define TP_MVEC2(f) _ZGVeN16vv_##f
#include "ops/vec/vec_impl.h"
