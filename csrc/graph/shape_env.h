// The shape environment of a symbolic capture (dynamic shapes, Section 10.2).
//
// While the function runs on the example inputs, every decision that depends on
// a symbolic size (a broadcast, a shape branch `if x.shape[0] > 16:`, a Python
// int taken from a size) is recorded here as a shape guard: the relation that
// held at the hints. A guard implied by the symbols' ranges is dropped; an
// equality that fixes a symbol (s0 == 8) or identifies two symbols (s1 == s0)
// becomes a replacement, substituted into the whole graph when the capture
// ends; every other guard is checked at run time before the artifact runs.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/graph.h"

namespace tp::graph {

// `expr REL 0`; a < b is recorded as b - a - 1 >= 0 (integers).
enum class GuardRel { Eq, Ne, Ge };

struct ShapeGuard {
  SymDim expr;
  GuardRel rel = GuardRel::Ge;
  std::string where;  // the user's source line that made the decision, when known
  // values: size_var_id(k) -> value of symbol k.
  bool holds(const std::unordered_map<int, int64_t>& values) const;
  // Readable, symbols named by origin: "x.size(0) % 8 == 0".
  std::string describe(const std::vector<SymbolInfo>& symbols) const;
};

// TP_LOGS=guards (or all): a symbolic capture says where it specialized.
bool guards_logged();

// Prints an expression with the symbols named by their origin ("x.size(0) * 4").
std::string describe_sym(const SymDim& e, const std::vector<SymbolInfo>& symbols);
// The value of e at the symbols' hints.
int64_t eval_at_hints(const SymDim& e, const std::vector<SymbolInfo>& symbols);
// size_var_id(k) -> hint for every symbol.
std::unordered_map<int, int64_t> hint_values(const std::vector<SymbolInfo>& symbols);
// Symbol ranges for simplification / range analysis.
stax::ir::RangeMap symbol_ranges(const std::vector<SymbolInfo>& symbols);

class ShapeEnv {
 public:
  // A new symbol for an input dim; returns its index k (size_var(k)).
  int new_symbol(int64_t hint, int64_t min, int64_t max, std::string origin, int input_index, int input_dim);
  // Replacements applied and simplified with the ranges.
  SymDim resolve(const SymDim& e) const;
  int64_t hint(const SymDim& e) const;
  // Decides `e REL 0` at the hints, records the outcome as a guard, returns it.
  bool decide(const SymDim& e, GuardRel rel, const std::string& where = "");
  // Records e == hint(e) and returns the hint (a size used where only an int fits).
  int64_t specialize(const SymDim& e, const std::string& where = "");
  // Records a == b (broadcasting / matmul inner dims): true when it held at the hints.
  bool require_equal(const SymDim& a, const SymDim& b, const std::string& where = "");
  // Substitutes the replacements into every node and renumbers the live symbols
  // densely; a graph left without symbols becomes static (all symbolic data
  // cleared). Returns the run-time guards (implied ones dropped).
  std::vector<ShapeGuard> finish(Graph& g);
  // After finish(): an expression of the capture in the graph's final numbering.
  SymDim finalize(const SymDim& e) const;
  const std::vector<SymbolInfo>& symbols() const { return symbols_; }
  bool empty() const { return symbols_.empty(); }
  // Decisions recorded so far (guards and replacements).
  size_t num_decisions() const { return guards_.size(); }

 private:
  void add_replacement(int k, const SymDim& by);
  const stax::ir::RangeMap& ranges() const { return ranges_; }
  // Kept with the symbols (rebuilt per query, they were most of a capture's extra time).
  stax::ir::RangeMap ranges_;
  std::unordered_map<int, int64_t> hints_;
  std::vector<SymbolInfo> symbols_;
  std::unordered_map<int, SymDim> replacements_;  // size_var_id(k) -> expression
  std::vector<ShapeGuard> guards_;
  std::unordered_map<int, SymDim> renum_;  // filled by finish()
  std::vector<SymbolInfo> live_;
  stax::ir::RangeMap live_ranges_;
  bool renumbered_ = false;  // some symbol was dropped: renum_ is not the identity
};

}  // namespace tp::graph
