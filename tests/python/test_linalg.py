"""tp.linalg against PyTorch (values and gradients) and NumPy, finite-difference gradchecks,
errors for singular / non-square / non-positive-definite inputs, and the torch-style aliases."""
import math

import numpy as np
import pytest

import tensorplay as tp

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(22)


def _pair(a, grad=True):
    return tp.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


def _spd(n, batch=()):
    m = RNG.standard_normal(batch + (n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def _check(f_tp, f_torch, *arrays, loss=None, atol=1e-10, grad=True, values=True):
    """Same values (unless values=False: singular vectors' signs are arbitrary) and the same
    gradient of a smooth loss of every output as torch."""
    xs = [tp.tensor(a, requires_grad=grad) for a in arrays]
    ts = [torch.tensor(a, requires_grad=grad) for a in arrays]
    r, tr = f_tp(*xs), f_torch(*ts)
    r = tuple(r) if isinstance(r, tuple) else (r,)
    tr = tuple(tr) if isinstance(tr, tuple) else (tr,)
    assert len(r) == len(tr)
    for a, b in zip(r, tr):
        assert tuple(a.shape) == tuple(b.shape)
        if values:
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=atol, rtol=1e-7)
    if not grad:
        return
    loss = loss or (lambda outs: sum(o.sin().sum() for o in outs if o.dtype.is_floating_point))
    loss(r).backward()
    loss(tr).backward()
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), atol=atol * 100, rtol=1e-6)


# ---------------------------------------------------------------------------
# QR (used by nn.init.orthogonal_)

@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 6, 3), (2, 3, 0, 2)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_matches_torch(shape, mode):
    a = RNG.standard_normal(shape)
    _check(lambda x: tuple(tp.linalg.qr(x, mode)), lambda x: tuple(torch.linalg.qr(x, mode)), a, grad=False)
    Q, R = tp.linalg.qr(tp.tensor(a), mode)
    if mode != "r" and a.size:
        np.testing.assert_allclose((Q @ R).numpy(), a, atol=1e-12)


@pytest.mark.parametrize("shape", [(5, 3), (4, 4), (3, 6, 2), (3, 5), (2, 3, 7), (1, 4)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_grad_matches_torch_and_fd(shape, mode):
    # wide inputs (rows < columns): both modes differentiable, as in torch (they were refused)
    if mode == "complete" and shape[-2] > shape[-1]:
        pytest.skip("not differentiable (torch refuses too): test_qr_grad_refused_where_torch_refuses")
    a = RNG.standard_normal(shape)
    _check(lambda x: tuple(tp.linalg.qr(x, mode)), lambda x: tuple(torch.linalg.qr(x, mode)), a)
    assert tp.autograd.gradcheck(lambda x: tp.linalg.qr(x, mode)[0].sum() + tp.linalg.qr(x, mode)[1].square().sum(),
                                 (tp.tensor(a, requires_grad=True),))
    # only R's gradient flowing (Q unused), and only Q's
    for pick in (0, 1):
        _check(lambda x: tp.linalg.qr(x, mode)[pick], lambda x: torch.linalg.qr(x, mode)[pick], a)


def test_qr_grad_refused_where_torch_refuses():
    x = tp.tensor(RNG.standard_normal((5, 3)), requires_grad=True)
    with pytest.raises(NotImplementedError, match="linalg.qr.*complete"):
        tp.linalg.qr(x, "complete")[0].sum().backward()
    for shape in ((5, 3), (3, 5)):
        x = tp.tensor(RNG.standard_normal(shape), requires_grad=True)
        with pytest.raises(RuntimeError, match="mode='r'"):
            tp.linalg.qr(x, "r")[1].sum().backward()


def test_qr_float32_and_bad_mode():
    a = RNG.standard_normal((6, 4)).astype(np.float32)
    Q, R = tp.linalg.qr(tp.tensor(a))
    assert Q.dtype == tp.float32
    np.testing.assert_allclose((Q.mT @ Q).numpy(), np.eye(4), atol=1e-5)
    with pytest.raises(ValueError, match="mode"):
        tp.linalg.qr(tp.tensor(a), "full")
    with pytest.raises(TypeError, match="linalg.qr.*int64"):
        tp.linalg.qr(tp.ones(3, 3, dtype=tp.int64))


# ---------------------------------------------------------------------------
# Solve / inverse / determinants

def test_solve_shapes_and_grads():
    A = RNG.standard_normal((2, 4, 4))
    _check(tp.linalg.solve, torch.linalg.solve, A, RNG.standard_normal((2, 4, 3)))
    _check(tp.linalg.solve, torch.linalg.solve, A[0], RNG.standard_normal(4))          # vector B
    _check(tp.linalg.solve, torch.linalg.solve, A, RNG.standard_normal((2, 4)))        # batched vectors
    _check(tp.linalg.solve, torch.linalg.solve, A, RNG.standard_normal((4, 2)))        # broadcast B
    _check(tp.linalg.solve, torch.linalg.solve, A[0], RNG.standard_normal((3, 4, 2)))  # broadcast A
    _check(lambda a, b: tp.linalg.solve(a, b, left=False), lambda a, b: torch.linalg.solve(a, b, left=False),
           A, RNG.standard_normal((2, 3, 4)))


def test_solve_gradcheck():
    A = tp.tensor(RNG.standard_normal((3, 3)) + 3 * np.eye(3), requires_grad=True)
    B = tp.tensor(RNG.standard_normal((3, 2)), requires_grad=True)
    assert tp.autograd.gradcheck(tp.linalg.solve, (A, B))
    assert tp.autograd.gradgradcheck(tp.linalg.solve, (A, B))


def test_inv_det_slogdet_logdet():
    A = RNG.standard_normal((3, 4, 4))
    _check(tp.linalg.inv, torch.linalg.inv, A)
    _check(tp.linalg.det, torch.linalg.det, A)
    _check(lambda x: tuple(tp.linalg.slogdet(x)), lambda x: tuple(torch.linalg.slogdet(x)), A)
    _check(tp.logdet, torch.logdet, _spd(4, (2,)))
    _check(lambda x: x.inverse(), lambda x: x.inverse(), A)
    _check(lambda x: x.det(), lambda x: x.det(), A)
    _check(tp.det, torch.det, A)
    assert tp.autograd.gradcheck(tp.linalg.det, (tp.tensor(RNG.standard_normal((3, 3)), requires_grad=True),))


def test_det_of_singular_and_sign():
    s = tp.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=tp.float64)
    assert tp.linalg.det(s).item() == 0.0
    sign, logabs = tp.linalg.slogdet(s)
    assert sign.item() == 0.0 and logabs.item() == -math.inf
    p = tp.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=tp.float64)  # a row swap: det -1
    assert tp.linalg.det(p).item() == -1.0
    assert math.isnan(tp.logdet(p).item())


def test_singular_raises_linalg_error_naming_op_and_shape():
    s = tp.zeros(2, 3, 3, dtype=tp.float64)
    with pytest.raises(tp.linalg.LinAlgError, match=r"linalg.solve.*singular.*\[2, 3, 3\]"):
        tp.linalg.solve(s, tp.ones(2, 3, 1, dtype=tp.float64))
    with pytest.raises(tp.linalg.LinAlgError, match="linalg.inv.*singular"):
        tp.linalg.inv(s)
    assert issubclass(tp.linalg.LinAlgError, RuntimeError)
    inv, info = tp.linalg.inv_ex(s)
    assert info.tolist() == [1, 1] or all(i > 0 for i in info.tolist())


def test_shape_and_dtype_errors():
    with pytest.raises(ValueError, match=r"linalg.inv.*square.*\[2, 3\]"):
        tp.linalg.inv(tp.ones(2, 3, dtype=tp.float64))
    with pytest.raises(ValueError, match="linalg.det.*square"):
        tp.linalg.det(tp.ones(3, dtype=tp.float64))
    with pytest.raises(ValueError, match="linalg.solve.*incompatible"):
        tp.linalg.solve(tp.eye(3, dtype=tp.float64), tp.ones(4, 2, dtype=tp.float64))
    with pytest.raises(ValueError, match="linalg.solve.*broadcast"):
        tp.linalg.solve(tp.ones(2, 3, 3, dtype=tp.float64), tp.ones(4, 3, 1, dtype=tp.float64))
    with pytest.raises(TypeError, match="linalg.solve.*same dtype"):
        tp.linalg.solve(tp.eye(3, dtype=tp.float64), tp.ones(3, 1))
    with pytest.raises(TypeError, match="linalg.cholesky.*int64"):
        tp.linalg.cholesky(tp.ones(3, 3, dtype=tp.int64))


# ---------------------------------------------------------------------------
# Cholesky, eigh, SVD

def test_cholesky():
    _check(tp.linalg.cholesky, torch.linalg.cholesky, _spd(4, (3,)))
    _check(lambda x: tp.linalg.cholesky(x, upper=True), lambda x: torch.linalg.cholesky(x, upper=True), _spd(3))
    A = tp.tensor(_spd(3), requires_grad=True)
    assert tp.autograd.gradcheck(lambda x: tp.linalg.cholesky(x + x.mT), (A,))


def test_cholesky_reads_only_the_named_triangle():
    # Regression: the kernel factored A's upper triangle (a silently wrong L for a
    # non-symmetric input, where PyTorch reads the lower one; upper=True reads the upper one).
    s = _spd(4)
    for upper in (False, True):
        junk = RNG.standard_normal((4, 4))
        a = np.triu(s) + np.tril(junk, -1) if upper else np.tril(s) + np.triu(junk, 1)
        np.testing.assert_allclose(tp.linalg.cholesky(tp.tensor(a), upper=upper).numpy(),
                                   torch.linalg.cholesky(torch.tensor(a), upper=upper).numpy(), atol=1e-12)


def test_cholesky_not_pd_raises():
    a = tp.tensor(np.stack([_spd(3), -np.eye(3)]))
    with pytest.raises(tp.linalg.LinAlgError, match=r"linalg.cholesky.*not positive-definite.*order 1.*\[1\]"):
        tp.linalg.cholesky(a)
    L, info = tp.linalg.cholesky_ex(a)
    assert info.tolist() == [0, 1]


def test_eigh_values_vectors_grads():
    a = RNG.standard_normal((2, 5, 5))
    for uplo in "LU":
        w, V = tp.linalg.eigh(tp.tensor(a), uplo)
        tw, tV = torch.linalg.eigh(torch.tensor(a), uplo)
        np.testing.assert_allclose(w.numpy(), tw.numpy(), atol=1e-12)
        np.testing.assert_allclose(np.abs(V.numpy()), np.abs(tV.numpy()), atol=1e-10)  # up to sign
        # A sign-invariant loss of the vectors: same gradient as torch.
        x, t = _pair(a)
        wx, Vx = tp.linalg.eigh(x, uplo)
        wt, Vt = torch.linalg.eigh(t, uplo)
        ((Vx * Vx).sin().sum() + (wx ** 2).sum()).backward()
        ((Vt * Vt).sin().sum() + (wt ** 2).sum()).backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), atol=1e-9)
    _check(tp.linalg.eigvalsh, torch.linalg.eigvalsh, a)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_svd(shape):
    a = RNG.standard_normal(shape)
    for full in (False, True):
        U, S, Vh = tp.linalg.svd(tp.tensor(a), full)
        tU, tS, tVh = torch.linalg.svd(torch.tensor(a), full)
        assert tuple(U.shape) == tuple(tU.shape) and tuple(Vh.shape) == tuple(tVh.shape)
        np.testing.assert_allclose(S.numpy(), tS.numpy(), atol=1e-12)
        k = min(shape[-2:])
        np.testing.assert_allclose(((U[..., :k] * S.unsqueeze(-2)) @ Vh[..., :k, :]).numpy(), a, atol=1e-12)
    _check(tp.linalg.svdvals, torch.linalg.svdvals, a)

    def gauge_free(o):  # invariant to the signs of singular vector pairs
        U, S, Vh = o
        return ((U * S.unsqueeze(-2)) @ Vh).sin().sum() + (U @ U.mT).sum() + (Vh.mT @ Vh).sum() + (U.abs()).sum()

    _check(lambda x: tuple(tp.linalg.svd(x, False)), lambda x: tuple(torch.linalg.svd(x, False)), a,
           loss=gauge_free, atol=1e-11, values=False)
    assert tp.autograd.gradcheck(lambda x: tp.linalg.svdvals(x), (tp.tensor(a, requires_grad=True),))


# ---------------------------------------------------------------------------
# Composites: norms, pinv, rank, lstsq, ...

@pytest.mark.parametrize("ord", ["fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf])
def test_matrix_norm(ord):
    a = RNG.standard_normal((2, 4, 3))
    _check(lambda x: tp.linalg.matrix_norm(x, ord), lambda x: torch.linalg.matrix_norm(x, ord), a)
    _check(lambda x: tp.linalg.matrix_norm(x, ord, dim=(0, 2), keepdim=True),
           lambda x: torch.linalg.matrix_norm(x, ord, dim=(0, 2), keepdim=True), a)


@pytest.mark.parametrize("ord", [2, 1, 3, 0.5, math.inf, -math.inf, 0])
def test_vector_norm(ord):
    a = RNG.standard_normal((3, 4))
    _check(lambda x: tp.linalg.vector_norm(x, ord, dim=-1), lambda x: torch.linalg.vector_norm(x, ord, dim=-1), a,
           grad=ord != 0)
    _check(lambda x: tp.linalg.vector_norm(x, ord), lambda x: torch.linalg.vector_norm(x, ord), a, grad=ord != 0)
    _check(lambda x: tp.linalg.vector_norm(x, ord, dim=(0, 1), keepdim=True),
           lambda x: torch.linalg.vector_norm(x, ord, dim=(0, 1), keepdim=True), a, grad=ord != 0)


def test_norm_dispatch():
    a = RNG.standard_normal((3, 4))
    _check(tp.linalg.norm, torch.linalg.norm, a)
    _check(lambda x: tp.linalg.norm(x, 2), lambda x: torch.linalg.norm(x, 2), a)  # 2-D: spectral
    _check(lambda x: tp.linalg.norm(x, 1, dim=1), lambda x: torch.linalg.norm(x, 1, dim=1), a)
    _check(lambda x: tp.linalg.norm(x, "nuc", dim=(0, 1)), lambda x: torch.linalg.norm(x, "nuc", dim=(0, 1)), a)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_pinv_rank(shape):
    a = RNG.standard_normal(shape)
    _check(tp.linalg.pinv, torch.linalg.pinv, a, atol=1e-9)
    _check(tp.linalg.matrix_rank, torch.linalg.matrix_rank, a, grad=False)
    low = a[..., :, :1] @ a[..., :1, :]  # rank 1
    _check(tp.linalg.matrix_rank, torch.linalg.matrix_rank, low, grad=False)
    _check(lambda x: tp.linalg.pinv(x), lambda x: torch.linalg.pinv(x), low, grad=False, atol=1e-9)
    s = _spd(4)
    _check(lambda x: tp.linalg.pinv(x, hermitian=True), lambda x: torch.linalg.pinv(x, hermitian=True), s)
    _check(lambda x: tp.linalg.matrix_rank(x, hermitian=True), lambda x: torch.linalg.matrix_rank(x, hermitian=True),
           s, grad=False)


def test_lstsq():
    for m, n in [(6, 3), (3, 6), (4, 4)]:
        a, b = RNG.standard_normal((m, n)), RNG.standard_normal((m, 2))
        _check(lambda x, y: tp.linalg.lstsq(x, y).solution,
               lambda x, y: torch.linalg.lstsq(x, y, driver="gelsd").solution, a, b, atol=1e-9)
    np.testing.assert_allclose(tp.linalg.lstsq(tp.tensor(a), tp.tensor(b[:, 0])).solution.numpy(),
                               np.linalg.lstsq(a, b[:, 0], rcond=None)[0], atol=1e-10)


def test_misc_linalg_functions():
    A = RNG.standard_normal((2, 3, 3))
    _check(lambda x: tp.linalg.matrix_power(x, 3), lambda x: torch.linalg.matrix_power(x, 3), A)
    _check(lambda x: tp.linalg.matrix_power(x, -2), lambda x: torch.linalg.matrix_power(x, -2), A)
    _check(lambda x: tp.linalg.matrix_power(x, 0), lambda x: torch.linalg.matrix_power(x, 0), A, grad=False)
    _check(tp.linalg.cross, torch.linalg.cross, RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3)))
    _check(lambda x, y, z: tp.linalg.multi_dot([x, y, z]), lambda x, y, z: torch.linalg.multi_dot([x, y, z]),
           RNG.standard_normal((2, 3)), RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2)))
    _check(lambda x, y: tp.linalg.vecdot(x, y), lambda x, y: torch.linalg.vecdot(x, y),
           RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3)))
    U = np.triu(RNG.standard_normal((3, 3))) + 3 * np.eye(3)
    _check(lambda a, b: tp.linalg.solve_triangular(a, b, upper=True),
           lambda a, b: torch.linalg.solve_triangular(a, b, upper=True), U, RNG.standard_normal((3, 2)))


def test_torch_style_aliases():
    a = RNG.standard_normal((5, 3))
    U, S, V = tp.svd(tp.tensor(a))
    tU, tS, tV = torch.svd(torch.tensor(a))
    np.testing.assert_allclose(np.abs(V.numpy()), np.abs(tV.numpy()), atol=1e-12)
    Q, R = tp.tensor(a).qr()
    np.testing.assert_allclose((Q @ R).numpy(), a, atol=1e-12)
    s = _spd(3)
    np.testing.assert_allclose(tp.tensor(s).cholesky().numpy(), torch.tensor(s).cholesky().numpy(), atol=1e-12)
    np.testing.assert_allclose(tp.tensor(s).pinverse().numpy(), torch.tensor(s).pinverse().numpy(), atol=1e-12)
    np.testing.assert_allclose(tp.tensor(s).logdet().numpy(), torch.tensor(s).logdet().numpy(), atol=1e-12)


def test_float32_batched_against_numpy():
    a = RNG.standard_normal((4, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(tp.linalg.inv(tp.tensor(a)).numpy(), np.linalg.inv(a), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(tp.linalg.det(tp.tensor(a)).numpy(), np.linalg.det(a), rtol=1e-4)
    np.testing.assert_allclose(tp.linalg.svdvals(tp.tensor(a)).numpy(), np.linalg.svd(a, compute_uv=False),
                               rtol=1e-4, atol=1e-5)
    s = (a @ a.transpose(0, 2, 1)).astype(np.float32)
    np.testing.assert_allclose(tp.linalg.eigvalsh(tp.tensor(s)).numpy(), np.linalg.eigvalsh(s), rtol=1e-4, atol=1e-3)


def test_large_batch_runs_in_parallel_and_matches():
    a = RNG.standard_normal((64, 5, 5))
    np.testing.assert_allclose(tp.linalg.inv(tp.tensor(a)).numpy(), np.linalg.inv(a), atol=1e-9)
    q = tp.linalg.qr(tp.tensor(a)).Q.numpy()
    np.testing.assert_allclose(q @ np.swapaxes(q, -1, -2), np.broadcast_to(np.eye(5), a.shape), atol=1e-12)


def test_noncontiguous_inputs():
    a = RNG.standard_normal((4, 4, 3))
    x = tp.tensor(a).permute(2, 0, 1)  # (3, 4, 4), not contiguous
    np.testing.assert_allclose(tp.linalg.det(x).numpy(), np.linalg.det(a.transpose(2, 0, 1)), atol=1e-12)
    np.testing.assert_allclose(tp.linalg.solve(x.mT, x[:, :, :2]).numpy(),
                               np.linalg.solve(a.transpose(2, 0, 1).swapaxes(-1, -2), a.transpose(2, 0, 1)[:, :, :2]),
                               atol=1e-10)


def test_compiled_matches_eager():
    def f(a, b):
        return tp.linalg.solve(a, b).sum() + tp.linalg.det(a) + tp.linalg.qr(a).R.sum()

    a = tp.tensor(RNG.standard_normal((3, 3)) + 3 * np.eye(3))
    b = tp.tensor(RNG.standard_normal((3, 2)))
    cf = tp.compile(f, fullgraph=False)
    np.testing.assert_allclose(cf(a, b).numpy(), f(a, b).numpy(), atol=1e-12)
    a2 = tp.tensor(RNG.standard_normal((3, 3)) + 3 * np.eye(3))  # new values: not a stale result
    np.testing.assert_allclose(cf(a2, b).numpy(), f(a2, b).numpy(), atol=1e-12)


@pytest.mark.skipif(not tp.cuda.is_available(), reason="needs a GPU")
def test_cuda_inputs_run_and_stay_on_the_gpu():
    # tp.linalg on CUDA tensors runs (it used to raise NotImplementedError); the
    # results come back on the input's device. Wider coverage: test_cuda_linalg.py.
    a = tp.tensor(RNG.standard_normal((3, 3)) + 3 * np.eye(3))
    q, r = tp.linalg.qr(a.cuda())
    assert q.device.type == "cuda" and r.device.type == "cuda"
    np.testing.assert_allclose((q @ r).cpu().numpy(), a.numpy(), atol=1e-12)
