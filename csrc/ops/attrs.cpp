#include "ops/attrs.h"

#include <cstring>
#include <functional>
#include <mutex>
#include <unordered_set>

namespace tp {

void Attrs::set(const char* name, AttrValue v) {
  for (auto& [k, val] : items_)
    if (std::strcmp(k, name) == 0) { val = std::move(v); return; }
  items_.emplace_back(name, std::move(v));
}

const AttrValue* Attrs::find(const char* name) const {
  for (auto& [k, val] : items_)
    if (k == name || std::strcmp(k, name) == 0) return &val;
  return nullptr;
}

bool Attrs::operator==(const Attrs& o) const {
  if (items_.size() != o.items_.size()) return false;
  for (size_t i = 0; i < items_.size(); ++i)
    if (std::strcmp(items_[i].first, o.items_[i].first) != 0 || !(items_[i].second == o.items_[i].second)) return false;
  return true;
}

size_t Attrs::hash() const {
  size_t h = items_.size();
  auto mix = [&](size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  for (auto& [k, v] : items_) {
    mix(std::hash<std::string_view>()(k));
    mix(v.index());
    mix(std::hash<std::string>()(attr_repr(v)));
  }
  return h;
}

namespace {
std::optional<Scalar> as_scalar(const AttrValue* v) {
  if (!v) return std::nullopt;
  if (auto* i = std::get_if<int64_t>(v)) return Scalar(*i);
  if (auto* b = std::get_if<bool>(v)) return Scalar(*b);
  if (auto* s = std::get_if<Scalar>(v)) return *s;
  return std::nullopt;
}
}  // namespace

Scalar Attrs::get_scalar(const char* name) const {
  auto s = as_scalar(find(name));
  TP_CHECK(s, Error, "internal: missing or non-numeric attribute '", name, "'");
  return *s;
}
double Attrs::get_double(const char* name) const { return get_scalar(name).to_double(); }
int64_t Attrs::get_int(const char* name) const { return get_scalar(name).to_int(); }
std::optional<double> Attrs::get_optional_double(const char* name) const {
  auto s = as_scalar(find(name));
  return s ? std::optional<double>(s->to_double()) : std::nullopt;
}
std::optional<int64_t> Attrs::get_optional_int(const char* name) const {
  auto s = as_scalar(find(name));
  return s ? std::optional<int64_t>(s->to_int()) : std::nullopt;
}

const char* intern_attr_name(std::string_view name) {
  static std::mutex mu;
  static std::unordered_set<std::string> names;  // node-based: c_str() stays valid
  std::lock_guard<std::mutex> lock(mu);
  return names.emplace(name).first->c_str();
}

std::string attr_repr(const AttrValue& v) {
  struct V {
    std::string operator()(std::monostate) const { return "None"; }
    std::string operator()(int64_t x) const { return std::to_string(x); }
    std::string operator()(bool x) const { return x ? "True" : "False"; }
    std::string operator()(const Scalar& s) const { return s.repr(); }
    std::string operator()(const std::vector<int64_t>& xs) const { return str(xs); }
    std::string operator()(DType d) const { return std::string("tp.") + dtype_name(d); }
    std::string operator()(const std::string& x) const { return "'" + x + "'"; }
  };
  return std::visit(V{}, v);
}

}  // namespace tp
