#include "core/scalar.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace tp {

DType Scalar::natural_dtype() const {
  switch (kind_) {
    case Kind::Bool: return DType::Bool;
    case Kind::Int: return DType::Int64;
    case Kind::Float: return default_float_dtype();
  }
  return DType::Float32;
}

std::string Scalar::repr() const {
  switch (kind_) {
    case Kind::Bool: return i_ ? "True" : "False";
    case Kind::Int: return std::to_string(i_);
    case Kind::Float: {
      if (std::isnan(d_)) return "float('nan')";
      if (std::isinf(d_)) return d_ > 0 ? "float('inf')" : "float('-inf')";
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", d_);
      std::string s(buf);
      // Shortest form that round-trips, and always looks like a float.
      for (int prec = 1; prec <= 17; ++prec) {
        std::snprintf(buf, sizeof buf, "%.*g", prec, d_);
        if (std::strtod(buf, nullptr) == d_) { s = buf; break; }
      }
      if (s.find_first_of(".en") == std::string::npos) s += ".0";
      return s;
    }
  }
  return "?";
}

bool Scalar::operator==(const Scalar& o) const {
  if (kind_ != o.kind_) return false;
  if (kind_ == Kind::Float) return std::memcmp(&d_, &o.d_, sizeof d_) == 0;  // NaN == NaN for keys
  return i_ == o.i_;
}

void check_scalar_fits(const Scalar& v, DType t, const char* op) {
  if (t == DType::Bool || v.is_bool()) return;
  bool fits = true;
  if (is_integral(t, false)) {
    int bits = static_cast<int>(itemsize(t)) * 8;
    const bool is_unsigned = t == DType::UInt8;
    // [lo, hi] as doubles is exact enough at these widths (int64 is handled by the int path below).
    const double hi = bits == 64 ? 9223372036854775807.0 : (is_unsigned ? std::ldexp(1.0, bits) - 1 : std::ldexp(1.0, bits - 1) - 1);
    const double lo = is_unsigned ? -hi : (bits == 64 ? -9223372036854775808.0 : -std::ldexp(1.0, bits - 1));
    if (v.is_float()) {
      const double d = v.to_double();
      fits = std::isfinite(d) && d >= lo && (bits == 64 ? d < 9223372036854775808.0 : d <= hi);
    } else if (bits < 64) {
      const int64_t i = v.to_int();
      fits = static_cast<double>(i) >= lo && static_cast<double>(i) <= hi;
    }
  } else if (v.is_float() && std::isfinite(v.to_double())) {
    const double a = std::fabs(v.to_double());
    if (t == DType::Float16) fits = a < 65520.0;  // rounds to 65504 below this, to inf at or above
    else if (t == DType::BFloat16 || t == DType::Float32) fits = a <= static_cast<double>(std::numeric_limits<float>::max()) * (1 + std::ldexp(1.0, -25));
  }
  TP_CHECK(fits, ValueError, op, ": value ", v.repr(), " cannot be converted to type ", dtype_name(t),
           " without overflow");
}

}  // namespace tp
