// Derivative formulas (OpDef::backward) against central finite differences in
// float64. The formulas are called directly with BackwardArgs: L = sum(out * w)
// for a fixed random w, so dL/dinput must equal backward(grad_output = w).
#include <cmath>
#include <random>

#include "ops/registry.h"
#include "test_util.h"

namespace tp {
namespace {
using test::make;
using test::values;

std::mt19937& rng() {
  static std::mt19937 r(42);
  return r;
}

Tensor rnd(const Shape& s, double lo = -1, double hi = 1) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(numel(s));
  for (auto& e : v) e = u(rng());
  return make(v, s, DType::Float64);
}

double loss(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs, const Tensor& w) {
  Tensor out = run_kernel(op, in, attrs)[0];
  auto o = values(out), wv = values(w);
  double l = 0;
  for (size_t i = 0; i < o.size(); ++i) l += o[i] * wv[i];
  return l;
}

// Checks op.backward for every input marked in `needs` (default: all float64 inputs).
void check_grad(const char* name, std::vector<Tensor> in, const Attrs& attrs = {}, std::vector<bool> needs = {},
                double tol = 1e-6) {
  SCOPED_TRACE(name);
  const OpDef& op = get_op(name);
  ASSERT_TRUE(op.backward) << name << " has no derivative formula";
  if (needs.empty())
    for (auto& t : in) needs.push_back(t.dtype() == DType::Float64 && !t.is_wrapped_number());
  // Inputs are perturbed through their data: give each its own contiguous storage.
  for (auto& t : in) t = t.is_wrapped_number() ? t : ops::clone(t);
  std::vector<Tensor> out = run_kernel(op, in, attrs);
  Tensor w = rnd(out[0].sizes());
  std::vector<Tensor> grad_outputs{w};
  BackwardArgs args{in, out, grad_outputs, attrs, needs};
  std::vector<Tensor> grads = op.backward(args);
  ASSERT_EQ(grads.size(), in.size());
  const double eps = 1e-6;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!needs[i]) {
      EXPECT_FALSE(grads[i].defined()) << "input " << i << " needs no gradient";
      continue;
    }
    ASSERT_TRUE(grads[i].defined()) << "input " << i;
    ASSERT_EQ(grads[i].sizes(), in[i].sizes()) << "input " << i;
    EXPECT_EQ(grads[i].dtype(), in[i].dtype());
    auto g = values(grads[i]);
    double* p = in[i].data_as<double>();
    for (int64_t j = 0; j < in[i].numel(); ++j) {
      const double keep = p[j];
      p[j] = keep + eps;
      double lp = loss(op, in, attrs, w);
      p[j] = keep - eps;
      double lm = loss(op, in, attrs, w);
      p[j] = keep;
      double fd = (lp - lm) / (2 * eps);
      EXPECT_NEAR(g[j], fd, tol * std::max(1.0, std::fabs(fd))) << "input " << i << " element " << j;
    }
  }
}

class Backward : public ::testing::Test {
 protected:
  void SetUp() override { test::load_test_blas(); }
};

TEST_F(Backward, BinaryWithBroadcasting) {
  for (const char* name : {"add", "sub", "mul", "div", "maximum", "minimum"}) {
    check_grad(name, {rnd({2, 3}), rnd({3}, 0.5, 2)});
    check_grad(name, {rnd({2, 1}), rnd({1, 3}, 0.5, 2)});
    check_grad(name, {rnd({4}), ops::scalar(0.25)});
    check_grad(name, {rnd({2, 3}), rnd({2, 3}, 0.5, 2)}, {}, {false, true});
  }
}

TEST_F(Backward, MaximumTiesSplitEvenly) {
  Tensor a = make({1, 2, 3}, {3}, DType::Float64), b = make({1, 5, 0}, {3}, DType::Float64);
  std::vector<Tensor> in{a, b}, out{ops::maximum(a, b)}, go{make({1, 1, 1}, {3}, DType::Float64)};
  Attrs attrs;
  std::vector<bool> needs{true, true};
  auto g = get_op("maximum").backward({in, out, go, attrs, needs});
  test::expect_values(g[0], {0.5, 0, 1});
  test::expect_values(g[1], {0.5, 1, 0});
}

TEST_F(Backward, Unary) {
  for (const char* name : {"neg", "exp", "tanh", "sigmoid"}) check_grad(name, {rnd({2, 3})});
  for (const char* name : {"log", "sqrt"}) check_grad(name, {rnd({2, 3}, 0.5, 2)});
  // relu/abs away from the kink at 0.
  Tensor x = make({-1.5, -0.3, 0.4, 2.0}, {4}, DType::Float64);
  check_grad("relu", {x});
  check_grad("abs", {x});
}

TEST_F(Backward, Where) {
  Tensor c = make({1, 0, 1, 0, 0, 1}, {2, 3}, DType::Bool);
  check_grad("where", {c, rnd({2, 3}), rnd({3})});
  check_grad("where", {c, rnd({1}), ops::scalar(2.0)});
}

TEST_F(Backward, Reductions) {
  using V = std::vector<int64_t>;
  for (bool keep : {false, true}) {
    Attrs a{{"dim", V{1}}, {"keepdim", keep}};
    check_grad("sum", {rnd({3, 4, 2})}, a);
    check_grad("mean", {rnd({3, 4, 2})}, a);
    check_grad("amax", {rnd({3, 4, 2})}, a);
    Attrs b{{"dim", V{0, 2}}, {"keepdim", keep}};
    check_grad("sum", {rnd({3, 4, 2})}, b);
    check_grad("mean", {rnd({3, 4, 2})}, b);
    check_grad("amax", {rnd({3, 4, 2})}, b);
  }
  Attrs all{{"dim", V{}}, {"keepdim", false}};
  check_grad("sum", {rnd({3, 2})}, all);
  check_grad("mean", {rnd({3, 2})}, all);
  check_grad("amax", {rnd({3, 2})}, all);
  for (int64_t d : {0, 1, -1}) check_grad("softmax", {rnd({3, 5}, -3, 3)}, Attrs{{"dim", d}});
}

TEST_F(Backward, AmaxTiesSplitEvenly) {
  Tensor x = make({1, 3, 3, 2}, {4}, DType::Float64);
  Attrs attrs{{"dim", std::vector<int64_t>{}}, {"keepdim", false}};
  std::vector<Tensor> in{x}, out{ops::amax(x)}, go{Tensor::scalar_tensor(Scalar(2.0), DType::Float64)};
  std::vector<bool> needs{true};
  test::expect_values(get_op("amax").backward({in, out, go, attrs, needs})[0], {0, 1, 1, 0});
}

TEST_F(Backward, Matmul) {
  check_grad("matmul", {rnd({3, 4}), rnd({4, 2})});
  check_grad("matmul", {rnd({4}), rnd({4, 2})});
  check_grad("matmul", {rnd({3, 4}), rnd({4})});
  check_grad("matmul", {rnd({4}), rnd({4})});
  check_grad("matmul", {rnd({2, 3, 4}), rnd({4, 2})});
  check_grad("matmul", {rnd({2, 1, 3, 4}), rnd({3, 4, 2})});
  check_grad("matmul", {rnd({4}), rnd({2, 4, 3})});
  check_grad("matmul", {rnd({2, 3, 4}), rnd({4})});
}

TEST_F(Backward, Views) {
  using V = std::vector<int64_t>;
  check_grad("view", {rnd({2, 6})}, Attrs{{"size", V{3, -1}}});
  check_grad("permute", {rnd({2, 3, 4})}, Attrs{{"dims", V{2, 0, 1}}});
  check_grad("expand", {rnd({3, 1})}, Attrs{{"size", V{2, 3, 4}}});
  check_grad("slice", {rnd({5, 3})},
             Attrs{{"dim", int64_t{0}}, {"start", int64_t{1}}, {"end", std::monostate{}}, {"step", int64_t{2}}});
  check_grad("slice", {rnd({5, 3})},
             Attrs{{"dim", int64_t{-1}}, {"start", int64_t{-2}}, {"end", int64_t{100}}, {"step", int64_t{1}}});
  check_grad("select", {rnd({4, 3})}, Attrs{{"dim", int64_t{1}}, {"index", int64_t{-1}}});
  check_grad("to", {rnd({2, 3})}, Attrs{{"dtype", DType::Float64}});
  check_grad("clone", {rnd({2, 3})});
}

TEST_F(Backward, ViewOfExpandedGradient) {
  // The gradient reaching view may be an expanded (non-viewable) tensor.
  Tensor x = rnd({2, 3});
  std::vector<Tensor> in{x}, out{ops::view(x, {6})};
  std::vector<Tensor> go{ops::expand(make({1}, {1}, DType::Float64), {6})};
  Attrs attrs{{"size", std::vector<int64_t>{6}}};
  std::vector<bool> needs{true};
  Tensor g = get_op("view").backward({in, out, go, attrs, needs})[0];
  EXPECT_EQ(g.sizes(), (Shape{2, 3}));
}

TEST_F(Backward, CastsGradientToInputDtype) {
  Tensor a = make({1, 2}, {2}, DType::Float32), b = make({3, 4}, {2}, DType::Float64);
  std::vector<Tensor> in{a, b}, out{ops::mul(a, b)}, go{make({1, 1}, {2}, DType::Float64)};
  Attrs attrs;
  std::vector<bool> needs{true, true};
  auto g = get_op("mul").backward({in, out, go, attrs, needs});
  EXPECT_EQ(g[0].dtype(), DType::Float32);
  EXPECT_EQ(g[1].dtype(), DType::Float64);
  Tensor f = make({1, 2}, {2}, DType::Float32);
  std::vector<Tensor> tin{f}, tout{ops::to_dtype(f, DType::Float64)};
  Attrs tattrs{{"dtype", DType::Float64}};
  std::vector<bool> tneeds{true};
  EXPECT_EQ(get_op("to").backward({tin, tout, go, tattrs, tneeds})[0].dtype(), DType::Float32);
}

TEST_F(Backward, EveryDifferentiableOpHasAFormula) {
  for (const char* name : {"add", "sub", "mul", "div", "neg", "relu", "abs", "exp", "log", "sqrt", "tanh", "sigmoid",
                           "maximum", "minimum", "where", "sum", "amax", "mean", "softmax", "matmul", "view",
                           "permute", "expand", "slice", "select", "to", "clone"})
    EXPECT_TRUE(get_op(name).backward) << name;
}

}  // namespace
}  // namespace tp
