#include "ops/tensor_iterator.h"

#include <algorithm>

namespace tp {

TensorIterator::TensorIterator(const std::vector<Tensor>& operands) {
  TP_CHECK(!operands.empty() && operands.size() <= static_cast<size_t>(kMaxOperands), Error,
           "internal: TensorIterator takes 1 to ", kMaxOperands, " operands, got ", operands.size());
  const Shape& shape = operands[0].sizes();
  std::vector<Shape> strides;
  std::vector<char*> data;
  for (const auto& t : operands) {
    TP_CHECK(t.dim() <= static_cast<int64_t>(shape.size()), Error, "internal: operand of shape ",
             shape_str(t.sizes()), " does not broadcast to ", shape_str(shape));
    Shape s = broadcast_strides(t.sizes(), t.strides(), shape);
    for (auto& v : s) v *= itemsize(t.dtype());
    strides.push_back(std::move(s));
    data.push_back(static_cast<char*>(t.data()));
  }
  nops_ = static_cast<int>(operands.size());
  for (int i = 0; i < nops_; ++i) data_[i] = data[i];
  build(shape, strides, 0);
}

TensorIterator::TensorIterator(const Shape& shape, const std::vector<Shape>& byte_strides,
                               const std::vector<char*>& data, int order_by) {
  TP_CHECK(!data.empty() && data.size() <= static_cast<size_t>(kMaxOperands) && data.size() == byte_strides.size(),
           Error, "internal: bad TensorIterator operands");
  nops_ = static_cast<int>(data.size());
  for (int i = 0; i < nops_; ++i) data_[i] = data[i];
  build(shape, byte_strides, order_by);
}

void TensorIterator::build(const Shape& shape, const std::vector<Shape>& byte_strides, int order_by) {
  numel_ = tp::numel(shape);
  // Keep the dims that matter: size-1 dims never move a pointer. (A zero-size
  // tensor keeps its dims; nothing runs anyway.)
  std::vector<int> dims;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1) dims.push_back(static_cast<int>(d));
  // Order dims outermost first by the strides of operand `order_by`, then of
  // the others; a 0 stride (broadcast) says nothing about the order. A
  // stable insertion sort keeps the logical order between ties.
  auto inner_first = [&](int outer, int inner) {  // true: `outer` should move inside `inner`
    for (int k = 0; k < nops_; ++k) {
      int op = k == 0 ? order_by : (k <= order_by ? k - 1 : k);
      int64_t so = byte_strides[op][outer], si = byte_strides[op][inner];
      if (so == 0 || si == 0) continue;
      if (so < si) return true;
      if (so > si) return false;
    }
    return false;
  };
  for (size_t i = 1; i < dims.size(); ++i)
    for (size_t j = i; j > 0 && inner_first(dims[j - 1], dims[j]); --j) std::swap(dims[j - 1], dims[j]);
  // Merge an outer dim into the inner neighbour when every operand steps
  // through both as through one dim.
  Shape sizes;
  std::vector<Shape> st(nops_);
  for (size_t k = dims.size(); k-- > 0;) {  // innermost first
    int d = dims[k];
    if (!sizes.empty()) {
      bool merge = true;
      for (int op = 0; op < nops_ && merge; ++op)
        merge = byte_strides[op][d] == st[op].back() * sizes.back();
      if (merge) {
        sizes.back() *= shape[d];
        continue;
      }
    }
    sizes.push_back(shape[d]);
    for (int op = 0; op < nops_; ++op) st[op].push_back(byte_strides[op][d]);
  }
  TP_CHECK(sizes.size() <= 64, ValueError, "tensors with more than 64 non-trivial dimensions are not supported");
  if (sizes.empty()) {  // a single element
    sizes.push_back(1);
    for (int op = 0; op < nops_; ++op) st[op].push_back(0);
  }
  std::reverse(sizes.begin(), sizes.end());
  shape_ = sizes;
  int nd = ndim();
  strides_.assign(static_cast<size_t>(nops_) * nd, 0);
  for (int op = 0; op < nops_; ++op)
    for (int d = 0; d < nd; ++d) strides_[op * nd + d] = st[op][nd - 1 - d];
}

void TensorIterator::serial_for_each(LoopRef loop, int64_t begin, int64_t end) const {
  if (begin >= end) return;
  const int nd = ndim();
  const int64_t inner = shape_[nd - 1];
  int64_t idx[64];
  int64_t rest = begin;
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = rest % shape_[d];
    rest /= shape_[d];
  }
  int64_t inner_strides[kMaxOperands];
  for (int op = 0; op < nops_; ++op) inner_strides[op] = strides_[op * nd + nd - 1];
  char* ptrs[kMaxOperands];
  int64_t pos = begin;
  while (pos < end) {
    for (int op = 0; op < nops_; ++op) {
      char* p = data_[op];
      const int64_t* s = &strides_[op * nd];
      for (int d = 0; d < nd; ++d) p += idx[d] * s[d];
      ptrs[op] = p;
    }
    int64_t n = std::min(inner - idx[nd - 1], end - pos);
    loop(ptrs, inner_strides, n);
    pos += n;
    idx[nd - 1] += n;
    if (idx[nd - 1] == inner) {
      idx[nd - 1] = 0;
      for (int d = nd - 2; d >= 0; --d) {
        if (++idx[d] < shape_[d]) break;
        idx[d] = 0;
      }
    }
  }
}

void TensorIterator::for_each(LoopRef loop, int64_t grain) const {
  if (numel_ <= 0) return;
  parallel_for(0, numel_, grain, [&](int64_t b, int64_t e) { serial_for_each(loop, b, e); });
}

}  // namespace tp
