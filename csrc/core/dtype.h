// Element types: PyTorch's ten common dtypes. Kernels compute in four of them
// (bool, int64, float32, float64: compute_dtype below); the narrow storage
// dtypes are converted around a kernel by the dispatcher unless the operator
// handles them itself (kAllDTypes).
#pragma once
#include <cstdint>
#include <string>

#include "core/half.h"

namespace tp {

enum class DType : uint8_t {
  Bool = 0,
  UInt8,
  Int8,
  Int16,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64,
};
constexpr int kNumDTypes = 10;

int64_t itemsize(DType t);
const char* dtype_name(DType t);  // "float32", ...
inline bool is_floating(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 || t == DType::BFloat16;
}
inline bool is_integral(DType t, bool include_bool) {
  return (t >= DType::UInt8 && t <= DType::Int64) || (include_bool && t == DType::Bool);
}
// The dtype a kernel computes in: narrow integers in int64, 16-bit floats in float32.
inline DType compute_dtype(DType t) {
  if (t >= DType::UInt8 && t <= DType::Int32) return DType::Int64;
  if (t == DType::Float16 || t == DType::BFloat16) return DType::Float32;
  return t;
}
inline bool is_compute_dtype(DType t) { return compute_dtype(t) == t; }
// PyTorch's promote_types: bool < integers < floating; uint8 with a signed
// type needs the next wider signed type; float16 with bfloat16 gives float32.
DType promote_types(DType a, DType b);
DType default_float_dtype();  // float32 unless set_default_float_dtype changed it
void set_default_float_dtype(DType t);  // floating dtypes only

template <class T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::Int8; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::Int16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::Float16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };

}  // namespace tp

// TP_DISPATCH_ALL(dtype, "opname", [&]<class T>() { ... });  calls the lambda with T = the C++ type
// of one of the four compute dtypes. TP_DISPATCH_EVERY covers all ten (conversions, data movement).
#define TP_DISPATCH_CASE(enumv, ctype, ...) \
  case ::tp::DType::enumv:                  \
    return (__VA_ARGS__).template operator()<ctype>();

// The case lists, nested so each dtype is spelled once: float < numeric < compute < every.
#define TP_CASES_FLOATING(...)                      \
  TP_DISPATCH_CASE(Float32, float, __VA_ARGS__)     \
  TP_DISPATCH_CASE(Float64, double, __VA_ARGS__)
#define TP_CASES_NUMERIC(...)                       \
  TP_DISPATCH_CASE(Int64, int64_t, __VA_ARGS__)     \
  TP_CASES_FLOATING(__VA_ARGS__)
#define TP_CASES_COMPUTE(...)                       \
  TP_DISPATCH_CASE(Bool, bool, __VA_ARGS__)         \
  TP_CASES_NUMERIC(__VA_ARGS__)
#define TP_CASES_EVERY(...)                                \
  TP_CASES_COMPUTE(__VA_ARGS__)                            \
  TP_DISPATCH_CASE(UInt8, uint8_t, __VA_ARGS__)            \
  TP_DISPATCH_CASE(Int8, int8_t, __VA_ARGS__)              \
  TP_DISPATCH_CASE(Int16, int16_t, __VA_ARGS__)            \
  TP_DISPATCH_CASE(Int32, int32_t, __VA_ARGS__)            \
  TP_DISPATCH_CASE(Float16, ::tp::Half, __VA_ARGS__)       \
  TP_DISPATCH_CASE(BFloat16, ::tp::BFloat16, __VA_ARGS__)

// A switch over `cases`; any other dtype raises TypeError("<message><dtype name>").
#define TP_DISPATCH_SWITCH(dt, cases, message, ...)                     \
  [&]() {                                                               \
    switch (dt) {                                                       \
      cases(__VA_ARGS__) default : break;                               \
    }                                                                   \
    throw ::tp::TypeError(::tp::str(message, ::tp::dtype_name(dt)));    \
  }()

#define TP_DISPATCH_ALL(dt, opname, ...) \
  TP_DISPATCH_SWITCH(dt, TP_CASES_COMPUTE, ::tp::str(opname, ": unsupported dtype "), __VA_ARGS__)
#define TP_DISPATCH_FLOATING(dt, opname, ...)                                                               \
  TP_DISPATCH_SWITCH(dt, TP_CASES_FLOATING, ::tp::str(opname, ": expected a floating-point tensor but got dtype "), \
                     __VA_ARGS__)
#define TP_DISPATCH_NUMERIC(dt, opname, ...) \
  TP_DISPATCH_SWITCH(dt, TP_CASES_NUMERIC, ::tp::str(opname, ": not supported for dtype "), __VA_ARGS__)
#define TP_DISPATCH_EVERY(dt, opname, ...) \
  TP_DISPATCH_SWITCH(dt, TP_CASES_EVERY, ::tp::str(opname, ": unsupported dtype "), __VA_ARGS__)
