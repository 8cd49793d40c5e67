// DLPack interchange (zero-copy): tp.from_dlpack(obj) and Tensor.__dlpack__ /
// __dlpack_device__, so NumPy, PyTorch and others share memory with TensorPlay.
// The structs below follow the DLPack C ABI (v0 "dltensor" capsules and v1
// "dltensor_versioned" capsules); they are plain data, laid out as the
// standard specifies.
#include <nanobind/stl/pair.h>

#include <functional>
#include <optional>

#include "common.h"
#include "cuda/driver.h"
#include "cuda/stream.h"

namespace tp::py {
namespace {

struct DLDevice {
  int32_t device_type;  // 1 = CPU
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float, 4 bfloat, 6 bool
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; may be null (compact row-major)
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
struct DLPackVersion {
  uint32_t major, minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned*);
  uint64_t flags;  // bit 0: read only, bit 1: is a copy
  DLTensor dl_tensor;
};
constexpr int32_t kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3;

// DType <-> DLPack codes: the table NumPy interop uses too (module.cpp).
DLDataType to_dl(DType d) {
  nb::dlpack::dtype c = to_dlpack_dtype(d);
  return {c.code, c.bits, c.lanes};
}

DType from_dl(DLDataType t) {
  auto d = from_dlpack_dtype(nb::dlpack::dtype{t.code, t.bits, t.lanes});
  TP_CHECK(d && t.lanes == 1, TypeError, "from_dlpack: unsupported DLPack dtype (code ", int(t.code), ", ",
           int(t.bits), " bits, ", int(t.lanes), " lanes)");
  return *d;
}

// What an exported capsule owns: the tensor (keeps the storage alive) and the
// shape/stride arrays the DLTensor points to.
template <class Managed>
struct Export {
  Tensor tensor;
  std::vector<int64_t> shape, strides;
  Managed managed{};
};

template <class Managed>
Managed* make_managed(const Tensor& t) {
  auto* ctx = new Export<Managed>{t, {t.sizes().begin(), t.sizes().end()}, {t.strides().begin(), t.strides().end()}};
  DLTensor& dl = ctx->managed.dl_tensor;
  dl.data = t.data();
  dl.device = t.device().kind == Device::Kind::CUDA ? DLDevice{kDLCUDA, t.device().index} : DLDevice{kDLCPU, 0};
  dl.ndim = static_cast<int32_t>(t.dim());
  dl.dtype = to_dl(t.dtype());
  dl.shape = ctx->shape.data();
  dl.strides = ctx->strides.data();
  dl.byte_offset = 0;
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = [](Managed* m) { delete static_cast<Export<Managed>*>(m->manager_ctx); };
  return &ctx->managed;
}

// A capsule that nobody consumed still owns the tensor: its destructor frees it.
template <class Managed>
void capsule_destructor(PyObject* cap, const char* live_name) {
  if (!PyCapsule_IsValid(cap, live_name)) return;  // renamed "used_..." by the consumer
  auto* m = static_cast<Managed*>(PyCapsule_GetPointer(cap, live_name));
  if (m && m->deleter) m->deleter(m);
}

nb::object to_dlpack(const Tensor& self, nb::handle stream, nb::handle max_version, nb::handle dl_device,
                     nb::handle copy) {
  TP_CHECK(!self.requires_grad(), Error,
           "__dlpack__: can't export a tensor that requires grad; use tensor.detach() first");
  TP_CHECK(stream.is_none() || PyLong_Check(stream.ptr()), TypeError, "__dlpack__: stream must be None or an int");
  if (!dl_device.is_none()) {
    auto dev = nb::cast<std::pair<int, int>>(dl_device);
    const bool same = self.device().kind == Device::Kind::CUDA
                          ? dev.first == kDLCUDA && dev.second == self.device().index
                          : dev.first == kDLCPU;
    TP_CHECK(same, ValueError, "__dlpack__: the tensor is on ", self.device().str(),
             " and is exported only there, got dl_device (", dev.first, ", ", dev.second, ")");
  }
  // TensorPlay queues all CUDA work on the legacy default stream (stream 1 in
  // DLPack's numbering): a consumer on another stream would race with it, so
  // the device is synchronized before the memory is shared.
  std::optional<cuda::DeviceGuard> guard;
  if (self.device().kind == Device::Kind::CUDA) guard.emplace();
  if (self.device().kind == Device::Kind::CUDA && !(PyLong_Check(stream.ptr()) && nb::cast<int64_t>(stream) == 1))
    cuda::synchronize(self.device().index);
  else if (self.device().kind == Device::Kind::CUDA && cuda::current_stream(self.device().index))
    // Work queued on a side stream (tp.cuda.stream): the legacy stream waits for it.
    cuda::stream_wait_stream(self.device().index, nullptr, cuda::current_stream(self.device().index));
  Tensor t = self;
  if (!copy.is_none() && nb::cast<bool>(copy)) t = nb::cast<Tensor>(nb::cast(self).attr("clone")());
  bool versioned = !max_version.is_none() && nb::cast<std::pair<int, int>>(max_version).first >= 1;
  PyObject* cap;
  if (versioned) {
    auto* m = make_managed<DLManagedTensorVersioned>(t);
    m->version = {1, 0};
    m->flags = (!copy.is_none() && nb::cast<bool>(copy)) ? 2 : 0;
    cap = PyCapsule_New(m, "dltensor_versioned",
                        [](PyObject* c) { capsule_destructor<DLManagedTensorVersioned>(c, "dltensor_versioned"); });
  } else {
    auto* m = make_managed<DLManagedTensor>(t);
    cap = PyCapsule_New(m, "dltensor", [](PyObject* c) { capsule_destructor<DLManagedTensor>(c, "dltensor"); });
  }
  if (!cap) throw nb::python_error();
  return nb::steal(cap);
}

// Wraps a DLTensor's memory; `release` runs the producer's deleter when the
// last view of the storage dies (with the GIL: deleters may touch Python objects).
Tensor wrap_dl(const DLTensor& dl, std::function<void()> release) {
  const bool on_cuda = dl.device.device_type == kDLCUDA;
  TP_CHECK(dl.device.device_type == kDLCPU || dl.device.device_type == kDLCUDAHost || on_cuda, ValueError,
           "from_dlpack: only CPU and CUDA tensors are supported (DLPack device type ", dl.device.device_type, ")");
  if (on_cuda) {
    cuda::DeviceGuard guard;
    cuda::activate(dl.device.device_id);  // validates the ordinal; raises without a GPU
  }
  Device device = Device::cpu();
  if (on_cuda) {
    device.kind = Device::Kind::CUDA;
    device.index = static_cast<int16_t>(dl.device.device_id);
  }
  DType dt = from_dl(dl.dtype);
  Shape sizes(dl.shape, dl.shape + dl.ndim);
  Shape strides = dl.strides ? Shape(dl.strides, dl.strides + dl.ndim) : contiguous_strides(sizes);
  int64_t span = 1;
  for (int i = 0; i < dl.ndim; ++i) {
    if (sizes[i] == 0) { span = 0; break; }
    TP_CHECK(strides[i] >= 0 || sizes[i] == 1, ValueError,
             "from_dlpack: negative strides are not supported (strides ", shape_str(strides), ")");
    if (sizes[i] > 1) span += (sizes[i] - 1) * strides[i];
  }
  for (int i = 0; i < dl.ndim; ++i)
    if (sizes[i] == 1 && strides[i] < 0) strides[i] = 0;
  void* data = static_cast<char*>(dl.data) + dl.byte_offset;
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = StorageImpl::wrap(data, static_cast<size_t>(span) * itemsize(dt), std::move(release), device);
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->dtype = dt;
  return Tensor(std::move(impl));
}

template <class Managed>
std::function<void()> deleter_of(Managed* m) {
  return [m] {
    if (!m->deleter) return;
    if (!Py_IsInitialized() || interpreter_finalizing()) return;  // the producer's memory dies with the process
    nb::gil_scoped_acquire gil;
    m->deleter(m);
  };
}

Tensor from_capsule(nb::handle cap) {
  PyObject* c = cap.ptr();
  if (PyCapsule_IsValid(c, "dltensor_versioned")) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, "dltensor_versioned"));
    TP_CHECK(m->version.major == 1, ValueError, "from_dlpack: unsupported DLPack version ", m->version.major, ".",
             m->version.minor);
    Tensor t = wrap_dl(m->dl_tensor, deleter_of(m));
    PyCapsule_SetName(c, "used_dltensor_versioned");
    return t;
  }
  if (PyCapsule_IsValid(c, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
    Tensor t = wrap_dl(m->dl_tensor, deleter_of(m));
    PyCapsule_SetName(c, "used_dltensor");
    return t;
  }
  throw ValueError("from_dlpack: the capsule is not an unconsumed DLPack tensor (\"dltensor\" or "
                   "\"dltensor_versioned\")");
}

Tensor from_dlpack(nb::handle obj) {
  if (nb::isinstance<Tensor>(obj)) return nb::cast<Tensor>(obj);
  if (PyCapsule_CheckExact(obj.ptr())) return from_capsule(obj);
  TP_CHECK(nb::hasattr(obj, "__dlpack__"), TypeError, "from_dlpack: expected an object with __dlpack__ or a "
           "DLPack capsule, got ", nb::inst_name(obj).c_str());
  bool on_cuda = false;
  int cuda_index = 0;
  // The producer's device is made current while it exports (PyTorch's
  // __dlpack__ orders its work on the current device's streams), then the
  // caller's context is current again.
  std::optional<cuda::DeviceGuard> guard;
  if (nb::hasattr(obj, "__dlpack_device__")) {
    auto dev = nb::cast<std::pair<int, int>>(obj.attr("__dlpack_device__")());
    on_cuda = dev.first == kDLCUDA;
    cuda_index = dev.second;
    TP_CHECK(dev.first == kDLCPU || dev.first == kDLCUDAHost || on_cuda, ValueError,
             "from_dlpack: only CPU and CUDA tensors are supported (device type ", dev.first, ")");
    if (on_cuda) {
      guard.emplace();
      cuda::activate(dev.second);
    }
  }
  // A CUDA producer is told we read on the legacy default stream (1), so it
  // orders its pending work before ours.
  nb::object stream = on_cuda ? nb::object(nb::int_(1)) : nb::none();
  nb::object cap;
  try {  // ask for a versioned capsule; older producers do not know max_version
    cap = obj.attr("__dlpack__")(nb::arg("stream") = stream, nb::arg("max_version") = nb::make_tuple(1, 0));
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_TypeError)) throw;
    cap = obj.attr("__dlpack__")(nb::arg("stream") = stream);
  }
  Tensor t = from_capsule(cap);
  // The producer ordered its work before the legacy stream: a side stream we read on waits for that.
  if (on_cuda && cuda::current_stream(cuda_index))
    cuda::stream_wait_stream(cuda_index, cuda::current_stream(cuda_index), nullptr);
  return t;
}

}  // namespace

void bind_dlpack(nb::module_& m) {
  m.def("from_dlpack", &from_dlpack, nb::arg("ext_tensor"));
  nb::handle cls = nb::type<Tensor>();
  cls.attr("__dlpack__") = nb::cpp_function(&to_dlpack, nb::scope(cls), nb::name("__dlpack__"), nb::is_method(),
                                            nb::arg("stream") = nb::none(),
                                            nb::arg("max_version") = nb::none(), nb::arg("dl_device") = nb::none(),
                                            nb::arg("copy") = nb::none());
  cls.attr("__dlpack_device__") = nb::cpp_function([](const Tensor& t) {
        return t.device().kind == Device::Kind::CUDA ? nb::make_tuple(kDLCUDA, t.device().index)
                                                     : nb::make_tuple(kDLCPU, 0);
      },
                                                   nb::scope(cls), nb::name("__dlpack_device__"), nb::is_method());
}

}  // namespace tp::py
