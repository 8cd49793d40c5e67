"""LU factorization: tp.linalg.lu_factor(_ex), lu, lu_solve and tp.lu_unpack (plus the older
tp.lu / tp.lu_solve spellings).

The C++ primitive linalg_lu_factor_ex (LAPACK getrf, ops/linalg_lu_ops.cpp) factors and
differentiates P^T A = L U; the rest composes tensor operators, so autograd and tp.compile
see only it: lu_unpack slices the packed LU with tril/triu and builds P from the permutation
(linalg_lu_pivots_to_permutation: LAPACK's row swaps replayed), lu_solve applies P^T, L^{-1} and
U^{-1} with triangular solves, so its gradients reach both LU and B."""
import sys
from collections import namedtuple

_lu_factor_ex_result = namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
_lu_factor_result = namedtuple("linalg_lu_factor", ["LU", "pivots"])
_lu_result = namedtuple("linalg_lu", ["P", "L", "U"])
_lu_unpack_result = namedtuple("lu_unpack", ["P", "L", "U"])


def _tp():
    return sys.modules[__package__]


def _linalg():
    return _tp().linalg


def _check_tensor(name, what, x):
    if not isinstance(x, _tp().Tensor):
        raise TypeError(f"{name}: {what} must be a Tensor, got {type(x).__name__}")


def _first_failure(info):
    """(batch index, 1-based diagonal index) of the first matrix whose U has a zero pivot.
    One flag is read first (a data gate under tp.compile); the details only on failure."""
    flat = info.reshape(-1)
    if not bool((flat > 0).any()):
        return None
    bad = (flat > 0).nonzero()
    b = int(bad[0, 0])
    return b, int(flat[b])


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    """(LU, pivots, info) of P^T A = L U with partial pivoting, A (*, m, n) float32/float64:
    LU packs L's strictly lower part (unit diagonal implied) and U; pivots (*, min(m, n)) int32,
    1-based (row i was swapped with row pivots[i] - 1 at step i), as LAPACK's getrf; info (*) int32,
    0, or i > 0 when U[i-1, i-1] is exactly zero (then check_errors=True raises LinAlgError)."""
    lin = _linalg()
    _check_tensor("linalg.lu_factor_ex", "A", A)
    LU, piv, info = lin._prim("linalg_lu_factor_ex", "linalg.lu_factor_ex", A, pivot=pivot)
    if check_errors:
        bad = _first_failure(info)
        if bad is not None:
            b, i = bad
            where = f" (batch element {b})" if A.dim() > 2 else ""
            raise lin.LinAlgError(f"linalg.lu_factor_ex: U[{i - 1},{i - 1}] is exactly zero{where}, so the matrix "
                                  f"is singular (A of shape {list(A.shape)})")
    res = _lu_factor_ex_result(LU, piv, info)
    if out is not None:
        for o, r in zip(out, res):
            _tp()._C._write_out("linalg.lu_factor_ex", o, r)
        return _lu_factor_ex_result(*out)
    return res


def lu_factor(A, *, pivot=True, out=None):
    """(LU, pivots) of A (see lu_factor_ex); a singular A raises LinAlgError, since lu_solve would
    divide by its zero pivot (linalg.lu and lu_factor_ex factor it anyway)."""
    lin = _linalg()
    _check_tensor("linalg.lu_factor", "A", A)
    LU, piv, info = lin._prim("linalg_lu_factor_ex", "linalg.lu_factor", A, pivot=pivot)
    bad = _first_failure(info)
    if bad is not None:
        b, i = bad
        where = f" (batch element {b})" if A.dim() > 2 else ""
        raise lin.LinAlgError(f"linalg.lu_factor: U[{i - 1},{i - 1}] is exactly zero{where} and lu_solve would "
                              f"divide by it (A of shape {list(A.shape)}); linalg.lu or linalg.lu_factor_ex "
                              f"factor it anyway")
    if out is not None:
        for o, r in zip(out, (LU, piv)):
            _tp()._C._write_out("linalg.lu_factor", o, r)
        return _lu_factor_result(*out)
    return _lu_factor_result(LU, piv)


def _permutation(name, LU, pivots):
    tp = _tp()
    if pivots.dtype not in (tp.int32, tp.int64):
        raise TypeError(f"{name}: expected pivots to be an int32 tensor, but got {pivots.dtype}")
    m, n = LU.shape[-2], LU.shape[-1]
    if tuple(pivots.shape) != tuple(LU.shape[:-2]) + (min(m, n),):
        raise ValueError(f"{name}: pivots of shape {list(pivots.shape)} do not match LU of shape {list(LU.shape)} "
                         f"(expected {list(LU.shape[:-2]) + [min(m, n)]})")
    try:
        return tp.linalg_lu_pivots_to_permutation(pivots, m)
    except ValueError as e:
        raise ValueError(str(e).replace("lu_unpack:", f"{name}:", 1).split(" (in ")[0]) from None


def _check_lu(name, LU):
    tp = _tp()
    _check_tensor(name, "LU", LU)
    if LU.dtype not in (tp.float32, tp.float64):
        raise TypeError(f"{name}: expected LU to be a float32 or float64 tensor, but got {LU.dtype}")
    if LU.dim() < 2:
        raise ValueError(f"{name}: LU must have at least 2 dimensions, but got shape {list(LU.shape)}")


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """(P, L, U) from lu_factor's (LU, pivots): P (*, m, m) the permutation matrix with A = P L U,
    L (*, m, k) unit lower, U (*, k, n) upper, k = min(m, n). A part not asked for is empty."""
    tp = _tp()
    _check_lu("lu_unpack", LU_data)
    _check_tensor("lu_unpack", "LU_pivots", LU_pivots)
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    k = min(m, n)
    empty = tp.empty(0, dtype=LU_data.dtype, device=LU_data.device)
    if unpack_data:
        L = LU_data[..., :, :k].tril(-1) + tp.eye(m, k, dtype=LU_data.dtype, device=LU_data.device)
        U = LU_data[..., :k, :].triu()
    else:
        L, U = empty, empty
    if unpack_pivots:
        perm = _permutation("lu_unpack", LU_data, LU_pivots)
        rows = tp.arange(m, device=LU_data.device).unsqueeze(-1)
        P = (perm.unsqueeze(-2) == rows).to(LU_data.dtype)
    else:
        P = empty
    res = _lu_unpack_result(P, L, U)
    if out is not None:
        for o, r in zip(out, res):
            tp._C._write_out("lu_unpack", o, r)
        return _lu_unpack_result(*out)
    return res


def lu(A, *, pivot=True, out=None):
    """(P, L, U) with A = P L U (see lu_factor_ex; a singular A factors without error)."""
    _check_tensor("linalg.lu", "A", A)
    LU, piv, _ = _linalg()._prim("linalg_lu_factor_ex", "linalg.lu", A, pivot=pivot)
    res = _lu_result(*lu_unpack(LU, piv))
    if out is not None:
        for o, r in zip(out, res):
            _tp()._C._write_out("linalg.lu", o, r)
        return _lu_result(*out)
    return res


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    """X with A X = B (left=False: X A = B; adjoint=True: A^T in place of A) for A = P L U given as
    lu_factor's (LU, pivots); A square, B (*, n, k) (left) or (*, k, n), batch dims broadcast."""
    tp = _tp()
    lin = _linalg()
    name = "linalg.lu_solve"
    _check_lu(name, LU)
    _check_tensor(name, "B", B)
    n = LU.shape[-1]
    if LU.shape[-2] != n:
        raise ValueError(f"{name}: LU must be batches of square matrices, but got shape {list(LU.shape)}")
    if B.dtype != LU.dtype:
        raise TypeError(f"{name}: expected LU and B to have the same dtype, but got {LU.dtype} and {B.dtype}")
    if B.dim() < 2 or B.shape[-2 if left else -1] != n:
        side = f"(*, {n}, k)" if left else f"(*, k, {n})"
        raise ValueError(f"{name}: incompatible shapes of LU {list(LU.shape)} and B {list(B.shape)} "
                         f"(B must be {side})")
    perm = _permutation(name, LU, pivots)
    batch = lin._broadcast("lu_solve", LU, B, tuple(LU.shape[:-2]), tuple(B.shape[:-2]))
    LUb = LU.expand(batch + (n, n))
    permb = perm.expand(batch + (n,))
    Bm = B if left else B.mT
    Bm = Bm.expand(batch + tuple(Bm.shape[-2:]))
    # A X = B on the left is the plain solve; X A = B is A^T X^T = B^T: the adjoint solve, and so on.
    transposed = adjoint if left else not adjoint
    k = Bm.shape[-1]
    idx = permb.unsqueeze(-1).expand(batch + (n, k))
    if not transposed:   # X = U^{-1} L^{-1} P^T B
        Y = Bm.gather(-2, idx)
        Y = lin.solve_triangular(LUb, Y, upper=False, unitriangular=True)
        X = lin.solve_triangular(LUb, Y, upper=True)
    else:                # X = P L^{-T} U^{-T} B
        Y = lin.solve_triangular(LUb.mT, Bm, upper=False)
        Y = lin.solve_triangular(LUb.mT, Y, upper=True, unitriangular=True)
        X = tp.zeros_like(Y).scatter(-2, idx, Y)
    X = X if left else X.mT
    if out is not None:
        tp._C._write_out(name, out, X)
        return out
    return X


def _legacy_lu(A, pivot=True, get_infos=False, out=None):
    """torch.lu's spelling: (LU, pivots) or, with get_infos, (LU, pivots, infos)."""
    LU, piv, info = lu_factor_ex(A, pivot=pivot)
    res = (LU, piv, info) if get_infos else (LU, piv)
    if out is not None:
        for o, r in zip(out, res):
            _tp()._C._write_out("lu", o, r)
        return tuple(out)
    return res


def _legacy_lu_solve(b, LU_data, LU_pivots, *, out=None):
    """torch.lu_solve's spelling (B first)."""
    return lu_solve(LU_data, LU_pivots, b, out=out)


def install():
    tp = _tp()
    lin = tp.linalg
    for fn in (lu_factor_ex, lu_factor, lu, lu_solve):
        setattr(lin, fn.__name__, fn)
    tp.lu_unpack = lu_unpack
    tp.lu = _legacy_lu
    tp.lu_solve = _legacy_lu_solve
    tp.Tensor.lu = lambda self, pivot=True, get_infos=False: _legacy_lu(self, pivot, get_infos)
    tp.Tensor.lu_solve = lambda self, LU_data, LU_pivots: _legacy_lu_solve(self, LU_data, LU_pivots)
