// PyTorch operators that are compositions of existing ones: the NaN-ignoring
// reductions (nansum, nanmean, nanmedian), aminmax, logaddexp2, renorm,
// trapezoid, cumulative_trapezoid, isin, unravel_index, block_diag, combinations,
// bernoulli(self, p).
//
// All are implicit composites (the dispatcher runs them as their parts), so
// autograd, tracing and every device come from the parts. Helper tensors
// (positions, zero blocks) are therefore built beside an input, never with a
// host factory: a CUDA input must get CUDA positions.
#include <cmath>
#include <limits>
#include <numbers>

#include "core/error.h"
#include "core/grad_mode.h"
#include "ops/dispatch.h"
#include "ops/families.h"
#include "ops/ops.h"
#include "ops/registry.h"
#include "ops/type_promotion.h"

namespace tp {
namespace {

using ops::scalar;
using TVec = std::vector<Tensor>;

int64_t wrap_dim(int64_t d, int64_t n, const char* op) {
  const int64_t m = std::max<int64_t>(n, 1);
  TP_CHECK(d >= -m && d < m, IndexError, op, ": dimension out of range (expected to be in range of [", -m, ", ",
           m - 1, "], but got ", d, ")");
  return d < 0 ? d + m : d;
}

Tensor const0(const Scalar& v, DType dtype) { return ops::full({}, v, dtype); }


// ---- NaN-ignoring reductions ----
Tensor zero_nans(const Tensor& x) {
  if (!is_floating(x.dtype())) return x;
  return ops::where(ops::isnan(x), const0(Scalar(0.0), x.dtype()), x);
}

TVec nansum_dec(const TVec& in, const Attrs& at) { return call_op(TP_OP("sum"), {zero_nans(in[0])}, at); }

TVec nanmean_dec(const TVec& in, const Attrs& at) {
  const Tensor& x = in[0];
  const bool explicit_float = !at.is_none("dtype") && is_floating(at.get<DType>("dtype"));
  TP_CHECK(is_floating(x.dtype()) || explicit_float, TypeError,
           "nanmean: expected input to have floating point dtype but got ", dtype_name(x.dtype()));
  const Tensor total = call_op1(TP_OP("sum"), {zero_nans(x)}, at);
  Attrs count_at = at;
  count_at.set("dtype", AttrValue{total.dtype()});
  const Tensor count = call_op1(TP_OP("sum"), {ops::logical_not(ops::isnan(x))}, count_at);
  return {ops::div(total, count)};
}

// The lower median of the non-NaN values (NaN when a slice has none): sort puts
// NaN last, so entry (count - 1) / 2 of the sorted slice is the answer.
TVec nanmedian_dim_dec(const TVec& in, const Attrs& at) {
  const Tensor& x = in[0];
  const bool keepdim = at.get_or("keepdim", false);
  if (x.dim() == 0) {
    wrap_dim(at.get_int("dim"), 0, "nanmedian");
    return {ops::clone(x), ops::zeros_like(x, DType::Int64)};
  }
  const int64_t d = wrap_dim(at.get_int("dim"), x.dim(), "nanmedian");
  TP_CHECK(x.sizes()[d] > 0, IndexError, "nanmedian: cannot compute the median of dimension ", d,
           " of size 0 (input shape ", shape_str(x.sizes()), ")");
  if (!is_floating(x.dtype())) return call_op(TP_OP("median.dim"), {x}, {{"dim", d}, {"keepdim", keepdim}});
  const TVec sorted = call_op(TP_OP("sort"), {x}, {{"dim", d}, {"descending", false}, {"stable", true}});
  const Tensor count = ops::sum(ops::logical_not(ops::isnan(x)), {d}, true);
  const Tensor k = ops::clamp_min(ops::floor_divide(ops::sub(count, scalar(int64_t{1})), scalar(int64_t{2})),
                                  scalar(int64_t{0}));
  Tensor v = ops::gather(sorted[0], d, k), i = ops::gather(sorted[1], d, k);
  if (!keepdim) v = ops::squeeze(v, d), i = ops::squeeze(i, d);
  return {v, i};
}

TVec nanmedian_dec(const TVec& in, const Attrs&) {
  const Tensor& x = in[0];
  TP_CHECK(x.numel() > 0, IndexError, "nanmedian: cannot compute the median of an empty tensor (shape ",
           shape_str(x.sizes()), ")");
  return {nanmedian_dim_dec({ops::reshape(x, {-1})}, {{"dim", int64_t{0}}, {"keepdim", false}})[0]};
}

// ---- aminmax ----
TVec aminmax_dec(const TVec& in, const Attrs& at) {
  const Tensor& x = in[0];
  const bool keepdim = at.get_or("keepdim", false);
  if (at.is_none("dim")) {
    TP_CHECK(x.numel() > 0, Error,
             "aminmax: cannot compute aminmax over an empty tensor without a dim (shape ", shape_str(x.sizes()), ")");
    ops::Dims all;
    for (int64_t d = 0; d < x.dim(); ++d) all.push_back(d);
    return {ops::amin(x, all, keepdim), ops::amax(x, all, keepdim)};
  }
  const int64_t d = wrap_dim(at.get_int("dim"), x.dim(), "aminmax");
  TP_CHECK(x.dim() == 0 || x.sizes()[d] > 0, IndexError, "aminmax: cannot reduce dimension ", d,
           " of size 0 (input shape ", shape_str(x.sizes()), ")");
  if (x.dim() == 0) return {ops::clone(x), ops::clone(x)};
  return {ops::amin(x, {d}, keepdim), ops::amax(x, {d}, keepdim)};
}

// ---- logaddexp2 ----
// max + log2(1 + 2^-|a - b|); equal inputs (equal infinities too) use a difference of 0.
TVec logaddexp2_dec(const TVec& in, const Attrs&) {
  const DType t0 = result_type(TVec{in[0], in[1]});
  const DType t = is_floating(t0) ? t0 : default_float_dtype();
  const Tensor a = ops::to_dtype(in[0], t), b = ops::to_dtype(in[1], t);
  const Tensor d = ops::where(ops::eq(a, b), const0(Scalar(0.0), t), ops::sub(a, b));
  const Tensor tail = ops::mul(ops::log1p(ops::exp2(ops::neg(ops::abs(d)))), scalar(1.0 / std::numbers::ln2));
  return {ops::add(ops::maximum(a, b), tail)};
}

// ---- renorm ----
// Each slice along `dim` whose p-norm exceeds maxnorm is scaled to norm maxnorm
// (PyTorch's factor maxnorm / (norm + 1e-7)); the others are left as they are.
Tensor renorm_impl(const Tensor& x, const Attrs& at) {
  TP_CHECK(is_floating(x.dtype()), TypeError, "renorm: expected a floating-point tensor, got ", dtype_name(x.dtype()));
  TP_CHECK(x.dim() > 1, ValueError, "renorm: input needs at least 2 dimensions, got shape ", shape_str(x.sizes()));
  const double p = at.get_scalar("p").to<double>(), maxnorm = at.get_scalar("maxnorm").to<double>();
  TP_CHECK(p > 0, ValueError, "renorm: non-positive norm p=", p, " not supported");
  TP_CHECK(maxnorm >= 0, ValueError, "renorm: expected maxnorm to be >= 0 but got ", maxnorm);
  const int64_t d = wrap_dim(at.get_int("dim"), x.dim(), "renorm");
  ops::Dims others;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i != d) others.push_back(i);
  // The norm in float32 at least: a float16 sum of squares overflows early.
  const DType acc = x.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  const Tensor norm = ops::norm(ops::to_dtype(x, acc), Scalar(p), others, true);
  const Tensor factor = ops::where(ops::gt(norm, scalar(maxnorm)),
                                   ops::div(scalar(maxnorm), ops::add(norm, scalar(1e-7))), const0(Scalar(1.0), acc));
  return ops::to_dtype(ops::mul(ops::to_dtype(x, acc), factor), x.dtype());
}
TVec renorm_dec(const TVec& in, const Attrs& at) { return {renorm_impl(in[0], at)}; }
TVec renorm__dec(const TVec& in, const Attrs& at) {
  Tensor s = in[0];
  ops::copy_(s, renorm_impl(in[0], at));
  return {s};
}

// ---- trapezoid ----
Tensor as_float(const Tensor& x) { return is_floating(x.dtype()) ? x : ops::to_dtype(x, default_float_dtype()); }

// (y[1:] + y[:-1]) / 2 along dim, times the spacing, summed.
TVec trapezoid_x_dec(const TVec& in, const Attrs& at) {
  const Tensor &y = in[0], &x = in[1];
  TP_CHECK(y.dim() >= 1, ValueError, "trapezoid: expected y to have at least one dimension, got shape ",
           shape_str(y.sizes()));
  const int64_t d = wrap_dim(at.get_int("dim"), y.dim(), "trapezoid");
  const int64_t n = y.sizes()[d];
  if (n == 0) return {ops::sum(as_float(ops::mul(y, x)), {d})};
  Tensor dx;
  if (x.dim() == 1) {
    TP_CHECK(x.sizes()[0] == n, ValueError, "trapezoid: there must be one `x` value for each sample point; x has shape ",
             shape_str(x.sizes()), ", y has shape ", shape_str(y.sizes()), " along dim ", d);
    Shape view(static_cast<size_t>(y.dim()), 1);
    view[static_cast<size_t>(d)] = n - 1;
    dx = ops::reshape(ops::sub(ops::slice(x, 0, 1, n, 1), ops::slice(x, 0, 0, n - 1, 1)), view);
  } else {
    TP_CHECK(x.dim() >= 1, ValueError, "trapezoid: x must be a tensor of sample points with at least one dimension, "
             "got shape ", shape_str(x.sizes()), " (y has shape ", shape_str(y.sizes()), "); use dx= for a spacing");
    const int64_t xd = wrap_dim(at.get_int("dim"), x.dim(), "trapezoid");
    const int64_t xn = x.sizes()[xd];
    TP_CHECK(xn == n, ValueError, "trapezoid: x has shape ", shape_str(x.sizes()), " and y has shape ",
             shape_str(y.sizes()), "; they need the same size along dim ", d);
    dx = ops::sub(ops::slice(x, xd, 1, xn, 1), ops::slice(x, xd, 0, xn - 1, 1));
  }
  const Tensor mid = ops::add(ops::slice(y, d, 1, n, 1), ops::slice(y, d, 0, n - 1, 1));
  return {ops::div(ops::sum(ops::mul(as_float(dx), as_float(mid)), {d}), scalar(2.0))};
}

TVec trapezoid_dx_dec(const TVec& in, const Attrs& at) {
  const Tensor& y = in[0];
  TP_CHECK(y.dim() >= 1, ValueError, "trapezoid: expected y to have at least one dimension, got shape ",
           shape_str(y.sizes()));
  const int64_t d = wrap_dim(at.get_int("dim"), y.dim(), "trapezoid");
  const int64_t n = y.sizes()[d];
  const Tensor yf = as_float(y);
  if (n == 0) return {ops::sum(yf, {d})};
  const Tensor inner = ops::sub(ops::sum(yf, {d}),
                                ops::mul(ops::add(ops::select(yf, d, 0), ops::select(yf, d, n - 1)), scalar(0.5)));
  return {ops::mul(inner, scalar(at.get_scalar("dx")))};
}

// cumulative_trapezoid: the running sums of the same trapezoids (n - 1 of them along dim).
Tensor trapezoid_areas(const Tensor& y, const Tensor& x, const Scalar& dx, int64_t d) {
  const int64_t n = y.sizes()[static_cast<size_t>(d)];
  const Tensor mid = ops::add(ops::slice(as_float(y), d, 1, n, 1), ops::slice(as_float(y), d, 0, n - 1, 1));
  if (!x.defined()) return ops::mul(mid, scalar(dx.to<double>() / 2.0));
  Tensor step;
  if (x.dim() == 1) {
    TP_CHECK(x.sizes()[0] == n, ValueError, "cumulative_trapezoid: there must be one `x` value for each sample "
             "point; x has shape ", shape_str(x.sizes()), ", y has shape ", shape_str(y.sizes()), " along dim ", d);
    Shape view(static_cast<size_t>(y.dim()), 1);
    view[static_cast<size_t>(d)] = n - 1;
    step = ops::reshape(ops::sub(ops::slice(x, 0, 1, n, 1), ops::slice(x, 0, 0, n - 1, 1)), view);
  } else {
    TP_CHECK(x.dim() >= 1, ValueError, "cumulative_trapezoid: x must be a tensor of sample points with at least one "
             "dimension, got shape ", shape_str(x.sizes()), " (y has shape ", shape_str(y.sizes()), "); use dx= for a "
             "spacing");
    const int64_t xd = wrap_dim(d - y.dim(), x.dim(), "cumulative_trapezoid");
    TP_CHECK(x.sizes()[static_cast<size_t>(xd)] == n, ValueError, "cumulative_trapezoid: x has shape ",
             shape_str(x.sizes()), " and y has shape ", shape_str(y.sizes()), "; they need the same size along dim ", d);
    step = ops::sub(ops::slice(x, xd, 1, n, 1), ops::slice(x, xd, 0, n - 1, 1));
  }
  return ops::div(ops::mul(as_float(step), mid), scalar(2.0));
}

template <bool WithX>
TVec cumulative_trapezoid_dec(const TVec& in, const Attrs& at) {
  const Tensor& y = in[0];
  TP_CHECK(y.dim() >= 1, ValueError, "cumulative_trapezoid: expected y to have at least one dimension, got shape ",
           shape_str(y.sizes()));
  const int64_t d = wrap_dim(at.get_int("dim"), y.dim(), "cumulative_trapezoid");
  if (y.sizes()[static_cast<size_t>(d)] == 0) return {ops::clone(as_float(y))};
  const Tensor areas = trapezoid_areas(y, WithX ? in[1] : Tensor(), WithX ? Scalar(1.0) : at.get_scalar("dx"), d);
  return {ops::cumsum(areas, d)};
}

// ---- bernoulli(self, p) ----
// A tensor of self's shape, dtype and device, each element 1 with probability p.
TVec bernoulli_p_dec(const TVec& in, const Attrs& at) {
  const Tensor& x = in[0];
  TP_CHECK(is_floating(x.dtype()), TypeError, "bernoulli: expected a floating-point tensor but got dtype ",
           dtype_name(x.dtype()));
  Tensor out = ops::zeros_like(x);
  Attrs draw{{"p", at.get_double("p")}};
  if (!at.is_none("generator")) draw.set("generator", AttrValue{at.get_int("generator")});
  call_op(TP_OP("bernoulli_.float"), {out}, draw);
  return {out};
}

// ---- isin ----
// Sorted test elements and a binary search per element: O((n + m) log m).
Tensor isin_impl(const Tensor& elements, const Tensor& test, bool invert) {
  const DType t = result_type(TVec{elements, test});
  const Tensor e = ops::to_dtype(elements, t);
  const Tensor flat = ops::reshape(ops::to_dtype(test, t), {-1});
  Tensor found;
  if (flat.numel() == 0) {
    found = ops::zeros_like(e, DType::Bool);
  } else {
    const Tensor sorted = call_op(TP_OP("sort"), {flat}, {{"dim", int64_t{0}}, {"descending", false}, {"stable", false}})[0];
    const Tensor pos = call_op1(TP_OP("searchsorted"), {sorted, ops::contiguous(e), Tensor()},
                                {{"out_int32", false}, {"right", false}, {"side", AttrValue{}}});
    const Tensor at = ops::clamp_max(pos, scalar(flat.numel() - 1));
    found = ops::eq(ops::reshape(ops::index_select(sorted, 0, ops::reshape(at, {-1})), e.sizes()), e);
  }
  return invert ? ops::logical_not(found) : found;
}
TVec isin_dec(const TVec& in, const Attrs& at) {
  return {isin_impl(in[0], in[1], at.get_or("invert", false))};
}
TVec isin_ts_dec(const TVec& in, const Attrs& at) {
  const Scalar v = at.get_scalar("test_element");
  const DType t = result_type(TVec{in[0], ops::scalar(v)});
  const Tensor test = ops::full_on(in[0], {}, v, t);
  return {isin_impl(in[0], test, at.get_or("invert", false))};
}

// ---- unravel_index ----
TVec unravel_index_dec(const TVec& in, const Attrs& at) {
  const Tensor& idx = in[0];
  TP_CHECK(!is_floating(idx.dtype()) && idx.dtype() != DType::Bool, TypeError,
           "unravel_index: expected 'indices' to be an integer tensor, but got ", dtype_name(idx.dtype()));
  const auto& shape = at.get<std::vector<int64_t>>("shape");
  int64_t total = 1;
  for (int64_t s : shape) {
    TP_CHECK(s >= 0, ValueError, "unravel_index: 'shape' cannot have negative values, but got ", shape_str(shape));
    total *= s;
  }
  const Tensor i64 = ops::to_dtype(idx, DType::Int64);
  if (i64.numel() > 0) {
    const bool bad =
        host_copy_of(ops::any(ops::logical_or(ops::lt(i64, scalar(-total)), ops::ge(i64, scalar(total)))))
            .item()
            .to<bool>();
    TP_CHECK(!bad, IndexError, "unravel_index: 'indices' must be in range [", -total, ", ", total - 1,
             "] for shape ", shape_str(shape));
  }
  // Negative indices count from the end, as in PyTorch.
  Tensor rest = ops::where(ops::lt(i64, scalar(int64_t{0})), ops::add(i64, scalar(total)), i64);
  TVec out(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    const int64_t s = std::max<int64_t>(shape[k], 1);
    out[k] = ops::remainder(rest, scalar(s));
    rest = ops::floor_divide(rest, scalar(s));
  }
  return out;
}

// ---- block_diag ----
TVec block_diag_dec(const TVec& in, const Attrs&) {
  if (in.empty()) return {ops::zeros({1, 0}, DType::Float32)};
  DType t = in[0].dtype();
  int64_t cols = 0;
  TVec mats;
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& m = in[i];
    TP_CHECK(m.dim() <= 2, ValueError, "block_diag: input tensors must have 2 or fewer dimensions; input ", i,
             " has shape ", shape_str(m.sizes()));
    TP_CHECK(m.device() == in[0].device(), ValueError, "block_diag: all tensors must be on the same device");
    t = promote_types(t, m.dtype());
    mats.push_back(m.dim() == 2 ? m : ops::reshape(m, {1, -1}));
    cols += mats.back().sizes()[1];
  }
  TVec rows;
  int64_t left = 0;
  for (const Tensor& m0 : mats) {
    const Tensor m = ops::to_dtype(m0, t);
    const int64_t r = m.sizes()[0], c = m.sizes()[1];
    TVec parts;
    if (left > 0) parts.push_back(ops::full_on(m, {r, left}, Scalar(int64_t{0}), t));
    parts.push_back(m);
    if (cols - left - c > 0) parts.push_back(ops::full_on(m, {r, cols - left - c}, Scalar(int64_t{0}), t));
    rows.push_back(parts.size() == 1 ? m : ops::cat(parts, 1));
    left += c;
  }
  return {ops::cat(rows, 0)};
}

// ---- combinations ----
// The r-tuples of positions i1 < i2 < ... (<= with replacement) are the entries
// of an r-dimensional grid where a mask holds; selecting them from grids of the
// values keeps the row-major (lexicographic) order PyTorch gives.
TVec combinations_dec(const TVec& in, const Attrs& at) {
  const Tensor& x = in[0];
  TP_CHECK(x.dim() == 1, ValueError, "combinations: expect a 1D vector, but got shape ", shape_str(x.sizes()));
  const int64_t r = at.get_int("r");
  TP_CHECK(r >= 0, ValueError, "combinations: r must be non-negative, got ", r);
  const bool with_rep = at.get_or("with_replacement", false);
  const int64_t n = x.sizes()[0];
  // Empty results are slices of x, so they stay connected to x's graph as in PyTorch.
  const Tensor none = ops::slice(x, 0, 0, 0, 1);
  if (r == 0) return {ops::clone(none)};
  if (n == 0 || (!with_rep && r > n)) return {ops::contiguous(ops::expand(ops::reshape(none, {0, 1}), {0, r}))};
  const Tensor pos = ops::arange_on(x, x.numel());
  const TVec pgrid = call_op(TP_OP("meshgrid"), TVec(static_cast<size_t>(r), pos), {{"indexing", std::string("ij")}});
  const TVec vgrid = call_op(TP_OP("meshgrid"), TVec(static_cast<size_t>(r), x), {{"indexing", std::string("ij")}});
  Tensor mask;
  for (int64_t k = 0; k + 1 < r; ++k) {
    const Tensor ok = with_rep ? ops::le(pgrid[k], pgrid[k + 1]) : ops::lt(pgrid[k], pgrid[k + 1]);
    mask = mask.defined() ? ops::logical_and(mask, ok) : ok;
  }
  TVec cols;
  for (int64_t k = 0; k < r; ++k)
    cols.push_back(mask.defined() ? ops::masked_select(vgrid[k], mask) : ops::reshape(vgrid[k], {-1}));
  return {ops::stack(cols, 1)};
}

void composite(const char* name, const char* schema, int num_inputs, DecomposeFn dec, uint32_t extra = 0) {
  register_op({.name = name, .schema = schema, .tags = kComposite | kAllDTypes | extra, .num_inputs = num_inputs,
               .decompose = dec});
}

}  // namespace

void register_extra_composite_ops() {
  composite("nansum", "nansum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
            1, &nansum_dec);
  composite("nanmean", "nanmean(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
            1, &nanmean_dec);
  composite("nanmedian", "nanmedian(Tensor self) -> Tensor", 1, &nanmedian_dec);
  composite("nanmedian.dim",
            "nanmedian.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)", 1,
            &nanmedian_dim_dec);
  composite("aminmax", "aminmax(Tensor self, *, int? dim=None, bool keepdim=False) -> (Tensor min, Tensor max)", 1,
            &aminmax_dec);
  composite("logaddexp2", "logaddexp2(Tensor self, Tensor other) -> Tensor", 2, &logaddexp2_dec);
  composite("renorm", "renorm(Tensor self, Scalar p, int dim, Scalar maxnorm) -> Tensor", 1, &renorm_dec);
  composite("renorm_", "renorm_(Tensor(a!) self, Scalar p, int dim, Scalar maxnorm) -> Tensor(a!)", 1, &renorm__dec,
            kInplace);
  composite("trapezoid.x", "trapezoid.x(Tensor y, Tensor x, *, int dim=-1) -> Tensor", 2, &trapezoid_x_dec);
  composite("trapezoid.dx", "trapezoid.dx(Tensor y, *, Scalar dx=1, int dim=-1) -> Tensor", 1, &trapezoid_dx_dec);
  composite("cumulative_trapezoid.x", "cumulative_trapezoid.x(Tensor y, Tensor x, *, int dim=-1) -> Tensor", 2,
            &cumulative_trapezoid_dec<true>);
  composite("cumulative_trapezoid.dx", "cumulative_trapezoid.dx(Tensor y, *, Scalar dx=1, int dim=-1) -> Tensor", 1,
            &cumulative_trapezoid_dec<false>);
  // trapz: PyTorch's older name of trapezoid.
  composite("trapz.x", "trapz.x(Tensor y, Tensor x, *, int dim=-1) -> Tensor", 2, &trapezoid_x_dec);
  composite("trapz.dx", "trapz.dx(Tensor y, *, float dx=1, int dim=-1) -> Tensor", 1, &trapezoid_dx_dec);
  composite("bernoulli.p", "bernoulli.p(Tensor self, float p, *, Generator? generator=None) -> Tensor", 1,
            &bernoulli_p_dec, kRandom);
  composite("isin.Tensor_Tensor",
            "isin.Tensor_Tensor(Tensor elements, Tensor test_elements, *, bool assume_unique=False, bool invert=False) -> Tensor",
            2, &isin_dec);
  composite("isin.Tensor_Scalar",
            "isin.Tensor_Scalar(Tensor elements, Scalar test_element, *, bool assume_unique=False, bool invert=False) -> Tensor",
            1, &isin_ts_dec);
  composite("unravel_index", "unravel_index(Tensor indices, int[] shape) -> Tensor[]", 1, &unravel_index_dec);
  composite("block_diag", "block_diag(Tensor[] tensors) -> Tensor", -1, &block_diag_dec);
  composite("combinations", "combinations(Tensor self, int r=2, bool with_replacement=False) -> Tensor", 1,
            &combinations_dec);
}

}  // namespace tp
