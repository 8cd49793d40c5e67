// Module-level functions: factories, NumPy import, operators, runtime settings (autograd: autograd_bind.cpp).
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>

#include "autograd/engine.h"
#include "common.h"
#include "core/deterministic.h"
#include "core/host_allocator.h"
#include "core/parallel.h"
#include "ops/autocast.h"
#include "ops/blas.h"
#include "ops/ops.h"
#include "ops/type_promotion.h"

namespace tp::py {

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

std::shared_ptr<nb::object> keep_py(nb::object o) {
  return std::shared_ptr<nb::object>(new nb::object(std::move(o)), [](nb::object* p) {
    if (!Py_IsInitialized() || interpreter_finalizing()) {
      p->release();  // leak the reference: the interpreter is gone
    } else {
      nb::gil_scoped_acquire gil;
      delete p;
      return;
    }
    delete p;
  });
}

namespace {

Tensor from_numpy(nb::ndarray<nb::numpy, nb::device::cpu> a) {
  auto mapped = from_dlpack_dtype(a.dtype());
  TP_CHECK(mapped, TypeError, "from_numpy: unsupported NumPy dtype (code ", int(a.dtype().code), ", ",
           int(a.dtype().bits), " bits); supported: bool, uint8, int8, int16, int32, int64, float16, float32, float64");
  const DType dt = *mapped;
  Shape sizes, strides;
  int64_t span = 1;
  for (size_t i = 0; i < a.ndim(); ++i) {
    sizes.push_back(static_cast<int64_t>(a.shape(i)));
    int64_t st = a.stride(i);  // in elements
    TP_CHECK(st >= 0, ValueError,
             "from_numpy: arrays with negative strides are not supported; make a copy with numpy.ascontiguousarray");
    strides.push_back(st);
    if (a.shape(i) == 0) span = 0;
    else if (span) span += (static_cast<int64_t>(a.shape(i)) - 1) * st;
  }
  // The storage holds a reference to the array; releasing it needs the GIL
  // because the last tensor may die on any thread.
  nb::object owner = nb::cast(a);
  PyObject* ref = owner.release().ptr();
  auto storage = StorageImpl::wrap(a.data(), static_cast<size_t>(span) * itemsize(dt), [ref] {
    // A tensor outliving the interpreter (held by a C++ static) must not touch it.
    if (!Py_IsInitialized() || interpreter_finalizing()) return;
    nb::gil_scoped_acquire gil;
    Py_DECREF(ref);
  });
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->sizes = sizes;
  impl->strides = strides;
  impl->dtype = dt;
  return Tensor(std::move(impl));
}

}  // namespace

void bind_functions(nb::module_& m) {
  m.def("from_numpy", &from_numpy, nb::arg("array"));
  // ---- dtypes ----
  m.def("promote_types", &promote_types, nb::arg("type1"), nb::arg("type2"));
  m.def("can_cast", &can_cast, nb::arg("from_"), nb::arg("to"));
  m.def("result_type", [](nb::handle a, nb::handle b) {
        return result_type(std::vector<Tensor>{require_operand(a, "result_type"), require_operand(b, "result_type")});
      }, nb::arg("tensor1"), nb::arg("tensor2"));
  m.def("get_default_dtype", &default_float_dtype);
  m.def("set_default_dtype", &set_default_float_dtype, nb::arg("d"));
  // ---- runtime ----
  m.def("set_num_threads", &set_num_threads);
  m.def("get_num_threads", &num_threads);
  // (live, peak) bytes of CPU tensor memory; the peak restarts from the live bytes.
  m.def("_host_memory_stats", [] { return std::make_pair(host_live_bytes(), host_peak_bytes()); });
  m.def("_reset_host_peak", &reset_host_peak);
  m.def("_set_blas_library", &set_blas_library);
  m.def("_prefer_blas_library", &prefer_blas_library);
  m.def("_blas_library", &blas_library);
  m.def("_float32_gemm_kernel", &blas::float32_gemm_kernel);
  // tp.use_deterministic_algorithms (tensorplay/_deterministic.py)
  m.def("_set_deterministic_algorithms", &set_deterministic_algorithms, nb::arg("mode"), nb::arg("warn_only"));
  m.def("_deterministic_algorithms", &deterministic_algorithms);
  m.def("_deterministic_algorithms_warn_only", &deterministic_algorithms_warn_only);
  m.def("_alert_not_deterministic", &alert_not_deterministic, nb::arg("what"));  // for Python-side operators
  // ---- tp.autocast (tensorplay/amp/autocast_mode.py); the state is thread-local, read by the dispatcher ----
  auto kind_of = [](const std::string& device_type) {
    if (device_type == "cpu") return Device::Kind::CPU;
    if (device_type == "cuda") return Device::Kind::CUDA;
    throw ValueError(str("autocast: unsupported device_type '", device_type,
                         "'; expected 'cpu' or 'cuda'"));
  };
  m.def("_set_autocast_enabled", [kind_of](const std::string& d, bool on) { set_autocast_enabled(kind_of(d), on); });
  m.def("_is_autocast_enabled", [kind_of](const std::string& d) { return autocast_enabled(kind_of(d)); });
  m.def("_set_autocast_dtype", [kind_of](const std::string& d, DType t) { set_autocast_dtype(kind_of(d), t); });
  m.def("_get_autocast_dtype", [kind_of](const std::string& d) { return autocast_dtype(kind_of(d)); });
  m.def("_set_autocast_cache_enabled", &set_autocast_cache_enabled);
  m.def("_is_autocast_cache_enabled", &autocast_cache_enabled);
  m.def("_autocast_increment_nesting", &autocast_increment_nesting);
  m.def("_autocast_decrement_nesting", &autocast_decrement_nesting);
  m.def("_clear_autocast_cache", &clear_autocast_cache);
  m.def("_autocast_active", &autocast_active);
  m.def("_autocast_push_suspend", &autocast_push_suspend);
  m.def("_autocast_pop_suspend", &autocast_pop_suspend);
  m.def("_autocast_swap_suspended", &autocast_swap_suspended, nb::arg("depth"));
  // A composite written in Python (tp.nn.functional.scaled_dot_product_attention,
  // the Python losses) applies its policy by name: its tensor arguments are cast
  // through the dispatcher (recorded) and the other items come back as they are.
  m.def("_autocast_cast", [](const std::string& name, nb::list items) {
    std::vector<Tensor> ts;
    for (nb::handle h : items)
      if (nb::isinstance<Tensor>(h)) ts.push_back(nb::cast<Tensor>(h));
    const Device::Kind kind = autocast_device_of(ts);
    const AutocastPolicy policy = autocast_policy(name, kind);
    nb::list out;
    if (policy == AutocastPolicy::None || !autocast_enabled(kind)) {
      for (nb::handle h : items) out.append(h);
      return nb::make_tuple(false, out);
    }
    std::vector<Tensor> cast = autocast_cast_inputs(policy, kind, ts);
    size_t k = 0;
    for (nb::handle h : items) {
      if (nb::isinstance<Tensor>(h)) out.append(nb::cast(cast[k++]));
      else out.append(h);
    }
    return nb::make_tuple(true, out);
  });
}

}  // namespace tp::py
