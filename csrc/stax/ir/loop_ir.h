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
  Load,    // buffer[index], or buffer[index + args[0]] (an indirect load: args[0] an int64 offset)
  Call,    // fn(args...), fn a CallOp (call_op.h lists them with their properties)
  Where,   // args[0] ? args[1] : args[2]
  Cast,    // args[0] converted to dtype
  Index,   // the value of `index` (an IndexExpr over the loop variables) as an int64 (an element's
           // position: a counter-based random draw computes its counter from it)
  Guard,   // args[1], after checking args[0] (bool): when false, the region's status word
           // receives check code `value` and the region raises after the call (LoopProgram::checks)
};

struct ExprNode;
using Expr = std::shared_ptr<const ExprNode>;

struct ExprNode {
  ExprOp op = ExprOp::Const;
  DType dtype = DType::Float32;
  CallOp fn = CallOp::Add;  // Call
  std::vector<Expr> args;
  Scalar value;    // Const; Guard: the check code
  int buffer = -1; // Load
  IndexExpr index; // Load: flat element offset from the buffer's base pointer; Index: the value
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
// buffer[index + offset]: offset an int64 expression (computed from data).
Expr load_indirect(int buffer, IndexExpr index, Expr offset, DType dtype);
// The loop-index expression's value as an int64 (a constant index folds to a Const).
Expr index_value(IndexExpr index);
// `value`, checked: where `ok` is false the region fails with check `code`;
// `report` (optional, an int64) is the value the check's message names (the
// out-of-range index), stored with the code in one word so the two agree.
Expr guard(Expr ok, Expr value, int code, Expr report = nullptr);

// Prints e; an interior node reached along more than one path is printed once
// as a binding `$k = ...` (listed first, in dependence order) and then as `$k`.
std::string to_string(const Expr& e);

// Status: one int64, zero before the call; a failed Guard stores its code there.
enum class BufferKind { Input, Constant, Output, Temp, Status };
struct Buffer {
  int id = 0;
  std::string name;  // in0, const0, out0, buf0
  BufferKind kind = BufferKind::Temp;
  DType dtype = DType::Float32;
  Shape sizes;       // logical shape (outputs: what the user receives)
  Shape strides;
  int64_t numel = 0; // elements to allocate (Temp/Output)
  int arg_index = -1;  // Input: which region input; Output: which region output
  // Symbolic form of `sizes` (index expressions over size variables, see
  // size_var); empty when every size is static (then `sizes` is exact,
  // otherwise it holds the sizes of one example call).
  std::vector<IndexExpr> size_exprs;
  IndexExpr size(size_t d) const { return size_exprs.empty() ? IndexExpr(sizes[d]) : size_exprs[d]; }
};

// Welford, ArgMax and ArgMin fold into a pair of results (ComputeNode::aux_buffer):
// Welford (Section 6.5): the (count, mean, M2) accumulator of a floating body,
// results mean and M2 (the sum of squared deviations from the mean; var = M2 /
// (count - correction)); ArgMax / ArgMin: the (value, position) accumulator,
// results the position (int64) of the first extremum (the first NaN when
// there is one, as eager) and the element there.
enum class ReduceOp { None, Sum, Max, Min, Prod, Welford, ArgMax, ArgMin };
const char* reduce_op_name(ReduceOp r);

struct ComputeNode {
  int id = 0;
  std::string origin;   // the graph operators it came from, for comments in generated code
  int out_buffer = -1;
  Shape ranges;         // iteration space of the stored value
  Shape reduce_ranges;  // empty for pointwise nodes
  // Symbolic form of ranges / reduce_ranges: index expressions over size
  // variables (size_var), one per range. Empty = static: the Shapes are
  // exact, and constants fold when printed, so a static kernel is printed as
  // before. When given, the Shapes hold the extents of one example call; the
  // scheduler uses them only for choices that are correct for any size.
  std::vector<IndexExpr> range_exprs;
  std::vector<IndexExpr> reduce_range_exprs;
  IndexExpr range(size_t d) const { return range_exprs.empty() ? IndexExpr(ranges[d]) : range_exprs[d]; }
  IndexExpr reduce_range(size_t d) const {
    return reduce_range_exprs.empty() ? IndexExpr(reduce_ranges[d]) : reduce_range_exprs[d];
  }
  bool is_static() const;  // no size variable in any range
  ReduceOp reduce = ReduceOp::None;
  std::vector<IndexExpr> vars;   // one per range
  std::vector<IndexExpr> rvars;  // one per reduce range
  Expr body;
  IndexExpr store_index;  // over vars (a scan's also over its rvar)
  // A scan (cumsum, cumprod): one reduce range, folded in order, and the running
  // value stored at every step; a later node cannot read it as a local.
  bool scan = false;
  // Second result of a Welford (M2) or arg (value) reduction, stored at the
  // same store_index as out_buffer; -1 for the other nodes.
  int aux_buffer = -1;
  // ArgMax / ArgMin: the position an element counts as (an int64 expression
  // over vars and rvars: the index along the reduced dim, or the flat index).
  Expr position;
  bool is_reduction() const { return reduce != ReduceOp::None; }
  bool has_pair_result() const { return aux_buffer >= 0; }
  bool writes(int buffer) const { return buffer == out_buffer || (aux_buffer >= 0 && buffer == aux_buffer); }
};

struct LoopProgram {
  std::vector<Buffer> buffers;
  std::vector<ComputeNode> nodes;
  std::vector<ExternCall> externs;  // ordered by before_node (ties: in call order)
  int num_inputs = 0;    // region inputs, in order
  int num_outputs = 0;
  std::vector<int> output_buffers;  // per region output
  int num_sizes = 0;     // size variables 0 .. num_sizes-1 (entries of the entry point's `sizes`)
  int status_buffer = -1;           // the Status buffer, when some Guard exists
  // A failed Guard with code k raises checks[k - 1]: an IndexError (an index
  // out of range) or a ValueError (an operator's data check, _value_check).
  // With a value (a Guard with a report), "{value}" in the message is replaced
  // by the reported value: the status word holds code | value << 16.
  struct Check {
    std::string message;
    bool value_error = false;
    bool with_value = false;
    bool operator==(const Check& o) const {
      return message == o.message && value_error == o.value_error && with_value == o.with_value;
    }
  };
  std::vector<Check> checks;
  int next_var_id = 0;
  IndexExpr new_var(const std::string& prefix);
  std::string to_string() const;
};

}  // namespace tp::stax::ir
