// A value during lowering (Section 6): its logical shape and dtype and how to
// compute the element at an index (a compute function index -> Expr).
// Pointwise operators and views compose these functions, so a chain of them
// never touches memory (Property 6.1); `buffer` is set when the value lives in
// a buffer (an input, a constant, a reduction's result, an extern's output).
#pragma once
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/shape.h"
#include "stax/ir/loop_ir.h"

namespace tp::stax {

using Index = std::vector<ir::IndexExpr>;

struct Value {
  Shape sizes;
  DType dtype = DType::Float32;
  std::function<ir::Expr(const Index&)> at;
  // Set when the value is exactly a strided view of a buffer: element idx is
  // buffer[offset + sum(idx[d] * strides[d])]. Views of such values keep it
  // (an extern call can then read them in place, e.g. a transposed GEMM operand).
  int buffer = -1;
  Shape strides;
  int64_t offset = 0;
  // Set when the value is a permutation (dims `perm`) of a computed value: an
  // extern call that needs it in memory writes the source contiguously and
  // reads it through permuted strides, instead of writing it transposed.
  std::shared_ptr<const Value> permuted_from;
  std::vector<int64_t> perm;
  // Dynamic shapes: set when the value is a reshape (row-major flat order kept)
  // of a computed value. Read through `at`, every element splits its flat
  // position by run-time sizes (a division and a modulo per index); written to
  // memory, the source is stored in its own iteration space instead, at the
  // same flat positions, so the loop is affine (a transformer's
  // `a.transpose(1, 2).reshape(b, t, d)` before a GEMM).
  std::shared_ptr<const Value> reshaped_from;
  // Dynamic shapes: when some size (or, for a buffer view, some stride or the
  // offset) depends on a size variable, `sym_sizes` holds every size as an
  // index expression (`sizes` then holds the example call's sizes) and a buffer
  // view also `sym_strides` / `sym_offset`. Empty: static, `sizes` is exact.
  std::vector<ir::IndexExpr> sym_sizes, sym_strides;
  ir::IndexExpr sym_offset;
  bool symbolic() const { return !sym_sizes.empty(); }
  ir::IndexExpr size(size_t d) const { return sym_sizes.empty() ? ir::IndexExpr(sizes[d]) : sym_sizes[d]; }
  std::vector<ir::IndexExpr> size_exprs() const {
    if (!sym_sizes.empty()) return sym_sizes;
    return std::vector<ir::IndexExpr>(sizes.begin(), sizes.end());
  }
  // Buffer views only.
  std::vector<ir::IndexExpr> stride_exprs() const {
    if (!sym_sizes.empty()) return sym_strides;
    return std::vector<ir::IndexExpr>(strides.begin(), strides.end());
  }
  ir::IndexExpr offset_expr() const { return sym_sizes.empty() ? ir::IndexExpr(offset) : sym_offset; }
};

using SymShape = std::vector<ir::IndexExpr>;

inline bool all_const(const SymShape& s) {
  for (auto& e : s)
    if (!e.is_const()) return false;
  return true;
}
// Row-major strides of a symbolic shape (simplified; size-1 dims as in contiguous_strides).
inline SymShape sym_contiguous_strides(const SymShape& sizes) {
  SymShape st(sizes.size());
  ir::IndexExpr acc = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    st[d] = acc;
    if (!(sizes[d].is_const() && sizes[d].const_value() <= 1)) acc = ir::simplify(acc * sizes[d]);
  }
  return st;
}
inline ir::IndexExpr numel_expr(const SymShape& sizes) {
  ir::IndexExpr n = 1;
  for (auto& e : sizes) n = n * e;
  return ir::simplify(n);
}

struct IndexHash {
  size_t operator()(const Index& idx) const {
    size_t h = idx.size();
    for (auto& e : idx) h = h * 1000003u ^ e.hash();
    return h;
  }
};

// Every consumer of a value calls its `at` with the index it needs; in a
// pointwise chain those are the same index expressions. Remembering the
// result per index makes a value used k times one node (not k copies of its
// whole expression tree), so lowering is linear in the graph and the body a DAG.
// Copies of the Value share the table (the closure holds it by shared_ptr).
// The producer's closure is held by shared_ptr too: a std::function copies
// its captures, and closures capture their operand Values, so copying a Value
// whose `at` held the closure itself would copy the whole tree of closures
// below it (exponential when a value is used twice).
inline void memoize(Value& v) {
  auto f = std::make_shared<const std::function<ir::Expr(const Index&)>>(std::move(v.at));
  auto memo = std::make_shared<std::unordered_map<Index, ir::Expr, IndexHash>>();
  v.at = [f, memo](const Index& idx) {
    auto it = memo->find(idx);
    if (it != memo->end()) return it->second;
    ir::Expr e = (*f)(idx);
    memo->emplace(idx, e);
    return e;
  };
}

inline ir::IndexExpr linear_index(const Index& idx, const Shape& strides) {
  ir::IndexExpr e = 0;
  for (size_t d = 0; d < idx.size(); ++d)
    if (strides[d] != 0) e = e + idx[d] * strides[d];
  return e;
}

inline ir::IndexExpr linear_index(const Index& idx, const std::vector<ir::IndexExpr>& strides) {
  ir::IndexExpr e = 0;
  for (size_t d = 0; d < idx.size(); ++d)
    if (!(strides[d].is_const() && strides[d].const_value() == 0)) e = e + idx[d] * strides[d];
  return e;
}

// Index into an operand of shape `in` from an index over the broadcast shape.
inline Index broadcast_index(const Index& idx, const Shape& in) {
  Index out(in.size());
  size_t off = idx.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) out[d] = in[d] == 1 ? ir::IndexExpr(0) : idx[off + d];
  return out;
}

}  // namespace tp::stax
