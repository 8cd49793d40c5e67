// tp.device and the check every `device=` argument goes through.
//
// A device names where a tensor lives. TensorPlay computes on the CPU only, so
// the question each factory / conversion asks is "is this the CPU?": a CPU
// device (any spelling: "cpu", "cpu:0", tp.device("cpu"), a torch.device) is
// accepted, any other device type PyTorch knows raises a RuntimeError that
// names it, and an unknown type raises at construction as in PyTorch.
#include <array>
#include <string_view>

#include <nanobind/stl/optional.h>

#include "common.h"
#include "cuda/driver.h"

namespace tp::py {
namespace {

// Device types PyTorch accepts in a device string; only "cpu" exists here.
constexpr std::array<std::string_view, 20> kKnownTypes = {
    "cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve",
    "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone"};

std::string known_types_list() {
  std::string s;
  for (auto t : kKnownTypes) s += (s.empty() ? "" : ", ") + std::string(t);
  return s;
}

PyDevice parse_device_string(const std::string& text) {
  PyDevice d;
  const size_t colon = text.find(':');
  d.type = text.substr(0, colon);
  bool known = false;
  for (auto t : kKnownTypes) known |= d.type == t;
  TP_CHECK(known, Error, "Expected one of ", known_types_list(), " device type at start of device string: ", text);
  if (colon != std::string::npos) {
    const std::string idx = text.substr(colon + 1);
    bool digits = !idx.empty() && idx.size() < 10;
    for (char c : idx) digits &= c >= '0' && c <= '9';
    TP_CHECK(digits, Error, "Invalid device string: '", text, "'");
    d.index = std::stoi(idx);
  }
  return d;
}

}  // namespace

std::string PyDevice::str() const { return index < 0 ? type : type + ":" + std::to_string(index); }

PyDevice to_device(nb::handle h) {
  if (nb::isinstance<PyDevice>(h)) return nb::cast<PyDevice>(h);
  if (PyUnicode_Check(h.ptr())) return parse_device_string(nb::cast<std::string>(h));
  // A bare ordinal is an accelerator index in PyTorch (device=0 is cuda:0).
  if (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr())) {
    const int64_t i = nb::cast<int64_t>(h);
    TP_CHECK(i >= 0, Error, "Device index must not be negative");
    return PyDevice{"cuda", static_cast<int>(i)};
  }
  // Foreign device objects (torch.device) carry their type and index.
  nb::object type = nb::getattr(h, "type", nb::none());
  if (PyUnicode_Check(type.ptr())) {
    nb::object index = nb::getattr(h, "index", nb::none());
    PyDevice d = parse_device_string(nb::cast<std::string>(type));
    if (PyLong_Check(index.ptr())) d.index = nb::cast<int>(index);
    return d;
  }
  throw TypeError(str("expected a device (a str such as 'cpu', or a tensorplay.device), but got ",
                      nb::inst_name(h).c_str()));
}

bool is_device_arg(nb::handle h) {
  return h.is_none() || PyUnicode_Check(h.ptr()) || nb::isinstance<PyDevice>(h) ||
         (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr()));
}

void check_device(nb::handle h, std::string_view op) {
  if (h.is_none()) return;
  // The common spellings first, without building a PyDevice.
  if (PyUnicode_Check(h.ptr())) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(h.ptr(), &n);
    if (s && std::string_view(s, static_cast<size_t>(n)) == "cpu") return;
  }
  const PyDevice d = to_device(h);
  TP_CHECK(d.type == "cpu", Error, op, ": device '", d.str(), "' is not available: TensorPlay ",
           d.type == "meta" ? "has no meta (shape-only) tensors and " : "",
           d.type == "cuda" && !cuda::is_available() ? str("found no CUDA GPU here (", cuda::driver().why_unavailable, ") and ")
                                                     : std::string(),
           "supports only the 'cpu' device", d.type == "cuda" && cuda::is_available() ? " for this argument" : "");
}

std::optional<int> cuda_target(nb::handle h, std::string_view op) {
  if (h.is_none()) return std::nullopt;
  if (PyUnicode_Check(h.ptr())) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(h.ptr(), &n);
    if (s && std::string_view(s, static_cast<size_t>(n)) == "cpu") return std::nullopt;
  }
  const PyDevice d = to_device(h);
  if (d.type == "cuda" && cuda::is_available()) {
    const int index = d.index < 0 ? cuda::current_device() : d.index;
    TP_CHECK(index < cuda::device_count(), Error, op, ": CUDA error: invalid device ordinal (cuda:", index, "; ",
             cuda::device_count(), " device(s) present)");
    return index;
  }
  check_device(h, op);  // the CPU passes; anything else raises
  return std::nullopt;
}

// tp.set_default_device: the CUDA device factories without device= build on (none: the CPU).
std::optional<int>& default_cuda_slot() {
  static std::optional<int> d;
  return d;
}
std::optional<int> default_cuda_device() { return default_cuda_slot(); }

nb::object cpu_device() {
  static nb::object* dev = new nb::object(nb::cast(PyDevice{"cpu", -1}));  // leaked: one shared instance
  return *dev;
}

void bind_device(nb::module_& m) {
  nb::class_<PyDevice>(m, "device", "Where a tensor lives: tensorplay.device('cpu'). Only the CPU exists.")
      .def("__init__", [](PyDevice* self, nb::handle spec) { new (self) PyDevice(to_device(spec)); },
           nb::arg("type"))
      .def("__init__",
           [](PyDevice* self, const std::string& type, int index) {
             TP_CHECK(type.find(':') == std::string::npos, Error,
                      "type (string) must not include an index because index was passed explicitly: ", type);
             TP_CHECK(index >= 0, Error, "Device index must not be negative");
             PyDevice d = parse_device_string(type);
             d.index = index;
             new (self) PyDevice(d);
           },
           nb::arg("type"), nb::arg("index"))
      .def_prop_ro("type", [](const PyDevice& d) { return d.type; })
      .def_prop_ro("index", [](const PyDevice& d) -> nb::object {
        return d.index < 0 ? nb::none() : nb::cast(d.index);
      })
      .def("__str__", &PyDevice::str)
      .def("__repr__", [](const PyDevice& d) {
        return d.index < 0 ? str("device(type='", d.type, "')")
                           : str("device(type='", d.type, "', index=", d.index, ")");
      })
      .def("__eq__", [](const PyDevice& a, nb::handle b) -> nb::object {
        if (!nb::isinstance<PyDevice>(b)) return nb::borrow(Py_NotImplemented);
        const PyDevice& o = nb::cast<const PyDevice&>(b);
        return nb::bool_(a.type == o.type && a.index == o.index);
      }, nb::arg("other").none())  // `device == None` is False (it raised a TypeError)
      .def("__hash__", [](const PyDevice& d) { return std::hash<std::string>()(d.str()); });
  // For the Python-level constructors (tp.tensor, as_tensor, new_*, nn modules).
  m.def("_check_device", [](nb::handle d, const std::string& op) { check_device(d, op); }, nb::arg("device").none(),
        nb::arg("op"));
  // Validates a device= that may name a GPU (raises for other devices, and for CUDA without a GPU).
  m.def("_check_target_device", [](nb::handle d, const std::string& op) { cuda_target(d, op); },
        nb::arg("device").none(), nb::arg("op"));
  // The Python constructors (tp.tensor, as_tensor, new_*) build on the CPU and then move.
  m.def("_to_target_device", [](nb::handle t, nb::handle d, const std::string& op) -> nb::object {
        std::optional<int> target = cuda_target(d, op);
        if (!target) return nb::borrow(t);
        return nb::cast(move_to(nb::cast<const Tensor&>(t), target));
      }, nb::arg("tensor"), nb::arg("device").none(), nb::arg("op"));
  // tp.set_default_device: validated as a device= argument (CUDA without a GPU and unknown types raise).
  m.def("_set_default_device", [](nb::handle d) {
        default_cuda_slot() = d.is_none() ? std::nullopt : cuda_target(d, "set_default_device");
      }, nb::arg("device").none());
  m.def("_default_cuda_device", [] { return default_cuda_slot(); });
  m.def("_check_pin_memory", [](nb::handle pin, const std::string& op) {
    TP_CHECK(!PyObject_IsTrue(pin.ptr()), Error, op,
             ": pin_memory=True needs an accelerator device, which is not available: TensorPlay supports only the "
             "'cpu' device");
  }, nb::arg("pin_memory").none(), nb::arg("op"));
}

}  // namespace tp::py
