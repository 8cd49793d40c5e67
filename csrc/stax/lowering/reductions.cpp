// Reduction lowerings: a compute node that folds its body over the reduced
// dims and writes a temp buffer (contiguous over the kept dims); consumers
// read that buffer. any/all are max/min over the values as bool (false < true).
#include <limits>
#include <optional>

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

// argmax / argmin / max.dim / min.dim as two fused loop reductions over the
// same input: m = amax (amin) over the reduced dims (the NaN-propagating
// max, so m is NaN when any element is), then the index = Min over the
// reduced positions of (x == m or x is NaN ? position : INT64_MAX). That is
// eager's answer exactly: the first position of the extremum, and when a NaN
// is present (m NaN, so no element equals m) the first NaN. A position is the
// index along `dim`, or the row-major flat index when dim is None (argmax of
// the flattened input). max.dim / min.dim return (m, index); m equals the
// element at the index except for the sign of a zero among tied +-0.
LoweringFn arg_reduction(bool is_max, bool with_values) {
  return [is_max, with_values](LoweringContext& c) {
    const Value& x = c.input(0);
    const Shape& out_sizes = c.out_sizes();
    const int64_t nd = static_cast<int64_t>(x.sizes.size());
    std::optional<int64_t> dim;
    if (const AttrValue* d = c.attrs().find("dim"))
      if (auto* one = std::get_if<int64_t>(d)) dim = *one;
    if (dim && nd > 0) {
      if (*dim < 0) *dim += nd;
      if (*dim < 0 || *dim >= nd) c.fail(str("reduction dim ", *dim, " out of range"));
    }
    std::vector<bool> reduced(nd, !dim.has_value());
    if (dim && nd > 0) reduced[*dim] = true;
    const bool keep_rank = static_cast<int64_t>(out_sizes.size()) == nd;
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

}  // namespace

void register_reduction_lowerings(LoweringTable& t) {
  t["sum"] = reduction(ReduceOp::Sum);
  t["amax"] = reduction(ReduceOp::Max);
  t["amin"] = reduction(ReduceOp::Min);
  t["any"] = reduction(ReduceOp::Max);
  t["all"] = reduction(ReduceOp::Min);
  t["prod"] = reduction(ReduceOp::Prod);
  t["argmax"] = arg_reduction(true, false);
  t["argmin"] = arg_reduction(false, false);
  t["max.dim"] = arg_reduction(true, true);
  t["min.dim"] = arg_reduction(false, true);
  t["cumsum"] = scan(ReduceOp::Sum);
  t["cumprod"] = scan(ReduceOp::Prod);
}

}  // namespace tp::stax
