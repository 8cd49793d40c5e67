// The binary elementwise kernels, shared by the pointwise family and the
// in-place arithmetic of the copy family.
#pragma once
#include "core/tensor.h"

namespace tp {

enum class BinaryOp { Add, Sub, Mul, Div, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge };

// out = a <op> b elementwise. a and b must have one dtype (the computation
// dtype); out has that dtype too, or bool for comparisons. a and b broadcast to
// out's shape; out may be strided and may alias a or b exactly.
void binary_kernel(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);

}  // namespace tp
