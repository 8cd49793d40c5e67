// Graph passes (Section 4). Each returns whether it changed the graph;
// run_default_passes iterates them to a fixed point.
#pragma once
#include "graph/graph.h"

namespace tp::passes {

bool decompose_composites(graph::Graph& g);  // softmax -> amax/sub/exp/sum/div, mean -> sum/div
bool eliminate_common_subexpressions(graph::Graph& g);
bool eliminate_dead_code(graph::Graph& g);
// IEEE-754-safe algebraic simplification: only rewrites that keep every value
// bit-identical except the sign of zero (x + 0 -> x, x * 1 -> x, x / 1 -> x).
bool simplify_algebra(graph::Graph& g);

struct PassOptions {
  bool decompose = true;  // the Stax backend wants primitive operators; eager does not need them
};
void run_default_passes(graph::Graph& g, const PassOptions& options = {});

}  // namespace tp::passes
