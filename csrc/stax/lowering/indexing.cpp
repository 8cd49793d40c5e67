// Indexing lowerings: index_select, gather, embedding and x[idx] as indirect
// loads. The position read along the indexed dim comes from the index
// tensor's value; it is checked against the dim's size (an out-of-range index
// makes the compiled call raise IndexError, as eager does) and clamped, so a
// bad index never reads outside the buffer.
#include "stax/lowering/families.h"

namespace tp::stax {
using namespace tp::stax::ir;

namespace {

// The value as a strided buffer view (realized into a temp first when it is computed).
Value as_buffer(LoweringContext& c, const Value& x) {
  if (x.buffer >= 0) return x;
  int buf = c.realize(x, BufferKind::Temp, -1, c.origin());
  if (x.symbolic()) return c.from_contiguous_buffer(buf, x.sym_sizes, x.dtype);
  return LoweringContext::from_buffer(buf, x.sizes, contiguous_strides(x.sizes), x.dtype);
}

Expr i64(int64_t v) { return constant(Scalar(v), DType::Int64); }
// A size or stride as an int64 value: a constant, or read at run time (dynamic shapes).
Expr i64(const IndexExpr& e) { return e.is_const() ? i64(e.const_value()) : index_value(e); }

// A symbolic size is named by its expression (its value is known only at the call).
std::string range_message(LoweringContext& c, int64_t dim, const IndexExpr& n) {
  return str(c.op(), ": index {value} is out of bounds for dimension ", dim, " with size ", n.to_string(),
             " (in a compiled region)");
}

// The checked (guard `code`), clamped position along a dim of size n from an
// index value v; a failed check reports v as given (eager names the bad index).
Expr position(Expr v, const IndexExpr& n, int code, bool allow_negative) {
  v = cast(v, DType::Int64);
  const Expr given = v;
  if (allow_negative) v = where(call(CallOp::Lt, {v, i64(0)}, DType::Bool), call(CallOp::Add, {v, i64(n)}, DType::Int64), v);
  Expr ok = call(CallOp::And, {call(CallOp::Ge, {v, i64(0)}, DType::Bool), call(CallOp::Lt, {v, i64(n)}, DType::Bool)},
                 DType::Bool);
  return guard(ok, where(ok, v, i64(0)), code, given);
}

// x read at idx, except along `dim`, where the position is `pos` (an Expr).
Expr read_at(const Value& x, const Index& idx, int64_t dim, const Expr& pos) {
  const std::vector<IndexExpr> strides = x.stride_exprs();
  IndexExpr base = x.offset_expr();
  for (size_t d = 0; d < idx.size(); ++d)
    if (static_cast<int64_t>(d) != dim && !(strides[d].is_const() && strides[d].const_value() == 0))
      base = base + idx[d] * strides[d];
  Expr off = call(CallOp::Mul, {pos, i64(strides[static_cast<size_t>(dim)])}, DType::Int64);
  return load_indirect(x.buffer, base, off, x.dtype);
}

int64_t wrap(LoweringContext& c, int64_t dim, int64_t nd) {
  int64_t d = dim < 0 ? dim + nd : dim;
  if (d < 0 || d >= std::max<int64_t>(nd, 1)) c.fail(str("dim ", dim, " out of range"));
  return d;
}

Value lower_index_select(LoweringContext& c) {
  Value x = as_buffer(c, c.input(0));
  const Value& index = c.input(1);
  if (x.sizes.empty()) c.fail("a 0-d source");
  int64_t dim = wrap(c, c.attrs().get<int64_t>("dim"), static_cast<int64_t>(x.sizes.size()));
  IndexExpr n = x.size(static_cast<size_t>(dim));
  int code = c.check_code(range_message(c, dim, n), false, /*with_value=*/true);
  return c.pointwise([code, x, index, dim, n](const Index& idx) {
    Index at = index.sizes.empty() ? Index{} : Index{idx[dim]};
    Expr pos = position(index.at(at), n, code, /*allow_negative=*/false);
    return read_at(x, idx, dim, pos);
  });
}

Value lower_gather(LoweringContext& c) {
  Value x = as_buffer(c, c.input(0));
  const Value& index = c.input(1);
  if (x.sizes.empty() || index.sizes.size() != x.sizes.size()) c.fail("0-d or rank-mismatched operands");
  int64_t dim = wrap(c, c.attrs().get<int64_t>("dim"), static_cast<int64_t>(x.sizes.size()));
  IndexExpr n = x.size(static_cast<size_t>(dim));
  int code = c.check_code(range_message(c, dim, n), false, /*with_value=*/true);
  return c.pointwise([code, x, index, dim, n](const Index& idx) {
    Expr pos = position(index.at(idx), n, code, /*allow_negative=*/false);
    return read_at(x, idx, dim, pos);
  });
}

// embedding(indices, weight): out[..., j] = weight[indices[...], j].
Value lower_embedding(LoweringContext& c) {
  if (!c.attrs().is_none("max_norm")) c.fail("embedding with max_norm (renormalizes the weight in place)");
  const Value& index = c.input(0);
  Value w = as_buffer(c, c.input(1));
  if (w.sizes.size() != 2) c.fail("a weight that is not 2-D");
  IndexExpr n = w.size(0);
  int code = c.check_code(range_message(c, 0, n), false, /*with_value=*/true);
  return c.pointwise([code, w, index, n](const Index& idx) {
    Index at(idx.begin(), idx.end() - 1);
    Expr pos = position(index.at(at), n, code, /*allow_negative=*/false);
    return read_at(w, Index{IndexExpr(0), idx.back()}, 0, pos);
  });
}

// x[idx] with one integer index tensor on the first dim (negative counts from the end).
Value lower_index(LoweringContext& c) {
  if (c.inputs().size() != 2) c.fail("advanced indexing with more than one index tensor");
  const Value& index = c.input(1);
  if (index.dtype != DType::Int64) c.fail("a non-int64 index (a mask has a data-dependent shape)");
  Value x = as_buffer(c, c.input(0));
  if (x.sizes.empty()) c.fail("a 0-d source");
  IndexExpr n = x.size(0);
  size_t k = index.sizes.size();
  int code = c.check_code(range_message(c, 0, n), false, /*with_value=*/true);
  return c.pointwise([code, x, index, n, k](const Index& idx) {
    Index at(idx.begin(), idx.begin() + static_cast<long>(k));
    Expr pos = position(index.at(at), n, code, /*allow_negative=*/true);
    Index rest{IndexExpr(0)};
    rest.insert(rest.end(), idx.begin() + static_cast<long>(k), idx.end());
    return read_at(x, rest, 0, pos);
  });
}

}  // namespace

void register_indexing_lowerings(LoweringTable& t) {
  t["index_select"] = lower_index_select;
  t["gather"] = lower_gather;
  t["embedding"] = lower_embedding;
  t["index"] = lower_index;
}

}  // namespace tp::stax
