// (A B)^T = B^T A^T: a transposed matrix product becomes a product of
// transposed operands. The derivative of a linear layer produces exactly the
// former (its weight gradient is permute(x^T @ g)); as a region output it
// would be materialized by a transposing copy of the whole gradient, while a
// GEMM reads transposed operands in place (BLAS's transpose flags). Also drops
// views and permutes that do nothing (to the same shape; a permute followed by
// its inverse). Values are unchanged up to the GEMM's summation order.
#include "passes/passes.h"

#include "graph/sym_shape_rules.h"

namespace tp::passes {
using namespace tp::graph;

namespace {

bool is_swap(const Node* n) {
  if (!n->is_op("permute")) return false;
  auto dims = n->attrs.get<std::vector<int64_t>>("dims");
  return dims.size() == 2 && ((dims[0] == 1 && dims[1] == 0) || (dims[0] == -1 && dims[1] == -2));
}

Node* only_input(const Node* n) {
  auto* p = std::get_if<Node*>(&n->args.at(0));
  return p ? *p : nullptr;
}

TensorMeta transposed(const TensorMeta& m) {
  TensorMeta t = m;
  std::swap(t.sizes[0], t.sizes[1]);
  std::swap(t.strides[0], t.strides[1]);
  return t;
}

}  // namespace

bool transpose_products(Graph& g) {
  std::vector<Node*> todo;
  for (auto& up : g.nodes()) todo.push_back(up.get());
  bool changed = false;
  for (Node* n : todo) {
    if (n->opcode != Opcode::CallFunction || n->args.empty()) continue;
    Node* x = only_input(n);
    if (!x) continue;
    // view to the same shape, permute of a permute that undoes it: the input itself.
    bool identity = (n->is_op("view") && x->meta.sizes == n->meta.sizes && x->meta.dtype == n->meta.dtype) ||
                    (is_swap(n) && is_swap(x) && only_input(x) && only_input(x)->meta.sizes == n->meta.sizes);
    if (identity) {
      g.replace_all_uses(n, n->is_op("view") ? x : only_input(x));
      changed = true;
      continue;
    }
    // permute(mm(a, b), [1, 0]) with the product used only here -> mm(b^T, a^T).
    if (!is_swap(n) || !(x->is_op("mm") || x->is_op("matmul")) || x->users.size() != 1) continue;
    if (x->args.size() != 2 || x->meta.sizes.size() != 2) continue;
    auto* a = std::get_if<Node*>(&x->args[0]);
    auto* b = std::get_if<Node*>(&x->args[1]);
    if (!a || !b || !*a || !*b || (*a)->meta.sizes.size() != 2 || (*b)->meta.sizes.size() != 2) continue;
    const OpDef& permute = get_op("permute");
    Attrs swap;
    swap.set("dims", std::vector<int64_t>{1, 0});
    Node* bt = g.insert_call_before(n, permute, {*b}, swap, transposed((*b)->meta));
    Node* at = g.insert_call_before(n, permute, {*a}, swap, transposed((*a)->meta));
    TensorMeta pm = TensorMeta::contiguous(n->meta.sizes, n->meta.dtype);
    pm.device = n->meta.device;  // a new node's meta keeps the device of the value it replaces
    Node* prod = g.insert_call_before(n, *x->target, {bt, at}, x->attrs, pm);
    prod->grad_enabled = x->grad_enabled;
    if (g.is_symbolic()) {  // dynamic shapes: the new nodes' symbolic sizes (else a backend reads the hints)
      auto swapped = [](graph::SymShape s) {
        if (s.size() == 2) std::swap(s[0], s[1]);
        return s;
      };
      bt->sym_sizes = swapped(sym_shape_of(**b));
      at->sym_sizes = swapped(sym_shape_of(**a));
      prod->sym_sizes = sym_shape_of(*n);
    }
    g.replace_all_uses(n, prod);
    changed = true;
  }
  if (changed) eliminate_dead_code(g);
  return changed;
}

}  // namespace tp::passes
