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
};

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

// Index into an operand of shape `in` from an index over the broadcast shape.
inline Index broadcast_index(const Index& idx, const Shape& in) {
  Index out(in.size());
  size_t off = idx.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) out[d] = in[d] == 1 ? ir::IndexExpr(0) : idx[off + d];
  return out;
}

}  // namespace tp::stax
