// Shared by the convolution and pooling operators (ops/conv_ops.cpp,
// ops/pool_ops.cpp): reading int[2] attributes and the 2-D window geometry.
#pragma once
#include <array>

#include "ops/attrs.h"
#include "ops/kernel_util.h"

namespace tp {

void register_conv_ops();  // ops/conv_ops.cpp
void register_pool_ops();  // ops/pool_ops.cpp
void register_conv_transpose_ops();  // ops/conv_transpose_ops.cpp

using Pair = std::array<int64_t, 2>;

// An int[2] attribute (one int broadcasts); `fallback` when absent or empty.
inline Pair pair_attr(const Attrs& attrs, const char* name, const char* op, std::optional<Pair> fallback = {}) {
  const AttrValue* v = attrs.find(name);
  if (v) {
    if (auto* i = std::get_if<int64_t>(v)) return {*i, *i};
    if (auto* xs = std::get_if<std::vector<int64_t>>(v)) {
      if (xs->size() == 1) return {(*xs)[0], (*xs)[0]};
      if (xs->size() == 2) return {(*xs)[0], (*xs)[1]};
      TP_CHECK(xs->empty() && fallback, ValueError, op, ": ", name, " must have 1 or 2 elements, got ", xs->size());
    }
  }
  TP_CHECK(fallback, ValueError, op, ": missing argument ", name);
  return *fallback;
}

// The (N, C, H, W) view of a 4-D or unbatched 3-D tensor.
inline Tensor as_batched(const Tensor& t) {
  if (t.dim() == 4) return t;
  Shape s = t.sizes(), st = t.strides();
  s.insert(s.begin(), 1);
  st.insert(st.begin(), 0);
  return t.as_strided(s, st, t.offset());
}

}  // namespace tp
