// tp.profiler's C++ half: start/stop the recorder (core/profiler.h) and hand
// its events to Python as tuples; tensorplay/profiler/ builds PyTorch's API
// (profile, record_function, key_averages, chrome traces) on them.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "common.h"
#include "core/profiler.h"

namespace tp::py {

void bind_profiler(nb::module_& m) {
  m.def(
      "_profiler_start",
      [](bool record_shapes, bool profile_memory) {
        profiler::Config c;
        c.record_shapes = record_shapes;
        c.profile_memory = profile_memory;
        profiler::start(c);
      },
      nb::arg("record_shapes") = false, nb::arg("profile_memory") = false);
  // Each event: (name, kind, id, parent, thread, start_ns, end_ns, shapes, dtypes, memory_delta).
  m.def("_profiler_stop", [] {
    nb::list out;
    for (profiler::Event& e : profiler::stop())
      out.append(nb::make_tuple(e.name, e.kind, e.id, e.parent, e.thread, e.start_ns, e.end_ns, e.shapes, e.dtypes,
                                e.memory_delta));
    return out;
  });
  m.def("_profiler_active", &profiler::active);
  m.def("_profiler_open_range", [](std::string name) { return profiler::open_user_range(std::move(name)); });
  m.def("_profiler_close_range", &profiler::close_user_range);
}

}  // namespace tp::py
