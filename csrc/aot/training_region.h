// The AOT layer's entry (Section 5): a captured graph whose inputs require
// grad becomes a forward region and a backward region, compiled by whatever
// backend the caller plugs in, joined by an autograd node.
//   capture -> passes -> [trace_joint -> min_cut_partition] -> backend(forward),
//                                                              backend(backward) at the first backward
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "aot/partition.h"

namespace tp::aot {

using RegionFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;
// Compiles one graph with the backend; `which` is "forward" or "backward".
using RegionCompiler = std::function<RegionFn(std::shared_ptr<const graph::Graph> g,
                                              const std::vector<Tensor>& examples, const std::string& which)>;

struct AotOptions {
  std::string region;       // the region's name in errors and logs ("'f'")
  bool log = false;         // TP_LOGS=aot: joint graph, cut, saved values
  bool backward_ahead = false;  // compile the backward with the forward (strict_native: errors at the call)
  // Compile the backward ahead, before the forward: with a backend that builds
  // in the background the two C++ builds then run at once (Section 11.2).
  bool backward_first = false;
  // Inputs the caller overwrites after the region ran (functionalized in-place
  // writes): a saved one is copied, since the backward needs its value before the write.
  std::vector<int> written_inputs;
  PartitionOptions partition;
  // Dynamic shapes: the symbolic joint graph the caller traced (and accepted,
  // trace_joint_symbolic) while deciding the version's guards; the region
  // partitions it instead of tracing a static one.
  std::shared_ptr<JointGraph> joint;
  // Per result: the results computed from it in eager (results_computed_from_results
  // of the graph before CSE merged equal values): the node refuses hooks,
  // retain_grad() and autograd.grad on a result whose gradient would miss theirs.
  std::shared_ptr<const std::vector<std::vector<int>>> results_from_results;
  // Per result: the results whose gradient makes eager's backward read it
  // (results_eager_reads): written in place after the call, the backward then
  // raises as eager does instead of using the values it kept.
  std::shared_ptr<const std::vector<std::vector<int>>> results_eager_reads;
  // Non-empty: the function wrote in place into a value its backward reads
  // (graph::TraceResult::backward_error); the backward raises it, as eager's.
  std::string backward_error;
};

struct AotResult {
  RegionFn run;             // inputs -> results carrying the region's grad_fn
  Partition partition;
  std::string joint_code;
};

// `inputs`: the call's tensors (arguments, then free tensors); which of them
// require grad decides what is differentiated.
// Per result of the graph: the other floating results computed from it through
// differentiable operators (grad mode on, no detach). On the graph as captured,
// before passes: CSE would make `tanh(x @ w)` read a returned `x @ w` that eager
// computed twice.
std::vector<std::vector<int>> results_computed_from_results(const graph::Graph& g);

// Per result: the results whose gradient makes eager's backward read that
// result's value (saved by the formula of the operator that made it, of one
// that used it, or of one that used a view of the same base), given which
// inputs require grad. On the graph as captured, before passes.
std::vector<std::vector<int>> results_eager_reads(const graph::Graph& g, const std::vector<bool>& input_requires_grad);

AotResult compile_training_region(std::shared_ptr<const graph::Graph> g, const std::vector<Tensor>& inputs,
                                  const RegionCompiler& compile, const AotOptions& options);

}  // namespace tp::aot
