// Graph passes (Section 4). Each returns whether it changed the graph;
// run_default_passes iterates them to a fixed point.
#pragma once
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace tp::passes {

// softmax -> amax/sub/exp/sum/div, mean -> sum/div; operators for which
// `keep_whole` says true stay (the backend lowers them itself).
bool decompose_composites(graph::Graph& g, const std::function<bool(const std::string&)>& keep_whole = {});
bool eliminate_common_subexpressions(graph::Graph& g);
bool eliminate_dead_code(graph::Graph& g);
// IEEE-754-safe algebraic simplification: only rewrites that keep every value
// bit-identical except the sign of zero (x + 0 -> x, x * 1 -> x, x / 1 -> x).
bool simplify_algebra(graph::Graph& g);
// (A B)^T -> B^T A^T for 2-D products used once, and views/permutes that do nothing
// removed: a transposed GEMM result is never materialized (Stax pipeline only).
bool transpose_products(graph::Graph& g);

struct PassOptions {
  bool decompose = true;  // the Stax backend wants primitive operators; eager does not need them
  // Passes turned off by name (compile option "disable_passes"): bisection
  // (Algorithm 11.1) turns them off one at a time to find the one that breaks a result.
  std::set<std::string> disabled;
  // Composites the backend lowers natively (Stax: layer_norm, var, ...): not decomposed.
  std::function<bool(const std::string&)> keep_whole;
};
void run_default_passes(graph::Graph& g, const PassOptions& options = {});

// The pass names run_default_passes knows, in the order it runs them:
// decompose, simplify_algebra, transpose_products, cse, dce, then any testing pass registered below.
std::vector<std::string> pass_names();
// "cse,dce", "['cse', 'dce']" (a Python list passed through str()) -> {"cse", "dce"};
// an unknown name raises ValueError listing the known ones.
std::set<std::string> parse_pass_list(const std::string& text);

// Testing only (planted faults for the bisection tests): an extra pass, run after
// the default ones on every iteration; `stax_only`: only in the Stax pipeline
// (decompose = true). It must report a change only when it made one.
using PassFn = std::function<bool(graph::Graph&)>;
void register_testing_pass(const std::string& name, PassFn fn, bool stax_only);
void clear_testing_passes();

}  // namespace tp::passes
