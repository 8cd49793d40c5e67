// Whether two traces of one function record the same program (dynamic shapes:
// a trace at the hints against a trace at other sizes). A program that does not
// depend on the sizes records the same operators, argument wiring, numbers,
// attributes and constants at both; a number or attribute computed from a size
// (mean's 1/N) differs. Used for decompositions (passes/decompose.cpp) and for
// the symbolic joint graph of training (aot/symbolic_joint.cpp).
#pragma once
#include <functional>
#include <string>

#include "graph/graph.h"

namespace tp::graph {

// A node of `a` against the node of `b` at the same position: "" when equal,
// else what differs.
using NodeCheck = std::function<std::string(const Node& a, const Node& b)>;

// "" when `a` and `b` record the same program; else the first difference,
// named ("node mul (mul) differs at other sizes (a number computed from a
// size)"). `attrs` compares a call's attributes (plain equality for two static
// traces; a symbolic node's attributes evaluated at the other sizes);
// `extra`, when given, adds a check per non-output node (sizes).
std::string program_difference(const Graph& a, const Graph& b, const NodeCheck& attrs,
                               const NodeCheck& extra = nullptr);

}  // namespace tp::graph
