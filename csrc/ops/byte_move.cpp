#include "ops/byte_move.h"

#include <cstring>

#include "ops/kernel_util.h"
#include "ops/tensor_iterator.h"

namespace tp {

void move_elements_raw(const Shape& shape, char* dst, const Shape& dst_strides, const char* src,
                       const Shape& src_strides, int64_t itemsize) {
  if (numel(shape) == 0) return;
  Shape db(dst_strides), sb(src_strides);
  for (auto& v : db) v *= itemsize;
  for (auto& v : sb) v *= itemsize;
  TensorIterator it(shape, {db, sb}, {dst, const_cast<char*>(src)});
  dispatch_itemsize(itemsize, "copy", [&]<class U>() { it.for_each(&move_row<U>); });
}

void move_elements(const Tensor& dst, const Tensor& src) {
  TP_CHECK(dst.dtype() == src.dtype(), Error, "internal: move_elements between ", dtype_name(src.dtype()), " and ",
           dtype_name(dst.dtype()));
  Shape ss = broadcast_strides(src.sizes(), src.strides(), dst.sizes());
  move_elements_raw(dst.sizes(), static_cast<char*>(dst.data()), dst.strides(), static_cast<const char*>(src.data()),
                    ss, itemsize(dst.dtype()));
}

Tensor contiguous_bits(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor out = Tensor::empty(t.sizes(), t.dtype());
  move_elements(out, t);
  return out;
}

Tensor scalar_of(const Scalar& value, DType dtype) {
  Tensor t = Tensor::empty({}, dtype);
  fill(t, value);
  return t;
}

bool is_index_dtype(DType t) { return t != DType::Bool && !is_floating(t); }

Tensor index_as_int64(const Tensor& index, const char* op) {
  TP_CHECK(is_index_dtype(index.dtype()), TypeError, op,
           ": tensors used as indices must be long, int, byte or bool tensors, got ", dtype_name(index.dtype()));
  return as_contiguous(convert(index, DType::Int64));
}

void check_no_internal_overlap(const Shape& sizes, const Shape& strides, const char* op) {
  for (size_t d = 0; d < sizes.size(); ++d)
    TP_CHECK(sizes[d] <= 1 || strides[d] != 0, Error, op,
             ": unsupported operation: more than one element of the written-to tensor (shape ", shape_str(sizes),
             ", strides ", shape_str(strides), ") refers to a single memory location; clone() it first");
}

}  // namespace tp
