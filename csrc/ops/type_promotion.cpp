#include "ops/type_promotion.h"

namespace tp {
namespace {

enum class Category { None, Bool, Integral, Floating };

Category category(DType t) {
  if (t == DType::Bool) return Category::Bool;
  if (is_floating(t)) return Category::Floating;
  return Category::Integral;
}

struct Slot {  // the promoted dtype of one priority class; `set` false = no operand yet
  bool set = false;
  DType dtype = DType::Bool;
  void add(DType t) {
    dtype = set ? promote_types(dtype, t) : t;
    set = true;
  }
};

// combine_categories of PyTorch: `higher` wins unless `lower` is of a higher
// category (or `higher` is bool), in which case the two are promoted.
Slot combine(const Slot& higher, const Slot& lower) {
  if (!higher.set) return lower;
  if (!lower.set) return higher;
  if (category(higher.dtype) == Category::Floating) return higher;
  if (higher.dtype == DType::Bool || category(lower.dtype) == Category::Floating) {
    Slot s = higher;
    s.add(lower.dtype);
    return s;
  }
  return higher;
}

}  // namespace

namespace {
thread_local int t_python_numbers = 0;
}  // namespace

bool python_number_arithmetic() { return t_python_numbers > 0; }
PythonNumberArithmetic::PythonNumberArithmetic() { ++t_python_numbers; }
PythonNumberArithmetic::~PythonNumberArithmetic() { --t_python_numbers; }

DType result_type(const std::vector<PromotionOperand>& operands) {
  Slot dimmed, zero_dim, wrapped, numbers;
  for (const auto& o : operands) {
    if (o.wrapped) {
      // A Python float counts as the default float dtype, not float64.
      wrapped.add(is_floating(o.dtype) ? default_float_dtype() : o.dtype);
      numbers.add(o.dtype);
    } else if (o.dim == 0) {
      zero_dim.add(o.dtype);
    } else {
      dimmed.add(o.dtype);
    }
  }
  // An operator among Python numbers only (lifted float / int inputs and what is
  // computed from them, `1 - t`): Python's own arithmetic, in float64 / int64.
  // Not for where(mask, 1.0, 2.0), whose mask is a tensor: the scope says.
  if (python_number_arithmetic() && !dimmed.set && !zero_dim.set && numbers.set) return numbers.dtype;
  Slot r = combine(dimmed, combine(zero_dim, wrapped));
  return r.set ? r.dtype : default_float_dtype();
}

DType result_type(const std::vector<TensorMeta>& operands) {
  std::vector<PromotionOperand> ops;
  ops.reserve(operands.size());
  for (const auto& m : operands)
    ops.push_back({m.dtype, static_cast<int64_t>(m.sizes.size()), meta_is_wrapped(m)});
  return result_type(ops);
}

DType result_type(const std::vector<Tensor>& operands) {
  std::vector<PromotionOperand> ops;
  ops.reserve(operands.size());
  for (const auto& t : operands) ops.push_back({t.dtype(), t.dim(), t.is_wrapped_number()});
  return result_type(ops);
}

bool can_cast(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  if (from != DType::Bool && to == DType::Bool) return false;
  return true;
}

}  // namespace tp
