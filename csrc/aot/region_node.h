// The autograd node of a compiled training region (Section 5.6): the forward
// graph ran as one region and saved its activations; this node's backward runs
// the compiled backward graph on them and the incoming gradients.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/node.h"

namespace tp::aot {

class CompiledRegionNode : public autograd::Node {
 public:
  // (saved activations..., saved primals..., tangents...) -> grads (one per primal that gets one)
  using BackwardRegion = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  CompiledRegionNode(std::string region, BackwardRegion backward) : region_(std::move(region)), backward_(std::move(backward)) {}
  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) override;
  std::string name() const override { return "CompiledFunctionBackward"; }
  void release_saved() override;
  void check_observed(const std::vector<Tensor>& grad_outputs, const std::vector<uint32_t>& captured) override;

  std::vector<Tensor> saved;          // detached; activations then primals
  std::vector<uint64_t> saved_versions;
  // Saved-tensor hooks were installed when the region ran (autograd/saved_hooks.h):
  // `saved` is empty and these stand for it, with the metadata an unpacked value
  // must have (the compiled backward reads it as that layout).
  std::vector<std::shared_ptr<autograd::PackedSaved>> packed_saved;
  std::vector<TensorMeta> packed_metas;
  std::vector<TensorMeta> tangent_metas;  // per differentiable output, in order
  std::vector<int> tangent_of_output;     // per output: its tangent index, or -1
  std::vector<int> grad_of_input;         // per input (edge): index into the backward's results, or -1
  // Per input (edge): the tangents its gradient reads. When none of them got a
  // gradient (the caller differentiated only other results), the input gets no
  // gradient, as in eager, where its part of the graph is not reached: its
  // .grad stays None instead of becoming zeros (which weight decay or momentum
  // would then act on). Empty: always given (a gradient that reads no tangent).
  std::vector<std::vector<int>> tangents_of_input;
  // Per output: the other outputs the region computes from it (differentiably).
  // Their gradients reach the inputs inside the compiled backward without
  // passing through this output, so a hook, retain_grad() or autograd.grad on
  // it would miss them: refused when they got a gradient (check_observed).
  std::vector<std::vector<int>> downstream_of_output;
  // Results eager's backward reads (an exp, tanh or sigmoid result; a result a
  // later product used): a write into one after the call, with a gradient for
  // one of `triggers`, raises as eager does. The compiled backward kept its
  // own copy or recomputes it, and would silently use the old values.
  struct WatchedResult {
    Tensor result;  // detached alias: the result's version counter
    uint64_t version;
    std::vector<int> triggers;
  };
  std::vector<WatchedResult> watched_results;
  // AotOptions::backward_error: raised when the backward runs.
  std::string backward_error;

 private:
  std::string region_;
  BackwardRegion backward_;
  bool released_ = false;
};

}  // namespace tp::aot
