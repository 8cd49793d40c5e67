// Dynamic shapes in the front end: the shape environment's guards and
// replacements, a symbolic capture (every value gets a SymShape that gives its
// real size at the hints; size attributes are evaluated per call by the
// interpreter), and decompositions of symbolic graphs.
#include <gtest/gtest.h>

#include "graph/interpreter.h"
#include "graph/shape_env.h"
#include "graph/sym_shape_rules.h"
#include "graph/tracer.h"
#include "ops/ops.h"
#include "passes/passes.h"

namespace tp::graph {
namespace {

using stax::ir::size_var;

TEST(ShapeEnv, GuardsReplacementsAndRanges) {
  ShapeEnv env;
  int a = env.new_symbol(64, 2, 1024, "x.size(0)", 0, 0);
  int b = env.new_symbol(64, 2, 1 << 30, "y.size(0)", 1, 0);
  int c = env.new_symbol(12, 2, 1 << 30, "z.size(1)", 2, 1);
  // Implied by the declared range: nothing recorded.
  EXPECT_TRUE(env.decide(SymDim(1024) - size_var(a), GuardRel::Ge));
  EXPECT_EQ(env.num_decisions(), 0u);
  // A branch outcome: recorded as what held.
  EXPECT_FALSE(env.decide(size_var(c) - SymDim(17), GuardRel::Ge));  // c > 16 was false
  EXPECT_TRUE(env.decide(stax::ir::mod(size_var(a), SymDim(8)), GuardRel::Eq));
  // Unification: b becomes a.
  EXPECT_TRUE(env.require_equal(size_var(a), size_var(b)));
  EXPECT_EQ(env.resolve(size_var(b)), size_var(a));
  Graph g;
  Node* p = g.placeholder("x", TensorMeta::contiguous({64, 12}, DType::Float32), 0);
  p->sym_sizes = {size_var(b), size_var(c)};
  g.output({p});
  std::vector<ShapeGuard> guards = env.finish(g);
  ASSERT_EQ(g.symbols.size(), 2u);  // b dropped, c renumbered to s1
  EXPECT_EQ(p->sym_sizes[0], size_var(0));
  EXPECT_EQ(p->sym_sizes[1], size_var(1));
  ASSERT_EQ(guards.size(), 2u);
  std::string all = guards[0].describe(g.symbols) + " / " + guards[1].describe(g.symbols);
  EXPECT_NE(all.find("z.size(1) <= 16"), std::string::npos) << all;
  EXPECT_NE(all.find("x.size(0) % 8"), std::string::npos) << all;
  EXPECT_TRUE(guards[0].holds({{stax::ir::size_var_id(0), 64}, {stax::ir::size_var_id(1), 12}}));
}

TEST(ShapeEnv, SpecializingABareSymbolFixesIt) {
  ShapeEnv env;
  int a = env.new_symbol(8, 2, 100, "x.size(0)", 0, 0);
  EXPECT_EQ(env.specialize(size_var(a) * SymDim(3)), 24);
  EXPECT_TRUE(env.resolve(size_var(a)).is_const());
  Graph g;
  g.output({});
  env.finish(g);
  EXPECT_FALSE(g.is_symbolic());
}

std::vector<Tensor> example(const std::vector<Tensor>& in) {
  Tensor y = ops::softmax(ops::mul(ops::add(in[0], in[1]), ops::scalar(2.0)), -1);
  return {ops::sum(ops::view(y, {-1}), {0}), ops::slice(y, 0, 1, INT64_MAX, 1)};
}

TEST(SymbolicCapture, EveryValueHasASymShapeThatMatchesItsHints) {
  Tensor x = ops::randn({6, 5}), w = ops::randn({5});
  DynamicSpec spec{{DimSpec{true}, DimSpec{true}}, {DimSpec{true}}};
  TraceResult r = trace(example, {x, w}, {"x", "w"}, true, false, &spec);
  const Graph& g = *r.graph;
  ASSERT_TRUE(g.is_symbolic()) << g.code();
  ASSERT_EQ(g.symbols.size(), 2u);  // x.size(1) and w.size(0) unified by broadcasting
  EXPECT_EQ(g.symbols[0].origin, "x.size(0)");
  std::unordered_map<int, int64_t> hints = hint_values(g.symbols);
  for (auto& n : g.nodes()) {
    if (n->opcode == Opcode::Output) continue;
    ASSERT_EQ(n->sym_sizes.size(), n->meta.sizes.size()) << n->name;
    for (size_t d = 0; d < n->sym_sizes.size(); ++d)
      EXPECT_EQ(stax::ir::evaluate(n->sym_sizes[d], hints), n->meta.sizes[d]) << n->name;
  }
  // The same graph runs at other sizes: view's size is evaluated per call.
  for (int64_t rows : {2, 9}) {
    Tensor x2 = ops::randn({rows, 7}), w2 = ops::randn({7});
    std::vector<Tensor> got = interpret(g, {x2, w2});
    std::vector<Tensor> want = example({x2, w2});
    ASSERT_EQ(got[0].sizes(), want[0].sizes());
    ASSERT_EQ(got[1].sizes(), want[1].sizes());
    for (int64_t i = 0; i < want[0].numel(); ++i)
      EXPECT_FLOAT_EQ(got[0].data_as<float>()[i], want[0].data_as<float>()[i]);
  }
}

TEST(SymbolicCapture, DecompositionsThatBakeSizesStayWhole) {
  Tensor x = ops::randn({6, 5});
  DynamicSpec spec{{DimSpec{true}, DimSpec{false}}};
  auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ops::softmax(in[0], -1), ops::mean(in[0], {0})};
  };
  TraceResult r = trace(fn, {x}, {"x"}, true, false, &spec);
  ASSERT_TRUE(r.graph->is_symbolic());
  passes::PassOptions po;
  po.decompose = true;
  passes::run_default_passes(*r.graph, po);
  std::string code = r.graph->code();
  EXPECT_EQ(code.find("tp.softmax("), std::string::npos) << code;  // softmax over a static dim: decomposed
  EXPECT_NE(code.find("tp.mean("), std::string::npos) << code;     // 1/rows would be baked in: stays whole
  for (auto& n : r.graph->nodes())
    if (n->opcode != Opcode::Output) EXPECT_EQ(n->sym_sizes.size(), n->meta.sizes.size()) << n->name;
  Tensor x2 = ops::randn({11, 5});
  std::vector<Tensor> got = interpret(*r.graph, {x2});
  std::vector<Tensor> want = fn({x2});
  for (size_t k = 0; k < 2; ++k) {
    ASSERT_EQ(got[k].sizes(), want[k].sizes());
    for (int64_t i = 0; i < want[k].numel(); ++i)
      EXPECT_NEAR(got[k].data_as<float>()[i], want[k].data_as<float>()[i], 1e-6);
  }
}

}  // namespace
}  // namespace tp::graph
