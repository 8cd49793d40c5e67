// Matrix factorizations of tp.linalg (LAPACK, ops/linalg_lapack.h): the
// primitives linalg_qr, linalg_cholesky, linalg_eigh, linalg_svd,
// linalg_solve, linalg_slogdet and linalg_lstsq, each over leading batch dims, float32 and
// float64, with its derivative written in tensor operators. The rest of
// tp.linalg (inv, det, norms, pinv, lstsq, ...) composes these in Python
// (python/tensorplay/linalg.py), so autograd sees only these primitives.
//
// LAPACK is column-major: each kernel copies one matrix of the batch into a
// column-major buffer, runs the routine and copies the factors back.
#include <cmath>
#include <exception>
#include <limits>
#include <mutex>

#include "core/parallel.h"
#include "ops/blas.h"
#include "ops/derivative_util.h"
#include "ops/dispatch.h"
#include "ops/families.h"
#include "ops/kernel_util.h"
#include "ops/linalg_lapack.h"
#include "ops/registry.h"

namespace tp {
namespace {

// ---------------------------------------------------------------------------
// Shapes and checks shared by the kernels.

// The user-facing name of an op: "linalg_qr" -> "linalg.qr".
std::string user_name(const OpDef& op) {
  std::string n = op.name[0] == '_' ? op.name + 1 : op.name;
  if (n.rfind("linalg_", 0) == 0) n[6] = '.';
  return n;
}

void check_matrix(const OpDef& op, const TensorMeta& m, const char* what, bool square) {
  TP_CHECK(m.dtype == DType::Float32 || m.dtype == DType::Float64, TypeError, user_name(op), ": expected ", what,
           " to be a float32 or float64 tensor, but got ", dtype_name(m.dtype));
  TP_CHECK(m.sizes.size() >= 2, ValueError, user_name(op), ": ", what,
           " must have at least 2 dimensions (a batch of matrices), but got shape ", shape_str(m.sizes));
  if (square)
    TP_CHECK(m.sizes[m.sizes.size() - 1] == m.sizes[m.sizes.size() - 2], ValueError, user_name(op), ": ", what,
             " must be batches of square matrices, but got shape ", shape_str(m.sizes));
}

Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }
Shape with_tail(Shape b, std::initializer_list<int64_t> tail) {
  for (int64_t t : tail) b.push_back(t);
  return b;
}
int64_t count(const Shape& b) {
  int64_t n = 1;
  for (int64_t v : b) n *= v;
  return n;
}
int as_int(const OpDef& op, int64_t v) {
  TP_CHECK(v <= std::numeric_limits<int>::max(), ValueError, user_name(op), ": dimension ", v,
           " is too large for the 32-bit LAPACK interface");
  return static_cast<int>(v);
}

// Row-major rows x cols matrix at `src` -> column-major at `dst` (and back).
template <class T>
void to_colmajor(const T* src, T* dst, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[j * rows + i] = src[i * cols + j];
}
template <class T>
void from_colmajor(const T* src, int64_t ld, T* dst, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i * cols + j] = src[j * ld + i];
}

// Runs fn(b) for each matrix of the batch: in parallel across matrices only
// when they are small (a large one keeps LAPACK's own threads).
// An error (a singular matrix) must not leave a worker thread (that aborts the
// process): the one of the first failing matrix is rethrown after the loop.
template <class F>
void for_batch(int64_t batch, int64_t matrix_elems, F fn) {
  if (batch > 1 && matrix_elems <= 64 * 64) {
    std::mutex mu;
    int64_t failed = batch;
    std::exception_ptr error;
    blas::use_one_thread();  // LAPACK's thread count is global: one per call inside the region
    parallel_for(0, batch, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        try {
          fn(b);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mu);
          if (b < failed) {
            failed = b;
            error = std::current_exception();
          }
          return;
        }
      }
    });
    if (error) std::rethrow_exception(error);
  } else {
    for (int64_t b = 0; b < batch; ++b) fn(b);
  }
}

// The batch index as "[i, j]" for error messages.
std::string batch_index(const Shape& batch, int64_t b) {
  if (batch.empty()) return "";
  Shape idx(batch.size());
  for (size_t d = batch.size(); d-- > 0;) {
    idx[d] = b % batch[d];
    b /= batch[d];
  }
  return " (batch element " + shape_str(idx) + ")";
}

// ---------------------------------------------------------------------------
// Tensor helpers for the derivative formulas (tensor operators only).
namespace f {
Tensor mT(const Tensor& x) { return ops::transpose(x, -2, -1); }
Tensor mm(const Tensor& a, const Tensor& b) { return ops::matmul(a, b); }
Tensor eye_like(const Tensor& x) {  // the identity of x's last dim, in x's dtype, on x's device
  return ops::eye_on(x, x.sizes().back(), x.dtype());
}
Tensor tril(const Tensor& x, int64_t diagonal = 0) { return ops::tril(x, diagonal); }
Tensor solve(const Tensor& a, const Tensor& b) { return call_op1(TP_OP("linalg_solve"), {a, b}); }
Tensor scale(const Tensor& x, double s) { return ops::mul(x, ops::scalar(Scalar(s))); }
Tensor narrow(const Tensor& x, int64_t dim, int64_t n) { return ops::slice(x, dim, 0, n, 1); }
}  // namespace f

// ---------------------------------------------------------------------------
// linalg_qr(A, mode) -> (Q, R): Householder QR (geqrf + orgqr).
std::vector<TensorMeta> qr_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_matrix(op, in[0], "A", false);
  const std::string& mode = attrs.get_str("mode");
  TP_CHECK(mode == "reduced" || mode == "complete" || mode == "r", ValueError,
           "linalg.qr: mode must be 'reduced', 'complete' or 'r', but got '", mode, "'");
  const Shape b = batch_of(in[0].sizes);
  const int64_t m = in[0].sizes[b.size()], n = in[0].sizes[b.size() + 1], k = std::min(m, n);
  const DType dt = in[0].dtype;
  if (mode == "r") return {TensorMeta::contiguous({0}, dt), TensorMeta::contiguous(with_tail(b, {k, n}), dt)};
  const int64_t qc = mode == "complete" ? m : k;
  return {TensorMeta::contiguous(with_tail(b, {m, qc}), dt), TensorMeta::contiguous(with_tail(b, {qc, n}), dt)};
}

std::vector<Tensor> qr_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                           const std::vector<TensorMeta>& om) {
  Tensor Q = alloc_out(om[0]), R = alloc_out(om[1]);
  const std::string& mode = attrs.get_str("mode");
  const Tensor x = as_contiguous(in[0]);
  const Shape bs = batch_of(x.sizes());
  const int64_t m = x.sizes()[bs.size()], n = x.sizes()[bs.size() + 1], k = std::min(m, n);
  const int64_t qc = mode == "complete" ? m : k, rr = mode == "r" ? k : qc;
  if (R.numel() == 0 && Q.numel() == 0) return {Q, R};
  fill(R, Scalar(0.0));
  if (mode != "r" && m > 0 && k == 0) {  // no reflectors: Q is the identity's first columns
    fill(Q, Scalar(0.0));
  }
  TP_DISPATCH_FLOATING(x.dtype(), op.name, ([&]<class T>() {
    const T* px = x.data_as<T>();
    T* pq = mode == "r" ? nullptr : Q.data_as<T>();
    T* pr = R.data_as<T>();
    for_batch(count(bs), m * n, [&](int64_t b) {
      const int64_t cols = std::max(n, qc);  // complete mode with m > n needs m columns for orgqr
      std::vector<T> a(static_cast<size_t>(std::max<int64_t>(1, m * cols))), tau(static_cast<size_t>(std::max<int64_t>(1, k)));
      to_colmajor(px + b * m * n, a.data(), m, n);
      if (k > 0) {
        const int info = lapack::geqrf<T>(as_int(op, m), as_int(op, n), a.data(), as_int(op, std::max<int64_t>(1, m)),
                                          tau.data());
        TP_CHECK(info == 0, Error, "linalg.qr: LAPACK geqrf failed (info ", info, ")");
      }
      T* r = pr + b * rr * n;
      for (int64_t i = 0; i < std::min(rr, m); ++i)
        for (int64_t j = i; j < n; ++j) r[i * n + j] = a[static_cast<size_t>(j * m + i)];
      if (!pq) return;
      T* q = pq + b * m * qc;
      if (k == 0) {
        for (int64_t i = 0; i < std::min(m, qc); ++i) q[i * qc + i] = T(1);
        return;
      }
      const int info = lapack::orgqr<T>(as_int(op, m), as_int(op, qc), as_int(op, k), a.data(),
                                        as_int(op, std::max<int64_t>(1, m)), tau.data());
      TP_CHECK(info == 0, Error, "linalg.qr: LAPACK orgqr failed (info ", info, ")");
      from_colmajor(a.data(), m, q, m, qc);
    });
  }));
  return {Q, R};
}

// A = QR with m >= n (reduced): gA = [gQ + Q copyltu(M)] R^{-T}, where
// M = R gR^T - gQ^T Q; written as in the usual derivation with skew parts.
Tensor qr_backward_tall(const Tensor& Q, const Tensor& R, const Tensor& gQ, const Tensor& gR) {
  Tensor qdq = f::mm(f::mT(Q), gQ);
  Tensor rdr = f::mm(R, f::mT(gR));
  Tensor low = f::tril(ops::add(ops::sub(qdq, f::mT(qdq)), ops::sub(rdr, f::mT(rdr))), -1);
  // x R^{-T} = (R^{-1} x^T)^T
  auto right_solve = [&](const Tensor& x) { return f::mT(f::solve(R, f::mT(x))); };
  Tensor grad_a = f::mm(Q, ops::add(gR, right_solve(low)));
  Tensor grad_b = right_solve(ops::sub(gQ, f::mm(Q, qdq)));
  return ops::add(grad_a, grad_b);
}

// Wide A (m < n; 'reduced' and 'complete' agree): split A = [X | Y] with X
// m x m. Then X = Q U is a square QR (U = R's first m columns) and R's other
// columns are V = Q^T Y. Y's gradient is Q gV; V's dependence on Q adds
// Y gV^T to Q's gradient before the square formula gives X's.
std::vector<Tensor> qr_backward(const BackwardArgs& a) {
  if (!a.needs_grad[0]) return {Tensor()};
  const std::string& mode = a.attrs.get_str("mode");
  const Tensor& A = a.inputs[0];
  const int64_t m = A.sizes()[A.dim() - 2], n = A.sizes()[A.dim() - 1];
  TP_CHECK(mode != "r", Error,
           "linalg.qr: the derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
           "Use mode='reduced' to differentiate");
  TP_CHECK(mode == "reduced" || m <= n, NotImplementedError,
           "linalg.qr: the QR decomposition is not differentiable when mode='complete' and rows > columns (shape ",
           shape_str(A.sizes()), ")");
  const Tensor &Q = a.outputs[0], &R = a.outputs[1];
  Tensor gQ = a.grad_outputs[0].defined() ? a.grad_outputs[0] : ops::zeros_like(Q);
  Tensor gR = a.grad_outputs[1].defined() ? a.grad_outputs[1] : ops::zeros_like(R);
  if (m >= n) return {qr_backward_tall(Q, R, gQ, gR)};
  Tensor Y = ops::slice(A, -1, m, n, 1);
  Tensor gV = ops::slice(gR, -1, m, n, 1);
  Tensor gX = qr_backward_tall(Q, f::narrow(R, -1, m), ops::add(gQ, f::mm(Y, f::mT(gV))), f::narrow(gR, -1, m));
  return {ops::cat({gX, f::mm(Q, gV)}, -1)};
}

// ---------------------------------------------------------------------------
// linalg_cholesky(A, upper) -> L (A = L L^T) or U (A = U^T U).
std::vector<TensorMeta> cholesky_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  check_matrix(op, in[0], "A", true);
  return {TensorMeta::contiguous(in[0].sizes, in[0].dtype)};
}

std::vector<Tensor> cholesky_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                                 const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  if (out.numel() == 0) return {out};
  const Tensor x = as_contiguous(in[0]);
  const bool upper = attrs.get_or("upper", false);
  const Shape bs = batch_of(x.sizes());
  const int64_t n = x.sizes().back();
  TP_DISPATCH_FLOATING(x.dtype(), op.name, ([&]<class T>() {
    const T* px = x.data_as<T>();
    T* po = out.data_as<T>();
    for_batch(count(bs), n * n, [&](int64_t b) {
      // Row-major A read as column-major is A^T, so LAPACK's 'U' reads A's lower
      // triangle (the one PyTorch reads; upper=True reads the upper one, 'L').
      // The factor of A^T, stored column-major, is A's factor stored row-major.
      std::vector<T> a(px + b * n * n, px + (b + 1) * n * n);
      const int info = lapack::potrf<T>(upper ? 'L' : 'U', as_int(op, n), a.data(), as_int(op, n));
      TP_CHECK(info >= 0, Error, "linalg.cholesky: LAPACK potrf failed (info ", info, ")");
      TP_CHECK(info == 0, LinAlgError, "linalg.cholesky: the factorization could not be completed because the input "
               "is not positive-definite (the leading minor of order ", info, " is not positive-definite)",
               batch_index(bs, b), "; input shape ", shape_str(x.sizes()));
      T* o = po + b * n * n;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j)
          o[i * n + j] = (upper ? j >= i : i >= j) ? a[static_cast<size_t>(i * n + j)] : T(0);
    });
  }));
  return {out};
}

// A = L L^T: gA = sym(L^{-T} Phi(L^T gL) L^{-1}), Phi = lower triangle with
// the diagonal halved (L^{-1} dL is lower triangular).
std::vector<Tensor> cholesky_backward(const BackwardArgs& a) {
  if (!a.needs_grad[0] || !a.grad_outputs[0].defined()) return {Tensor()};
  const bool upper = a.attrs.get_or("upper", false);
  Tensor L = upper ? f::mT(a.outputs[0]) : a.outputs[0];
  Tensor gL = upper ? f::mT(a.grad_outputs[0]) : a.grad_outputs[0];
  Tensor P = f::mm(f::mT(L), gL);
  Tensor phi = ops::add(f::tril(P, -1), f::scale(ops::mul(P, f::eye_like(P)), 0.5));
  Tensor Linv = f::solve(L, ops::expand(f::eye_like(L), L.sizes()));
  Tensor g = f::mm(f::mm(f::mT(Linv), phi), Linv);
  return {f::scale(ops::add(g, f::mT(g)), 0.5)};
}

// ---------------------------------------------------------------------------
// linalg_eigh(A, UPLO) -> (eigenvalues ascending, eigenvectors as columns).
std::vector<TensorMeta> eigh_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_matrix(op, in[0], "A", true);
  const std::string& uplo = attrs.get_str("UPLO");
  TP_CHECK(uplo == "L" || uplo == "U", ValueError, "linalg.eigh: UPLO must be 'L' or 'U', but got '", uplo, "'");
  const Shape b = batch_of(in[0].sizes);
  return {TensorMeta::contiguous(with_tail(b, {in[0].sizes.back()}), in[0].dtype),
          TensorMeta::contiguous(in[0].sizes, in[0].dtype)};
}

std::vector<Tensor> eigh_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                             const std::vector<TensorMeta>& om) {
  Tensor W = alloc_out(om[0]), V = alloc_out(om[1]);
  if (V.numel() == 0) return {W, V};
  const Tensor x = as_contiguous(in[0]);
  // Row-major A read as column-major is A^T: its lower triangle is A's upper one.
  const char uplo = attrs.get_str("UPLO") == "L" ? 'U' : 'L';
  const Shape bs = batch_of(x.sizes());
  const int64_t n = x.sizes().back();
  TP_DISPATCH_FLOATING(x.dtype(), op.name, ([&]<class T>() {
    const T* px = x.data_as<T>();
    T* pw = W.data_as<T>();
    T* pv = V.data_as<T>();
    for_batch(count(bs), n * n, [&](int64_t b) {
      std::vector<T> a(px + b * n * n, px + (b + 1) * n * n);
      const int info = lapack::syevd<T>('V', uplo, as_int(op, n), a.data(), as_int(op, n), pw + b * n);
      TP_CHECK(info >= 0, Error, "linalg.eigh: LAPACK syevd failed (info ", info, ")");
      TP_CHECK(info == 0, LinAlgError, "linalg.eigh: the algorithm failed to converge because the input matrix is "
               "ill-conditioned or has too many repeated eigenvalues (error code ", info, ")", batch_index(bs, b),
               "; input shape ", shape_str(x.sizes()));
      from_colmajor(a.data(), n, pv + b * n * n, n, n);
    });
  }));
  return {W, V};
}

// A = V diag(w) V^T: gA = V (diag(gw) + skew(V^T gV) / E) V^T, E_ij = w_j - w_i.
std::vector<Tensor> eigh_backward(const BackwardArgs& a) {
  if (!a.needs_grad[0]) return {Tensor()};
  const Tensor &w = a.outputs[0], &V = a.outputs[1];
  const Tensor &gw = a.grad_outputs[0], &gV = a.grad_outputs[1];
  Tensor I = f::eye_like(V);
  Tensor inner;
  if (gV.defined()) {
    Tensor X = f::mm(f::mT(V), gV);
    X = f::scale(ops::sub(X, f::mT(X)), 0.5);
    Tensor E = ops::sub(ops::unsqueeze(w, -2), ops::unsqueeze(w, -1));
    inner = ops::mul(ops::div(X, ops::add(E, I)), ops::sub(ops::ones_like(I), I));
  }
  if (gw.defined()) {
    Tensor d = ops::mul(ops::unsqueeze(gw, -1), I);
    inner = inner.defined() ? ops::add(inner, d) : d;
  }
  if (!inner.defined()) return {Tensor()};
  return {f::mm(f::mm(V, inner), f::mT(V))};
}

// ---------------------------------------------------------------------------
// linalg_svd(A, full_matrices) -> (U, S, Vh), S descending.
std::vector<TensorMeta> svd_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_matrix(op, in[0], "A", false);
  const bool full = attrs.get_or("full_matrices", true);
  const Shape b = batch_of(in[0].sizes);
  const int64_t m = in[0].sizes[b.size()], n = in[0].sizes[b.size() + 1], k = std::min(m, n);
  const DType dt = in[0].dtype;
  return {TensorMeta::contiguous(with_tail(b, {m, full ? m : k}), dt), TensorMeta::contiguous(with_tail(b, {k}), dt),
          TensorMeta::contiguous(with_tail(b, {full ? n : k, n}), dt)};
}

std::vector<Tensor> svd_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                            const std::vector<TensorMeta>& om) {
  Tensor U = alloc_out(om[0]), S = alloc_out(om[1]), Vh = alloc_out(om[2]);
  const Tensor x = as_contiguous(in[0]);
  const bool full = attrs.get_or("full_matrices", true);
  const Shape bs = batch_of(x.sizes());
  const int64_t m = x.sizes()[bs.size()], n = x.sizes()[bs.size() + 1], k = std::min(m, n);
  const int64_t uc = full ? m : k, vr = full ? n : k;
  if (count(bs) == 0) return {U, S, Vh};
  if (k == 0) {  // an empty matrix: U and Vh are identities (complete) or empty
    fill(U, Scalar(0.0));
    fill(Vh, Scalar(0.0));
  }
  TP_DISPATCH_FLOATING(x.dtype(), op.name, ([&]<class T>() {
    const T* px = x.data_as<T>();
    T* pu = U.data_as<T>();
    T* ps = S.data_as<T>();
    T* pv = Vh.data_as<T>();
    for_batch(count(bs), m * n, [&](int64_t b) {
      if (k == 0) {
        for (int64_t i = 0; i < uc; ++i) pu[b * m * uc + i * uc + i] = T(1);
        for (int64_t i = 0; i < vr; ++i) pv[b * vr * n + i * n + i] = T(1);
        return;
      }
      std::vector<T> a(static_cast<size_t>(m * n)), u(static_cast<size_t>(m * uc)), vt(static_cast<size_t>(vr * n));
      to_colmajor(px + b * m * n, a.data(), m, n);
      const int info = lapack::gesdd<T>(full ? 'A' : 'S', as_int(op, m), as_int(op, n), a.data(), as_int(op, m),
                                        ps + b * k, u.data(), as_int(op, m), vt.data(), as_int(op, vr));
      TP_CHECK(info >= 0, Error, "linalg.svd: LAPACK gesdd failed (info ", info, ")");
      TP_CHECK(info == 0, LinAlgError, "linalg.svd: the algorithm failed to converge because the input matrix is "
               "ill-conditioned or has too many repeated singular values (error code ", info, ")", batch_index(bs, b),
               "; input shape ", shape_str(x.sizes()));
      from_colmajor(u.data(), m, pu + b * m * uc, m, uc);
      from_colmajor(vt.data(), vr, pv + b * vr * n, vr, n);
    });
  }));
  return {U, S, Vh};
}

// The SVD derivative (real case, distinct nonzero singular values where the
// singular vectors receive gradient): with J = U^T gU, K = V^T gV,
// E_ij = s_j^2 - s_i^2,
//   gA = U [diag(gS) + (skew(J) S + S skew(K)) / E] Vh
//        + (I - U U^T) gU S^{-1} Vh + U S^{-1} gV^T (I - V V^T)
// (the last two only when U or V is not square).
std::vector<Tensor> svd_backward(const BackwardArgs& a) {
  if (!a.needs_grad[0]) return {Tensor()};
  const Tensor& A = a.inputs[0];
  const int64_t m = A.sizes()[A.dim() - 2], n = A.sizes()[A.dim() - 1], k = std::min(m, n);
  Tensor U = f::narrow(a.outputs[0], -1, k), S = a.outputs[1], Vh = f::narrow(a.outputs[2], -2, k);
  Tensor gU = a.grad_outputs[0], gS = a.grad_outputs[1], gVh = a.grad_outputs[2];
  if (gU.defined()) gU = f::narrow(gU, -1, k);
  if (gVh.defined()) gVh = f::narrow(gVh, -2, k);
  if (!gU.defined() && !gS.defined() && !gVh.defined()) return {Tensor()};
  if (k == 0) return {ops::zeros_like(A)};
  Tensor V = f::mT(Vh);
  Tensor gV = gVh.defined() ? f::mT(gVh) : Tensor();
  Tensor I = ops::eye_on(A, k, A.dtype());
  Tensor Srow = ops::unsqueeze(S, -2), Scol = ops::unsqueeze(S, -1);
  Tensor S2 = ops::mul(S, S);
  Tensor E = ops::add(ops::sub(ops::unsqueeze(S2, -2), ops::unsqueeze(S2, -1)), I);
  auto skew = [](const Tensor& x) { return ops::sub(x, f::mT(x)); };
  Tensor inner;
  Tensor J, K;
  if (gU.defined()) {
    J = f::mm(f::mT(U), gU);
    inner = ops::mul(skew(J), Srow);
  }
  if (gV.defined()) {
    K = f::mm(f::mT(V), gV);
    Tensor t = ops::mul(Scol, skew(K));
    inner = inner.defined() ? ops::add(inner, t) : t;
  }
  if (inner.defined()) inner = ops::mul(ops::div(inner, E), ops::sub(ops::ones_like(I), I));
  if (gS.defined()) {
    Tensor d = ops::mul(ops::unsqueeze(gS, -1), I);
    inner = inner.defined() ? ops::add(inner, d) : d;
  }
  Tensor gA = f::mm(f::mm(U, inner), Vh);
  if (m > k && gU.defined()) gA = ops::add(gA, f::mm(ops::div(ops::sub(gU, f::mm(U, J)), Srow), Vh));
  if (n > k && gV.defined()) gA = ops::add(gA, f::mm(U, f::mT(ops::div(ops::sub(gV, f::mm(V, K)), Srow))));
  return {gA};
}

// ---------------------------------------------------------------------------
// linalg_solve(A, B) -> X with A X = B; A (*, n, n), B (*, n, k), same batch.
std::vector<TensorMeta> solve_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  check_matrix(op, in[0], "A", true);
  check_matrix(op, in[1], "B", false);
  TP_CHECK(in[0].dtype == in[1].dtype, TypeError, "linalg.solve: expected A and B to have the same dtype, but got ",
           dtype_name(in[0].dtype), " and ", dtype_name(in[1].dtype));
  TP_CHECK(batch_of(in[0].sizes) == batch_of(in[1].sizes) &&
               in[1].sizes[in[1].sizes.size() - 2] == in[0].sizes.back(),
           ValueError, "linalg.solve: incompatible shapes of A ", shape_str(in[0].sizes), " and B ",
           shape_str(in[1].sizes), " (A is (*, n, n) and B (*, n, k) with the same batch dims)");
  return {TensorMeta::contiguous(in[1].sizes, in[1].dtype)};
}

std::vector<Tensor> solve_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs&,
                              const std::vector<TensorMeta>& om) {
  Tensor out = alloc_out(om[0]);
  if (out.numel() == 0 && in[0].numel() == 0) return {out};
  const Tensor A = as_contiguous(in[0]), B = as_contiguous(in[1]);
  const Shape bs = batch_of(A.sizes());
  const int64_t n = A.sizes().back(), k = B.sizes().back();
  if (count(bs) == 0) return {out};
  TP_DISPATCH_FLOATING(A.dtype(), op.name, ([&]<class T>() {
    const T* pa = A.data_as<T>();
    const T* pb = B.data_as<T>();
    T* po = out.data_as<T>();
    for_batch(count(bs), n * n, [&](int64_t b) {
      std::vector<T> lu(static_cast<size_t>(n * n)), rhs(static_cast<size_t>(std::max<int64_t>(1, n * k)));
      std::vector<int> piv(static_cast<size_t>(std::max<int64_t>(1, n)));
      to_colmajor(pa + b * n * n, lu.data(), n, n);
      int info = lapack::getrf<T>(as_int(op, n), as_int(op, n), lu.data(), as_int(op, std::max<int64_t>(1, n)),
                                  piv.data());
      TP_CHECK(info >= 0, Error, "linalg.solve: LAPACK getrf failed (info ", info, ")");
      TP_CHECK(info == 0, LinAlgError, "linalg.solve: the solver failed because the input matrix is singular "
               "(U[", info - 1, ", ", info - 1, "] of its LU factorization is exactly zero)", batch_index(bs, b),
               "; A has shape ", shape_str(A.sizes()));
      if (k == 0) return;
      to_colmajor(pb + b * n * k, rhs.data(), n, k);
      info = lapack::getrs<T>(as_int(op, n), as_int(op, k), lu.data(), as_int(op, std::max<int64_t>(1, n)), piv.data(),
                              rhs.data(), as_int(op, std::max<int64_t>(1, n)));
      TP_CHECK(info == 0, Error, "linalg.solve: LAPACK getrs failed (info ", info, ")");
      from_colmajor(rhs.data(), n, po + b * n * k, n, k);
    });
  }));
  return {out};
}

// X = A^{-1} B: gB = A^{-T} gX, gA = -gB X^T.
std::vector<Tensor> solve_backward(const BackwardArgs& a) {
  const Tensor& g = a.grad_outputs[0];
  if (!g.defined()) return {Tensor(), Tensor()};
  Tensor gB = f::solve(f::mT(a.inputs[0]), g);
  Tensor gA = a.needs_grad[0] ? ops::neg(f::mm(gB, f::mT(a.outputs[0]))) : Tensor();
  return {gA, a.needs_grad[1] ? gB : Tensor()};
}

// linalg_slogdet(A) -> (sign, log|det A|); a singular A gives (0, -inf).
std::vector<TensorMeta> slogdet_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs&) {
  check_matrix(op, in[0], "A", true);
  const Shape b = batch_of(in[0].sizes);
  return {TensorMeta::contiguous(b, in[0].dtype), TensorMeta::contiguous(b, in[0].dtype)};
}

std::vector<Tensor> slogdet_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs&,
                                const std::vector<TensorMeta>& om) {
  Tensor sign = alloc_out(om[0]), logabs = alloc_out(om[1]);
  if (sign.numel() == 0) return {sign, logabs};
  const Tensor A = as_contiguous(in[0]);
  const Shape bs = batch_of(A.sizes());
  const int64_t n = A.sizes().back();
  TP_DISPATCH_FLOATING(A.dtype(), op.name, ([&]<class T>() {
    const T* pa = A.data_as<T>();
    T* ps = sign.data_as<T>();
    T* pl = logabs.data_as<T>();
    for_batch(count(bs), n * n, [&](int64_t b) {
      std::vector<T> lu(static_cast<size_t>(std::max<int64_t>(1, n * n)));
      std::vector<int> piv(static_cast<size_t>(std::max<int64_t>(1, n)));
      to_colmajor(pa + b * n * n, lu.data(), n, n);
      const int info = n == 0 ? 0 : lapack::getrf<T>(as_int(op, n), as_int(op, n), lu.data(), as_int(op, n), piv.data());
      TP_CHECK(info >= 0, Error, "linalg.slogdet: LAPACK getrf failed (info ", info, ")");
      T s = 1;
      double l = 0;  // accumulated in double: a float32 sum of n logs loses digits
      for (int64_t i = 0; i < n; ++i) {
        const T d = lu[static_cast<size_t>(i * n + i)];
        if (piv[static_cast<size_t>(i)] != i + 1) s = -s;
        if (d < 0) s = -s;
        l += std::log(std::abs(static_cast<double>(d)));
      }
      if (info > 0) {
        s = 0;
        l = -std::numeric_limits<double>::infinity();
      }
      ps[b] = s;
      pl[b] = static_cast<T>(l);
    });
  }));
  return {sign, logabs};
}

// d log|det A| = tr(A^{-1} dA): g * A^{-T}. The sign is piecewise constant.
std::vector<Tensor> slogdet_backward(const BackwardArgs& a) {
  const Tensor& g = a.grad_outputs[1];
  if (!a.needs_grad[0] || !g.defined()) return {Tensor()};
  const Tensor& A = a.inputs[0];
  Tensor inv_t = f::solve(f::mT(A), ops::expand(f::eye_like(A), A.sizes()));
  return {ops::mul(ops::unsqueeze(ops::unsqueeze(g, -1), -1), inv_t)};
}

// ---------------------------------------------------------------------------
// linalg_lstsq(A, B, rcond, driver) -> (solution, residuals, rank, singular_values):
// min ||A X - B|| per matrix by LAPACK's gels / gelsy / gelsd / gelss; A
// (*, m, n), B (*, m, k) with the same batch (the Python linalg.lstsq broadcasts
// the batch dims and handles a vector B). Which fields are filled depends on the
// driver, as in PyTorch: residuals (*, k), the squared norms of A X - B, when
// m > n and the driver is not gelsy (linalg.lstsq empties them when some matrix
// is rank-deficient for gelsd/gelss, which only the data tell); rank (*) int64
// except for gels; singular values (*, min(m, n)) for gelsd and gelss.
bool lstsq_has_rank(const std::string& d) { return d != "gels"; }
bool lstsq_has_sv(const std::string& d) { return d == "gelsd" || d == "gelss"; }

std::vector<TensorMeta> lstsq_infer(const OpDef& op, const std::vector<TensorMeta>& in, const Attrs& attrs) {
  check_matrix(op, in[0], "A", false);
  check_matrix(op, in[1], "B", false);
  TP_CHECK(in[0].dtype == in[1].dtype, TypeError, "linalg.lstsq: expected A and B to have the same dtype, but got ",
           dtype_name(in[0].dtype), " and ", dtype_name(in[1].dtype));
  const std::string& d = attrs.get_str("driver");
  TP_CHECK(d == "gels" || d == "gelsy" || d == "gelsd" || d == "gelss", ValueError,
           "linalg.lstsq: driver must be one of 'gels', 'gelsy', 'gelsd', 'gelss', but got '", d, "'");
  const Shape b = batch_of(in[0].sizes);
  const int64_t m = in[0].sizes[b.size()], n = in[0].sizes[b.size() + 1], k = in[1].sizes.back();
  TP_CHECK(batch_of(in[1].sizes) == b && in[1].sizes[in[1].sizes.size() - 2] == m, ValueError,
           "linalg.lstsq: incompatible shapes of A ", shape_str(in[0].sizes), " and B ", shape_str(in[1].sizes),
           " (A is (*, m, n) and B (*, m, k) with the same batch dims)");
  const DType dt = in[0].dtype;
  const bool residuals = m > n && d != "gelsy";
  return {TensorMeta::contiguous(with_tail(b, {n, k}), dt),
          TensorMeta::contiguous(residuals ? with_tail(b, {k}) : Shape{0}, dt),
          TensorMeta::contiguous(lstsq_has_rank(d) ? b : Shape{0}, DType::Int64),
          TensorMeta::contiguous(lstsq_has_sv(d) ? with_tail(b, {std::min(m, n)}) : Shape{0}, dt)};
}

std::vector<Tensor> lstsq_cpu(const OpDef& op, const std::vector<Tensor>& in, const Attrs& attrs,
                              const std::vector<TensorMeta>& om) {
  Tensor X = alloc_out(om[0]), res = alloc_out(om[1]), rank = alloc_out(om[2]), sv = alloc_out(om[3]);
  const std::string& d = attrs.get_str("driver");
  const double rcond = attrs.get_double("rcond");
  const Tensor A = as_contiguous(in[0]), B = as_contiguous(in[1]);
  const Shape bs = batch_of(A.sizes());
  const int64_t m = A.sizes()[bs.size()], n = A.sizes()[bs.size() + 1], k = B.sizes().back();
  const int64_t ldb = std::max<int64_t>({1, m, n});
  const bool want_res = res.numel() > 0, want_rank = lstsq_has_rank(d) && rank.numel() > 0;
  const bool want_sv = lstsq_has_sv(d) && sv.numel() > 0;
  if (count(bs) == 0) return {X, res, rank, sv};
  TP_DISPATCH_FLOATING(A.dtype(), op.name, ([&]<class T>() {
    const T* pa = A.data_as<T>();
    const T* pb = B.data_as<T>();
    T* px = X.data_as<T>();
    T* pres = want_res ? res.data_as<T>() : nullptr;
    int64_t* prank = want_rank ? rank.data_as<int64_t>() : nullptr;
    T* psv = want_sv ? sv.data_as<T>() : nullptr;
    const int64_t mn = std::min(m, n);
    for_batch(count(bs), m * n, [&](int64_t b) {
      std::vector<T> a(static_cast<size_t>(std::max<int64_t>(1, m * n)));
      std::vector<T> rhs(static_cast<size_t>(std::max<int64_t>(1, ldb * k)), T(0));
      std::vector<T> s(static_cast<size_t>(std::max<int64_t>(1, mn)));
      to_colmajor(pa + b * m * n, a.data(), m, n);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < k; ++j) rhs[static_cast<size_t>(j * ldb + i)] = pb[b * m * k + i * k + j];
      int r = 0;
      if (m > 0 && n > 0) {  // otherwise: X = 0, rank 0 (LAPACK's quick return leaves B as it is)
        const int M = as_int(op, m), N = as_int(op, n), K = as_int(op, k), LDA = as_int(op, m),
                  LDB = as_int(op, ldb);
        int info = 0;
        if (d == "gels") {
          info = lapack::gels<T>(M, N, K, a.data(), LDA, rhs.data(), LDB);
          TP_CHECK(info >= 0, Error, "linalg.lstsq: LAPACK gels failed (info ", info, ")");
          TP_CHECK(info == 0, LinAlgError, "linalg.lstsq: driver 'gels' needs A of full rank, but the ", info,
                   "-th diagonal element of its triangular factor is zero", batch_index(bs, b), "; A has shape ",
                   shape_str(A.sizes()), " (the drivers 'gelsy', 'gelsd' and 'gelss' handle rank-deficient A)");
        } else if (d == "gelsy") {
          info = lapack::gelsy<T>(M, N, K, a.data(), LDA, rhs.data(), LDB, static_cast<T>(rcond), &r);
        } else if (d == "gelsd") {
          info = lapack::gelsd<T>(M, N, K, a.data(), LDA, rhs.data(), LDB, s.data(), static_cast<T>(rcond), &r);
        } else {
          info = lapack::gelss<T>(M, N, K, a.data(), LDA, rhs.data(), LDB, s.data(), static_cast<T>(rcond), &r);
        }
        TP_CHECK(info >= 0, Error, "linalg.lstsq: LAPACK ", d, " failed (info ", info, ")");
        TP_CHECK(info == 0, LinAlgError, "linalg.lstsq: the SVD of driver '", d, "' did not converge",
                 batch_index(bs, b), "; A has shape ", shape_str(A.sizes()));
      }
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < k; ++j)
          px[b * n * k + i * k + j] = rhs[static_cast<size_t>(j * ldb + i)];  // LAPACK's first n rows
      if (pres)
        for (int64_t j = 0; j < k; ++j) {
          double acc = 0;  // the rows past n hold the residual's components (full rank)
          for (int64_t i = n; i < m; ++i) {
            const double v = rhs[static_cast<size_t>(j * ldb + i)];
            acc += v * v;
          }
          pres[b * k + j] = static_cast<T>(acc);
        }
      if (prank) prank[b] = r;
      if (psv)
        for (int64_t i = 0; i < mn; ++i) psv[b * mn + i] = s[static_cast<size_t>(i)];
    });
  }));
  return {X, res, rank, sv};
}

// The solution's derivative, as PyTorch defines it: that of X = pinv(A) B (for
// a full-rank A every driver's solution; for a rank-deficient one the minimum-
// norm solution, where the rank stays constant). With P = pinv(A), X = P B and
// R = B - A X:
//   gB = P^T gX
//   gA = -P^T gX X^T + R gX^T P P^T + P^T X gX^T (I - P A)
// (the last two terms vanish for a square invertible A). P comes from the SVD,
// singular values at or below max(m, n) eps s_max dropped (pinv's default).
//
// The residuals r_j = ||A x_j - b_j||^2 (filled for a full-rank tall A): X
// minimizes them, so only their explicit dependence on A and B remains,
// with E = A X - B: gA = 2 (E diag(g)) X^T, gB = -2 E diag(g). The rank and
// singular values have none (linalg.lstsq hands them out detached).
std::vector<Tensor> lstsq_backward(const BackwardArgs& a) {
  const Tensor& gX = a.grad_outputs[0];
  const Tensor& gres = a.grad_outputs[1];
  const Tensor &A = a.inputs[0], &B = a.inputs[1];
  Tensor gA_res, gB_res;
  if (gres.defined() && gres.numel() > 0) {
    const Tensor& X = a.outputs[0];
    Tensor Eg = ops::mul(ops::sub(f::mm(A, X), B), ops::unsqueeze(gres, -2));
    if (a.needs_grad[0]) gA_res = f::scale(f::mm(Eg, f::mT(X)), 2.0);
    if (a.needs_grad[1]) gB_res = f::scale(Eg, -2.0);
  }
  if (!gX.defined()) return {gA_res, gB_res};
  const int64_t m = A.sizes()[A.dim() - 2], n = A.sizes()[A.dim() - 1];
  Attrs svd_attrs;
  svd_attrs.set("full_matrices", false);
  std::vector<Tensor> usv = call_op(TP_OP("linalg_svd"), {A}, svd_attrs);
  const Tensor &U = usv[0], &S = usv[1], &Vh = usv[2];
  Tensor P;
  if (S.sizes().back() == 0) {
    P = ops::zeros_like(f::mT(A));
  } else {
    const double eps = A.dtype() == DType::Float32 ? std::numeric_limits<float>::epsilon()
                                                   : std::numeric_limits<double>::epsilon();
    Tensor tol = f::scale(ops::amax(S, {-1}, true), eps * static_cast<double>(std::max(m, n)));
    Tensor keep = ops::gt(S, tol);
    Tensor sinv = ops::where(keep, ops::reciprocal(ops::where(keep, S, ops::ones_like(S))), ops::zeros_like(S));
    P = f::mm(ops::mul(f::mT(Vh), ops::unsqueeze(sinv, -2)), f::mT(U));
  }
  Tensor gB = a.needs_grad[1] ? f::mm(f::mT(P), gX) : Tensor();
  Tensor gA;
  if (a.needs_grad[0]) {
    Tensor X = f::mm(P, B);
    Tensor PtgX = f::mm(f::mT(P), gX);
    gA = ops::neg(f::mm(PtgX, f::mT(X)));
    Tensor R = ops::sub(B, f::mm(A, X));
    gA = ops::add(gA, f::mm(f::mm(R, f::mT(gX)), f::mm(P, f::mT(P))));
    Tensor I_PA = ops::sub(ops::expand(f::eye_like(A), with_tail(batch_of(A.sizes()), {n, n})), f::mm(P, A));
    gA = ops::add(gA, f::mm(f::mm(f::mT(P), X), f::mm(f::mT(gX), I_PA)));
  }
  if (gA_res.defined()) gA = gA.defined() ? ops::add(gA, gA_res) : gA_res;
  if (gB_res.defined()) gB = gB.defined() ? ops::add(gB, gB_res) : gB_res;
  return {gA, gB};
}

}  // namespace

void register_linalg_decomp_ops() {
  auto reg = [](OpDef d) { register_op(d); };
  reg({.name = "linalg_qr",
       .schema = "linalg_qr(Tensor A, str mode='reduced') -> (Tensor Q, Tensor R)",
       .infer = &qr_infer, .cpu = &qr_cpu, .backward = &qr_backward});
  reg({.name = "linalg_cholesky",
       .schema = "linalg_cholesky(Tensor self, *, bool upper=False) -> Tensor",
       .infer = &cholesky_infer, .cpu = &cholesky_cpu, .backward = &cholesky_backward});
  reg({.name = "linalg_eigh",
       .schema = "linalg_eigh(Tensor self, str UPLO='L') -> (Tensor eigenvalues, Tensor eigenvectors)",
       .infer = &eigh_infer, .cpu = &eigh_cpu, .backward = &eigh_backward});
  reg({.name = "linalg_svd",
       .schema = "linalg_svd(Tensor A, bool full_matrices=True) -> (Tensor U, Tensor S, Tensor Vh)",
       .infer = &svd_infer, .cpu = &svd_cpu, .backward = &svd_backward});
  // The Python linalg.solve broadcasts the batch dims and handles vector B first.
  reg({.name = "linalg_solve",
       .schema = "linalg_solve(Tensor A, Tensor B) -> Tensor", .num_inputs = 2,
       .infer = &solve_infer, .cpu = &solve_cpu, .backward = &solve_backward});
  reg({.name = "linalg_slogdet",
       .schema = "linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet)",
       .infer = &slogdet_infer, .cpu = &slogdet_cpu, .backward = &slogdet_backward});
  // The Python linalg.lstsq broadcasts the batch dims, handles vector B and rcond=None.
  reg({.name = "linalg_lstsq",
       .schema = "linalg_lstsq(Tensor A, Tensor B, float rcond, str driver='gelsy') -> (Tensor solution, Tensor "
                 "residuals, Tensor rank, Tensor singular_values)",
       .num_inputs = 2, .infer = &lstsq_infer, .cpu = &lstsq_cpu, .backward = &lstsq_backward});
}

}  // namespace tp
