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
[[noreturn]] void throw_symbolic_input_mismatch(const Tensor& t, int index, const char* who);
// A compiled region's input of symbolic shape at a call: dim d of size
// size_of(d), laid out contiguously (what generated indices assume); else a
// ValueError naming `who`. A template so the per-call check allocates nothing.
template <class SizeOf>
void check_symbolic_input(const Tensor& t, int index, size_t rank, SizeOf size_of, const char* who) {
  bool ok = t.dim() == static_cast<int64_t>(rank);
  int64_t expect = 1;
  for (size_t d = rank; ok && d-- > 0;) {
    const int64_t n = size_of(d);
    ok = t.sizes()[d] == n && (n <= 1 || t.strides()[d] == expect);
    expect *= n > 1 ? n : 1;
  }
  if (!ok) throw_symbolic_input_mismatch(t, index, who);
}
Attrs evaluate_sym_attrs(const Node& n, const std::unordered_map<int, int64_t>& values);
Attrs evaluate_attrs(const Attrs& attrs, const std::map<std::string, std::vector<SymDim>>& sym_attrs,
                     const std::unordered_map<int, int64_t>& values);
}
