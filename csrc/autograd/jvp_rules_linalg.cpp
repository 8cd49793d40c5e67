// Tangent formulas of the tp.linalg factorizations and the special functions
// (ops/linalg_decomp_ops.cpp, ops/special_ops.cpp). The matrix ones follow from
// differentiating the defining identity (A X = B, A = L L^T, A = QR, A V = V diag(w),
// A = U diag(S) Vh) and assume what the reverse formulas assume (a symmetric dA
// for cholesky/eigh, distinct eigen/singular values, QR: X of a wide A = [X | Y] invertible).
#include "autograd/jvp_rules.h"
#include "core/error.h"

namespace tp::autograd::forward_ad {
namespace {

Tensor mT(const Tensor& x) { return ops::transpose(x, -2, -1); }
Tensor mm(const Tensor& a, const Tensor& b) { return ops::matmul(a, b); }
Tensor solve(const Tensor& a, const Tensor& b) { return call_op1(TP_OP("linalg_solve"), {a, b}); }
Tensor eye_of(const Tensor& x) { return ops::eye_on(x, x.sizes().back(), x.dtype()); }
Tensor diag_part(const Tensor& x) { return ops::sum(ops::mul(x, eye_of(x)), {-1}); }  // (*, n)
Tensor off_diag_inverse(const Tensor& E) {  // 1/E off the diagonal, 0 on it
  Tensor I = eye_of(E);
  return ops::mul(ops::div(ops::ones_like(E), ops::add(E, I)), ops::sub(ops::ones_like(I), I));
}
// x R^{-1} for a square invertible R.
Tensor right_solve(const Tensor& x, const Tensor& R) { return mT(solve(mT(R), mT(x))); }

std::vector<Tensor> solve_jvp(const JvpArgs& a) {
  const Tensor& X = a.outputs[0];
  Tensor rhs = tan_or_zero(a, 1);
  if (a.has(0)) rhs = ops::sub(rhs, mm(a.tangents[0], X));
  return {solve(a.inputs[0], rhs)};
}

std::vector<Tensor> slogdet_jvp(const JvpArgs& a) {
  const Tensor& A = a.inputs[0];
  Tensor inv_t = solve(mT(A), ops::expand(eye_of(A), A.sizes()));
  return {Tensor(), ops::sum(ops::mul(inv_t, a.tangents[0]), {-2, -1})};
}

std::vector<Tensor> cholesky_jvp(const JvpArgs& a) {
  const bool upper = a.attrs.get_or("upper", false);
  Tensor L = upper ? mT(a.outputs[0]) : a.outputs[0];
  Tensor Linv = solve(L, ops::expand(eye_of(L), L.sizes()));
  Tensor P = mm(mm(Linv, a.tangents[0]), mT(Linv));
  Tensor phi = ops::add(ops::tril(P, -1), ops::mul(ops::mul(P, eye_of(P)), ops::scalar(Scalar(0.5))));
  Tensor dL = mm(L, phi);
  return {upper ? mT(dL) : dL};
}

std::vector<Tensor> eigh_jvp(const JvpArgs& a) {
  const Tensor &w = a.outputs[0], &V = a.outputs[1];
  Tensor X = mm(mm(mT(V), a.tangents[0]), V);
  Tensor F = off_diag_inverse(ops::sub(ops::unsqueeze(w, -2), ops::unsqueeze(w, -1)));
  return {diag_part(X), mm(V, ops::mul(F, X))};
}

// Rows >= columns (reduced): from dA = dQ R + Q dR with Q^T dQ skew.
std::pair<Tensor, Tensor> qr_jvp_tall(const Tensor& Q, const Tensor& R, const Tensor& dA) {
  Tensor dAR = right_solve(dA, R);  // dA R^{-1}
  Tensor C = mm(mT(Q), dAR);
  Tensor low = ops::tril(C, -1);
  Tensor omega = ops::sub(low, mT(low));
  Tensor dR = mm(ops::sub(C, omega), R);
  Tensor dQ = ops::add(mm(Q, ops::sub(omega, C)), dAR);
  return {dQ, dR};
}

// Wide A = [X | Y] (X m x m): X = Q U is the square case, R's other columns
// V = Q^T Y give dV = dQ^T Y + Q^T dY (the reverse formula's split).
std::vector<Tensor> qr_jvp(const JvpArgs& a) {
  const Tensor& A = a.inputs[0];
  const int64_t m = A.sizes()[A.dim() - 2], n = A.sizes()[A.dim() - 1];
  const std::string& mode = a.attrs.get_str("mode");
  TP_CHECK(mode != "r" && (mode == "reduced" || m <= n), NotImplementedError,
           "linalg.qr: forward-mode derivative needs Q (not mode='r') and, for mode='complete', rows <= columns, but "
           "got mode='", mode, "' and shape ", shape_str(A.sizes()));
  const Tensor &Q = a.outputs[0], &R = a.outputs[1];
  const Tensor& dA = a.tangents[0];
  if (m >= n) {
    auto [dQ, dR] = qr_jvp_tall(Q, R, dA);
    return {dQ, dR};
  }
  auto [dQ, dU] = qr_jvp_tall(Q, ops::slice(R, -1, 0, m, 1), ops::slice(dA, -1, 0, m, 1));
  Tensor dV = ops::add(mm(mT(dQ), ops::slice(A, -1, m, n, 1)), mm(mT(Q), ops::slice(dA, -1, m, n, 1)));
  return {dQ, ops::cat({dU, dV}, -1)};
}

// lstsq: the solution's tangent is that of pinv(A) B (reverse: lstsq_backward in
// ops/linalg_decomp_ops.cpp), with P = pinv(A) and E = A X - B:
//   dX = -P dA X - P P^T dA^T E + (I - P A) dA^T P^T X + P dB;
// the residuals' (filled for a full-rank tall A, where A^T E = 0) is
// 2 sum_rows(E * (dA X - dB)). Rank and singular values get none.
std::vector<Tensor> lstsq_jvp(const JvpArgs& a) {
  const Tensor &A = a.inputs[0], &X = a.outputs[0], &res = a.outputs[1];
  const int64_t m = A.sizes()[A.dim() - 2], n = A.sizes()[A.dim() - 1];
  Attrs svd_attrs;
  svd_attrs.set("full_matrices", false);
  std::vector<Tensor> usv = call_op(TP_OP("linalg_svd"), {A}, svd_attrs);
  const Tensor &U = usv[0], &S = usv[1], &Vh = usv[2];
  Tensor P = ops::zeros_like(mT(A));
  if (S.sizes().back() > 0) {  // pinv's default cutoff: max(m, n) eps s_max
    const double eps = A.dtype() == DType::Float32 ? 1.1920928955078125e-07 : 2.220446049250313e-16;
    Tensor tol = ops::mul(ops::amax(S, {-1}, true), ops::scalar(Scalar(eps * static_cast<double>(std::max(m, n)))));
    Tensor keep = ops::gt(S, tol);
    Tensor sinv = ops::where(keep, ops::reciprocal(ops::where(keep, S, ops::ones_like(S))), ops::zeros_like(S));
    P = mm(ops::mul(mT(Vh), ops::unsqueeze(sinv, -2)), mT(U));
  }
  Tensor E = ops::sub(mm(A, X), a.inputs[1]);
  Tensor dX = a.has(1) ? mm(P, a.tangents[1]) : ops::zeros_like(X);
  Tensor dAX_dB = a.has(1) ? ops::neg(a.tangents[1]) : ops::zeros_like(E);  // dA X - dB
  if (a.has(0)) {
    const Tensor& dA = a.tangents[0];
    dX = ops::sub(dX, mm(mm(P, dA), X));
    dX = ops::sub(dX, mm(mm(P, mT(P)), mm(mT(dA), E)));
    Tensor I_PA = ops::sub(ops::expand(eye_of(A), mm(P, A).sizes()), mm(P, A));
    dX = ops::add(dX, mm(mm(I_PA, mT(dA)), mm(mT(P), X)));
    dAX_dB = ops::add(dAX_dB, mm(dA, X));
  }
  Tensor dres;
  if (res.numel() > 0)
    dres = ops::mul(ops::sum(ops::mul(E, dAX_dB), {-2}), ops::scalar(Scalar(2.0)));
  return {dX, dres, Tensor(), Tensor()};
}

std::vector<Tensor> svd_jvp(const JvpArgs& a) {
  const Tensor& A = a.inputs[0];
  const int64_t m = A.sizes()[A.dim() - 2], n = A.sizes()[A.dim() - 1];
  TP_CHECK(!a.attrs.get_or("full_matrices", true) || m == n, NotImplementedError,
           "linalg.svd: forward-mode derivative needs full_matrices=False for a non-square input (shape ",
           shape_str(A.sizes()), ")");
  const Tensor &U = a.outputs[0], &S = a.outputs[1], &Vh = a.outputs[2];
  Tensor V = mT(Vh);
  const Tensor& dA = a.tangents[0];
  Tensor dP = mm(mm(mT(U), dA), V);
  Tensor Srow = ops::unsqueeze(S, -2), Scol = ops::unsqueeze(S, -1);
  Tensor S2 = ops::mul(S, S);
  Tensor F = off_diag_inverse(ops::sub(ops::unsqueeze(S2, -2), ops::unsqueeze(S2, -1)));
  Tensor dS = diag_part(dP);
  Tensor dU = mm(U, ops::mul(F, ops::add(ops::mul(dP, Srow), ops::mul(Scol, mT(dP)))));
  Tensor dV = mm(V, ops::mul(F, ops::add(ops::mul(Scol, dP), ops::mul(mT(dP), Srow))));
  if (m > n) dU = ops::add(dU, ops::div(ops::sub(mm(dA, V), mm(U, dP)), Srow));
  if (n > m) dV = ops::add(dV, ops::div(ops::sub(mm(mT(dA), U), mm(V, mT(dP))), Srow));
  return {dU, dS, mT(dV)};
}

Tensor polygamma_of(int64_t n, const Tensor& x) {
  Attrs at;
  at.set("n", n);
  return call_op1(TP_OP("polygamma"), {x}, at);
}
std::vector<Tensor> lgamma_jvp(const JvpArgs& a) { return scale(a, call_op1(TP_OP("digamma"), {a.inputs[0]})); }
std::vector<Tensor> digamma_jvp(const JvpArgs& a) { return scale(a, polygamma_of(1, a.inputs[0])); }
std::vector<Tensor> polygamma_jvp(const JvpArgs& a) {
  return scale(a, polygamma_of(a.attrs.get_int("n") + 1, a.inputs[0]));
}
std::vector<Tensor> i0_jvp(const JvpArgs& a) { return scale(a, call_op1(TP_OP("special_i1"), {a.inputs[0]})); }
std::vector<Tensor> i1_jvp(const JvpArgs& a) {
  const Tensor& x = a.inputs[0];
  Tensor zero = ops::eq(x, ops::zeros_like(x));
  Tensor d = ops::sub(call_op1(TP_OP("i0"), {x}), ops::div(a.outputs[0], ops::where(zero, ops::ones_like(x), x)));
  return scale(a, ops::where(zero, ops::full_like(x, Scalar(0.5)), d));
}

}  // namespace

// LU (linalg_lu_factor_ex, packed): with P^T A = L U, k = min(m, n), from P^T dA = dL U + L dU
// with dL strictly lower and dU upper.  m <= n: W = L^{-1} P^T dA = [W1 | W2],
// C = W1 U1^{-1}, dL = L tril(C, -1), dU1 = triu(C) U1, dU2 = W2 - tril(C, -1) U2.
// m > n: W = P^T dA U^{-1} = [W1 ; W2], C = L1^{-1} W1, dU = triu(C) U,
// dL1 = L1 tril(C, -1), dL2 = W2 - L2 triu(C).
std::vector<Tensor> lu_factor_jvp(const JvpArgs& a) {
  const Tensor& LU = a.outputs[0];
  const int64_t m = LU.sizes()[LU.dim() - 2], n = LU.sizes().back(), k = std::min(m, n);
  const Tensor perm = call_op1(TP_OP("linalg_lu_pivots_to_permutation"), {a.outputs[1]}, {{"m", AttrValue(m)}});
  const Tensor dA = a.tangents[0];
  const Tensor PtdA = ops::gather(dA, -2, ops::expand(ops::unsqueeze(perm, -1), dA.sizes()));
  auto unit_lower = [](const Tensor& x) { return ops::add(ops::tril(x, -1), eye_of(x)); };
  Tensor dLU;
  if (m <= n) {
    const Tensor L = unit_lower(ops::narrow(LU, -1, 0, k));
    const Tensor U1 = ops::triu(ops::narrow(LU, -1, 0, k));
    const Tensor W = solve(L, PtdA);
    const Tensor C = right_solve(ops::narrow(W, -1, 0, k), U1);
    const Tensor Z = ops::tril(C, -1);
    dLU = ops::add(mm(L, Z), mm(ops::triu(C), U1));
    if (n > k) dLU = ops::cat({dLU, ops::sub(ops::narrow(W, -1, k, n - k), mm(Z, ops::narrow(LU, -1, k, n - k)))}, -1);
  } else {
    const Tensor L1 = unit_lower(ops::narrow(LU, -2, 0, k));
    const Tensor L2 = ops::narrow(LU, -2, k, m - k);
    const Tensor U = ops::triu(ops::narrow(LU, -2, 0, k));
    const Tensor W = right_solve(PtdA, U);
    const Tensor C = solve(L1, ops::narrow(W, -2, 0, k));
    const Tensor V = ops::triu(C);
    dLU = ops::cat({ops::add(mm(L1, ops::tril(C, -1)), mm(V, U)), ops::sub(ops::narrow(W, -2, k, m - k), mm(L2, V))},
                   -2);
  }
  return {dLU, Tensor(), Tensor()};
}

void register_linalg_jvp_rules() {
  register_jvp("linalg_lu_factor_ex", &lu_factor_jvp);
  register_jvp("linalg_solve", &solve_jvp);
  register_jvp("linalg_slogdet", &slogdet_jvp);
  register_jvp("linalg_cholesky", &cholesky_jvp);
  register_jvp("linalg_eigh", &eigh_jvp);
  register_jvp("linalg_qr", &qr_jvp);
  register_jvp("linalg_svd", &svd_jvp);
  register_jvp("linalg_lstsq", &lstsq_jvp);
  register_jvp("lgamma", &lgamma_jvp);
  register_jvp("digamma", &digamma_jvp);
  register_jvp("polygamma", &polygamma_jvp);
  register_jvp("i0", &i0_jvp);
  register_jvp("special_i1", &i1_jvp);
}

}  // namespace tp::autograd::forward_ad
