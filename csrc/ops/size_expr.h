// Sizes a derivative formula computes from its operands' sizes, kept with how
// they were computed. A formula reads sizes as plain ints (cat's gradient is
// the slice of g at [offset, offset + len), the offset a sum of the earlier
// inputs' sizes); traced with symbolic sizes, such an int is a number the trace
// cannot follow. A SizeExpr is its value plus its recipe, a constant and
// multiples of operands' sizes; the formula passes it to the operator through
// a SizedAttrsScope, and a symbolic trace (graph/tracer) turns the recipe into
// the operands' symbolic sizes, so the recorded operator gets a bound valid at
// every size. Outside such a trace only the value is used.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace tp::ops {

class SizeExpr {
 public:
  struct Term {
    Tensor tensor;
    int64_t dim;
    int64_t coef;
  };
  SizeExpr(int64_t constant = 0) : value_(constant), constant_(constant) {}  // NOLINT: a number is an expression
  // t.size(dim) (negative dims wrap).
  static SizeExpr size_of(const Tensor& t, int64_t dim);
  SizeExpr& operator+=(const SizeExpr& o);
  SizeExpr& operator-=(const SizeExpr& o);
  SizeExpr operator+(const SizeExpr& o) const { return SizeExpr(*this) += o; }
  SizeExpr operator-(const SizeExpr& o) const { return SizeExpr(*this) -= o; }
  int64_t value() const { return value_; }
  int64_t constant() const { return constant_; }
  const std::vector<Term>& terms() const { return terms_; }

 private:
  int64_t value_;
  int64_t constant_;
  std::vector<Term> terms_;
};

// An int (one expression) or int-list attribute of the operator the formula
// calls next, and how it was computed.
struct SizedAttr {
  const char* name;
  std::vector<SizeExpr> exprs;
};

// While alive: the operator calls on this thread have these attributes computed
// as these expressions (a node whose attribute of that name has that value
// takes the expression). Nests; the innermost one is current.
class SizedAttrsScope {
 public:
  explicit SizedAttrsScope(std::vector<SizedAttr> attrs);
  ~SizedAttrsScope();
  SizedAttrsScope(const SizedAttrsScope&) = delete;
  SizedAttrsScope& operator=(const SizedAttrsScope&) = delete;

 private:
  std::vector<SizedAttr> attrs_;
  const std::vector<SizedAttr>* prev_;
};

// The current scope's attributes (nullptr: none).
const std::vector<SizedAttr>* sized_attrs();

namespace testing {
// Testing only: scopes opened while set carry no expressions, so the formulas
// read their sizes as plain ints again (the static fallback of a symbolic
// training capture is tested through it).
void drop_size_recipes(bool drop);
}  // namespace testing

// slice(x, dim, start, end, step) with bounds computed from sizes (nullopt: open).
Tensor slice_sized(const Tensor& x, int64_t dim, const std::optional<SizeExpr>& start,
                   const std::optional<SizeExpr>& end, int64_t step = 1);
// full(x.sizes(), value, dtype) with x's sizes kept as such (a composite's
// constant of its input's shape).
Tensor full_like_sized(const Tensor& x, const Scalar& value, DType dtype);

}  // namespace tp::ops
