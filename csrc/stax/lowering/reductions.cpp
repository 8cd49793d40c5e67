// Reduction lowerings: a compute node that folds its body over the reduced
// dims and writes a temp buffer (contiguous over the kept dims); consumers
// read that buffer. any/all are max/min over the values as bool (false < true).
#include "stax/lowering/families.h"

namespace tp::stax {
using namespace tp::stax::ir;

namespace {

LoweringFn reduction(ReduceOp op) {
  return [op](LoweringContext& c) {
    const Value& x = c.input(0);
    const DType out_dtype = c.out_dtype();
    const Shape& out_sizes = c.out_sizes();
    auto dims = c.attrs().get_or<std::vector<int64_t>>("dim", {});  // None (absent) = all dims
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
    for (int64_t d = 0; d < nd; ++d) {
      if (reduced[d]) {
        if (x.sizes[d] == 1) { src[d] = 0; continue; }
        IndexExpr r = c.new_var("r");
        n.rvars.push_back(r);
        n.reduce_ranges.push_back(x.sizes[d]);
        src[d] = r;
      } else {
        IndexExpr i = x.sizes[d] == 1 ? IndexExpr(0) : c.new_var("i");
        src[d] = i;
        kept.push_back(x.sizes[d]);
        kept_idx.push_back(i);
      }
    }
    for (size_t d = 0; d < kept.size(); ++d)
      if (kept[d] != 1) { n.ranges.push_back(kept[d]); n.vars.push_back(kept_idx[d]); }
    n.body = cast(x.at(src), out_dtype);
    n.store_index = linear_index(n.vars, contiguous_strides(n.ranges));
    // out_sizes already reflects keepdim: with or without the size-1 dims the layout is the same.
    Shape strides = contiguous_strides(out_sizes);
    n.out_buffer = c.add_buffer(BufferKind::Temp, "buf", out_dtype, out_sizes, strides, -1);
    int buf = n.out_buffer;
    c.add_compute_node(std::move(n));
    return LoweringContext::from_buffer(buf, out_sizes, strides, out_dtype);
  };
}

}  // namespace

void register_reduction_lowerings(LoweringTable& t) {
  t["sum"] = reduction(ReduceOp::Sum);
  t["amax"] = reduction(ReduceOp::Max);
  t["amin"] = reduction(ReduceOp::Min);
  t["any"] = reduction(ReduceOp::Max);
  t["all"] = reduction(ReduceOp::Min);
}

}  // namespace tp::stax
