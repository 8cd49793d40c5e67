"""Session 34 API gaps, part 2: LU factorization. tp.linalg.lu_factor(_ex), lu, lu_solve and
tp.lu_unpack (and the older tp.lu / tp.lu_solve): values against torch (the same LAPACK
pivoting), gradients against torch in float64 (square, wide and tall matrices, batched),
lu_solve's four left/adjoint forms, errors, and a compiled call against eager."""
import numpy as np
import pytest
import torch

import tensorplay as tp

RNG = np.random.default_rng(34)


def close(r, t, rtol=1e-10, atol=1e-12):
    assert tuple(r.shape) == tuple(t.shape), (tuple(r.shape), tuple(t.shape))
    np.testing.assert_allclose(np.asarray(r.detach().numpy(), dtype=np.float64), t.detach().double().numpy(),
                               rtol=rtol, atol=atol)


SHAPES = [(4, 4), (3, 5), (5, 3), (2, 3, 3), (2, 1, 4, 2), (1, 1)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lu_factor_and_unpack_match_torch(shape, dtype):
    a = RNG.standard_normal(shape).astype(dtype)
    LU, piv = tp.linalg.lu_factor(tp.tensor(a))
    tLU, tpiv = torch.linalg.lu_factor(torch.tensor(a))
    rtol = 1e-5 if dtype == "float32" else 1e-10
    close(LU, tLU, rtol=rtol, atol=rtol)
    assert piv.dtype == tp.int32 and piv.tolist() == tpiv.tolist()
    P, L, U = tp.lu_unpack(LU, piv)
    tP, tL, tU = torch.lu_unpack(tLU, tpiv)
    for r, t in ((P, tP), (L, tL), (U, tU)):
        close(r, t, rtol=rtol, atol=rtol)
    np.testing.assert_allclose((P @ L @ U).numpy(), a, rtol=rtol * 10, atol=rtol * 10)
    P2, L2, U2 = tp.linalg.lu(tp.tensor(a))
    for r, t in ((P2, tP), (L2, tL), (U2, tU)):
        close(r, t, rtol=rtol, atol=rtol)
    res = tp.linalg.lu_factor_ex(tp.tensor(a))
    assert res.info.dtype == tp.int32 and tuple(res.info.shape) == shape[:-2] and res.info.sum().item() == 0


def _grad_check(fn_tp, fn_torch, arrays, rtol=1e-8):
    xs = [tp.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    outs, touts = fn_tp(*xs), fn_torch(*ts)
    outs = outs if isinstance(outs, tuple) else (outs,)
    touts = touts if isinstance(touts, tuple) else (touts,)
    loss, tloss = 0, 0
    for o, t in zip(outs, touts):
        close(o, t)
        w = RNG.standard_normal(tuple(t.shape))
        loss = loss + (o * tp.tensor(w)).sum()
        tloss = tloss + (t * torch.tensor(w)).sum()
    loss.backward()
    tloss.backward()
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=1e-10)


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (2, 3, 3), (2, 2, 4)])
def test_lu_factor_gradient_matches_torch(shape):
    a = RNG.standard_normal(shape)
    _grad_check(lambda x: tp.linalg.lu_factor(x).LU, lambda x: torch.linalg.lu_factor(x).LU, [a])


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (2, 3, 3)])
def test_lu_gradient_matches_torch(shape):
    a = RNG.standard_normal(shape)
    _grad_check(lambda x: tuple(tp.linalg.lu(x))[1:], lambda x: tuple(torch.linalg.lu(x))[1:], [a])


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [True, False])
def test_lu_solve_matches_torch_with_gradients(left, adjoint):
    a = RNG.standard_normal((2, 4, 4)) + 4 * np.eye(4)
    b = RNG.standard_normal((2, 4, 3) if left else (2, 3, 4))
    tLU, tpiv = torch.linalg.lu_factor(torch.tensor(a))
    LU, piv = tp.linalg.lu_factor(tp.tensor(a))
    _grad_check(lambda lu, B: tp.linalg.lu_solve(lu, piv, B, left=left, adjoint=adjoint),
                lambda lu, B: torch.linalg.lu_solve(lu, tpiv, B, left=left, adjoint=adjoint),
                [tLU.numpy(), b])
    # the full chain A -> LU -> X against torch
    _grad_check(lambda A, B: tp.linalg.lu_solve(*tp.linalg.lu_factor(A), B, left=left, adjoint=adjoint),
                lambda A, B: torch.linalg.lu_solve(*torch.linalg.lu_factor(A), B, left=left, adjoint=adjoint),
                [a, b])


def test_lu_solve_broadcasts_batch_dims_and_legacy_spellings():
    a = RNG.standard_normal((3, 3)) + 3 * np.eye(3)
    b = RNG.standard_normal((2, 3, 2))
    LU, piv = tp.linalg.lu_factor(tp.tensor(a))
    tLU, tpiv = torch.linalg.lu_factor(torch.tensor(a))
    close(tp.linalg.lu_solve(LU, piv, tp.tensor(b)), torch.linalg.lu_solve(tLU, tpiv, torch.tensor(b)))
    close(tp.lu_solve(tp.tensor(b), LU, piv), torch.lu_solve(torch.tensor(b), tLU, tpiv))
    LU2, piv2, info = tp.lu(tp.tensor(a), get_infos=True)
    close(LU2, tLU)
    assert info.item() == 0
    assert len(tp.tensor(a).lu()) == 2


def test_singular_matrices():
    z = tp.zeros(2, 2, dtype=tp.float64)
    with pytest.raises(tp.linalg.LinAlgError, match="lu_factor"):
        tp.linalg.lu_factor(z)
    LU, piv, info = tp.linalg.lu_factor_ex(z)
    tLU, tpiv, tinfo = torch.linalg.lu_factor_ex(torch.zeros(2, 2, dtype=torch.float64))
    assert info.item() == tinfo.item() == 1 and piv.tolist() == tpiv.tolist()
    with pytest.raises(tp.linalg.LinAlgError):
        tp.linalg.lu_factor_ex(z, check_errors=True)
    P, L, U = tp.linalg.lu(z)   # no error, as torch
    assert float(U.abs().sum()) == 0.0
    s = tp.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=tp.float64)
    _, _, info = tp.linalg.lu_factor_ex(s)
    assert info.item() == torch.linalg.lu_factor_ex(torch.tensor([[1.0, 2.0], [2.0, 4.0]])).info.item()


def test_bad_inputs_name_the_function():
    with pytest.raises(TypeError, match="lu_factor.*int64"):
        tp.linalg.lu_factor(tp.ones(2, 2, dtype=tp.int64))
    with pytest.raises(ValueError, match="lu_factor.*shape"):
        tp.linalg.lu_factor(tp.ones(3))
    with pytest.raises(NotImplementedError, match="without pivoting"):
        tp.linalg.lu_factor(tp.ones(2, 2), pivot=False)
    LU, piv = tp.linalg.lu_factor(tp.eye(3))
    with pytest.raises(ValueError, match="lu_solve.*incompatible"):
        tp.linalg.lu_solve(LU, piv, tp.ones(2, 2))
    with pytest.raises(TypeError, match="lu_solve.*dtype"):
        tp.linalg.lu_solve(LU, piv, tp.ones(3, 1, dtype=tp.float64))
    with pytest.raises(ValueError, match="lu_unpack.*pivots"):
        tp.lu_unpack(LU, piv[:2])
    with pytest.raises(ValueError, match="out of range"):
        tp.lu_unpack(LU, tp.tensor([0, 2, 3], dtype=tp.int32))


def test_lu_unpack_partial_and_compiled():
    a = RNG.standard_normal((3, 3))
    LU, piv = tp.linalg.lu_factor(tp.tensor(a))
    P, L, U = tp.lu_unpack(LU, piv, unpack_data=False)
    assert L.numel() == 0 and U.numel() == 0 and tuple(P.shape) == (3, 3)
    P, L, U = tp.lu_unpack(LU, piv, unpack_pivots=False)
    assert P.numel() == 0

    def f(A, B):
        LU, piv = tp.linalg.lu_factor(A)
        return tp.linalg.lu_solve(LU, piv, B)

    A = tp.tensor(a + 3 * np.eye(3))
    B = tp.tensor(RNG.standard_normal((3, 2)))
    cf = tp.compile(f)
    for _ in range(2):
        np.testing.assert_allclose(cf(A, B).numpy(), f(A, B).numpy(), rtol=1e-12)
    np.testing.assert_allclose((A @ f(A, B)).numpy(), B.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (2, 3, 3)])
def test_lu_factor_forward_mode_matches_torch(shape):
    a = RNG.standard_normal(shape)
    t = RNG.standard_normal(shape)
    _, tan = tp.func.jvp(lambda x: tp.linalg.lu_factor(x).LU, (tp.tensor(a),), (tp.tensor(t),))
    _, ttan = torch.func.jvp(lambda x: torch.linalg.lu_factor(x).LU, (torch.tensor(a),), (torch.tensor(t),))
    np.testing.assert_allclose(tan.numpy(), ttan.numpy(), rtol=1e-9, atol=1e-10)
