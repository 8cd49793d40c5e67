#include "core/scalar.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

}  // namespace tp
