// Guard replay (Section 3, Proposition 3.1): the part of a captured graph that a
// data gate's value depends on, cut out as a graph of its own (reverse slicing),
// so a call can compute the gate's value from its inputs before choosing which
// captured program to run.
#pragma once
#include <memory>

#include "graph/graph.h"

namespace tp::graph {

// A graph with the same placeholders (input indices) that returns `target`'s
// value, holding only the nodes `target` depends on, in the original order.
std::unique_ptr<Graph> slice_to(const Graph& g, const Node* target);

}  // namespace tp::graph
