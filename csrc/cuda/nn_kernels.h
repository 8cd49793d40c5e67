// CUDA kernels of the CNN operators (issue 12 item 3): conv2d and its two
// gradient operators (cuDNN where it loads, else im2col / col2im NVRTC
// kernels around the cuBLASLt matmul), max / average / adaptive-average
// pooling and their gradients, and native_batch_norm (its statistics and
// normalization run as generated eager operators). Each function returns false for a call it does not
// cover (dtype, layout), and the dispatcher then tries Stax's generated
// operators or raises NotImplementedError naming the operator and device.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ops/registry.h"

namespace tp::cuda {

bool conv_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                 const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);
bool pool_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                 const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);
// nll_loss and nll_loss_grad (cuda/loss.cpp).
bool loss_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                 const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);
// native_dropout (cuda/dropout.cpp): the CPU's Philox stream, drawn on the device.
bool dropout_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                    const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);
bool batch_norm_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                       const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);

// Every source above for float32 and float64, as (kernel name, source): the
// tests compile them with NVRTC without a GPU (through all_kernel_sources).
std::vector<std::pair<std::string, std::string>> conv_kernel_sources();
std::vector<std::pair<std::string, std::string>> pool_kernel_sources();
std::vector<std::pair<std::string, std::string>> loss_kernel_sources();
std::vector<std::pair<std::string, std::string>> dropout_kernel_sources();

// Shared by the files above: the C type of a float dtype, a 1-D launch grid.
const char* float_ctype(DType d);
unsigned grid_1d(int64_t n, int threads);

}  // namespace tp::cuda
