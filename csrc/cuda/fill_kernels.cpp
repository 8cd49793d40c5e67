// fill_ and the in-place random fills on CUDA (see gap_kernels.h).
#include <cstring>

#include "core/error.h"
#include "cuda/copy.h"
#include "cuda/gap_kernels.h"
#include "cuda/index_kernels.h"
#include "cuda/kernels.h"
#include "cuda/nn_kernels.h"
#include "cuda/stream.h"
#include "ops/byte_move.h"
#include "ops/dispatch.h"

namespace tp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxRank = 8;

struct FillParams {
  long long n, nd;
  long long sizes[kMaxRank], strides[kMaxRank];
  unsigned long long bits;
};

std::string fill_name(size_t bytes) { return str("tp_fill_b", bytes); }
std::string fill_source(const std::string& name, size_t bytes) {
  return str("typedef ", bits_ctype(bytes), " E;\n",
             "struct P { long long n, nd; long long sizes[8], strides[8]; unsigned long long bits; };\n"
             "extern \"C\" __global__ void ",
             name,
             "(E* x, P p) {\n"
             "  const E v = (E)p.bits;\n"
             "  const long long step = (long long)gridDim.x * blockDim.x;\n"
             "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += step) {\n"
             "    long long rest = i, off = 0;\n"
             "    for (int d = (int)p.nd - 1; d >= 0; --d) { off += (rest % p.sizes[d]) * p.strides[d]; rest /= p.sizes[d]; }\n"
             "    x[off] = v;\n"
             "  }\n}\n");
}

// x (any strides) <- src (contiguous, same dtype): element i of src goes to
// row-major position i of x (the dispatcher's copy_ has no kernel for a
// strided destination).
std::string put_name(size_t bytes) { return str("tp_put_strided_b", bytes); }
std::string put_source(const std::string& name, size_t bytes) {
  return str("typedef ", bits_ctype(bytes), " E;\n",
             "struct P { long long n, nd; long long sizes[8], strides[8]; unsigned long long bits; };\n"
             "extern \"C\" __global__ void ",
             name,
             "(E* x, const E* __restrict__ src, P p) {\n"
             "  const long long step = (long long)gridDim.x * blockDim.x;\n"
             "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += step) {\n"
             "    long long rest = i, off = 0;\n"
             "    for (int d = (int)p.nd - 1; d >= 0; --d) { off += (rest % p.sizes[d]) * p.strides[d]; rest /= p.sizes[d]; }\n"
             "    x[off] = src[i];\n"
             "  }\n}\n");
}

}  // namespace

bool put_strided(const Tensor& self, const Tensor& src) {
  const size_t bytes = static_cast<size_t>(itemsize(self.dtype()));
  if (!bits_ctype(bytes) || self.dim() > kMaxRank) return false;
  FillParams p{};
  p.n = self.numel();
  if (p.n == 0) return true;
  p.nd = self.dim();
  for (int64_t d = 0; d < self.dim(); ++d) {
    p.sizes[d] = self.sizes()[static_cast<size_t>(d)];
    p.strides[d] = self.strides()[static_cast<size_t>(d)];
  }
  void* px = self.data();
  void* ps = src.data();
  void* args[] = {&px, &ps, &p};
  launch_generated(self.device().index, put_name(bytes), put_source(put_name(bytes), bytes), grid_1d(p.n, kThreads),
                   kThreads, args);
  return true;
}

namespace {

bool fill(const Tensor& self, const Scalar& value) {
  const size_t bytes = static_cast<size_t>(itemsize(self.dtype()));
  if (!bits_ctype(bytes)) return false;
  FillParams p{};
  p.n = self.numel();
  if (p.n == 0) return true;
  if (self.is_contiguous()) {  // one flat run
    p.nd = 1;
    p.sizes[0] = p.n;
    p.strides[0] = 1;
  } else {
    if (self.dim() > kMaxRank) return false;
    p.nd = self.dim();
    for (int64_t d = 0; d < self.dim(); ++d) {
      p.sizes[d] = self.sizes()[static_cast<size_t>(d)];
      p.strides[d] = self.strides()[static_cast<size_t>(d)];
    }
  }
  const Tensor v = scalar_of(value, self.dtype());  // converted as the CPU's fill_ converts
  std::memcpy(&p.bits, v.data(), bytes);
  void* px = self.data();
  void* args[] = {&px, &p};
  const int dev = self.device().index;
  launch_generated(dev, fill_name(bytes), fill_source(fill_name(bytes), bytes), grid_1d(p.n, kThreads), kThreads,
                   args);
  return true;
}

}  // namespace

bool fill_kernel(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<TensorMeta>&,
                 std::vector<Tensor>& out) {
  const std::string name = op.name;
  const bool random = name == "normal_" || name == "uniform_" || name == "bernoulli_.float";
  if (name != "fill_" && !random) return false;
  const Tensor& self = in[0];
  if (self.device().kind != Device::Kind::CUDA) return false;
  if (name == "fill_") {
    if (!fill(self, attrs.get<Scalar>("value"))) return false;
    out = {self};
    return true;
  }
  // The CPU kernel draws into a host tensor of self's shape and dtype (the
  // generator's counters advance as for a CPU tensor), which is copied up.
  check_not_capturing(str(op.name, " on CUDA (its numbers are drawn on the host)").c_str());
  Tensor host = Tensor::empty(self.sizes(), self.dtype());
  run_kernel(op, {host}, attrs);
  Tensor up = to_device(host, self.device().index);
  if (self.is_contiguous()) {
    if (up.numel() > 0) copy_device_to_device(self, up);
  } else if (!put_strided(self, up)) {
    return false;
  }
  out = {self};
  return true;
}

std::vector<std::pair<std::string, std::string>> fill_kernel_sources() {
  std::vector<std::pair<std::string, std::string>> v;
  for (size_t bytes : {1, 2, 4, 8}) {
    v.emplace_back(fill_name(bytes), fill_source(fill_name(bytes), bytes));
    v.emplace_back(put_name(bytes), put_source(put_name(bytes), bytes));
  }
  return v;
}

const char* int_ctype(DType d) {
  switch (d) {
    case DType::Bool:
    case DType::UInt8: return "unsigned char";
    case DType::Int8: return "signed char";
    case DType::Int16: return "short";
    case DType::Int32: return "int";
    case DType::Int64: return "long long";
    default: return nullptr;
  }
}

}  // namespace tp::cuda
