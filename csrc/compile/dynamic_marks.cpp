#include "compile/dynamic_marks.h"

#include <memory>
#include <mutex>
#include <unordered_map>

namespace tp::compile {
namespace {

struct Entry {
  std::weak_ptr<TensorImpl> alive;  // a reused address must not inherit the marks
  std::map<int64_t, DimMark> dims;
};
std::mutex g_mutex;
std::unordered_map<const TensorImpl*, Entry>& table() {
  static std::unordered_map<const TensorImpl*, Entry> t;
  return t;
}

}  // namespace

void mark_dim(const Tensor& t, int64_t dim, DimMark mark) {
  TP_CHECK(t.defined(), ValueError, "mark_dynamic: expected a tensor");
  const int64_t nd = t.dim();
  TP_CHECK(dim >= -nd && dim < nd, IndexError, "mark_dynamic: dim ", dim, " is out of range for a tensor with ", nd,
           " dims");
  if (dim < 0) dim += nd;
  TP_CHECK(mark.min <= mark.max, ValueError, "mark_dynamic: min ", mark.min, " is above max ", mark.max);
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& tab = table();
  for (auto it = tab.begin(); it != tab.end();) it = it->second.alive.expired() ? tab.erase(it) : std::next(it);
  Entry& e = tab[t.impl()];
  e.alive = t.impl_ptr();
  e.dims[dim] = mark;
}

std::map<int64_t, DimMark> dim_marks(const Tensor& t) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& tab = table();
  if (tab.empty()) return {};
  auto it = tab.find(t.impl());
  if (it == tab.end() || it->second.alive.expired()) return {};
  return it->second.dims;
}

}  // namespace tp::compile
