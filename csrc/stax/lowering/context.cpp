#include "stax/lowering/context.h"

#include <cstdio>
#include <cstdlib>

namespace tp::stax {
using namespace tp::stax::ir;

namespace {
bool debug_enabled() {
  const char* v = std::getenv("TP_STAX_LOWER_DEBUG");
  return v && *v && std::string(v) != "0";
}
}  // namespace

void cannot_lower(const graph::Node* n, const std::string& why) {
  std::string msg = str("Stax cannot lower operator '", n->target ? n->target->name : graph::opcode_name(n->opcode),
                        "' (node ", n->name, ", ", dtype_name(n->meta.dtype), shape_str(n->meta.sizes), "): ", why);
  if (debug_enabled()) std::fprintf(stderr, "[TP_STAX_LOWER_DEBUG] %s\n", msg.c_str());
  throw BackendError(msg);
}

int LoweringContext::check_code(const std::string& message, bool value_error, bool with_value) {
  // The CUDA printer (the only target with 16-bit buffers) has no status word
  // yet: a rule with a checked index declines there, and the operator runs as
  // an extern call of its eager CUDA kernel, which checks on the device
  // (embedding, index_select: cuda/index_kernels.cpp).
  if (region_.cuda) fail("checked indexing in a CUDA region (an extern call of the eager kernel instead)");
  LoopProgram& prog = region_.program;
  if (prog.status_buffer < 0) prog.status_buffer = add_buffer(BufferKind::Status, "status", DType::Int64, {1}, {1}, -1);
  const LoopProgram::Check check{message, value_error, with_value};
  int code = 0;
  for (size_t k = 0; k < prog.checks.size() && !code; ++k)
    if (prog.checks[k] == check) code = static_cast<int>(k) + 1;
  if (!code) {
    prog.checks.push_back(check);
    code = static_cast<int>(prog.checks.size());
  }
  return code;
}

int64_t LoweredRegion::hint(const IndexExpr& e) const {
  if (e.is_const()) return e.const_value();
  std::unordered_map<int, int64_t> at;
  for (size_t k = 0; k < symbols.size(); ++k) at[size_var_id(static_cast<int>(k))] = symbols[k].hint;
  return evaluate(e, at);
}

SymShape LoweringContext::out_sym_sizes() const {
  // A multi-result node's first result (its `meta`) when only output_sym_sizes is given.
  const SymShape& s = node_->sym_sizes.empty() && !node_->output_sym_sizes.empty() ? node_->output_sym_sizes[0]
                                                                                    : node_->sym_sizes;
  if (all_const(s)) return {};
  return s;
}

SymShape LoweringContext::out_size_exprs() const {
  SymShape s = out_sym_sizes();
  if (s.empty()) s.assign(node_->meta.sizes.begin(), node_->meta.sizes.end());
  return s;
}

bool LoweringContext::symbolic() const {
  if (region_.symbols.empty()) return false;
  for (auto& v : inputs_)
    if (v.symbolic()) return true;
  if (!all_const(node_->sym_sizes)) return true;
  for (auto& s : node_->output_sym_sizes)
    if (!all_const(s)) return true;
  for (auto& [name, s] : node_->sym_attrs)
    if (!all_const(s)) return true;
  return false;
}

std::vector<IndexExpr> LoweringContext::attr_exprs(const std::string& name) const {
  if (auto it = node_->sym_attrs.find(name); it != node_->sym_attrs.end()) return it->second;
  std::vector<IndexExpr> out;
  const AttrValue* v = attrs().find(name.c_str());
  if (!v) return out;
  if (auto* one = std::get_if<int64_t>(v)) out.push_back(IndexExpr(*one));
  else if (auto* many = std::get_if<std::vector<int64_t>>(v))
    for (auto x : *many) out.push_back(IndexExpr(x));
  return out;
}

void LoweringContext::fail(const std::string& why) const { cannot_lower(node_, why); }

Value LoweringContext::pointwise(std::function<Expr(const Index&)> at) const {
  Value v;
  v.sizes = out_sizes();
  v.sym_sizes = out_sym_sizes();
  v.dtype = out_dtype();
  v.at = std::move(at);
  return v;
}

Value LoweringContext::from_buffer_exprs(int buf, const SymShape& sizes, const SymShape& strides, DType dtype,
                                   const IndexExpr& offset) const {
  if (all_const(sizes) && all_const(strides) && offset.is_const()) {
    Shape sz, st;
    for (auto& e : sizes) sz.push_back(e.const_value());
    for (auto& e : strides) st.push_back(e.const_value());
    return from_buffer(buf, sz, st, dtype, offset.const_value());
  }
  Value v;
  for (auto& e : sizes) v.sizes.push_back(hint(e));
  for (auto& e : strides) v.strides.push_back(hint(e));
  v.offset = hint(offset);
  v.sym_sizes = sizes;
  v.sym_strides = strides;
  v.sym_offset = offset;
  v.dtype = dtype;
  v.buffer = buf;
  v.at = [buf, strides, dtype, offset](const Index& idx) {
    return load(buf, offset + linear_index(idx, strides), dtype);
  };
  return v;
}

int LoweringContext::add_buffer(BufferKind kind, const std::string& prefix, DType dtype, const SymShape& sizes,
                                int arg_index) {
  Shape hints;
  for (auto& e : sizes) hints.push_back(hint(e));
  int b = add_buffer(kind, prefix, dtype, hints, tp::contiguous_strides(hints), arg_index);
  if (!all_const(sizes)) region_.program.buffers[static_cast<size_t>(b)].size_exprs = sizes;
  return b;
}

Value LoweringContext::from_buffer(int buf, const Shape& sizes, const Shape& strides, DType dtype, int64_t offset) {
  Value v;
  v.sizes = sizes;
  v.dtype = dtype;
  v.buffer = buf;
  v.strides = strides;
  v.offset = offset;
  v.at = [buf, strides, dtype, offset](const Index& idx) {
    return load(buf, IndexExpr(offset) + linear_index(idx, strides), dtype);
  };
  return v;
}

int LoweringContext::add_buffer(BufferKind kind, const std::string& prefix, DType dtype, const Shape& sizes,
                                const Shape& strides, int arg_index) {
  LoopProgram& prog = region_.program;
  Buffer b;
  b.id = static_cast<int>(prog.buffers.size());
  int count = 0;
  for (auto& o : prog.buffers) count += o.kind == kind;
  b.name = prefix + std::to_string(count);
  b.kind = kind;
  b.dtype = dtype;
  b.sizes = sizes;
  b.strides = strides;
  b.numel = numel(sizes);
  b.arg_index = arg_index;
  prog.buffers.push_back(b);
  return b.id;
}

int LoweringContext::add_compute_node(ComputeNode n) {
  LoopProgram& prog = region_.program;
  // Symbolic extents only where some extent is symbolic (a static node stays exactly as before).
  if (all_const(n.range_exprs)) n.range_exprs.clear();
  if (all_const(n.reduce_range_exprs)) n.reduce_range_exprs.clear();
  n.id = static_cast<int>(prog.nodes.size());
  if (n.origin.empty()) n.origin = origin_;
  prog.nodes.push_back(std::move(n));
  return static_cast<int>(prog.nodes.size()) - 1;
}

int LoweringContext::add_extern(ExternCall call) {
  LoopProgram& prog = region_.program;
  call.id = static_cast<int>(prog.externs.size());
  call.op = op();
  call.before_node = static_cast<int>(prog.nodes.size());
  if (call.origin.empty()) call.origin = origin_;
  std::string printed;
  for (auto& [name, value] : attrs().items()) printed += str(printed.empty() ? "" : ", ", name, "=", attr_repr(value));
  call.attrs = printed;
  if (symbolic())
    for (auto& [name, e] : node_->sym_attrs)
      if (!all_const(e)) call.sym_attrs.emplace_back(name, e);
  prog.externs.push_back(std::move(call));
  region_.extern_attrs.push_back(attrs());
  return static_cast<int>(prog.externs.size()) - 1;
}

int LoweringContext::realize(const Value& v, BufferKind kind, int arg_index, const std::string& origin) {
  if (v.symbolic()) {
    int buf = add_buffer(kind, kind == BufferKind::Output ? "out" : "buf", v.dtype, v.sym_sizes, arg_index);
    // A reshape of a computed value is written by its source's loops (value.h):
    // both are contiguous, so the flat positions agree.
    const Value& src = v.reshaped_from && v.reshaped_from->symbolic() ? *v.reshaped_from : v;
    SymShape strides = sym_contiguous_strides(src.sym_sizes);
    ComputeNode n;
    n.origin = origin;
    n.out_buffer = buf;
    Index idx;
    for (size_t d = 0; d < src.sizes.size(); ++d) {
      const IndexExpr& e = src.sym_sizes[d];
      if (e.is_const() && e.const_value() == 1) { idx.push_back(IndexExpr(0)); continue; }
      idx.push_back(new_var("i"));
      n.ranges.push_back(src.sizes[d]);
      n.range_exprs.push_back(e);
      n.vars.push_back(idx.back());
    }
    n.body = src.at(idx);
    n.store_index = linear_index(idx, strides);
    add_compute_node(std::move(n));
    return buf;
  }
  int buf = add_buffer(kind, kind == BufferKind::Output ? "out" : "buf", v.dtype, v.sizes, contiguous_strides(v.sizes),
                       arg_index);
  const Value& src = v.reshaped_from && !v.reshaped_from->symbolic() ? *v.reshaped_from : v;
  ComputeNode n;
  n.origin = origin;
  n.out_buffer = buf;
  // Size-1 dims get no loop: their index is the constant 0.
  Index idx;
  for (size_t d = 0; d < src.sizes.size(); ++d) {
    if (src.sizes[d] == 1) { idx.push_back(IndexExpr(0)); continue; }
    idx.push_back(new_var("i"));
    n.ranges.push_back(src.sizes[d]);
    n.vars.push_back(idx.back());
  }
  n.body = src.at(idx);
  n.store_index = linear_index(idx, contiguous_strides(src.sizes));
  add_compute_node(std::move(n));
  return buf;
}

}  // namespace tp::stax

namespace tp::stax {

namespace {
const graph::Node* operand0_node(const graph::Node& n) {
  if (n.args.empty()) return nullptr;
  auto* p = std::get_if<graph::Node*>(&n.args[0]);
  return p ? *p : nullptr;
}
}  // namespace

void LoweringContext::remember_mean(const std::vector<bool>& reduced, bool keepdim, const Value& mean) {
  if (const graph::Node* in = operand0_node(*node_))
    region_.known_means[{in, reduced, keepdim}] = std::make_shared<const Value>(mean);
}

const Value* LoweringContext::known_mean(const std::vector<bool>& reduced, bool keepdim) const {
  const graph::Node* in = operand0_node(*node_);
  if (!in) return nullptr;
  auto it = region_.known_means.find({in, reduced, keepdim});
  return it == region_.known_means.end() ? nullptr : it->second.get();
}

}  // namespace tp::stax
