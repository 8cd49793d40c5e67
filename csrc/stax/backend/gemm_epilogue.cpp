// GEMM epilogue fusion for CUDA regions: see gemm_epilogue.h.
#include "stax/backend/gemm_epilogue.h"

#include "core/error.h"
#include "ops/api_math.h"
#include "ops/api_nn_linalg.h"
#include "ops/ops.h"
#include "passes/passes.h"

namespace tp::stax {
using graph::Node;
using graph::Opcode;

namespace {

std::vector<TensorMeta> epilogue_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  TP_CHECK(in.size() == 3, ValueError, op.name, ": expected 3 tensor arguments, got ", in.size());
  const TensorMeta &a = in[1], &b = in[2];
  TP_CHECK(a.sizes.size() == 2 && b.sizes.size() == 2 && a.sizes[1] == b.sizes[0], ValueError, op.name,
           ": expected matrices a [M, K] and b [K, N], got shapes ", shape_str(a.sizes), " and ", shape_str(b.sizes));
  TP_CHECK(a.dtype == b.dtype, TypeError, op.name, ": operands of dtypes ", dtype_name(a.dtype), " and ",
           dtype_name(b.dtype));
  if (in[0].defined)
    TP_CHECK(in[0].sizes == Shape{b.sizes[1]} && in[0].dtype == a.dtype, ValueError, op.name, ": bias of shape ",
             shape_str(in[0].sizes), " and dtype ", dtype_name(in[0].dtype), " for a result of width ", b.sizes[1]);
  const std::string& act = attrs.get_str("act");
  TP_CHECK(act == "none" || act == "relu" || act == "gelu_tanh", ValueError, op.name, ": unknown activation '", act,
           "'");
  return {TensorMeta::contiguous({a.sizes[0], b.sizes[1]}, a.dtype)};
}

// The reference: the unfused operators (CPU; the CUDA kernel is one cuBLASLt call).
std::vector<Tensor> epilogue_cpu(const OpDef&, const std::vector<Tensor>& in, const Attrs& attrs,
                                 const std::vector<TensorMeta>&) {
  Tensor r = ops::mm(in[1], in[2]);
  if (in[0].defined()) r = ops::add(r, in[0]);
  const std::string& act = attrs.get_str("act");
  if (act == "relu") r = ops::relu(r);
  else if (act == "gelu_tanh") r = ops::gelu(r, "tanh");
  return {r};
}

Node* node_arg(const Node* n, size_t i) {
  if (i >= n->args.size()) return nullptr;
  auto* p = std::get_if<Node*>(&n->args[i]);
  return p ? *p : nullptr;
}

bool scalar_is_one(const Node* n, const char* name) {
  return !n->attrs.has(name) || n->attrs.is_none(name) || n->attrs.get_scalar(name).to_double() == 1.0;
}

bool epilogue_dtype(DType t) { return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16; }

// The only user of n, when it has exactly one and n is not a region output.
Node* sole_user(const Node* n) {
  if (n->users.size() != 1) return nullptr;
  Node* u = n->users[0];
  return u->opcode == Opcode::CallFunction ? u : nullptr;
}

// A 1-D row of width N and dtype t (a tensor value, not a number).
bool bias_row(const Node* b, int64_t N, DType t) {
  return b && b->meta.sizes == Shape{N} && b->meta.dtype == t;
}

}  // namespace

const OpDef& gemm_epilogue_op() {
  static const OpDef& op = register_op({.name = "_gemm_epilogue", .num_inputs = 3, .infer = &epilogue_infer,
                                        .cpu = &epilogue_cpu});
  return op;
}

int fuse_gemm_epilogues(graph::Graph& g) {
  g.recompute_users();
  std::vector<Node*> gemms;
  for (auto& up : g.nodes()) {
    Node* n = up.get();
    if (n->opcode == Opcode::CallFunction && (n->is_op("mm") || n->is_op("matmul") || n->is_op("addmm")))
      gemms.push_back(n);
  }
  int fused = 0;
  for (Node* n : gemms) {
    const bool addmm = n->is_op("addmm");
    const size_t k = addmm ? 1 : 0;
    Node* a = node_arg(n, k);
    Node* b = node_arg(n, k + 1);
    const DType dt = n->meta.dtype;
    if (!a || !b || a->meta.sizes.size() != 2 || b->meta.sizes.size() != 2 || n->meta.sizes.size() != 2) continue;
    if (!epilogue_dtype(dt) || a->meta.dtype != dt || b->meta.dtype != dt) continue;
    const int64_t N = n->meta.sizes[1];
    Node* bias = nullptr;
    Node* last = n;  // the value the fused call replaces
    if (addmm) {
      bias = node_arg(n, 0);
      if (!bias_row(bias, N, dt) || !scalar_is_one(n, "beta") || !scalar_is_one(n, "alpha")) continue;
    } else if (Node* u = sole_user(n); u && u->is_op("add") && scalar_is_one(u, "alpha") && u->meta.dtype == dt &&
                                          u->meta.sizes == n->meta.sizes) {
      Node* other = node_arg(u, 0) == n ? node_arg(u, 1) : node_arg(u, 0);
      if (other != n && bias_row(other, N, dt)) {
        bias = other;
        last = u;
      }
    }
    // The activation, possibly behind a view that only splits the rows (a
    // linear layer on [B, T, C] is view -> addmm -> view): act(view(y)) = view(act(y)).
    std::string act = "none";
    Node* view = nullptr;
    Node* act_node = nullptr;
    Node* u = sole_user(last);
    if (u && (u->is_op("view") || u->is_op("reshape")) && u->meta.dtype == dt && !u->meta.sizes.empty() &&
        u->meta.sizes.back() == N) {
      view = u;
      u = sole_user(u);
    }
    if (u && u->meta.dtype == dt && u->meta.sizes == (view ? view : last)->meta.sizes) {
      if (u->is_op("relu")) act = "relu";
      else if (u->is_op("gelu") && u->attrs.has("approximate") && u->attrs.get_str("approximate") == "tanh")
        act = "gelu_tanh";
      if (act != "none") act_node = u;
    }
    // Nothing to gain: a bare product, or addmm alone (its eager kernel uses the bias epilogue already).
    if (act == "none" && (!bias || addmm)) continue;
    if (!act_node) view = nullptr;
    Attrs attrs;
    attrs.set("act", act);
    const Node* result = (act_node && !view) ? act_node : last;  // the 2-D value f computes
    TensorMeta meta = result->meta;
    meta.strides = contiguous_strides(meta.sizes);
    Node* f = g.insert_call_before(last, gemm_epilogue_op(), {static_cast<Node*>(bias), a, b}, attrs, meta);
    f->grad_enabled = (act_node ? act_node : last)->grad_enabled;
    if (view) {  // view(f) stands for act(view(y))
      g.replace_all_uses(last, f);
      g.replace_all_uses(act_node, view);
    } else {
      g.replace_all_uses(act_node ? act_node : last, f);
    }
    ++fused;
  }
  if (fused) {
    passes::eliminate_dead_code(g);
    g.recompute_users();
  }
  return fused;
}

}  // namespace tp::stax
