// Element moves by itemsize for the shape and index families. A copy that does
// not change the dtype only moves bits, so these kernels treat an element as an
// unsigned integer of 1, 2, 4 or 8 bytes and work for every dtype natively
// (float16 and bfloat16 included) without a round trip through a compute dtype.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/tensor.h"

namespace tp {

template <int64_t N> struct bits_of_size;
template <> struct bits_of_size<1> { using type = uint8_t; };
template <> struct bits_of_size<2> { using type = uint16_t; };
template <> struct bits_of_size<4> { using type = uint32_t; };
template <> struct bits_of_size<8> { using type = uint64_t; };

// Calls f.template operator()<U>() with U the unsigned integer type of `size` bytes.
template <class F>
decltype(auto) dispatch_itemsize(int64_t size, const char* op, const F& f) {
  switch (size) {
    case 1: return f.template operator()<uint8_t>();
    case 2: return f.template operator()<uint16_t>();
    case 4: return f.template operator()<uint32_t>();
    case 8: return f.template operator()<uint64_t>();
    default: throw Error(str(op, ": unsupported element size ", size));
  }
}

// One row of an element move (a TensorIterator loop): operand 0 is written,
// operand 1 read; either may be strided, the source may have stride 0.
template <class U>
void move_row(char** d, const int64_t* s, int64_t n) {
  constexpr int64_t k = sizeof(U);
  if (s[0] == k && s[1] == k) {
    std::memcpy(d[0], d[1], static_cast<size_t>(n) * k);
  } else if (s[0] == k && s[1] == 0) {
    U* o = reinterpret_cast<U*>(d[0]);
    U v;
    std::memcpy(&v, d[1], k);
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  } else {
    char* po = d[0];
    const char* pi = d[1];
    for (int64_t i = 0; i < n; ++i, po += s[0], pi += s[1]) std::memcpy(po, pi, k);
  }
}

// Copies `shape` elements between two raw strided layouts (strides in
// elements, may be negative or zero for the source), on several threads when large.
void move_elements_raw(const Shape& shape, char* dst, const Shape& dst_strides, const char* src,
                       const Shape& src_strides, int64_t itemsize);
// dst <- src (same dtype; src broadcast to dst's shape), bits unchanged.
void move_elements(const Tensor& dst, const Tensor& src);
// A contiguous copy with the same dtype, or t itself when already contiguous.
Tensor contiguous_bits(const Tensor& t);
// An element of `dtype` holding `value` (converted the way fill_ converts), as a 1-element tensor.
Tensor scalar_of(const Scalar& value, DType dtype);
// True for dtypes whose values are integers (bool excluded).
bool is_index_dtype(DType t);
// An index tensor as contiguous int64, rejecting non-integer dtypes with a
// TypeError that names `op`.
Tensor index_as_int64(const Tensor& index, const char* op);
// Writing through a stride-0 dim would store one element from several places.
void check_no_internal_overlap(const Shape& sizes, const Shape& strides, const char* op);

}  // namespace tp
