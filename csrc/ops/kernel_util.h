// Building blocks shared by the eager kernels of several operator families:
// allocation from an inferred meta, dtype-converting strided copies, fills,
// and the shape arithmetic that both inference and kernels need (reduction
// dims, view strides). Nothing here goes through the dispatcher: a kernel that
// called an operator would be recorded twice by the tracer.
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/tensor.h"
#include "ops/attrs.h"

namespace tp {

Tensor alloc_out(const TensorMeta& m);
// Writes src (broadcast to dst's shape) into dst, converting the dtype.
void copy_into(const Tensor& dst, const Tensor& src);
// t itself if it already has `dtype`, else a contiguous converted copy.
Tensor convert(const Tensor& t, DType dtype);
Tensor contiguous_copy(const Tensor& t);
Tensor as_contiguous(const Tensor& t);  // t itself if contiguous
void fill(const Tensor& dst, const Scalar& value);
// True when the two tensors may share memory (same storage). Used to copy an
// operand first when an in-place write could overwrite it before it is read.
bool may_overlap(const Tensor& a, const Tensor& b);

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Scalar conversion with C++'s undefined cases defined: NaN and out-of-range
// floats become INT64_MIN before narrowing (what x86 gives), anything non-zero
// becomes true. 16-bit floats convert through float32.
template <class To, class From>
inline To cast_value(From v) {
  if constexpr (is_half_v<From>) {
    return cast_value<To>(static_cast<float>(v));
  } else if constexpr (is_half_v<To>) {
    return To(cast_value<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    if (!(v >= From(-9223372036854775808.0) && v < From(9223372036854775808.0)))
      return static_cast<To>(std::numeric_limits<int64_t>::min());
    return static_cast<To>(static_cast<int64_t>(v));
  } else {
    return static_cast<To>(v);
  }
}

// ---- shape arithmetic ----
// Throws ValueError naming `op` if a size is negative.
void check_sizes(const Shape& sizes, const char* op);
// Resolves one -1 in `requested` against `numel` (view/reshape rules).
Shape infer_view_size(const Shape& requested, int64_t numel, const char* op);
// Strides for viewing (sizes, strides) as `new_sizes` without copying, or
// nullopt when the memory layout does not allow it (PyTorch's computeStride).
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& new_sizes);
// Which dims a reduction reduces: empty `dims` = all; wraps negative dims,
// rejects repeats. Always `ndim` entries (a 0-d tensor: none).
std::vector<bool> reduction_mask(const std::vector<int64_t>& dims, int64_t ndim, const char* op);
Shape reduced_shape(const Shape& sizes, const std::vector<bool>& mask, bool keepdim);
// Reads a vector attribute as a Shape.
Shape attr_shape(const Attrs& attrs, const char* name);

}  // namespace tp
