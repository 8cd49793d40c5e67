// Testing only: dynamic shapes without the front end. A static capture made at
// distinctive example sizes (37, 53, 1031, ...) becomes a symbolic graph by a
// heuristic that is sound only for such sizes: every size equal to hints[k] is
// size_var(k), one equal to hints[k] - 1 is size_var(k) - 1, one equal to
// 2 * hints[k] is size_var(k) * 2, one equal to hints[i] + hints[j] or
// hints[i] * hints[j] their sum or product, in every node's sizes and every
// int / int-list attribute. Symbol k is read from the first input dim whose
// size is hints[k]. Tests (C++ and the `_testing_stax_symbolic` hook) then
// compile the graph once and call it at other sizes.
#pragma once
#include <vector>

#include "graph/graph.h"

namespace tp::stax::testing {

// Throws ValueError when no input has a dim of size hints[k].
void mark_symbols(graph::Graph& g, const std::vector<int64_t>& hints);

// The Stax passes, except that mean, var and std stay whole: their
// decompositions divide by the element count as a number, which a symbolic
// graph must not bake in (their lowering rules divide by the count read at run time).
void run_passes_keeping_mean(graph::Graph& g);

}  // namespace tp::stax::testing
