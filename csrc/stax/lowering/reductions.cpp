// Reduction lowerings: a compute node that folds its body over the reduced
// dims and writes a temp buffer (contiguous over the kept dims); consumers
// read that buffer. any/all are max/min over the values as bool (false < true).
#include <cmath>
#include <limits>
#include <optional>

#include "ops/reduction_args.h"
#include "stax/lowering/families.h"

namespace tp::stax {
using namespace tp::stax::ir;

namespace {

LoweringFn reduction(ReduceOp op) {
  return [op](LoweringContext& c) {
    const Value& x = c.input(0);
    const DType out_dtype = c.out_dtype();
    const Shape& out_sizes = c.out_sizes();
    // None (absent) = all dims; prod's dim is a single int.
    std::vector<int64_t> dims;
    if (const AttrValue* d = c.attrs().find("dim")) {
      if (auto* one = std::get_if<int64_t>(d)) dims = {*one};
      else if (auto* many = std::get_if<std::vector<int64_t>>(d)) dims = *many;
    }
    int64_t nd = static_cast<int64_t>(x.sizes.size());
    // A 0-d input has no dim to reduce: dim -1 / 0 name the value itself
    // (eager has already checked the range during capture).
    std::vector<bool> reduced(nd, dims.empty());
    for (auto d : dims) {
      int64_t w = d < 0 ? d + nd : d;
      if (nd == 0) continue;
      if (w < 0 || w >= nd) c.fail(str("reduction dim ", d, " out of range"));
      reduced[w] = true;
    }
    ComputeNode n;
    n.reduce = op;
    Index src(nd);
    Shape kept;
    Index kept_idx;
    SymShape kept_e;  // dynamic shapes: the kept extents as expressions
    for (int64_t d = 0; d < nd; ++d) {
      if (reduced[d]) {
        if (x.sizes[d] == 1) { src[d] = 0; continue; }
        IndexExpr r = c.new_var("r");
        n.rvars.push_back(r);
        n.reduce_ranges.push_back(x.sizes[d]);
        n.reduce_range_exprs.push_back(x.size(d));
        src[d] = r;
      } else {
        IndexExpr i = x.sizes[d] == 1 ? IndexExpr(0) : c.new_var("i");
        src[d] = i;
        kept.push_back(x.sizes[d]);
        kept_e.push_back(x.size(d));
        kept_idx.push_back(i);
      }
    }
    for (size_t d = 0; d < kept.size(); ++d)
      if (kept[d] != 1) { n.ranges.push_back(kept[d]); n.range_exprs.push_back(kept_e[d]); n.vars.push_back(kept_idx[d]); }
    n.body = cast(x.at(src), out_dtype);
    if (c.symbolic()) {
      n.store_index = linear_index(n.vars, sym_contiguous_strides(n.range_exprs));
      n.out_buffer = c.add_buffer(BufferKind::Temp, "buf", out_dtype, c.out_size_exprs(), -1);
      int buf = n.out_buffer;
      c.add_compute_node(std::move(n));
      return c.from_contiguous_buffer(buf, c.out_size_exprs(), out_dtype);
    }
    n.store_index = linear_index(n.vars, contiguous_strides(n.ranges));
    // out_sizes already reflects keepdim: with or without the size-1 dims the layout is the same.
    Shape strides = contiguous_strides(out_sizes);
    n.out_buffer = c.add_buffer(BufferKind::Temp, "buf", out_dtype, out_sizes, strides, -1);
    int buf = n.out_buffer;
    c.add_compute_node(std::move(n));
    return LoweringContext::from_buffer(buf, out_sizes, strides, out_dtype);
  };
}

// cumsum / cumprod along one dim: a scan node over the other dims.
LoweringFn scan(ReduceOp op) {
  return [op](LoweringContext& c) {
    // The CUDA printer has no scan: in a CUDA region the operator is an extern
    // call of its eager kernel (cuda/scan_sort.cpp), the rest stays generated.
    if (c.region().cuda) c.fail("scans run as the eager CUDA kernel in a CUDA region");
    const Value& x = c.input(0);
    const DType dt = c.out_dtype();
    const Shape& out_sizes = c.out_sizes();
    int64_t nd = static_cast<int64_t>(x.sizes.size());
    int64_t dim = c.attrs().get<int64_t>("dim");
    if (dim < 0) dim += std::max<int64_t>(nd, 1);
    if (nd == 0 || x.sizes[dim] == 1)  // nothing to accumulate: the value itself
      return c.pointwise([x, dt](const Index& idx) { return cast(x.at(idx), dt); });
    ComputeNode n;
    n.reduce = op;
    n.scan = true;
    Index idx(nd);
    for (int64_t d = 0; d < nd; ++d) {
      if (d == dim) {
        idx[d] = c.new_var("r");
        n.rvars.push_back(idx[d]);
        n.reduce_ranges.push_back(x.sizes[d]);
        n.reduce_range_exprs.push_back(x.size(d));
      } else if (x.sizes[d] == 1) {
        idx[d] = 0;
      } else {
        idx[d] = c.new_var("i");
        n.vars.push_back(idx[d]);
        n.ranges.push_back(x.sizes[d]);
        n.range_exprs.push_back(x.size(d));
      }
    }
    n.body = cast(x.at(idx), dt);
    if (c.symbolic()) {
      n.store_index = linear_index(idx, sym_contiguous_strides(c.out_size_exprs()));
      n.out_buffer = c.add_buffer(BufferKind::Temp, "buf", dt, c.out_size_exprs(), -1);
      int buf = n.out_buffer;
      c.add_compute_node(std::move(n));
      return c.from_contiguous_buffer(buf, c.out_size_exprs(), dt);
    }
    Shape strides = contiguous_strides(out_sizes);
    n.store_index = linear_index(idx, strides);
    n.out_buffer = c.add_buffer(BufferKind::Temp, "buf", dt, out_sizes, strides, -1);
    int buf = n.out_buffer;
    c.add_compute_node(std::move(n));
    return LoweringContext::from_buffer(buf, out_sizes, strides, dt);
  };
}

// The iteration space of a reduction of a tensor of shape `xs` over the dims
// `reduced`: the node's vars/ranges are the kept dims (size-1 dims get no
// loop), its rvars the reduced ones; `src` indexes the operand, `out_idx` the
// result (with a 0 per reduced dim when the result keeps the rank).
struct FoldSpace {
  ComputeNode node;
  Index src, out_idx;
};
FoldSpace fold_space(LoweringContext& c, const Shape& xs, const std::vector<bool>& reduced, bool keep_rank) {
  FoldSpace f;
  const size_t nd = xs.size();
  f.src.resize(nd);
  for (size_t d = 0; d < nd; ++d) {
    if (reduced[d]) {
      if (xs[d] == 1) f.src[d] = 0;
      else {
        f.src[d] = c.new_var("r");
        f.node.rvars.push_back(f.src[d]);
        f.node.reduce_ranges.push_back(xs[d]);
      }
      if (keep_rank) f.out_idx.push_back(IndexExpr(0));
    } else {
      f.src[d] = xs[d] == 1 ? IndexExpr(0) : c.new_var("i");
      if (xs[d] != 1) { f.node.ranges.push_back(xs[d]); f.node.vars.push_back(f.src[d]); }
      f.out_idx.push_back(f.src[d]);
    }
  }
  f.node.store_index = linear_index(f.node.vars, contiguous_strides(f.node.ranges));
  return f;
}

// Adds the node of `f` (body and op set) writing a new contiguous buffer of
// shape out_sizes (and a second one for a pair reduction); returns the Values.
std::pair<Value, Value> add_fold(LoweringContext& c, FoldSpace f, const Shape& out_sizes, DType dt, DType aux_dt) {
  const Shape strides = contiguous_strides(out_sizes);
  f.node.out_buffer = c.add_buffer(BufferKind::Temp, "buf", dt, out_sizes, strides, -1);
  const bool pair = f.node.reduce == ReduceOp::Welford || f.node.reduce == ReduceOp::ArgMax ||
                    f.node.reduce == ReduceOp::ArgMin;
  if (pair) f.node.aux_buffer = c.add_buffer(BufferKind::Temp, "buf", aux_dt, out_sizes, strides, -1);
  const int out = f.node.out_buffer, aux = f.node.aux_buffer;
  c.add_compute_node(std::move(f.node));
  return {LoweringContext::from_buffer(out, out_sizes, strides, dt),
          pair ? LoweringContext::from_buffer(aux, out_sizes, strides, aux_dt) : Value()};
}

// The dims an arg reduction folds: `dim` (wrapped) or all of them (dim=None:
// the flattened input), and whether the result keeps the rank.
struct ArgDims {
  std::optional<int64_t> dim;
  std::vector<bool> reduced;
  bool keep_rank;
};
ArgDims arg_dims(LoweringContext& c, int64_t nd) {
  std::optional<int64_t> dim;
  if (const AttrValue* d = c.attrs().find("dim"))
    if (auto* one = std::get_if<int64_t>(d)) dim = *one;
  if (dim && nd > 0) {
    if (*dim < 0) *dim += nd;
    if (*dim < 0 || *dim >= nd) c.fail(str("reduction dim ", *dim, " out of range"));
  }
  std::vector<bool> reduced(static_cast<size_t>(nd), !dim.has_value());
  if (dim && nd > 0) reduced[static_cast<size_t>(*dim)] = true;
  return {dim, std::move(reduced), static_cast<int64_t>(c.out_sizes().size()) == nd};
}

// argmax / argmin / max.dim / min.dim: one pass with a (value, position)
// accumulator (ReduceOp::ArgMax / ArgMin; the printer keeps the first
// extremum, or the first NaN, as eager does). A position is the index along
// `dim`, or the row-major flat index when dim is None (argmax of the flattened
// input). max.dim / min.dim return (value, index); the value is the element at
// the index (so among tied +0.0 / -0.0 its sign is eager's).
LoweringFn arg_reduction_one_pass(bool is_max, bool with_values) {
  return [is_max, with_values](LoweringContext& c) {
    const Value& x = c.input(0);
    const Shape& out_sizes = c.out_sizes();
    const int64_t nd = static_cast<int64_t>(x.sizes.size());
    const auto [dim, reduced, keep_rank] = arg_dims(c, nd);
    FoldSpace f = fold_space(c, x.sizes, reduced, keep_rank);
    f.node.reduce = is_max ? ReduceOp::ArgMax : ReduceOp::ArgMin;
    f.node.body = x.at(f.src);
    IndexExpr pos(0);
    if (dim) {
      if (nd > 0) pos = f.src[*dim];
    } else {
      pos = linear_index(f.src, contiguous_strides(x.sizes));
    }
    f.node.position = index_value(pos);
    auto [idx, value] = add_fold(c, std::move(f), out_sizes, DType::Int64, x.dtype);
    if (with_values) c.set_results({value, idx});
    return with_values ? value : idx;
  };
}

// Symbolic sizes: two reductions (the extremum, then the first position that
// holds it or a NaN), whose extents are the operand's size expressions.
LoweringFn arg_reduction_symbolic(bool is_max, bool with_values) {
  return [is_max, with_values](LoweringContext& c) {
    const Value& x = c.input(0);
    const Shape& out_sizes = c.out_sizes();
    const int64_t nd = static_cast<int64_t>(x.sizes.size());
    const auto [dim, reduced, keep_rank] = arg_dims(c, nd);
    const Shape x_strides = contiguous_strides(x.sizes);
    Shape strides = contiguous_strides(out_sizes);
    const bool symbolic = c.symbolic();
    const SymShape x_sym_strides = sym_contiguous_strides(x.size_exprs());

    // One reduction node over x: `body(src, out_idx)` folded by `op` into a new buffer.
    auto reduce = [&](ReduceOp op, DType dt, const std::function<Expr(const Index&, const Index&)>& body) {
      ComputeNode n;
      n.reduce = op;
      Index src(nd), out_idx;
      for (int64_t d = 0; d < nd; ++d) {
        if (reduced[d]) {
          if (x.sizes[d] == 1) src[d] = 0;
          else {
            src[d] = c.new_var("r");
            n.rvars.push_back(src[d]);
            n.reduce_ranges.push_back(x.sizes[d]);
            n.reduce_range_exprs.push_back(x.size(d));
          }
          if (keep_rank) out_idx.push_back(IndexExpr(0));
        } else {
          src[d] = x.sizes[d] == 1 ? IndexExpr(0) : c.new_var("i");
          if (x.sizes[d] != 1) {
            n.ranges.push_back(x.sizes[d]);
            n.range_exprs.push_back(x.size(d));
            n.vars.push_back(src[d]);
          }
          out_idx.push_back(src[d]);
        }
      }
      n.body = body(src, out_idx);
      if (symbolic) {
        n.store_index = linear_index(n.vars, sym_contiguous_strides(n.range_exprs));
        n.out_buffer = c.add_buffer(BufferKind::Temp, "buf", dt, c.out_size_exprs(), -1);
        int buf = n.out_buffer;
        c.add_compute_node(std::move(n));
        return c.from_contiguous_buffer(buf, c.out_size_exprs(), dt);
      }
      n.store_index = linear_index(n.vars, contiguous_strides(n.ranges));
      n.out_buffer = c.add_buffer(BufferKind::Temp, "buf", dt, out_sizes, strides, -1);
      int buf = n.out_buffer;
      c.add_compute_node(std::move(n));
      return LoweringContext::from_buffer(buf, out_sizes, strides, dt);
    };

    const DType xt = x.dtype;
    Value m = reduce(is_max ? ReduceOp::Max : ReduceOp::Min, xt,
                     [&](const Index& src, const Index&) { return x.at(src); });
    Value idx = reduce(ReduceOp::Min, DType::Int64, [&](const Index& src, const Index& out_idx) {
      Expr v = x.at(src);
      Expr hit = call(CallOp::Eq, {v, m.at(out_idx)}, DType::Bool);
      if (is_floating(xt)) hit = call(CallOp::Or, {hit, call(CallOp::Ne, {v, v}, DType::Bool)}, DType::Bool);
      IndexExpr pos(0);
      if (dim) {
        if (nd > 0) pos = src[*dim];
      } else {
        pos = symbolic ? linear_index(src, x_sym_strides) : linear_index(src, x_strides);
      }
      return where(hit, index_value(pos), constant(Scalar(std::numeric_limits<int64_t>::max()), DType::Int64));
    });
    if (with_values) c.set_results({m, idx});
    return with_values ? m : idx;
  };
}

// The two-reduction form also serves the CUDA printer (a region lowered with
// LoweredRegion::cuda), which has no pair (value, position) accumulator: argmax,
// max.dim and friends then print as two plain reductions (eager CUDA
// operators and compiled regions alike).
LoweringFn arg_reduction(bool is_max, bool with_values) {
  LoweringFn one = arg_reduction_one_pass(is_max, with_values), sym = arg_reduction_symbolic(is_max, with_values);
  return [one, sym](LoweringContext& c) { return c.symbolic() || c.region().cuda ? sym(c) : one(c); };
}

// norm (the vector p-norm over the reduced dims; 'fro' is p = 2) for the CUDA
// printer: one reduction of |x|^p's term in double, as eager's row_norm
// accumulates, then the root, rounded once to the result dtype. p = +-inf is
// amax / amin of |x| (NaN propagates), p = 0 counts the non-zeros. CPU regions
// keep the eager kernel as an extern call (declined here), and so does a
// reduction over an empty dim (eager's value there is not the fold's initial
// value for every p).
LoweringFn vector_norm() {
  return [](LoweringContext& c) {
    if (!c.region().cuda) c.fail("norm is generated for CUDA regions only (the CPU calls the eager kernel)");
    const Value& x = c.input(0);
    const DType dt = c.out_dtype();
    double p = 2.0;
    const AttrValue* pv = c.attrs().find("p");
    if (pv && std::holds_alternative<std::string>(*pv)) {
      if (std::get<std::string>(*pv) != "fro") c.fail("norm: unsupported norm type");
    } else if (std::optional<double> q = c.attrs().get_optional_double("p")) {
      p = *q;
    }
    const int64_t nd = static_cast<int64_t>(x.sizes.size());
    const std::vector<bool> reduced = reduce::mask_of(c.op().c_str(), nd, c.attrs());
    if (reduce::count_of(x.sizes, reduced) == 0) c.fail("norm over an empty dim");
    const bool keep_rank = static_cast<int64_t>(c.out_sizes().size()) == nd;
    FoldSpace f = fold_space(c, x.sizes, reduced, keep_rank);
    const DType at = DType::Float64;
    const Expr v = cast(x.at(f.src), at);
    const Expr a = call(CallOp::Abs, {v}, at);
    f.node.reduce = ReduceOp::Sum;
    if (std::isinf(p)) {
      f.node.reduce = p > 0 ? ReduceOp::Max : ReduceOp::Min;
      f.node.body = a;
    } else if (p == 0) {
      f.node.body = cast(call(CallOp::Ne, {v, constant(Scalar(0.0), at)}, DType::Bool), at);
    } else if (p == 1) {
      f.node.body = a;
    } else if (p == 2) {
      f.node.body = call(CallOp::Mul, {v, v}, at);
    } else {
      f.node.body = call(CallOp::Pow, {a, constant(Scalar(p), at)}, at);
    }
    const Value acc = add_fold(c, std::move(f), c.out_sizes(), at, at).first;
    return c.pointwise([acc, p, dt, at](const Index& i) {
      Expr s = acc.at(i);
      if (p == 2) s = call(CallOp::Sqrt, {s}, at);
      else if (!std::isinf(p) && p != 0 && p != 1) s = call(CallOp::Pow, {s, constant(Scalar(1.0 / p), at)}, at);
      return cast(s, dt);
    });
  };
}

// var / std / var_mean / std_mean. Over the innermost dims: one Welford node
// (ReduceOp::Welford, results mean and M2, M2 in double; the scheduler picks
// one pass or two, see WelfordMode), var = M2 / max(0, N - correction). Over outer dims (a
// column variance, whose rows are strided): the two-pass form as two sum nodes
// (mean, then the squared deviations), which the scheduler vectorizes across
// the kept contiguous dim. 16-bit inputs decline (eager computes them in float).
LoweringFn variance(bool is_std, bool with_mean) {
  return [is_std, with_mean](LoweringContext& c) {
    const Value& x = c.input(0);
    const DType dt = x.dtype;
    if (dt != DType::Float32 && dt != DType::Float64)
      c.fail(str(c.op(), " of dtype ", dtype_name(dt), " has no loop rule (float32/float64 only)"));
    const int64_t nd = static_cast<int64_t>(x.sizes.size());
    const std::vector<bool> reduced = reduce::mask_of(c.op().c_str(), nd, c.attrs());
    double correction = c.attrs().get_or("unbiased", true) ? 1.0 : 0.0;
    if (auto corr = c.attrs().get_optional_double("correction")) correction = *corr;
    const Shape& out_sizes = c.out_sizes();
    const bool keep_rank = static_cast<int64_t>(out_sizes.size()) == nd;
    const int64_t count = reduce::count_of(x.sizes, reduced);
    const double div = std::max(0.0, static_cast<double>(count) - correction);
    // Is the last dim that has a loop reduced (the rows are contiguous runs)?
    bool innermost = true;
    for (int64_t d = nd - 1; d >= 0; --d)
      if (x.sizes[d] != 1) { innermost = reduced[d]; break; }
    Value mean, m2;
    if (innermost) {
      FoldSpace f = fold_space(c, x.sizes, reduced, keep_rank);
      f.node.reduce = ReduceOp::Welford;
      f.node.body = x.at(f.src);
      std::tie(mean, m2) = add_fold(c, std::move(f), out_sizes, dt, DType::Float64);
      c.remember_mean(reduced, keep_rank, mean);
    } else {
      FoldSpace f = fold_space(c, x.sizes, reduced, keep_rank);
      f.node.reduce = ReduceOp::Sum;
      f.node.body = x.at(f.src);
      Value sum = add_fold(c, std::move(f), out_sizes, dt, dt).first;
      const Expr n = constant(Scalar(static_cast<double>(count)), dt);
      mean = sum;
      mean.at = [sum, n, dt](const Index& i) { return call(CallOp::Div, {sum.at(i), n}, dt); };
      FoldSpace g = fold_space(c, x.sizes, reduced, keep_rank);
      g.node.reduce = ReduceOp::Sum;
      Expr d = call(CallOp::Sub, {x.at(g.src), mean.at(g.out_idx)}, dt);
      g.node.body = call(CallOp::Mul, {d, d}, dt);
      m2 = add_fold(c, std::move(g), out_sizes, dt, dt).first;
      mean.buffer = -1;
    }
    // As eager: M2 / div in double, rounded once (then sqrt in T for std). The
    // value is written per row (a local of the statistics kernel), so a
    // consumer such as (x - mean) / std reads it as a T and stays vectorized.
    const Expr divisor = constant(Scalar(div), DType::Float64);
    Value v = c.pointwise([m2, divisor, dt, is_std](const Index& i) {
      Expr var = cast(call(CallOp::Div, {cast(m2.at(i), DType::Float64), divisor}, DType::Float64), dt);
      return is_std ? call(CallOp::Sqrt, {var}, dt) : var;
    });
    const int buf = c.realize(v, BufferKind::Temp, -1, c.origin());
    v = LoweringContext::from_buffer(buf, out_sizes, contiguous_strides(out_sizes), dt);
    if (with_mean) c.set_results({v, mean});
    return v;
  };
}

}  // namespace

void register_reduction_lowerings(LoweringTable& t) {
  t["sum"] = reduction(ReduceOp::Sum);
  t["amax"] = reduction(ReduceOp::Max);
  t["amin"] = reduction(ReduceOp::Min);
  // max(self) / min(self): amax / amin over every dim (eager refuses an empty input first).
  t["max"] = reduction(ReduceOp::Max);
  t["min"] = reduction(ReduceOp::Min);
  t["norm"] = vector_norm();
  t["norm.str"] = vector_norm();
  t["any"] = reduction(ReduceOp::Max);
  t["all"] = reduction(ReduceOp::Min);
  t["prod"] = reduction(ReduceOp::Prod);
  t["argmax"] = arg_reduction(true, false);
  t["argmin"] = arg_reduction(false, false);
  t["max.dim"] = arg_reduction(true, true);
  t["min.dim"] = arg_reduction(false, true);
  for (const char* op : {"var", "var.dim", "var.unbiased"}) t[op] = variance(false, false);
  for (const char* op : {"std", "std.dim", "std.unbiased"}) t[op] = variance(true, false);
  for (const char* op : {"var_mean", "var_mean.dim", "var_mean.unbiased"}) t[op] = variance(false, true);
  for (const char* op : {"std_mean", "std_mean.dim", "std_mean.unbiased"}) t[op] = variance(true, true);
  t["cumsum"] = scan(ReduceOp::Sum);
  t["cumprod"] = scan(ReduceOp::Prod);
}

}  // namespace tp::stax
