// native_dropout on CUDA: the same Philox4x32-10 stream as the CPU kernel
// (ops/generator.h). The call reserves ceil(n / 4) counters of the default
// generator exactly as the CPU does (so tp.manual_seed makes it reproducible,
// and a CPU and a CUDA call after the same seed keep the same elements), and
// element i's keep decision is word i % 4 of counter first + i / 4, computed
// on the device: no random numbers cross the bus.
#include "cuda/copy.h"
#include "cuda/kernels.h"
#include "cuda/nn_kernels.h"
#include "ops/dispatch.h"
#include "ops/generator.h"

namespace tp::cuda {
namespace {

constexpr int kThreads = 256;

std::string dropout_source(const std::string& name, DType dt) {
  std::string s = "typedef " + std::string(float_ctype(dt)) + " T;\n";
  s += R"(__device__ __forceinline__ void tp_philox4x32(unsigned long long ctr, unsigned long long key, unsigned int o[4]) {
  unsigned int c0 = (unsigned int)ctr, c1 = (unsigned int)(ctr >> 32), c2 = 0, c3 = 0;
  unsigned int k0 = (unsigned int)key, k1 = (unsigned int)(key >> 32);
  #pragma unroll
  for (int r = 0; r < 10; ++r) {
    const unsigned long long p0 = 0xD2511F53ull * c0, p1 = 0xCD9E8D57ull * c2;
    const unsigned int n0 = (unsigned int)(p1 >> 32) ^ c1 ^ k0, n2 = (unsigned int)(p0 >> 32) ^ c3 ^ k1;
    c1 = (unsigned int)p1; c3 = (unsigned int)p0; c0 = n0; c2 = n2;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  o[0] = c0; o[1] = c1; o[2] = c2; o[3] = c3;
}
)";
  s += "extern \"C\" __global__ void " + name +
       "(const T* __restrict__ x, T* __restrict__ out, bool* __restrict__ mask, long long n, "
       "unsigned long long key, unsigned long long first, float keep, T scale) {\n";
  s += "  const long long words = (n + 3) / 4, step = (long long)gridDim.x * blockDim.x;\n";
  s += "  for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < words; c += step) {\n";
  s += "    unsigned int r[4];\n";
  s += "    tp_philox4x32(first + (unsigned long long)c, key, r);\n";
  s += "    #pragma unroll\n";
  s += "    for (int j = 0; j < 4; ++j) {\n";
  s += "      const long long i = c * 4 + j;\n";
  s += "      if (i >= n) break;\n";
  s += "      const bool m = (float)(r[j] >> 8) * (1.0f / 16777216.0f) < keep;\n";
  s += "      mask[i] = m;\n";
  s += "      out[i] = m ? x[i] * scale : (T)0;\n";
  s += "    }\n  }\n}\n";
  return s;
}

std::string kname(DType dt) { return str("tp_dropout_", dtype_name(dt)); }

}  // namespace

bool dropout_kernel(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                    const std::vector<TensorMeta>& out_meta, std::vector<Tensor>& out) {
  if (std::string(op.name) != "native_dropout") return false;
  const Tensor& x0 = in[0];
  const DType dt = x0.dtype();
  if ((dt != DType::Float32 && dt != DType::Float64) || out_meta.size() != 2) return false;
  const int dev = x0.device().index;
  static const OpDef& clone = get_op("clone");
  Tensor x = x0.is_contiguous() ? x0 : run_kernel(clone, {x0}, {})[0];
  const double p = attrs.get_or("train", true) ? attrs.get_double("p") : 0.0;
  Tensor o = empty(out_meta[0].sizes, dt, dev), mask = empty(out_meta[1].sizes, DType::Bool, dev);
  long long n = o.numel();
  if (n > 0) {
    const PhiloxRange range = generator_reserve(static_cast<uint64_t>((n + 3) / 4));
    unsigned long long key = range.key, first = range.first;
    float keep = static_cast<float>(1.0 - p);
    const double scale = p < 1 ? 1.0 / (1.0 - p) : 0.0;
    float scale32 = static_cast<float>(scale);
    double scale64 = scale;
    void* px = x.data();
    void* po = o.data();
    void* pm = mask.data();
    void* args[] = {&px, &po, &pm, &n, &key, &first, &keep, dt == DType::Float32 ? static_cast<void*>(&scale32)
                                                                                 : static_cast<void*>(&scale64)};
    const std::string k = kname(dt);
    launch_generated(dev, k, dropout_source(k, dt), grid_1d((n + 3) / 4, kThreads), kThreads, args);
  }
  out = {o, mask};
  return true;
}

std::vector<std::pair<std::string, std::string>> dropout_kernel_sources() {
  return {{kname(DType::Float32), dropout_source(kname(DType::Float32), DType::Float32)},
          {kname(DType::Float64), dropout_source(kname(DType::Float64), DType::Float64)}};
}

}  // namespace tp::cuda
