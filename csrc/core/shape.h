// Sizes and strides, and the data-free shape arithmetic every layer shares
// (eager kernels, shape inference, tracing, lowering).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tp {

// One extent. A plain integer today; symbolic sizes (dynamic shapes) will make
// this a type that can hold a symbol, so code spells `Dim`, not `int64_t`.
using Dim = int64_t;
using Shape = std::vector<Dim>;

int64_t numel(const Shape& sizes);
Shape contiguous_strides(const Shape& sizes);
bool is_contiguous(const Shape& sizes, const Shape& strides);
// Wraps a possibly negative dim into [0, ndim); throws IndexError naming `op`.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// Broadcast two shapes (NumPy rules); throws ValueError naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Strides that read `strides` (of `sizes`) as if broadcast to `target` (zeros on new/expanded dims).
Shape broadcast_strides(const Shape& sizes, const Shape& strides, const Shape& target);
std::string shape_str(const Shape& s);  // "[2, 3]"

}  // namespace tp
