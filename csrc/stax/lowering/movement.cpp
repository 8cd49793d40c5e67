// Movement lowerings: operators that only move or mask elements (flip, roll,
// repeat, tril/triu, cat) are index functions. A piecewise one (cat) selects
// its operand by comparing the loop index with the pieces' bounds; each
// operand is read at an index clamped into its own range, so the branch not
// taken never reads outside its buffer.
#include "stax/lowering/families.h"

namespace tp::stax {
using namespace tp::stax::ir;

namespace {

int64_t wrap(LoweringContext& c, int64_t dim, int64_t nd) {
  int64_t d = dim < 0 ? dim + nd : dim;
  if (d < 0 || d >= std::max<int64_t>(nd, 1)) c.fail(str("dim ", dim, " out of range"));
  return d;
}

Value lower_flip(LoweringContext& c) {
  const Value& x = c.input(0);
  int64_t nd = static_cast<int64_t>(x.sizes.size());
  std::vector<bool> flipped(nd, false);
  for (auto d : c.attrs().get<std::vector<int64_t>>("dims")) flipped[wrap(c, d, nd)] = nd > 0;
  return c.pointwise([x, flipped](const Index& idx) {
    Index src = idx;
    for (size_t d = 0; d < src.size(); ++d)
      if (flipped[d]) src[d] = (x.symbolic() ? x.size(d) - 1 : IndexExpr(x.sizes[d] - 1)) - idx[d];
    return x.at(src);
  });
}

// roll: out[i] = x[(i - shift) mod n] along each rolled dim; no dims = the flattened tensor.
Value lower_roll(LoweringContext& c) {
  const Value& x = c.input(0);
  auto shifts = c.attrs().get<std::vector<int64_t>>("shifts");
  auto dims = c.attrs().get_or<std::vector<int64_t>>("dims", {});
  // A shift computed from sizes (`x.roll(x.size(0) // 2)`) would be baked in at its hint: the
  // eager kernel (an extern call) gets it evaluated at each call's sizes instead.
  for (const IndexExpr& e : c.attr_exprs("shifts"))
    if (!e.is_const()) c.fail("roll with a shift computed from symbolic sizes");
  int64_t nd = static_cast<int64_t>(x.sizes.size());
  if (dims.empty()) {
    if (shifts.size() != 1) c.fail("roll without dims takes one shift");
    if (x.symbolic()) c.fail("roll of the flattened tensor with symbolic shapes");
    int64_t n = numel(x.sizes);
    Shape strides = contiguous_strides(x.sizes);
    int64_t s = n ? ((shifts[0] % n) + n) % n : 0;
    return c.pointwise([x, n, s, strides](const Index& idx) {
      IndexExpr flat = mod(linear_index(idx, strides) + IndexExpr(n - s), n);
      Index src(x.sizes.size());
      for (size_t d = 0; d < x.sizes.size(); ++d)
        src[d] = x.sizes[d] <= 1 ? IndexExpr(0) : mod(floordiv(flat, strides[d]), x.sizes[d]);
      return x.at(src);
    });
  }
  if (dims.size() != shifts.size()) c.fail("shifts and dims differ in length");
  if (x.symbolic()) {  // the shift modulo the run-time size (Python %: never negative)
    std::vector<IndexExpr> shift(static_cast<size_t>(nd), IndexExpr(0));
    std::vector<bool> rolled(static_cast<size_t>(nd), false);
    for (size_t k = 0; k < dims.size(); ++k) {
      size_t d = static_cast<size_t>(wrap(c, dims[k], nd));
      shift[d] = shift[d] + shifts[k];
      rolled[d] = true;
    }
    return c.pointwise([x, shift, rolled](const Index& idx) {
      Index src = idx;
      for (size_t d = 0; d < src.size(); ++d)
        if (rolled[d] && x.sizes[d] > 1) {
          const IndexExpr n = x.size(d);
          src[d] = mod(idx[d] + n - mod(shift[d], n), n);
        }
      return x.at(src);
    });
  }
  std::vector<int64_t> by_dim(nd, 0);
  for (size_t k = 0; k < dims.size(); ++k) {
    int64_t d = wrap(c, dims[k], nd);
    int64_t n = x.sizes[d];
    if (n) by_dim[d] = (by_dim[d] + ((shifts[k] % n) + n) % n) % n;
  }
  return c.pointwise([x, by_dim](const Index& idx) {
    Index src = idx;
    for (size_t d = 0; d < src.size(); ++d)
      if (by_dim[d]) src[d] = mod(idx[d] + IndexExpr(x.sizes[d] - by_dim[d]), x.sizes[d]);
    return x.at(src);
  });
}

// repeat: leading new dims, then each dim tiled: out[i] = x[i mod size].
Value lower_repeat(LoweringContext& c) {
  const Value& x = c.input(0);
  size_t lead = c.out_sizes().size() - x.sizes.size();
  return c.pointwise([x, lead](const Index& idx) {
    Index src(x.sizes.size());
    for (size_t d = 0; d < x.sizes.size(); ++d) src[d] = x.sizes[d] <= 1 ? IndexExpr(0) : mod(idx[lead + d], x.size(d));
    return x.at(src);
  });
}

// tril / triu: keep element (..., i, j) where j - i <= diagonal (tril) or >= diagonal (triu).
LoweringFn triangle(bool lower) {
  return [lower](LoweringContext& c) {
    const Value& x = c.input(0);
    if (x.sizes.size() < 2) c.fail("expects a tensor of at least 2 dimensions");
    // The diagonal may be computed from sizes (`tril(S - T)`, a causal mask over a KV cache):
    // read as an index expression, so a symbolic version compares against the call's value
    // (the constant attribute is the capture's hint: every other length got a wrong mask).
    const std::vector<IndexExpr> ks = c.attr_exprs("diagonal");
    const IndexExpr k = ks.empty() ? IndexExpr(0) : ks[0];
    DType dt = c.out_dtype();
    return c.pointwise([x, k, lower, dt](const Index& idx) {
      size_t n = idx.size();
      Expr diff = index_value(idx[n - 1] - idx[n - 2] - k);
      Expr keep = call(lower ? CallOp::Le : CallOp::Ge, {diff, constant(Scalar(int64_t{0}), DType::Int64)}, DType::Bool);
      return where(keep, cast(x.at(idx), dt), constant(Scalar(int64_t{0}), dt));
    });
  };
}

Value lower_cat(LoweringContext& c) {
  const auto& ins = c.inputs();
  const Shape& out = c.out_sizes();
  int64_t dim = wrap(c, c.attrs().get_or<int64_t>("dim", 0), static_cast<int64_t>(out.size()));
  // PyTorch skips 1-D empty operands (legacy): they take no part in the result.
  // Dynamic shapes: the pieces' bounds are index expressions (a zero size is
  // a constant 0: a symbol's example is at least 2).
  std::vector<Value> parts;
  std::vector<IndexExpr> starts;
  IndexExpr at = 0;
  for (auto& v : ins) {
    if (v.sizes.size() != out.size()) {
      if (numel(v.sizes) == 0) continue;
      c.fail("operands of different rank");
    }
    if (v.sizes[dim] == 0) continue;
    parts.push_back(v);
    starts.push_back(at);
    at = simplify(at + v.size(static_cast<size_t>(dim)));
  }
  if (parts.empty()) c.fail("no non-empty operand");
  DType dt = c.out_dtype();
  return c.pointwise([parts, starts, dim, dt](const Index& idx) {
    // Last piece first, then wrap the earlier ones around it.
    Expr value;
    for (size_t k = parts.size(); k-- > 0;) {
      Index src = idx;
      IndexExpr n = parts[k].size(static_cast<size_t>(dim));
      const IndexExpr last = n.is_const() ? IndexExpr(n.const_value() - 1) : n - 1;
      src[dim] = max(min(idx[dim] - starts[k], last), IndexExpr(0));
      for (size_t d = 0; d < src.size(); ++d)
        if (static_cast<int64_t>(d) != dim && parts[k].sizes[d] == 1) src[d] = IndexExpr(0);
      Expr here = cast(parts[k].at(src), dt);
      if (!value) {
        value = here;
        continue;
      }
      IndexExpr end = simplify(starts[k] + n);
      Expr in_piece = call(CallOp::Lt, {index_value(idx[dim]),
                                        end.is_const() ? constant(Scalar(end.const_value()), DType::Int64)
                                                       : index_value(end)},
                           DType::Bool);
      value = where(in_piece, here, value);
    }
    return value;
  });
}

}  // namespace

void register_movement_lowerings(LoweringTable& t) {
  t["flip"] = lower_flip;
  t["roll"] = lower_roll;
  t["repeat"] = lower_repeat;
  t["tril"] = triangle(true);
  t["triu"] = triangle(false);
  t["cat"] = lower_cat;
}

}  // namespace tp::stax
