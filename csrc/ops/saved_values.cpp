// What each derivative formula reads by value (OpDef::saved, a SavedSet per
// call given which inputs need a gradient), so that eager autograd keeps only
// those tensors alive until the backward. Every entry was checked against its
// formula: a value is listed when some path of the formula passes it to an
// operator (shape, dtype and device reads need nothing). A wrong entry makes
// the formula raise when it runs (the unkept value is a storage-less
// placeholder the dispatcher refuses), never a wrong gradient. Operators not
// listed keep every input and output.
#include <vector>

#include "ops/families.h"
#include "ops/registry.h"

namespace tp {
namespace {

using Needs = std::vector<bool>;
constexpr uint64_t bit(int i) { return uint64_t{1} << i; }
uint64_t bit_if(bool c, int i) { return c ? bit(i) : 0; }

// Sizes and dtypes only: add, sub, views, cat, sum, mean, copies, ...
SavedSet nothing(const Needs&) { return {}; }
// d f(x) from f(x): exp, tanh, sigmoid, relu, softmax, ...
SavedSet output0(const Needs&) { return {0, bit(0)}; }
// d f(x) from x: log, sin, gelu, silu, ...
SavedSet input0(const Needs&) { return {bit(0), 0}; }
SavedSet input0_output0(const Needs&) { return {bit(0), bit(0)}; }
SavedSet inputs01(const Needs&) { return {bit(0) | bit(1), 0}; }
SavedSet inputs012(const Needs&) { return {bit(0) | bit(1) | bit(2), 0}; }
// nll_loss_grad(grad, logp, target, weight): the target and weight (logp for its shape only).
SavedSet inputs23(const Needs&) { return {bit(2) | bit(3), 0}; }
// masked_fill(self, mask, value): the mask only.
SavedSet input1(const Needs&) { return {bit(1), 0}; }
// Products of two operands (mul, mm, matmul, bmm): each is read only for the other's gradient.
SavedSet product01(const Needs& n) { return {bit_if(n[1], 0) | bit_if(n[0], 1), 0}; }
// addmm/baddbmm (self, mat1, mat2): self's gradient is the (scaled) incoming one.
SavedSet product12(const Needs& n) { return {bit_if(n[2], 1) | bit_if(n[1], 2), 0}; }
// div: grad_x = g / y; grad_y = -g * x / y^2 (y is widened up front).
SavedSet div_saved(const Needs& n) { return {bit(1) | bit_if(n[1], 0), 0}; }
// pow: grad_x reads x and the exponent; grad_exponent also reads the result.
SavedSet pow_saved(const Needs& n) { return {bit(0) | bit(1), bit_if(n[1], 0)}; }
SavedSet hypot_saved(const Needs&) { return {bit(0) | bit(1), bit(0)}; }
// remainder/fmod: only the divisor's gradient reads the operands (their quotient).
SavedSet mod_saved(const Needs& n) { return {n[1] ? bit(0) | bit(1) : 0, 0}; }
// addcmul(self, t1, t2): like a product of t1 and t2.
SavedSet addcmul_saved(const Needs& n) { return {bit_if(n[2], 1) | bit_if(n[1], 2), 0}; }
// lerp(start, end, weight): weight for start's and end's gradients, end - start for weight's.
SavedSet lerp_saved(const Needs& n) { return {bit_if(n[2], 0) | bit_if(n[2], 1) | bit_if(n[0] || n[1], 2), 0}; }
// where(condition, a, b): the condition only.
SavedSet condition0(const Needs&) { return {bit(0), 0}; }
// extremum reductions (max, amax, ...): positions equal to the result.
SavedSet extremum_saved(const Needs&) { return {bit(0), bit(0)}; }
// native_layer_norm / native_batch_norm: input and weight, and the saved mean and rstd outputs.
SavedSet native_norm_saved(const Needs&) { return {bit(0) | bit(1), bit(1) | bit(2)}; }
// native_dropout: the mask (output 1).
SavedSet output1(const Needs&) { return {0, bit(1)}; }
// conv2d(input, weight, bias): input for the weight's gradient, weight for the input's.
SavedSet conv_saved(const Needs& n) { return {bit_if(n[1], 0) | bit_if(n[0], 1), 0}; }
// index(self, indices...): self's values are not read on the CPU, but the device
// formula builds its zeros as an operator of self; the indices always.
SavedSet all_inputs(const Needs&) { return {~uint64_t{0}, 0}; }

}  // namespace

void register_saved_values() {
  struct Entry {
    const char* name;
    SavedFn fn;
  };
  static const Entry entries[] = {
      // pointwise arithmetic (ops/pointwise_ops.cpp, ops/binary_math_ops.cpp)
      {"add", &nothing}, {"sub", &nothing}, {"mul", &product01}, {"div", &div_saved},
      {"maximum", &inputs01}, {"minimum", &inputs01}, {"where", &condition0},
      {"floor_divide", &nothing}, {"remainder", &mod_saved}, {"fmod", &mod_saved}, {"pow", &pow_saved},
      {"atan2", &inputs01}, {"hypot", &hypot_saved}, {"addcmul", &addcmul_saved}, {"addcdiv", &all_inputs},
      {"lerp", &lerp_saved}, {"clamp", &all_inputs}, {"clamp_min", &all_inputs}, {"clamp_max", &all_inputs},
      // unary math and activations (ops/unary_math_ops.cpp): from the result ...
      {"exp", &output0}, {"exp2", &output0}, {"expm1", &output0}, {"sqrt", &output0}, {"rsqrt", &output0},
      {"tan", &output0}, {"tanh", &output0}, {"erfinv", &output0}, {"sigmoid", &output0},
      {"reciprocal", &output0}, {"relu", &output0},
      // ... from the input ...
      {"log", &input0}, {"log2", &input0}, {"log10", &input0}, {"log1p", &input0}, {"sin", &input0},
      {"cos", &input0}, {"asin", &input0}, {"acos", &input0}, {"atan", &input0}, {"sinh", &input0},
      {"cosh", &input0}, {"asinh", &input0}, {"acosh", &input0}, {"atanh", &input0}, {"erf", &input0},
      {"erfc", &input0}, {"logit", &input0}, {"gelu", &input0}, {"silu", &input0}, {"mish", &input0},
      {"softplus", &input0}, {"elu", &input0}, {"leaky_relu", &input0}, {"hardtanh", &input0},
      {"abs", &input0}, {"square", &input0},
      // ... or from neither (constant slope or piecewise constant)
      {"neg", &nothing}, {"sign", &nothing}, {"floor", &nothing}, {"ceil", &nothing}, {"round", &nothing},
      {"trunc", &nothing}, {"frac", &nothing},
      // reductions (ops/reduction_ops.cpp, ops/reduction_extra_ops.cpp)
      {"sum", &nothing}, {"mean", &nothing}, {"prod", &input0}, {"amax", &extremum_saved},
      {"amin", &extremum_saved}, {"max", &extremum_saved}, {"min", &extremum_saved},
      {"var", &input0}, {"var.dim", &input0}, {"var.unbiased", &input0}, {"std", &input0_output0},
      {"std.dim", &input0_output0}, {"std.unbiased", &input0_output0}, {"norm", &input0_output0},
      {"norm.str", &input0_output0}, {"logsumexp", &input0_output0}, {"cumsum", &nothing},
      // views and reshapes (ops/view_ops.cpp), data movement (ops/shape_ops.cpp, ops/copy_ops.cpp)
      {"view", &nothing}, {"permute", &nothing}, {"expand", &nothing}, {"slice", &nothing},
      {"select", &nothing}, {"as_strided", &nothing}, {"diagonal", &nothing}, {"unfold", &nothing}, {"cat", &nothing},
      {"flip", &nothing}, {"roll", &nothing}, {"repeat", &nothing}, {"tril", &nothing}, {"triu", &nothing},
      {"to", &nothing}, {"clone", &nothing}, {"_value_check", &nothing},
      // matmul family (ops/matmul_ops.cpp)
      {"matmul", &product01}, {"mm", &product01}, {"bmm", &product01}, {"addmm", &product12},
      {"baddbmm", &product12},
      // normalization, softmax, dropout, losses (ops/norm_ops.cpp, ops/nn_ops.cpp)
      {"softmax", &output0}, {"log_softmax", &output0}, {"layer_norm", &inputs01},
      {"native_layer_norm", &native_norm_saved}, {"native_batch_norm", &native_norm_saved},
      {"native_dropout", &output1}, {"nll_loss", &inputs012}, {"nll_loss_grad", &inputs23},
      // indexing (ops/index_ops.cpp)
      {"embedding", &inputs01}, {"index", &all_inputs}, {"index_select", &inputs01}, {"gather", &inputs01},
      {"masked_fill.Tensor", &input1}, {"masked_fill.Scalar", &input1},
      // convolution and pooling (ops/conv_ops.cpp, ops/pool_ops.cpp)
      {"conv2d", &conv_saved}, {"max_pool2d_with_indices", &output1}, {"avg_pool2d", &nothing},
      {"adaptive_avg_pool2d", &nothing},
  };
  for (const Entry& e : entries) declare_saved(e.name, e.fn);
}

}  // namespace tp
