// Derivatives of the differentiable special functions of ops/special_bessel_ops.cpp
// and ops/special_binary_ops.cpp, shared by their reverse formulas and their tangent
// formulas (autograd/jvp_rules_special.cpp), so the two cannot drift apart.
#pragma once
#include "core/tensor.h"

namespace tp {

// d op(x) / dx for a unary special function `op` (special_i0e, special_i1e, special_erfcx,
// special_log_ndtr, special_ndtri), given x and y = op(x).
Tensor special_unary_derivative(const char* op, const Tensor& x, const Tensor& y);
// d P(a, x) / dx (upper: d Q(a, x) / dx), in `dtype`; there is no formula in a.
Tensor incomplete_gamma_x_derivative(const Tensor& a, const Tensor& x, bool upper, DType dtype);

}  // namespace tp
