// PyTorch's result_type restricted to our dtypes (bool < int64 < float32 < float64).
//
// Operands fall into three priority classes: tensors with at least one
// dimension, 0-d tensors, and wrapped numbers (Python scalars, see
// Tensor::wrapped_scalar). A lower class can only raise the *category*
// (bool -> integer -> floating) of the result, never its width within a
// category: int64 tensor * 2.5 -> float32 (the default float), float32 tensor *
// 2.0 -> float32, float32 tensor * float64 0-d tensor -> float32, bool tensor +
// 1 -> int64. A wrapped float counts as the default float dtype.
#pragma once
#include <vector>

#include "core/tensor.h"

namespace tp {

// One operand as type promotion sees it.
struct PromotionOperand {
  DType dtype;
  int64_t dim;
  bool wrapped;
};

DType result_type(const std::vector<PromotionOperand>& operands);
// While one is alive (run_kernel of an operator whose every tensor operand is a
// Python number: yields_python_number in ops/dispatch.h), operands that are all
// wrapped numbers keep their own width (float64 / int64) instead of counting as
// the default float dtype: `1 - t` of a lifted float is Python's double.
struct PythonNumberArithmetic {
  PythonNumberArithmetic();
  ~PythonNumberArithmetic();
  PythonNumberArithmetic(const PythonNumberArithmetic&) = delete;
  PythonNumberArithmetic& operator=(const PythonNumberArithmetic&) = delete;
};
bool python_number_arithmetic();
DType result_type(const std::vector<TensorMeta>& operands);
DType result_type(const std::vector<Tensor>& operands);
// PyTorch's canCast: floating -> integral and non-bool -> bool are refused.
bool can_cast(DType from, DType to);

// Whether a meta describes a wrapped number. TensorMeta gains a
// `wrapped_number` field in core; until it has one, metas of wrapped numbers
// read as ordinary 0-d tensors (only the width of a float64 scalar differs).
template <class M>
bool meta_is_wrapped(const M& m) {
  if constexpr (requires { m.wrapped_number; }) {
    return m.wrapped_number;
  } else {
    return false;
  }
}

}  // namespace tp
