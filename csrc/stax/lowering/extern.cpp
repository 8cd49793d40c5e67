// Extern lowerings (issue 8, item 4): an operator that has an eager or library
// kernel but no loop form becomes an ExternCall on buffers. Its operands are
// read in place when they are strided views of buffers (a transposed weight is
// passed with its strides, not copied); any other operand is realized into a
// temp buffer by a compute node, which the scheduler fuses with the work that
// produces it (the prologue). Its results are buffers that later kernels read
// (the epilogue fuses everything pointwise after it).
//
// GEMMs (mm, bmm, matmul of matrices, addmm, baddbmm; linear decomposes into
// transpose + addmm) call BLAS directly: each matrix operand must be row- or
// column-major with a leading dimension, otherwise it is realized contiguous
// first; addmm's bias is broadcast into the output before the GEMM adds into it
// with beta, as PyTorch does.
#include "stax/lowering/extern.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "ops/registry.h"

namespace tp::stax {
using namespace tp::stax::ir;

namespace {

bool blas_layout(const Value& v);

// The operand as a buffer view: in place when it already is one, otherwise
// written into a contiguous temp buffer by a compute node. `readable`, when
// given, says which layouts the caller can read: a permuted value is written
// in its source's order (read through permuted strides) only if the permuted
// view passes it, otherwise contiguously. Deciding before any node is made
// matters: a source realized and then passed over (a GEMM operand whose
// permutation leaves no unit stride in its last two dims, tanh(x).permute(2,
// 0, 1) @ w) left a compute node writing a buffer nobody reads, so no buffer
// slot was planned for it and the generated unit did not compile.
Value as_buffer_view(LoweringContext& c, size_t i, bool (*readable)(const Value&) = nullptr) {
  const Value& v = c.input(i);
  if (v.buffer >= 0) return v;
  // The same graph value passed twice (x @ x) is written once.
  const auto& args = c.node().args;
  for (auto& [j, b] : c.realized())
    if (args.at(j) == args.at(i)) return b;
  Value b;
  if (v.permuted_from) {
    // A permutation of a computed value (a transposed gradient): its source is
    // written contiguously and read through permuted strides.
    const Value& src = *v.permuted_from;
    auto view_of = [&](int buf) {
      if (src.symbolic()) {
        SymShape base = sym_contiguous_strides(src.sym_sizes), strides;
        for (auto d : v.perm) strides.push_back(base[static_cast<size_t>(d)]);
        return c.from_buffer_exprs(buf, v.size_exprs(), strides, v.dtype);
      }
      Shape base = contiguous_strides(src.sizes), strides;
      for (auto d : v.perm) strides.push_back(base[static_cast<size_t>(d)]);
      return LoweringContext::from_buffer(buf, v.sizes, strides, v.dtype);
    };
    // (buffer id 0 stands in for the one not made yet: only the layout is judged)
    if (readable == nullptr || readable(view_of(0))) {
      b = view_of(c.realize(src, BufferKind::Temp, -1, c.origin()));
      c.set_realized(i, b);
      return b;
    }
  }
  int buf = c.realize(v, BufferKind::Temp, -1, c.origin());
  b = v.symbolic() ? c.from_contiguous_buffer(buf, v.sym_sizes, v.dtype)
                   : LoweringContext::from_buffer(buf, v.sizes, contiguous_strides(v.sizes), v.dtype);
  c.set_realized(i, b);
  return b;
}

ExternOperand buffer_operand(const Value& v) {
  ExternOperand o;
  o.kind = ExternOperand::Kind::Buffer;
  o.buffer = v.buffer;
  o.sizes = v.sizes;
  o.strides = v.strides;
  o.offset = v.offset;
  o.dtype = v.dtype;
  if (v.symbolic()) {
    o.size_exprs = v.sym_sizes;
    o.stride_exprs = v.sym_strides;
    o.offset_expr = v.sym_offset;
  }
  return o;
}

// Whether `strides` lay the elements of `sizes` out densely without overlap
// (some permutation of a contiguous layout): then a kernel result in that
// layout can be adopted as the buffer.
bool dense_layout(const Shape& sizes, const Shape& strides) {
  if (strides.size() != sizes.size()) return false;
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return strides[a] < strides[b]; });
  int64_t expect = 1;
  for (size_t d : order) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expect) return false;
    expect *= sizes[d];
  }
  return true;
}

// Output buffers for the node's results, in the layout eager gave them during
// capture when that layout is dense (so the kernel's result can be adopted),
// contiguous otherwise. Returns the Values reading them.
std::vector<Value> add_results(LoweringContext& c, ExternCall& call) {
  std::vector<TensorMeta> metas = c.node().output_metas;
  if (metas.empty()) metas.push_back(c.node().meta);
  std::vector<Value> out;
  for (size_t r = 0; r < metas.size(); ++r) {
    const TensorMeta& m = metas[r];
    if (!region_dtype(m.dtype, c.region().half_floats))  // generated kernels would read this buffer
      c.fail(str("a result of dtype ", dtype_name(m.dtype), ", which generated kernels do not support yet"));
    if (c.symbolic()) {  // planned contiguous at the call's sizes
      const graph::Node& n = c.node();
      // A node a backend pass made without symbolic sizes: refused (the
      // caller compiles per size), never read out of range.
      if (!n.output_metas.empty() && r >= n.output_sym_sizes.size())
        c.fail("a result without symbolic sizes in a graph with symbolic shapes");
      SymShape sizes = n.output_metas.empty() ? n.sym_sizes : n.output_sym_sizes[r];
      if (sizes.size() != m.sizes.size()) c.fail("a result without symbolic sizes in a graph with symbolic shapes");
      int buf = c.add_buffer(BufferKind::Temp, "buf", m.dtype, sizes, -1);
      call.outputs.push_back(buf);
      out.push_back(c.from_contiguous_buffer(buf, sizes, m.dtype));
      continue;
    }
    Shape strides = dense_layout(m.sizes, m.strides) ? m.strides : contiguous_strides(m.sizes);
    int buf = c.add_buffer(BufferKind::Temp, "buf", m.dtype, m.sizes, strides, -1);
    call.outputs.push_back(buf);
    out.push_back(LoweringContext::from_buffer(buf, m.sizes, strides, m.dtype));
  }
  return out;
}

Value finish(LoweringContext& c, ExternCall call) {
  std::vector<Value> results = add_results(c, call);
  c.add_extern(std::move(call));
  Value first = results.at(0);
  if (results.size() > 1) c.set_results(std::move(results));
  return first;
}

// The generic extern: every operand in place (eager kernels take any strides).
Value kernel_extern(LoweringContext& c) {
  ExternCall call;
  call.kind = ExternKind::Kernel;
  for (size_t i = 0; i < c.inputs().size(); ++i) {
    ExternOperand o;
    if (c.absent(i)) {
      o.kind = ExternOperand::Kind::Absent;
    } else if (c.constant(i)) {
      o.kind = ExternOperand::Kind::Number;
      o.value = *c.constant(i);
      o.dtype = c.input(i).dtype;
    } else {
      o = buffer_operand(as_buffer_view(c, i));
    }
    call.inputs.push_back(std::move(o));
  }
  return finish(c, std::move(call));
}

// conv2d in a CUDA region: the library call convolves without the bias and
// the bias joins the pointwise tail that reads the result (batch norm, an
// activation), instead of a separate pass over the output. The eager CUDA
// kernels add the bias after the convolution in the output type, so this is
// the same arithmetic; on the CPU the bias seeds the GEMM's accumulator, so
// CPU regions keep it inside the call (compiled equals eager bit for bit).
// `LoweredRegion::cuda` marks a region lowered for the CUDA printer.
Value conv_extern(LoweringContext& c) {
  if (!c.region().cuda || c.inputs().size() != 3 || c.absent(2) || c.constant(2)) return kernel_extern(c);
  ExternCall ext;
  ext.kind = ExternKind::Kernel;
  for (size_t i = 0; i < 2; ++i) ext.inputs.push_back(buffer_operand(as_buffer_view(c, i)));
  ExternOperand none;
  none.kind = ExternOperand::Kind::Absent;
  ext.inputs.push_back(none);
  const Value y = finish(c, std::move(ext));
  const DType dt = c.out_dtype();
  return c.pointwise([y, b = c.input(2), dt](const Index& idx) {
    // The channel is the third dim from the end ([N,] O, Ho, Wo).
    return call(CallOp::Add, {y.at(idx), cast(b.at(Index{idx[idx.size() - 3]}), dt)}, dt);
  });
}

// Whether BLAS can read the last two dims of v in place: row-major (unit
// column stride, row stride >= columns) or column-major (its transpose).
bool blas_layout(const Value& v) {
  if (v.buffer < 0 || v.sizes.size() < 2) return false;
  if (v.symbolic()) {
    // Proved for every size: a unit stride, and the other stride the other
    // extent exactly (a contiguous matrix or its transpose) or a constant
    // bound by a constant extent; leading dims of non-negative constant stride.
    size_t nd = v.sizes.size();
    const SymShape st = v.stride_exprs();
    IndexExpr rows = simplify(v.size(nd - 2)), cols = simplify(v.size(nd - 1));
    IndexExpr sr = simplify(st[nd - 2]), sc = simplify(st[nd - 1]);
    auto one = [](const IndexExpr& e) { return e.is_const() && e.const_value() == 1; };
    auto covers = [](const IndexExpr& stride, const IndexExpr& extent) {
      if (stride == extent) return true;
      return stride.is_const() && extent.is_const() && stride.const_value() >= std::max<int64_t>(extent.const_value(), 1);
    };
    bool row_major = (one(cols) || one(sc)) && (one(rows) || covers(sr, cols));
    bool col_major = (one(rows) || one(sr)) && (one(cols) || covers(sc, rows));
    for (size_t d = 0; d + 2 < nd; ++d)
      if (v.strides[d] < 0) return false;
    return row_major || col_major;
  }
  size_t nd = v.sizes.size();
  int64_t rows = v.sizes[nd - 2], cols = v.sizes[nd - 1];
  int64_t sr = v.strides[nd - 2], sc = v.strides[nd - 1];
  bool row_major = (cols == 1 || sc == 1) && (rows == 1 || sr >= std::max<int64_t>(cols, 1));
  bool col_major = (rows == 1 || sr == 1) && (cols == 1 || sc >= std::max<int64_t>(rows, 1));
  for (size_t d = 0; d + 2 < nd; ++d)
    if (v.strides[d] < 0) return false;
  return row_major || col_major;
}

// mm / bmm / matmul / addmm / baddbmm. `bias_first`: operand 0 is added (addmm, baddbmm).
LoweringFn gemm(bool bias_first) {
  return [bias_first](LoweringContext& c) -> Value {
    const size_t a = bias_first ? 1 : 0;
    DType dt = c.out_dtype();
    bool floating = dt == DType::Float32 || dt == DType::Float64;
    bool matrices = c.inputs().size() == a + 2 && !c.absent(a) && !c.absent(a + 1) && !c.constant(a) &&
                    !c.constant(a + 1) && c.input(a).sizes.size() >= 2 && c.input(a + 1).sizes.size() >= 2 &&
                    c.input(a).dtype == dt && c.input(a + 1).dtype == dt;
    if (bias_first) matrices = matrices && !c.absent(0) && !c.constant(0) && c.input(0).dtype == dt;
    // Vectors (matmul of 1-D operands), integer GEMMs, mixed dtypes: the eager kernel.
    if (!floating || !matrices) return kernel_extern(c);
    ExternCall call;
    call.kind = ExternKind::Gemm;
    if (bias_first) call.inputs.push_back(buffer_operand(as_buffer_view(c, 0)));
    for (size_t i = a; i < a + 2; ++i) {
      const Value& v = c.input(i);
      Value in_place = blas_layout(v) ? v : as_buffer_view(c, i, blas_layout);
      if (!blas_layout(in_place)) {  // a view BLAS cannot read (e.g. stride 2 in both dims): copy it
        int buf = c.realize(v, BufferKind::Temp, -1, c.origin());
        in_place = v.symbolic() ? c.from_contiguous_buffer(buf, v.sym_sizes, v.dtype)
                                : LoweringContext::from_buffer(buf, v.sizes, contiguous_strides(v.sizes), v.dtype);
      }
      call.inputs.push_back(buffer_operand(in_place));
    }
    // The result is written by BLAS row-major, so it is planned contiguous.
    if (c.symbolic()) {
      int buf = c.add_buffer(BufferKind::Temp, "buf", dt, c.out_size_exprs(), -1);
      call.outputs.push_back(buf);
      c.add_extern(std::move(call));
      return c.from_contiguous_buffer(buf, c.out_size_exprs(), dt);
    }
    const Shape& sizes = c.out_sizes();
    Shape strides = contiguous_strides(sizes);
    int buf = c.add_buffer(BufferKind::Temp, "buf", dt, sizes, strides, -1);
    call.outputs.push_back(buf);
    c.add_extern(std::move(call));
    return LoweringContext::from_buffer(buf, sizes, strides, dt);
  };
}

const std::set<std::string>& extern_ops() {
  static const std::set<std::string> ops = {"mm", "bmm", "matmul", "addmm", "baddbmm", "conv2d",
                                            "sort", "argsort", "topk"};
  return ops;
}

}  // namespace

Value lower_as_extern(LoweringContext& c) {
  const OpDef& op = *c.node().target;
  if (op.has(kRandom)) c.fail("a random operator cannot run inside a compiled region");
  // The caller gave the size (F.one_hot(y, 10), repeat_interleave's output_size): the
  // result's shape is known, as the tracer's size gate knows (no gate recorded).
  const Attrs& attrs = c.node().attrs;
  const std::string name = op.name;
  const bool sized = (name == "one_hot" && attrs.has("num_classes") && attrs.get_int("num_classes") >= 0) ||
                     (name == "repeat_interleave.Tensor" && attrs.has("output_size") &&
                      !attrs.is_none("output_size"));
  if (op.has(kNondeterministicShape) && !sized)
    c.fail("its result's shape depends on the data, so no buffer can be planned for it");
  if (op.has(kInplace)) c.fail("an in-place operator inside a functional region");
  if (op.has(kDeviceMove)) c.fail("a move between devices: a compiled region's buffers live on one device");
  if (!op.cpu) c.fail("no lowering rule and no eager kernel to call");
  return kernel_extern(c);
}

bool is_extern_lowering(const std::string& op) { return extern_ops().count(op) > 0; }

void register_extern_lowerings(LoweringTable& t) {
  t["mm"] = gemm(false);
  t["bmm"] = gemm(false);
  t["matmul"] = gemm(false);
  t["addmm"] = gemm(true);
  t["baddbmm"] = gemm(true);
  // Library kernels whose operands are read in place with any strides; conv2d's
  // absent bias is an Absent operand (a CUDA region adds a present one in the
  // tail, conv_extern); sort/topk have two results (values, indices).
  for (const char* op : {"sort", "argsort", "topk"}) t[op] = kernel_extern;
  t["conv2d"] = conv_extern;
}

}  // namespace tp::stax
