// The backward graph: one Node per differentiable operator call, pointing at
// the Nodes that produced its inputs (edges). Leaves that require grad end in
// an AccumulateGrad node writing their .grad.
#pragma once
#include <memory>
#include <vector>

#include "ops/registry.h"

namespace tp::autograd {

class Node;
struct Edge {
  std::shared_ptr<Node> fn;  // null: this input needs no gradient
  uint32_t input_nr = 0;     // which output of `fn` this edge feeds
};

class Node {
 public:
  virtual ~Node() = default;
  // grads w.r.t. this node's outputs -> grads w.r.t. its inputs (one per edge)
  virtual std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) = 0;
  virtual std::string name() const = 0;
  virtual void release_saved() {}
  std::vector<Edge> next_edges;
  uint32_t num_outputs = 1;
};

// Backward of a registry operator: calls its OpDef::backward.
class OpNode : public Node {
 public:
  OpNode(const OpDef& op, Attrs attrs) : op_(op), attrs_(std::move(attrs)) {}
  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) override;
  std::string name() const override { return std::string(op_.name) + "_backward"; }
  void release_saved() override;
  std::vector<Tensor> saved_inputs, saved_outputs;
  std::vector<Shape> input_shapes;
  std::vector<DType> input_dtypes;

 private:
  const OpDef& op_;
  Attrs attrs_;
  bool released_ = false;
};

class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf_(leaf) {}
  std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) override;
  std::string name() const override { return "AccumulateGrad"; }
  std::weak_ptr<TensorImpl> leaf_;
};

// Detached alias: same storage, no autograd history (what Nodes save).
Tensor detached(const Tensor& t);
// The edge a tensor contributes as an input of a new Node.
Edge gradient_edge(const Tensor& t);

}  // namespace tp::autograd
