"""tp.linalg: PyTorch's torch.linalg over float32/float64 tensors with leading batch dims.

The factorizations are C++ operators over LAPACK (csrc/ops/linalg_decomp_ops.cpp:
linalg_qr, linalg_cholesky, linalg_eigh, linalg_svd, _linalg_solve, linalg_slogdet, linalg_lstsq),
each with its derivative; everything here composes them with ordinary operators, so
autograd and tp.compile see only those primitives. Factorization failures (a singular
or non-positive-definite matrix) raise LinAlgError, a RuntimeError.
"""
import math
import re
import sys
from collections import namedtuple

from . import _C
from .amp.autocast_mode import _autocast_composite  # PyTorch runs linear algebra in float32 under autocast

LinAlgError = _C.LinAlgError

__all__ = [
    "LinAlgError", "solve", "inv", "inv_ex", "det", "slogdet", "logdet", "cholesky", "cholesky_ex", "qr", "eigh",
    "eigvalsh", "svd", "svdvals", "lstsq", "matrix_norm", "vector_norm", "norm", "pinv", "matrix_rank", "cross",
    "matmul", "multi_dot", "matrix_power", "vecdot", "diagonal", "solve_triangular", "matrix_exp",
    "solve_ex", "cond", "vander", "tensorinv", "tensorsolve", "householder_product",
]

_lstsq_result = namedtuple("lstsq", ["solution", "residuals", "rank", "singular_values"])
_inv_ex_result = namedtuple("inv_ex", ["inverse", "info"])
_cholesky_ex_result = namedtuple("cholesky_ex", ["L", "info"])
_solve_ex_result = namedtuple("solve_ex", ["result", "info"])


def _tp():
    return sys.modules[__package__]


def _prim(prim, user, *args, **kwargs):
    """Runs the primitive `prim` (tp.linalg_qr, ...) for the user-facing function `user`
    ("linalg.inv"): its errors then name the function the user called, not the primitive."""
    try:
        return getattr(_tp(), prim)(*args, **kwargs)
    except (LinAlgError, RuntimeError, ValueError, TypeError, NotImplementedError) as e:
        msg = str(e)
        for inner in (prim, prim.replace("linalg_", "linalg.", 1)):
            if msg.startswith(inner + ": "):
                msg = user + ": " + msg[len(inner) + 2:]
        msg = re.sub(r" \(in linalg[._]\w+\)$", "", msg)
        raise type(e)(msg) from None


def _check_float(name, *tensors):
    for t in tensors:
        if t.dtype not in (_tp().float32, _tp().float64):
            raise TypeError(f"linalg.{name}: expected a float32 or float64 tensor, but got {t.dtype}")


def _check_square(name, A, what="A"):
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"linalg.{name}: {what} must be batches of square matrices, but got shape {list(A.shape)}")


def _eye_like(A):
    n = A.shape[-1]
    return _tp().eye(n, dtype=A.dtype, device=A.device).expand(tuple(A.shape))


def _mT(x):
    return x.transpose(-2, -1)


# ---------------------------------------------------------------------------
# Linear systems, inverse, determinants

@_autocast_composite("linalg_solve")
def solve(A, B, *, left=True, out=None):
    """The solution X of A X = B (left=True) or X A = B; B is a vector when it has one dim
    fewer than A and matches A's leading shape (PyTorch's rule). Batch dims broadcast."""
    tp = _tp()
    _check_float("solve", A, B)
    _check_square("solve", A)
    if not left:
        return _finish(_mT(solve(_mT(A), _mT(B))), out)
    vector = B.dim() == 1 or (B.dim() == A.dim() - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.dim() < 2 or Bm.shape[-2] != A.shape[-1]:
        raise ValueError(f"linalg.solve: incompatible shapes of A {list(A.shape)} and B {list(B.shape)} "
                         f"(B must have {A.shape[-1]} rows)")
    batch = _broadcast("solve", A, B, tuple(A.shape[:-2]), tuple(Bm.shape[:-2]))
    if A.dtype != B.dtype:
        raise TypeError(f"linalg.solve: expected A and B to have the same dtype, but got {A.dtype} and {B.dtype}")
    Ab = A.expand(batch + tuple(A.shape[-2:]))
    Bb = Bm.expand(batch + tuple(Bm.shape[-2:]))
    X = _prim("linalg_solve", "linalg.solve", Ab, Bb)
    return _finish(X.squeeze(-1) if vector else X, out)


def _broadcast(name, A, B, a, b):
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise ValueError(f"linalg.{name}: the batch dims of A {list(A.shape)} and B {list(B.shape)} "
                             f"do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(out)


def _finish(result, out, name="linalg"):
    """out=: resized when its shape differs, cast when allowed (the generated operators' rule)."""
    if out is None:
        return result
    _C._write_out(name, out, result)
    return out


def inv(A, *, out=None):
    """The inverse of each square matrix of A (LinAlgError when one is singular)."""
    _check_float("inv", A)
    _check_square("inv", A)
    return _finish(_prim("linalg_solve", "linalg.inv", A, _eye_like(A)), out)


def inv_ex(A, *, check_errors=False):
    """(inverse, info): info 0 for an invertible matrix, else > 0 (the inverse is then NaN)."""
    tp = _tp()
    try:
        return _inv_ex_result(inv(A), tp.zeros(tuple(A.shape[:-2]), dtype=tp.int32, device=A.device))
    except LinAlgError:
        if check_errors:
            raise
    sign, _ = tp.linalg_slogdet(A)
    info = (sign == 0).to(tp.int32)
    return _inv_ex_result(tp.full(tuple(A.shape), float("nan"), dtype=A.dtype, device=A.device), info)


@_autocast_composite("linalg_slogdet")
def slogdet(A, *, out=None):
    """(sign, logabsdet) of each square matrix: det = sign * exp(logabsdet); (0, -inf) if singular."""
    _check_float("slogdet", A)
    _check_square("slogdet", A)
    return _prim("linalg_slogdet", "linalg.slogdet", A)


def det(A, *, out=None):
    """The determinant of each square matrix of A (0 for a singular one)."""
    _check_float("det", A)
    _check_square("det", A)
    sign, logabs = _prim("linalg_slogdet", "linalg.det", A)
    return _finish(sign * logabs.exp(), out)


def logdet(A):
    """log(det A): NaN for a negative determinant, -inf for a singular matrix (torch.logdet)."""
    tp = _tp()
    sign, logabs = slogdet(A)
    return tp.where(sign < 0, tp.full((), float("nan"), dtype=A.dtype, device=A.device), logabs)


# ---------------------------------------------------------------------------
# Factorizations

@_autocast_composite("linalg_cholesky")
def cholesky(A, *, upper=False, out=None):
    """L with A = L L^T (upper=True: U with A = U^T U); LinAlgError if A is not positive-definite.
    Only the lower triangle of A is read."""
    _check_float("cholesky", A)
    return _finish(_prim("linalg_cholesky", "linalg.cholesky", A, upper=upper), out)


def cholesky_ex(A, *, upper=False, check_errors=False):
    tp = _tp()
    try:
        return _cholesky_ex_result(cholesky(A, upper=upper), tp.zeros(tuple(A.shape[:-2]), dtype=tp.int32, device=A.device))
    except LinAlgError:
        if check_errors:
            raise
    # Report per matrix which one failed, like PyTorch's info (order of the failing minor).
    flat = A.reshape(-1, A.shape[-2], A.shape[-1])
    Ls, infos = [], []
    for i in range(flat.shape[0]):
        try:
            Ls.append(tp.linalg_cholesky(flat[i], upper=upper))
            infos.append(0)
        except LinAlgError as e:
            msg = str(e)
            k = int(msg.split("order ")[1].split(" ")[0]) if "order " in msg else 1
            Ls.append(tp.zeros(tuple(A.shape[-2:]), dtype=A.dtype, device=A.device))
            infos.append(k)
    L = tp.stack(Ls).reshape(tuple(A.shape))
    return _cholesky_ex_result(L, tp.tensor(infos, dtype=tp.int32, device=A.device).reshape(tuple(A.shape[:-2])))


@_autocast_composite("linalg_qr")
def qr(A, mode="reduced", *, out=None):
    """(Q, R) with A = Q R: mode 'reduced' (Q m x k), 'complete' (Q m x m) or 'r' (R only, Q empty)."""
    _check_float("qr", A)
    return _prim("linalg_qr", "linalg.qr", A, mode)


@_autocast_composite("linalg_eigh")
def eigh(A, UPLO="L", *, out=None):
    """(eigenvalues ascending, eigenvectors as columns) of each symmetric matrix (reads one triangle)."""
    _check_float("eigh", A)
    return _prim("linalg_eigh", "linalg.eigh", A, UPLO)


def eigvalsh(A, UPLO="L", *, out=None):
    return _finish(eigh(A, UPLO).eigenvalues, out)


@_autocast_composite("linalg_svd")
def svd(A, full_matrices=True, *, driver=None, out=None):
    """(U, S, Vh) with A = U diag(S) Vh, S descending."""
    _check_float("svd", A)
    return _prim("linalg_svd", "linalg.svd", A, full_matrices)


def svdvals(A, *, driver=None, out=None):
    return _finish(svd(A, full_matrices=False).S, out)


def householder_product(A, tau, *, out=None):
    """The first n columns of H_1 H_2 ... H_k, H_i = I - tau_i v_i v_i^T with v_i
    column i of A below the diagonal and 1 on it (LAPACK's orgqr, what geqrf's
    reflectors give back as Q). A (*, m, n) with m >= n, tau (*, k), k <= n.
    Composed of matrix products, so it differentiates in A and tau."""
    tp = _tp()
    _check_float("householder_product", A)
    if A.dim() < 2:
        raise ValueError(f"householder_product: A must have at least 2 dimensions, got shape {list(A.shape)}")
    m, n = A.shape[-2], A.shape[-1]
    if m < n:
        raise ValueError(f"householder_product: A must have at least as many rows as columns, got {m}x{n}")
    if tau.dim() != A.dim() - 1 or tau.shape[-1] > n or tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise ValueError(f"householder_product: tau must have shape {list(A.shape[:-2])} + [k] with k <= {n}, "
                         f"got {list(tau.shape)}")
    if tau.dtype != A.dtype:
        raise TypeError(f"householder_product: tau ({tau.dtype}) must have A's dtype ({A.dtype})")
    k = tau.shape[-1]
    eye = tp.eye(m, dtype=A.dtype, device=A.device)
    # v_i: A's column i strictly below the diagonal, 1 on it, 0 above
    V = tp.tril(A, -1)[..., :k] + eye[:, :k]
    Q = eye[:, :n].expand(list(A.shape[:-2]) + [m, n])
    if k == 0:  # no reflector: I, a function of the (empty) tau all the same, as PyTorch's result
        Q = Q + tau.sum(-1)[..., None, None]
    for i in reversed(range(k)):  # Q = H_i Q, innermost reflector first
        v = V[..., :, i:i + 1]
        t = tau[..., i:i + 1].unsqueeze(-1)
        Q = Q - t * (v @ (v.mT @ Q))
    return _finish(Q, out)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """X with A X = B for a triangular A (only the named triangle is read)."""
    tp = _tp()
    T = tp.triu(A) if upper else tp.tril(A)
    if unitriangular:
        n = A.shape[-1]
        eye = tp.eye(n, dtype=A.dtype, device=A.device)
        T = T * (1 - eye) + eye
    return _finish(solve(T, B, left=left), out)


@_autocast_composite("linalg_lstsq")
def lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares solution of A X = B per matrix (LAPACK, the C++ operator linalg_lstsq),
    as torch.linalg.lstsq on the CPU. A (*, m, n), B (*, m, k) or (*, m) (a vector), the batch
    dims broadcast. driver: 'gelsy' (default; complete orthogonal factorization: the minimum-norm
    solution of a rank-deficient A), 'gelsd' / 'gelss' (SVD), 'gels' (QR: A must have full rank).
    rcond (default: the dtype's eps * max(m, n)): singular values (gelsy: the estimated condition)
    below rcond times the largest count as zero. Fields, as PyTorch fills them: residuals, the
    squared norms of A X - B per column, when m > n, the driver is not 'gelsy' and every A has
    full rank (else empty); rank (int64, A's batch) except for 'gels'; singular_values
    (A's batch, min(m, n)) for 'gelsd' / 'gelss'. The solution (as pinv(A) B) and the residuals
    are differentiable, the singular values are not (as in PyTorch)."""
    tp = _tp()
    for name, t in (("A", A), ("B", B)):
        if t.dtype not in (tp.float32, tp.float64):
            raise TypeError(f"linalg.lstsq: expected {name} to be a float32 or float64 tensor, but got {t.dtype}")
    if A.dim() < 2:
        raise ValueError(f"linalg.lstsq: A must have at least 2 dimensions, but got shape {list(A.shape)}")
    if A.dtype != B.dtype:
        raise TypeError(f"linalg.lstsq: expected A and B to have the same dtype, but got {A.dtype} and {B.dtype}")
    if driver is None:
        driver = "gelsy"
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise ValueError(f"linalg.lstsq: driver must be one of 'gels', 'gelsy', 'gelsd', 'gelss', but got {driver!r}")
    m, n = A.shape[-2], A.shape[-1]
    vector = B.dim() == A.dim() - 1 and B.dim() >= 1 and B.shape[-1] == m
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.dim() < 2 or Bm.shape[-2] != m:
        raise ValueError(f"linalg.lstsq: incompatible shapes of A {list(A.shape)} and B {list(B.shape)} "
                         f"(B must be (*, {m}, k) or (*, {m}))")
    a_batch, b_batch = tuple(A.shape[:-2]), tuple(Bm.shape[:-2])
    batch = []
    for i in range(1, max(len(a_batch), len(b_batch)) + 1):
        x = a_batch[-i] if i <= len(a_batch) else 1
        y = b_batch[-i] if i <= len(b_batch) else 1
        if x != y and 1 not in (x, y):
            raise ValueError(f"linalg.lstsq: the batch dims of A {list(A.shape)} and B {list(B.shape)} "
                             f"do not broadcast")
        batch.insert(0, y if x == 1 else x)
    batch = tuple(batch)
    if rcond is None:
        rcond = (1.1920928955078125e-07 if A.dtype == tp.float32 else 2.220446049250313e-16) * max(m, n)
    X, residuals, rank, sv = _prim("linalg_lstsq", "linalg.lstsq", A.expand(batch + (m, n)),
                                   Bm.expand(batch + (m, Bm.shape[-1])), float(rcond), driver)
    if driver in ("gelsd", "gelss") and residuals.numel() and bool((rank < n).any()):
        residuals = tp.empty((0,), dtype=A.dtype, device=A.device)  # LAPACK's rows past n are not the residual then
    if batch != a_batch:
        # rank and singular values are A's: one per matrix of A, not of the broadcast batch
        pad = len(batch) - len(a_batch)
        for d, s in enumerate(a_batch):
            if s == 1 and batch[pad + d] != 1:
                rank = rank.narrow(pad + d, 0, 1) if rank.numel() else rank
                sv = sv.narrow(pad + d, 0, 1) if sv.numel() else sv
        for _ in range(pad):
            rank = rank[0] if rank.numel() else rank
            sv = sv[0] if sv.numel() else sv
    return _lstsq_result(X.squeeze(-1) if vector else X, residuals, rank, sv.detach())


# ---------------------------------------------------------------------------
# Norms, pseudo-inverse, rank

def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """The ord-norm over `dim` (all elements when None) of x: sum(|x|^ord)^(1/ord), max/min |x| for
    +-inf, the count of nonzeros for 0."""
    tp = _tp()
    if dtype is not None:
        x = x.to(dtype)
    if not (x.dtype.is_floating_point if hasattr(x.dtype, "is_floating_point") else True) or x.dtype in (
            tp.int64, tp.int32, tp.int16, tp.int8, tp.uint8, tp.bool):
        raise TypeError(f"linalg.vector_norm: expected a floating point input, but got {x.dtype}")
    if isinstance(dim, int):
        dim = [dim]
    elif dim is not None:
        dim = list(dim)
    if dim is None:
        flat = x.reshape(-1)
        r = vector_norm(flat, ord, 0, False)
        return _finish(r.reshape((1,) * x.dim()) if keepdim else r, out)
    ord = float(ord)
    if ord == math.inf:
        r = x.abs().amax(dim, keepdim)
    elif ord == -math.inf:
        r = x.abs().amin(dim, keepdim)
    elif ord == 0:
        r = (x != 0).to(x.dtype).sum(dim, keepdim)
    else:
        r = tp.norm(x, ord, dim, keepdim)
    return _finish(r, out)


def _matrix_dims(name, A, dim):
    if A.dim() < 2:
        raise ValueError(f"linalg.{name}: the input must have at least 2 dimensions, but got shape {list(A.shape)}")
    d0, d1 = (d % A.dim() for d in dim)
    if d0 == d1:
        raise ValueError(f"linalg.{name}: dims must be different, but got {tuple(dim)}")
    return d0, d1


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    """Frobenius ('fro'), nuclear ('nuc'), spectral (2, -2: largest/smallest singular value), or
    the max/min absolute column (1, -1) / row (inf, -inf) sum of the matrices over `dim`."""
    tp = _tp()
    if dtype is not None:
        A = A.to(dtype)
    _check_float("matrix_norm", A)
    d0, d1 = _matrix_dims("matrix_norm", A, dim)
    if ord == "fro":
        r = tp.norm(A, 2, [d0, d1], keepdim)
    elif ord in ("nuc", 2, -2):
        perm = [d for d in range(A.dim()) if d not in (d0, d1)] + [d0, d1]
        s = svdvals(A.permute(perm))
        r = s.sum(-1) if ord == "nuc" else (s.amax(-1) if ord == 2 else s.amin(-1))
        if keepdim:
            r = r.unsqueeze(min(d0, d1)).unsqueeze(max(d0, d1))
    elif ord in (1, -1, math.inf, -math.inf):
        sum_dim, red_dim = (d0, d1) if ord in (1, -1) else (d1, d0)
        s = A.abs().sum(sum_dim, True)
        r = s.amax(red_dim, True) if ord > 0 else s.amin(red_dim, True)
        if not keepdim:
            r = r.squeeze(max(d0, d1)).squeeze(min(d0, d1))
    else:
        raise ValueError(f"linalg.matrix_norm: order {ord!r} is not supported (use 'fro', 'nuc', "
                         f"inf, -inf, 1, -1, 2 or -2)")
    return _finish(r, out)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None, out=None):
    """vector_norm or matrix_norm as torch.linalg.norm chooses: a matrix norm when `dim` has two
    entries or (dim None) A is 2-D with an ord given; the 2-norm of the flattened A when both are None."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype, out=out)
    if dim is None and ord is not None:
        if A.dim() == 2:
            return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype, out=out)
        if A.dim() != 1:
            raise ValueError(f"linalg.norm: input must be 1-D or 2-D when ord is given and dim is None, "
                             f"but got shape {list(A.shape)}")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype, out=out)


def _tolerances(name, S, m, n, atol, rtol, rcond=None):
    """The cut-off below which a singular value counts as zero: max(atol, rtol * largest)."""
    tp = _tp()
    if rcond is not None:
        rtol = rcond
    smax = S.amax(-1, True) if S.shape[-1] > 0 else tp.zeros(tuple(S.shape[:-1]) + (1,), dtype=S.dtype, device=S.device)
    if rtol is None:
        eps = 1.1920928955078125e-07 if S.dtype == tp.float32 else 2.220446049250313e-16
        rtol = 0.0 if (atol is not None and (not isinstance(atol, (int, float)) or atol > 0)) else max(m, n) * eps
    rt = rtol * smax if isinstance(rtol, (int, float)) else rtol.unsqueeze(-1) * smax
    if atol is None:
        return rt
    at = atol if not isinstance(atol, (int, float)) else tp.full((), float(atol), dtype=S.dtype, device=S.device)
    if hasattr(at, "dim") and at.dim() > 0:
        at = at.unsqueeze(-1)
    return tp.maximum(rt, at)


def pinv(A, *, atol=None, rtol=None, hermitian=False, rcond=None, out=None):
    """The Moore-Penrose pseudo-inverse through the SVD: singular values at or below
    max(atol, rtol * largest) count as zero."""
    tp = _tp()
    _check_float("pinv", A)
    m, n = A.shape[-2], A.shape[-1]
    if hermitian:
        w, V = eigh(A)
        cut = _tolerances("pinv", w.abs(), m, n, atol, rtol, rcond)
        winv = tp.where(w.abs() > cut, 1.0 / tp.where(w == 0, tp.ones_like(w), w), tp.zeros_like(w))
        return _finish((V * winv.unsqueeze(-2)) @ _mT(V), out)
    U, S, Vh = tp.linalg_svd(A, False)
    cut = _tolerances("pinv", S, m, n, atol, rtol, rcond)
    sinv = tp.where(S > cut, 1.0 / tp.where(S == 0, tp.ones_like(S), S), tp.zeros_like(S))
    return _finish((_mT(Vh) * sinv.unsqueeze(-2)) @ _mT(U), out)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, tol=None, out=None):
    """The number of singular values above max(atol, rtol * largest) (default rtol: eps * max(m, n))."""
    tp = _tp()
    _check_float("matrix_rank", A)
    if tol is not None:
        atol, rtol = tol, 0.0
    m, n = A.shape[-2], A.shape[-1]
    with tp.no_grad():
        S = eigvalsh(A).abs() if hermitian else svdvals(A)
        cut = _tolerances("matrix_rank", S, m, n, atol, rtol)
        return _finish((S > cut).sum(-1), out)


# ---------------------------------------------------------------------------
# Products and views PyTorch also lists under linalg

def cross(a, b, *, dim=-1, out=None):
    return _finish(_tp().cross(a, b, dim=dim), out)


def matmul(a, b, *, out=None):
    return _finish(_tp().matmul(a, b), out)


def vecdot(x, y, *, dim=-1, out=None):
    return _finish((x * y).sum(dim), out)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    return _tp().diagonal(A, offset, dim1, dim2)


def multi_dot(tensors, *, out=None):
    """The product of a list of matrices (the first / last may be vectors), left to right."""
    if len(tensors) < 2:
        raise ValueError(f"linalg.multi_dot: expected at least 2 tensors but got {len(tensors)}")
    r = tensors[0]
    for t in tensors[1:]:
        r = r @ t
    return _finish(r, out)


def matrix_power(A, n, *, out=None):
    """A^n by repeated squaring (n < 0: the inverse's power)."""
    tp = _tp()
    _check_square("matrix_power", A)
    if n == 0:
        return _finish(_eye_like(A).clone(), out)
    base = inv(A) if n < 0 else A
    n = abs(n)
    result = None
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return _finish(result if result is not A else tp.clone(result), out)


# Padé [13/13] coefficients of exp and the 1-norm up to which that approximant is accurate to
# double precision (Higham, "The scaling and squaring method for the matrix exponential revisited", 2005).
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
           40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def matrix_exp(A):
    """exp(A) of (batches of) square matrices: each matrix is scaled by 2^-s so that its 1-norm is at
    most theta13, the Padé [13/13] approximant is solved for, and the result squared s times (a batch
    squares max(s) times, keeping each matrix once it has had its own s). Written in tensor ops, so
    the gradient is autograd's derivative of the same computation (the Fréchet derivative's adjoint
    to working precision)."""
    tp = _tp()
    if not isinstance(A, tp.Tensor):
        raise TypeError(f"linalg.matrix_exp: A must be a Tensor, got {type(A).__name__}")
    if A.dtype in (tp.float16, tp.bfloat16, tp.float32):
        # computed in float64 and rounded once: the squarings multiply float32's rounding errors
        # (PyTorch's float32 result is within its tolerance of this one; 16-bit: as PyTorch's CPU)
        _check_square("matrix_exp", A)
        return matrix_exp(A.double()).to(A.dtype)
    _check_float("matrix_exp", A)
    _check_square("matrix_exp", A)
    if A.numel() == 0:
        return A.clone()
    n = A.shape[-1]
    if n == 1:
        return A.exp()
    norm1 = A.detach().abs().sum(-2).amax(-1)  # (...,): max absolute column sum
    s = tp.ceil(tp.log2(norm1.double() / _THETA13)).clamp(0, 1000)
    s = tp.where(tp.isfinite(s), s, tp.zeros_like(s))  # a NaN/inf matrix stays NaN through the approximant
    smax = int(s.max().item())
    X = A / tp.exp2(s).to(A.dtype).unsqueeze(-1).unsqueeze(-1)
    b = _PADE13
    eye = _eye_like(X)
    X2 = X @ X
    X4 = X2 @ X2
    X6 = X4 @ X2
    U = X @ (X6 @ (b[13] * X6 + b[11] * X4 + b[9] * X2) + b[7] * X6 + b[5] * X4 + b[3] * X2 + b[1] * eye)
    V = X6 @ (b[12] * X6 + b[10] * X4 + b[8] * X2) + b[6] * X6 + b[4] * X4 + b[2] * X2 + b[0] * eye
    R = _prim("linalg_solve", "linalg.matrix_exp", V - U, V + U)
    steps = s.to(A.dtype).unsqueeze(-1).unsqueeze(-1)
    for k in range(smax):
        sq = R @ R
        R = tp.where(steps > k, sq, R)
    return R


# ---------------------------------------------------------------------------
# PyTorch's older top-level names and Tensor methods (torch.det, Tensor.inverse, ...)

_svd_result = namedtuple("svd", ["U", "S", "V"])


def _legacy_svd(A, some=True, compute_uv=True):
    """torch.svd: (U, S, V) with V (not Vh); some=False gives the complete U and V."""
    tp = _tp()
    U, S, Vh = tp.linalg_svd(A, not some)
    if not compute_uv:
        return _svd_result(tp.zeros_like(U), S, tp.zeros_like(_mT(Vh)))
    return _svd_result(U, S, _mT(Vh))


def _legacy_qr(A, some=True):
    return qr(A, "reduced" if some else "complete")


def _norm_with_nuc(op):
    """torch.norm / Tensor.norm with p='nuc' (the nuclear norm over two dims: all of a 2-D input's
    when dim is None); every other p goes to the norm operator itself."""
    unset = object()

    def norm(input, p=unset, dim=unset, keepdim=unset, *args, **kwargs):
        if isinstance(p, str) and p == "nuc":
            dtype = kwargs.pop("dtype", None)
            out = kwargs.pop("out", None)
            if args or kwargs:
                raise TypeError(f"norm: unexpected arguments {args or ''} {list(kwargs) or ''}")
            keepdim = False if keepdim is unset else keepdim
            dims = list(range(input.dim())) if dim in (None, unset) else ([dim] if isinstance(dim, int) else list(dim))
            if len(dims) != 2:
                raise RuntimeError(f"norm: 'nuc' needs exactly two dims, got {dims} (input of shape {list(input.shape)})")
            try:
                return matrix_norm(input, "nuc", dims, keepdim, dtype=dtype, out=out)
            except (ValueError, TypeError) as e:
                raise type(e)(str(e).replace("linalg.matrix_norm", "norm")) from None
        given = [v for v in (p, dim, keepdim) if v is not unset]
        if len(given) < 3 and not all(v is not unset for v in (p, dim, keepdim)[:len(given)]):
            for name, v in (("p", p), ("dim", dim), ("keepdim", keepdim)):
                if v is not unset:
                    kwargs[name] = v
            given = []
        return op(input, *given, *args, **kwargs)
    norm.__doc__ = op.__doc__
    return norm


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    """(solve(A, B), info): info 0 per matrix when A is invertible; for a singular A, with
    check_errors=False, info > 0 and the result NaN (with check_errors=True: LinAlgError)."""
    tp = _tp()
    try:
        res = solve(A, B, left=left)
        return _solve_ex_result(res, tp.zeros(tuple(A.shape[:-2]), dtype=tp.int32, device=A.device))
    except LinAlgError:
        if check_errors:
            raise
    sign, _ = tp.linalg_slogdet(A)
    info = (sign == 0).to(tp.int32)
    shape = tuple(tp.broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2]))) + tuple(B.shape[-2:]) \
        if B.dim() >= 2 and B.dim() == A.dim() else tuple(B.shape)
    return _solve_ex_result(tp.full(shape, float("nan"), dtype=A.dtype, device=A.device), info)


def cond(A, p=None, *, out=None):
    """The condition number of each matrix in the p-norm: sigma_max / sigma_min for p None/2
    (-2: the reciprocal), else norm(A, p) * norm(inv(A), p) ('fro', 'nuc', inf, -inf, 1, -1;
    square matrices only); inf for a singular matrix."""
    tp = _tp()
    _check_float("cond", A)
    if A.dim() < 2:
        raise RuntimeError(f"linalg.cond: expected a tensor with at least 2 dims, got shape {tuple(A.shape)}")
    if p is None or p in (2, -2):
        s = svdvals(A)
        r = s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
        return _finish(r, out)
    if p not in ("fro", "nuc", float("inf"), float("-inf"), 1, -1):
        raise RuntimeError(f"linalg.cond: got an invalid norm type {p!r}")
    _check_square("cond", A)
    inv_a, info = inv_ex(A)
    r = matrix_norm(A, p) * matrix_norm(tp.where(tp.isnan(inv_a), tp.zeros_like(inv_a), inv_a), p)
    r = tp.where(info.to(tp.bool), tp.full_like(r, float("inf")), r)
    return _finish(r, out)


def vander(x, *, N=None):
    """The Vandermonde matrix [x**0, x**1, ..., x**(N-1)] along a new last dim (increasing powers)."""
    tp = _tp()
    if x.dim() == 0:
        x = x.reshape([1])  # a scalar is one point, as PyTorch's
    if x.dtype in (tp.float16, tp.bfloat16):
        raise RuntimeError(f"linalg.vander supports floating point and integer tensors, but got {x.dtype}")
    if not x.is_floating_point():
        x = x.to(tp.int64)  # integer (and bool) powers are int64, as PyTorch's
    n = x.shape[-1] if N is None else N
    if n <= 1:
        raise RuntimeError(f"linalg.vander: N must be greater than 1, got {n}")
    cols = [tp.ones_like(x), x]
    for _ in range(n - 2):
        cols.append(cols[-1] * x)
    return tp.stack(cols, -1)


def tensorinv(A, ind=2, *, out=None):
    """The tensor B with tensordot(A, B, ind) the identity: A reshaped to a square
    prod(shape[:ind]) x prod(shape[ind:]) matrix, inverted, reshaped to shape[ind:] + shape[:ind]."""
    if ind <= 0:
        raise RuntimeError(f"linalg.tensorinv: expected a strictly positive integer for ind, got {ind}")
    lead, rest = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    m = math.prod(lead)
    if m != math.prod(rest):
        raise RuntimeError(f"linalg.tensorinv: expected prod(A.shape[:ind]) == prod(A.shape[ind:]), got {lead} and "
                           f"{rest}")
    return _finish(inv(A.reshape([m, m])).reshape(list(rest + lead)), out)


def tensorsolve(A, B, dims=None, *, out=None):
    """X with tensordot(A, X, X.dim()) == B; dims (of A) are first moved to the end."""
    if dims is not None:
        dims = [d % A.dim() for d in dims]
        keep = [d for d in range(A.dim()) if d not in dims]
        A = A.permute(keep + dims)
    b_shape = tuple(B.shape)
    x_shape = tuple(A.shape[B.dim():])
    m = math.prod(b_shape)
    if A.dim() < B.dim() or math.prod(A.shape[:B.dim()]) != m or math.prod(x_shape) != m:
        raise RuntimeError(f"linalg.tensorsolve: expected A's leading dims to hold as many elements as B of shape "
                           f"{b_shape}, and the rest as many, got A of shape {tuple(A.shape)}")
    return _finish(solve(A.reshape([m, m]), B.reshape([m])).reshape(list(x_shape)), out)


def _install():
    tp = _tp()
    tp.norm = _norm_with_nuc(tp.norm)
    tp.Tensor.norm = _norm_with_nuc(tp.Tensor.norm)
    top = {
        "det": det, "logdet": logdet, "slogdet": slogdet, "inverse": inv, "pinverse": pinv,
        "matrix_power": matrix_power, "svd": _legacy_svd, "qr": _legacy_qr, "matrix_exp": matrix_exp,
        "cholesky": lambda A, upper=False: cholesky(A, upper=upper),
    }
    for name, fn in top.items():
        setattr(tp, name, fn)
    methods = dict(top)
    methods["pinverse"] = lambda A, rcond=1e-15: pinv(A, rcond=rcond)
    for name, fn in methods.items():
        setattr(tp.Tensor, name, fn)
