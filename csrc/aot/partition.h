// Splitting the joint graph into a forward and a backward graph by a minimum
// cut on the rematerialization network (Definition 5.2, Proposition 5.1).
//
// Network: every tensor-independent-of-the-tangents value v (the forward side
// of the joint graph) is an edge v_in -> v_out whose capacity is v's bytes:
// cutting it means "the forward saves v". Data edges u_out -> v_in and the
// edges into the sink from every value the backward side reads are infinite;
// primals and values that must not be recomputed (GEMMs, reductions, anything
// not pointwise or a view: U of Section 5.4) hang off the source with infinite
// capacity. A finite cut separates what the forward computes from what the
// backward needs; the cheapest one saves the fewest bytes, and every value
// below the cut that the backward reads is recomputed there from saved ones
// (Example 5.1: h = x @ W is saved, erf(h / sqrt 2) is recomputed).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "aot/joint_graph.h"

namespace tp::aot {

struct SavedValue {
  std::string name;  // the joint graph's node name
  TensorMeta meta;
  int64_t bytes = 0;
  int primal = -1;   // >= 0: a forward input, passed to the backward by reference (no new memory)
};

// Activation checkpointing (Section 5.5): a cap on the saved activation bytes,
// in bytes or as a fraction of what the unconstrained cut saves; values of U
// (GEMMs, reductions) are then recomputed in the backward as well. Negative: none.
struct PartitionOptions {
  int64_t budget_bytes = -1;
  double budget_fraction = -1;
};

struct Partition {
  // primals -> (forward results..., saved activations...)
  std::shared_ptr<graph::Graph> forward;
  // (saved activations..., saved primals..., tangents...) -> grads (joint grad order)
  std::shared_ptr<graph::Graph> backward;
  std::vector<SavedValue> saved;   // activations first, then primals: the backward's first inputs
  int num_saved_activations = 0;
  int64_t saved_bytes = 0;         // activations only: the memory the forward keeps for the backward
  int64_t default_saved_bytes = 0; // what the cut without a budget saves
  int64_t budget_bytes = -1;       // the budget applied (-1: none)
  std::vector<std::string> checkpointed;  // values of U the budget made the backward recompute
  std::vector<std::string> recomputed;  // forward-side values the backward computes again
  // Binomial checkpointing of a chain (Theorem 5.4), when the budget chose it
  // over the cut: steps of the chain, states the budget holds, step evaluations
  // in the backward (each step's own recomputation included). steps == 0: not used.
  struct ChainCheckpointing {
    int steps = 0, slots = 0;
    int64_t evaluations = 0;
  } chain;
  int num_tangents = 0;
  int num_grads = 0;
  std::string report() const;      // the cut, for TP_LOGS=aot
};

Partition min_cut_partition(const JointGraph& joint, const PartitionOptions& options = {});

}  // namespace tp::aot
