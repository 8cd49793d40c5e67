#include "core/tensor.h"

namespace tp {

Tensor Tensor::empty(const Shape& sizes, DType dtype) {
  return empty_strided(sizes, contiguous_strides(sizes), dtype);
}

Tensor Tensor::empty_strided(const Shape& sizes, const Shape& strides, DType dtype) {
  for (auto s : sizes) TP_CHECK(s >= 0, ValueError, "empty: negative size in ", shape_str(sizes));
  int64_t span = 1;  // elements the strided layout reaches
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) { span = 0; break; }
    span += (sizes[i] - 1) * strides[i];
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = StorageImpl::allocate(static_cast<size_t>(span) * itemsize(dtype));
  impl->sizes = sizes;
  impl->strides = strides;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::as_strided(const Shape& sizes, const Shape& strides, int64_t offset) const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->sizes = sizes;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = impl_->dtype;
  impl->own_counter = impl_->own_counter;  // a view shares its base's autograd counter
  return Tensor(std::move(impl));
}

Tensor Tensor::scalar_tensor(const Scalar& s, DType dtype) {
  Tensor t = empty({}, dtype);
  TP_DISPATCH_EVERY(dtype, "scalar_tensor", [&]<class T>() {
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) *t.data_as<T>() = T(static_cast<float>(s.to_double()));
    else *t.data_as<T>() = s.to<T>();
  });
  return t;
}

Tensor Tensor::wrapped_scalar(const Scalar& s) {
  Tensor t = scalar_tensor(s, s.is_float() ? DType::Float64 : s.natural_dtype());
  t.impl_->wrapped_number = true;
  return t;
}

int64_t Tensor::size(int64_t d) const { return impl_->sizes[wrap_dim(d, dim(), "size")]; }

Scalar Tensor::item() const {
  // Device memory is not host-addressable: the binding copies a CUDA tensor to the CPU first.
  TP_CHECK(device().kind == Device::Kind::CPU, Error, "item: the tensor is on ", device().str(),
           "; copy it to the CPU first (.cpu())");
  // A RuntimeError, as PyTorch's item() (int() and float() raise ValueError:
  // graph::read_gate_value checks them before calling this).
  TP_CHECK(numel() == 1, Error, "item: a Tensor with ", numel(), " elements cannot be converted to Scalar (shape ",
           shape_str(sizes()), ")");
  return TP_DISPATCH_EVERY(dtype(), "item", [&]<class T>() -> Scalar {
    T v = *data_as<T>();
    if constexpr (std::is_same_v<T, bool>) return Scalar(v);
    else if constexpr (std::is_integral_v<T>) return Scalar(static_cast<int64_t>(v));
    else if constexpr (std::is_floating_point_v<T>) return Scalar(static_cast<double>(v));
    else return Scalar(static_cast<double>(static_cast<float>(v)));
  });
}

}  // namespace tp
