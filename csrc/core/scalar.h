// A Python-like number: bool, int64 or double, remembering which it was so that
// type promotion treats `x * 2` and `x * 2.0` the way PyTorch does.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace tp {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float };
  Scalar() : kind_(Kind::Int), i_(0) {}
  Scalar(bool v) : kind_(Kind::Bool), i_(v) {}
  Scalar(int v) : kind_(Kind::Int), i_(v) {}
  Scalar(int64_t v) : kind_(Kind::Int), i_(v) {}
  Scalar(double v) : kind_(Kind::Float), d_(v) {}
  Kind kind() const { return kind_; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  double to_double() const { return kind_ == Kind::Float ? d_ : static_cast<double>(i_); }
  int64_t to_int() const { return kind_ == Kind::Float ? static_cast<int64_t>(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::Float ? d_ != 0.0 : i_ != 0; }
  template <class T> T to() const {
    if constexpr (std::is_same_v<T, bool>) return to_bool();
    else if constexpr (std::is_integral_v<T>) return static_cast<T>(to_int());
    else return static_cast<T>(to_double());
  }
  // The dtype a 0-d tensor made from this number gets (float -> default float).
  DType natural_dtype() const;
  std::string repr() const;  // Python literal: True, 3, 2.0, float('inf')
  bool operator==(const Scalar& o) const;

 private:
  Kind kind_;
  union {
    int64_t i_;
    double d_;
  };
};

// Raises ValueError naming `op` when `v` cannot be stored in `t` without overflow, as PyTorch's
// fill/full/masked_fill do: an int outside the integer dtype's range (unsigned types also take
// -max .. -1, which wrap, as PyTorch allows), a NaN/inf or out-of-range float meeting an integer
// dtype, a finite float beyond a float dtype's largest finite value. Without it
// `tp.zeros(2, dtype=tp.uint8).fill_(300)` gave 44 and `tp.full((2,), nan, dtype=tp.int32)` 0.
void check_scalar_fits(const Scalar& v, DType t, const char* op);

}  // namespace tp
