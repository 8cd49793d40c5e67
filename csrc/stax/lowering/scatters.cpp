// Scatter lowerings: slice_scatter(base, src, dim, start, end, step) is a
// piecewise index function like cat: along `dim`, the positions
// start, start + step, ... (as many as src has) read src, every other one reads
// base. The src read is clamped into src's range, so the branch not taken
// never reads outside its buffer. A backward graph assembles the gradient of
// a weight sliced three ways (attention's in_proj) this way; as a loop it fuses
// with the zeros and the adds around it instead of running eager's kernel.
#include "stax/lowering/families.h"

namespace tp::stax {
using namespace tp::stax::ir;

namespace {

Value lower_slice_scatter(LoweringContext& c) {
  const Value& base = c.input(0);
  const Value& src = c.input(1);
  const Shape& out = c.out_sizes();
  const int64_t nd = static_cast<int64_t>(out.size());
  if (nd == 0) c.fail("0-d operand");
  int64_t dim = c.attrs().get_or<int64_t>("dim", 0);
  if (dim < 0) dim += nd;
  if (dim < 0 || dim >= nd) c.fail(str("dim ", c.attrs().get_or<int64_t>("dim", 0), " out of range"));
  const int64_t size = out[static_cast<size_t>(dim)];
  const int64_t step = c.attrs().get_or<int64_t>("step", 1);
  if (step <= 0) c.fail("step must be positive");
  // start/end after PyTorch's clamping into [0, size] (None: the whole dim).
  auto bound = [&](const char* name, int64_t none) {
    const AttrValue* v = c.attrs().find(name);
    if (!v || !std::holds_alternative<int64_t>(*v)) return none;
    int64_t b = std::get<int64_t>(*v);
    if (b < 0) b += size;
    return std::max<int64_t>(0, std::min<int64_t>(b, size));
  };
  const int64_t start = bound("start", 0), end = std::max(start, bound("end", size));
  const int64_t n = (end - start + step - 1) / step;
  if (src.sizes.size() != out.size() || src.sizes[static_cast<size_t>(dim)] != n || base.sizes != out)
    c.fail(str("operand shapes ", shape_str(base.sizes), ", ", shape_str(src.sizes), " do not match the slice"));
  for (int64_t d = 0; d < nd; ++d)
    if (d != dim && src.sizes[static_cast<size_t>(d)] != out[static_cast<size_t>(d)]) c.fail("src shape does not match");
  const DType dt = c.out_dtype();
  const size_t sd = static_cast<size_t>(dim);
  return c.pointwise([base, src, sd, start, step, n, dt](const Index& idx) {
    Expr from_base = cast(base.at(idx), dt);
    if (n == 0) return from_base;
    Index s = idx;
    IndexExpr rel = idx[sd] - IndexExpr(start);
    s[sd] = max(min(step == 1 ? rel : floordiv(rel, IndexExpr(step)), IndexExpr(n - 1)), IndexExpr(0));
    Expr from_src = cast(src.at(s), dt);
    Expr i = index_value(idx[sd]);
    auto i64 = [](int64_t v) { return constant(Scalar(v), DType::Int64); };
    Expr inside = call(CallOp::And, {call(CallOp::Ge, {i, i64(start)}, DType::Bool),
                                     call(CallOp::Lt, {i, i64(start + (n - 1) * step + 1)}, DType::Bool)},
                       DType::Bool);
    if (step > 1) {
      Expr on_step = call(CallOp::Eq, {index_value(mod(rel, IndexExpr(step))), i64(0)}, DType::Bool);
      inside = call(CallOp::And, {inside, on_step}, DType::Bool);
    }
    return where(inside, from_src, from_base);
  });
}

// select_scatter(base, src, dim, index): along `dim`, position `index` reads
// src (which lacks that dim), every other one base. Graphs reach here when the
// decomposition into a where over a constant mask declined: mostly a symbolic
// index (a KV-cache write at an int argument's position, `kc[:, pos] = k`),
// which ran as an extern call of the eager kernel plus a copy of the result
// (20x the static write's time for a 4x256x64 cache).
Value lower_select_scatter(LoweringContext& c) {
  const Value& base = c.input(0);
  const Value& src = c.input(1);
  const int64_t nd = static_cast<int64_t>(c.out_sizes().size());
  if (nd == 0) c.fail("0-d operand");
  if (static_cast<int64_t>(src.sizes.size()) + 1 != nd || static_cast<int64_t>(base.sizes.size()) != nd)
    c.fail("operand ranks do not match");
  int64_t dim = c.attrs().get_or<int64_t>("dim", 0);
  if (dim < 0) dim += nd;
  if (dim < 0 || dim >= nd) c.fail(str("dim ", c.attrs().get_or<int64_t>("dim", 0), " out of range"));
  const size_t sd = static_cast<size_t>(dim);
  IndexExpr index = c.attr_exprs("index").at(0);
  if (c.hint(index) < 0) index = simplify(index + base.size(sd));  // counts from the end
  const DType dt = c.out_dtype();
  return c.pointwise([base, src, sd, index, dt](const Index& idx) {
    Expr from_base = cast(base.at(idx), dt);
    Index s(idx.begin(), idx.end());
    s.erase(s.begin() + static_cast<std::ptrdiff_t>(sd));
    Expr from_src = cast(src.at(s), dt);
    Expr hit = call(CallOp::Eq, {index_value(idx[sd]), index_value(index)}, DType::Bool);
    return where(hit, from_src, from_base);
  });
}

}  // namespace

void register_scatter_lowerings(LoweringTable& t) {
  t["slice_scatter"] = lower_slice_scatter;
  t["select_scatter"] = lower_select_scatter;
}

}  // namespace tp::stax
