// The matrix-product family: matmul (PyTorch semantics: a 1-D left operand is
// a row, a 1-D right operand a column, the added dim is removed from the
// result; leading dims are batch dims and broadcast), mm, bmm, addmm, baddbmm,
// and the composites linear, dot, outer.
//
// float32/float64 run in OpenBLAS (ops/blas.h): a transposed operand is passed
// with the Trans flag and its leading dimension, never copied. Small batched
// products run the batch in parallel (each GEMM on one thread); large ones
// run one after another with BLAS threading. int64 uses a plain loop.
#include <algorithm>

#include "core/parallel.h"
#include "ops/blas.h"
#include "ops/derivative_util.h"
#include "ops/dispatch.h"
#include "ops/families.h"
#include "ops/kernel_util.h"
#include "ops/registry.h"

namespace tp {
namespace {

// ---- inference ----
void check_operand_dtypes(const OpDef& op, const std::vector<TensorMeta>& in) {
  DType d = in[in.size() - 1].dtype;
  for (auto& m : in) {
    if (!m.defined) continue;
    TP_CHECK(m.dtype == d, TypeError, op.name, ": expected all operands to have the same dtype, but got ",
             dtype_name(m.dtype), " and ", dtype_name(d));
  }
  TP_CHECK(d != DType::Bool, TypeError, op.name, ": not implemented for dtype bool");
}

Shape matmul_shape(const char* name, const Shape& a, const Shape& b) {
  const size_t da = a.size(), db = b.size();
  TP_CHECK(da >= 1 && db >= 1, ValueError, name, ": both arguments need to be at least 1D, but they are ", da,
           "D and ", db, "D");
  const int64_t K = a.back(), Kb = db == 1 ? b[0] : b[db - 2];
  TP_CHECK(K == Kb, ValueError, name, ": shapes ", shape_str(a), " and ", shape_str(b), " cannot be multiplied (",
           K, " != ", Kb, ")");
  Shape ba(a.begin(), a.end() - std::min<size_t>(da, 2));
  Shape bb(b.begin(), b.end() - std::min<size_t>(db, 2));
  Shape out = broadcast_shapes(ba, bb, name);
  if (da >= 2) out.push_back(a[da - 2]);
  if (db >= 2) out.push_back(b[db - 1]);
  return out;
}

std::vector<TensorMeta> matmul_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  check_operand_dtypes(op, in);
  return {TensorMeta::contiguous(matmul_shape(op.name, in[0].sizes, in[1].sizes), in[0].dtype)};
}

// mm: exactly 2-D; bmm: exactly 3-D with equal batch (no broadcasting).
template <int Rank>
std::vector<TensorMeta> fixed_rank_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  const size_t k = in.size() - 2;  // addmm/baddbmm carry `self` first
  const Shape &a = in[k].sizes, &b = in[k + 1].sizes;
  TP_CHECK(a.size() == Rank && b.size() == Rank, ValueError, op.name, ": expected ", Rank,
           "-D tensors, but got shapes ", shape_str(a), " and ", shape_str(b));
  if (Rank == 3)
    TP_CHECK(a[0] == b[0], ValueError, op.name, ": batch sizes differ: shapes ", shape_str(a), " and ", shape_str(b));
  check_operand_dtypes(op, in);
  Shape out = matmul_shape(op.name, a, b);
  if (k == 1) {  // addmm / baddbmm: self broadcasts to the result
    TP_CHECK(broadcast_shapes(in[0].sizes, out, op.name) == out, ValueError, op.name, ": self of shape ",
             shape_str(in[0].sizes), " cannot be broadcast to the result shape ", shape_str(out));
  }
  return {TensorMeta::contiguous(std::move(out), in[k].dtype)};
}

// ---- kernels ----
using Layout = blas::MatrixLayout;
Layout matrix_layout(const Tensor& t) {
  const int64_t d = t.dim();
  return blas::matrix_layout(t.sizes()[d - 2], t.sizes()[d - 1], t.strides()[d - 2], t.strides()[d - 1]);
}

// A matrix operand: BLAS layout for floats, raw strides for the integer loop.
struct Mat {
  Tensor t;
  Layout l;
};
template <class T>
Mat prepare(Tensor t) {
  if constexpr (std::is_floating_point_v<T>) {
    Layout l = matrix_layout(t);
    if (!l.ok) {  // e.g. a matrix with a step in both dims: one compact copy
      t = contiguous_copy(t);
      l = matrix_layout(t);
    }
    return {t, l};
  } else {
    return {t, {}};
  }
}

// C[M,N] = alpha * A * B + beta * C for one matrix of the batch.
template <class T>
void gemm_one(const Mat& a, const T* pa, const Mat& b, const T* pb, int64_t M, int64_t N, int64_t K, T alpha, T beta,
              T* c) {
  if constexpr (std::is_floating_point_v<T>) {
    blas::gemm(a.l.trans, b.l.trans, M, N, K, alpha, pa, a.l.ld, pb, b.l.ld, beta, c, N);
  } else {
    const int64_t da = a.t.dim(), db = b.t.dim();
    const int64_t ar = a.t.strides()[da - 2], ac = a.t.strides()[da - 1];
    const int64_t br = b.t.strides()[db - 2], bc = b.t.strides()[db - 1];
    for (int64_t i = 0; i < M; ++i) {
      T* row = c + i * N;
      for (int64_t j = 0; j < N; ++j) row[j] = beta == T(0) ? T(0) : beta * row[j];
      for (int64_t k = 0; k < K; ++k) {
        const T x = alpha * pa[i * ar + k * ac];
        const T* brow = pb + k * br;
        for (int64_t j = 0; j < N; ++j) row[j] += x * brow[j * bc];
      }
    }
  }
}

// out[batch..., M, N] = alpha * a @ b + beta * out, a and b at least 2-D.
// `out` is contiguous; beta != 0 means it already holds the added term.
template <class T>
void batched_gemm(Tensor a, Tensor b, const Tensor& out, T alpha, T beta) {
  const int64_t M = a.sizes()[a.dim() - 2], K = a.sizes()[a.dim() - 1], N = b.sizes()[b.dim() - 1];
  if (out.numel() == 0) return;
  if (K == 0) {  // an empty sum
    if (beta == T(0)) fill(out, Scalar(int64_t{0}));
    else if (beta != T(1)) {
      T* c = out.data_as<T>();
      for (int64_t i = 0; i < out.numel(); ++i) c[i] *= beta;
    }
    return;
  }
  T* c = out.data_as<T>();
  const Shape ba(a.sizes().begin(), a.sizes().end() - 2), bb(b.sizes().begin(), b.sizes().end() - 2);
  const Shape batch = broadcast_shapes(ba, bb, "matmul");
  const int64_t B = numel(batch);
  Mat mb = prepare<T>(b);
  // b shared by every batch element and a's batch and rows stacked as one
  // matrix: a single GEMM (x[B, T, C] @ w[C, D] in a linear layer).
  if (B > 1 && numel(bb) == 1) {
    if (auto st = view_strides(a.sizes(), a.strides(), {B * M, K})) {
      Tensor flat = a.as_strided({B * M, K}, *st, a.offset());
      Layout lf = blas::matrix_layout(B * M, K, (*st)[0], (*st)[1]);
      if (!std::is_floating_point_v<T> || (lf.ok && !lf.trans)) {
        gemm_one<T>({flat, lf}, flat.data_as<T>(), mb, mb.t.data_as<T>(), B * M, N, K, alpha, beta, c);
        return;
      }
    }
  }
  Mat ma = prepare<T>(a);
  const Shape sa = broadcast_strides(ba, Shape(ma.t.strides().begin(), ma.t.strides().end() - 2), batch);
  const Shape sb = broadcast_strides(bb, Shape(mb.t.strides().begin(), mb.t.strides().end() - 2), batch);
  const T* pa = ma.t.data_as<T>();
  const T* pb = mb.t.data_as<T>();
  auto run = [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      int64_t oa = 0, ob = 0, rest = i;
      for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
        const int64_t idx = rest % batch[d];
        rest /= batch[d];
        oa += idx * sa[d];
        ob += idx * sb[d];
      }
      gemm_one<T>(ma, pa + oa, mb, pb + ob, M, N, K, alpha, beta, c + i * M * N);
    }
  };
  // Small products, or a batch that divides evenly among the threads: one
  // product per thread with single-threaded BLAS. Otherwise BLAS threads each.
  const int nt = num_threads();
  if (blas::is_small(M, N, K)) {
    parallel_for(0, B, std::max<int64_t>(1, (int64_t{1} << 16) / (M * N * K + 1)), run);
  } else if (nt > 1 && !in_parallel_region() && (B % nt == 0 || B >= 4 * nt)) {
    if constexpr (std::is_floating_point_v<T>) blas::use_one_thread();
    parallel_for(0, B, 1, run);
  } else {
    run(0, B);
  }
}

// Large integer products parallelize over rows of the result.
template <class T>
void int_gemm_parallel(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t M = a.sizes()[a.dim() - 2];
  if (a.dim() != 2 || b.dim() != 2 || M < 2) return batched_gemm<T>(a, b, out, T(1), T(0));
  const int64_t N = b.sizes()[1], K = a.sizes()[1];
  parallel_for(0, M, std::max<int64_t>(1, 32768 / (N * K + 1)), [&](int64_t lo, int64_t hi) {
    Tensor as = a.as_strided({hi - lo, K}, a.strides(), a.offset() + lo * a.strides()[0]);
    Tensor os = out.as_strided({hi - lo, N}, {N, 1}, out.offset() + lo * N);
    batched_gemm<T>(as, b, os, T(1), T(0));
  });
}

Tensor as_row(const Tensor& a) { return a.as_strided({1, a.sizes()[0]}, {0, a.strides()[0]}, a.offset()); }
Tensor as_col(const Tensor& b) { return b.as_strided({b.sizes()[0], 1}, {b.strides()[0], 0}, b.offset()); }

std::vector<Tensor> matmul_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs&,
                               const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  Tensor a = in[0].dim() == 1 ? as_row(in[0]) : in[0];
  Tensor b = in[1].dim() == 1 ? as_col(in[1]) : in[1];
  TP_DISPATCH_NUMERIC(out.dtype(), op.name, ([&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) batched_gemm<T>(a, b, out, T(1), T(0));
    else int_gemm_parallel<T>(a, b, out);
  }));
  return {out};
}

// addmm / baddbmm: the result starts as self (broadcast), then the GEMM adds.
std::vector<Tensor> addmm_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                              const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  const Scalar beta = attrs.get_scalar("beta"), alpha = attrs.get_scalar("alpha");
  TP_DISPATCH_NUMERIC(out.dtype(), op.name, ([&]<class T>() {
    const T bt = beta.to<T>(), al = alpha.to<T>();
    if (bt != T(0)) copy_into(out, in[0]);  // beta == 0: self is ignored, NaN included (as in BLAS)
    batched_gemm<T>(in[1], in[2], out, al, bt);
  }));
  return {out};
}

// ---- derivatives ----
bool is_one(const Scalar& s) { return s.to_double() == 1.0; }

// d(a @ b): grad_a = grad @ b^T, grad_b = a^T @ grad, computed on the 2-D
// promoted operands, summed over broadcast batch dims, then shaped back.
// Each operand is read only for the other's gradient (autograd keeps no other: OpDef::saved).
std::vector<Tensor> matmul_grads(const Tensor& g, const Tensor& a, const Tensor& b, bool need_a, bool need_b) {
  Shape a2s = a.sizes(), b2s = b.sizes();
  if (a.dim() == 1) a2s.insert(a2s.begin(), 1);
  if (b.dim() == 1) b2s.push_back(1);
  Tensor g2 = b.dim() == 1 ? ops::unsqueeze(g, -1) : g;
  if (a.dim() == 1) g2 = ops::unsqueeze(g2, -2);
  Tensor ga, gb;
  if (need_a) {
    Tensor b2 = b.dim() == 1 ? ops::unsqueeze(b, -1) : b;
    ga = ops::reshape(ops::sum_to(ops::matmul(g2, ops::transpose(b2, -1, -2)), a2s), a.sizes());
  }
  if (need_b) {
    Tensor a2 = a.dim() == 1 ? ops::unsqueeze(a, 0) : a;
    gb = ops::reshape(ops::sum_to(ops::matmul(ops::transpose(a2, -1, -2), g2), b2s), b.sizes());
  }
  return {ga, gb};
}

std::vector<Tensor> matmul_backward(const BackwardArgs& args) {
  const Tensor& g = ops::grad_out(args);
  if (!g.defined()) return {Tensor(), Tensor()};
  return matmul_grads(g, args.inputs[0], args.inputs[1], args.needs_grad[0], args.needs_grad[1]);
}

std::vector<Tensor> addmm_backward(const BackwardArgs& args) {
  const Tensor& g = ops::grad_out(args);
  if (!g.defined()) return {Tensor(), Tensor(), Tensor()};
  const Scalar beta = args.attrs.get_scalar("beta"), alpha = args.attrs.get_scalar("alpha");
  Tensor gs;
  if (args.needs_grad[0]) gs = ops::reduce_grad(is_one(beta) ? g : ops::mul(g, ops::scalar(beta)), args.inputs[0]);
  Tensor ga = is_one(alpha) ? g : ops::mul(g, ops::scalar(alpha));
  auto ab = matmul_grads(ga, args.inputs[1], args.inputs[2], args.needs_grad[1], args.needs_grad[2]);
  return {gs, ab[0], ab[1]};
}

// ---- composites ----
std::vector<Tensor> linear_decompose(const std::vector<Tensor>& in, const Attrs&) {
  const Tensor &x = in[0], &w = in[1], &bias = in[2];
  TP_CHECK(w.dim() == 1 || w.dim() == 2, ValueError, "linear: weight must be 1-D or 2-D, but got shape ",
           shape_str(w.sizes()));
  TP_CHECK(x.dim() >= 1 && x.sizes().back() == w.sizes().back(), ValueError, "linear: input shape ",
           shape_str(x.sizes()), " and weight shape ", shape_str(w.sizes()), " do not match (in_features ",
           w.sizes().back(), ")");
  Tensor wt = w.dim() == 2 ? ops::transpose(w, 0, 1) : w;
  if (bias.defined() && w.dim() == 2 && x.dim() >= 2) {
    // Rows of every batch as one matrix, so the bias is added by the GEMM itself.
    if (view_strides(x.sizes(), x.strides(), {x.numel() / std::max<int64_t>(1, x.sizes().back()), x.sizes().back()})
            .has_value() && x.numel() > 0) {
      Tensor x2 = ops::reshape(x, {-1, x.sizes().back()});
      Tensor y = ops::addmm(bias, x2, wt);
      Shape shape = x.sizes();
      shape.back() = w.sizes()[0];
      return {x.dim() == 2 ? y : ops::view(y, shape)};
    }
  }
  Tensor y = ops::matmul(x, wt);
  return {bias.defined() ? ops::add(y, bias) : y};
}

std::vector<TensorMeta> composite_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  throw Error(str("internal: ", op.name, " is a composite and has no inference of its own (", in.size(), " inputs)"));
}

std::vector<Tensor> dot_decompose(const std::vector<Tensor>& in, const Attrs&) {
  const Tensor &a = in[0], &b = in[1];
  TP_CHECK(a.dim() == 1 && b.dim() == 1, ValueError, "dot: 1D tensors expected, but got ", a.dim(), "D and ",
           b.dim(), "D tensors");
  TP_CHECK(a.numel() == b.numel(), ValueError, "dot: inconsistent tensor size, expected tensor [", a.numel(),
           "] and src [", b.numel(), "] to have the same number of elements");
  return {ops::matmul(a, b)};
}

std::vector<Tensor> outer_decompose(const std::vector<Tensor>& in, const Attrs&) {
  const Tensor &a = in[0], &b = in[1];
  TP_CHECK(a.dim() == 1 && b.dim() == 1, ValueError, "outer: 1D tensors expected, but got shapes ",
           shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  return {ops::mul(ops::unsqueeze(a, 1), ops::unsqueeze(b, 0))};
}

}  // namespace

void register_matmul_ops() {
  register_op({.name = "matmul", .schema = "matmul(Tensor self, Tensor other) -> Tensor", .num_inputs = 2,
               .infer = &matmul_infer, .cpu = &matmul_cpu, .backward = &matmul_backward});
  register_op({.name = "mm", .schema = "mm(Tensor self, Tensor mat2) -> Tensor", .num_inputs = 2,
               .infer = &fixed_rank_infer<2>, .cpu = &matmul_cpu, .backward = &matmul_backward});
  register_op({.name = "bmm", .schema = "bmm(Tensor self, Tensor mat2) -> Tensor", .num_inputs = 2,
               .infer = &fixed_rank_infer<3>, .cpu = &matmul_cpu, .backward = &matmul_backward});
  register_op({.name = "addmm",
               .schema = "addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
               .num_inputs = 3, .infer = &fixed_rank_infer<2>, .cpu = &addmm_cpu, .backward = &addmm_backward});
  register_op({.name = "baddbmm",
               .schema =
                   "baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
               .num_inputs = 3, .infer = &fixed_rank_infer<3>, .cpu = &addmm_cpu, .backward = &addmm_backward});
  register_op({.name = "linear", .schema = "linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
               .tags = kComposite, .num_inputs = 3, .infer = &composite_infer, .decompose = &linear_decompose});
  register_op({.name = "dot", .schema = "dot(Tensor self, Tensor tensor) -> Tensor", .tags = kComposite,
               .num_inputs = 2, .infer = &composite_infer, .decompose = &dot_decompose});
  register_op({.name = "outer", .schema = "outer(Tensor self, Tensor vec2) -> Tensor", .tags = kComposite,
               .num_inputs = 2, .infer = &composite_infer, .decompose = &outer_decompose});
}

}  // namespace tp
