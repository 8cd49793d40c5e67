#include "ops/kernel_util.h"

#include <algorithm>
#include <cstring>

#include "ops/tensor_iterator.h"

namespace tp {

Tensor alloc_out(const TensorMeta& m) { return Tensor::empty_strided(m.sizes, m.strides, m.dtype); }

namespace {
// A copy whose source walks memory across the destination's rows (a
// transpose: the source's unit stride is on the destination's second-innermost
// dim) goes tile by tile so both sides stay in cache.
template <class To, class From>
bool tiled_copy(const TensorIterator& it) {
  const int nd = it.ndim();
  if (nd < 2) return false;
  const int64_t os1 = it.stride(0, nd - 1), is1 = it.stride(1, nd - 1);
  const int64_t os0 = it.stride(0, nd - 2), is0 = it.stride(1, nd - 2);
  if (os1 != static_cast<int64_t>(sizeof(To)) || is0 != static_cast<int64_t>(sizeof(From)) || is1 == is0) return false;
  const int64_t rows = it.shape()[nd - 2], cols = it.shape()[nd - 1];
  if (rows < 16 || cols < 16) return false;
  constexpr int64_t kTile = 32;
  const int64_t row_tiles = (rows + kTile - 1) / kTile;
  int64_t outer = 1;
  for (int d = 0; d < nd - 2; ++d) outer *= it.shape()[d];
  parallel_for(0, outer * row_tiles, std::max<int64_t>(1, kGrainSize / (kTile * cols)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / row_tiles, r0 = (t % row_tiles) * kTile, r1 = std::min(rows, r0 + kTile);
      char* po = it.data(0);
      const char* pi = it.data(1);
      for (int d = nd - 3; d >= 0; --d) {
        int64_t idx = o % it.shape()[d];
        o /= it.shape()[d];
        po += idx * it.stride(0, d);
        pi += idx * it.stride(1, d);
      }
      for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const int64_t c1 = std::min(cols, c0 + kTile);
        for (int64_t r = r0; r < r1; ++r) {
          To* orow = reinterpret_cast<To*>(po + r * os0);
          const char* irow = pi + r * is0;
          for (int64_t c = c0; c < c1; ++c) orow[c] = cast_value<To>(*reinterpret_cast<const From*>(irow + c * is1));
        }
      }
    }
  });
  return true;
}

template <class To, class From>
void copy_loop(const TensorIterator& it) {
  if (it.numel() >= kGrainSize / 4 && tiled_copy<To, From>(it)) return;
  it.for_each([](char** d, const int64_t* s, int64_t n) {
    if constexpr (std::is_same_v<To, From>) {
      if (s[0] == sizeof(To) && s[1] == sizeof(From)) {
        std::memcpy(d[0], d[1], static_cast<size_t>(n) * sizeof(To));
        return;
      }
    }
    To* o = reinterpret_cast<To*>(d[0]);
    const From* a = reinterpret_cast<const From*>(d[1]);
    if (s[0] == sizeof(To) && s[1] == sizeof(From)) {
      for (int64_t i = 0; i < n; ++i) o[i] = cast_value<To>(a[i]);
    } else if (s[0] == sizeof(To) && s[1] == 0) {
      const To v = cast_value<To>(*a);
      for (int64_t i = 0; i < n; ++i) o[i] = v;
    } else {
      char* po = d[0];
      const char* pa = d[1];
      for (int64_t i = 0; i < n; ++i, po += s[0], pa += s[1])
        *reinterpret_cast<To*>(po) = cast_value<To>(*reinterpret_cast<const From*>(pa));
    }
  });
}
}  // namespace

void copy_into(const Tensor& dst, const Tensor& src) {
  TensorIterator it({dst, src});
  TP_DISPATCH_EVERY(dst.dtype(), "copy", ([&]<class To>() {
    TP_DISPATCH_EVERY(src.dtype(), "copy", ([&]<class From>() { copy_loop<To, From>(it); }));
  }));
}

Tensor convert(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor out = Tensor::empty(t.sizes(), dtype);
  copy_into(out, t);
  return out;
}

Tensor contiguous_copy(const Tensor& t) {
  Tensor out = Tensor::empty(t.sizes(), t.dtype());
  copy_into(out, t);
  return out;
}

Tensor as_contiguous(const Tensor& t) { return t.is_contiguous() ? t : contiguous_copy(t); }

void fill(const Tensor& dst, const Scalar& value) {
  TensorIterator it({dst});
  TP_DISPATCH_EVERY(dst.dtype(), "fill_", ([&]<class T>() {
    const T v = value.is_float() ? cast_value<T>(value.to_double()) : value.to<T>();
    it.for_each([v](char** d, const int64_t* s, int64_t n) {
      if (s[0] == sizeof(T)) {
        T* o = reinterpret_cast<T*>(d[0]);
        for (int64_t i = 0; i < n; ++i) o[i] = v;
      } else {
        char* p = d[0];
        for (int64_t i = 0; i < n; ++i, p += s[0]) *reinterpret_cast<T*>(p) = v;
      }
    });
  }));
}

bool may_overlap(const Tensor& a, const Tensor& b) {
  return a.impl()->storage == b.impl()->storage && a.numel() > 0 && b.numel() > 0;
}

void check_sizes(const Shape& sizes, const char* op) {
  int64_t n = 1;
  for (auto s : sizes) {
    TP_CHECK(s >= 0, ValueError, op, ": negative dimension in size ", shape_str(sizes));
    TP_CHECK(s == 0 || n <= (int64_t{1} << 62) / s, ValueError, op, ": size ", shape_str(sizes),
             " has too many elements");
    n *= s;
  }
}

Shape infer_view_size(const Shape& requested, int64_t numel, const char* op) {
  Shape out = requested;
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      TP_CHECK(infer_at < 0, ValueError, op, ": only one dimension can be inferred, got size ", shape_str(requested));
      infer_at = static_cast<int>(i);
    } else {
      TP_CHECK(out[i] >= 0, ValueError, op, ": invalid shape dimension ", out[i], " in size ", shape_str(requested));
      TP_CHECK(!__builtin_mul_overflow(known, out[i], &known), ValueError, op, ": shape ", shape_str(requested),
               " is invalid for input of size ", numel);
    }
  }
  if (infer_at >= 0) {
    TP_CHECK(known != 0, ValueError, op, ": cannot reshape tensor of ", numel, " elements into shape ",
             shape_str(requested), " because the unspecified dimension size -1 can be any value and is ambiguous");
    TP_CHECK(numel % known == 0, ValueError, op, ": shape ", shape_str(requested), " is invalid for input of size ",
             numel);
    out[infer_at] = numel / known;
  } else {
    TP_CHECK(known == numel, ValueError, op, ": shape ", shape_str(requested), " is invalid for input of size ",
             numel);
  }
  return out;
}

std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& new_sizes) {
  if (sizes.empty()) return Shape(new_sizes.size(), 1);
  int64_t n = numel(sizes);
  if (n == 0) {
    if (sizes == new_sizes) return strides;
    return contiguous_strides(new_sizes);
  }
  Shape out(new_sizes.size(), 0);
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    // A chunk ends where the next (outer) dim does not continue it contiguously.
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

std::vector<bool> reduction_mask(const std::vector<int64_t>& dims, int64_t ndim, const char* op) {
  std::vector<bool> mask(static_cast<size_t>(ndim), dims.empty());
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, ndim, op);
    if (ndim == 0) continue;  // a 0-d tensor accepts dim 0 / -1 and reduces nothing
    TP_CHECK(!mask[w], ValueError, op, ": dim ", w, " appears multiple times in the list of dims ", dims);
    mask[w] = true;
  }
  return mask;
}

Shape reduced_shape(const Shape& sizes, const std::vector<bool>& mask, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!mask[d]) out.push_back(sizes[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

Shape attr_shape(const Attrs& attrs, const char* name) {
  const auto& v = attrs.get<std::vector<int64_t>>(name);
  return Shape(v.begin(), v.end());
}

}  // namespace tp
