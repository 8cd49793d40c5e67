// erfinv on CUDA (see gap_kernels.h): CUDA's own erfinvf / erfinv per
// element. 16-bit inputs are computed in float32 and rounded once, integer
// and bool inputs converted to the result's floating dtype first, as the
// CPU kernel does.
#include "core/error.h"
#include "cuda/copy.h"
#include "cuda/gap_kernels.h"
#include "cuda/kernels.h"
#include "cuda/nn_kernels.h"
#include "ops/ops.h"

namespace tp::cuda {
namespace {

constexpr int kThreads = 256;

std::string erfinv_name(DType c) { return c == DType::Float64 ? "tp_erfinv_f64" : "tp_erfinv_f32"; }
std::string erfinv_source(const std::string& name, DType c) {
  const bool f64 = c == DType::Float64;
  return str("typedef ", f64 ? "double" : "float", " T;\nextern \"C\" __global__ void ", name,
             "(const T* __restrict__ x, T* __restrict__ y, long long n) {\n"
             "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
             "       i += (long long)gridDim.x * blockDim.x)\n"
             "    y[i] = ", f64 ? "erfinv" : "erfinvf", "(x[i]);\n}\n");
}

}  // namespace

bool erfinv_kernel(const OpDef& op, const std::vector<Tensor>& in, const Attrs&, const std::vector<TensorMeta>& om,
                   std::vector<Tensor>& out) {
  if (std::string(op.name) != "erfinv" || in[0].device().kind != Device::Kind::CUDA || om.size() != 1) return false;
  const DType rt = om[0].dtype;
  if (!is_floating(rt)) return false;
  const DType dt = in[0].dtype();
  if (!is_floating(dt) && dt != DType::Int64 && dt != DType::Int32 && dt != DType::Bool) return false;
  const DType c = rt == DType::Float64 ? DType::Float64 : DType::Float32;
  const int dev = in[0].device().index;
  Tensor x = ops::contiguous(ops::to_dtype(in[0], c));
  Tensor y = empty(om[0].sizes, c, dev);
  long long n = y.numel();
  if (n > 0) {
    void* px = x.data();
    void* py = y.data();
    void* args[] = {&px, &py, &n};
    launch_generated(dev, erfinv_name(c), erfinv_source(erfinv_name(c), c), grid_1d(n, kThreads), kThreads, args);
  }
  out = {c == rt ? y : ops::to_dtype(y, rt)};
  return true;
}

std::vector<std::pair<std::string, std::string>> erfinv_kernel_sources() {
  return {{erfinv_name(DType::Float32), erfinv_source(erfinv_name(DType::Float32), DType::Float32)},
          {erfinv_name(DType::Float64), erfinv_source(erfinv_name(DType::Float64), DType::Float64)}};
}

}  // namespace tp::cuda
