// Window lowerings (pooling): a reduction over the kernel window of each
// output position. A window position outside the input (padding, ceil mode)
// contributes the reduction's identity: its index is clamped into the input
// and its value replaced, so no load leaves the buffer.
#include "stax/lowering/families.h"

namespace tp::stax {
using namespace tp::stax::ir;

namespace {

Expr i64(int64_t v) { return constant(Scalar(v), DType::Int64); }
Expr lt(Expr a, Expr b) { return call(CallOp::Lt, {std::move(a), std::move(b)}, DType::Bool); }
Expr ge(Expr a, Expr b) { return call(CallOp::Ge, {std::move(a), std::move(b)}, DType::Bool); }
Expr both(Expr a, Expr b) { return call(CallOp::And, {std::move(a), std::move(b)}, DType::Bool); }

std::pair<int64_t, int64_t> pair_of(LoweringContext& c, const char* name, std::pair<int64_t, int64_t> dflt) {
  const AttrValue* v = c.attrs().find(name);
  if (!v || std::holds_alternative<std::monostate>(*v)) return dflt;
  if (auto* one = std::get_if<int64_t>(v)) return {*one, *one};
  const auto& l = std::get<std::vector<int64_t>>(*v);
  if (l.empty()) return dflt;
  if (l.size() == 1) return {l[0], l[0]};
  return {l[0], l[1]};
}

// avg_pool2d over the last two dims: a sum over the window (out-of-input
// positions add 0), then a division by the window's divisor (the padded
// window with count_include_pad, the clipped one without, or the override).
Value lower_avg_pool2d(LoweringContext& c) {
  const Value& x = c.input(0);
  if (!is_floating(x.dtype)) c.fail("integer average pooling (truncating division) has no rule yet");
  const size_t nd = x.sizes.size();
  if (nd != 3 && nd != 4) c.fail("expects a 3-D or 4-D input");
  auto k = pair_of(c, "kernel_size", {1, 1});
  auto s = pair_of(c, "stride", k);
  auto p = pair_of(c, "padding", {0, 0});
  const bool include_pad = c.attrs().get_or<bool>("count_include_pad", true);
  std::optional<int64_t> divisor;
  if (!c.attrs().is_none("divisor_override")) divisor = c.attrs().get_int("divisor_override");
  const int64_t H = x.sizes[nd - 2], W = x.sizes[nd - 1];
  const Shape& out = c.out_sizes();
  const DType dt = c.out_dtype();

  ComputeNode n;
  n.reduce = ReduceOp::Sum;
  Index idx(nd), src(nd);
  for (size_t d = 0; d < nd; ++d) {
    if (out[d] == 1) { idx[d] = 0; continue; }
    idx[d] = c.new_var("i");
    n.vars.push_back(idx[d]);
    n.ranges.push_back(out[d]);
  }
  IndexExpr kh = c.new_var("r"), kw = c.new_var("r");
  n.rvars = {kh, kw};
  n.reduce_ranges = {k.first, k.second};
  IndexExpr h = idx[nd - 2] * s.first - IndexExpr(p.first) + kh;
  IndexExpr w = idx[nd - 1] * s.second - IndexExpr(p.second) + kw;
  for (size_t d = 0; d + 2 < nd; ++d) src[d] = x.sizes[d] == 1 ? IndexExpr(0) : idx[d];
  src[nd - 2] = max(min(h, IndexExpr(H - 1)), IndexExpr(0));
  src[nd - 1] = max(min(w, IndexExpr(W - 1)), IndexExpr(0));
  Expr hv = index_value(h), wv = index_value(w);
  Expr inside = both(both(ge(hv, i64(0)), lt(hv, i64(H))), both(ge(wv, i64(0)), lt(wv, i64(W))));
  n.body = where(inside, cast(x.at(src), dt), constant(Scalar(0.0), dt));
  n.store_index = linear_index(n.vars, contiguous_strides(n.ranges));
  Shape strides = contiguous_strides(out);
  n.out_buffer = c.add_buffer(BufferKind::Temp, "buf", dt, out, strides, -1);
  int sums = n.out_buffer;
  c.add_compute_node(std::move(n));
  Value total = LoweringContext::from_buffer(sums, out, strides, dt);
  auto kk = k, ss = s, pp = p;
  return c.pointwise([total, kk, ss, pp, H, W, include_pad, divisor, dt, nd](const Index& i) {
    Expr div;
    if (divisor) {
      div = constant(Scalar(*divisor), dt);
    } else {
      IndexExpr h0 = i[nd - 2] * ss.first - IndexExpr(pp.first), w0 = i[nd - 1] * ss.second - IndexExpr(pp.second);
      IndexExpr h1 = min(h0 + IndexExpr(kk.first), IndexExpr(H + pp.first));
      IndexExpr w1 = min(w0 + IndexExpr(kk.second), IndexExpr(W + pp.second));
      if (!include_pad) {
        h0 = max(h0, IndexExpr(0));
        w0 = max(w0, IndexExpr(0));
        h1 = min(h1, IndexExpr(H));
        w1 = min(w1, IndexExpr(W));
      }
      div = cast(index_value(simplify((h1 - h0) * (w1 - w0))), dt);
    }
    return call(CallOp::Div, {total.at(i), div}, dt);
  });
}

}  // namespace

void register_window_lowerings(LoweringTable& t) { t["avg_pool2d"] = lower_avg_pool2d; }

}  // namespace tp::stax
