#include "cuda/copy.h"

#include <cstring>
#include <mutex>
#include <set>

#include "cuda/allocator.h"
#include "cuda/device_status.h"
#include "cuda/driver.h"
#include "cuda/stream.h"
#include "ops/ops.h"

namespace tp::cuda {

Device cuda_device(int index) {
  Device d;
  d.kind = Device::Kind::CUDA;
  d.index = static_cast<int16_t>(index);
  return d;
}

Tensor empty(const Shape& sizes, DType dtype, int index) {
  for (auto s : sizes) TP_CHECK(s >= 0, ValueError, "empty: negative size in ", shape_str(sizes));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = allocate_storage(static_cast<size_t>(tp::numel(sizes)) * itemsize(dtype), index);
  impl->sizes = sizes;
  impl->strides = contiguous_strides(sizes);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

namespace {
std::mutex g_pinned_mutex;
std::set<const void*>& pinned_blocks() {  // the base pointers of live pinned storages
  static auto* s = new std::set<const void*>();
  return *s;
}
}  // namespace

Tensor pin_memory(const Tensor& cpu) {
  TP_CHECK(cpu.device().kind == Device::Kind::CPU, Error, "pin_memory: expected a CPU tensor, got one on ",
           cpu.device().str());
  if (!is_available()) throw_unavailable("pin_memory");
  if (is_pinned(cpu)) return cpu;
  activate(current_device());
  const size_t bytes = static_cast<size_t>(cpu.numel()) * itemsize(cpu.dtype());
  void* p = nullptr;
  check(driver().cuMemAllocHost(&p, bytes ? bytes : 1), "cuMemAllocHost");
  {
    std::lock_guard<std::mutex> lock(g_pinned_mutex);
    pinned_blocks().insert(p);
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = StorageImpl::wrap(p, bytes, [p] {
    {
      std::lock_guard<std::mutex> lock(g_pinned_mutex);
      pinned_blocks().erase(p);
    }
    driver().cuMemFreeHost(p);  // waits for pending async copies out of it
  });
  impl->sizes = cpu.sizes();
  impl->strides = contiguous_strides(cpu.sizes());
  impl->dtype = cpu.dtype();
  Tensor out(std::move(impl));
  Tensor src = cpu.is_contiguous() ? cpu : ops::contiguous(cpu);
  if (bytes) std::memcpy(out.data(), src.data(), bytes);
  return out;
}

bool is_pinned(const Tensor& t) {
  if (t.device().kind != Device::Kind::CPU) return false;
  std::lock_guard<std::mutex> lock(g_pinned_mutex);
  return pinned_blocks().count(t.impl()->storage->data()) > 0;
}

Tensor to_device(const Tensor& cpu, int index, bool non_blocking) {
  TP_CHECK(cpu.device().kind == Device::Kind::CPU, Error, "to_device: expected a CPU tensor");
  Tensor src = cpu.is_contiguous() ? cpu : ops::contiguous(cpu);
  Tensor out = empty(src.sizes(), src.dtype(), index);
  const size_t bytes = static_cast<size_t>(src.numel()) * itemsize(src.dtype());
  if (bytes) {
    check_not_capturing("a host-to-device copy");
    activate(index);
    const CUstream stream = current_stream(index);
    // On a side stream a pageable upload is queued there too: the driver
    // stages the source before returning, so it may be reused at once.
    if ((non_blocking && is_pinned(src)) || stream) {
      check(driver().cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(out.data()), src.data(), bytes, stream),
            "cuMemcpyHtoDAsync");
    } else {
      check(driver().cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(out.data()), src.data(), bytes), "cuMemcpyHtoD");
    }
  }
  return out;
}

namespace {
// A synchronous download that sees the work queued on the current stream (the
// legacy stream's plain copy, or an async copy on a side stream waited for).
// A synchronization point: a bad index recorded by a finished checked kernel
// is reported after the copy (cuda/device_status.h).
void download(int dev, void* dst, const void* src, size_t bytes) {
  const CUstream stream = current_stream(dev);
  note_host_sync();
  if (!stream) {
    check(driver().cuMemcpyDtoH(dst, reinterpret_cast<CUdeviceptr>(src), bytes), "cuMemcpyDtoH");
  } else {
    check(driver().cuMemcpyDtoHAsync(dst, reinterpret_cast<CUdeviceptr>(src), bytes, stream), "cuMemcpyDtoHAsync");
    check(driver().cuStreamSynchronize(stream), "cuStreamSynchronize");
  }
  report_device_status();
}
}  // namespace

Tensor to_cpu(const Tensor& t) {
  TP_CHECK(t.device().kind == Device::Kind::CUDA, Error, "to_cpu: expected a CUDA tensor");
  const size_t isz = itemsize(t.dtype());
  if (t.numel() == 0) return Tensor::empty(t.sizes(), t.dtype());
  check_not_capturing("a device-to-host copy");
  const int dev = t.device().index;
  activate(dev);
  if (t.is_contiguous()) {
    Tensor out = Tensor::empty(t.sizes(), t.dtype());
    download(dev, out.data(), t.data(), t.numel() * isz);
    return out;
  }
  // Strided view: copy the elements between its lowest and highest address,
  // then gather on the host.
  int64_t lo = 0, hi = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t reach = (t.sizes()[d] - 1) * t.strides()[d];
    (reach < 0 ? lo : hi) += reach;
  }
  const int64_t span = hi - lo + 1;
  Tensor host = Tensor::empty({span}, t.dtype());
  const char* first = static_cast<const char*>(t.data()) + lo * static_cast<int64_t>(isz);
  download(dev, host.data(), first, static_cast<size_t>(span) * isz);
  return ops::contiguous(host.as_strided(t.sizes(), t.strides(), -lo));
}

namespace {
bool peer_copies() { return driver().has_streams && driver().cuMemcpyPeerAsync; }

// `bytes` from src_dev's memory to dst_dev's, as copy_to_device describes.
void copy_between_devices(CUdeviceptr dst, int dst_dev, CUdeviceptr src, int src_dev, size_t bytes) {
  check_not_capturing("a copy between two devices");
  const CUstream ds = current_stream(dst_dev), ss = current_stream(src_dev);
  stream_wait_device(dst_dev, ds, src_dev, ss);
  activate(dst_dev);
  check(driver().cuMemcpyPeerAsync(dst, context(dst_dev), src, context(src_dev), bytes, ds), "cuMemcpyPeerAsync");
  stream_wait_device(src_dev, ss, dst_dev, ds);
}
}  // namespace

void copy_device_to_device(const Tensor& dst, const Tensor& src) {
  const size_t bytes = static_cast<size_t>(src.numel()) * itemsize(src.dtype());
  if (!bytes) return;
  const int dev = dst.device().index;
  if (src.device().index != dev) {
    if (peer_copies()) {
      copy_between_devices(reinterpret_cast<CUdeviceptr>(dst.data()), dev, reinterpret_cast<CUdeviceptr>(src.data()),
                           src.device().index, bytes);
    } else {
      copy_device_to_device(dst, to_device(to_cpu(src), dev));
    }
    return;
  }
  activate(dev);
  check(driver().cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(dst.data()),
                                   reinterpret_cast<CUdeviceptr>(src.data()), bytes, current_stream(dev)),
        "cuMemcpyDtoD");
}

Tensor copy_to_device(const Tensor& src, int index) {
  TP_CHECK(src.device().kind == Device::Kind::CUDA, Error, "copy_to_device: expected a CUDA tensor");
  if (src.device().index == index) return src;
  if (!peer_copies()) return to_device(to_cpu(src), index);
  // A strided view is compacted on its own device first (one kernel there);
  // a dtype without a strided-copy kernel (bool, narrow integers) goes through
  // the host, which gathers any strides.
  Tensor s = src;
  if (!s.is_contiguous()) {
    try {
      s = ops::contiguous(src);
    } catch (const NotImplementedError&) {
      return to_device(to_cpu(src), index);
    }
  }
  Tensor out = empty(s.sizes(), s.dtype(), index);
  copy_device_to_device(out, s);
  return out;
}

}  // namespace tp::cuda
