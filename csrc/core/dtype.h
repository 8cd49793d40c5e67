// Element types. The set is small on purpose for now (the walking skeleton);
// adding a dtype means: an enum value, its traits below, and the dispatch macro.
#pragma once
#include <cstdint>
#include <string>

namespace tp {

enum class DType : uint8_t { Bool = 0, Int64 = 1, Float32 = 2, Float64 = 3 };
constexpr int kNumDTypes = 4;

int64_t itemsize(DType t);
const char* dtype_name(DType t);  // "float32", ...
inline bool is_floating(DType t) { return t == DType::Float32 || t == DType::Float64; }
inline bool is_integral(DType t, bool include_bool) {
  return t == DType::Int64 || (include_bool && t == DType::Bool);
}
// Promotion lattice of PyTorch restricted to our dtypes: bool < int64 < float32 < float64.
DType promote_types(DType a, DType b);
DType default_float_dtype();

template <class T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };

}  // namespace tp

// TP_DISPATCH_ALL(dtype, "opname", [&]<class T>() { ... });  calls the lambda with T = the C++ type.
#define TP_DISPATCH_CASE(enumv, ctype, ...) \
  case ::tp::DType::enumv:                  \
    return (__VA_ARGS__).template operator()<ctype>();

#define TP_DISPATCH_ALL(dt, opname, ...)                                                   \
  [&]() {                                                                                 \
    switch (dt) {                                                                         \
      TP_DISPATCH_CASE(Bool, bool, __VA_ARGS__)                                                    \
      TP_DISPATCH_CASE(Int64, int64_t, __VA_ARGS__)                                                \
      TP_DISPATCH_CASE(Float32, float, __VA_ARGS__)                                                \
      TP_DISPATCH_CASE(Float64, double, __VA_ARGS__)                                               \
    }                                                                                     \
    throw ::tp::TypeError(::tp::str(opname, ": unsupported dtype ", ::tp::dtype_name(dt))); \
  }()

#define TP_DISPATCH_FLOATING(dt, opname, ...)                                                    \
  [&]() {                                                                                       \
    switch (dt) {                                                                               \
      TP_DISPATCH_CASE(Float32, float, __VA_ARGS__)                                                      \
      TP_DISPATCH_CASE(Float64, double, __VA_ARGS__)                                                     \
      default:                                                                                  \
        break;                                                                                  \
    }                                                                                           \
    throw ::tp::TypeError(::tp::str(opname, ": expected a floating-point tensor but got dtype ", \
                                    ::tp::dtype_name(dt)));                                     \
  }()

#define TP_DISPATCH_NUMERIC(dt, opname, ...)                                                  \
  [&]() {                                                                                    \
    switch (dt) {                                                                            \
      TP_DISPATCH_CASE(Int64, int64_t, __VA_ARGS__)                                                   \
      TP_DISPATCH_CASE(Float32, float, __VA_ARGS__)                                                   \
      TP_DISPATCH_CASE(Float64, double, __VA_ARGS__)                                                  \
      default:                                                                               \
        break;                                                                               \
    }                                                                                        \
    throw ::tp::TypeError(::tp::str(opname, ": not supported for dtype ", ::tp::dtype_name(dt))); \
  }()
