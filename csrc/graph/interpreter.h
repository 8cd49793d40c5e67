// Runs a Graph operator by operator through the dispatcher: the "eager"
// backend, the fallback when Stax cannot generate a region, and the path for
// inputs that require grad (autograd records as usual).
#pragma once
#include <vector>

#include "graph/graph.h"

namespace tp::graph {
std::vector<Tensor> interpret(const Graph& g, const std::vector<Tensor>& inputs);
}
