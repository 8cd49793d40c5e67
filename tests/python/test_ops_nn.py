"""Convolution, pooling and losses against NumPy references (and PyTorch when
installed): strides, padding (ints, 'same', 'valid'), dilation, groups,
unbatched inputs, non-contiguous inputs, zero-size batches, gradients vs
finite differences in float64, error messages."""

import numpy as np
import pytest

import tensorplay as tp
from fd_check import check_gradients


def rnd(shape, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def arr(t):
    return np.array(t.contiguous().numpy())


def gradcheck(fn, *arrays, eps=1e-6, rtol=1e-5, atol=1e-7):
    return check_gradients(fn, *arrays, eps=eps, rtol=rtol, atol=atol)


# ---------------------------------------------------------------- NumPy references


def conv2d_ref(x, w, b=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, ho, wo))
    og = o // groups
    for g in range(groups):
        xg = xp[:, g * cg:(g + 1) * cg]
        wg = w[g * og:(g + 1) * og]
        for i in range(kh):
            for j in range(kw):
                patch = xg[:, :, i * dh:i * dh + sh * (ho - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, wg[:, :, i, j])
    if b is not None:
        out += b[None, :, None, None]
    return out


def pool_out(size, k, s, p, d, ceil):
    span = size + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= size + p:
        out -= 1
    return out


def max_pool_ref(x, k, s, p=(0, 0), d=(1, 1), ceil=False):
    h, w = x.shape[-2:]
    ho, wo = pool_out(h, k[0], s[0], p[0], d[0], ceil), pool_out(w, k[1], s[1], p[1], d[1], ceil)
    big = (p[0], p[0] + s[0] * ho + d[0] * k[0]), (p[1], p[1] + s[1] * wo + d[1] * k[1])
    xp = np.pad(x, [(0, 0)] * (x.ndim - 2) + list(big), constant_values=-np.inf)
    out = np.full(x.shape[:-2] + (ho, wo), -np.inf)
    for i in range(k[0]):
        for j in range(k[1]):
            patch = xp[..., i * d[0]:i * d[0] + s[0] * ho:s[0], j * d[1]:j * d[1] + s[1] * wo:s[1]]
            out = np.maximum(out, patch[..., :ho, :wo])
    return out


def adaptive_ref(x, oh, ow):
    h, w = x.shape[-2:]
    out = np.zeros(x.shape[:-2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, h1 = i * h // oh, -(-(i + 1) * h // oh)
            w0, w1 = j * w // ow, -(-(j + 1) * w // ow)
            out[..., i, j] = x[..., h0:h1, w0:w1].mean(axis=(-2, -1))
    return out


def log_softmax_ref(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


# ---------------------------------------------------------------- conv2d


CONV_CASES = [
    dict(),
    dict(stride=(2, 1)),
    dict(padding=(1, 2)),
    dict(dilation=(2, 1), padding=(2, 1)),
    dict(stride=(2, 2), padding=(1, 1), dilation=(1, 2)),
    dict(groups=2),
    dict(groups=4, stride=(1, 2), padding=(1, 0)),
]


@pytest.mark.parametrize("kw", CONV_CASES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv2d(kw, bias, dtype):
    groups = kw.get("groups", 1)
    x, w, b = rnd((2, 4, 7, 6), 1, dtype), rnd((4, 4 // groups, 3, 2), 2, dtype), rnd((4,), 3, dtype)
    want = conv2d_ref(x.astype(np.float64), w.astype(np.float64), b if bias else None, **kw)
    got = tp.conv2d(tp.tensor(x), tp.tensor(w), tp.tensor(b) if bias else None, **kw)
    assert got.dtype == tp.tensor(x).dtype
    tol = 1e-4 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(arr(got), want, rtol=tol, atol=tol)


def test_conv2d_one_by_one_unbatched_noncontiguous_and_int_args():
    x, w, b = rnd((2, 3, 5, 4), 1), rnd((6, 3, 1, 1), 2), rnd((6,), 3)
    np.testing.assert_allclose(arr(tp.conv2d(tp.tensor(x), tp.tensor(w), tp.tensor(b))), conv2d_ref(x, w, b),
                               rtol=1e-12, atol=1e-12)
    w3 = rnd((2, 3, 3, 3), 4)
    # unbatched (C, H, W) input gives a (O, Ho, Wo) result
    got = tp.conv2d(tp.tensor(x[0]), tp.tensor(w3), padding=1)
    assert tuple(got.shape) == (2, 5, 4)
    np.testing.assert_allclose(arr(got), conv2d_ref(x[:1], w3, padding=(1, 1))[0], rtol=1e-12, atol=1e-12)
    # a permuted (non-contiguous) input and weight
    xt = tp.tensor(np.ascontiguousarray(x.transpose(0, 1, 3, 2))).transpose(2, 3)
    wt = tp.tensor(np.ascontiguousarray(w3.transpose(1, 0, 2, 3))).transpose(0, 1)
    np.testing.assert_allclose(arr(tp.conv2d(xt, wt, stride=2)), conv2d_ref(x, w3, stride=(2, 2)), rtol=1e-12,
                               atol=1e-12)


def test_conv2d_zero_batch_and_errors():
    out = tp.conv2d(tp.ones(0, 3, 5, 5), tp.ones(2, 3, 3, 3))
    assert tuple(out.shape) == (0, 2, 3, 3)
    with pytest.raises(ValueError, match=r"conv2d.*\[1, 3, 5, 5\].*channels.*\[2, 4, 3, 3\]"):
        tp.conv2d(tp.ones(1, 3, 5, 5), tp.ones(2, 4, 3, 3))
    with pytest.raises(ValueError, match=r"conv2d.*kernel size.*larger"):
        tp.conv2d(tp.ones(1, 3, 2, 2), tp.ones(2, 3, 3, 3))
    with pytest.raises(ValueError, match=r"conv2d.*3D.*4D.*\[3, 5\]"):
        tp.conv2d(tp.ones(3, 5), tp.ones(2, 3, 3, 3))
    with pytest.raises(ValueError, match=r"conv2d.*groups"):
        tp.conv2d(tp.ones(1, 4, 5, 5), tp.ones(3, 2, 3, 3), groups=2)
    with pytest.raises(ValueError, match=r"conv2d.*bias.*\[2\]"):
        tp.conv2d(tp.ones(1, 3, 5, 5), tp.ones(2, 3, 3, 3), tp.ones(3))
    # Integer convolution is allowed (as in PyTorch on the CPU: test_torch_arguments.py); bool and mixed dtypes are not.
    with pytest.raises(TypeError, match=r"conv2d.*bool"):
        tp.conv2d(tp.ones(1, 3, 5, 5, dtype=tp.bool), tp.ones(2, 3, 3, 3, dtype=tp.bool))
    with pytest.raises(TypeError, match=r"conv2d.*same dtype.*int64 and float32"):
        tp.conv2d(tp.ones(1, 3, 5, 5, dtype=tp.int64), tp.ones(2, 3, 3, 3))


@pytest.mark.parametrize("k,d", [((3, 3), (1, 1)), ((2, 4), (1, 1)), ((3, 2), (2, 3))])
def test_conv2d_padding_same_valid(k, d):
    x, w = rnd((1, 2, 6, 7), 1), rnd((3, 2) + k, 2)
    same = tp.conv2d(tp.tensor(x), tp.tensor(w), padding="same", dilation=d)
    assert tuple(same.shape) == (1, 3, 6, 7)
    # 'same': total padding d*(k-1), the odd element on the right/bottom
    tot = [d[i] * (k[i] - 1) for i in range(2)]
    xp = np.pad(x, ((0, 0), (0, 0), (tot[0] // 2, tot[0] - tot[0] // 2), (tot[1] // 2, tot[1] - tot[1] // 2)))
    np.testing.assert_allclose(arr(same), conv2d_ref(xp, w, dilation=d), rtol=1e-12, atol=1e-12)
    valid = tp.conv2d(tp.tensor(x), tp.tensor(w), padding="valid", dilation=d)
    np.testing.assert_allclose(arr(valid), conv2d_ref(x, w, dilation=d), rtol=1e-12, atol=1e-12)
    gradcheck(lambda x, w: tp.conv2d(x, w, padding="same", dilation=d), x[:, :, :4, :4], w)
    with pytest.raises(ValueError, match="conv2d.*'same'.*strided"):
        tp.conv2d(tp.tensor(x), tp.tensor(w), padding="same", stride=2)
    with pytest.raises(ValueError, match="conv2d.*'full'"):
        tp.conv2d(tp.tensor(x), tp.tensor(w), padding="full")


@pytest.mark.parametrize("kw", [CONV_CASES[i] for i in (0, 2, 4, 6)])
def test_conv2d_grad(kw):
    groups = kw.get("groups", 1)
    x, w, b = rnd((2, 4, 5, 4), 1), rnd((4, 4 // groups, 3, 2), 2), rnd((4,), 3)
    gradcheck(lambda x, w, b: tp.conv2d(x, w, b, **kw), x, w, b)


def test_conv2d_grad_unbatched_and_one_by_one():
    gradcheck(lambda x, w: tp.conv2d(x, w, padding=1), rnd((2, 4, 3), 1), rnd((3, 2, 3, 3), 2))
    gradcheck(lambda x, w, b: tp.conv2d(x, w, b), rnd((2, 3, 3, 2), 1), rnd((2, 3, 1, 1), 2), rnd((2,), 3))


# ---------------------------------------------------------------- conv1d


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(dilation=2, groups=2), dict(padding="same")])
def test_conv1d(kw):
    groups = kw.get("groups", 1)
    x, w, b = rnd((2, 4, 9), 1), rnd((6, 4 // groups, 3), 2), rnd((6,), 3)
    kw2 = {k: ((v, v) if isinstance(v, int) and k != "groups" else v) for k, v in kw.items()}
    kw2 = {k: ((0, v[1]) if k == "padding" and not isinstance(v, str) else v) for k, v in kw2.items()}
    kw2 = {k: ((1, v[1]) if k in ("stride", "dilation") else v) for k, v in kw2.items()}
    if kw.get("padding") == "same":
        kw2["padding"] = (0, 1)
    want = conv2d_ref(x[:, :, None, :], w[:, :, None, :], b, **kw2)[:, :, 0, :]
    got = tp.conv1d(tp.tensor(x), tp.tensor(w), tp.tensor(b), **kw)
    np.testing.assert_allclose(arr(got), want, rtol=1e-12, atol=1e-12)
    unb = tp.conv1d(tp.tensor(x[0]), tp.tensor(w), tp.tensor(b), **kw)
    np.testing.assert_allclose(arr(unb), want[0], rtol=1e-12, atol=1e-12)
    gradcheck(lambda x, w, b: tp.conv1d(x, w, b, **kw), x[:1, :, :6], w, b)


# ---------------------------------------------------------------- pooling


POOL_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=(3, 2), stride=(2, 1)),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=(2, 3), stride=2, padding=(1, 1), ceil_mode=True),
]


def pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


@pytest.mark.parametrize("kw", POOL_CASES + [dict(kernel_size=2, dilation=2), dict(kernel_size=3, padding=1, dilation=(1, 2))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool2d(kw, dtype):
    x = rnd((2, 3, 7, 8), 1, dtype)
    k = pair(kw["kernel_size"])
    want = max_pool_ref(x, k, pair(kw.get("stride", k)), pair(kw.get("padding", 0)), pair(kw.get("dilation", 1)),
                        kw.get("ceil_mode", False))
    got = tp.max_pool2d(tp.tensor(x), **kw)
    assert got.dtype == tp.tensor(x).dtype
    np.testing.assert_array_equal(arr(got), want.astype(dtype))
    np.testing.assert_array_equal(arr(tp.max_pool2d(tp.tensor(x[0]), **kw)), want[0].astype(dtype))  # unbatched


def test_max_pool2d_indices_nan_noncontiguous_grad():
    x = rnd((1, 1, 4, 4), 1)
    vals, idx = tp.max_pool2d_with_indices(tp.tensor(x), 2)
    flat = x.reshape(4, 4)
    for i in range(2):
        for j in range(2):
            block = flat[2 * i:2 * i + 2, 2 * j:2 * j + 2]
            a, b = np.unravel_index(np.argmax(block), (2, 2))
            assert int(arr(idx)[0, 0, i, j]) == (2 * i + a) * 4 + 2 * j + b
    xn = x.copy()
    xn[0, 0, 0, 1] = np.nan
    assert np.isnan(arr(tp.max_pool2d(tp.tensor(xn), 2))[0, 0, 0, 0])
    xt = rnd((2, 3, 6, 5), 2)
    np.testing.assert_array_equal(arr(tp.max_pool2d(tp.tensor(xt).transpose(2, 3), 2)),
                                  max_pool_ref(xt.transpose(0, 1, 3, 2), (2, 2), (2, 2)))
    # distinct values: no ties, so the derivative is well defined
    xg = np.random.default_rng(3).permutation(2 * 6 * 5).reshape(1, 2, 6, 5) / 7.0
    gradcheck(lambda x: tp.max_pool2d(x, 3, stride=2, padding=1), xg)
    gradcheck(lambda x: tp.max_pool2d(x, 2, ceil_mode=True), xg)


def test_avg_pool2d_simple_and_errors():
    x = rnd((2, 3, 6, 4), 1)
    want = x.reshape(2, 3, 3, 2, 2, 2).mean(axis=(3, 5))
    np.testing.assert_allclose(arr(tp.avg_pool2d(tp.tensor(x), 2)), want, rtol=1e-12)
    np.testing.assert_allclose(arr(tp.avg_pool2d(tp.tensor(x[0]), 2)), want[0], rtol=1e-12)
    # padding counts as zeros by default; count_include_pad=False divides by the real elements
    one = np.ones((1, 1, 2, 2))
    np.testing.assert_allclose(arr(tp.avg_pool2d(tp.tensor(one), 2, stride=1, padding=1)),
                               [[[[0.25, 0.5, 0.25], [0.5, 1.0, 0.5], [0.25, 0.5, 0.25]]]])
    np.testing.assert_allclose(arr(tp.avg_pool2d(tp.tensor(one), 2, stride=1, padding=1, count_include_pad=False)),
                               np.ones((1, 1, 3, 3)))
    with pytest.raises(ValueError, match="avg_pool2d.*pad.*half"):
        tp.avg_pool2d(tp.tensor(x), 2, padding=2)
    with pytest.raises(ValueError, match=r"max_pool2d.*3D.*4D.*\[6, 4\]"):
        tp.max_pool2d(tp.ones(6, 4), 2)
    # Integer max pooling is allowed as in PyTorch (test_torch_arguments.py); bool is not.
    with pytest.raises(TypeError, match="max_pool2d.*bool"):
        tp.max_pool2d(tp.ones(1, 1, 4, 4, dtype=tp.bool), 2)
    # A window that does not fit is an error (it used to give a 1x1 output).
    with pytest.raises(ValueError, match=r"max_pool2d.*too small"):
        tp.max_pool2d(tp.ones(1, 2, 1, 1), 3)
    with pytest.raises(ValueError, match=r"avg_pool2d.*too small"):
        tp.avg_pool2d(tp.ones(1, 2, 1, 1), 3)


@pytest.mark.parametrize("kw", POOL_CASES)
@pytest.mark.parametrize("include_pad", [True, False])
def test_avg_pool2d_grad(kw, include_pad):
    gradcheck(lambda x: tp.avg_pool2d(x, count_include_pad=include_pad, **kw), rnd((1, 2, 5, 6), 1))


@pytest.mark.parametrize("out", [(1, 1), (3, 2), (7, 5), (4, 4), 2])
def test_adaptive_avg_pool2d(out):
    x = rnd((2, 3, 7, 5), 1)
    o = pair(out)
    np.testing.assert_allclose(arr(tp.adaptive_avg_pool2d(tp.tensor(x), out)), adaptive_ref(x, *o), rtol=1e-12)
    np.testing.assert_allclose(arr(tp.adaptive_avg_pool2d(tp.tensor(x[0]), out)), adaptive_ref(x[0], *o), rtol=1e-12)
    gradcheck(lambda x: tp.adaptive_avg_pool2d(x, out), x[:1, :2])


@pytest.mark.parametrize("kw", POOL_CASES)
def test_pools_against_torch(kw):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x = rnd((2, 3, 7, 8), 5)
    tx = torch.tensor(x)
    np.testing.assert_array_equal(arr(tp.max_pool2d(tp.tensor(x), **kw)), F.max_pool2d(tx, **kw).numpy())
    for inc in (True, False):
        np.testing.assert_allclose(arr(tp.avg_pool2d(tp.tensor(x), count_include_pad=inc, **kw)),
                                   F.avg_pool2d(tx, count_include_pad=inc, **kw).numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(arr(tp.adaptive_avg_pool2d(tp.tensor(x), (3, 5))),
                               F.adaptive_avg_pool2d(tx, (3, 5)).numpy(), rtol=1e-12)


# ---------------------------------------------------------------- losses


def reduce_ref(x, reduction):
    return {"none": x, "mean": np.mean(x), "sum": np.sum(x)}[reduction]


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_mse_loss(reduction):
    a, b = rnd((3, 4), 1), rnd((3, 4), 2)
    np.testing.assert_allclose(arr(tp.mse_loss(tp.tensor(a), tp.tensor(b), reduction=reduction)),
                               reduce_ref((a - b) ** 2, reduction), rtol=1e-12)
    gradcheck(lambda a, b: tp.mse_loss(a, b, reduction=reduction), a, b)
    with pytest.raises(ValueError, match="mse_loss.*reduction.*'avg'"):
        tp.mse_loss(tp.tensor(a), tp.tensor(b), reduction="avg")


def nll_ref(logp, t, w=None, reduction="mean", ignore=-100):
    c = logp.shape[1] if logp.ndim >= 2 else logp.shape[0]
    w = np.ones(c) if w is None else w
    if logp.ndim == 1:
        logp, t = logp[None], np.array([t])
    lp = np.moveaxis(logp, 1, -1).reshape(-1, c)
    tf = t.reshape(-1)
    keep = tf != ignore
    ts = np.where(keep, tf, 0)
    loss = -lp[np.arange(len(tf)), ts] * w[ts] * keep
    wsum = (w[ts] * keep).sum()
    if reduction == "none":
        return loss.reshape(t.shape) if logp.shape[0] == t.shape[0] else loss
    return loss.sum() if reduction == "sum" else loss.sum() / wsum


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_and_cross_entropy_class_indices(reduction, weighted):
    x = rnd((5, 4), 1)
    t = np.array([0, 3, 1, 1, 2])
    w = np.array([0.5, 1.0, 2.0, 0.25]) if weighted else None
    tw = tp.tensor(w) if weighted else None
    lp = log_softmax_ref(x, 1)
    np.testing.assert_allclose(arr(tp.nll_loss(tp.tensor(lp), tp.tensor(t), tw, reduction=reduction)),
                               nll_ref(lp, t, w, reduction), rtol=1e-12)
    np.testing.assert_allclose(arr(tp.cross_entropy(tp.tensor(x), tp.tensor(t), tw, reduction=reduction)),
                               nll_ref(lp, t, w, reduction), rtol=1e-12)
    # (no derivative for the class weights, as in PyTorch)
    gradcheck(lambda x: tp.cross_entropy(x, tp.tensor(t), tw, reduction=reduction), x)
    gradcheck(lambda lp: tp.nll_loss(lp, tp.tensor(t), tw, reduction=reduction), lp)


def test_cross_entropy_ignore_index_kdim_unbatched():
    x = rnd((2, 3, 4, 2), 1)  # (N, C, d1, d2)
    t = np.array([[[0, 1], [2, -100], [1, 1], [0, 2]], [[2, 2], [-100, 0], [1, 0], [1, 1]]])
    lp = log_softmax_ref(x, 1)
    for red in ("none", "mean", "sum"):
        np.testing.assert_allclose(arr(tp.cross_entropy(tp.tensor(x), tp.tensor(t), reduction=red)),
                                   nll_ref(lp, t, None, red), rtol=1e-12)
    gradcheck(lambda x: tp.cross_entropy(x, tp.tensor(t)), x)
    # ignore_index chosen by the caller
    t2 = np.array([1, 2, 0])
    x2 = rnd((3, 3), 2)
    np.testing.assert_allclose(arr(tp.cross_entropy(tp.tensor(x2), tp.tensor(t2), ignore_index=2)),
                               nll_ref(log_softmax_ref(x2, 1), t2, None, "mean", ignore=2), rtol=1e-12)
    # unbatched: (C,) input, () target
    x1 = rnd((4,), 3)
    np.testing.assert_allclose(arr(tp.cross_entropy(tp.tensor(x1), tp.tensor(np.array(2)))),
                               -log_softmax_ref(x1, 0)[2], rtol=1e-12)
    # large logits stay finite
    big = np.array([[1000.0, -1000.0, 0.0]])
    np.testing.assert_allclose(arr(tp.cross_entropy(tp.tensor(big), tp.tensor(np.array([1])))), 2000.0)


def test_cross_entropy_probabilities_and_label_smoothing():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x = rnd((5, 4), 1)
    p = np.abs(rnd((5, 4), 2))
    p /= p.sum(1, keepdims=True)
    w = np.array([0.5, 1.0, 2.0, 0.25])
    t = np.array([0, 3, -100, 1, 2])
    for red in ("none", "mean", "sum"):
        for ls in (0.0, 0.2):
            for weight in (None, w):
                tw, torchw = (None, None) if weight is None else (tp.tensor(weight), torch.tensor(weight))
                np.testing.assert_allclose(
                    arr(tp.cross_entropy(tp.tensor(x), tp.tensor(p), tw, reduction=red, label_smoothing=ls)),
                    F.cross_entropy(torch.tensor(x), torch.tensor(p), torchw, reduction=red, label_smoothing=ls).numpy(),
                    rtol=1e-10, atol=1e-12)
                np.testing.assert_allclose(
                    arr(tp.cross_entropy(tp.tensor(x), tp.tensor(t), tw, reduction=red, label_smoothing=ls)),
                    F.cross_entropy(torch.tensor(x), torch.tensor(t), torchw, reduction=red, label_smoothing=ls).numpy(),
                    rtol=1e-10, atol=1e-12)
    gradcheck(lambda x, p: tp.cross_entropy(x, p, label_smoothing=0.1), x, p)
    gradcheck(lambda x: tp.cross_entropy(x, tp.tensor(t), tp.tensor(w), label_smoothing=0.3), x)


def test_probabilities_without_torch():
    x = rnd((3, 4), 1)
    p = np.abs(rnd((3, 4), 2))
    p /= p.sum(1, keepdims=True)
    want = -(p * log_softmax_ref(x, 1)).sum(1)
    np.testing.assert_allclose(arr(tp.cross_entropy(tp.tensor(x), tp.tensor(p), reduction="none")), want, rtol=1e-12)
    np.testing.assert_allclose(arr(tp.cross_entropy(tp.tensor(x), tp.tensor(p))), want.mean(), rtol=1e-12)


def test_nll_errors():
    with pytest.raises(IndexError, match="nll_loss.*target 4.*4 classes"):
        tp.nll_loss(tp.zeros(2, 4), tp.tensor(np.array([0, 4])))
    with pytest.raises(ValueError, match=r"nll_loss.*target.*\[3, 4\].*got \[2\]"):
        tp.nll_loss(tp.zeros(3, 4), tp.tensor(np.array([0, 1])))
    with pytest.raises(TypeError, match="nll_loss.*integer.*float32"):
        tp.nll_loss(tp.zeros(2, 4), tp.zeros(2))
    with pytest.raises(ValueError, match=r"cross_entropy.*weight.*\[4\]"):
        tp.cross_entropy(tp.zeros(2, 4), tp.tensor(np.array([0, 1])), tp.ones(3))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_binary_cross_entropy(reduction):
    x = 1 / (1 + np.exp(-rnd((3, 4), 1)))
    t = np.random.default_rng(2).uniform(size=(3, 4))
    w = np.abs(rnd((4,), 3))
    want = -(t * np.log(x) + (1 - t) * np.log(1 - x)) * w
    np.testing.assert_allclose(arr(tp.binary_cross_entropy(tp.tensor(x), tp.tensor(t), tp.tensor(w), reduction=reduction)),
                               reduce_ref(want, reduction), rtol=1e-12)
    gradcheck(lambda x, t: tp.binary_cross_entropy(x, t, reduction=reduction), x, t)
    # log is clamped at -100: x = 0 or 1 gives a finite loss
    edge = arr(tp.binary_cross_entropy(tp.tensor(np.array([0.0, 1.0])), tp.tensor(np.array([1.0, 0.0])), reduction="none"))
    np.testing.assert_allclose(edge, [100.0, 100.0])


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_binary_cross_entropy_with_logits(reduction):
    x, t = rnd((3, 4), 1) * 3, np.random.default_rng(2).uniform(size=(3, 4))
    w, pw = np.abs(rnd((4,), 3)), np.abs(rnd((4,), 4)) + 0.5
    sig = 1 / (1 + np.exp(-x))
    want = -(pw * t * np.log(sig) + (1 - t) * np.log(1 - sig)) * w
    got = tp.binary_cross_entropy_with_logits(tp.tensor(x), tp.tensor(t), tp.tensor(w), pos_weight=tp.tensor(pw),
                                              reduction=reduction)
    np.testing.assert_allclose(arr(got), reduce_ref(want, reduction), rtol=1e-10)
    gradcheck(lambda x, t: tp.binary_cross_entropy_with_logits(x, t, reduction=reduction), x, t)
    gradcheck(lambda x, w, pw: tp.binary_cross_entropy_with_logits(x, tp.tensor(t), w, pos_weight=pw,
                                                                   reduction=reduction), x, w, pw)
    # extreme logits: no overflow, exact limits
    big = np.array([1000.0, -1000.0, 800.0])
    tt = np.array([0.0, 1.0, 1.0])
    np.testing.assert_allclose(arr(tp.binary_cross_entropy_with_logits(tp.tensor(big), tp.tensor(tt), reduction="none")),
                               [1000.0, 1000.0, 0.0])


def test_losses_against_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x, t = rnd((4, 3), 1), np.random.default_rng(2).uniform(size=(4, 3))
    pw = np.array([0.5, 2.0, 1.0])
    np.testing.assert_allclose(
        arr(tp.binary_cross_entropy_with_logits(tp.tensor(x), tp.tensor(t), pos_weight=tp.tensor(pw))),
        F.binary_cross_entropy_with_logits(torch.tensor(x), torch.tensor(t), pos_weight=torch.tensor(pw)).numpy(),
        rtol=1e-12)
    s = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(arr(tp.binary_cross_entropy(tp.tensor(s), tp.tensor(t))),
                               F.binary_cross_entropy(torch.tensor(s), torch.tensor(t)).numpy(), rtol=1e-12)
    np.testing.assert_allclose(arr(tp.mse_loss(tp.tensor(x), tp.tensor(t))),
                               F.mse_loss(torch.tensor(x), torch.tensor(t)).numpy(), rtol=1e-12)
    xi, wi = rnd((2, 4, 6, 5), 3), rnd((6, 2, 3, 3), 4)
    np.testing.assert_allclose(arr(tp.conv2d(tp.tensor(xi), tp.tensor(wi), stride=2, padding=1, groups=2)),
                               F.conv2d(torch.tensor(xi), torch.tensor(wi), stride=2, padding=1, groups=2).numpy(),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=2, dilation=2, ceil_mode=True)])
def test_max_pool2d_indices_of_ties_nans_and_infs_match_torch(kw):
    # The window scan's one condition: ties keep the first position
    # (relu outputs: many zeros), the first NaN wins and stays, -inf is a value.
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    x = np.maximum(rng.standard_normal((2, 3, 9, 10)), 0).astype(np.float32)
    x[0, 0, 0, :4] = [1.0, np.nan, 5.0, 7.0]
    x[0, 1, 2:4, 2:4] = -np.inf
    x[1, 2, :, :] = 0.0
    x[1, 0, 4, 5] = np.nan
    vals, idx = tp.max_pool2d_with_indices(tp.tensor(x), **kw)
    tv, ti = torch.nn.functional.max_pool2d(torch.tensor(x), return_indices=True, **kw)
    np.testing.assert_array_equal(arr(vals), tv.numpy())
    np.testing.assert_array_equal(arr(idx), ti.numpy())
    # Two NaNs in one window: the first one's position (TensorPlay's rule since
    # the scan stopped at a NaN; PyTorch's CPU kernel reports the last).
    y = np.zeros((1, 1, 2, 2), np.float32)
    y[0, 0, 0, 1] = y[0, 0, 1, 1] = np.nan
    v, i = tp.max_pool2d_with_indices(tp.tensor(y), 2)
    assert np.isnan(arr(v)[0, 0, 0, 0]) and int(arr(i)[0, 0, 0, 0]) == 1


@pytest.mark.parametrize("kw", [dict(stride=3, padding=4, dilation=2), dict(stride=(1, 2), padding=(0, 5)),
                                dict(stride=2, padding=1), dict(padding=(2, 3), dilation=(1, 3))])
def test_conv2d_rows_mostly_padding_match_torch(kw):
    # im2col copies the in-row columns [lo, hi) and zero-fills the rest: windows
    # entirely in the padding (hi <= lo), partly, and strided reads.
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4, 3)).astype(np.float32)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    xt, wt = tp.tensor(x, requires_grad=True), tp.tensor(w, requires_grad=True)
    got = tp.conv2d(xt, wt, **kw)
    xr, wr = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    want = torch.nn.functional.conv2d(xr, wr, **kw)
    np.testing.assert_allclose(arr(got.detach()), want.detach().numpy(), rtol=1e-5, atol=1e-5)
    g = rng.standard_normal(tuple(want.shape)).astype(np.float32)
    got.backward(tp.tensor(g))
    want.backward(torch.tensor(g))
    np.testing.assert_allclose(arr(xt.grad), xr.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(arr(wt.grad), wr.grad.numpy(), rtol=1e-4, atol=1e-5)
