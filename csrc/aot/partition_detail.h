// Helpers shared by the two partitioners (the minimum cut, partition.cpp, and
// binomial checkpointing of chains, chain_checkpoint.cpp).
#pragma once
#include <memory>
#include <optional>
#include <unordered_set>
#include <unordered_map>
#include <vector>

#include "aot/partition.h"

namespace tp::aot::detail {

int64_t bytes_of(const TensorMeta& m);
// Cheap, deterministic, of the size of its inputs: the backward may compute it again.
bool recomputable(const graph::Node* n);
bool is_gemm(const graph::Node* n);
using graph::copy_node;
// The two sides of a joint graph: the tangent-dependent nodes (the backward,
// tangent placeholders included), and the tangent and primal placeholders by
// input position.
struct JointSides {
  std::unordered_set<const graph::Node*> bwd;
  std::vector<const graph::Node*> tangents, primals;
};
JointSides joint_sides(const JointGraph& joint);
// primals -> (results..., saved activations...)
std::shared_ptr<graph::Graph> build_forward(const JointGraph& joint, const std::vector<const graph::Node*>& saved_act);

// Binomial checkpointing when the forward side is a chain of states (see
// chain_checkpoint.cpp); nullopt when it is not one or cannot be recomputed.
std::optional<Partition> chain_checkpoint_partition(const JointGraph& joint, int64_t budget);

}  // namespace tp::aot::detail
