// The loop-level IR (Section 6): what a region computes, as data.
//
// A LoopProgram is a list of buffers and a list of ComputeNodes in dependence
// order, plus the extern calls (extern_call.h) placed between them. A ComputeNode writes one buffer: for every point of its iteration
// space `ranges` (vars[d] in [0, ranges[d])), it stores `body` at
// `store_index`; a reduction node additionally folds body over `reduce_ranges`
// (rvars). The body is an expression DAG whose leaves are constants and loads
// (buffer + IndexExpr over the node's vars). Nothing here is a closure: the IR
// can be printed, hashed and compared, and the scheduler and code generator
// only read it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/scalar.h"
#include "core/shape.h"
#include "stax/ir/call_op.h"
#include "stax/ir/extern_call.h"
#include "stax/ir/index_expr.h"

namespace tp::stax::ir {

enum class ExprOp {
  Const,   // value
  Load,    // buffer[index]
  Call,    // fn(args...), fn a CallOp (call_op.h lists them with their properties)
  Where,   // args[0] ? args[1] : args[2]
  Cast,    // args[0] converted to dtype
};

struct ExprNode;
using Expr = std::shared_ptr<const ExprNode>;

struct ExprNode {
  ExprOp op = ExprOp::Const;
  DType dtype = DType::Float32;
  CallOp fn = CallOp::Add;  // Call
  std::vector<Expr> args;
  Scalar value;    // Const
  int buffer = -1; // Load
  IndexExpr index; // Load: flat element offset from the buffer's base pointer
};

// Every constructor below returns a hash-consed node: two expressions with the
// same op, dtype, fn, value (bitwise), buffer, index (structurally) and
// argument nodes (by identity) are one node. The IR is therefore a DAG in which
// equal subexpressions are shared, and every traversal must visit a node once
// (memoize on the node pointer), or its cost grows with the number of paths.
Expr intern(ExprNode proto);
Expr constant(const Scalar& v, DType dtype);
Expr load(int buffer, IndexExpr index, DType dtype);
Expr call(CallOp fn, std::vector<Expr> args, DType dtype);
Expr where(Expr cond, Expr a, Expr b);
Expr cast(Expr x, DType dtype);  // returns x itself when already that dtype

// Prints e; an interior node reached along more than one path is printed once
// as a binding `$k = ...` (listed first, in dependence order) and then as `$k`.
std::string to_string(const Expr& e);

enum class BufferKind { Input, Constant, Output, Temp };
struct Buffer {
  int id = 0;
  std::string name;  // in0, const0, out0, buf0
  BufferKind kind = BufferKind::Temp;
  DType dtype = DType::Float32;
  Shape sizes;       // logical shape (outputs: what the user receives)
  Shape strides;
  int64_t numel = 0; // elements to allocate (Temp/Output)
  int arg_index = -1;  // Input: which region input; Output: which region output
};

enum class ReduceOp { None, Sum, Max, Min };
const char* reduce_op_name(ReduceOp r);

struct ComputeNode {
  int id = 0;
  std::string origin;   // the graph operators it came from, for comments in generated code
  int out_buffer = -1;
  Shape ranges;         // iteration space of the stored value
  Shape reduce_ranges;  // empty for pointwise nodes
  ReduceOp reduce = ReduceOp::None;
  std::vector<IndexExpr> vars;   // one per range
  std::vector<IndexExpr> rvars;  // one per reduce range
  Expr body;
  IndexExpr store_index;  // over vars
  bool is_reduction() const { return reduce != ReduceOp::None; }
};

struct LoopProgram {
  std::vector<Buffer> buffers;
  std::vector<ComputeNode> nodes;
  std::vector<ExternCall> externs;  // ordered by before_node (ties: in call order)
  int num_inputs = 0;    // region inputs, in order
  int num_outputs = 0;
  std::vector<int> output_buffers;  // per region output
  int next_var_id = 0;
  IndexExpr new_var(const std::string& prefix);
  std::string to_string() const;
};

}  // namespace tp::stax::ir
