"""softmax / log_softmax, layer_norm, rms_norm, batch_norm and dropout against
NumPy formulas, PyTorch where installed, and finite-difference gradients."""

import numpy as np
import pytest

import tensorplay as tp
from fd_check import check_gradients

RNG = np.random.default_rng(4321)


def T(a, **kw):
    return tp.tensor(np.asarray(a), **kw)


def N(t):
    return np.asarray(t.detach().contiguous().numpy())


def close(got, want, rtol=1e-6, atol=1e-7):
    got = N(got) if not isinstance(got, np.ndarray) else got
    want = np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} vs {want.shape}"
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)


def gradcheck(fn, *arrays, eps=1e-6, rtol=1e-5, atol=1e-7):
    return check_gradients(fn, *arrays, eps=eps, rtol=rtol, atol=atol)


def np_softmax(a, dim):
    e = np.exp(a - a.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def np_layer_norm(a, k, w=None, b=None, eps=1e-5):
    axes = tuple(range(a.ndim - k, a.ndim))
    m = a.mean(axis=axes, keepdims=True)
    v = a.var(axis=axes, keepdims=True)
    y = (a - m) / np.sqrt(v + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


# ------------------------------------------------------------------ softmax / log_softmax
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_log_softmax(dim, dtype):
    a = (RNG.standard_normal((3, 4, 300)) * 5).astype(dtype)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    close(tp.softmax(T(a), dim), np_softmax(a.astype(np.float64), dim), tol, 1e-7)
    close(T(a).log_softmax(dim), np.log(np_softmax(a.astype(np.float64), dim)), tol, 1e-5)


def test_softmax_noncontiguous_and_dtype_arg():
    a = RNG.standard_normal((5, 6))
    close(tp.softmax(T(a).permute(1, 0), 1), np_softmax(a.T, 1), 1e-12)
    close(tp.log_softmax(T(a)[:, ::2], 0), np.log(np_softmax(a[:, ::2], 0)), 1e-12)
    r = tp.softmax(T(a.astype(np.float32)), -1, dtype=tp.float64)
    assert r.dtype == tp.float64
    r = tp.log_softmax(T(np.arange(4)), 0, dtype=tp.float32)
    assert r.dtype == tp.float32
    close(r, np.log(np_softmax(np.arange(4.0), 0)), 1e-6)
    with pytest.raises(Exception, match="softmax"):
        tp.softmax(T(np.arange(4)), 0)


def test_softmax_special_values():
    a = np.array([[1000.0, 1000.0, -np.inf], [-np.inf, 0.0, 0.0], [np.nan, 0.0, 1.0]])
    close(tp.softmax(T(a), 1), [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [np.nan] * 3])
    close(tp.log_softmax(T(a), 1)[:2], [[-np.log(2), -np.log(2), -np.inf], [-np.inf, -np.log(2), -np.log(2)]])
    assert N(tp.softmax(T(np.zeros((0, 3))), 1)).shape == (0, 3)
    close(tp.softmax(T(np.array(3.0)), 0), 1.0)


def test_softmax_gradcheck():
    a = RNG.standard_normal((3, 5))
    gradcheck(lambda x: tp.softmax(x, 1), a)
    gradcheck(lambda x: tp.softmax(x, 0), a)
    gradcheck(lambda x: tp.log_softmax(x, 1), a)
    gradcheck(lambda x: x.log_softmax(0), a)


# ------------------------------------------------------------------ layer_norm
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("affine", ["none", "weight", "bias", "both"])
def test_layer_norm(k, affine):
    a = RNG.standard_normal((4, 3, 6)) * 3 + 1
    ns = a.shape[-k:]
    w = RNG.standard_normal(ns) if affine in ("weight", "both") else None
    b = RNG.standard_normal(ns) if affine in ("bias", "both") else None
    got = tp.layer_norm(T(a), list(ns), None if w is None else T(w), None if b is None else T(b), 1e-5)
    close(got, np_layer_norm(a, k, w, b), 1e-10, 1e-10)
    got32 = tp.layer_norm(T(a.astype(np.float32)), list(ns), None if w is None else T(w.astype(np.float32)),
                          None if b is None else T(b.astype(np.float32)))
    assert got32.dtype == tp.float32
    close(got32, np_layer_norm(a, k, w, b), 1e-4, 1e-4)


def test_layer_norm_noncontiguous_and_eps():
    a = RNG.standard_normal((6, 5))
    close(tp.layer_norm(T(a).permute(1, 0), [6]), np_layer_norm(a.T, 1), 1e-10)
    close(tp.layer_norm(T(a), [5], eps=0.5), np_layer_norm(a, 1, eps=0.5), 1e-10)
    c = np.full((2, 4), 3.0)
    close(tp.layer_norm(T(c), [4]), np.zeros((2, 4)))


def test_layer_norm_errors():
    x = T(np.zeros((2, 3)))
    with pytest.raises(Exception, match="layer_norm"):
        tp.layer_norm(x, [4])
    with pytest.raises(Exception, match="layer_norm"):
        tp.layer_norm(x, [3], T(np.ones(4)))
    with pytest.raises(Exception, match="layer_norm"):
        tp.layer_norm(T(np.zeros((2, 3), dtype=np.int64)), [3])


@pytest.mark.parametrize("k", [1, 2])
def test_layer_norm_gradcheck(k):
    a = RNG.standard_normal((3, 2, 4))
    ns = list(a.shape[-k:])
    w = RNG.standard_normal(ns)
    b = RNG.standard_normal(ns)
    gradcheck(lambda x, w, b: tp.layer_norm(x, ns, w, b), a, w, b)
    gradcheck(lambda x: tp.layer_norm(x, ns), a)
    gradcheck(lambda x, w: tp.layer_norm(x, ns, w), a, w)


# ------------------------------------------------------------------ rms_norm
def test_rms_norm():
    a = RNG.standard_normal((4, 6))
    w = RNG.standard_normal(6)
    eps = np.finfo(np.float64).eps
    want = a / np.sqrt((a * a).mean(-1, keepdims=True) + eps) * w
    close(tp.rms_norm(T(a), [6], T(w)), want, 1e-10)
    close(tp.rms_norm(T(a), [6], eps=0.1), a / np.sqrt((a * a).mean(-1, keepdims=True) + 0.1), 1e-10)
    want2 = a / np.sqrt((a * a).mean(keepdims=True) + eps)
    close(tp.rms_norm(T(a), [4, 6]), want2, 1e-10)
    with pytest.raises(Exception, match="rms_norm"):
        tp.rms_norm(T(a), [5])


def test_rms_norm_gradcheck():
    a = RNG.standard_normal((3, 4))
    w = RNG.standard_normal(4)
    gradcheck(lambda x, w: tp.rms_norm(x, [4], w, 1e-3), a, w)


# ------------------------------------------------------------------ batch_norm
def np_batch_stats(a):
    axes = (0,) + tuple(range(2, a.ndim))
    return a.mean(axis=axes), a.var(axis=axes)


@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5), (2, 3, 4, 5)])
def test_batch_norm_training_updates_running_stats(shape):
    a = RNG.standard_normal(shape) * 2 + 1
    c = shape[1]
    w, b = RNG.standard_normal(c), RNG.standard_normal(c)
    rm0, rv0 = RNG.standard_normal(c), np.abs(RNG.standard_normal(c)) + 0.5
    rm, rv = T(rm0.copy()), T(rv0.copy())
    v0 = rm._version if hasattr(rm, "_version") else None
    out = tp.batch_norm(T(a), rm, rv, T(w), T(b), True, 0.1, 1e-5)
    mean, var = np_batch_stats(a)
    cs = (1, c) + (1,) * (len(shape) - 2)
    close(out, (a - mean.reshape(cs)) / np.sqrt(var.reshape(cs) + 1e-5) * w.reshape(cs) + b.reshape(cs), 1e-10)
    n = a.size // c
    close(rm, 0.9 * rm0 + 0.1 * mean, 1e-12)
    close(rv, 0.9 * rv0 + 0.1 * var * n / (n - 1), 1e-12)
    if v0 is not None:
        assert rm._version > v0


def test_batch_norm_eval_uses_running_stats():
    a = RNG.standard_normal((4, 3, 2))
    rm, rv = RNG.standard_normal(3), np.abs(RNG.standard_normal(3)) + 0.5
    out = tp.batch_norm(T(a), T(rm), T(rv), None, None, False, 0.1, 1e-5)
    close(out, (a - rm[None, :, None]) / np.sqrt(rv[None, :, None] + 1e-5), 1e-12)
    rmt = T(rm.copy())
    tp.batch_norm(T(a), rmt, T(rv), None, None, False, 0.1, 1e-5)
    close(rmt, rm)  # untouched in evaluation


def test_batch_norm_errors():
    with pytest.raises(Exception, match="batch_norm"):
        tp.batch_norm(T(np.zeros((1, 3))), None, None, None, None, True, 0.1, 1e-5)
    with pytest.raises(Exception, match="batch_norm"):
        tp.batch_norm(T(np.zeros((4, 3))), T(np.zeros(2)), T(np.ones(2)), None, None, True, 0.1, 1e-5)
    with pytest.raises(Exception, match="batch_norm"):
        tp.batch_norm(T(np.zeros((4, 3))), None, None, None, None, False, 0.1, 1e-5)


def test_batch_norm_gradcheck():
    a = RNG.standard_normal((4, 3, 2))
    w, b = RNG.standard_normal(3), RNG.standard_normal(3)
    gradcheck(lambda x, w, b: tp.batch_norm(x, None, None, w, b, True, 0.1, 1e-5), a, w, b)
    rm, rv = RNG.standard_normal(3), np.abs(RNG.standard_normal(3)) + 0.5
    gradcheck(lambda x, w, b: tp.batch_norm(x, T(rm), T(rv), w, b, False, 0.1, 1e-5), a, w, b)


# ------------------------------------------------------------------ dropout
def test_dropout_scaling_and_mask():
    tp.manual_seed(0)
    a = RNG.standard_normal((200, 300)).astype(np.float32) + 5
    out = N(tp.dropout(T(a), 0.3, True))
    kept = out != 0
    assert abs(kept.mean() - 0.7) < 0.01
    np.testing.assert_allclose(out[kept], a[kept] / 0.7, rtol=1e-6)


def test_dropout_edge_cases():
    a = RNG.standard_normal((5, 7))
    close(tp.dropout(T(a), 0.0, True), a)
    close(tp.dropout(T(a), 1.0, True), np.zeros_like(a))
    x = T(a)
    close(tp.dropout(x, 0.9, False), a)
    for p in (-0.1, 1.5):
        with pytest.raises(Exception, match="dropout"):
            tp.dropout(x, p, True)
    assert N(tp.dropout(T(np.zeros((0, 4))), 0.5)).shape == (0, 4)


def test_dropout_seeded_and_grad():
    a = np.ones((50, 40))
    tp.manual_seed(7)
    o1 = N(tp.dropout(T(a), 0.5))
    tp.manual_seed(7)
    o2 = N(tp.dropout(T(a), 0.5))
    np.testing.assert_array_equal(o1, o2)
    assert not np.array_equal(o1, N(tp.dropout(T(a), 0.5)))
    x = T(a, requires_grad=True)
    tp.manual_seed(3)
    y = tp.dropout(x, 0.25)
    y.sum().backward()
    close(x.grad, (N(y) != 0) / 0.75)


# ------------------------------------------------------------------ PyTorch as a second oracle
def test_against_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    a = RNG.standard_normal((6, 4, 10)).astype(np.float32)
    w, b = RNG.standard_normal(10).astype(np.float32), RNG.standard_normal(10).astype(np.float32)
    t = torch.from_numpy(a.copy())
    x = T(a)
    close(tp.softmax(x, 1), torch.softmax(t, 1).numpy(), 1e-5, 1e-6)
    close(tp.log_softmax(x, -1), torch.log_softmax(t, -1).numpy(), 1e-5, 1e-5)
    close(tp.layer_norm(x, [10], T(w), T(b)), F.layer_norm(t, [10], torch.from_numpy(w), torch.from_numpy(b)).numpy(),
          1e-4, 1e-5)
    close(tp.rms_norm(x, [4, 10]), F.rms_norm(t, [4, 10]).numpy(), 1e-4, 1e-5)
    rm, rv = np.zeros(4, np.float32), np.ones(4, np.float32)
    trm, trv = torch.from_numpy(rm.copy()), torch.from_numpy(rv.copy())
    xrm, xrv = T(rm.copy()), T(rv.copy())
    close(tp.batch_norm(x, xrm, xrv, None, None, True, 0.2, 1e-5),
          F.batch_norm(t, trm, trv, None, None, True, 0.2, 1e-5).numpy(), 1e-4, 1e-5)
    close(xrm, trm.numpy(), 1e-5, 1e-6)
    close(xrv, trv.numpy(), 1e-5, 1e-6)
    # gradients of layer_norm vs torch autograd
    g = RNG.standard_normal(a.shape).astype(np.float32)
    tx = torch.from_numpy(a.copy()).requires_grad_()
    tw, tb = torch.from_numpy(w.copy()).requires_grad_(), torch.from_numpy(b.copy()).requires_grad_()
    (F.layer_norm(tx, [10], tw, tb) * torch.from_numpy(g)).sum().backward()
    xx, xw, xb = T(a, requires_grad=True), T(w, requires_grad=True), T(b, requires_grad=True)
    (tp.layer_norm(xx, [10], xw, xb) * T(g)).sum().backward()
    close(xx.grad, tx.grad.numpy(), 1e-4, 1e-4)
    close(xw.grad, tw.grad.numpy(), 1e-4, 1e-4)
    close(xb.grad, tb.grad.numpy(), 1e-4, 1e-4)


@pytest.mark.parametrize("backend", ["eager", "stax"])
def test_layer_norm_and_softmax_compile(backend):
    # layer_norm is one captured operator; Stax takes its decomposition.
    a = RNG.standard_normal((6, 33)).astype(np.float32)
    w, b = T(RNG.standard_normal(33).astype(np.float32)), T(RNG.standard_normal(33).astype(np.float32))
    fn = lambda x: tp.log_softmax(tp.layer_norm(x, [33], w, b), -1) + tp.rms_norm(x, [33], w)
    close(tp.compile(fn, backend=backend)(T(a)), N(fn(T(a))), 1e-5, 1e-5)


def test_second_order_grads_against_torch():
    # The derivative formulas are tensor operators, so they differentiate again.
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    a = RNG.standard_normal((3, 5))
    wv = RNG.standard_normal((3, 5))
    fns = [(lambda x: tp.softmax(x, 1), lambda t: torch.softmax(t, 1)),
           (lambda x: tp.log_softmax(x, 0), lambda t: torch.log_softmax(t, 0)),
           (lambda x: tp.layer_norm(x, [5]), lambda t: F.layer_norm(t, [5])),
           (lambda x: x.logsumexp(1), lambda t: t.logsumexp(1)),
           (lambda x: x.var(1), lambda t: t.var(1)),
           (lambda x: x.prod(1), lambda t: t.prod(1))]
    for i, (ours, theirs) in enumerate(fns):
        x = T(a, requires_grad=True)
        y = ours(x)
        (g,) = tp.autograd.grad((y * T(wv[: y.shape[0], : y.shape[-1]] if y.dim() == 2 else wv[0, : y.shape[0]])).sum(),
                                [x], create_graph=True)
        (gg,) = tp.autograd.grad((g * g).sum(), [x])
        t = torch.tensor(a, requires_grad=True)
        yt = theirs(t)
        w = torch.tensor(wv[: yt.shape[0], : yt.shape[-1]] if yt.dim() == 2 else wv[0, : yt.shape[0]])
        (gt,) = torch.autograd.grad((yt * w).sum(), [t], create_graph=True)
        (ggt,) = torch.autograd.grad((gt * gt).sum(), [t])
        close(gg, ggt.numpy(), 1e-8, 1e-10)
