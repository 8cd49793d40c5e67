// GEMM epilogue fusion for CUDA regions: see gemm_epilogue.h.
#include "stax/backend/gemm_epilogue.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <unordered_map>

#include "core/error.h"
#include "ops/api_math.h"
#include "ops/api_nn_linalg.h"
#include "graph/interpreter.h"
#include "graph/sym_shape_rules.h"
#include "ops/ops.h"
#include "passes/passes.h"

namespace tp::stax {
using graph::Node;
using graph::Opcode;
using graph::SymShape;

namespace {

// Dynamic shapes: a node a fusion adds to a symbolic graph takes the symbolic
// sizes of the value it stands for (without them the lowering would plan the
// extern call's results at the hints, or refuse them); a view's target sizes
// become a symbolic attribute, read per call.
void sym_like(const graph::Graph& g, Node* fresh, const Node* like) {
  if (g.is_symbolic()) fresh->sym_sizes = graph::sym_shape_of(*like);
}
void sym_results(const graph::Graph& g, Node* fresh, const std::vector<const Node*>& like) {
  if (!g.is_symbolic()) return;
  fresh->sym_sizes = graph::sym_shape_of(*like.at(0));
  fresh->output_sym_sizes.clear();
  for (const Node* l : like) fresh->output_sym_sizes.push_back(graph::sym_shape_of(*l));
}
void sym_view(const graph::Graph& g, Node* view, const Node* like) {
  if (!g.is_symbolic()) return;
  view->sym_sizes = graph::sym_shape_of(*like);
  bool any = false;
  for (const graph::SymDim& d : view->sym_sizes) any = any || !d.is_const();
  if (any) view->sym_attrs["size"] = view->sym_sizes;
}
// Equal sizes at the hints are not enough in a symbolic graph: a static dim
// may equal a symbol's hint.
bool same_sym(const graph::Graph& g, const Node* a, const Node* b) {
  return !g.is_symbolic() || graph::sym_shape_of(*a) == graph::sym_shape_of(*b);
}
bool sym_bias_fits(const graph::Graph& g, const Node* bias, const Node* product) {
  if (!g.is_symbolic()) return true;
  const SymShape b = graph::sym_shape_of(*bias), p = graph::sym_shape_of(*product);
  return !b.empty() && p.size() == 2 && b.back() == p[1];
}
SymShape sym_swapped(const Node* n) {
  SymShape s = graph::sym_shape_of(*n);
  if (s.size() == 2) std::swap(s[0], s[1]);
  return s;
}

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
  TP_CHECK(act == "none" || act == "relu" || act == "gelu_tanh" || act == "gelu_tanh_aux", ValueError, op.name,
           ": unknown activation '", act, "'");
  TensorMeta r = TensorMeta::contiguous({a.sizes[0], b.sizes[1]}, a.dtype);
  r.device = a.device;
  if (act == "gelu_tanh_aux") return {r, r};  // gelu(y) and y, the pre-activation the backward reads
  return {r};
}

// The reference: the unfused operators (CPU; the CUDA kernel is one cuBLASLt call).
std::vector<Tensor> epilogue_cpu(const OpDef&, const std::vector<Tensor>& in, const Attrs& attrs,
                                 const std::vector<TensorMeta>&) {
  Tensor r = ops::mm(in[1], in[2]);
  if (in[0].defined()) r = ops::add(r, in[0]);
  const std::string& act = attrs.get_str("act");
  if (act == "relu") r = ops::relu(r);
  else if (act == "gelu_tanh") r = ops::gelu(r, "tanh");
  else if (act == "gelu_tanh_aux") return {ops::gelu(r, "tanh"), r};
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

// _gemm_dgelu(a, b, aux) = (a @ b) * gelu_tanh'(aux): the gradient through a
// tanh-GELU of the product the next layer's data gradient computes, aux the
// pre-activation the forward saved.
std::vector<TensorMeta> dgelu_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  TP_CHECK(in.size() == 3, ValueError, op.name, ": expected 3 tensor arguments, got ", in.size());
  const TensorMeta &a = in[0], &b = in[1], &aux = in[2];
  TP_CHECK(a.sizes.size() == 2 && b.sizes.size() == 2 && a.sizes[1] == b.sizes[0], ValueError, op.name,
           ": expected matrices a [M, K] and b [K, N], got shapes ", shape_str(a.sizes), " and ", shape_str(b.sizes));
  TP_CHECK(aux.sizes == Shape({a.sizes[0], b.sizes[1]}) && aux.dtype == a.dtype && b.dtype == a.dtype, ValueError,
           op.name, ": aux of shape ", shape_str(aux.sizes), " for a product of shape [", a.sizes[0], ", ", b.sizes[1],
           "]");
  TensorMeta r = TensorMeta::contiguous({a.sizes[0], b.sizes[1]}, a.dtype);
  r.device = a.device;
  return {r};
}

// gelu_tanh'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2), t = tanh(k (x + c x^3)).
constexpr double kGeluK = 0.7978845608028654, kGeluC = 0.044715;

std::vector<Tensor> dgelu_cpu(const OpDef&, const std::vector<Tensor>& in, const Attrs&,
                              const std::vector<TensorMeta>&) {
  const Tensor& x = in[2];
  auto c = [](double v) { return ops::scalar(Scalar(v)); };
  Tensor x2 = ops::mul(x, x);
  Tensor t = ops::tanh(ops::mul(ops::add(x, ops::mul(ops::mul(x2, x), c(kGeluC))), c(kGeluK)));
  Tensor left = ops::mul(ops::add(t, c(1.0)), c(0.5));
  Tensor right = ops::mul(ops::mul(ops::mul(x, c(0.5)), ops::sub(c(1.0), ops::mul(t, t))),
                          ops::mul(ops::add(ops::mul(x2, c(3 * kGeluC)), c(1.0)), c(kGeluK)));
  return {ops::mul(ops::mm(in[0], in[1]), ops::add(left, right))};
}

bool pointwise_op(const Node* n) {
  static const char* kPointwise[] = {"add", "sub", "mul", "div", "tanh", "neg", "pow", "rsub"};
  if (n->opcode != Opcode::CallFunction || !n->output_metas.empty()) return false;
  for (const char* k : kPointwise)
    if (n->is_op(k)) return true;
  return false;
}

// The one tensor a pointwise expression reads (its leaves other than numbers); null if several.
Node* pointwise_leaf(Node* f) {
  Node* leaf = nullptr;
  std::unordered_map<const Node*, bool> seen;
  std::vector<Node*> stack{f};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (seen[n]) continue;
    seen[n] = true;
    if (n != f && !pointwise_op(n)) {
      if (leaf && leaf != n) return nullptr;
      leaf = n;
      continue;
    }
    if (!pointwise_op(n)) return nullptr;
    for (Node* in : n->input_nodes()) stack.push_back(in);
  }
  return leaf;
}

// Whether `f` is gelu_tanh'(h) of the value h: a pointwise expression of h
// and numbers (the derivative formula's nodes), checked by evaluating it in
// float64 at probe points against the closed form.
bool is_gelu_tanh_derivative(const Node* f, const Node* h) {
  std::vector<const Node*> order;
  std::unordered_map<const Node*, bool> seen;
  bool ok = true;
  bool has_tanh = false;
  std::function<void(const Node*)> visit = [&](const Node* n) {
    if (!ok || n == h || seen[n]) return;
    seen[n] = true;
    if (!pointwise_op(n) || order.size() > 40) {
      ok = false;
      return;
    }
    has_tanh = has_tanh || n->is_op("tanh");
    for (Node* in : n->input_nodes()) visit(in);
    order.push_back(n);
  };
  visit(f);
  if (!ok || !has_tanh || order.empty()) return false;
  graph::Graph probe;
  const int64_t P = 41;
  TensorMeta pm = TensorMeta::contiguous({P}, DType::Float64);
  std::unordered_map<const Node*, Node*> map{{h, probe.placeholder("h", pm, 0)}};
  for (const Node* n : order) {
    std::vector<graph::Arg> args;
    for (const graph::Arg& a : n->args) {
      if (auto* p = std::get_if<Node*>(&a)) {
        if (!*p || !map.count(*p)) return false;
        args.emplace_back(map.at(*p));
      } else {
        args.push_back(a);
      }
    }
    map[n] = probe.call(*n->target, std::move(args), n->attrs, pm);
  }
  probe.output({map.at(f)});
  Tensor x = ops::linspace(Scalar(-6.0), Scalar(6.0), P, DType::Float64);
  Tensor got;
  try {
    got = graph::interpret(probe, {x})[0];
  } catch (const Error&) {
    return false;
  }
  if (got.dtype() != DType::Float64 || got.numel() != P) return false;
  const double* xv = x.data_as<double>();
  const double* gv = got.data_as<double>();
  for (int64_t i = 0; i < P; ++i) {
    const double v = xv[i], t = std::tanh(kGeluK * (v + kGeluC * v * v * v));
    const double want = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * kGeluK * (1 + 3 * kGeluC * v * v);
    if (!(std::fabs(gv[i] - want) <= 1e-9)) return false;
  }
  return true;
}

// v itself, or the 2-D value it is a view of (through views only).
Node* through_views(Node* v) {
  while (v && (v->is_op("view") || v->is_op("reshape")) && v->args.size() == 1) v = node_arg(v, 0);
  return v;
}

}  // namespace

const OpDef& gemm_dgelu_op() {
  static const OpDef& op = register_op({.name = "_gemm_dgelu", .num_inputs = 3, .infer = &dgelu_infer,
                                        .cpu = &dgelu_cpu});
  return op;
}

int fuse_gelu_gradients(graph::Graph& g) {
  g.recompute_users();
  std::vector<Node*> muls;
  for (auto& up : g.nodes())
    if (up->opcode == Opcode::CallFunction && up->is_op("mul") && up->args.size() == 2) muls.push_back(up.get());
  int fused = 0;
  for (Node* m : muls) {
    for (int side = 0; side < 2; ++side) {
      Node* x = node_arg(m, static_cast<size_t>(side));
      Node* f = node_arg(m, static_cast<size_t>(1 - side));
      if (!x || !f || x->meta.sizes != m->meta.sizes || f->meta.sizes != m->meta.sizes) continue;
      // x: the product (through row-splitting views), used only here.
      Node* q = through_views(x);
      if (!is_product(q) || !epilogue_dtype(q->meta.dtype) || q->meta.dtype != m->meta.dtype) continue;
      bool sole = true;
      for (Node* v = x; v != q; v = node_arg(v, 0)) sole = sole && v->users.size() == 1;
      if (!sole || q->users.size() != 1) continue;
      // f: gelu'(h) of h, a view of a 2-D value of the product's shape (the saved pre-activation).
      Node* h = pointwise_leaf(f);
      if (!h || h->meta.sizes != m->meta.sizes || !is_gelu_tanh_derivative(f, h)) continue;
      if (through_views(h)->meta.sizes != q->meta.sizes) continue;
      Node* aux = through_views(h);
      if (aux->meta.dtype != q->meta.dtype || aux->meta.strides != contiguous_strides(aux->meta.sizes)) continue;
      Node* a = node_arg(q, 0);
      Node* b = node_arg(q, 1);
      if (!a || !b) continue;
      // At the product: aux must already exist there.
      std::unordered_map<const Node*, size_t> pos;
      for (size_t i = 0; i < g.nodes().size(); ++i) pos[g.nodes()[i].get()] = i;
      if (pos.at(aux) > pos.at(q)) continue;
      TensorMeta meta = q->meta;
      meta.strides = contiguous_strides(meta.sizes);
      Node* d = g.insert_call_before(q, gemm_dgelu_op(), {a, b, aux}, {}, meta);
      d->grad_enabled = m->grad_enabled;
      sym_like(g, d, q);
      Node* out = d;
      if (m->meta.sizes != d->meta.sizes) {
        Attrs va;
        va.set("size", std::vector<int64_t>(m->meta.sizes.begin(), m->meta.sizes.end()));
        out = g.insert_call_before(q, get_op("view"), {d}, va, m->meta);
        sym_view(g, out, m);
      }
      g.replace_all_uses(m, out);
      g.recompute_users();
      ++fused;
      break;
    }
  }
  if (fused) {
    passes::eliminate_dead_code(g);
    g.recompute_users();
  }
  return fused;
}

// The forward of a training step: a product with bias whose tanh-GELU is taken
// and which is itself kept (a region output: the saved pre-activation) is one
// GELU_AUX(_BIAS) call writing both.
int fuse_gelu_aux(graph::Graph& g) {
  g.recompute_users();
  const Node* out = g.output_node();
  std::vector<Node*> gemms;
  for (auto& up : g.nodes())
    if (up->opcode == Opcode::CallFunction && (up->is_op("addmm") || is_product(up.get()))) gemms.push_back(up.get());
  int fused = 0;
  for (Node* p : gemms) {
    const bool addmm = p->is_op("addmm");
    const size_t k = addmm ? 1 : 0;
    Node* a = node_arg(p, k);
    Node* b = node_arg(p, k + 1);
    const DType dt = p->meta.dtype;
    if (!a || !b || a->meta.sizes.size() != 2 || b->meta.sizes.size() != 2 || p->meta.sizes.size() != 2) continue;
    if (!epilogue_dtype(dt) || a->meta.dtype != dt || b->meta.dtype != dt) continue;
    Node* bias = nullptr;
    if (addmm) {
      bias = node_arg(p, 0);
      if (!bias_row(bias, p->meta.sizes[1], dt) || !scalar_is_one(p, "beta") || !scalar_is_one(p, "alpha")) continue;
    }
    // Users: the output node (saved) and a gelu_tanh, directly or behind one row-splitting view.
    Node* act = nullptr;
    Node* view = nullptr;
    bool saved = false, other = false;
    for (Node* u : p->users) {
      if (u == out) {
        saved = true;
      } else if (u->is_op("gelu") && u->attrs.has("approximate") && u->attrs.get_str("approximate") == "tanh" &&
                 !act) {
        act = u;
      } else if ((u->is_op("view") || u->is_op("reshape")) && !view && !act && u->users.size() == 1 &&
                 u->users[0]->is_op("gelu") && u->users[0]->attrs.has("approximate") &&
                 u->users[0]->attrs.get_str("approximate") == "tanh" && u->users[0]->meta.sizes.back() ==
                 p->meta.sizes[1]) {
        view = u;
        act = u->users[0];
      } else {
        other = true;
      }
    }
    if (!saved || !act || other || act->meta.dtype != dt) continue;
    Attrs attrs;
    attrs.set("act", std::string("gelu_tanh_aux"));
    TensorMeta meta = p->meta;
    meta.strides = contiguous_strides(meta.sizes);
    Node* f = g.insert_call_before(p, gemm_epilogue_op(), {static_cast<Node*>(bias), a, b}, attrs, meta);
    f->output_metas = {meta, meta};
    f->grad_enabled = act->grad_enabled;
    sym_results(g, f, {p, p});
    Node* r0 = g.insert_call_before(p, graph::getitem_op(), {f}, {{"index", int64_t{0}}}, meta);
    Node* r1 = g.insert_call_before(p, graph::getitem_op(), {f}, {{"index", int64_t{1}}}, meta);
    sym_like(g, r0, p);
    sym_like(g, r1, p);
    Node* y = r0;
    if (view) {
      y = g.insert_call_before(p, *view->target, {r0}, view->attrs, act->meta);
      y->meta = act->meta;
      sym_like(g, y, act);
      y->sym_attrs = view->sym_attrs;
    }
    g.replace_all_uses(act, y);
    g.replace_all_uses(p, r1);
    g.recompute_users();
    ++fused;
  }
  if (fused) {
    passes::eliminate_dead_code(g);
    g.recompute_users();
  }
  return fused;
}

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
      Node* same = g.insert_call_before(at, *other->target, {src}, other->attrs, other->meta);
      sym_like(g, same, other);
      same->sym_attrs = other->sym_attrs;
      other = same;
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
      if (g.is_symbolic()) {
        a->sym_sizes = sym_swapped(G);
        b->sym_sizes = sym_swapped(x);
      }
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
    sym_results(g, f, {replaced, s});
    Node* r0 = g.insert_call_before(at, graph::getitem_op(), {f}, {{"index", int64_t{0}}}, metas[0]);
    Node* r1 = g.insert_call_before(at, graph::getitem_op(), {f}, {{"index", int64_t{1}}}, metas[1]);
    sym_like(g, r0, replaced);
    sym_like(g, r1, s);
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
  // Training first: a weight gradient's product is a bare mm (no forward tail
  // to take), and a kept product must not be taken by the plain GELU epilogue.
  int bias_grads = 0;
  if (backward_epilogues_enabled()) {
    bias_grads += fuse_gelu_gradients(g);
    bias_grads += fuse_bias_gradients(g);
    bias_grads += fuse_gelu_aux(g);
  }
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
      if (!bias_row(bias, N, dt) || !sym_bias_fits(g, bias, n) || !scalar_is_one(n, "beta") ||
          !scalar_is_one(n, "alpha"))
        continue;
    } else if (Node* u = sole_user(n); u && u->is_op("add") && scalar_is_one(u, "alpha") && u->meta.dtype == dt &&
                                          u->meta.sizes == n->meta.sizes && same_sym(g, u, n)) {
      Node* other = node_arg(u, 0) == n ? node_arg(u, 1) : node_arg(u, 0);
      if (other != n && bias_row(other, N, dt) && sym_bias_fits(g, other, n)) {
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
    if (u && u->meta.dtype == dt && u->meta.sizes == (view ? view : last)->meta.sizes &&
        same_sym(g, u, view ? view : last)) {
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
    sym_like(g, f, result);
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
