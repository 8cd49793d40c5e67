// The GEMM extern call: mm / bmm / matmul / addmm / baddbmm straight through
// BLAS on the planned buffers. Operands are strided views whose last two dims
// BLAS reads in place (row- or column-major with a leading dimension; the
// lowering realized any other operand); batch dims may have any strides,
// including 0 (broadcast). The result is written into `out` (contiguous).
#pragma once
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/attrs.h"

namespace tp::stax {

// in: [bias,] A, B as for the operator; out: contiguous, the operator's result shape.
void run_gemm_extern(const std::string& op, const Attrs& attrs, const std::vector<Tensor>& in, const Tensor& out);

}  // namespace tp::stax
