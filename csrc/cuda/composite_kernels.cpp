// CUDA kernels made of other eager CUDA operators (see gap_kernels.h), called
// through run_kernel so that neither autograd nor a running capture sees the
// pieces (the dispatcher records the operator itself), as batch_norm.cpp does:
//   native_layer_norm: Stax's CUDA printer has no Welford accumulator, so the
//     three-output operator had no generated kernel. The row statistics come
//     from var (two plain reductions in double on CUDA) and mean (accumulated
//     in double), as the CPU accumulates in double; rstd = rsqrt(var + eps),
//     y = (x - mean) * rstd [* weight] [+ bias]. 16-bit inputs compute in
//     float32 and round each output once;
//   select_scatter / slice_scatter / as_strided_scatter: the CPU kernel's
//     recipe (ops/view_scatter_ops.cpp) with device copies: self copied into a
//     fresh contiguous tensor, the view operator's own kernel (device-neutral:
//     it re-describes the storage) names the region, src is copied into it.
#include <limits>

#include "core/grad_mode.h"
#include "cuda/copy.h"
#include "cuda/gap_kernels.h"
#include "ops/dispatch.h"
#include "ops/ops.h"

namespace tp::cuda {
namespace {

Tensor call1(const char* name, const std::vector<Tensor>& in, const Attrs& attrs = {}) {
  return run_kernel(get_op(name), in, attrs)[0];
}
Tensor num(double v) { return Tensor::wrapped_scalar(Scalar(v)); }

bool on_device(const Tensor& t, int dev) {
  return t.device().kind == Device::Kind::CUDA && t.device().index == dev;
}

bool native_layer_norm(const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<TensorMeta>& om,
                       std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  const DType dt = x.dtype();
  if (!is_floating(dt) || om.size() != 3) return false;
  const int dev = x.device().index;
  for (size_t i = 1; i < 3; ++i)
    if (in[i].defined() && (!on_device(in[i], dev) || !is_floating(in[i].dtype()))) return false;
  const DType c = dt == DType::Float64 ? DType::Float64 : DType::Float32;
  const int64_t k = static_cast<int64_t>(attrs.get<std::vector<int64_t>>("normalized_shape").size());
  std::vector<int64_t> dims;
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) dims.push_back(d);
  AutoGradMode no_grad(false);
  if (x.numel() == 0) {
    // No reduction to generate: empty outputs, and statistics of empty rows
    // (normalized_shape with a 0) are NaN, the CPU's 0/0.
    out = {empty(om[0].sizes, om[0].dtype, dev), empty(om[1].sizes, om[1].dtype, dev),
           empty(om[2].sizes, om[2].dtype, dev)};
    Attrs nan;
    nan.set("value", Scalar(std::numeric_limits<double>::quiet_NaN()));
    for (size_t i = 1; i < 3; ++i)
      if (out[i].numel() > 0) run_kernel(get_op("fill_"), {out[i]}, nan);
    return true;
  }
  const Tensor xc = ops::to_dtype(x, c);
  // var_mean is an implicit composite (var, then mean): its two parts here.
  // mean accumulates in double (dtype=float64), as the CPU's does.
  Attrs var_attrs;
  var_attrs.set("dim", dims);
  var_attrs.set("correction", Scalar(0.0));
  var_attrs.set("keepdim", true);
  Attrs mean_attrs;
  mean_attrs.set("dim", dims);
  mean_attrs.set("keepdim", true);
  mean_attrs.set("dtype", DType::Float64);
  const Tensor var = call1("var", {xc}, var_attrs);
  const Tensor mean = ops::to_dtype(call1("mean", {xc}, mean_attrs), c);
  Tensor rstd = call1("rsqrt", {call1("add", {var, num(attrs.get_double("eps"))})});
  Tensor y = call1("mul", {call1("sub", {xc, mean}), rstd});
  if (in[1].defined()) y = call1("mul", {y, ops::to_dtype(in[1], c)});
  if (in[2].defined()) y = call1("add", {y, ops::to_dtype(in[2], c)});
  auto finish = [&](Tensor t, const TensorMeta& m) {
    if (t.dtype() != m.dtype) t = ops::to_dtype(t, m.dtype);
    if (!t.is_contiguous()) t = call1("clone", {t});
    TP_CHECK(t.sizes() == m.sizes, Error, "native_layer_norm (CUDA): result of size ", shape_str(t.sizes()),
             " where ", shape_str(m.sizes), " was inferred");
    return t;
  };
  out = {finish(y, om[0]), finish(mean, om[1]), finish(rstd, om[2])};
  return true;
}

bool view_scatter(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                  const std::vector<TensorMeta>& om, std::vector<Tensor>& out) {
  if (in.size() != 2 || !in[0].defined() || !in[1].defined() || om.size() != 1) return false;
  const int dev = in[0].device().index;
  if (!on_device(in[0], dev) || !on_device(in[1], dev)) return false;
  const std::string name = op.name;
  const std::string view_name = name.substr(0, name.size() - std::string("_scatter").size());
  const OpDef& view_op = get_op(view_name);  // (a named string: GCC 13 warns of a reference into a temporary)
  AutoGradMode no_grad(false);
  // clone: a fresh contiguous copy (clone's result is always contiguous).
  Tensor r = call1("clone", {in[0]});
  TP_CHECK(r.is_contiguous() && r.impl()->storage != in[0].impl()->storage && r.sizes() == om[0].sizes, Error,
           op.name, " (CUDA): clone gave no fresh contiguous copy");
  if (r.numel() > 0) {
    Tensor view = run_kernel(view_op, {r}, attrs).at(0);
    TP_CHECK(view.impl()->storage == r.impl()->storage, Error, op.name, " (CUDA): the view copied");
    if (view.numel() > 0) run_kernel(get_op("copy_"), {view, in[1]}, {});
  }
  out = {r};
  return true;
}

}  // namespace

bool composite_kernel(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                      const std::vector<TensorMeta>& om, std::vector<Tensor>& out) {
  const std::string name = op.name;
  if (in.empty() || !in[0].defined() || in[0].device().kind != Device::Kind::CUDA) return false;
  if (name == "native_layer_norm") return native_layer_norm(in, attrs, om, out);
  if (name == "select_scatter" || name == "slice_scatter" || name == "as_strided_scatter")
    return view_scatter(op, in, attrs, om, out);
  return false;
}

}  // namespace tp::cuda
