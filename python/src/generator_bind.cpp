// tp.Generator: a Python handle on one entry of the C++ generator table
// (ops/generator.h). Operators receive only its id (attribute "generator",
// read by the generated bindings from the `_id` attribute), so the random
// state never lives in Python and a traced call stays plain data.
#include <cstring>

#include "common.h"
#include "ops/generator.h"
#include "ops/ops.h"

namespace tp::py {
namespace {

class PyGenerator {
 public:
  PyGenerator() : id_(generator_create()) {}
  explicit PyGenerator(int64_t id) : id_(id) {}  // the default generator: never destroyed
  ~PyGenerator() { generator_destroy(id_); }
  PyGenerator(const PyGenerator&) = delete;
  PyGenerator& operator=(const PyGenerator&) = delete;
  int64_t id() const { return id_; }

 private:
  int64_t id_;
};

// The state as 16 bytes (seed, then offset, little-endian), a uint8 tensor like PyTorch's.
Tensor state_tensor(GeneratorState s) {
  Tensor t = Tensor::empty({16}, DType::UInt8);
  uint8_t* p = t.data_as<uint8_t>();
  for (int i = 0; i < 8; ++i) {
    p[i] = static_cast<uint8_t>(s.seed >> (8 * i));
    p[8 + i] = static_cast<uint8_t>(s.offset >> (8 * i));
  }
  return t;
}

GeneratorState state_from(const Tensor& t) {
  TP_CHECK(t.dtype() == DType::UInt8 && t.dim() == 1 && t.numel() == 16, ValueError,
           "Generator.set_state: expected the uint8 tensor of 16 elements that get_state() returns, got ",
           dtype_name(t.dtype()), shape_str(t.sizes()));
  Tensor c = ops::contiguous(host_copy(t));  // a CUDA tensor is read on the host
  const uint8_t* p = c.data_as<uint8_t>();
  GeneratorState s{0, 0};
  for (int i = 0; i < 8; ++i) {
    s.seed |= uint64_t{p[i]} << (8 * i);
    s.offset |= uint64_t{p[8 + i]} << (8 * i);
  }
  return s;
}

// Python ints of any sign seed like PyTorch: taken modulo 2^64.
uint64_t seed_from(nb::handle h) {
  nb::object mask = nb::int_(0xFFFFFFFFFFFFFFFFull);
  nb::object v = nb::steal(PyNumber_And(h.ptr(), mask.ptr()));
  if (!v.is_valid()) throw nb::python_error();
  return nb::cast<uint64_t>(v);
}

}  // namespace

void bind_generator(nb::module_& m) {
  nb::class_<PyGenerator>(m, "Generator",
                          "A random number generator (Philox4x32-10). Pass it as generator= to random operators.")
      .def("__init__", [](PyGenerator* self, nb::handle device) {
            check_device(device, "Generator");  // a CPU generator only, as the tensors it fills
            new (self) PyGenerator();
          }, nb::arg("device") = nb::none())
      .def_prop_ro("_id", &PyGenerator::id)
      .def("manual_seed",
           [](nb::handle self, nb::handle seed) {
             generator_manual_seed(nb::cast<PyGenerator&>(self).id(), seed_from(seed));
             return nb::borrow(self);
           })
      .def("seed", [](PyGenerator& g) { return generator_seed(g.id()); })
      .def("initial_seed", [](PyGenerator& g) { return generator_initial_seed(g.id()); })
      .def("get_state", [](PyGenerator& g) { return state_tensor(generator_get_state(g.id())); })
      .def("set_state",
           [](nb::handle self, const Tensor& state) {
             generator_set_state(nb::cast<PyGenerator&>(self).id(), state_from(state));
             return nb::borrow(self);
           })
      .def_prop_ro("device", [](PyGenerator&) { return cpu_device(); })
      .def("__repr__", [](PyGenerator& g) { return "<tensorplay.Generator id=" + std::to_string(g.id()) + ">"; });
  nb::object default_gen = nb::cast(new PyGenerator(kDefaultGenerator), nb::rv_policy::take_ownership);
  m.attr("default_generator") = default_gen;
  // Replaces the plain manual_seed of functions.cpp (a second m.def would only add an overload behind it).
  if (nb::hasattr(m, "manual_seed")) nb::delattr(m, "manual_seed");
  m.def("manual_seed", [default_gen](nb::handle seed) {
    generator_manual_seed(kDefaultGenerator, seed_from(seed));
    return default_gen;
  });
  m.def("seed", []() { return generator_seed(kDefaultGenerator); });
  m.def("initial_seed", []() { return generator_initial_seed(kDefaultGenerator); });
  m.def("get_rng_state", []() { return state_tensor(generator_get_state(kDefaultGenerator)); });
  m.def("set_rng_state", [](const Tensor& s) { generator_set_state(kDefaultGenerator, state_from(s)); });
}

}  // namespace tp::py
