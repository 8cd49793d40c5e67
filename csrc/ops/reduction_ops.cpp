// The plain reductions: sum, mean, prod, amax/amin, max()/min() over all
// elements, all/any. The loops are in reduce_kernel.h; this file holds the
// operator definitions (schema, inference, kernel entry, derivative).
#include <algorithm>
#include <cmath>

#include "ops/families.h"
#include "ops/reduce_kernel.h"
#include "ops/reduction_args.h"
#include "ops/reduction_grad.h"
#include "ops/registry.h"

// GCC 12 warns falsely about the attribute initializer lists below.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace tp {
namespace {
using reduce::MaxPolicy;
using reduce::MinPolicy;
using reduce::ProdPolicy;
using reduce::SumPolicy;

// ---------------------------------------------------------------------------
// Shared argument handling.
using reduce::dtype_arg;
using reduce::keepdim_of;
std::vector<bool> mask_of(const OpDef& op, int64_t ndim, const Attrs& attrs) { return reduce::mask_of(op.name, ndim, attrs); }
int64_t reduced_count(const Shape& sizes, const std::vector<bool>& mask) { return reduce::count_of(sizes, mask); }

TensorMeta reduced_meta(const OpDef& op, const TensorMeta& in, const Attrs& attrs, DType dt) {
  auto mask = mask_of(op, static_cast<int64_t>(in.sizes.size()), attrs);
  return TensorMeta::contiguous(reduced_shape(in.sizes, mask, keepdim_of(attrs)), dt);
}

// Max/min style reductions have no identity: reducing an empty slice is an error.
void check_nonempty_slices(const OpDef& op, const TensorMeta& in, const std::vector<bool>& mask, const Shape& out) {
  if (numel(out) == 0) return;
  for (size_t d = 0; d < mask.size(); ++d)
    TP_CHECK(!mask[d] || in.sizes[d] != 0, IndexError, op.name, ": expected reduction dim ", d,
             " to have non-zero size (input shape ", shape_str(in.sizes), ")");
}

// Runs policy P over `x` into a fresh tensor of its natural result dtype and
// converts to the inferred dtype when they differ (e.g. sum(bool, dtype=bool)).
template <template <class> class P>
Tensor reduce_to(const OpDef& op, const Tensor& x, const TensorMeta& om, const std::vector<bool>& mask) {
  Tensor out;
  TP_DISPATCH_ALL(x.dtype(), op.name, ([&]<class T>() {
                    using Out = typename P<T>::Out;
                    TensorMeta m = om;
                    m.dtype = dtype_of<Out>::value;
                    out = alloc_out(m);
                    reduce::reduce_kernel<P<T>, T>(x, out, mask);
                  }));
  if (out.dtype() == om.dtype) return out;
  Tensor conv = alloc_out(om);
  copy_into(conv, out);
  return conv;
}

// The input converted to the requested `dtype=` before reducing (PyTorch's order).
Tensor input_in(const Tensor& x, const Attrs& attrs, DType out_dtype) {
  return dtype_arg(attrs) && x.dtype() != out_dtype ? convert(x, out_dtype) : x;
}

// ---------------------------------------------------------------------------
// sum / prod: bool and integer inputs accumulate in int64.
DType int64_unless_floating(DType in, const Attrs& attrs) {
  if (auto d = dtype_arg(attrs)) return *d;
  return is_floating(in) ? in : DType::Int64;
}

std::vector<TensorMeta> sum_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  return {reduced_meta(op, in[0], attrs, int64_unless_floating(in[0].dtype, attrs))};
}

std::vector<Tensor> sum_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                            const std::vector<TensorMeta>& om) {
  auto mask = mask_of(op, in[0].dim(), attrs);
  return {reduce_to<SumPolicy>(op, input_in(in[0], attrs, om[0].dtype), om[0], mask)};
}

std::vector<Tensor> prod_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                             const std::vector<TensorMeta>& om) {
  auto mask = mask_of(op, in[0].dim(), attrs);
  return {reduce_to<ProdPolicy>(op, input_in(in[0], attrs, om[0].dtype), om[0], mask)};
}

// ---------------------------------------------------------------------------
// mean: floating point only (an integer input needs dtype=, like PyTorch).
std::vector<TensorMeta> mean_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  DType dt = dtype_arg(attrs).value_or(in[0].dtype);
  TP_CHECK(is_floating(dt), TypeError, op.name,
           ": could not infer output dtype; the input dtype must be floating point (or pass dtype=), got ",
           dtype_name(dt));
  return {reduced_meta(op, in[0], attrs, dt)};
}

std::vector<Tensor> mean_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                             const std::vector<TensorMeta>& om) {
  auto mask = mask_of(op, in[0].dim(), attrs);
  Tensor x = input_in(in[0], attrs, om[0].dtype);
  Tensor out = reduce_to<SumPolicy>(op, x, om[0], mask);
  const int64_t count = reduced_count(in[0].sizes(), mask);
  TP_DISPATCH_FLOATING(out.dtype(), op.name, ([&]<class T>() {
                         T* o = out.data_as<T>();
                         const T c = static_cast<T>(count);  // 0 -> NaN, like 0/0
                         for (int64_t i = 0, e = out.numel(); i < e; ++i) o[i] = o[i] / c;
                       }));
  return {out};
}

std::vector<Tensor> mean_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  auto mask = reduction_mask(attrs.get_or<std::vector<int64_t>>("dim", {}), in[0].dim(), "mean");
  Tensor x = dtype_arg(attrs) ? ops::to_dtype(in[0], *dtype_arg(attrs)) : in[0];
  auto dims = attrs.get_or<std::vector<int64_t>>("dim", {});
  return {ops::div(ops::sum(x, dims, keepdim_of(attrs)), ops::scalar(Scalar(reduced_count(in[0].sizes(), mask))))};
}

// ---------------------------------------------------------------------------
// amax / amin / max() / min(): NaN propagates; empty slices are an error.
std::vector<TensorMeta> extremum_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  auto mask = mask_of(op, static_cast<int64_t>(in[0].sizes.size()), attrs);
  Shape out = reduced_shape(in[0].sizes, mask, keepdim_of(attrs));
  check_nonempty_slices(op, in[0], mask, out);
  return {TensorMeta::contiguous(std::move(out), in[0].dtype)};
}

template <template <class> class P>
std::vector<Tensor> extremum_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                 const std::vector<TensorMeta>& om) {
  return {reduce_to<P>(op, in[0], om[0], mask_of(op, in[0].dim(), attrs))};
}

// ---------------------------------------------------------------------------
// all / any: the truth value of every element (NaN is true), result bool.
// all/any give bool, except for uint8 inputs, which keep uint8 (PyTorch's legacy rule).
std::vector<TensorMeta> logical_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  return {reduced_meta(op, in[0], attrs, in[0].dtype == DType::UInt8 ? DType::UInt8 : DType::Bool)};
}

template <template <class> class P>
std::vector<Tensor> logical_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                const std::vector<TensorMeta>& om) {
  Tensor b = convert(in[0], DType::Bool);
  return {reduce_to<P>(op, b, om[0], mask_of(op, in[0].dim(), attrs))};
}

// ---------------------------------------------------------------------------
// Derivative formulas.
std::vector<bool> mask_for(const BackwardArgs& a, const char* name) {
  return mask_of(get_op(name), a.inputs[0].dim(), a.attrs);
}

std::vector<Tensor> sum_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const Tensor& x = a.inputs[0];
  Tensor gk = ops::as_keepdim(g, x, mask_for(a, "sum"), keepdim_of(a.attrs));
  return {ops::to_dtype(ops::expand(gk, x.sizes()), x.dtype())};
}

std::vector<Tensor> mean_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const Tensor& x = a.inputs[0];
  auto mask = mask_for(a, "mean");
  Tensor gk = ops::div(ops::as_keepdim(g, x, mask, keepdim_of(a.attrs)),
                       ops::scalar(Scalar(reduced_count(x.sizes(), mask))));
  return {ops::to_dtype(ops::expand(gk, x.sizes()), x.dtype())};
}

// The same with the element count computed by the graph (a symbolic joint
// trace): the formula's 1/N above is a number of the example's sizes.
std::vector<Tensor> mean_symbolic_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const Tensor& x = a.inputs[0];
  auto mask = mask_for(a, "mean");
  Tensor gk = ops::as_keepdim(g, x, mask, keepdim_of(a.attrs));
  Tensor r = ops::div(gk, ops::to_dtype(ops::count_tensor(x, mask), gk.dtype()));
  return {ops::to_dtype(ops::expand(r, x.sizes()), x.dtype())};
}

// d prod / d x_i = product of the other elements. Without zeros that is
// prod / x_i; a slice with one zero z passes the product of its non-zeros P to
// z's position and x_z * P / x_i (0, but not constant: d/dx_z is P / x_i) to
// the others; a slice with two zeros a, b passes x_b * P to a (and x_a * P to
// b) and 0 to the others; with three or more zeros the gradient and its
// derivative are 0. Written so that the formula is itself differentiable (grad
// of grad, jacfwd(grad(f))) at inputs with zeros.
std::vector<Tensor> prod_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const Tensor& x = a.inputs[0];
  if (x.dim() == 0) return {ops::reduce_grad(g, x)};
  auto mask = mask_for(a, "prod");
  std::vector<int64_t> dims;
  for (size_t d = 0; d < mask.size(); ++d)
    if (mask[d]) dims.push_back(static_cast<int64_t>(d));
  const bool keep = keepdim_of(a.attrs);
  const std::optional<int64_t> dim = a.attrs.get_optional_int("dim");
  Tensor gk = ops::as_keepdim(g, x, mask, keep);
  const Tensor zero_s = ops::scalar(Scalar(0.0));
  Tensor zero = ops::eq(x, zero_s);
  Tensor zeros_in_slice = ops::sum(zero, dims, true);
  Tensor nonzero = ops::where(zero, ops::scalar(Scalar(1.0)), x);
  Tensor prod_nz = dim ? ops::prod(nonzero, dim, true) : ops::as_keepdim(ops::prod(nonzero), x, mask, false);
  Tensor zero_sum = ops::sum(ops::where(zero, x, zero_s), dims, true);  // the sum of the zeros: 0, with a derivative
  Tensor no_zero = ops::eq(zeros_in_slice, ops::scalar(Scalar(int64_t{0})));
  Tensor one_zero = ops::eq(zeros_in_slice, ops::scalar(Scalar(int64_t{1})));
  Tensor two_zeros = ops::eq(zeros_in_slice, ops::scalar(Scalar(int64_t{2})));
  Tensor others_nz = ops::div(prod_nz, nonzero);
  Tensor if_one = ops::where(zero, prod_nz, ops::mul(zero_sum, others_nz));
  Tensor if_two = ops::where(zero, ops::mul(ops::sub(zero_sum, x), prod_nz), zero_s);
  Tensor others = ops::where(no_zero, others_nz, ops::where(one_zero, if_one, ops::where(two_zeros, if_two, zero_s)));
  return {ops::reduce_grad(ops::mul(gk, others), x)};
}

template <const char* Name>
std::vector<Tensor> extremum_backward(const BackwardArgs& a) {
  const Tensor& g = ops::grad_out(a);
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  return {ops::extremum_grad(g, a.inputs[0], a.outputs[0], mask_for(a, Name), keepdim_of(a.attrs))};
}
constexpr char kAmax[] = "amax";
constexpr char kAmin[] = "amin";
constexpr char kMax[] = "max";
constexpr char kMin[] = "min";

}  // namespace

void register_reduction_ops() {
  auto reg = [](OpDef d) {
    d.num_inputs = 1;
    register_op(d);
  };
  reg({.name = "sum",
       .schema = "sum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
       .tags = kReduction, .infer = &sum_infer, .cpu = &sum_cpu, .backward = &sum_backward});
  reg({.name = "amax", .schema = "amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor", .tags = kReduction,
       .infer = &extremum_infer, .cpu = &extremum_cpu<MaxPolicy>, .backward = &extremum_backward<kAmax>});
  reg({.name = "amin", .schema = "amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor", .tags = kReduction,
       .infer = &extremum_infer, .cpu = &extremum_cpu<MinPolicy>, .backward = &extremum_backward<kAmin>});
  reg({.name = "mean",
       .schema = "mean(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
       .tags = kReduction | kComposite, .infer = &mean_infer, .cpu = &mean_cpu, .backward = &mean_backward,
       .symbolic_backward = &mean_symbolic_backward,
       .decompose = &mean_decompose});
  reg({.name = "prod",
       .schema = "prod(Tensor self, int? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
       .tags = kReduction, .infer = &sum_infer, .cpu = &prod_cpu, .backward = &prod_backward});
  // max(self)/min(self): the full reductions (max.dim and max.other live in reduction_extra_ops.cpp).
  reg({.name = "max", .schema = "max(Tensor self) -> Tensor", .tags = kReduction, .infer = &extremum_infer,
       .cpu = &extremum_cpu<MaxPolicy>, .backward = &extremum_backward<kMax>});
  reg({.name = "min", .schema = "min(Tensor self) -> Tensor", .tags = kReduction, .infer = &extremum_infer,
       .cpu = &extremum_cpu<MinPolicy>, .backward = &extremum_backward<kMin>});
  reg({.name = "all", .schema = "all(Tensor self, int[1]? dim=None, bool keepdim=False) -> Tensor",
       .tags = kReduction, .infer = &logical_infer, .cpu = &logical_cpu<MinPolicy>});
  reg({.name = "any", .schema = "any(Tensor self, int[1]? dim=None, bool keepdim=False) -> Tensor",
       .tags = kReduction, .infer = &logical_infer, .cpu = &logical_cpu<MaxPolicy>});
}

}  // namespace tp
