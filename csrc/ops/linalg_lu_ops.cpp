// LU factorization with partial pivoting (tp.linalg.lu_factor / lu / lu_solve, tp.lu_unpack):
// the primitive linalg_lu_factor_ex (LAPACK getrf, any m x n, batched, float32/float64)
// with its derivative in tensor operators, and linalg_lu_pivots_to_permutation, which turns
// LAPACK's sequence of row swaps into the permutation of rows (integer, no derivative).
// Everything else composes these in python/tensorplay/_linalg_lu.py.
#include <algorithm>
#include <limits>
#include <numeric>

#include "core/parallel.h"
#include "ops/blas.h"
#include "ops/dispatch.h"
#include "ops/kernel_util.h"
#include "ops/linalg_lapack.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace tp {
namespace {

Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }
int64_t count(const Shape& b) {
  int64_t n = 1;
  for (int64_t v : b) n *= v;
  return n;
}

// linalg_lu_factor_ex(A) -> (LU, pivots, info): LU packs L (strictly below the
// diagonal, unit diagonal implied) and U; pivots (*, min(m, n)) int32, 1-based, row i
// was swapped with row pivots[i] - 1 at step i; info (*) int32, 0 or the 1-based
// index of the first zero on U's diagonal.
std::vector<TensorMeta> lu_infer(const OpDef&, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  const TensorMeta& a = in[0];
  TP_CHECK(a.dtype == DType::Float32 || a.dtype == DType::Float64, TypeError,
           "linalg.lu_factor: expected A to be a float32 or float64 tensor, but got ", dtype_name(a.dtype));
  TP_CHECK(a.sizes.size() >= 2, ValueError,
           "linalg.lu_factor: A must have at least 2 dimensions (a batch of matrices), but got shape ",
           shape_str(a.sizes));
  TP_CHECK(attrs.get<bool>("pivot"), NotImplementedError,
           "linalg.lu_factor: LU without pivoting is not implemented on the CPU (A of shape ", shape_str(a.sizes), ")");
  const Shape b = batch_of(a.sizes);
  Shape piv = b;
  piv.push_back(std::min(a.sizes[b.size()], a.sizes[b.size() + 1]));
  return {TensorMeta::contiguous(a.sizes, a.dtype), TensorMeta::contiguous(piv, DType::Int32),
          TensorMeta::contiguous(b, DType::Int32)};
}

std::vector<Tensor> lu_cpu(const OpDef&, const std::vector<Tensor>& in, const Attrs&,
                           const std::vector<TensorMeta>& om) {
  Tensor LU = alloc_out(om[0]), piv = alloc_out(om[1]), info = alloc_out(om[2]);
  const Tensor A = as_contiguous(in[0]);
  const Shape bs = batch_of(A.sizes());
  const int64_t m = A.sizes()[bs.size()], n = A.sizes()[bs.size() + 1], k = std::min(m, n);
  const int64_t batch = count(bs);
  // The dispatcher may hand int64 buffers for the int32 results (it widens narrow dtypes
  // around kernels and narrows afterwards): write whichever integer type they have.
  auto put = [](const Tensor& t, int64_t i, int64_t v) {
    if (t.dtype() == DType::Int64) t.data_as<int64_t>()[i] = v;
    else t.data_as<int32_t>()[i] = static_cast<int32_t>(v);
  };
  if (batch == 0) return {LU, piv, info};
  if (k == 0) {
    for (int64_t b = 0; b < batch; ++b) put(info, b, 0);
    return {LU, piv, info};
  }
  TP_CHECK(std::max(m, n) <= std::numeric_limits<int>::max(), ValueError, "linalg.lu_factor: A of shape ",
           shape_str(A.sizes()), " is too large for the 32-bit LAPACK interface");
  TP_DISPATCH_FLOATING(A.dtype(), "linalg.lu_factor", ([&]<class T>() {
    const T* pa = A.data_as<T>();
    T* po = LU.data_as<T>();
    auto one = [&](int64_t b) {
      std::vector<T> buf(static_cast<size_t>(m * n));
      std::vector<int> ip(static_cast<size_t>(k));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) buf[j * m + i] = pa[b * m * n + i * n + j];
      const int r = lapack::getrf<T>(static_cast<int>(m), static_cast<int>(n), buf.data(),
                                     static_cast<int>(std::max<int64_t>(1, m)), ip.data());
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) po[b * m * n + i * n + j] = buf[j * m + i];
      for (int64_t i = 0; i < k; ++i) put(piv, b * k + i, ip[i]);
      put(info, b, r < 0 ? 0 : r);  // r < 0 (a bad argument) cannot happen with the sizes checked above
    };
    if (batch > 1 && m * n <= 64 * 64) {
      blas::use_one_thread();
      parallel_for(0, batch, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) one(b);
      });
    } else {
      for (int64_t b = 0; b < batch; ++b) one(b);
    }
  }));
  return {LU, piv, info};
}

// linalg_lu_pivots_to_permutation(pivots, m) -> perm (*, m) int64: row i of P^T A is row perm[i] of A.
std::vector<TensorMeta> perm_infer(const OpDef&, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  TP_CHECK(in[0].dtype == DType::Int32 || in[0].dtype == DType::Int64, TypeError,
           "lu_unpack: expected pivots to be an int32 tensor, but got ", dtype_name(in[0].dtype));
  TP_CHECK(!in[0].sizes.empty(), ValueError, "lu_unpack: pivots must have at least 1 dimension, got shape ",
           shape_str(in[0].sizes));
  const int64_t m = attrs.get_int("m");
  TP_CHECK(in[0].sizes.back() <= m, ValueError, "lu_unpack: pivots of shape ", shape_str(in[0].sizes),
           " has more entries than the ", m, " rows of LU");
  Shape s = in[0].sizes;
  s.back() = m;
  return {TensorMeta::contiguous(s, DType::Int64)};
}

std::vector<Tensor> perm_cpu(const OpDef&, const std::vector<Tensor>& in, const Attrs& attrs,
                             const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  const Tensor p = as_contiguous(ops::to_dtype(in[0], DType::Int64));
  const int64_t m = attrs.get_int("m"), k = p.sizes().back();
  const int64_t batch = m == 0 ? 0 : out.numel() / m;
  const int64_t* pp = p.data_as<int64_t>();
  int64_t* po = out.data_as<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    int64_t* perm = po + b * m;
    std::iota(perm, perm + m, int64_t{0});
    for (int64_t i = 0; i < k; ++i) {
      const int64_t j = pp[b * k + i] - 1;
      TP_CHECK(j >= 0 && j < m, ValueError, "lu_unpack: pivots[..., ", i, "] = ", j + 1,
               " is out of range: pivots are 1-based row numbers in [1, ", m, "]");
      std::swap(perm[i], perm[j]);
    }
  }
  return {out};
}

namespace f {
Tensor mT(const Tensor& x) { return ops::transpose(x, -2, -1); }
Tensor mm(const Tensor& a, const Tensor& b) { return ops::matmul(a, b); }
Tensor solve(const Tensor& a, const Tensor& b) { return call_op1(TP_OP("linalg_solve"), {a, b}); }
Tensor cols(const Tensor& x, int64_t start, int64_t len) { return ops::narrow(x, -1, start, len); }
Tensor rows(const Tensor& x, int64_t start, int64_t len) { return ops::narrow(x, -2, start, len); }
Tensor unit_lower(const Tensor& x) {  // strictly lower part of a k x k block plus the identity
  return ops::add(ops::tril(x, -1), ops::eye_on(x, x.sizes().back(), x.dtype()));
}
}  // namespace f

// With P^T A = L U (L m x k unit lower, U k x n upper, k = min(m, n)) and gL, gU the
// gradients of L's strictly lower and U's upper entries (LU's packed gradient split):
//   m <= n: M = tril(L^T gL - gU2 U2^T, -1) + triu(gU1 U1^T); gA = P L^{-T} [M U1^{-T} | gU2]
//   m >  n: M = tril(L1^T gL1, -1) + triu(gU U^T - L2^T gL2); gA = P [L1^{-T} M ; gL2] U^{-T}
// (U = [U1 | U2], L = [L1 ; L2] split at k), from P^T dA = dL U + L dU with dL strictly
// lower and dU upper. The inverses are solves (U1 and L1 are triangular and invertible
// wherever the factorization is differentiable).
std::vector<Tensor> lu_backward(const BackwardArgs& a) {
  const Tensor& g = a.grad_outputs[0];
  if (!g.defined() || !a.needs_grad[0]) return {Tensor()};
  const Tensor& LU = a.outputs[0];
  const int64_t m = LU.sizes()[LU.dim() - 2], n = LU.sizes().back(), k = std::min(m, n);
  const Tensor perm = call_op1(TP_OP("linalg_lu_pivots_to_permutation"), {a.outputs[1]}, {{"m", AttrValue(m)}});
  // P Y: row perm[i] of the result is row i of Y (P^T A is A's rows in perm's order).
  auto apply_P = [&](const Tensor& Y) {
    Tensor r = ops::zeros_like(Y);
    Tensor idx = ops::expand(ops::unsqueeze(perm, -1), Y.sizes());
    return ops::scatter(r, -2, idx, Y);
  };
  const Tensor gl = ops::tril(g, -1), gu = ops::triu(g);
  Tensor gA;
  if (m <= n) {
    const Tensor L = f::unit_lower(f::cols(LU, 0, k));
    const Tensor U1 = f::cols(ops::triu(LU), 0, k);
    const Tensor gL = f::cols(gl, 0, k), gU1 = f::cols(gu, 0, k);
    Tensor inner = f::mm(f::mT(L), gL);
    Tensor gU2;
    if (n > k) {
      const Tensor U2 = f::cols(LU, k, n - k);
      gU2 = f::cols(gu, k, n - k);
      inner = ops::sub(inner, f::mm(gU2, f::mT(U2)));
    }
    const Tensor M = ops::add(ops::tril(inner, -1), ops::triu(f::mm(gU1, f::mT(U1))));
    Tensor W = f::mT(f::solve(U1, f::mT(M)));  // M U1^{-T}
    if (n > k) W = ops::cat({W, gU2}, -1);
    gA = apply_P(f::solve(f::mT(L), W));
  } else {
    const Tensor L1 = f::unit_lower(f::rows(LU, 0, k));
    const Tensor L2 = f::rows(LU, k, m - k);
    const Tensor U = ops::triu(f::rows(LU, 0, k));
    const Tensor gL1 = f::rows(gl, 0, k), gL2 = f::rows(gl, k, m - k), gU = f::rows(gu, 0, k);
    const Tensor M = ops::add(ops::tril(f::mm(f::mT(L1), gL1), -1),
                              ops::triu(ops::sub(f::mm(gU, f::mT(U)), f::mm(f::mT(L2), gL2))));
    const Tensor W = ops::cat({f::solve(f::mT(L1), M), gL2}, -2);
    gA = apply_P(f::mT(f::solve(U, f::mT(W))));  // W U^{-T}
  }
  return {gA};
}

}  // namespace

void register_linalg_lu_ops();  // called by register_builtin_ops (builtin_ops.cpp)
void register_linalg_lu_ops() {
  register_op({.name = "linalg_lu_factor_ex",
               .schema = "linalg_lu_factor_ex(Tensor A, *, bool pivot=True, bool check_errors=False) -> (Tensor LU, "
                         "Tensor pivots, Tensor info)",
               .infer = &lu_infer, .cpu = &lu_cpu, .backward = &lu_backward});
  register_op({.name = "linalg_lu_pivots_to_permutation",
               .schema = "linalg_lu_pivots_to_permutation(Tensor pivots, int m) -> Tensor",
               .infer = &perm_infer, .cpu = &perm_cpu});
}

}  // namespace tp
