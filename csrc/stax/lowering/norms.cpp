// Normalization lowerings: layer_norm (below), and native_batch_norm in evaluation mode. With
// training=False the statistics are the running ones, so the output is a
// pointwise function of x and four per-channel vectors and fuses with its
// neighbours. The arithmetic follows the eager kernel step for step, so the
// result is the same: rstd = T(1 / sqrt(double(running_var) + eps)), scale =
// rstd * weight, shift = bias - mean * scale, y = x * scale + shift (in T).
// The other two results are what eager returns in this mode: the running
// mean and that rstd, per channel. Training mode (batch statistics and the
// in-place update of the running ones) and 16-bit inputs (eager computes in
// float32) decline, and run as an extern call.
#include "stax/lowering/families.h"

namespace tp::stax {
using namespace tp::stax::ir;

namespace {

Value lower_native_batch_norm(LoweringContext& c) {
  // Operands: (input, weight, bias, running_mean, running_var).
  if (c.attrs().get_or("training", false)) c.fail("native_batch_norm in training mode has no loop rule");
  const Value& x = c.input(0);
  const DType dt = x.dtype;
  if (dt != DType::Float32 && dt != DType::Float64)
    c.fail(str("native_batch_norm of dtype ", dtype_name(dt), " has no loop rule (float32/float64 only)"));
  if (x.sizes.size() < 2) c.fail("native_batch_norm needs an (N, C, ...) input");
  const int64_t channels = x.sizes[1];
  const double eps = c.attrs().get_double("eps");
  auto per_channel = [&](size_t i) {
    const Value v = c.input(i);
    return [v, dt](const IndexExpr& ch) { return cast(v.at(Index{ch}), dt); };
  };
  auto weight = per_channel(1), bias = per_channel(2), mean = per_channel(3);
  const Value var = c.input(4);
  auto rstd = [var, dt, eps](const IndexExpr& ch) {
    Expr v = cast(var.at(Index{ch}), DType::Float64);
    Expr denom = call(CallOp::Sqrt, {call(CallOp::Add, {v, constant(Scalar(eps), DType::Float64)}, DType::Float64)},
                      DType::Float64);
    return cast(call(CallOp::Div, {constant(Scalar(1.0), DType::Float64), denom}, DType::Float64), dt);
  };
  // The per-channel vectors: rstd, scale and shift are computed once per
  // channel into small buffers (not once per element of x).
  auto vec = [&](std::function<Expr(const IndexExpr&)> f) {
    Value v;
    v.sizes = {channels};
    v.dtype = dt;
    v.at = [f, channels](const Index& idx) { return f(channels == 1 ? IndexExpr(0) : idx[0]); };
    return v;
  };
  auto realized = [&](const Value& v) {
    int buf = c.realize(v, BufferKind::Temp, -1, c.origin());
    return LoweringContext::from_buffer(buf, {channels}, {1}, dt);
  };
  const Value rstd_v = realized(vec(rstd));
  const Value scale_v = realized(vec([=](const IndexExpr& ch) {
    return call(CallOp::Mul, {rstd_v.at(Index{ch}), weight(ch)}, dt);
  }));
  const Value shift_v = realized(vec([=](const IndexExpr& ch) {
    return call(CallOp::Sub, {bias(ch), call(CallOp::Mul, {mean(ch), scale_v.at(Index{ch})}, dt)}, dt);
  }));
  Value y = c.pointwise([=](const Index& idx) {
    const Index ch{channels == 1 ? IndexExpr(0) : idx[1]};
    return call(CallOp::Add, {call(CallOp::Mul, {x.at(idx), scale_v.at(ch)}, dt), shift_v.at(ch)}, dt);
  });
  c.set_results({y, vec(mean), rstd_v});
  return y;
}

// layer_norm / native_layer_norm (and so group_norm, which reaches them as a
// reshape + layer_norm + affine): one Welford node over the normalized
// (trailing) dims gives each row's mean and M2; rstd = T(1 / sqrt(double(M2) /
// N + eps)) is one value per row (a pointwise node without inner loop, which
// the scheduler keeps as a local of the row's iteration); the output
// ((x - mean) * rstd) * weight + bias is pointwise, in eager's order. The
// scheduler fuses the three into one kernel: statistics of a row, then its
// normalized output, and any pointwise consumer (gelu, a residual add) joins.
Value lower_layer_norm(LoweringContext& c, bool native) {
  const Value& x = c.input(0);
  const DType dt = x.dtype;
  if (dt != DType::Float32 && dt != DType::Float64)
    c.fail(str(c.op(), " of dtype ", dtype_name(dt), " has no loop rule (float32/float64 only)"));
  const auto& norm = c.attrs().get<std::vector<int64_t>>("normalized_shape");
  const size_t nd = x.sizes.size(), k = norm.size();
  if (k == 0 || k > nd) c.fail("normalized_shape does not match the input");
  const size_t axis = nd - k;
  const double eps = c.attrs().get_double("eps");
  // Dynamic shapes: the statistics' shape and the element count N are index
  // expressions (N read at run time); with static sizes they are constants and
  // the program is the static one exactly.
  IndexExpr count = 1;
  for (size_t d = axis; d < nd; ++d) count = count * x.size(d);
  count = simplify(count);
  const Shape lead(x.sizes.begin(), x.sizes.begin() + static_cast<int64_t>(axis));
  SymShape lead_sym;
  for (size_t d = 0; d < axis; ++d) lead_sym.push_back(x.size(d));
  const SymShape lead_strides = sym_contiguous_strides(lead_sym);
  // The Welford node: vars over the leading dims, rvars over the normalized ones.
  ComputeNode n;
  n.reduce = ReduceOp::Welford;
  Index src(nd);
  Index row;  // index into `lead`
  for (size_t d = 0; d < nd; ++d) {
    if (x.sizes[d] == 1) src[d] = 0;  // a symbol's example size is never 1
    else if (d >= axis) {
      src[d] = c.new_var("r");
      n.rvars.push_back(src[d]);
      n.reduce_ranges.push_back(x.sizes[d]);
      if (x.symbolic()) n.reduce_range_exprs.push_back(x.size(d));
    } else {
      src[d] = c.new_var("i");
      n.vars.push_back(src[d]);
      n.ranges.push_back(x.sizes[d]);
      if (x.symbolic()) n.range_exprs.push_back(x.size(d));
    }
    if (d < axis) row.push_back(src[d]);
  }
  n.body = x.at(src);
  n.store_index = linear_index(row, lead_strides);
  n.out_buffer = c.add_buffer(BufferKind::Temp, "buf", dt, lead_sym, -1);
  n.aux_buffer = c.add_buffer(BufferKind::Temp, "buf", DType::Float64, lead_sym, -1);  // M2 in double
  const Value mean = c.from_buffer_exprs(n.out_buffer, lead_sym, lead_strides, dt);
  const Value m2 = c.from_buffer_exprs(n.aux_buffer, lead_sym, lead_strides, DType::Float64);
  c.add_compute_node(std::move(n));
  const Expr n_value = count.is_const() ? constant(Scalar(static_cast<double>(count.const_value())), DType::Float64)
                                        : cast(index_value(count), DType::Float64);
  Value rstd_fn;
  rstd_fn.sizes = lead;
  if (!all_const(lead_sym)) rstd_fn.sym_sizes = lead_sym;
  rstd_fn.dtype = dt;
  rstd_fn.at = [m2, dt, n_value, eps](const Index& i) {
    Expr var = call(CallOp::Div, {cast(m2.at(i), DType::Float64), n_value}, DType::Float64);
    Expr denom = call(CallOp::Sqrt, {call(CallOp::Add, {var, constant(Scalar(eps), DType::Float64)}, DType::Float64)},
                      DType::Float64);
    return cast(call(CallOp::Div, {constant(Scalar(1.0), DType::Float64), denom}, DType::Float64), dt);
  };
  const int rstd_buf = c.realize(rstd_fn, BufferKind::Temp, -1, c.origin());
  const Value rstd = c.from_buffer_exprs(rstd_buf, lead_sym, lead_strides, dt);
  const bool has_w = !c.absent(1), has_b = !c.absent(2);
  const Value w = has_w ? c.input(1) : Value(), b = has_b ? c.input(2) : Value();
  Value y = c.pointwise([=](const Index& idx) {
    Index r(idx.begin(), idx.begin() + static_cast<int64_t>(axis));
    Index tail(idx.begin() + static_cast<int64_t>(axis), idx.end());
    Expr t = call(CallOp::Mul, {call(CallOp::Sub, {x.at(idx), mean.at(r)}, dt), rstd.at(r)}, dt);
    if (has_w) t = call(CallOp::Mul, {t, cast(w.at(broadcast_index(tail, w.sizes)), dt)}, dt);
    if (has_b) t = call(CallOp::Add, {t, cast(b.at(broadcast_index(tail, b.sizes)), dt)}, dt);
    return t;
  });
  if (native) {
    // mean and rstd with the normalized dims kept as size 1.
    Shape stat = x.sizes;
    SymShape stat_sym = x.size_exprs();
    for (size_t d = axis; d < nd; ++d) stat[d] = 1, stat_sym[d] = 1;
    auto keep = [&](const Value& v) {
      Value s;
      s.sizes = stat;
      if (!all_const(stat_sym)) s.sym_sizes = stat_sym;
      s.dtype = dt;
      s.at = [v, axis](const Index& idx) { return v.at(Index(idx.begin(), idx.begin() + static_cast<int64_t>(axis))); };
      return s;
    };
    c.set_results({y, keep(mean), keep(rstd)});
  }
  return y;
}

}  // namespace

bool norm_lowering_takes_absent(const std::string& op) { return op == "layer_norm" || op == "native_layer_norm"; }

void register_norm_lowerings(LoweringTable& t) {
  t["native_batch_norm"] = &lower_native_batch_norm;
  t["layer_norm"] = [](LoweringContext& c) { return lower_layer_norm(c, false); };
  t["native_layer_norm"] = [](LoweringContext& c) { return lower_layer_norm(c, true); };
}

bool keeps_whole_for_stax(const std::string& op) {
  // Composites with a native loop rule: the decomposition pass leaves them whole.
  // mean: so that a mean beside a var of the same input and dims reads the
  // Welford node's mean (lower_mean, means.cpp) instead of summing again.
  static const char* const kOps[] = {"layer_norm", "mean", "var", "var.dim", "var.unbiased", "std", "std.dim",
                                     "std.unbiased", "var_mean", "var_mean.dim", "var_mean.unbiased", "std_mean",
                                     "std_mean.dim", "std_mean.unbiased"};
  for (const char* o : kOps)
    if (op == o) return true;
  return false;
}

}  // namespace tp::stax
