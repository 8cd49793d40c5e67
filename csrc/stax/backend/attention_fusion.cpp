// Attention fusion for CUDA regions: see attention_fusion.h.
#include "stax/backend/attention_fusion.h"

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "cuda/attention.h"
#include "ops/ops.h"
#include "passes/passes.h"

namespace tp::stax {
using graph::Node;
using graph::Opcode;

namespace {

// [..., L, DV]; a 4-D result with its heads inner ([B, L, H, DV] in memory).
TensorMeta result_meta(const Shape& q, const Shape& v, DType dt) {
  Shape sizes = q;
  sizes.back() = v.back();
  TensorMeta m = TensorMeta::contiguous(sizes, dt);
  if (sizes.size() == 4) {
    const int64_t H = sizes[1], L = sizes[2], DV = sizes[3];
    m.strides = {L * H * DV, DV, H * DV, 1};
  }
  return m;
}

std::vector<TensorMeta> attention_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  TP_CHECK(in.size() == 3, ValueError, op.name, ": expected 3 tensor arguments, got ", in.size());
  const TensorMeta &q = in[0], &k = in[1], &v = in[2];
  const size_t n = q.sizes.size();
  TP_CHECK((n == 3 || n == 4) && k.sizes.size() == n && v.sizes.size() == n, ValueError, op.name,
           ": expected q, k, v of one rank, 3 or 4, got shapes ", shape_str(q.sizes), ", ", shape_str(k.sizes), ", ",
           shape_str(v.sizes));
  const bool batch = std::equal(q.sizes.begin(), q.sizes.end() - 2, k.sizes.begin()) &&
                     std::equal(q.sizes.begin(), q.sizes.end() - 2, v.sizes.begin());
  TP_CHECK(batch && q.sizes[n - 1] == k.sizes[n - 1] && k.sizes[n - 2] == v.sizes[n - 2], ValueError, op.name,
           ": q [..., L, D], k [..., S, D], v [..., S, DV] with equal batch sizes, got ", shape_str(q.sizes), ", ",
           shape_str(k.sizes), ", ", shape_str(v.sizes));
  TP_CHECK(q.dtype == k.dtype && q.dtype == v.dtype, TypeError, op.name, ": q, k, v of dtypes ", dtype_name(q.dtype),
           ", ", dtype_name(k.dtype), ", ", dtype_name(v.dtype));
  (void)attrs.get_double("scale");
  return {result_meta(q.sizes, v.sizes, q.dtype)};
}

// The reference: the unfused operators, in the planned layout.
std::vector<Tensor> attention_cpu(const OpDef&, const std::vector<Tensor>& in, const Attrs& attrs,
                                  const std::vector<TensorMeta>& out_meta) {
  const int64_t n = in[0].dim();
  Tensor s = ops::matmul(in[0], ops::transpose(in[1], n - 2, n - 1));
  s = ops::mul(s, Tensor::wrapped_scalar(Scalar(attrs.get_double("scale"))));
  Tensor o = ops::matmul(ops::softmax(s, -1), in[2]);
  Tensor r = Tensor::empty_strided(out_meta[0].sizes, out_meta[0].strides, out_meta[0].dtype);
  ops::copy_(r, o);
  return {r};
}

Node* node_arg(const Node* n, size_t i) {
  if (i >= n->args.size()) return nullptr;
  auto* p = std::get_if<Node*>(&n->args[i]);
  return p ? *p : nullptr;
}

// The only user of n, when it has exactly one and n is not a region output.
Node* sole_user(const Node* n) {
  if (n->users.size() != 1) return nullptr;
  Node* u = n->users[0];
  return u->opcode == Opcode::CallFunction ? u : nullptr;
}

int64_t wrap_dim(int64_t d, size_t n) { return d < 0 ? d + static_cast<int64_t>(n) : d; }

// k when kt is k with its last two dims swapped (a transpose or permute view).
Node* untransposed(Node* kt) {
  if (!kt || kt->opcode != Opcode::CallFunction) return nullptr;
  const size_t n = kt->meta.sizes.size();
  if (n < 2) return nullptr;
  if (kt->is_op("transpose")) {
    int64_t a = wrap_dim(kt->attrs.get_int("dim0"), n), b = wrap_dim(kt->attrs.get_int("dim1"), n);
    if (std::min(a, b) != static_cast<int64_t>(n) - 2 || std::max(a, b) != static_cast<int64_t>(n) - 1) return nullptr;
    return node_arg(kt, 0);
  }
  if (kt->is_op("permute")) {
    const auto& dims = kt->attrs.get<std::vector<int64_t>>("dims");
    if (dims.size() != n) return nullptr;
    for (size_t d = 0; d < n; ++d) {
      const int64_t want = d + 2 < n ? static_cast<int64_t>(d) : static_cast<int64_t>(d + 2 == n ? n - 1 : n - 2);
      if (wrap_dim(dims[d], n) != want) return nullptr;
    }
    return node_arg(kt, 0);
  }
  return nullptr;
}

// A Scalar argument (the number of `s * c`), or nullptr.
const Scalar* number_arg(const Node* n, size_t i) {
  if (i >= n->args.size()) return nullptr;
  return std::get_if<Scalar>(&n->args[i]);
}

bool enabled() {
  const char* v = std::getenv("TP_CUDA_FUSED_ATTENTION");
  return !(v && (std::string(v) == "0" || std::string(v) == "off"));
}

}  // namespace

const OpDef& attention_op() {
  static const OpDef& op = register_op({.name = "_attention", .num_inputs = 3, .infer = &attention_infer,
                                        .cpu = &attention_cpu});
  return op;
}

int fuse_attention(graph::Graph& g) {
  if (!enabled() || g.is_symbolic()) return 0;
  g.recompute_users();
  std::vector<Node*> softmaxes;
  for (auto& up : g.nodes())
    if (up->opcode == Opcode::CallFunction && up->is_op("softmax")) softmaxes.push_back(up.get());
  int fused = 0;
  for (Node* p : softmaxes) {
    const size_t n = p->meta.sizes.size();
    if ((n != 3 && n != 4) || p->meta.dtype != DType::Float32) continue;
    if (wrap_dim(p->attrs.get_int("dim"), n) != static_cast<int64_t>(n) - 1 || !p->attrs.is_none("dtype")) continue;
    // The scale: s * c, c * s or s / c with c a number; none is 1.
    Node* s = node_arg(p, 0);
    if (!s || s->opcode != Opcode::CallFunction || sole_user(s) != p) continue;
    double scale = 1.0;
    Node* mm1 = s;
    if (s->is_op("mul") || s->is_op("div")) {
      const Scalar* c = number_arg(s, 1);
      Node* x = node_arg(s, 0);
      if (!c && s->is_op("mul")) {
        c = number_arg(s, 0);
        x = node_arg(s, 1);
      }
      if (!c || !x || x->opcode != Opcode::CallFunction || sole_user(x) != s) continue;
      if (s->meta.sizes != x->meta.sizes || s->meta.dtype != x->meta.dtype) continue;
      scale = s->is_op("mul") ? c->to_double() : 1.0 / c->to_double();
      mm1 = x;
    }
    if (!mm1->is_op("matmul")) continue;
    Node* q = node_arg(mm1, 0);
    Node* k = untransposed(node_arg(mm1, 1));
    Node* mm2 = sole_user(p);
    if (!q || !k || !mm2 || !mm2->is_op("matmul") || node_arg(mm2, 0) != p) continue;
    Node* v = node_arg(mm2, 1);
    if (!v) continue;
    const Shape &qs = q->meta.sizes, &ks = k->meta.sizes, &vs = v->meta.sizes;
    if (qs.size() != n || ks.size() != n || vs.size() != n) continue;
    if (q->meta.dtype != DType::Float32 || k->meta.dtype != DType::Float32 || v->meta.dtype != DType::Float32) continue;
    if (!std::equal(qs.begin(), qs.end() - 2, ks.begin()) || !std::equal(qs.begin(), qs.end() - 2, vs.begin())) continue;
    if (qs[n - 1] != ks[n - 1] || ks[n - 2] != vs[n - 2] || ks[n - 2] == 0) continue;
    if (qs[n - 1] > cuda::kAttentionMaxHeadDim || vs[n - 1] > cuda::kAttentionMaxHeadDim) continue;
    if (mm2->meta.sizes != result_meta(qs, vs, DType::Float32).sizes) continue;
    Attrs attrs;
    attrs.set("scale", Scalar(scale));
    Node* f = g.insert_call_before(mm2, attention_op(), {q, k, v}, attrs, result_meta(qs, vs, DType::Float32));
    f->grad_enabled = mm2->grad_enabled;
    // The usual head merge after it, o.transpose(1, 2) then a contiguous copy
    // (clone) before the reshape: in the heads-inner layout the transpose is
    // already contiguous, so the copy is dropped and the reshape reads f.
    Node* perm = sole_user(mm2);
    Node* copy = perm ? sole_user(perm) : nullptr;
    const bool merge = n == 4 && perm && perm->is_op("permute") && copy && (copy->is_op("clone") || copy->is_op("contiguous")) &&
                       perm->attrs.get<std::vector<int64_t>>("dims") == std::vector<int64_t>{0, 2, 1, 3} &&
                       copy->meta.dtype == perm->meta.dtype &&
                       copy->meta.strides == contiguous_strides(copy->meta.sizes);
    g.replace_all_uses(mm2, f);
    if (merge) {
      perm->meta.strides = contiguous_strides(perm->meta.sizes);
      g.replace_all_uses(copy, perm);
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
