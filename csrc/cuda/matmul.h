// The matrix-product family on CUDA through cuBLASLt (cublas.h): matmul (1-D,
// 2-D and batched operands with broadcasting, as on the CPU), mm, bmm, addmm,
// baddbmm (linear is a composite of these). float32/float64/float16/bfloat16.
#pragma once
#include <vector>

#include "ops/registry.h"

namespace tp::cuda {

// Runs `op` when it is one of the family and the dtype is covered; false
// otherwise (the dispatcher then tries the next kernel source).
bool matmul_kernel(const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                   const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out);

}  // namespace tp::cuda
