// tp.compile's run-time object (Sections 2, 3, 11): specialization key, guard
// chain, first-level entry, capture, passes, backend dispatch and fallback.
//
// One call:
//   first-level entry: the same tensor objects at the same versions as the
//     last call (and equal scalars) -> run the last artifact directly;
//   else the specialization key (dtype, sizes, strides, requires_grad of each
//     tensor; value of each Python scalar; grad mode) -> cached artifact;
//   else capture -> passes -> backend -> register under the key.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "compile/options.h"
#include "graph/graph.h"

namespace tp::compile {

using ArgValue = std::variant<Tensor, Scalar>;
// Calls the user's function with these arguments (tensors may be tracing proxies).
using UserFn = std::function<std::vector<Tensor>(const std::vector<ArgValue>& args)>;

class CompiledFunction {
 public:
  CompiledFunction(UserFn fn, CompileOptions options, std::vector<std::string> arg_names, int num_params);
  std::vector<Tensor> call(const std::vector<ArgValue>& args);
  const CompileOptions& options() const { return options_; }
  int num_params() const { return num_params_; }
  // The graph of the most recent specialization (after passes), for inspection.
  std::shared_ptr<const graph::Graph> last_graph() const { return last_graph_; }
  std::string last_source() const { return last_source_; }
  size_t num_specializations() const { return cache_.size(); }

 private:
  struct Artifact {
    RegionFn run;
    std::shared_ptr<const graph::Graph> graph;
    std::string description;  // per-argument metadata, for recompile reasons
  };
  struct FirstLevel {
    std::vector<const TensorImpl*> impls;
    std::vector<std::weak_ptr<TensorImpl>> alive;
    std::vector<uint64_t> versions;
    std::vector<uint8_t> requires_grad;
    std::vector<Scalar> scalars;
    bool grad_mode = true;
    const Artifact* artifact = nullptr;
  };

  bool first_level_matches(const std::vector<ArgValue>& args) const;
  void remember_first_level(const std::vector<ArgValue>& args, const Artifact* a);
  std::string specialization_key(const std::vector<ArgValue>& args) const;
  std::string describe(const std::vector<ArgValue>& args) const;
  Artifact build(const std::vector<ArgValue>& args, const std::vector<Tensor>& tensors);
  RegionFn run_backend(std::shared_ptr<graph::Graph> g, const std::vector<Tensor>& tensors, bool needs_grad,
                       std::string* source);
  void check_arity(const std::vector<ArgValue>& args) const;

  UserFn fn_;
  CompileOptions options_;
  std::vector<std::string> arg_names_;
  int num_params_;  // -1: unknown / variadic
  std::unordered_map<std::string, std::unique_ptr<Artifact>> cache_;
  FirstLevel first_;
  uint64_t epoch_;
  std::shared_ptr<const graph::Graph> last_graph_;
  std::string last_source_;
};

}  // namespace tp::compile
