#include "graph/same_program.h"

#include <unordered_map>

#include "core/error.h"

namespace tp::graph {
namespace {

bool same_constant(const Tensor& a, const Tensor& b) {
  if (a.impl() == b.impl()) return true;
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype() || a.numel() > 1) return false;
  return a.numel() == 0 || a.item() == b.item();
}

// What differs between two nodes at one position ("" when nothing does).
std::string node_difference(const Node& x, const Node& y, const std::unordered_map<const Node*, size_t>& ia,
                            const std::unordered_map<const Node*, size_t>& ib, const NodeCheck& attrs) {
  if (x.opcode != y.opcode || x.target != y.target || x.args.size() != y.args.size() ||
      x.input_index != y.input_index)
    return "operator";
  for (size_t k = 0; k < x.args.size(); ++k) {
    const Node* const* px = std::get_if<Node*>(&x.args[k]);
    const Node* const* py = std::get_if<Node*>(&y.args[k]);
    if (!px != !py) return "arguments";
    if (px) {
      if (!*px != !*py || (*px && ia.at(*px) != ib.at(*py))) return "arguments";
    } else if (!(std::get<Scalar>(x.args[k]) == std::get<Scalar>(y.args[k]))) {
      return "a number computed from a size";
    }
  }
  if (std::string d = attrs(x, y); !d.empty()) return d;
  if (x.opcode == Opcode::GetAttr && !same_constant(x.constant, y.constant)) return "constant";
  return "";
}

}  // namespace

std::string program_difference(const Graph& a, const Graph& b, const NodeCheck& attrs, const NodeCheck& extra) {
  if (a.nodes().size() != b.nodes().size())
    return str("the trace at other sizes has ", b.nodes().size(), " nodes, not ", a.nodes().size());
  std::unordered_map<const Node*, size_t> ia, ib;
  for (size_t i = 0; i < a.nodes().size(); ++i) {
    ia[a.nodes()[i].get()] = i;
    ib[b.nodes()[i].get()] = i;
  }
  for (size_t i = 0; i < a.nodes().size(); ++i) {
    const Node& x = *a.nodes()[i];
    const Node& y = *b.nodes()[i];
    std::string d = node_difference(x, y, ia, ib, attrs);
    if (d.empty() && extra && x.opcode != Opcode::Output) d = extra(x, y);
    if (!d.empty())
      return str("node ", x.name, x.opcode == Opcode::CallFunction ? str(" (", x.target->name, ")") : "",
                 " differs at other sizes (", d, ")");
  }
  return "";
}

}  // namespace tp::graph
