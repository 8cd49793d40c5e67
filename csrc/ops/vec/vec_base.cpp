// The pointwise kernels compiled for the baseline ISA of the build (SSE2 on x86-64): 4 float lanes.
// CMakeLists.txt gives this file its ISA flags; see vec_impl.h.
#define TP_VEC_NS base
#define TP_VEC_NAME "base"
#define TP_VEC_BYTES 16
#define TP_MVEC(f) _ZGVbN4v_##f
#define TP_MVEC2(f) _ZGVbN4vv_##f
#include "ops/vec/vec_impl.h"
