#include "ops/size_expr.h"

#include <atomic>

#include "core/shape.h"
#include "ops/ops.h"

namespace tp::ops {
namespace {
thread_local const std::vector<SizedAttr>* t_sized = nullptr;
std::atomic<bool> g_drop_recipes{false};
}  // namespace

void testing::drop_size_recipes(bool drop) { g_drop_recipes = drop; }

SizeExpr SizeExpr::size_of(const Tensor& t, int64_t dim) {
  const int64_t d = wrap_dim(dim, t.dim(), "size");
  SizeExpr e;
  e.value_ = t.sizes()[static_cast<size_t>(d)];
  e.terms_.push_back({t, d, 1});
  return e;
}

SizeExpr& SizeExpr::operator+=(const SizeExpr& o) {
  value_ += o.value_;
  constant_ += o.constant_;
  terms_.insert(terms_.end(), o.terms_.begin(), o.terms_.end());
  return *this;
}

SizeExpr& SizeExpr::operator-=(const SizeExpr& o) {
  value_ -= o.value_;
  constant_ -= o.constant_;
  for (const Term& t : o.terms_) terms_.push_back({t.tensor, t.dim, -t.coef});
  return *this;
}

SizedAttrsScope::SizedAttrsScope(std::vector<SizedAttr> attrs) : attrs_(std::move(attrs)), prev_(t_sized) {
  if (g_drop_recipes) attrs_.clear();
  t_sized = &attrs_;
}

SizedAttrsScope::~SizedAttrsScope() { t_sized = prev_; }

const std::vector<SizedAttr>* sized_attrs() { return t_sized; }

Tensor slice_sized(const Tensor& x, int64_t dim, const std::optional<SizeExpr>& start,
                   const std::optional<SizeExpr>& end, int64_t step) {
  std::vector<SizedAttr> sized;
  if (start) sized.push_back({"start", {*start}});
  if (end) sized.push_back({"end", {*end}});
  SizedAttrsScope scope(std::move(sized));
  return slice(x, dim, start ? std::optional<int64_t>(start->value()) : std::nullopt,
               end ? std::optional<int64_t>(end->value()) : std::nullopt, step);
}

}  // namespace tp::ops

namespace tp::ops {

Tensor full_like_sized(const Tensor& x, const Scalar& value, DType dtype) {
  if (x.device().kind != Device::Kind::CPU) return full_on(x, x.sizes(), value, dtype);
  std::vector<SizeExpr> sizes;
  for (int64_t d = 0; d < x.dim(); ++d) sizes.push_back(SizeExpr::size_of(x, d));
  SizedAttrsScope scope({{"size", std::move(sizes)}});
  return full(x.sizes(), value, dtype);
}

}  // namespace tp::ops
