// Non-tensor arguments of an operator call (dims, keepdim, dtype, fill value),
// kept by name so the graph printer can show `sum(x, dim=[-1], keepdim=False)`.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/scalar.h"

namespace tp {

using AttrValue = std::variant<std::monostate, int64_t, bool, Scalar, std::vector<int64_t>, DType, std::string>;

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<const char*, AttrValue>> items) : items_(items) {}
  void set(const char* name, AttrValue v);
  const AttrValue* find(const char* name) const;
  bool has(const char* name) const { return find(name) != nullptr; }
  template <class T> const T& get(const char* name) const {
    const AttrValue* v = find(name);
    TP_CHECK(v && std::holds_alternative<T>(*v), Error, "internal: missing or mistyped attribute '", name, "'");
    return std::get<T>(*v);
  }
  template <class T> T get_or(const char* name, T fallback) const {
    const AttrValue* v = find(name);
    return v && std::holds_alternative<T>(*v) ? std::get<T>(*v) : fallback;
  }
  // Typed readers shared by kernels: numbers accept any numeric alternative.
  double get_double(const char* name) const;
  std::optional<double> get_optional_double(const char* name) const;
  int64_t get_int(const char* name) const;
  std::optional<int64_t> get_optional_int(const char* name) const;
  Scalar get_scalar(const char* name) const;
  const std::string& get_str(const char* name) const { return get<std::string>(name); }
  bool is_none(const char* name) const {
    const AttrValue* v = find(name);
    return !v || std::holds_alternative<std::monostate>(*v);
  }
  const std::vector<std::pair<const char*, AttrValue>>& items() const { return items_; }
  bool operator==(const Attrs& o) const;
  size_t hash() const;

 private:
  // Names are string literals owned by the operator definitions.
  std::vector<std::pair<const char*, AttrValue>> items_;
};

std::string attr_repr(const AttrValue& v);  // Python-like literal
// A stable C string for an attribute name that does not come from a literal
// (names parsed from schemas, names from Python keyword arguments).
const char* intern_attr_name(std::string_view name);

}  // namespace tp
