// native_batch_norm on CUDA: the batch statistics and the normalization run
// as the eager CUDA operators (mean, sub, mul, rsqrt: Stax-generated kernels),
// called through run_kernel so that neither autograd nor a running capture
// sees the pieces (the dispatcher records native_batch_norm itself). Training
// moves the running statistics toward the batch's (unbiased variance) in
// place, as on the CPU. A compiled region in evaluation mode does not come
// here: Stax has a loop rule for it and fuses it with its neighbours.
#include "cuda/copy.h"
#include "cuda/nn_kernels.h"
#include "ops/dispatch.h"

namespace tp::cuda {
namespace {

Tensor call1(const char* name, const std::vector<Tensor>& in, const Attrs& attrs = {}) {
  return run_kernel(get_op(name), in, attrs)[0];
}
Tensor num(double v) { return Tensor::wrapped_scalar(Scalar(v)); }

// A [C] vector as [1, C, 1, ...] for broadcasting against an (N, C, ...) input.
Tensor per_channel(const Tensor& v, int64_t nd) {
  Shape sizes(static_cast<size_t>(nd), 1), strides(static_cast<size_t>(nd), 0);
  sizes[1] = v.sizes()[0];
  strides[1] = v.strides()[0];
  return v.as_strided(sizes, strides, v.offset());
}
Tensor flat(const Tensor& v, int64_t c) { return v.as_strided({c}, {1}, v.offset()); }  // v contiguous

}  // namespace

bool batch_norm_kernel(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                       const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out) {
  if (std::string(op.name) != "native_batch_norm") return false;
  const Tensor& x = in[0];
  const DType dt = x.dtype();
  if ((dt != DType::Float32 && dt != DType::Float64) || x.dim() < 2) return false;
  for (const Tensor& t : in)
    if (t.defined() && (t.device().kind != Device::Kind::CUDA || t.device().index != x.device().index ||
                        t.dtype() != dt))
      return false;
  const bool training = attrs.get_or("training", false);
  const double eps = attrs.get_double("eps"), momentum = attrs.get_double("momentum");
  const int64_t nd = x.dim(), C = x.sizes()[1];
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < nd; ++d)
    if (d != 1) dims.push_back(d);
  const Attrs keep = {{"dim", dims}, {"keepdim", true}, {"dtype", AttrValue(std::monostate{})}};
  Tensor mean, var;  // [1, C, 1, ...]
  Tensor centered;
  if (training) {
    mean = call1("mean", {x}, keep);
    centered = call1("sub", {x, mean});
    var = call1("mean", {call1("mul", {centered, centered})}, keep);
  } else {
    if (!in[3].defined() || !in[4].defined()) return false;
    mean = per_channel(in[3], nd);
    var = per_channel(in[4], nd);
    centered = call1("sub", {x, mean});
  }
  Tensor rstd = call1("rsqrt", {call1("add", {var, num(eps)})});
  Tensor y = call1("mul", {centered, rstd});
  if (in[1].defined()) y = call1("mul", {y, per_channel(in[1], nd)});
  if (in[2].defined()) y = call1("add", {y, per_channel(in[2], nd)});
  Tensor save_mean = call1("clone", {mean}), save_rstd = call1("clone", {rstd});
  save_mean = flat(save_mean, C);
  save_rstd = flat(save_rstd, C);
  if (training) {
    const double count = static_cast<double>(x.numel() / std::max<int64_t>(1, C));
    auto update = [&](const Tensor& running, const Tensor& batch) {
      if (!running.defined()) return;
      Tensor next = call1("add", {call1("mul", {running, num(1 - momentum)}), call1("mul", {batch, num(momentum)})});
      run_kernel(get_op("copy_"), {running, next}, {});
      running.bump_version();
    };
    update(in[3], save_mean);
    update(in[4], call1("mul", {flat(call1("clone", {var}), C), num(count / std::max(1.0, count - 1))}));
  }
  if (!y.is_contiguous()) y = call1("clone", {y});
  out = {y, save_mean, save_rstd};
  (void)out_meta;
  return true;
}

}  // namespace tp::cuda
