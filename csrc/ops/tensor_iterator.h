// The strided N-ary elementwise loop behind every pointwise kernel, copy and
// cast (after PyTorch's TensorIterator, much reduced).
//
// Operands are broadcast to the output shape (stride 0 on broadcast dims), dims
// are ordered by the strides of one operand (outermost first), size-1 dims are
// dropped and adjacent dims whose strides line up in every operand are merged.
// A kernel then supplies only the innermost loop:
//
//   loop(char** data, const int64_t* strides, int64_t n)
//
// data[i] points at operand i's first element of the row, strides[i] is its
// byte stride along the row (itemsize when contiguous, 0 when broadcast). The
// iterator walks the outer dims with a counter and splits the work over threads
// with tp::parallel_for, so a kernel's loop sees long rows whenever the layout
// allows it, and can keep a plain `o[i] = f(a[i], b[i])` fast path that GCC
// vectorizes.
#pragma once
#include <cstdint>
#include <vector>

#include "core/parallel.h"
#include "core/tensor.h"

namespace tp {

// A non-owning reference to a loop body (keeps the iterator itself template-free).
class LoopRef {
 public:
  template <class F>
  LoopRef(const F& f) : obj_(&f), call_(&invoke<F>) {}  // NOLINT: implicit on purpose
  void operator()(char** data, const int64_t* strides, int64_t n) const { call_(obj_, data, strides, n); }

 private:
  template <class F>
  static void invoke(const void* o, char** d, const int64_t* s, int64_t n) {
    (*static_cast<const F*>(o))(d, s, n);
  }
  const void* obj_;
  void (*call_)(const void*, char**, const int64_t*, int64_t);
};

class TensorIterator {
 public:
  static constexpr int kMaxOperands = 4;

  // operands[0] is written, the others read; every operand must broadcast to
  // operands[0]'s shape (callers check shapes before allocating the output).
  explicit TensorIterator(const std::vector<Tensor>& operands);
  // Raw geometry: `shape` with one byte-stride vector and base pointer per
  // operand. Dims are ordered by the strides of operand `order_by`.
  TensorIterator(const Shape& shape, const std::vector<Shape>& byte_strides, const std::vector<char*>& data,
                 int order_by = 0);

  int num_operands() const { return nops_; }
  int64_t numel() const { return numel_; }
  // Coalesced geometry, outermost dim first; never empty (a 0-d loop has one dim of size 1).
  int ndim() const { return static_cast<int>(shape_.size()); }
  const Shape& shape() const { return shape_; }
  int64_t stride(int op, int d) const { return strides_[op * ndim() + d]; }  // bytes
  char* data(int op) const { return data_[op]; }

  // Runs `loop` over all elements, on several threads when there are more than `grain`.
  void for_each(LoopRef loop, int64_t grain = kGrainSize) const;
  // Runs `loop` over the elements [begin, end) of the (coalesced) iteration order.
  void serial_for_each(LoopRef loop, int64_t begin, int64_t end) const;

 private:
  void build(const Shape& shape, const std::vector<Shape>& byte_strides, int order_by);
  int nops_ = 0;
  int64_t numel_ = 0;
  Shape shape_;
  std::vector<int64_t> strides_;  // [op][dim], bytes
  char* data_[kMaxOperands] = {};
};

}  // namespace tp
