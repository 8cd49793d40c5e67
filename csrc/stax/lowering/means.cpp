// mean, var and std as lowering rules: the sum over the reduced dims divided
// by their element count N (var/std: two passes, the squared deviations from
// the mean divided by max(0, N - correction)). The graph pass decomposes them
// with N a number fixed at capture; under dynamic shapes N depends on the
// sizes, so a symbolic graph keeps them whole and N is an `Index` value (the
// product of the reduced extents, read at run time). The arithmetic is that of
// the decompositions (eager's values for a static graph).
#include "stax/lowering/families.h"

namespace tp::stax {
using namespace tp::stax::ir;

namespace {

// The reduced dims of x named by the node's `dim` attribute (none: all).
std::vector<bool> reduced_dims(LoweringContext& c, const Value& x) {
  const int64_t nd = static_cast<int64_t>(x.sizes.size());
  std::vector<int64_t> dims;
  if (const AttrValue* d = c.attrs().find("dim")) {
    if (auto* one = std::get_if<int64_t>(d)) dims = {*one};
    else if (auto* many = std::get_if<std::vector<int64_t>>(d)) dims = *many;
  }
  std::vector<bool> reduced(static_cast<size_t>(nd), dims.empty());
  for (auto d : dims) {
    int64_t w = d < 0 ? d + nd : d;
    if (nd == 0) continue;
    if (w < 0 || w >= nd) c.fail(str("reduction dim ", d, " out of range"));
    reduced[static_cast<size_t>(w)] = true;
  }
  return reduced;
}

IndexExpr count_of(const Value& x, const std::vector<bool>& reduced) {
  IndexExpr count = 1;
  for (size_t d = 0; d < reduced.size(); ++d)
    if (reduced[d]) count = count * x.size(d);
  return simplify(count);
}

// `op` of body(index of x) over the reduced dims into a new contiguous buffer,
// read back as a Value of x's rank (the reduced dims of size 1).
Value reduce_keepdim(LoweringContext& c, const Value& x, const std::vector<bool>& reduced, ReduceOp op, DType dt,
                     const std::function<Expr(const Index&)>& body) {
  ComputeNode n;
  n.reduce = op;
  Index src(x.sizes.size());
  SymShape kept;
  for (size_t d = 0; d < x.sizes.size(); ++d) {
    const bool one = x.sizes[d] == 1;  // a symbol's example size is never 1
    if (one) {
      src[d] = 0;
    } else if (reduced[d]) {
      src[d] = c.new_var("r");
      n.rvars.push_back(src[d]);
      n.reduce_ranges.push_back(x.sizes[d]);
      n.reduce_range_exprs.push_back(x.size(d));
    } else {
      src[d] = c.new_var("i");
      n.vars.push_back(src[d]);
      n.ranges.push_back(x.sizes[d]);
      n.range_exprs.push_back(x.size(d));
    }
    kept.push_back(reduced[d] ? IndexExpr(1) : x.size(d));
  }
  n.body = body(src);
  n.store_index = linear_index(n.vars, sym_contiguous_strides(n.range_exprs));
  n.out_buffer = c.add_buffer(BufferKind::Temp, "buf", dt, kept, -1);
  const int buf = n.out_buffer;
  c.add_compute_node(std::move(n));
  return c.from_buffer_exprs(buf, kept, sym_contiguous_strides(kept), dt);
}

// The index of a keepdim value from an index of the node's result.
Index keepdim_index(const Index& idx, const std::vector<bool>& reduced, bool keepdim) {
  if (keepdim) return idx;
  Index full;
  size_t j = 0;
  for (bool r : reduced) full.push_back(r ? IndexExpr(0) : idx.at(j++));
  return full;
}

// var / std (var.dim, std.dim, .correction and .unbiased overloads).
LoweringFn variance(bool is_std) {
  return [is_std](LoweringContext& c) -> Value {
    const Value& x = c.input(0);
    const DType dt = c.out_dtype();
    if (!is_floating(dt) || x.dtype != dt) c.fail("var/std of a non-float input");
    double correction = 1.0;
    if (auto v = c.attrs().get_optional_double("correction")) correction = *v;
    else if (c.attrs().has("unbiased")) correction = c.attrs().get_or("unbiased", true) ? 1.0 : 0.0;
    const bool keepdim = c.attrs().has("keepdim") && c.attrs().get_or("keepdim", false);
    std::vector<bool> reduced = reduced_dims(c, x);
    if (x.sizes.empty()) reduced.clear();
    const IndexExpr count = count_of(x, reduced);
    // mean = sum / N in the float type; then the squared deviations from it.
    // A CUDA region computes both passes in double and rounds
    // the result once: the float mean's rounding (|mean| x 2^-24) would
    // otherwise bias every deviation, a relative error near 1e-5 of the
    // variance of data with a large mean (eager's Welford runs in double);
    // the kernels stay memory-bound. The CPU keeps the decomposition's arithmetic,
    // except for 16-bit floats, whose float registers would round the mean to
    // float (not the 16-bit type): double as on CUDA, rounded once.
    const bool half = dt == DType::Float16 || dt == DType::BFloat16;
    const DType at = c.region().cuda || half ? DType::Float64 : dt;
    Value sum = reduce_keepdim(c, x, reduced, ReduceOp::Sum, at, [&](const Index& i) { return cast(x.at(i), at); });
    memoize(sum);
    Expr n = cast(index_value(count), at);
    auto mean_at = [sum, n, at](const Index& i) { return call(CallOp::Div, {sum.at(i), n}, at); };
    // The mean, for a `mean` of the same input and dims (var_mean's second
    // half), with the reduced dims kept or dropped.
    for (bool keep : {true, false}) {
      Value m = sum;
      m.buffer = -1;
      m.dtype = dt;
      m.at = [mean_at, reduced, keep, dt](const Index& idx) { return cast(mean_at(keepdim_index(idx, reduced, keep)), dt); };
      if (!keep) {
        m.sizes.clear();
        m.sym_sizes.clear();
        for (size_t d = 0; d < reduced.size(); ++d)
          if (!reduced[d]) {
            m.sizes.push_back(sum.sizes[d]);
            if (sum.symbolic()) m.sym_sizes.push_back(sum.sym_sizes[d]);
          }
      }
      if (all_const(m.sym_sizes)) m.sym_sizes.clear();  // static
      m.sym_strides.clear();
      m.strides.clear();
      c.remember_mean(reduced, keep, m);
    }
    Value sq = reduce_keepdim(c, x, reduced, ReduceOp::Sum, at, [&](const Index& i) {
      Index m = i;
      for (size_t d = 0; d < m.size(); ++d)
        if (reduced[d]) m[d] = 0;
      Expr centered = call(CallOp::Sub, {cast(x.at(i), at), mean_at(m)}, at);
      return call(CallOp::Mul, {centered, centered}, at);
    });
    memoize(sq);
    // max(0, N - correction) in double, divided in the float type (the decomposition's scalar).
    Expr div = call(CallOp::Max, {call(CallOp::Sub, {cast(index_value(count), DType::Float64),
                                                     constant(Scalar(correction), DType::Float64)}, DType::Float64),
                                  constant(Scalar(0.0), DType::Float64)}, DType::Float64);
    return c.pointwise([sq, reduced, keepdim, div, dt, at, is_std](const Index& idx) {
      Expr v = call(CallOp::Div, {sq.at(keepdim_index(idx, reduced, keepdim)), cast(div, at)}, at);
      return cast(is_std ? call(CallOp::Sqrt, {v}, at) : v, dt);
    });
  };
}

Value lower_mean(LoweringContext& c) {
  const Value& x = c.input(0);
  const DType dt = c.out_dtype();
  if (!is_floating(dt)) c.fail("mean of an integer result");
  if (!is_floating(x.dtype) && x.dtype != dt) c.fail("mean converting an integer input");
  const std::vector<bool> reduced = reduced_dims(c, x);
  // The same input and dims as a Welford node lowered before (var_mean reaches
  // Stax as var + mean): its mean result (sum / N over the same values).
  const bool keepdim = c.attrs().has("keepdim") && c.attrs().get_or("keepdim", false);
  if (x.dtype == dt && c.attrs().is_none("dtype"))
    if (const Value* m = c.known_mean(reduced, keepdim)) return *m;
  const IndexExpr count = count_of(x, reduced);
  if (!c.region().cuda && (dt == DType::Float16 || dt == DType::BFloat16)) {
    // A 16-bit mean in a CPU region: the sum stays a float (its buffer a
    // float32 temp; the sum rule's 16-bit result would be rounded when a later
    // kernel reads it), divided and rounded once, as eager's float opmath.
    const DType f = DType::Float32;
    Value s = reduce_keepdim(c, x, reduced, ReduceOp::Sum, f, [&](const Index& i) { return cast(x.at(i), f); });
    memoize(s);
    return c.pointwise([s, count, dt, f, reduced, keepdim](const Index& idx) {
      return cast(call(CallOp::Div, {s.at(keepdim_index(idx, reduced, keepdim)), cast(index_value(count), f)}, f), dt);
    });
  }
  LoweringFn sum = find_lowering("sum");
  if (!sum) c.fail("no rule for sum");
  Value s = sum(c);  // the same dims, keepdim and result dtype
  memoize(s);
  // eager divides the sum by N converted to the result's float type.
  return c.pointwise([s, count, dt](const Index& idx) {
    return call(CallOp::Div, {s.at(idx), cast(index_value(count), dt)}, dt);
  });
}

}  // namespace

void register_mean_lowerings(LoweringTable& t) {
  t["mean"] = lower_mean;
  for (const char* op : {"var", "var.dim", "var.unbiased"}) t[op] = variance(false);
  for (const char* op : {"std", "std.dim", "std.unbiased"}) t[op] = variance(true);
}

}  // namespace tp::stax
