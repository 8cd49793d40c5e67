// Extern calls in the loop IR: an operator without a loop form (a GEMM, a
// convolution, a sort, ...) that runs its library or eager kernel on buffers
// the program plans, between the kernels that produce its operands (prologue)
// and those that read its results (epilogue). Everything around it is still
// fused; only the extern call itself leaves generated code.
//
// Plain data like the rest of the IR: the operator is named by its registry
// name and its attributes are carried as their printed form (the Attrs
// themselves live beside the program, in LoweredRegion::extern_attrs, because
// the IR layer sits below the operator layer), so a program with extern calls
// is still printable, hashable and comparable.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/scalar.h"
#include "core/shape.h"
#include "stax/ir/index_expr.h"

namespace tp::stax::ir {

// One operand of an extern call, in the operator's argument order.
struct ExternOperand {
  enum class Kind { Buffer, Number, Absent };
  Kind kind = Kind::Buffer;
  // Buffer: element idx is buffer[offset + sum(idx[d] * strides[d])] (a
  // transposed or sliced view is read in place, with these strides).
  int buffer = -1;
  Shape sizes, strides;
  int64_t offset = 0;
  DType dtype = DType::Float32;
  Scalar value;  // Number: a Python number passed to the operator
  // Dynamic shapes: sizes, strides and offset as expressions over size
  // variables (the backend evaluates them at every call); empty when static.
  std::vector<IndexExpr> size_exprs, stride_exprs;
  IndexExpr offset_expr;
  bool operator==(const ExternOperand& o) const;
};

// How the backend runs the call.
enum class ExternKind {
  Kernel,  // the operator's eager kernel on views of the buffers
  Gemm,    // BLAS directly: mm/bmm/matmul/addmm/baddbmm whose operands BLAS accepts in place
};

struct ExternCall {
  int id = 0;
  std::string op;          // operator registry name (with overload)
  std::string attrs;       // printed attributes, e.g. "beta=1, alpha=1"
  // Dynamic shapes: attributes computed from sizes (a gradient operator's
  // `size`, the forward input's shape), as expressions over size variables;
  // the backend evaluates them at every call and passes the values instead
  // of the example's. Empty when every attribute is a constant.
  std::vector<std::pair<std::string, std::vector<IndexExpr>>> sym_attrs;
  std::string origin;      // for comments in generated code
  ExternKind kind = ExternKind::Kernel;
  // Position among the compute nodes: runs after nodes[0, before_node) and
  // before nodes[before_node, ...) (the program stays in dependence order).
  int before_node = 0;
  std::vector<ExternOperand> inputs;
  // Result buffers (one per operator result), in the layout the Buffer plans.
  std::vector<int> outputs;
  bool operator==(const ExternCall& o) const;
};

std::string to_string(const ExternCall& e);
size_t hash(const ExternCall& e);
const char* extern_kind_name(ExternKind k);

}  // namespace tp::stax::ir
