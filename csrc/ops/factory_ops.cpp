// The factory family: empty, zeros, ones, full, arange, rand, randn. No tensor
// inputs; every attribute is known at trace time, so inference gives the exact
// output. The random ones draw from the generator named by the "generator"
// attribute (ops/generator.h).
#include <cmath>
#include <limits>

#include "core/parallel.h"
#include "ops/families.h"
#include "ops/generator.h"
#include "ops/kernel_util.h"
#include "ops/registry.h"

namespace tp {
namespace {

DType dtype_attr(const Attrs& attrs, DType fallback) { return attrs.get_or<DType>("dtype", fallback); }

// ---- empty / zeros / ones / full ----
std::vector<TensorMeta> sized_infer(const OpDef& op, const std::vector<TensorMeta>&, const Attrs& attrs) {
  Shape size = attr_shape(attrs, "size");
  check_sizes(size, op.name);
  return {TensorMeta::contiguous(std::move(size), dtype_attr(attrs, default_float_dtype()))};
}

std::vector<Tensor> empty_cpu(const OpDef&, const std::vector<Tensor>&, const Attrs&,
                              const std::vector<TensorMeta>& om) {
  return {alloc_out(om[0])};
}

template <int V>
std::vector<Tensor> constant_cpu(const OpDef&, const std::vector<Tensor>&, const Attrs&,
                                 const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  fill(out, Scalar(int64_t{V}));
  return {out};
}

// The fill value: schema name "fill_value"; the older C++ API spelled it "value".
const Scalar& fill_value(const Attrs& attrs) {
  return attrs.has("fill_value") ? attrs.get<Scalar>("fill_value") : attrs.get<Scalar>("value");
}

// Without a dtype the value decides, like PyTorch: bool -> bool, int -> int64, float -> default float.
std::vector<TensorMeta> full_infer(const OpDef& op, const std::vector<TensorMeta>&, const Attrs& attrs) {
  Shape size = attr_shape(attrs, "size");
  check_sizes(size, op.name);
  const DType dtype = dtype_attr(attrs, fill_value(attrs).natural_dtype());
  check_scalar_fits(fill_value(attrs), dtype, op.name);
  return {TensorMeta::contiguous(std::move(size), dtype)};
}

std::vector<Tensor> full_cpu(const OpDef&, const std::vector<Tensor>&, const Attrs& attrs,
                             const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  fill(out, fill_value(attrs));
  return {out};
}

// ---- arange ----
// "arange(end)" has no start/step attributes: they default to 0 and 1.
struct ArangeArgs {
  Scalar start, end, step;
};
ArangeArgs arange_args(const Attrs& attrs) {
  return {attrs.has("start") ? attrs.get_scalar("start") : Scalar(int64_t{0}), attrs.get_scalar("end"),
          attrs.has("step") ? attrs.get_scalar("step") : Scalar(int64_t{1})};
}

struct ArangeGeom {
  int64_t length;
  // The elements are istart + istep * i in exact integer arithmetic: all three bounds are
  // integers, or the result dtype is an integer one (PyTorch truncates the bounds toward zero).
  bool integral;
  int64_t istart = 0, istep = 1;
};

DType arange_dtype(const ArangeArgs& a, const Attrs& attrs) {
  const bool ints = !a.start.is_float() && !a.end.is_float() && !a.step.is_float();
  return dtype_attr(attrs, ints ? DType::Int64 : default_float_dtype());
}

// PyTorch's rules, matched exactly: the sign check uses the bounds as given; an int64 result takes its
// length from the truncated bounds (so a step that truncates to 0 is an error), any other integer
// result takes it from the bounds as given, with truncated start and step for the elements.
ArangeGeom arange_geom(const ArangeArgs& a, DType out, const char* op) {
  const Scalar &start = a.start, &end = a.end, &step = a.step;
  const bool all_ints = !start.is_float() && !end.is_float() && !step.is_float();
  TP_CHECK(step.to_double() != 0, ValueError, op, ": step must be nonzero");
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  TP_CHECK(std::isfinite(s) && std::isfinite(e), ValueError, op, ": unsupported range: ", start.repr(), " -> ",
           end.repr());
  TP_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), ValueError, op,
           ": upper bound and larger bound inconsistent with step sign (start=", start.repr(), ", end=", end.repr(),
           ", step=", step.repr(), ")");
  const bool int_result = is_integral(out, /*include_bool=*/false);
  const bool exact_length = all_ints || out == DType::Int64;
  ArangeGeom g{0, all_ints || int_result};
  if (g.integral) {
    g.istart = start.to_int();
    g.istep = step.to_int();
    TP_CHECK(g.istep != 0 || !exact_length, ValueError, op, ": step must be nonzero (step=", step.repr(),
             " truncates to 0 for dtype ", dtype_name(out), ")");
  }
  if (exact_length) {
    __int128 span = static_cast<__int128>(end.to_int()) - g.istart;
    __int128 stp = g.istep;
    __int128 q = span / stp;
    if (q * stp != span && (span < 0) == (stp < 0)) ++q;  // same signs: ceil
    if (q < 0) q = 0;
    TP_CHECK(q <= (__int128{1} << 48), ValueError, op, ": the range ", start.repr(), " -> ", end.repr(),
             " with step ", step.repr(), " has too many elements");
    g.length = static_cast<int64_t>(q);
  } else {
    double n = std::ceil((e - s) / st);
    TP_CHECK(n >= 0 && n <= 281474976710656.0, ValueError, op, ": the range ", start.repr(), " -> ", end.repr(),
             " with step ", step.repr(), " has an invalid number of elements");
    g.length = static_cast<int64_t>(n);
  }
  return g;
}

std::vector<TensorMeta> arange_infer(const OpDef& op, const std::vector<TensorMeta>&, const Attrs& attrs) {
  const ArangeArgs a = arange_args(attrs);
  const DType dt = arange_dtype(a, attrs);
  return {TensorMeta::contiguous({arange_geom(a, dt, op.name).length}, dt)};
}

std::vector<Tensor> arange_cpu(const OpDef& op, const std::vector<Tensor>&, const Attrs& attrs,
                               const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  const ArangeArgs a = arange_args(attrs);
  // The requested dtype, not the kernel's (int32 runs in int64): it decides the truncation rules.
  ArangeGeom g = arange_geom(a, arange_dtype(a, attrs), op.name);
  TP_DISPATCH_ALL(out.dtype(), op.name, ([&]<class T>() {
    T* o = out.data_as<T>();
    if (g.integral) {
      const uint64_t s0 = static_cast<uint64_t>(g.istart), st = static_cast<uint64_t>(g.istep);
      parallel_for(0, g.length, kGrainSize, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) o[i] = cast_value<T>(static_cast<int64_t>(s0 + st * static_cast<uint64_t>(i)));
      });
    } else {
      // start + step * i rounded once (a fused multiply-add, as PyTorch's CPU build computes it).
      const double s0 = a.start.to_double(), st = a.step.to_double();
      parallel_for(0, g.length, kGrainSize, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) o[i] = cast_value<T>(std::fma(st, static_cast<double>(i), s0));
      });
    }
  }));
  return {out};
}

// ---- rand / randn ----
std::vector<TensorMeta> random_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  auto out = sized_infer(op, in, attrs);
  TP_CHECK(is_floating(out[0].dtype), TypeError, op.name, ": expected a floating-point dtype but got ",
           dtype_name(out[0].dtype));
  return out;
}

constexpr float kTwoPiF = 6.28318530717958647692f;
constexpr double kTwoPi = 6.28318530717958647692;

// Each Philox counter yields four float32 or two float64 values.
template <class T, bool Normal>
void random_kernel(const Tensor& out, int64_t gen) {
  const int64_t n = out.numel();
  if (n == 0) return;
  constexpr int64_t per = sizeof(T) == 4 ? 4 : 2;
  const int64_t counters = (n + per - 1) / per;
  PhiloxRange r = generator_reserve(gen, static_cast<uint64_t>(counters));
  T* o = out.data_as<T>();
  parallel_for(0, counters, kGrainSize / 8, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      uint32_t w[4];
      philox4x32(r.first + static_cast<uint64_t>(c), r.key, w);
      T v[per];
      if constexpr (sizeof(T) == 4) {
        if constexpr (Normal) {  // Box-Muller on two pairs
          for (int p = 0; p < 2; ++p) {
            float u1 = unit_float(w[2 * p]) + (1.0f / 16777216.0f);  // (0, 1]: log stays finite
            float u2 = unit_float(w[2 * p + 1]);
            float rad = std::sqrt(-2.0f * std::log(u1));
            v[2 * p] = rad * std::cos(kTwoPiF * u2);
            v[2 * p + 1] = rad * std::sin(kTwoPiF * u2);
          }
        } else {
          for (int p = 0; p < 4; ++p) v[p] = unit_float(w[p]);
        }
      } else {
        double u1 = unit_double(w[0], w[1]), u2 = unit_double(w[2], w[3]);
        if constexpr (Normal) {
          double rad = std::sqrt(-2.0 * std::log(1.0 - u1));  // 1 - u1 in (0, 1]
          v[0] = rad * std::cos(kTwoPi * u2);
          v[1] = rad * std::sin(kTwoPi * u2);
        } else {
          v[0] = u1;
          v[1] = u2;
        }
      }
      const int64_t base = c * per, cnt = std::min<int64_t>(per, n - base);
      for (int64_t j = 0; j < cnt; ++j) o[base + j] = v[j];
    }
  });
}

template <bool Normal>
std::vector<Tensor> random_cpu(const OpDef&, const std::vector<Tensor>&, const Attrs& attrs,
                               const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  random_fill(out, generator_attr(attrs), Normal);
  return {out};
}

void register_factory(const char* name, const char* schema, uint32_t tags, InferFn infer, KernelFn cpu) {
  register_op({.name = name, .schema = schema, .tags = kFactory | tags, .num_inputs = 0, .infer = infer,
               .cpu = cpu});
}

}  // namespace

void random_fill(const Tensor& out, int64_t gen, bool normal) {
  TP_DISPATCH_FLOATING(out.dtype(), normal ? "randn" : "rand", ([&]<class T>() {
    if (normal) random_kernel<T, true>(out, gen);
    else random_kernel<T, false>(out, gen);
  }));
}

void register_factory_ops() {
  register_factory("empty", "empty(int[] size, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False, "
                   "MemoryFormat? memory_format=None) -> Tensor", 0, &sized_infer, &empty_cpu);
  register_factory("zeros", "zeros(int[] size, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor", 0, &sized_infer,
                   &constant_cpu<0>);
  register_factory("ones", "ones(int[] size, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor", 0, &sized_infer,
                   &constant_cpu<1>);
  register_factory("full", "full(int[] size, Scalar fill_value, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor", 0,
                   &full_infer, &full_cpu);
  register_factory("arange", "arange(Scalar end, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor", 0, &arange_infer,
                   &arange_cpu);
  register_factory("arange.start",
                   "arange.start(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor", 0,
                   &arange_infer, &arange_cpu);
  register_factory("rand", "rand(int[] size, *, Generator? generator=None, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor",
                   kRandom, &random_infer, &random_cpu<false>);
  register_factory("randn", "randn(int[] size, *, Generator? generator=None, ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor",
                   kRandom, &random_infer, &random_cpu<true>);
}

}  // namespace tp
