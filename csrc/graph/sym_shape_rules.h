// Symbolic shape rules (dynamic shapes): the SymShape of a recorded node's
// results from its inputs' SymShapes, attributes and symbolic attributes.
// A rule records every size decision it makes (broadcast equalities, slice
// clamping, view divisibility) in the ShapeEnv as a guard. An operator without
// a rule gets no symbolic form: the caller specializes the symbols of its inputs.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "graph/shape_env.h"

namespace tp::graph {

// The operator call the user's Python code made (the binding opens it around
// the dispatcher call): its int attributes that came from SymInts, and the plain
// ints it was given (`literals`). The tracer records either that operator itself
// or, for a composite, its parts; a part's int attribute that is not one of the
// user's literals was computed from sizes by the composite, so a rule may only
// read it symbolically (matching a size) or must specialize.
struct UserCall {
  const OpDef* op = nullptr;
  std::map<std::string, std::vector<SymDim>> sym_attrs;
  std::vector<int64_t> literals;
  // The call's attributes (split/chunk: the parts' bounds follow from them and
  // from the split dim's size alone, which their rules use).
  Attrs attrs;
  // The user's source line, computed when a decision needs it (walking Python
  // frames at every operator call would dominate a capture's time).
  std::string (*where_fn)() = nullptr;
  // sym_attrs reached a recorded node (or a rule that read them: narrow's parts).
  mutable bool consumed = false;
  bool is_literal(int64_t v) const;
  const std::string& where() const;

 private:
  mutable std::string where_;
  mutable bool where_known_ = false;
};

// Fills n.sym_sizes / n.output_sym_sizes (and n.sym_attrs where an attribute
// must be evaluated per call). `part`: the node is part of a composite the user
// called (its attributes may have been computed from sizes). False: no rule.
bool apply_sym_rule(Node& n, ShapeEnv& env, bool part, const UserCall* call);

// The SymShape of a value: its sym_sizes, or constants from its meta.
SymShape sym_shape_of(const Node& n);

// After a pass: gives nodes without sym_sizes (new ones) their SymShapes. False
// when a new node has no rule or would need a new guard (the graph is then not
// valid for every size its guards admit, and the caller makes it static).
bool propagate_sym_shapes(Graph& g, std::string* why = nullptr);
// Clears every symbolic datum: the graph as a static capture at its hints.
void make_static(Graph& g);

}  // namespace tp::graph
