// Dynamic shapes on CUDA, the safety net: a symbolic graph the CUDA path
// refuses (a rule or the printer without a symbolic form) is compiled
// statically at each call's sizes instead of running eagerly. Before symbolic
// CUDA regions existed, automatic dynamic on CUDA inputs recompiled statically
// and ran generated code; a refusal of the symbolic print must not turn such a
// region into an eager one.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"

namespace tp::stax {

// g (symbolic) as the static capture it would have been at `inputs`' sizes:
// every node's metas re-inferred from its operands' (attributes computed from
// sizes evaluated at this call's sizes), devices kept, symbolic data cleared.
// Throws Error when an input does not fit the graph (rank, symbol's dim).
std::unique_ptr<graph::Graph> specialize_graph(const graph::Graph& g, const std::vector<Tensor>& inputs);

// One static CUDA region per input layout (sizes and strides) of a symbolic
// graph: `build` compiles the specialized graph (preparing it as for any
// static region) at the first call with that layout; later calls reuse it.
class SpecializingCudaRegion {
 public:
  using RunFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  using BuildFn = std::function<RunFn(const graph::Graph& g, const std::vector<Tensor>& examples)>;
  SpecializingCudaRegion(std::shared_ptr<const graph::Graph> g, BuildFn build)
      : graph_(std::move(g)), build_(std::move(build)) {}
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  // Builds the version for these inputs now (a refusal raises here: the
  // backend then falls back as for a static graph).
  void prepare(const std::vector<Tensor>& inputs) { version(inputs); }
  int versions() const;

 private:
  RunFn version(const std::vector<Tensor>& inputs);
  std::shared_ptr<const graph::Graph> graph_;
  BuildFn build_;
  mutable std::mutex mu_;
  std::map<std::string, RunFn> versions_;
};

// Process-wide count of specialized versions built (tests: a forced symbolic
// refusal specializes instead of falling back to eager).
int64_t cuda_specialized_versions();

}  // namespace tp::stax
