"""The operators added for PyTorch users on CUDA (tests/python/test_ops_torch_extra.py covers their
values on the CPU): each CUDA result against TensorPlay's CPU result. The composites (nansum,
cummax, isin, block_diag, ...) run as CUDA parts; bincount, histc, histogram, mode, multinomial
and bernoulli(p) run their CPU kernel on host copies (cuda/host_kernels.cpp), so the random ones
give the CPU's samples for one seed. fill_diagonal_ builds its mask on the device."""
import numpy as np
import pytest

import tensorplay as tp

gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")
NAN = float("nan")
rng = np.random.default_rng(3)


def _np(t):
    t = t.detach().cpu()
    return t.float().numpy() if t.dtype in (tp.bfloat16, tp.float16) else t.numpy()


def _same(got, want, exact=True):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w, exact)
        return
    assert got.device.type == "cuda", got.device
    assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape), (got.dtype, got.shape, want.shape)
    if exact:
        np.testing.assert_array_equal(_np(got), _np(want))
    else:
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-5, atol=1e-6, equal_nan=True)


def _both(fn, *arrays, exact=True):
    cpu = [tp.tensor(a) for a in arrays]
    _same(fn(*[t.cuda() for t in cpu]), fn(*cpu), exact)


X = rng.standard_normal((6, 9))
X[1, 2] = NAN
I = rng.integers(0, 5, size=(6, 9))


@gpu
@pytest.mark.parametrize("name,fn,arr,exact", [
    ("nansum", lambda t: tp.nansum(t, 1), X, False),
    ("nanmean", lambda t: tp.nanmean(t, 0), X, False),
    ("nanmedian", lambda t: tp.nanmedian(t, 1), X, True),
    ("nanmedian_all", lambda t: tp.nanmedian(t), X, True),
    ("aminmax", lambda t: tp.aminmax(t, dim=1), I, True),
    ("logaddexp2", lambda t: tp.logaddexp2(t, t * 0.5), X, False),
    ("renorm", lambda t: tp.renorm(t, 2, 0, 1.0), np.nan_to_num(X), False),
    ("trapezoid", lambda t: tp.trapezoid(t, dx=0.5), X, False),
    ("cummax", lambda t: tp.cummax(t, 1), X, True),
    ("cummin_int", lambda t: tp.cummin(t, 0), I, True),
    ("isin", lambda t: tp.isin(t, t[0]), I, True),
    ("unravel", lambda t: tp.unravel_index(t, (5, 11)), I, True),
    ("block_diag", lambda t: tp.block_diag(t, t[0], t[:2, :3]), X, True),
    ("combinations", lambda t: tp.combinations(t[0], 3), I, True),
    ("bincount", lambda t: tp.bincount(t.reshape(-1), minlength=7), I, True),
    ("bincount_w", lambda t: tp.bincount(t[0], weights=t[1].float()), I, True),
    ("histc", lambda t: tp.histc(t, 10), np.nan_to_num(X), True),
    ("histogram", lambda t: tp.histogram(t.reshape(-1), 5), np.nan_to_num(X), True),
    ("mode", lambda t: tp.mode(t, 1), I, True),
])
def test_cuda_matches_cpu(name, fn, arr, exact):
    _both(fn, arr, exact=exact)


@gpu
def test_cuda_random_ops_draw_the_cpu_numbers():
    p = rng.random((4, 6))
    for fn in (lambda t: tp.bernoulli(t), lambda t: tp.multinomial(t, 3), lambda t: tp.multinomial(t, 9, True)):
        tp.manual_seed(21)
        want = fn(tp.tensor(p))
        tp.manual_seed(21)
        got = fn(tp.tensor(p).cuda())
        _same(got, want)
    with pytest.raises(ValueError, match="bernoulli"):
        tp.bernoulli(tp.tensor([0.5, 1.5]).cuda())


@gpu
def test_cuda_fill_diagonal_and_grads():
    for shape, wrap in (((5, 3), False), ((7, 3), True), ((3, 3, 3), False)):
        a = tp.zeros(*shape)
        b = a.cuda()
        a.fill_diagonal_(2.5, wrap=wrap)
        b.fill_diagonal_(2.5, wrap=wrap)
        _same(b, a)
    x = tp.tensor(rng.standard_normal((4, 5)), requires_grad=True)
    xc = x.detach().cuda().requires_grad_()
    tp.cummax(x, 1)[0].sum().backward()
    tp.cummax(xc, 1)[0].sum().backward()
    _same(xc.grad, x.grad)
