"""Forward-mode derivatives (tp.func.jvp) of the linalg factorizations and special functions
against torch.func.jvp."""
import numpy as np
import pytest

import tensorplay as tp

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(7)


def _spd(n):
    m = RNG.standard_normal((n, n))
    return m @ m.T + n * np.eye(n)


def _sym(n):
    m = RNG.standard_normal((n, n))
    return m + m.T


def _gauge_free_svd(lib):
    def f(a):
        U, S, Vh = lib.linalg.svd(a, full_matrices=False)
        return S, U * U, Vh * Vh
    return f


CASES = [
    ("solve", lambda lib: (lambda a, b: lib.linalg.solve(a, b)), [RNG.standard_normal((2, 3, 3)),
                                                                 RNG.standard_normal((2, 3, 2))]),
    ("slogdet", lambda lib: (lambda a: lib.linalg.slogdet(a)[1]), [RNG.standard_normal((3, 3))]),
    ("det", lambda lib: (lambda a: lib.linalg.det(a)), [RNG.standard_normal((2, 3, 3))]),
    ("inv", lambda lib: (lambda a: lib.linalg.inv(a)), [RNG.standard_normal((3, 3))]),
    ("cholesky", lambda lib: (lambda a: lib.linalg.cholesky(a + a.mT)), [_spd(3)]),
    ("eigh", lambda lib: (lambda a: (lambda w, V: (w, V * V))(*lib.linalg.eigh(a + a.mT))), [_sym(4)]),
    ("qr", lambda lib: (lambda a: tuple(lib.linalg.qr(a))), [RNG.standard_normal((5, 3))]),
    # wide: both modes (the same factorization), batched (were refused)
    ("qr wide", lambda lib: (lambda a: tuple(lib.linalg.qr(a))), [RNG.standard_normal((2, 3, 5))]),
    ("qr wide complete", lambda lib: (lambda a: tuple(lib.linalg.qr(a, "complete"))), [RNG.standard_normal((2, 6))]),
    ("qr square complete", lambda lib: (lambda a: tuple(lib.linalg.qr(a, "complete"))), [RNG.standard_normal((4, 4))]),
    ("svd tall", _gauge_free_svd, [RNG.standard_normal((5, 3))]),
    ("svd wide", _gauge_free_svd, [RNG.standard_normal((3, 5))]),
    ("lgamma", lambda lib: lib.lgamma, [RNG.uniform(0.2, 5, 6)]),
    ("digamma", lambda lib: lib.digamma, [RNG.uniform(0.2, 5, 6)]),
    ("polygamma", lambda lib: (lambda x: lib.polygamma(2, x)), [RNG.uniform(0.2, 5, 6)]),
    ("i0", lambda lib: lib.i0, [RNG.uniform(-5, 5, 6)]),
    ("i1", lambda lib: lib.special.i1, [np.array([0.0, -2.0, 3.0, 0.5])]),
]


@pytest.mark.parametrize("name,make,arrays", CASES, ids=[c[0] for c in CASES])
def test_jvp_matches_torch(name, make, arrays):
    tangents = [RNG.standard_normal(a.shape) for a in arrays]
    _, out = tp.func.jvp(make(tp), tuple(tp.tensor(a) for a in arrays), tuple(tp.tensor(t) for t in tangents))
    _, want = torch.func.jvp(make(torch), tuple(torch.tensor(a) for a in arrays),
                             tuple(torch.tensor(t) for t in tangents))
    out = out if isinstance(out, tuple) else (out,)
    want = want if isinstance(want, tuple) else (want,)
    for o, w in zip(out, want):
        np.testing.assert_allclose(o.numpy(), w.numpy(), atol=1e-9, rtol=1e-7)
