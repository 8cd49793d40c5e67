// GEMM epilogue fusion for CUDA regions: see gemm_epilogue.h.
#include "stax/backend/gemm_epilogue.h"

#include <cstdlib>
#include <unordered_map>

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

// _gemm_bgrad(a, b, *, act, keepdim) -> (a @ b, bias gradient): act
// "bias_grad_b" sums b over its rows (length N), "bias_grad_a" sums a over its
// columns (length M); keepdim gives the sum the shape [1, L].
std::vector<TensorMeta> bgrad_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  TP_CHECK(in.size() == 2, ValueError, op.name, ": expected 2 tensor arguments, got ", in.size());
  const TensorMeta &a = in[0], &b = in[1];
  TP_CHECK(a.sizes.size() == 2 && b.sizes.size() == 2 && a.sizes[1] == b.sizes[0], ValueError, op.name,
           ": expected matrices a [M, K] and b [K, N], got shapes ", shape_str(a.sizes), " and ", shape_str(b.sizes));
  TP_CHECK(a.dtype == b.dtype, TypeError, op.name, ": operands of dtypes ", dtype_name(a.dtype), " and ",
           dtype_name(b.dtype));
  const std::string& act = attrs.get_str("act");
  TP_CHECK(act == "bias_grad_a" || act == "bias_grad_b", ValueError, op.name, ": unknown epilogue '", act, "'");
  const int64_t L = act == "bias_grad_b" ? b.sizes[1] : a.sizes[0];
  TensorMeta r = TensorMeta::contiguous({a.sizes[0], b.sizes[1]}, a.dtype);
  TensorMeta g = TensorMeta::contiguous(attrs.get<bool>("keepdim") ? Shape{1, L} : Shape{L}, a.dtype);
  r.device = g.device = a.device;
  return {r, g};
}

std::vector<Tensor> bgrad_cpu(const OpDef&, const std::vector<Tensor>& in, const Attrs& attrs,
                              const std::vector<TensorMeta>&) {
  const bool of_b = attrs.get_str("act") == "bias_grad_b";
  const bool keep = attrs.get<bool>("keepdim");
  Tensor g = of_b ? ops::sum(in[1], {0}, keep) : ops::sum(in[0], {1}, false);
  if (!of_b && keep) g = ops::unsqueeze(g, 0);
  return {ops::mm(in[0], in[1]), g};
}

bool is_swap(const Node* n) {
  if (!n || !n->is_op("permute")) return false;
  auto dims = n->attrs.get<std::vector<int64_t>>("dims");
  return dims.size() == 2 && ((dims[0] == 1 && dims[1] == 0) || (dims[0] == -1 && dims[1] == -2));
}

// sum(G, dim=[0]) of a 2-D G: a bias gradient (the column sums).
bool column_sum(const Node* s, const Node* of) {
  if (!s->is_op("sum") || node_arg(s, 0) != of || of->meta.sizes.size() != 2) return false;
  if (s->attrs.has("dtype") && !s->attrs.is_none("dtype")) return false;
  if (!s->attrs.has("dim") || s->attrs.is_none("dim")) return false;
  auto dims = s->attrs.get<std::vector<int64_t>>("dim");
  return dims.size() == 1 && (dims[0] == 0 || dims[0] == -2) && s->meta.dtype == of->meta.dtype;
}

bool is_product(const Node* n) {
  return n && n->opcode == Opcode::CallFunction && (n->is_op("mm") || n->is_op("matmul")) && n->args.size() == 2 &&
         n->meta.sizes.size() == 2;
}

}  // namespace

bool backward_epilogues_enabled() {
  const char* v = std::getenv("TP_CUDA_BACKWARD_EPILOGUES");
  return !(v && std::string(v) == "0");
}

const OpDef& gemm_bgrad_op() {
  static const OpDef& op = register_op({.name = "_gemm_bgrad", .num_inputs = 2, .infer = &bgrad_infer,
                                        .cpu = &bgrad_cpu});
  return op;
}

int fuse_bias_gradients(graph::Graph& g) {
  g.recompute_users();
  std::vector<Node*> sums;
  for (auto& up : g.nodes())
    if (up->opcode == Opcode::CallFunction && up->is_op("sum")) sums.push_back(up.get());
  int fused = 0;
  for (Node* s : sums) {
    Node* G = node_arg(s, 0);
    if (!G || !column_sum(s, G) || !epilogue_dtype(G->meta.dtype)) continue;
    const DType dt = G->meta.dtype;
    std::unordered_map<const Node*, size_t> pos;
    for (size_t i = 0; i < g.nodes().size(); ++i) pos[g.nodes()[i].get()] = i;
    // The product reading G: x @ G (bias_grad_b), or G^T @ y (bias_grad_a);
    // x @ G whose only use is its transpose (a weight gradient, through an
    // identity view) becomes G^T @ x^T, the form cuBLASLt's BGRADB takes.
    Node *a = nullptr, *b = nullptr, *replaced = nullptr;
    const char* act = nullptr;
    bool transposed = false;
    for (Node* u : G->users) {
      if (is_product(u) && node_arg(u, 1) == G && node_arg(u, 0) && node_arg(u, 0)->meta.sizes.size() == 2) {
        a = node_arg(u, 0);
        b = G;
        replaced = u;
        act = "bias_grad_b";
        Node* t = sole_user(u);
        if (t && (t->is_op("view") || t->is_op("reshape")) && t->meta.sizes == u->meta.sizes) t = sole_user(t);
        if (is_swap(t)) {
          replaced = t;
          transposed = true;
          act = "bias_grad_a";
        }
        break;
      }
      if (is_swap(u))
        for (Node* p : u->users)
          if (is_product(p) && node_arg(p, 0) == u && node_arg(p, 1) && node_arg(p, 1)->meta.sizes.size() == 2) {
            a = u;
            b = node_arg(p, 1);
            replaced = p;
            act = "bias_grad_a";
          }
      if (replaced) break;
    }
    if (!replaced || a->meta.dtype != dt || b->meta.dtype != dt || replaced->meta.dtype != dt) continue;
    // Inserted before the first of the sum and the product: every operand must come earlier.
    Node* at = pos[s] < pos[replaced] ? s : replaced;
    if (pos.at(G) >= pos.at(at)) continue;
    // The other operand may be a view made after `at` (the transposed input of
    // a weight gradient): the same view, of an earlier value, is made at `at`.
    Node*& other = b == G ? a : b;
    if (pos.at(other) >= pos.at(at)) {
      Node* src = node_arg(other, 0);
      const bool view = other->is_op("permute") || other->is_op("view") || other->is_op("reshape");
      if (!view || !src || pos.at(src) >= pos.at(at) || other->args.size() != 1) continue;
      other = g.insert_call_before(at, *other->target, {src}, other->attrs, other->meta);
    }
    Attrs swap;
    swap.set("dims", std::vector<int64_t>{1, 0});
    auto transposed_meta = [](const TensorMeta& m) {
      TensorMeta t = m;
      std::swap(t.sizes[0], t.sizes[1]);
      std::swap(t.strides[0], t.strides[1]);
      return t;
    };
    if (transposed) {  // (x @ G)^T = G^T @ x^T
      Node* x = a;
      a = g.insert_call_before(at, get_op("permute"), {G}, swap, transposed_meta(G->meta));
      b = g.insert_call_before(at, get_op("permute"), {x}, swap, transposed_meta(x->meta));
    }
    Attrs attrs;
    attrs.set("act", std::string(act));
    attrs.set("keepdim", s->meta.sizes.size() == 2);
    std::vector<TensorMeta> metas = bgrad_infer(gemm_bgrad_op(), {a->meta, b->meta}, attrs);
    for (TensorMeta& m : metas) m.device = G->meta.device;
    if (metas[0].sizes != replaced->meta.sizes || metas[1].sizes != s->meta.sizes) continue;  // not the shapes expected
    Node* f = g.insert_call_before(at, gemm_bgrad_op(), {a, b}, attrs, metas[0]);
    f->output_metas = metas;
    f->grad_enabled = replaced->grad_enabled;
    Node* r0 = g.insert_call_before(at, graph::getitem_op(), {f}, {{"index", int64_t{0}}}, metas[0]);
    Node* r1 = g.insert_call_before(at, graph::getitem_op(), {f}, {{"index", int64_t{1}}}, metas[1]);
    g.replace_all_uses(replaced, r0);
    g.replace_all_uses(s, r1);
    g.recompute_users();
    ++fused;
  }
  if (fused) {
    passes::eliminate_dead_code(g);
    g.recompute_users();
  }
  return fused;
}

const OpDef& gemm_epilogue_op() {
  static const OpDef& op = register_op({.name = "_gemm_epilogue", .num_inputs = 3, .infer = &epilogue_infer,
                                        .cpu = &epilogue_cpu});
  return op;
}

int fuse_gemm_epilogues(graph::Graph& g) {
  // Backward first: a weight gradient's product is a bare mm (no forward tail to take).
  int bias_grads = backward_epilogues_enabled() ? fuse_bias_gradients(g) : 0;
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
  return fused + bias_grads;
}

}  // namespace tp::stax
