// cuBLASLt, NVIDIA's GEMM library, loaded at run time like the driver and
// NVRTC (driver.h, nvrtc.h): from the system (libcublasLt.so.13/.12) or from
// NVIDIA's `nvidia-cublas` wheel, whose library folders tensorplay.cuda finds
// on sys.path and registers here. Nothing links against it, so the package
// builds and imports without it; the first CUDA matmul loads it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace tp::cuda {

// Library files tried before the system sonames (set once by tensorplay.cuda).
void add_cublaslt_candidates(const std::vector<std::string>& paths);
bool cublaslt_available();
// Why it is not available (library not found, entry point missing); empty when it is.
std::string cublaslt_why_unavailable();
// The file that was loaded ("" when none).
std::string cublaslt_path();

// TF32 tensor cores for float32 products (off by default, as in PyTorch:
// float32 results then match a float32 CPU product to float32 rounding).
void set_allow_tf32(bool on);
bool allow_tf32();

// One operand of a GEMM in cuBLASLt's own (column-major) terms.
struct LtMatrix {
  const void* data = nullptr;
  bool trans = false;         // op(X) = X^T
  int64_t rows = 0, cols = 0;  // of the stored matrix (before op)
  int64_t ld = 0;
  int64_t batch_stride = 0;
};

// A pointwise transform cuBLASLt applies to D in the GEMM's epilogue, after
// the bias: ReLU, or GELU in its tanh approximation
// (0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), cuBLASLt's only GELU).
enum class LtActivation { None, Relu, GeluTanh };

// D = act(alpha * op(A) op(B) + beta * C (+ bias[row] per row of D when `bias`)),
// with C = D (column-major rows x cols, leading dimension ld_d, `batch`
// matrices `d_batch_stride` apart). float32/float64/float16/bfloat16 in and
// out; 16-bit types accumulate in float32. Runs on device `device`'s legacy
// default stream with a per-device handle and workspace (caching allocator).
// Throws tp::Error naming `what` when cuBLASLt is missing or refuses.
void lt_matmul(int device, DType dtype, const LtMatrix& a, const LtMatrix& b, void* d, int64_t rows, int64_t cols,
               int64_t ld_d, int64_t d_batch_stride, int64_t batch, double alpha, double beta, const void* bias,
               const char* what, LtActivation act = LtActivation::None);

// cuBLASLt epilogues of training (cublasLtEpilogue_t values), for one
// unbatched product D = op(A) op(B):
//   GELU_AUX(_BIAS): D = gelu_tanh(AB (+ bias)), and `aux` receives AB (+ bias),
//     the pre-activation the backward needs (column-major, leading dim aux_ld,
//     a multiple of 8 elements);
//   DGELU(_BGRAD): D = AB * gelu_tanh'(aux) with aux the saved pre-activation
//     (BGRAD: `bias` receives D's row sums, the bias gradient);
//   BGRADA / BGRADB: D = AB, and `bias` receives the sums of A's rows / of B's
//     columns over the k dimension (a linear layer's bias gradient beside its
//     weight gradient), of length rows / cols of D.
enum class LtEpilogueKind : uint32_t {
  GeluAux = 160, GeluAuxBias = 164, DGelu = 192, DGeluBGrad = 208, BGradA = 256, BGradB = 512,
};
struct LtEpilogue {
  LtEpilogueKind kind;
  void* bias = nullptr;       // read (GELU_AUX_BIAS) or written (the gradients)
  void* aux = nullptr;        // written (GELU_AUX) or read (DGELU)
  int64_t aux_ld = 0;
};
void lt_matmul_epilogue(int device, DType dtype, const LtMatrix& a, const LtMatrix& b, void* d, int64_t rows,
                        int64_t cols, int64_t ld_d, const LtEpilogue& e, const char* what);

}  // namespace tp::cuda
