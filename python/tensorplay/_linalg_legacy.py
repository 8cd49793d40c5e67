"""PyTorch's older linear-algebra spellings that code still calls:
cholesky_solve, cholesky_inverse and triangular_solve, composed of
tp.linalg.solve_triangular, and orgqr (tp.linalg.householder_product)."""
import collections
import sys

from ._C import Tensor
from ._install import add_missing

_TriangularSolve = collections.namedtuple("triangular_solve", ["solution", "cloned_coefficient"])


def _tp():
    return sys.modules[__package__]


def _check(fn, **tensors):
    for name, t in tensors.items():
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}: {name} must be a Tensor, got {type(t).__name__}")
        if t.dim() < 2:
            raise ValueError(f"{fn}: {name} must have at least 2 dimensions, got shape {list(t.shape)}")


def cholesky_solve(B, L, upper=False):
    """X with A X = B, where A = L L^T (upper=False) or U^T U (upper=True) is
    given by its Cholesky factor (tp.linalg.cholesky)."""
    _check("cholesky_solve", B=B, L=L)
    if L.shape[-1] != L.shape[-2]:
        raise ValueError(f"cholesky_solve: the factor must be square, got shape {list(L.shape)}")
    if B.shape[-2] != L.shape[-1]:
        raise ValueError(f"cholesky_solve: B has {B.shape[-2]} rows but the factor is {L.shape[-1]}x{L.shape[-1]} "
                         f"(B {list(B.shape)}, L {list(L.shape)})")
    tp = _tp()
    st = tp.linalg.solve_triangular
    if upper:  # A = U^T U: U^T Y = B, then U X = Y
        X = st(L, st(L.mT, B, upper=False), upper=True)
    else:
        X = st(L.mT, st(L, B, upper=False), upper=True)
    if tp.is_grad_enabled() and (L.requires_grad or B.requires_grad):
        # PyTorch's gradient convention: the factor is differentiated as a full
        # matrix in A = L L^T (its unread triangle gets a gradient too), while
        # the value reads one triangle. The value stays the triangular solves';
        # the gradient is that of X = (L L^T)^-1 B with L's other triangle fixed at 0.
        tri = tp.triu(L) if upper else tp.tril(L)
        Lf = L - (L - tri).detach()
        A = Lf.mT @ Lf if upper else Lf @ Lf.mT
        Xg = tp.linalg.solve(A, B)
        X = X.detach() + (Xg - Xg.detach())
    return X


def cholesky_inverse(L, upper=False):
    """The inverse of A = L L^T (or U^T U) from its Cholesky factor."""
    _check("cholesky_inverse", L=L)
    if L.shape[-1] != L.shape[-2]:
        raise ValueError(f"cholesky_inverse: the factor must be square, got shape {list(L.shape)}")
    n = L.shape[-1]
    eye = _tp().eye(n, dtype=L.dtype, device=L.device).expand(list(L.shape))
    return cholesky_solve(eye, L, upper)


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):
    """(X, A copy) with A X = b (A^T X = b with transpose=True), A triangular:
    the deprecated form of tp.linalg.solve_triangular, result order as PyTorch's."""
    _check("triangular_solve", b=b, A=A)
    if A.shape[-1] != A.shape[-2]:
        raise ValueError(f"triangular_solve: A must be square, got shape {list(A.shape)}")
    M = A.mT if transpose else A
    x = _tp().linalg.solve_triangular(M, b, upper=(not upper) if transpose else upper, unitriangular=unitriangular)
    return _TriangularSolve(x, A.clone())


def orgqr(input, tau):
    """The older name of tp.linalg.householder_product."""
    return _tp().linalg.householder_product(input, tau)


def install():
    functions = (cholesky_solve, cholesky_inverse, triangular_solve, orgqr)
    add_missing(_tp(), functions)
    add_missing(Tensor, functions)
