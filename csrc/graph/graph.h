// The captured program: a list of Nodes in topological order, with the six
// opcodes of torch.fx. Capture happens at the dispatcher, so operator calls are
// always call_function nodes whose target is an OpDef; call_method and
// call_module exist so that a front end recording Python-level calls can use
// the same structure later.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "graph/sym_shape.h"
#include "ops/registry.h"

namespace tp::graph {

enum class Opcode { Placeholder, GetAttr, CallFunction, CallMethod, CallModule, Output };
const char* opcode_name(Opcode op);

class Node;
// An argument of a call: another node's value, or a constant number folded
// into the graph (a Python scalar; Section 2: scalars are specialized by value).
// A null Node* is an absent optional tensor (`Tensor?` passed None).
using Arg = std::variant<Node*, Scalar>;

class Node {
 public:
  Opcode opcode = Opcode::CallFunction;
  std::string name;           // unique within the graph, a valid Python identifier
  const OpDef* target = nullptr;  // call_function
  std::vector<Arg> args;      // call_function: operator inputs in order; output: the returned values
  Attrs attrs;
  TensorMeta meta;            // shape/dtype/strides of the value (placeholders: of the example input)
  Tensor constant;            // get_attr: the tensor it names (a free tensor lifted into the graph)
  int input_index = -1;       // placeholder: position among the function's tensor inputs
  // call_function of an operator with several results (max.dim, split, native_layer_norm):
  // the metas of all results; each result is read by a `getitem` node (torch.fx's pattern).
  std::vector<TensorMeta> output_metas;
  // Dynamic shapes (graph/sym_shape.h). Empty in a static graph. Otherwise one
  // SymDim per dim of `meta.sizes` (evaluated at the hints they equal it), and
  // for a multi-result node one SymShape per entry of `output_metas`.
  SymShape sym_sizes;
  std::vector<SymShape> output_sym_sizes;
  // Int / int-list attributes whose values the program computed from sizes
  // (`x.view(x.size(0), -1)`): per attribute name, one SymDim per element (a
  // constant where the element is a plain number). `attrs` holds the hint values.
  std::map<std::string, std::vector<SymDim>> sym_attrs;
  // call_function: grad mode was on when the function called it. Off (a `with
  // no_grad():` inside the function): its result is a constant for autograd.
  bool grad_enabled = true;
  // The new value of a placeholder (a parameter, a buffer, an input) written in
  // place under no_grad (`with no_grad(): w.clamp_(-1, 1)`): for autograd it is
  // still that tensor, as in eager (a leaf stays a leaf), so a gradient reaching
  // this value goes to the placeholder unchanged (aot/joint_graph.cpp).
  Node* grad_identity_of = nullptr;
  std::vector<Node*> users;

  std::vector<Node*> input_nodes() const;  // the Node* args, in order
  bool is_op(const char* name) const;
  bool is_getitem() const;                 // result `attrs["index"]` of a multi-result node
  int64_t getitem_index() const { return attrs.get<int64_t>("index"); }
};

// The target of getitem nodes. It is not a registered operator: no kernel runs,
// the interpreter picks one result of the node it reads.
const OpDef& getitem_op();

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  Node* placeholder(const std::string& hint, const TensorMeta& meta, int input_index);
  // `before` (optional): inserted right before that node (a pass splicing constants in).
  Node* get_attr(const std::string& hint, const Tensor& value, Node* before = nullptr);
  Node* call(const OpDef& op, std::vector<Arg> args, Attrs attrs, const TensorMeta& meta);
  Node* output(std::vector<Arg> values);

  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  std::vector<Node*> placeholders() const;
  Node* output_node() const;
  // Rewiring used by passes.
  void replace_all_uses(Node* from, Node* to);
  void erase(Node* n);  // must have no users
  // Inserts a new call node right before `before` (keeps topological order); nullptr appends.
  Node* insert_call_before(Node* before, const OpDef& op, std::vector<Arg> args, Attrs attrs, const TensorMeta& meta);
  void recompute_users();
  // Gives a node a new unique name from `hint` (e.g. a lifted free tensor named by its path).
  void rename(Node* n, const std::string& hint);
  // Readable Python-like code: `def forward(x, w):\n    add = tp.add(x, w)\n ...`
  std::string code() const;
  // Structural check: topological order, users consistent; throws tp::Error.
  void lint() const;
  // A deep copy (passes mutate; the specialization cache keeps the original).
  std::unique_ptr<Graph> clone() const;

 private:
  std::string unique_name(const std::string& hint);
 public:
  // Dynamic shapes: symbol k is size_var(k) (graph/sym_shape.h). Empty: static graph.
  std::vector<SymbolInfo> symbols;
  bool is_symbolic() const { return !symbols.empty(); }

 private:
  Node* add(std::unique_ptr<Node> n, Node* before = nullptr);
  std::vector<std::unique_ptr<Node>> nodes_;
  std::unordered_set<std::string> used_names_;
};

// Copies the call or get_attr node `n` into `dst`, its node arguments mapped
// through `m` (which then maps n to the copy): a pass cutting a graph into
// parts (the AOT partition, the per-device split) builds each part this way.
Node* copy_node(Graph& dst, const Node* n, std::unordered_map<const Node*, Node*>& m);

// Whether `g` moves values between devices (a `_to_device` node,
// ops/device_move_ops.cpp): its values then do not all live on one device.
bool has_device_moves(const Graph& g);

}  // namespace tp::graph
