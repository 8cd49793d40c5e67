// View lowerings: remap the index, never copy. A view of a value that is a
// strided view of a buffer stays one (its strides and offset are derived), so
// extern calls can read it in place.
#include "stax/lowering/families.h"

namespace tp::stax {
using namespace tp::stax::ir;

namespace {

// The view of x's buffer with the given strides/offset, when x is a buffer view;
// otherwise the compute function `at`.
// Dynamic shapes: a node touching a symbolic size passes the strides and offset
// as expressions (`sym_strides`, `sym_offset`).
Value view_of(LoweringContext& c, const Value& x, std::function<Expr(const Index&)> at, Shape strides,
              int64_t offset, const SymShape& sym_strides = {}, const IndexExpr& sym_offset = 0) {
  if (x.buffer >= 0 && c.symbolic()) return c.from_buffer_exprs(x.buffer, c.out_size_exprs(), sym_strides, x.dtype, sym_offset);
  if (x.buffer >= 0) return LoweringContext::from_buffer(x.buffer, c.out_sizes(), strides, x.dtype, offset);
  return c.pointwise(std::move(at));
}

Value lower_permute(LoweringContext& c) {
  const Value& x = c.input(0);
  auto dims = c.attrs().get<std::vector<int64_t>>("dims");
  for (auto& d : dims) d = d < 0 ? d + static_cast<int64_t>(dims.size()) : d;
  Shape strides;
  SymShape sym_strides;
  if (x.buffer >= 0)
    for (auto d : dims) {
      strides.push_back(x.strides[d]);
      sym_strides.push_back(x.stride_exprs()[d]);
    }
  Value v = view_of(c, x, [x, dims](const Index& idx) {
    Index src(idx.size());
    for (size_t i = 0; i < dims.size(); ++i) src[dims[i]] = idx[i];
    return x.at(src);
  }, strides, x.offset, sym_strides, x.offset_expr());
  if (x.buffer < 0 && !x.permuted_from) {
    v.permuted_from = std::make_shared<const Value>(x);
    v.perm = dims;
  }
  return v;
}

Value lower_expand(LoweringContext& c) {
  const Value& x = c.input(0);
  Shape strides;
  SymShape sym_strides;
  if (x.buffer >= 0) {
    const Shape& out = c.out_sizes();
    strides.assign(out.size(), 0);
    sym_strides.assign(out.size(), IndexExpr(0));
    size_t off = out.size() - x.sizes.size();
    for (size_t d = 0; d < x.sizes.size(); ++d) {
      strides[off + d] = x.sizes[d] == 1 ? 0 : x.strides[d];
      sym_strides[off + d] = x.sizes[d] == 1 ? IndexExpr(0) : x.stride_exprs()[d];
    }
  }
  return view_of(c, x, [x](const Index& idx) { return x.at(broadcast_index(idx, x.sizes)); }, strides, x.offset,
                 sym_strides, x.offset_expr());
}

int64_t wrap_dim(LoweringContext& c, int64_t dim, int64_t nd) {
  int64_t d = dim < 0 ? dim + nd : dim;
  if (d < 0 || d >= nd) c.fail(str("dim ", dim, " out of range"));
  return d;
}

Value lower_select(LoweringContext& c) {
  const Value& x = c.input(0);
  int64_t dim = wrap_dim(c, c.attrs().get<int64_t>("dim"), static_cast<int64_t>(x.sizes.size()));
  if (c.symbolic()) {
    // The index may be computed from sizes (x[:, n - 1]); a negative one counts from the end.
    IndexExpr index = c.attr_exprs("index").at(0);
    if (c.hint(index) < 0) index = simplify(index + x.size(static_cast<size_t>(dim)));
    SymShape strides;
    IndexExpr offset = x.offset_expr();
    if (x.buffer >= 0) {
      strides = x.stride_exprs();
      offset = simplify(offset + index * strides[static_cast<size_t>(dim)]);
      strides.erase(strides.begin() + dim);
    }
    return view_of(c, x, [x, dim, index](const Index& idx) {
      Index src(idx.begin(), idx.end());
      src.insert(src.begin() + dim, index);
      return x.at(src);
    }, {}, 0, strides, offset);
  }
  int64_t index = c.attrs().get<int64_t>("index");
  if (index < 0) index += x.sizes[dim];
  Shape strides;
  int64_t offset = x.offset;
  if (x.buffer >= 0) {
    strides = x.strides;
    offset += index * strides[dim];
    strides.erase(strides.begin() + dim);
  }
  return view_of(c, x, [x, dim, index](const Index& idx) {
    Index src(idx.begin(), idx.end());
    src.insert(src.begin() + dim, IndexExpr(index));
    return x.at(src);
  }, strides, offset);
}

Value lower_slice(LoweringContext& c) {
  const Value& x = c.input(0);
  int64_t dim = wrap_dim(c, c.attrs().get<int64_t>("dim"), static_cast<int64_t>(x.sizes.size()));
  int64_t step = c.attrs().get_or<int64_t>("step", 1);
  // start after PyTorch's clamping into [0, size].
  const AttrValue* sv = c.attrs().find("start");
  if (c.symbolic()) {
    // Only the start matters for the index (the result's extent is the graph's):
    // clamped into [0, size] as PyTorch does.
    IndexExpr start = 0;
    if (sv && std::holds_alternative<int64_t>(*sv)) {
      start = c.attr_exprs("start").at(0);
      const IndexExpr size = x.size(static_cast<size_t>(dim));
      if (c.hint(start) < 0) start = max(IndexExpr(0), start + size);
      start = simplify(min(start, size));
    }
    SymShape strides;
    IndexExpr offset = x.offset_expr();
    if (x.buffer >= 0) {
      strides = x.stride_exprs();
      offset = simplify(offset + start * strides[static_cast<size_t>(dim)]);
      strides[static_cast<size_t>(dim)] = simplify(strides[static_cast<size_t>(dim)] * step);
    }
    return view_of(c, x, [x, dim, start, step](const Index& idx) {
      Index src = idx;
      src[dim] = start + idx[dim] * step;
      return x.at(src);
    }, {}, 0, strides, offset);
  }
  int64_t start = 0;
  if (sv && std::holds_alternative<int64_t>(*sv)) start = std::get<int64_t>(*sv);
  if (start < 0) start += x.sizes[dim];
  start = std::max<int64_t>(0, std::min<int64_t>(start, x.sizes[dim]));
  Shape strides;
  int64_t offset = x.offset;
  if (x.buffer >= 0) {
    strides = x.strides;
    offset += start * strides[dim];
    strides[dim] *= step;
  }
  return view_of(c, x, [x, dim, start, step](const Index& idx) {
    Index src = idx;
    src[dim] = IndexExpr(start) + idx[dim] * step;
    return x.at(src);
  }, strides, offset);
}

// unfold: output (..., k at dim, ..., j last) reads x at k * step + j along dim.
Value lower_unfold(LoweringContext& c) {
  const Value& x = c.input(0);
  const int64_t nd = static_cast<int64_t>(x.sizes.size());
  if (nd == 0) c.fail("unfold of a 0-d value");
  const int64_t dim = wrap_dim(c, c.attrs().get<int64_t>("dimension"), nd);
  const int64_t step = c.attrs().get<int64_t>("step");
  auto at = [x, dim, step](const Index& idx) {
    Index src(idx.begin(), idx.end() - 1);
    src[static_cast<size_t>(dim)] = idx[static_cast<size_t>(dim)] * step + idx.back();
    return x.at(src);
  };
  const auto d = static_cast<size_t>(dim);
  if (c.symbolic()) {
    SymShape strides;
    if (x.buffer >= 0) {
      strides = x.stride_exprs();
      strides.push_back(strides[d]);
      strides[d] = simplify(strides[d] * step);
    }
    return view_of(c, x, at, {}, 0, strides, x.offset_expr());
  }
  Shape strides;
  if (x.buffer >= 0) {
    strides = x.strides;
    strides.push_back(strides[d]);
    strides[d] *= step;
  }
  return view_of(c, x, at, strides, x.offset);
}

// A reshape: the flat (row-major) position is kept. A contiguous buffer stays
// a buffer view; anything else is read through the flat index.
Value lower_view(LoweringContext& c) {
  const Value& x = c.input(0);
  if (c.symbolic()) {
    const SymShape out = c.out_size_exprs(), in = x.size_exprs();
    const SymShape out_c = sym_contiguous_strides(out), in_c = sym_contiguous_strides(in);
    if (x.buffer >= 0) {
      const SymShape xs = x.stride_exprs();
      bool contiguous = true;
      for (size_t d = 0; d < in.size(); ++d)
        contiguous = contiguous && (x.sizes[d] <= 1 || simplify(xs[d]) == simplify(in_c[d]));
      if (contiguous) return c.from_buffer_exprs(x.buffer, out, out_c, x.dtype, x.offset_expr());
    }
    Value v = c.pointwise([x, out_c, in_c, in](const Index& idx) {
      IndexExpr flat = linear_index(idx, out_c);
      Index src(in.size());
      for (size_t d = 0; d < in.size(); ++d)
        src[d] = x.sizes[d] <= 1 ? IndexExpr(0) : mod(floordiv(flat, in_c[d]), in[d]);
      return x.at(src);
    });
    v.reshaped_from = x.reshaped_from ? x.reshaped_from : std::make_shared<const Value>(x);
    return v;
  }
  const Shape& out = c.out_sizes();
  Shape out_c = contiguous_strides(out), in_c = contiguous_strides(x.sizes);
  if (x.buffer >= 0) {
    bool contiguous = true;
    for (size_t d = 0; d < x.sizes.size(); ++d) contiguous = contiguous && (x.sizes[d] <= 1 || x.strides[d] == in_c[d]);
    if (contiguous) return LoweringContext::from_buffer(x.buffer, out, out_c, x.dtype, x.offset);
  }
  Value v = c.pointwise([x, out_c, in_c](const Index& idx) {
    IndexExpr flat = linear_index(idx, out_c);
    Index src(x.sizes.size());
    for (size_t d = 0; d < x.sizes.size(); ++d)
      src[d] = x.sizes[d] <= 1 ? IndexExpr(0) : mod(floordiv(flat, in_c[d]), x.sizes[d]);
    return x.at(src);
  });
  v.reshaped_from = x.reshaped_from ? x.reshaped_from : std::make_shared<const Value>(x);
  return v;
}

}  // namespace

void register_view_lowerings(LoweringTable& t) {
  t["permute"] = lower_permute;
  t["expand"] = lower_expand;
  t["select"] = lower_select;
  t["slice"] = lower_slice;
  t["unfold"] = lower_unfold;
  t["view"] = lower_view;
}

}  // namespace tp::stax
