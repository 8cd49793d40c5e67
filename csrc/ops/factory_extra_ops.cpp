// More factories: linspace, logspace, eye, randint, the *_like family (composites over
// the plain factories, so the tracer sees a factory with known sizes) and the
// in-place random fills normal_/uniform_/bernoulli_ plus bernoulli.
#include <cmath>
#include <functional>

#include "core/parallel.h"
#include "ops/api_nn_linalg.h"
#include "ops/dispatch.h"
#include "ops/families.h"
#include "ops/generator.h"
#include "ops/kernel_util.h"
#include "ops/registry.h"
#include "ops/size_expr.h"

namespace tp {
namespace {

DType dtype_attr(const Attrs& attrs, DType fallback) { return attrs.get_or<DType>("dtype", fallback); }

// ---- linspace ----
std::vector<TensorMeta> linspace_infer(const OpDef& op, const std::vector<TensorMeta>&, const Attrs& attrs) {
  const int64_t steps = attrs.get_int("steps");
  TP_CHECK(steps >= 0, ValueError, op.name, ": number of steps must be non-negative, got ", steps);
  attrs.get_scalar("start");
  attrs.get_scalar("end");
  return {TensorMeta::contiguous({steps}, dtype_attr(attrs, default_float_dtype()))};
}

// PyTorch's CPU linspace, matched exactly: the first steps/2 elements count up from start, the rest
// back from end (so both endpoints are exact), each as one fused multiply-add. Integer results use
// the bounds truncated toward zero and a double step; float32 computes in float; 16-bit results
// round after every operation, as their arithmetic does.
template <class R>  // the arithmetic type: float or double
R lin_value(R s, R e, R step, int64_t i, int64_t n) {
  return i < n / 2 ? std::fma(step, static_cast<R>(i), s) : std::fma(-step, static_cast<R>(n - 1 - i), e);
}

template <class H>  // Half or BFloat16
float lin_value16(float s, float e, float step, int64_t i, int64_t n) {
  auto r = [](float v) { return static_cast<float>(H(v)); };
  return i < n / 2 ? r(s + r(step * r(static_cast<float>(i)))) : r(e - r(step * r(static_cast<float>(n - 1 - i))));
}

template <class H>
std::function<double(int64_t)> lin16(double a, double b, int64_t n) {
  auto r = [](float v) { return static_cast<float>(H(v)); };
  const float s = r(static_cast<float>(a)), e = r(static_cast<float>(b));
  const float step = r(r(e - s) / r(static_cast<float>(n - 1)));
  return [=](int64_t i) { return static_cast<double>(lin_value16<H>(s, e, step, i, n)); };
}

std::vector<Tensor> linspace_cpu(const OpDef& op, const std::vector<Tensor>&, const Attrs& attrs,
                                 const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  const int64_t n = out.numel();
  const Scalar sa = attrs.get_scalar("start"), sb = attrs.get_scalar("end");
  const double a = sa.to_double(), b = sb.to_double();
  // The requested dtype, not the kernel's (float16 runs in float32): it decides the arithmetic.
  const DType req = dtype_attr(attrs, default_float_dtype());
  std::function<double(int64_t)> value;
  if (n == 1) {
    const double first = is_floating(req) ? a : static_cast<double>(sa.to_int());
    value = [first](int64_t) { return first; };
  } else if (req == DType::Float64) {
    const double step = (b - a) / static_cast<double>(n - 1);
    value = [=](int64_t i) { return lin_value<double>(a, b, step, i, n); };
  } else if (req == DType::Float32) {
    const float s = static_cast<float>(a), e = static_cast<float>(b);
    const float step = (e - s) / static_cast<float>(n - 1);
    value = [=](int64_t i) { return static_cast<double>(lin_value<float>(s, e, step, i, n)); };
  } else if (req == DType::Float16) {
    value = lin16<Half>(a, b, n);
  } else if (req == DType::BFloat16) {
    value = lin16<BFloat16>(a, b, n);
  } else {
    const double s = static_cast<double>(sa.to_int()), e = static_cast<double>(sb.to_int());
    const double step = (e - s) / static_cast<double>(n - 1);
    value = [=](int64_t i) { return lin_value<double>(s, e, step, i, n); };
  }
  TP_DISPATCH_ALL(out.dtype(), op.name, ([&]<class T>() {
    T* o = out.data_as<T>();
    parallel_for(0, n, kGrainSize, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) o[i] = cast_value<T>(value(i));
    });
  }));
  return {out};
}

// ---- logspace: base ** (the linspace exponents), computed in double ----
std::vector<Tensor> logspace_cpu(const OpDef& op, const std::vector<Tensor>&, const Attrs& attrs,
                                 const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  const int64_t n = out.numel();
  const double a = attrs.get_double("start"), b = attrs.get_double("end"), base = attrs.get_double("base");
  const double step = n > 1 ? (b - a) / static_cast<double>(n - 1) : 0.0;
  TP_DISPATCH_ALL(out.dtype(), op.name, ([&]<class T>() {
    T* o = out.data_as<T>();
    parallel_for(0, n, kGrainSize, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const double e = i < (n + 1) / 2 ? a + step * static_cast<double>(i) : b - step * static_cast<double>(n - 1 - i);
        o[i] = cast_value<T>(std::pow(base, e));
      }
    });
  }));
  return {out};
}

// ---- eye ----
std::vector<TensorMeta> eye_infer(const OpDef& op, const std::vector<TensorMeta>&, const Attrs& attrs) {
  const int64_t n = attrs.get_int("n"), m = attrs.has("m") ? attrs.get_int("m") : n;
  TP_CHECK(n >= 0 && m >= 0, ValueError, op.name, ": n and m must be non-negative, got n=", n, ", m=", m);
  return {TensorMeta::contiguous({n, m}, dtype_attr(attrs, default_float_dtype()))};
}

std::vector<Tensor> eye_cpu(const OpDef& op, const std::vector<Tensor>&, const Attrs&,
                            const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  fill(out, Scalar(int64_t{0}));
  const int64_t n = out.sizes()[0], m = out.sizes()[1];
  TP_DISPATCH_ALL(out.dtype(), op.name, ([&]<class T>() {
    T* o = out.data_as<T>();
    for (int64_t i = 0; i < std::min(n, m); ++i) o[i * m + i] = T(1);
  }));
  return {out};
}

// ---- randint ----
struct IntRange {
  int64_t low, high;
};
IntRange randint_range(const Attrs& attrs, const char* op) {
  const int64_t low = attrs.has("low") ? attrs.get_int("low") : 0, high = attrs.get_int("high");
  TP_CHECK(low < high, ValueError, op, ": random_ expects 'from' to be less than 'to', but got from=", low,
           " >= to=", high);
  return {low, high};
}

std::vector<TensorMeta> randint_infer(const OpDef& op, const std::vector<TensorMeta>&, const Attrs& attrs) {
  randint_range(attrs, op.name);
  Shape size = attr_shape(attrs, "size");
  check_sizes(size, op.name);
  return {TensorMeta::contiguous(std::move(size), dtype_attr(attrs, DType::Int64))};
}

// Two draws per Philox counter; range < 2^63, so the modulo bias is below
// 2^-32 for any range a tensor can hold.
std::vector<Tensor> randint_cpu(const OpDef& op, const std::vector<Tensor>&, const Attrs& attrs,
                                const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  const IntRange r = randint_range(attrs, op.name);
  const uint64_t range = static_cast<uint64_t>(r.high) - static_cast<uint64_t>(r.low);
  const int64_t n = out.numel();
  if (n == 0) return {out};
  const int64_t counters = (n + 1) / 2;
  const PhiloxRange pr = generator_reserve(generator_attr(attrs), static_cast<uint64_t>(counters));
  TP_DISPATCH_ALL(out.dtype(), op.name, ([&]<class T>() {
    T* o = out.data_as<T>();
    parallel_for(0, counters, kGrainSize / 8, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        uint32_t w[4];
        philox4x32(pr.first + static_cast<uint64_t>(c), pr.key, w);
        for (int64_t j = 0; j < 2 && 2 * c + j < n; ++j) {
          const uint64_t x = (uint64_t{w[2 * j]} << 32) | w[2 * j + 1];
          o[2 * c + j] = cast_value<T>(static_cast<int64_t>(static_cast<uint64_t>(r.low) + x % range));
        }
      }
    });
  }));
  return {out};
}

// ---- *_like: the plain factory with the input's sizes and (by default) dtype ----
Attrs like_attrs(const Tensor& self, const Attrs& attrs) {
  Attrs a = attrs;
  a.set("size", std::vector<int64_t>(self.sizes().begin(), self.sizes().end()));
  if (attrs.is_none("dtype")) a.set("dtype", self.dtype());
  return a;
}
constexpr char kEmpty[] = "empty", kZeros[] = "zeros", kOnes[] = "ones", kFull[] = "full", kRand[] = "rand",
               kRandn[] = "randn", kRandint[] = "randint";
// The filled ones follow self's device (PyTorch's rule; C++ composites rely on
// it). The random ones draw on the host (the generator's counters are the
// host's) and the Python binding moves their result.
template <const char* Factory>
std::vector<Tensor> like_decompose(const std::vector<Tensor>& in, const Attrs& attrs) {
  static const OpDef& f = get_op(Factory);
  const Tensor& self = in[0];
  constexpr bool filled = Factory == kEmpty || Factory == kZeros || Factory == kOnes || Factory == kFull;
  if constexpr (filled) {
    if (self.device().kind != Device::Kind::CPU) {
      const DType dtype = attrs.is_none("dtype") ? self.dtype() : attrs.get<DType>("dtype");
      const Scalar value = Factory == kFull    ? attrs.get<Scalar>("fill_value")
                           : Factory == kOnes ? Scalar(int64_t{1})
                                              : Scalar(int64_t{0});  // empty_like: zeros are as good
      return {ops::full_on(self, self.sizes(), value, dtype)};
    }
  }
  // The factory's size is self's sizes: said so, a symbolic trace gives the
  // recorded factory self's symbolic sizes (without it the node kept the
  // capture's sizes unguarded: a dynamic-shape version returned the first
  // call's shape for every input).
  std::vector<ops::SizeExpr> size;
  for (int64_t d = 0; d < self.dim(); ++d) size.push_back(ops::SizeExpr::size_of(self, d));
  ops::SizedAttrsScope scope({ops::SizedAttr{"size", std::move(size)}});
  return call_op(f, {}, like_attrs(self, attrs));
}
std::vector<TensorMeta> like_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  TP_CHECK(in[0].defined, TypeError, op.name, ": expected a tensor");
  return {in[0]};  // never used: composites run as their parts
}

// ---- in-place random fills ----
std::vector<TensorMeta> inplace_float_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  TP_CHECK(is_floating(in[0].dtype), TypeError, op.name, ": expected a floating-point tensor but got dtype ",
           dtype_name(in[0].dtype));
  return {in[0]};
}
std::vector<TensorMeta> inplace_any_infer(const OpDef&, const std::vector<TensorMeta>& in, const Attrs&) {
  return {in[0]};
}

// Samples into a contiguous float64 buffer (the same counters for any layout
// of self), maps each sample, and copies into self.
template <class F>
void fill_mapped(const Tensor& self, const Attrs& attrs, bool normal, F map) {
  Tensor tmp = alloc_out(TensorMeta::contiguous(self.sizes(), DType::Float64));
  random_fill(tmp, generator_attr(attrs), normal);
  double* p = tmp.data_as<double>();
  parallel_for(0, tmp.numel(), kGrainSize, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = map(p[i], i);
  });
  copy_into(self, tmp);
}

std::vector<Tensor> normal_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                               const std::vector<TensorMeta>&) {
  const double mean = attrs.get_double("mean"), std = attrs.get_double("std");
  TP_CHECK(std >= 0, ValueError, op.name, ": expects std >= 0.0, but found std ", std);
  fill_mapped(in[0], attrs, true, [&](double z, int64_t) { return mean + std * z; });
  return {in[0]};
}

std::vector<Tensor> uniform_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                const std::vector<TensorMeta>&) {
  const double a = attrs.get_double("from"), b = attrs.get_double("to");
  TP_CHECK(a <= b, ValueError, op.name, ": expects to return a [from, to) range, but found from=", a, " > to=", b);
  fill_mapped(in[0], attrs, false, [&](double u, int64_t) { return a + (b - a) * u; });
  return {in[0]};
}

std::vector<Tensor> bernoulli_inplace_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                          const std::vector<TensorMeta>&) {
  const double p = attrs.get_double("p");
  TP_CHECK(p >= 0 && p <= 1, ValueError, op.name, ": expects 0 <= p <= 1, but got p=", p);
  fill_mapped(in[0], attrs, false, [&](double u, int64_t) { return u < p ? 1.0 : 0.0; });
  return {in[0]};
}

// bernoulli(self): each element is 1 with the probability given by self.
std::vector<Tensor> bernoulli_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                  const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  Tensor probs = convert(as_contiguous(in[0]), DType::Float64);
  const double* pp = probs.data_as<double>();
  for (int64_t i = 0; i < probs.numel(); ++i)
    TP_CHECK(pp[i] >= 0 && pp[i] <= 1, ValueError, op.name, ": all probabilities must be in [0, 1], got ", pp[i]);
  fill_mapped(out, attrs, false, [&](double u, int64_t i) { return u < pp[i] ? 1.0 : 0.0; });
  return {out};
}
std::vector<TensorMeta> bernoulli_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& a) {
  auto m = inplace_float_infer(op, in, a);
  return {TensorMeta::contiguous(m[0].sizes, m[0].dtype)};
}

void reg(OpDef d) { register_op(d); }

}  // namespace

void register_factory_extra_ops() {
  reg({.name = "linspace", .schema = "linspace(Scalar start, Scalar end, int steps, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor",
       .tags = kFactory, .num_inputs = 0, .infer = &linspace_infer, .cpu = &linspace_cpu});
  reg({.name = "eye", .schema = "eye(int n, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor", .tags = kFactory, .num_inputs = 0,
       .infer = &eye_infer, .cpu = &eye_cpu});
  reg({.name = "eye.m", .schema = "eye.m(int n, int m, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor", .tags = kFactory,
       .num_inputs = 0, .infer = &eye_infer, .cpu = &eye_cpu});
  reg({.name = "logspace",
       .schema = "logspace(Scalar start, Scalar end, int steps, float base=10.0, *, ScalarType? dtype=None, "
                 "Device? device=None, bool requires_grad=False) -> Tensor",
       .tags = kFactory, .num_inputs = 0, .infer = &linspace_infer, .cpu = &logspace_cpu});
  reg({.name = "randint",
       .schema = "randint(int high, int[] size, *, Generator? generator=None, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor",
       .tags = kFactory | kRandom, .num_inputs = 0, .infer = &randint_infer, .cpu = &randint_cpu});
  reg({.name = "randint.low",
       .schema =
           "randint.low(int low, int high, int[] size, *, Generator? generator=None, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor",
       .tags = kFactory | kRandom, .num_inputs = 0, .infer = &randint_infer, .cpu = &randint_cpu});

  auto like = [](const char* name, const char* schema, DecomposeFn f, uint32_t tags) {
    reg({.name = name, .schema = schema, .tags = kComposite | tags, .num_inputs = 1, .infer = &like_infer,
         .decompose = f});
  };
  like("empty_like", "empty_like(Tensor self, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False, MemoryFormat? memory_format=None) -> Tensor", &like_decompose<kEmpty>, 0);
  like("zeros_like", "zeros_like(Tensor self, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False, MemoryFormat? memory_format=None) -> Tensor", &like_decompose<kZeros>, 0);
  like("ones_like", "ones_like(Tensor self, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False, MemoryFormat? memory_format=None) -> Tensor", &like_decompose<kOnes>, 0);
  like("full_like", "full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False, MemoryFormat? memory_format=None) -> Tensor",
       &like_decompose<kFull>, 0);
  like("rand_like", "rand_like(Tensor self, *, Generator? generator=None, ScalarType? dtype=None, Device? device=None, bool requires_grad=False, MemoryFormat? memory_format=None) -> Tensor",
       &like_decompose<kRand>, kRandom);
  like("randn_like", "randn_like(Tensor self, *, Generator? generator=None, ScalarType? dtype=None, Device? device=None, bool requires_grad=False, MemoryFormat? memory_format=None) -> Tensor",
       &like_decompose<kRandn>, kRandom);
  like("randint_like",
       "randint_like(Tensor self, int high, *, Generator? generator=None, ScalarType? dtype=None, Device? device=None, bool requires_grad=False, MemoryFormat? memory_format=None) -> Tensor",
       &like_decompose<kRandint>, kRandom);
  like("randint_like.low_dtype",
       "randint_like.low_dtype(Tensor self, int low, int high, *, Generator? generator=None, ScalarType? dtype=None, "
       "Device? device=None, bool requires_grad=False, MemoryFormat? memory_format=None) -> Tensor",
       &like_decompose<kRandint>, kRandom);

  reg({.name = "normal_",
       .schema = "normal_(Tensor(a!) self, float mean=0, float std=1, *, Generator? generator=None) -> Tensor(a!)",
       .tags = kInplace | kRandom, .num_inputs = 1, .infer = &inplace_float_infer, .cpu = &normal_cpu});
  reg({.name = "uniform_",
       .schema = "uniform_(Tensor(a!) self, float from=0, float to=1, *, Generator? generator=None) -> Tensor(a!)",
       .tags = kInplace | kRandom, .num_inputs = 1, .infer = &inplace_float_infer, .cpu = &uniform_cpu});
  reg({.name = "bernoulli_.float",
       .schema = "bernoulli_.float(Tensor(a!) self, float p=0.5, *, Generator? generator=None) -> Tensor(a!)",
       .tags = kInplace | kRandom, .num_inputs = 1, .infer = &inplace_any_infer, .cpu = &bernoulli_inplace_cpu});
  reg({.name = "bernoulli", .schema = "bernoulli(Tensor self, *, Generator? generator=None) -> Tensor",
       .tags = kRandom, .num_inputs = 1, .infer = &bernoulli_infer, .cpu = &bernoulli_cpu});
}

}  // namespace tp
