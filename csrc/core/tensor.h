// TensorImpl: a strided view of a Storage, plus the autograd fields. Tensor: the
// cheap handle (one shared_ptr) that every layer and the binding pass around.
#pragma once
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/scalar.h"
#include "core/shape.h"
#include "core/storage.h"

namespace tp {
namespace autograd {
class Node;
struct AutogradMeta;  // hooks, grad accumulator, inference flag (defined in autograd/node.h)
}

// What shape inference produces and consumes: everything about a tensor but its data.
struct TensorMeta {
  Shape sizes;
  Shape strides;
  DType dtype = DType::Float32;
  Device device = Device::cpu();
  // A Python number (see TensorImpl::wrapped_number): type promotion ranks it below tensors.
  bool wrapped_number = false;
  // False for an absent optional tensor argument (Tensor? in a schema).
  bool defined = true;
  static TensorMeta contiguous(Shape sizes, DType dtype) {
    TensorMeta m;
    m.strides = contiguous_strides(sizes);
    m.sizes = std::move(sizes);
    m.dtype = dtype;
    return m;
  }
};

class TensorImpl {
 public:
  std::shared_ptr<StorageImpl> storage;
  Shape sizes;
  Shape strides;
  int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;
  // A Python number promoted to a 0-d tensor for a binary operator: it takes part
  // in type promotion with lower priority, and the tracer records it as a constant.
  bool wrapped_number = false;

  // Autograd (owned by the autograd layer; core only stores them).
  bool requires_grad = false;
  std::shared_ptr<autograd::Node> grad_fn;  // set on non-leaf results
  uint32_t output_nr = 0;
  std::shared_ptr<TensorImpl> grad;
  bool retains_grad = false;
  // A view made with grad mode off (1), of a tensor that required grad (2): an
  // in-place write through it with grad mode on is refused (autograd/record.cpp).
  uint8_t no_grad_view = 0;
  // Such a view of a tensor that required grad reports requires_grad (PyTorch's
  // view rule) but is a leaf with no accumulator: a gradient reaching it is
  // dropped, as PyTorch does. requires_grad_() on it makes it an ordinary leaf.
  bool requires_grad_from_base = false;
  // Tensor._base: the tensor whose memory this view reads (the root of a chain of
  // views), set by the dispatcher for every view operator's result; null for a
  // tensor that is no view. base_py: the binding's Python object for it, so that
  // `v._base is x` holds as in PyTorch (opaque here).
  std::shared_ptr<TensorImpl> view_base;
  std::shared_ptr<void> base_py;
  std::shared_ptr<autograd::AutogradMeta> autograd_meta;  // null for most tensors
  // Null: the storage's shared counter. `.data` aliases own one, which their
  // views and detach()es share (as_strided and detach copy this pointer).
  std::shared_ptr<VersionCounter> own_counter;

  void* data() const { return static_cast<char*>(storage->data()) + offset * itemsize(dtype); }
  // Every write to the memory, through any tensor (the compiled front end's stamp).
  uint64_t version() const { return storage->version(); }
  VersionCounter& counter() const { return own_counter ? *own_counter : storage->shared_counter(); }
  // Writes through this tensor's family (Tensor._version; saved-tensor checks).
  uint64_t autograd_version() const { return counter().value.load(std::memory_order_relaxed); }
  Device device() const { return storage->device(); }
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Uninitialized contiguous tensor.
  static Tensor empty(const Shape& sizes, DType dtype);
  static Tensor empty_strided(const Shape& sizes, const Shape& strides, DType dtype);
  // A new view of the same storage with other sizes/strides/offset.
  Tensor as_strided(const Shape& sizes, const Shape& strides, int64_t offset) const;
  static Tensor scalar_tensor(const Scalar& s, DType dtype);
  static Tensor wrapped_scalar(const Scalar& s);  // for `x * 2`

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  const Shape& sizes() const { return impl_->sizes; }
  const Shape& strides() const { return impl_->strides; }
  int64_t size(int64_t d) const;
  int64_t dim() const { return static_cast<int64_t>(impl_->sizes.size()); }
  int64_t numel() const { return tp::numel(impl_->sizes); }
  DType dtype() const { return impl_->dtype; }
  Device device() const { return impl_->device(); }
  int64_t offset() const { return impl_->offset; }
  bool is_contiguous() const { return tp::is_contiguous(impl_->sizes, impl_->strides); }
  void* data() const { return impl_->data(); }
  template <class T> T* data_as() const { return static_cast<T*>(impl_->data()); }
  TensorMeta meta() const {
    return TensorMeta{impl_->sizes, impl_->strides, impl_->dtype, device(), impl_->wrapped_number};
  }
  uint64_t version() const { return impl_->version(); }
  uint64_t autograd_version() const { return impl_->autograd_version(); }
  // An in-place write: counted for the memory and for this tensor's autograd counter.
  void bump_version() const {
    impl_->storage->bump_version();
    impl_->counter().value.fetch_add(1, std::memory_order_relaxed);
  }
  bool requires_grad() const { return impl_->requires_grad; }
  bool is_wrapped_number() const { return impl_->wrapped_number; }

  // Reads element 0 of a one-element tensor as a number.
  Scalar item() const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

}  // namespace tp
