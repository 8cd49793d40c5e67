// What a lowering rule sees and may do: the graph node being lowered, its
// operands as Values (a Python-number operand is a constant Value, and
// `constant(i)` gives its Scalar), and the program under construction (new
// buffers, loop variables, compute nodes). Rules are pure functions of this
// context; the driver (lower.cpp) walks the graph and owns the state.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "stax/lowering/lower.h"
#include "stax/lowering/value.h"

namespace tp::stax {

class LoweringContext {
 public:
  LoweringContext(LoweredRegion& region, const graph::Node* node, std::vector<Value> inputs,
                  std::vector<std::optional<Scalar>> consts, std::string origin)
      : region_(region), node_(node), inputs_(std::move(inputs)), consts_(std::move(consts)),
        origin_(std::move(origin)) {}

  const graph::Node& node() const { return *node_; }
  std::string op() const { return node_->target->name; }
  const Attrs& attrs() const { return node_->attrs; }
  const Shape& out_sizes() const { return node_->meta.sizes; }
  // Dynamic shapes: the output's sizes as index expressions when some is
  // symbolic (graph::Node::sym_sizes), else empty.
  SymShape out_sym_sizes() const;
  // The output's sizes as expressions (constants when static).
  SymShape out_size_exprs() const;
  // Whether the node touches a symbolic size: an operand, a result or an
  // attribute computed from sizes (only rules that handle symbolic shapes see such nodes).
  bool symbolic() const;
  // Attribute `name` (an int or int list) per element as an index expression:
  // Node::sym_attrs when the front end computed it from sizes, else the constants.
  std::vector<ir::IndexExpr> attr_exprs(const std::string& name) const;
  int64_t hint(const ir::IndexExpr& e) const { return region_.hint(e); }
  const LoweredRegion& region() const { return region_; }
  // The mean of operand 0 of this node over these reduced dims with this
  // keepdim, as a var/std rule computed it (LoweredRegion::known_means): remember / find.
  void remember_mean(const std::vector<bool>& reduced, bool keepdim, const Value& mean);
  const Value* known_mean(const std::vector<bool>& reduced, bool keepdim) const;
  DType out_dtype() const { return node_->meta.dtype; }
  const std::vector<Value>& inputs() const { return inputs_; }
  const Value& input(size_t i) const { return inputs_.at(i); }
  // The Python number passed as operand i, if it was one.
  const std::optional<Scalar>& constant(size_t i) const { return consts_.at(i); }
  // The graph operators this node's value was fused from, for comments in generated code.
  const std::string& origin() const { return origin_; }

  // A Value of the output's shape and dtype computed by `at`.
  Value pointwise(std::function<ir::Expr(const Index&)> at) const;
  ir::IndexExpr new_var(const std::string& prefix) { return region_.program.new_var(prefix); }
  int add_buffer(ir::BufferKind kind, const std::string& prefix, DType dtype, const Shape& sizes,
                 const Shape& strides, int arg_index);
  // A contiguous buffer of a shape given as expressions (symbolic or not: a
  // static shape gives exactly the buffer the overload above gives).
  int add_buffer(ir::BufferKind kind, const std::string& prefix, DType dtype, const SymShape& sizes, int arg_index);
  // The value stored in buffer `buf` with element strides `strides` from `offset`.
  static Value from_buffer(int buf, const Shape& sizes, const Shape& strides, DType dtype, int64_t offset = 0);
  // The same with sizes, strides and offset as expressions; when none mentions
  // a size variable this is the static overload exactly.
  Value from_buffer_exprs(int buf, const SymShape& sizes, const SymShape& strides, DType dtype,
                    const ir::IndexExpr& offset = 0) const;
  // A contiguous buffer view of the output's shape (strides from the sizes).
  Value from_contiguous_buffer(int buf, const SymShape& sizes, DType dtype) const {
    return from_buffer_exprs(buf, sizes, sym_contiguous_strides(sizes), dtype);
  }
  // Appends a compute node (id and origin filled in) and returns its index.
  int add_compute_node(ir::ComputeNode n);
  // Writes v into a new contiguous buffer with a pointwise compute node.
  int realize(const Value& v, ir::BufferKind kind, int arg_index, const std::string& origin);
  // Operand i was an omitted optional tensor (None); only extern rules see such operands.
  bool absent(size_t i) const { return !inputs_.at(i).at; }
  // Appends an extern call (id, position after the compute nodes so far, origin
  // and this node's attributes filled in) and returns its id.
  int add_extern(ir::ExternCall call);
  // A rule for an operator with several results sets them all here (the
  // `getitem` nodes of the graph read them) and returns the first.
  void set_results(std::vector<Value> results) { results_ = std::move(results); }
  const std::vector<Value>& results() const { return results_; }
  // Operand i was written into a buffer for this node (an extern operand);
  // the driver lets later readers of that operand read the buffer instead of
  // recomputing it.
  void set_realized(size_t i, const Value& v) { realized_.emplace_back(i, v); }
  const std::vector<std::pair<size_t, Value>>& realized() const { return realized_; }
  // Forgets results and realized operands (a declining rule's, before the extern rule runs).
  void reset_lowering_state() { results_.clear(); realized_.clear(); }

  // The code of a check (ir::guard) whose failure makes the compiled call raise
  // IndexError(message), or ValueError(message) with value_error. Call it in
  // the rule, not in a compute function: the context does not outlive the rule.
  int check_code(const std::string& message, bool value_error = false, bool with_value = false);

  [[noreturn]] void fail(const std::string& why) const;

 private:
  LoweredRegion& region_;
  const graph::Node* node_;
  std::vector<Value> inputs_;
  std::vector<std::optional<Scalar>> consts_;
  std::string origin_;
  std::vector<Value> results_;
  std::vector<std::pair<size_t, Value>> realized_;
};

// Raises tp::BackendError "Stax cannot lower operator ..." naming n (with
// TP_STAX_LOWER_DEBUG=1 also printed to stderr).
[[noreturn]] void cannot_lower(const graph::Node* n, const std::string& why);

}  // namespace tp::stax
