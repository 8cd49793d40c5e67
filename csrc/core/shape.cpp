#include "core/shape.h"

#include "core/error.h"

// <iostream> is included for its side effect only. Since GCC 13 the standard
// streams and the classic locale are set up by an object of libstdc++ that a
// translation unit pulls in by including <iostream>. When the compiler links
// libstdc++ statically (a GCC built --with-static-standard-libraries, as on the
// GPU machine) and no TU includes it, that object is left out and the first
// `ostringstream << long` (shape_str, used by every error message and by
// Graph::code) jumps through an uninitialized facet and segfaults. This file is
// linked into every binary, so the set-up is always there.
#include <iostream>

namespace tp {

int64_t numel(const Shape& sizes) {
  int64_t n = 1;
  for (auto s : sizes) n *= s;
  return n;
}

Shape contiguous_strides(const Shape& sizes) {
  Shape st(sizes.size());
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    st[i] = acc;
    acc *= sizes[i] > 1 ? sizes[i] : 1;
  }
  return st;
}

bool is_contiguous(const Shape& sizes, const Shape& strides) {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;  // the stride of a size-1 dim never matters
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = ndim == 0 ? 1 : ndim;  // a 0-d tensor accepts dim 0 / -1 like PyTorch
  TP_CHECK(dim >= -n && dim < n, IndexError, op, ": dimension out of range (expected to be in range of [",
           -n, ", ", n - 1, "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TP_CHECK(da == db || da == 1 || db == 1, ValueError, op, ": shapes ", shape_str(a), " and ", shape_str(b),
             " cannot be broadcast together (size ", da, " vs ", db, " at dimension ", i, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(const Shape& sizes, const Shape& strides, const Shape& target) {
  Shape out(target.size(), 0);
  size_t off = target.size() - sizes.size();
  for (size_t i = 0; i < sizes.size(); ++i) out[off + i] = sizes[i] == 1 ? 0 : strides[i];
  return out;
}

std::string shape_str(const Shape& s) { return str(s); }

}  // namespace tp
