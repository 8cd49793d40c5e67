#include "core/dtype.h"

#include "core/error.h"

namespace tp {

int64_t itemsize(DType t) {
  switch (t) {
    case DType::Bool: return 1;
    case DType::Int64: return 8;
    case DType::Float32: return 4;
    case DType::Float64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::Int64: return "int64";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "?";
}

DType promote_types(DType a, DType b) {
  // The enum is ordered along the promotion lattice.
  return static_cast<uint8_t>(a) >= static_cast<uint8_t>(b) ? a : b;
}

DType default_float_dtype() { return DType::Float32; }

}  // namespace tp
