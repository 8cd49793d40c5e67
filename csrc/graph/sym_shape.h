// Symbolic sizes in the captured graph (dynamic shapes, Section 10).
//
// A dim of a captured value is either a constant or an integer expression over
// *symbols*. Symbol k is Stax's size variable `size_var(k)`: the value of
// `sizes[k]` that a generated entry point receives, so the graph and the loop IR
// share one symbol space and one expression type (stax/ir/index_expr.h is a leaf
// library over tp_core: exact integer arithmetic, simplification, range analysis,
// evaluation). Static graphs carry no symbolic data at all: an empty SymShape
// means "meta.sizes is exact".
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "stax/ir/index_expr.h"

namespace tp::graph {

// A constant, or an expression over size_var(k) symbols. Evaluated at the
// symbols' hints it gives the example call's size.
using SymDim = stax::ir::IndexExpr;
using SymShape = std::vector<SymDim>;

// One symbol of a graph. It stands for a dim of an input (`origin`, e.g.
// "x.size(0)"); its value at a call is read from that input. The hint is the
// value at the capture's example call (speed decisions use it); [min, max] is
// the range every artifact built from the graph must be valid on (0/1
// specialization makes min >= 2 unless a declared range says otherwise).
struct SymbolInfo {
  int64_t hint = 0;
  int64_t min = 2;
  int64_t max = std::numeric_limits<int64_t>::max();
  std::string origin;
  int input_index = -1;  // placeholder whose dim `input_dim` is exactly this symbol
  int input_dim = -1;
};

}  // namespace tp::graph
