// Nodes that passes build carry the device (and dtype) of the values they
// stand for. Decompositions are traced in meta mode over CPU examples and
// transpose_products builds fresh contiguous metas; a CUDA graph's new nodes
// used to say "cpu". Runs without a GPU: metas are data-free.
#include <gtest/gtest.h>

#include "graph/graph.h"
#include "ops/registry.h"
#include "passes/passes.h"

namespace tp::graph {
namespace {

const Device kCuda{Device::Kind::CUDA, 1};

TensorMeta on_cuda(Shape sizes, DType dtype = DType::Float32) {
  TensorMeta m = TensorMeta::contiguous(std::move(sizes), dtype);
  m.device = kCuda;
  return m;
}

// A call node whose metas come from the operator's own inference, as a capture on CUDA records them.
Node* call(Graph& g, const char* name, std::vector<Node*> in, Attrs attrs = {}) {
  const OpDef& op = get_op(name);
  std::vector<TensorMeta> metas;
  std::vector<Arg> args;
  for (Node* n : in) {
    metas.push_back(n->meta);
    args.emplace_back(n);
  }
  std::vector<TensorMeta> out = op.infer(op, metas, attrs);
  for (auto& m : out) m.device = kCuda;
  Node* c = g.call(op, std::move(args), std::move(attrs), out.at(0));
  if (out.size() > 1) c->output_metas = out;
  return c;
}

void expect_all_on_cuda(const Graph& g) {
  for (auto& n : g.nodes()) {
    if (n->opcode != Opcode::CallFunction) continue;
    EXPECT_EQ(n->meta.device, kCuda) << n->name << " (" << n->target->name << ") says " << n->meta.device.str()
                                     << "\n" << g.code();
    for (const TensorMeta& m : n->output_metas) EXPECT_EQ(m.device, kCuda) << n->name;
  }
}

TEST(PassMetas, DecompositionsKeepTheDeviceOfTheNodeTheyReplace) {
  Graph g;
  Node* x = g.placeholder("x", on_cuda({4, 8}), 0);
  Node* w = g.placeholder("w", on_cuda({8}), 1);
  Node* b = g.placeholder("b", on_cuda({8}), 2);
  Attrs sm;
  sm.set("dim", int64_t{-1});
  sm.set("dtype", AttrValue(std::monostate{}));
  Node* s = call(g, "softmax", {x}, sm);
  Attrs ln;
  ln.set("normalized_shape", std::vector<int64_t>{8});
  ln.set("eps", 1e-5);
  Node* l = call(g, "layer_norm", {s, w, b}, ln);
  Node* si = call(g, "silu", {l});
  g.output({si});
  g.lint();
  ASSERT_TRUE(passes::decompose_composites(g));
  bool decomposed = true;
  for (auto& n : g.nodes())
    if (n->opcode == Opcode::CallFunction && (n->is_op("softmax") || n->is_op("silu"))) decomposed = false;
  EXPECT_TRUE(decomposed) << g.code();
  expect_all_on_cuda(g);
}

TEST(PassMetas, TransposedProductsKeepTheDeviceAndDtype) {
  Graph g;
  Node* a = g.placeholder("a", on_cuda({6, 4}, DType::Float64), 0);
  Node* b = g.placeholder("b", on_cuda({4, 5}, DType::Float64), 1);
  Node* mm = call(g, "mm", {a, b});
  Attrs swap;
  swap.set("dims", std::vector<int64_t>{1, 0});
  Node* t = call(g, "permute", {mm}, swap);
  g.output({t});
  ASSERT_TRUE(passes::transpose_products(g));
  Node* prod = nullptr;
  for (auto& n : g.nodes())
    if (n->opcode == Opcode::CallFunction && n->is_op("mm")) prod = n.get();
  ASSERT_NE(prod, nullptr);
  EXPECT_EQ(prod->meta.sizes, (Shape{5, 6}));
  EXPECT_EQ(prod->meta.dtype, DType::Float64);
  expect_all_on_cuda(g);
}

TEST(PassMetas, DefaultPipelineOnACudaGraphLeavesNoCpuMeta) {
  Graph g;
  Node* x = g.placeholder("x", on_cuda({3, 16}), 0);
  Node* w = g.placeholder("w", on_cuda({16, 16}), 1);
  Attrs ge;
  ge.set("approximate", std::string("tanh"));
  Node* h = call(g, "gelu", {call(g, "mm", {x, w})}, ge);
  Attrs swap;
  swap.set("dims", std::vector<int64_t>{1, 0});
  Node* t = call(g, "permute", {call(g, "mm", {h, w})}, swap);
  g.output({t});
  passes::run_default_passes(g);
  expect_all_on_cuda(g);
}

}  // namespace
}  // namespace tp::graph
