"""tp.linalg.lstsq against torch.linalg.lstsq (CPU): every driver's fields (solution,
residuals, rank, singular_values) for full-rank and rank-deficient, tall, wide and square,
batched and broadcast inputs; gradients against torch and finite differences; errors."""
import numpy as np
import pytest

import tensorplay as tp

torch = pytest.importorskip("torch")

DRIVERS = [None, "gelsy", "gelsd", "gelss", "gels"]
FIELDS = ("solution", "residuals", "rank", "singular_values")


def rng(seed=0):
    return np.random.default_rng(seed)


def deficient(shape, seed=0):
    """A matrix (batch) of rank min(m, n) - 1: its last column (or row, for wide) a combination."""
    a = rng(seed).standard_normal(shape)
    if shape[-2] >= shape[-1]:
        a[..., :, -1] = a[..., :, 0] - 2 * a[..., :, 1]
    else:
        a[..., -1, :] = 3 * a[..., 0, :]
    return a


def compare(A, B, rtol=1e-7, atol=1e-9, **kw):
    want = torch.linalg.lstsq(torch.tensor(A), torch.tensor(B), **kw)
    got = tp.linalg.lstsq(tp.tensor(A), tp.tensor(B), **kw)
    for f in FIELDS:
        w, g = getattr(want, f), getattr(got, f)
        assert tuple(g.shape) == tuple(w.shape), (f, tuple(g.shape), tuple(w.shape))
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1], (f, g.dtype, w.dtype)
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=rtol, atol=atol, err_msg=f)
    return got


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("shape", [(6, 3), (4, 4), (3, 6)])
def test_full_rank_matches_torch(driver, shape):
    A = rng(1).standard_normal(shape)
    B = rng(2).standard_normal((shape[0], 2))
    compare(A, B, driver=driver)
    compare(A, B[:, 0], driver=driver)  # a vector right-hand side


@pytest.mark.parametrize("driver", [None, "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("shape", [(6, 3), (4, 4), (3, 6)])
def test_rank_deficient_gives_the_minimum_norm_solution(driver, shape):
    A = deficient(shape)
    B = rng(3).standard_normal((shape[0], 2))
    r = compare(A, B, driver=driver)
    assert int(r.rank) == min(shape) - 1
    # the minimum-norm least-squares solution: pinv(A) B
    np.testing.assert_allclose(r.solution.numpy(), np.linalg.pinv(A) @ B, rtol=1e-7, atol=1e-9)
    # (QR assuming full rank gave entries near 1e15 here)
    assert np.abs(r.solution.numpy()).max() < 100


@pytest.mark.parametrize("driver", DRIVERS)
def test_batched_with_a_rank_deficient_member(driver):
    A = rng(4).standard_normal((3, 5, 3))
    if driver != "gels":
        A[1] = deficient((5, 3), seed=5)  # residuals then empty for gelsd/gelss, as torch
    B = rng(6).standard_normal((3, 5, 2))
    r = compare(A, B, driver=driver)
    if driver in ("gelsd", "gelss"):
        assert r.residuals.numel() == 0 and r.rank.tolist() == [3, 2, 3]


@pytest.mark.parametrize("driver", DRIVERS)
def test_broadcast_batch_and_vector_batch(driver):
    compare(rng(7).standard_normal((2, 1, 5, 3)), rng(8).standard_normal((2, 4, 5, 2)), driver=driver)
    compare(rng(9).standard_normal((2, 5, 3)), rng(10).standard_normal((2, 5)), driver=driver)


@pytest.mark.parametrize("driver", [None, "gelsd", "gelss"])
def test_float32(driver):
    A = deficient((7, 4), seed=11).astype(np.float32)
    B = rng(12).standard_normal((7, 3)).astype(np.float32)
    r = compare(A, B, driver=driver, rtol=2e-4, atol=2e-4)
    assert r.solution.dtype == tp.float32


@pytest.mark.parametrize("driver", ["gelsy", "gelsd", "gelss"])
def test_rcond_decides_the_rank(driver):
    A = np.array([[1.0, 0.0], [0.0, 1e-4], [0.0, 0.0]])
    B = np.ones((3, 1))
    assert int(compare(A, B, rcond=1e-3, driver=driver).rank) == 1
    assert int(compare(A, B, driver=driver).rank) == 2


@pytest.mark.parametrize("driver", [None, "gelsd"])
def test_empty_inputs(driver):
    compare(np.zeros((0, 3)), np.zeros((0, 2)), driver=driver)
    compare(np.zeros((0, 4, 3)), np.zeros((0, 4, 2)), driver=driver)
    compare(rng(13).standard_normal((4, 0)), rng(14).standard_normal((4, 2)), driver=driver)


# ---- gradients ----

def grads(lib, A, B, G, Gr, **kw):
    a = lib.tensor(A, requires_grad=True)
    b = lib.tensor(B, requires_grad=True)
    r = lib.linalg.lstsq(a, b, **kw)
    loss = (r.solution * lib.tensor(G)).sum()
    if Gr is not None:
        loss = loss + (r.residuals * lib.tensor(Gr)).sum()
    loss.backward()
    return a.grad.numpy(), b.grad.numpy()


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("shape", [(6, 3), (4, 4), (3, 6), (2, 5, 3)])
def test_gradients_match_torch_full_rank(driver, shape):
    A = rng(15).standard_normal(shape)
    B = rng(16).standard_normal(shape[:-1] + (2,))
    G = rng(17).standard_normal(shape[:-2] + (shape[-1], 2))
    has_res = shape[-2] > shape[-1] and driver not in (None, "gelsy")
    Gr = rng(18).standard_normal(shape[:-2] + (2,)) if has_res else None
    for got, want in zip(grads(tp, A, B, G, Gr, driver=driver), grads(torch, A, B, G, Gr, driver=driver)):
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("shape", [(6, 3), (3, 6)])
def test_gradients_match_torch_rank_deficient(shape):
    A = deficient(shape, seed=19)
    B = rng(20).standard_normal((shape[0], 2))
    G = rng(21).standard_normal((shape[1], 2))
    for got, want in zip(grads(tp, A, B, G, None), grads(torch, A, B, G, None)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("shape", [(5, 3), (3, 3), (2, 4)])
def test_gradcheck_finite_differences(shape):
    A = tp.tensor(rng(22).standard_normal(shape), requires_grad=True)
    B = tp.tensor(rng(23).standard_normal((shape[0], 2)), requires_grad=True)
    assert tp.autograd.gradcheck(lambda a, b: tp.linalg.lstsq(a, b).solution, (A, B))
    if shape[0] > shape[1]:
        assert tp.autograd.gradcheck(lambda a, b: tp.linalg.lstsq(a, b, driver="gelsd").residuals, (A, B))


def test_rank_and_singular_values_are_not_differentiable():
    A = tp.tensor(rng(24).standard_normal((5, 3)), requires_grad=True)
    r = tp.linalg.lstsq(A, tp.tensor(rng(25).standard_normal((5, 2))), driver="gelsd")
    assert r.solution.requires_grad and r.residuals.requires_grad
    assert not r.singular_values.requires_grad and not r.rank.requires_grad


def test_compiled_matches_eager():
    def f(a, b):
        r = tp.linalg.lstsq(a, b)
        return r.solution * 2

    A = tp.tensor(deficient((6, 3), seed=26))
    B = tp.tensor(rng(27).standard_normal((6, 2)))
    np.testing.assert_allclose(tp.compile(f, fullgraph=False)(A, B).numpy(), f(A, B).numpy(), rtol=1e-12)


# ---- errors ----

@pytest.mark.parametrize("make, exc, match", [
    (lambda: (tp.ones(5, 3), tp.ones(4, 2)), ValueError, r"linalg\.lstsq: incompatible shapes of A \[5, 3\] and B \[4, 2\]"),
    (lambda: (tp.ones(5, 3, dtype=tp.float64), tp.ones(5, 2)), TypeError, "linalg.lstsq: expected A and B to have the same dtype"),
    (lambda: (tp.ones(5, 3, dtype=tp.int64), tp.ones(5, 2, dtype=tp.int64)), TypeError, "linalg.lstsq: expected A to be a float32 or float64"),
    (lambda: (tp.ones(3), tp.ones(3)), ValueError, "linalg.lstsq: A must have at least 2 dimensions"),
    (lambda: (tp.ones(2, 5, 3), tp.ones(3, 5, 2)), ValueError, "linalg.lstsq: the batch dims"),
])
def test_bad_inputs_name_the_operator(make, exc, match):
    A, B = make()
    with pytest.raises(exc, match=match):
        tp.linalg.lstsq(A, B)


def test_bad_driver_and_singular_gels():
    with pytest.raises(ValueError, match="linalg.lstsq: driver must be one of"):
        tp.linalg.lstsq(tp.ones(5, 3), tp.ones(5, 2), driver="gesv")
    # an exactly zero column: QR's R[1, 1] is 0 (torch raises its LinAlgError too)
    A = tp.tensor(np.array([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]]))
    with pytest.raises(tp.linalg.LinAlgError, match="linalg.lstsq: driver 'gels' needs A of full rank"):
        tp.linalg.lstsq(A, tp.ones(3, 1, dtype=tp.float64), driver="gels")


@pytest.mark.parametrize("driver", [None, "gelsd"])
@pytest.mark.parametrize("shape, rank_deficient", [((5, 3), False), ((3, 3), False), ((2, 4), False), ((5, 3), True)])
def test_forward_mode_matches_torch(driver, shape, rank_deficient):
    A = deficient(shape, seed=28) if rank_deficient else rng(28).standard_normal(shape)
    B, dA, dB = rng(29).standard_normal((shape[0], 2)), rng(30).standard_normal(shape), rng(31).standard_normal((shape[0], 2))
    _, want = torch.func.jvp(lambda a, b: tuple(torch.linalg.lstsq(a, b, driver=driver)[:2]),
                             (torch.tensor(A), torch.tensor(B)), (torch.tensor(dA), torch.tensor(dB)))
    _, got = tp.func.jvp(lambda a, b: tuple(tp.linalg.lstsq(a, b, driver=driver)[:2]),
                         (tp.tensor(A), tp.tensor(B)), (tp.tensor(dA), tp.tensor(dB)))
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-7, atol=1e-10)
