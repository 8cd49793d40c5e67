#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace tp::compile {

// What a compiled region is at run time: tensor inputs -> tensor outputs.
using RegionFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;
// A user backend: (captured graph, example inputs) -> callable (Section 11.4 prefixes are backends too).
using CustomBackend = std::function<RegionFn(std::shared_ptr<const graph::Graph>, const std::vector<Tensor>&)>;

struct CompileOptions {
  std::string backend = "stax";   // "stax", "eager", "aot_eager", or a registered name
  CustomBackend custom_backend;   // set when the user passed a callable
  std::string mode;               // preset; "default" behaves like empty
  std::map<std::string, std::string> options;
  // Dynamic shapes (Section 10): Off never makes a size symbolic; On makes every
  // dim of size >= 2 symbolic from the first capture; Auto (the default) captures
  // the first call statically and recompiles the dims whose size changed as symbolic.
  enum class Dynamic { Off, On, Auto };
  Dynamic dynamic = Dynamic::Auto;
  bool fullgraph = true;
  bool strict_native = false;
};

// Adds a user backend to the registry (compile/backend.h); it sits behind the AOT layer.
void register_backend(const std::string& name, CustomBackend backend);

// Parses TP_LOGS (comma separated: recompiles, graph, code, aot, guards — the symbols and shape
// guards of each symbolic capture; cuda_eager — why an eager CUDA operator got no generated
// kernel; region_times — at exit, each CPU region's time split into generated code and extern
// calls, stax/runtime/region_times.h). The switch itself is core/logs.h.
bool log_enabled(const char* topic);

}  // namespace tp::compile
