// tensorplay._C._cuda: the CUDA runtime as Python sees it (tensorplay/cuda.py
// wraps it), and the moves between host and device used by Tensor.to/.cuda/.cpu.
#include <nanobind/stl/pair.h>

#include "common.h"
#include "cuda/allocator.h"
#include "cuda/copy.h"
#include "cuda/driver.h"
#include "cuda/kernels.h"
#include "cuda/nvrtc.h"

namespace tp::py {

nb::object device_of(const Tensor& t) {
  if (t.device().kind == Device::Kind::CPU) return cpu_device();
  return nb::cast(PyDevice{"cuda", t.device().index});
}

Tensor host_copy(const Tensor& t) {
  return t.device().kind == Device::Kind::CUDA ? cuda::to_cpu(t) : t;
}

Tensor move_to(const Tensor& t, std::optional<int> target, bool non_blocking) {
  const bool on_cuda = t.device().kind == Device::Kind::CUDA;
  if (!target) return on_cuda ? cuda::to_cpu(t) : t;
  if (on_cuda && t.device().index == *target) return t;
  // Device to another device goes through the host (no peer copies yet).
  return cuda::to_device(host_copy(t), *target, non_blocking);
}

namespace {
int index_or_current(nb::handle device) {
  if (device.is_none()) return cuda::current_device();
  if (PyLong_Check(device.ptr())) return nb::cast<int>(device);
  const PyDevice d = to_device(device);
  TP_CHECK(d.type == "cuda", ValueError, "expected a CUDA device but got '", d.str(), "'");
  return d.index < 0 ? cuda::current_device() : d.index;
}
}  // namespace

void bind_cuda(nb::module_& root) {
  cuda::install_dispatch_hook();
  nb::module_ m = root.def_submodule("_cuda", "CUDA runtime (loaded at run time; see tensorplay.cuda)");
  m.def("is_available", &cuda::is_available);
  m.def("device_count", &cuda::device_count);
  m.def("why_unavailable", [] { return cuda::driver().why_unavailable; });
  m.def("current_device", [] {
    if (!cuda::is_available()) cuda::throw_unavailable("current_device");
    return cuda::current_device();
  });
  m.def("set_device", [](nb::handle d) { cuda::set_device(index_or_current(d)); }, nb::arg("device").none());
  m.def("synchronize", [](nb::handle d) {
    nb::gil_scoped_release nogil;
    cuda::synchronize(index_or_current(d));
  }, nb::arg("device").none() = nb::none());
  m.def("get_device_name", [](nb::handle d) { return cuda::device_name(index_or_current(d)); },
        nb::arg("device").none() = nb::none());
  m.def("get_device_capability", [](nb::handle d) {
    const int cc = cuda::compute_capability(index_or_current(d));
    return std::make_pair(cc / 10, cc % 10);
  }, nb::arg("device").none() = nb::none());
  m.def("memory_stats", [](nb::handle d) {
    if (!cuda::is_available()) return nb::make_tuple(0, 0, 0);
    const cuda::MemoryStats s = cuda::memory_stats(index_or_current(d));
    return nb::make_tuple(s.allocated, s.max_allocated, s.reserved);
  }, nb::arg("device").none() = nb::none());
  m.def("reset_peak_memory_stats", [](nb::handle d) {
    if (cuda::is_available()) cuda::reset_peak_memory_stats(index_or_current(d));
  }, nb::arg("device").none() = nb::none());
  m.def("empty_cache", [] {
    for (int i = 0; i < cuda::device_count(); ++i) cuda::empty_cache(i);
  });
  m.def("pin_memory", &cuda::pin_memory);
  m.def("is_pinned", &cuda::is_pinned);
  m.def("add_nvrtc_candidates", &cuda::add_nvrtc_candidates);
  m.def("nvrtc_available", &cuda::nvrtc_available);
  m.def("nvrtc_why_unavailable", &cuda::nvrtc_why_unavailable);
  m.def("nvrtc_version", &cuda::nvrtc_version);
  m.def("nvrtc_compile", [](const std::string& src, const std::string& name, int arch) {
    std::string cubin;
    {
      nb::gil_scoped_release nogil;
      cubin = cuda::nvrtc_compile(src, name, arch);
    }
    return nb::bytes(cubin.data(), cubin.size());
  }, nb::arg("source"), nb::arg("name"), nb::arg("arch"));
  m.def("kernel_sources", &cuda::all_kernel_sources);
  m.def("compiled_kernel_count", &cuda::compiled_kernel_count);
}

}  // namespace tp::py
