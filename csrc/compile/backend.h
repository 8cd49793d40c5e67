// Backends behind one interface (Section 11.4): "stax", "eager", "aot_eager"
// and user backends are entries of one registry. A backend receives a graph and
// example inputs and returns the region's callable. When the call needs
// gradients, backends that sit behind the AOT layer receive the partitioned
// forward and backward graphs instead of the captured one (the AOT seat,
// csrc/aot); "eager" does not (it runs the captured graph with autograd
// recording, the first prefix of Algorithm 11.1).
#pragma once
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "compile/options.h"
#include "stax/backend/stax_backend.h"

namespace tp::compile {

// What a backend is asked to compile.
struct BackendRequest {
  std::shared_ptr<const graph::Graph> graph;
  const std::vector<Tensor>& examples;
  const CompileOptions& options;
  // "'f'" for an inference region, "'f' (forward)" / "'f' (backward)" behind the AOT layer.
  std::string region;
  std::string* source = nullptr;  // a code-generating backend leaves its source here
  // Reports a region that runs eagerly instead (once per compiled function).
  std::function<void(const std::string&)> warn_fallback;
  // Filled by a code-generating backend when given (tp.compiler.explain, bisect):
  // the generated kernels, or why the region was not generated.
  std::vector<stax::KernelInfo>* kernels = nullptr;
  std::string* fallback_reason = nullptr;
  // In-place reuse: (graph output, graph input) pairs where the output is the
  // final value of an input the function writes and the call copies it in. A
  // backend may compute such an output straight into the input's memory
  // (returning the input's tensor); the call then skips the copy.
  std::vector<std::pair<int, int>> write_into;
};
using BackendFn = std::function<RegionFn(const BackendRequest&)>;

struct Backend {
  BackendFn compile;
  bool behind_aot = true;  // grad calls: compiled as forward + backward graphs through the AOT layer
  // Its compile returns before the C++ build ends (waited for at the first
  // run), so the AOT layer compiles the backward first, ahead, and the two
  // builds overlap (Section 11.2).
  bool builds_in_background = false;
  // Takes graphs with symbolic sizes (graph/sym_shape.h). Otherwise a symbolic
  // capture is made static first (automatic dynamic, user backends) or, for
  // stax under dynamic=True, the region runs interpreted (a BackendError fallback).
  bool symbolic = false;
};
// Whether Stax lowers symbolic graphs (dynamic shapes: flipped when its lowering is symbolic).
bool stax_lowers_symbolic_graphs();

// Built-ins are present from the start; user backends (register_backend in
// options.h, or a callable passed to tp.compile) are wrapped the same way.
const Backend* lookup_backend(const std::string& name);
// The graph passes turned off by options["disable_passes"] (bisection).
std::set<std::string> disabled_passes(const CompileOptions& options);
Backend user_backend(CustomBackend fn);

}  // namespace tp::compile
