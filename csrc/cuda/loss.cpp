// nll_loss and its gradient on CUDA (cross_entropy is log_softmax, which Stax
// generates, then nll_loss). Stax has no loop rule for them (their index is
// data), so they are small NVRTC kernels: the reduced loss and the class-weight
// total are summed in double by one block in a fixed order (deterministic),
// the unreduced loss and the gradient are pointwise. A target out of range
// contributes nothing (the CPU raises IndexError; the device cannot).
#include "cuda/copy.h"
#include "cuda/kernels.h"
#include "cuda/nn_kernels.h"
#include "ops/dispatch.h"

namespace tp::cuda {
namespace {

constexpr int kThreads = 256;

struct NllParams {
  long long N, C, R, ignore, has_weight, mode;  // mode: 0 none, 1 mean, 2 sum
};

const char* kNllStruct = "struct P { long long N, C, R, ignore, has_weight, mode; };\n";

std::string head(DType dt) { return "typedef " + std::string(float_ctype(dt)) + " T;\n" + kNllStruct; }

// One block: stats[0] = -sum w[t] x[t], stats[1] = sum w[t]; out[0] = the loss.
std::string reduce_source(const std::string& name, DType dt) {
  std::string s = head(dt);
  s += "extern \"C\" __global__ void " + name + "(const T* __restrict__ x, const long long* __restrict__ t, "
       "const T* __restrict__ w, T* __restrict__ out, double* __restrict__ stats, P p) {\n";
  s += "  __shared__ double st[" + std::to_string(kThreads) + "], sw[" + std::to_string(kThreads) + "];\n";
  s += "  double total = 0.0, wsum = 0.0;\n";
  s += "  for (long long i = threadIdx.x; i < p.N * p.R; i += blockDim.x) {\n";
  s += "    const long long c = t[i];\n";
  s += "    if (c == p.ignore || c < 0 || c >= p.C) continue;\n";
  s += "    const long long n = i / p.R, r = i % p.R;\n";
  s += "    const double wc = p.has_weight ? (double)w[c] : 1.0;\n";
  s += "    total -= wc * (double)x[(n * p.C + c) * p.R + r];\n";
  s += "    wsum += wc;\n  }\n";
  s += "  st[threadIdx.x] = total; sw[threadIdx.x] = wsum;\n  __syncthreads();\n";
  s += "  for (int k = blockDim.x / 2; k > 0; k >>= 1) {\n";
  s += "    if (threadIdx.x < k) { st[threadIdx.x] += st[threadIdx.x + k]; sw[threadIdx.x] += sw[threadIdx.x + k]; }\n";
  s += "    __syncthreads();\n  }\n";
  s += "  if (threadIdx.x == 0) { stats[0] = st[0]; stats[1] = sw[0]; out[0] = (T)(p.mode == 2 ? st[0] : st[0] / sw[0]); }\n}\n";
  return s;
}

std::string none_source(const std::string& name, DType dt) {
  std::string s = head(dt);
  s += "extern \"C\" __global__ void " + name + "(const T* __restrict__ x, const long long* __restrict__ t, "
       "const T* __restrict__ w, T* __restrict__ out, P p) {\n";
  s += "  const long long step = (long long)gridDim.x * blockDim.x;\n";
  s += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.N * p.R; i += step) {\n";
  s += "    const long long c = t[i], n = i / p.R, r = i % p.R;\n";
  s += "    T v = (T)0;\n";
  s += "    if (c != p.ignore && c >= 0 && c < p.C) v = -(p.has_weight ? w[c] : (T)1) * x[(n * p.C + c) * p.R + r];\n";
  s += "    out[i] = v;\n  }\n}\n";
  return s;
}

std::string grad_source(const std::string& name, DType dt) {
  std::string s = head(dt);
  s += "extern \"C\" __global__ void " + name + "(const T* __restrict__ g, const long long* __restrict__ t, "
       "const T* __restrict__ w, const double* __restrict__ stats, T* __restrict__ gx, P p) {\n";
  s += "  const long long step = (long long)gridDim.x * blockDim.x;\n";
  s += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.N * p.C * p.R; i += step) {\n";
  s += "    const long long r = i % p.R, c = (i / p.R) % p.C, n = i / (p.R * p.C);\n";
  s += "    const long long tc = t[n * p.R + r];\n";
  s += "    T v = (T)0;\n";
  s += "    if (tc == c && c != p.ignore) {\n";
  s += "      const T gi = p.mode == 0 ? g[n * p.R + r] : p.mode == 1 ? (T)((double)g[0] * (1.0 / stats[1])) : g[0];\n";
  s += "      v = -(p.has_weight ? w[c] : (T)1) * gi;\n    }\n";
  s += "    gx[i] = v;\n  }\n}\n";
  return s;
}

std::string kname(const char* what, DType dt) { return str("tp_", what, "_", dtype_name(dt)); }

}  // namespace

bool loss_kernel(const OpDef& op, const std::vector<Tensor>& in0, const Attrs& attrs,
                 const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out) {
  const std::string name = op.name;
  if (name != "nll_loss" && name != "nll_loss_grad") return false;
  const bool grad = name == "nll_loss_grad";
  // nll_loss: (x, target, weight); nll_loss_grad: (grad, x, target, weight).
  std::vector<Tensor> in = in0;
  // A compiled backward may pass the reduced loss's gradient as a number (a
  // 0-d CPU tensor): it goes to the device like the eager binary operands.
  if (grad && in[0].defined() && in[0].device().kind == Device::Kind::CPU && in[0].dim() == 0 &&
      in[1].device().kind == Device::Kind::CUDA)
    in[0] = to_device(Tensor::scalar_tensor(in[0].item(), in[1].dtype()), in[1].device().index);
  const Tensor& x = in[grad ? 1 : 0];
  const Tensor& target = in[grad ? 2 : 1];
  const Tensor& weight = in[grad ? 3 : 2];
  const DType dt = x.dtype();
  if ((dt != DType::Float32 && dt != DType::Float64) || target.dtype() != DType::Int64 || out_meta[0].dtype != dt)
    return false;
  for (const Tensor& t : in)
    if (t.defined() && (t.device().kind != Device::Kind::CUDA || t.device().index != x.device().index)) return false;
  if (weight.defined() && weight.dtype() != dt) return false;
  if (grad && in[0].dtype() != dt) return false;
  const int dev = x.device().index;
  static const OpDef& clone = get_op("clone");
  auto contig = [&](const Tensor& t) { return !t.defined() || t.is_contiguous() ? t : run_kernel(clone, {t}, {})[0]; };
  Tensor xc = contig(x), tc = contig(target), wc = contig(weight);
  NllParams p{};
  p.N = x.dim() >= 2 ? x.sizes()[0] : 1;
  p.C = x.dim() >= 2 ? x.sizes()[1] : x.sizes()[0];
  p.R = 1;
  for (int64_t d = 2; d < x.dim(); ++d) p.R *= x.sizes()[d];
  p.ignore = attrs.get_int("ignore_index");
  p.has_weight = weight.defined() ? 1 : 0;
  const std::string& red = attrs.get_str("reduction");
  p.mode = red == "none" ? 0 : red == "mean" ? 1 : 2;
  void* px = xc.data();
  void* pt = tc.data();
  void* pw = wc.defined() ? wc.data() : xc.data();  // never read without a weight
  Tensor stats = empty({2}, DType::Float64, dev);
  void* ps = stats.data();
  const std::string rk = kname("nll_reduce", dt);
  if (!grad) {
    Tensor o = empty(out_meta[0].sizes, dt, dev);
    void* po = o.data();
    if (p.mode == 0) {
      const std::string k = kname("nll_none", dt);
      void* args[] = {&px, &pt, &pw, &po, &p};
      if (p.N * p.R > 0) launch_generated(dev, k, none_source(k, dt), grid_1d(p.N * p.R, kThreads), kThreads, args);
    } else {
      void* args[] = {&px, &pt, &pw, &po, &ps, &p};
      launch_generated(dev, rk, reduce_source(rk, dt), 1, kThreads, args);
    }
    out = {o};
    return true;
  }
  Tensor gc = contig(in[0]);
  if (p.mode == 1) {  // the class-weight total of the targets
    Tensor scratch = empty({1}, dt, dev);
    void* po = scratch.data();
    void* args[] = {&px, &pt, &pw, &po, &ps, &p};
    launch_generated(dev, rk, reduce_source(rk, dt), 1, kThreads, args);
  }
  Tensor gx = empty(out_meta[0].sizes, dt, dev);
  void* pg = gc.data();
  void* pgx = gx.data();
  void* args[] = {&pg, &pt, &pw, &ps, &pgx, &p};
  const std::string k = kname("nll_grad", dt);
  if (gx.numel() > 0) launch_generated(dev, k, grad_source(k, dt), grid_1d(gx.numel(), kThreads), kThreads, args);
  out = {gx};
  return true;
}

std::vector<std::pair<std::string, std::string>> loss_kernel_sources() {
  std::vector<std::pair<std::string, std::string>> v;
  for (DType dt : {DType::Float32, DType::Float64}) {
    v.emplace_back(kname("nll_reduce", dt), reduce_source(kname("nll_reduce", dt), dt));
    v.emplace_back(kname("nll_none", dt), none_source(kname("nll_none", dt), dt));
    v.emplace_back(kname("nll_grad", dt), grad_source(kname("nll_grad", dt), dt));
  }
  return v;
}

}  // namespace tp::cuda
