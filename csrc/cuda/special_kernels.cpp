// Elementwise functions Stax has no scalar code for (see gap_kernels.h), one
// NVRTC kernel per (function, float32/float64):
//   lgamma, digamma, polygamma(n), i0, special_i1 — the CPU kernels'
//     algorithms (ops/special_ops.cpp) transcribed, evaluated in double and
//     rounded once, so both devices agree to a few double ulp before that
//     rounding (lgamma is CUDA's lgamma, the CPU's std::lgamma: both a few ulp);
//   erf and gelu (approximate='none') in float64: the CPU's float64 formulas
//     (erf; x/2 * erfc(-x/sqrt 2)) with CUDA's double erf / erfc (float32 and
//     16-bit stay generated: their decompositions are polynomials Stax prints);
//   round with decimals != 0: rint(x * 10^d) / 10^d (d > 0) or
//     rint(x / 10^-d) * 10^-d (d < 0) in the tensor's type, as the CPU computes
//     it, so the results are the CPU's bit for bit.
// Inputs are converted on the device to the result's type first (integers to
// float32, as the CPU kernels do); 16-bit floats compute in float32 and round
// once at the end.
#include <cmath>

#include "core/error.h"
#include "cuda/copy.h"
#include "cuda/gap_kernels.h"
#include "cuda/kernels.h"
#include "cuda/nn_kernels.h"
#include "ops/ops.h"

namespace tp::cuda {
namespace {

constexpr int kThreads = 256;

// The CPU's scalar algorithms in double (special_ops.cpp; comments there).
// The reflection term of digamma is added last, as the CPU's recursion does.
constexpr const char* kDevicePrelude = R"TP(
#define TP_PI 3.14159265358979323846
__device__ __forceinline__ double tp_inf() { return __longlong_as_double(0x7ff0000000000000LL); }
__device__ __forceinline__ double tp_nan() { return __longlong_as_double(0x7ff8000000000000LL); }
/* rint in the tensor's own type: float arithmetic stays float (no double rounding). */
__device__ __forceinline__ float tp_rint(float v) { return rintf(v); }
__device__ __forceinline__ double tp_rint(double v) { return rint(v); }
__device__ double tp_digamma(double x) {
  if (x == 0) return -1.0 / x;  /* -0: +inf, +0: -inf */
  double refl = 0;
  bool reflect = false;
  if (x < 0) {
    if (x == floor(x)) return tp_nan();
    refl = TP_PI / tan(TP_PI * x);
    reflect = true;
    x = 1 - x;
  }
  double r = 0;
  while (x < 10) {
    r -= 1 / x;
    x += 1;
  }
  const double z = 1 / (x * x);
  const double series = z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 - z * (1.0 / 132)))));
  const double d = r + log(x) - 0.5 / x - series;
  return reflect ? d - refl : d;
}
__device__ double tp_polygamma(long long n, double x) {
  if (n == 0) return tp_digamma(x);
  if (x <= 0 && x == floor(x)) return tp_inf();
  const double s = (double)(n + 1);
  double zeta = 0;
  while (x < 20) {
    zeta += pow(x, -s);
    x += 1;
  }
  const double b2k[7] = {1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6};
  double tail = pow(x, 1 - s) / (s - 1) + 0.5 * pow(x, -s);
  double rising = s, fact = 2;
  double xp = pow(x, -s - 1);
  for (int k = 1; k <= 7; ++k) {
    tail += b2k[k - 1] / fact * rising * xp;
    rising *= (s + 2 * k - 1) * (s + 2 * k);
    fact *= (2 * k + 1) * (2 * k + 2);
    xp /= x * x;
  }
  zeta += tail;
  const double nfact = tgamma(s);
  return (n % 2 == 1 ? 1.0 : -1.0) * nfact * zeta;
}
__device__ double tp_bessel_i(int order, double x) {
  const double ax = fabs(x);
  if (ax <= 30) {
    const double q = 0.25 * x * x;
    double term = order == 0 ? 1.0 : 0.5 * x, sum = term;
    for (int k = 1; k < 500; ++k) {
      term *= q / ((double)k * (k + order));
      sum += term;
      if (fabs(term) < fabs(sum) * 1e-17) break;
    }
    return sum;
  }
  const double mu = 4.0 * order * order;
  double term = 1, sum = 1;
  for (int k = 1; k < 30; ++k) {
    const double t = term * -(mu - (2.0 * k - 1) * (2.0 * k - 1)) / (k * 8.0 * ax);
    if (fabs(t) >= fabs(term)) break;
    term = t;
    sum += term;
  }
  const double r = exp(ax) / sqrt(2 * TP_PI * ax) * sum;
  return order == 1 && x < 0 ? -r : r;
}
)TP";

struct SpecialDef {
  const char* op;    // operator name
  const char* tag;   // kernel name part
  const char* expr;  // of `d` (the element in double), `v` (in T), `order`, `a`; the value in T
};
// `order`: polygamma's n, round's sign of decimals; `a`: round's 10^|decimals|.
constexpr SpecialDef kSpecial[] = {
    {"lgamma", "lgamma", "(T)lgamma(d)"},
    {"digamma", "digamma", "(T)tp_digamma(d)"},
    {"polygamma", "polygamma", "(T)tp_polygamma(order, d)"},
    {"i0", "i0", "(T)tp_bessel_i(0, d)"},
    {"special_i1", "i1", "(T)tp_bessel_i(1, d)"},
    {"erf", "erf", "(T)erf(d)"},
    {"gelu", "gelu", "(T)(0.5 * d * erfc(d * -0.70710678118654752440))"},
    {"round", "round_dec", "(order > 0 ? (T)(tp_rint((T)(v * (T)a)) / (T)a) : (T)(tp_rint((T)(v / (T)a)) * (T)a))"},
};

std::string special_name(const SpecialDef& s, DType c) {
  return str("tp_special_", s.tag, c == DType::Float64 ? "_f64" : "_f32");
}
std::string special_source(const SpecialDef& s, DType c) {
  return str("typedef ", c == DType::Float64 ? "double" : "float", " T;\n", kDevicePrelude,
             "extern \"C\" __global__ void ", special_name(s, c),
             "(const T* __restrict__ x, T* __restrict__ y, long long n, long long order, double a) {\n"
             "  (void)order; (void)a;\n"
             "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n"
             "       i += (long long)gridDim.x * blockDim.x) {\n"
             "    const T v = x[i];\n"
             "    const double d = (double)v;\n"
             "    (void)d;\n"
             "    y[i] = ",
             s.expr, ";\n  }\n}\n");
}

const SpecialDef* find_special(const std::string& name) {
  for (const auto& s : kSpecial)
    if (name == s.op) return &s;
  return nullptr;
}

}  // namespace

bool special_kernel(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                    const std::vector<TensorMeta>& om, std::vector<Tensor>& out) {
  const std::string name = op.name;
  const SpecialDef* s = find_special(name);
  if (!s || in.empty() || !in[0].defined() || in[0].device().kind != Device::Kind::CUDA || om.size() != 1)
    return false;
  const DType rt = om[0].dtype;
  if (!is_floating(rt)) return false;
  long long order = 0;
  double a = 1.0;
  if (name == "erf" || name == "gelu") {
    // Only float64: float32 and 16-bit erf / erf-GELU are generated by Stax.
    if (rt != DType::Float64) return false;
    if (name == "gelu" && !attrs.is_none("approximate") && attrs.get_str("approximate") != "none") return false;
  } else if (name == "round") {
    const int64_t d = attrs.is_none("decimals") ? 0 : attrs.get_int("decimals");
    if (d == 0) return false;  // plain round is generated
    a = std::pow(10.0, static_cast<double>(d < 0 ? -d : d));
    order = d > 0 ? 1 : -1;
  } else if (name == "polygamma") {
    order = attrs.get_int("n");
  }
  const DType dt = in[0].dtype();
  if (!is_floating(dt) && dt != DType::Int64 && dt != DType::Int32 && dt != DType::Int16 && dt != DType::Int8 &&
      dt != DType::UInt8 && dt != DType::Bool)
    return false;
  const DType c = rt == DType::Float64 ? DType::Float64 : DType::Float32;
  const int dev = in[0].device().index;
  if (in[0].numel() == 0) {  // nothing to convert or launch
    out = {empty(om[0].sizes, rt, dev)};
    return true;
  }
  Tensor x = ops::contiguous(ops::to_dtype(in[0], c));
  Tensor y = empty(om[0].sizes, c, dev);
  long long n = y.numel();
  if (n > 0) {
    void* px = x.data();
    void* py = y.data();
    void* args[] = {&px, &py, &n, &order, &a};
    launch_generated(dev, special_name(*s, c), special_source(*s, c), grid_1d(n, kThreads), kThreads, args);
  }
  out = {c == rt ? y : ops::to_dtype(y, rt)};
  return true;
}

std::vector<std::pair<std::string, std::string>> special_kernel_sources() {
  std::vector<std::pair<std::string, std::string>> v;
  for (const auto& s : kSpecial)
    for (DType c : {DType::Float32, DType::Float64}) v.emplace_back(special_name(s, c), special_source(s, c));
  return v;
}

}  // namespace tp::cuda
