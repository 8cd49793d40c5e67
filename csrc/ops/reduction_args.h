// Reading the arguments every reduction shares: the reduced dims (attribute
// "dim" as int[], int, or None = all dims), keepdim, and dtype=.
#pragma once
#include <optional>
#include <variant>
#include <vector>

#include "ops/attrs.h"
#include "ops/kernel_util.h"

namespace tp::reduce {

inline std::vector<bool> mask_of(const char* op, int64_t ndim, const Attrs& attrs) {
  const AttrValue* v = attrs.find("dim");
  std::vector<int64_t> dims;
  if (v && std::holds_alternative<int64_t>(*v)) dims = {std::get<int64_t>(*v)};
  else if (v && std::holds_alternative<std::vector<int64_t>>(*v)) dims = std::get<std::vector<int64_t>>(*v);
  return reduction_mask(dims, ndim, op);
}

inline bool keepdim_of(const Attrs& attrs) { return attrs.get_or("keepdim", false); }

inline std::optional<DType> dtype_arg(const Attrs& attrs) {
  const AttrValue* v = attrs.find("dtype");
  if (v && std::holds_alternative<DType>(*v)) return std::get<DType>(*v);
  return std::nullopt;
}

// The reduced dims as a list (for calls to reduction operators).
inline std::vector<int64_t> dims_of(const std::vector<bool>& mask) {
  std::vector<int64_t> dims;
  for (size_t d = 0; d < mask.size(); ++d)
    if (mask[d]) dims.push_back(static_cast<int64_t>(d));
  return dims;
}

// Elements per reduced slice.
inline int64_t count_of(const Shape& sizes, const std::vector<bool>& mask) {
  int64_t c = 1;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (mask[d]) c *= sizes[d];
  return c;
}

}  // namespace tp::reduce
