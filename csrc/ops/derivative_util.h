// Helpers for derivative formulas (OpDef::backward). They are written with
// the operators of ops.h only, so a formula traced into a joint graph records
// plain operator calls.
#pragma once
#include "ops/ops.h"
#include "ops/registry.h"

namespace tp::ops {

// The gradient for `input` from the gradient of a (broadcast) result: summed
// over the broadcast dims and cast to the input's dtype.
inline Tensor reduce_grad(const Tensor& grad, const Tensor& input) {
  Tensor g = sum_to(grad, input.sizes());
  return g.dtype() == input.dtype() ? g : to_dtype(g, input.dtype());
}

// The gradient of the single output, or undefined when none flowed.
inline const Tensor& grad_out(const BackwardArgs& a) { return a.grad_outputs[0]; }

// False for a saved value that autograd did not keep because the formula does
// not read it (OpDef::saved): a placeholder with the value's sizes, strides,
// dtype and device but no memory, refused as an operator argument. A formula
// that converts all its saved values up front (16-bit widening) skips those
// (and empty tensors, which have nothing to convert either).
inline bool holds_data(const Tensor& t) { return t.impl()->storage->nbytes() > 0; }

inline bool any_needed(const BackwardArgs& a) {
  for (bool b : a.needs_grad)
    if (b) return true;
  return false;
}

}  // namespace tp::ops
