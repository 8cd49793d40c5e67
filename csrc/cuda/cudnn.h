// cuDNN, NVIDIA's convolution library, loaded at run time like the driver,
// NVRTC and cuBLASLt: libcudnn.so.9 from NVIDIA's `nvidia-cudnn-cu13/-cu12`
// wheel (the folder tensorplay.cuda finds on sys.path and registers here) or
// the system. Nothing links against it and no cuDNN header is needed to
// build; without it conv2d on CUDA runs as im2col + cuBLASLt (cuda/conv.cpp).
// Only the legacy convolution API that cuDNN 9 still ships is used: tensor,
// filter and convolution descriptors, the algorithm search and
// cudnnConvolutionForward / BackwardData / BackwardFilter.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace tp::cuda {

// Library files tried before the system sonames (set once by tensorplay.cuda).
void add_cudnn_candidates(const std::vector<std::string>& paths);
bool cudnn_available();
// Why it is not available (library not found, too old, entry point missing); empty when it is.
std::string cudnn_why_unavailable();
std::string cudnn_path();
int cudnn_version();  // e.g. 92801; 0 when not loaded
// tp.backends.cudnn.enabled: off sends conv2d to im2col even where cuDNN loads.
void set_cudnn_enabled(bool on);
bool cudnn_enabled();
// Convolutions run through cuDNN so far (tests check which path ran).
int64_t cudnn_conv_calls();

// The geometry of one NCHW convolution: input [N, C, H, W], weight
// [O, C/G, kh, kw], output [N, O, Ho, Wo]; every tensor contiguous.
struct ConvShape {
  int64_t N, C, H, W, O, G, kh, kw, Ho, Wo, ph, pw, sh, sw, dh, dw;
};

enum class ConvPass {
  Forward,         // out = conv(a = x, b = w)
  BackwardData,    // out = dx from (a = dy, b = w)
  BackwardFilter,  // out = dw from (a = dy, b = x)
};

// True when cuDNN is loaded and enabled and covers this problem (float32,
// float64, float16, bfloat16; every size within its 32-bit indexing).
bool cudnn_covers(DType dtype, const ConvShape& s);

// Runs one pass on device `device`'s current stream. The algorithm is chosen
// once per problem (shape, dtype, math mode, pointer alignments) by timing
// cuDNN's candidates (a deterministic one for the backward passes; the best
// few timed again per call, host work included), or by its heuristic while
// a CUDA graph is captured; float32 uses FMA math (no
// TF32) unless tp.backends.cuda.matmul.allow_tf32 is on; float16/bfloat16
// accumulate in float32 on tensor cores. The workspace comes from the
// caching allocator. Throws tp::Error naming `what` when cuDNN refuses.
void cudnn_convolution(int device, DType dtype, ConvPass pass, const ConvShape& s, const void* a, const void* b,
                       void* out, const char* what);

// y[n][o][h][w] += bias[o] (contiguous y of shape [N, O, Ho, Wo]).
void cudnn_add_bias(int device, DType dtype, const ConvShape& s, const void* bias, void* y, const char* what);

}  // namespace tp::cuda
