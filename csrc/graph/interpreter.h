// Runs a Graph operator by operator through the dispatcher: the "eager"
// backend, the fallback when Stax cannot generate a region, and the path for
// inputs that require grad (autograd records as usual).
#pragma once
#include <vector>

#include "graph/graph.h"

#include <unordered_map>

namespace tp::graph {
std::vector<Tensor> interpret(const Graph& g, const std::vector<Tensor>& inputs);
// Dynamic shapes: size_var_id(k) -> the value of symbol k at this call (read
// from the input dim SymbolInfo names), and a node's attributes evaluated there.
std::unordered_map<int, int64_t> symbol_values(const Graph& g, const std::vector<Tensor>& inputs);
// A compiled region's symbol `sym` read from its input dim at a call, checked
// against the range the region was compiled for (ValueError naming `who`).
int64_t checked_symbol_value(const SymbolInfo& sym, const std::vector<Tensor>& inputs, const char* who);
Attrs evaluate_sym_attrs(const Node& n, const std::unordered_map<int, int64_t>& values);
Attrs evaluate_attrs(const Attrs& attrs, const std::map<std::string, std::vector<SymDim>>& sym_attrs,
                     const std::unordered_map<int, int64_t>& values);
}
