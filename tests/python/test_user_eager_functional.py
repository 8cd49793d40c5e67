"""nn.functional pieces and layers users port from PyTorch, against torch 2.13 in values
and gradients: the ranking / embedding / likelihood losses in every reduction, the shrink
and threshold activations, PReLU, channel dropout, pixel (un)shuffle, pairwise distance,
Conv1d/Conv2d with padding_mode reflect / replicate / circular, and interpolate / Upsample
in every mode and coordinate convention."""

import warnings

import numpy as np
import pytest

import tensorplay as tp

torch = pytest.importorskip("torch")

_rng = np.random.default_rng(3)
X = _rng.standard_normal((6, 5)).astype(np.float32)
Y = _rng.standard_normal((6, 5)).astype(np.float32)
Z = _rng.standard_normal((6, 5)).astype(np.float32)
SIGN = np.where(Y[:, 0] > 0, 1.0, -1.0).astype(np.float32)
LABELS = np.where(_rng.random((6, 5)) > 0.5, 1.0, -1.0).astype(np.float32)
LABELS[0, 0] = 0.0  # hinge_embedding_loss: a label that is neither 1 nor -1 gets both terms
MULTI = (_rng.random((6, 5)) > 0.5).astype(np.float32)
W = (_rng.random(5) + 0.5).astype(np.float32)
X4 = _rng.standard_normal((2, 8, 4, 6)).astype(np.float32)


def _run(mod, fn, args, kw, grad_of):
    tensors = []
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            t = mod.tensor(a)
            if i in grad_of:
                t.requires_grad_(True)
            tensors.append(t)
        else:
            tensors.append(a)
    kw = {k: mod.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = getattr(mod.nn.functional, fn)(*tensors, **kw)
    w = np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape)).astype(np.float32)
    (out * mod.tensor(w)).sum().backward()
    return out.detach().numpy(), [tensors[i].grad.numpy() for i in grad_of]


def _check(fn, args, kw, grad_of, rtol=1e-4, atol=1e-5):
    got, want = _run(tp, fn, args, kw, grad_of), _run(torch, fn, args, kw, grad_of)
    np.testing.assert_allclose(got[0], want[0], rtol=rtol, atol=atol)
    for a, b in zip(got[1], want[1]):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


_LOSSES = [
    ("margin_ranking_loss", (X[:, 0], Y[:, 0], SIGN), dict(margin=0.3), (0, 1)),
    ("hinge_embedding_loss", (X, LABELS), dict(margin=0.7), (0,)),
    ("soft_margin_loss", (X, LABELS), {}, (0,)),
    ("cosine_embedding_loss", (X, Y, SIGN), dict(margin=0.1), (0, 1)),
    ("cosine_embedding_loss", (X, np.zeros_like(Y), SIGN), {}, (0, 1)),  # a zero vector: eps and the kink at 0
    ("triplet_margin_loss", (X, Y, Z), {}, (0, 1, 2)),
    ("triplet_margin_loss", (X, Y, Z), dict(p=1, swap=True, margin=2.0), (0, 1, 2)),
    ("triplet_margin_loss", (X[0], Y[0], Z[0]), dict(p=3), (0, 1, 2)),
    ("poisson_nll_loss", (X, np.abs(Y)), {}, (0,)),
    ("poisson_nll_loss", (np.abs(X) + 0.1, np.abs(Y) * 3), dict(log_input=False, full=True), (0,)),
    ("poisson_nll_loss", (X, np.abs(Y) * 3), dict(full=True), (0, 1)),
    ("gaussian_nll_loss", (X, Y, np.abs(Z) + 0.1), {}, (0, 1, 2)),
    ("gaussian_nll_loss", (X, Y, np.abs(Z[:, :1]) * 1e-8), dict(full=True, eps=1e-3), (0, 1, 2)),  # clamped var
    ("gaussian_nll_loss", (X, Y, np.abs(Z[:, 0]) + 0.5), {}, (0, 1, 2)),  # one variance per sample
    ("multilabel_soft_margin_loss", (X, MULTI), {}, (0, 1)),
    ("multilabel_soft_margin_loss", (X, MULTI), dict(weight=W), (0,)),
    ("multilabel_soft_margin_loss", (X[0], MULTI[0]), {}, (0,)),
]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("case", range(len(_LOSSES)), ids=[f"{c[0]}-{i}" for i, c in enumerate(_LOSSES)])
def test_losses_match_torch(case, reduction):
    fn, args, kw, grad_of = _LOSSES[case]
    _check(fn, args, dict(kw, reduction=reduction), grad_of)


@pytest.mark.parametrize("fn,args,kw,grad_of", [
    ("pairwise_distance", (X, Y), {}, (0, 1)),
    ("pairwise_distance", (X, Y), dict(p=1, keepdim=True), (0, 1)),
    ("pairwise_distance", (X, X), {}, (0, 1)),  # identical rows: eps keeps the gradient finite
    ("threshold", (X,), dict(threshold=0.1, value=-2.0), (0,)),
    ("hardshrink", (X,), {}, (0,)),
    ("softshrink", (X,), dict(lambd=0.3), (0,)),
    ("tanhshrink", (X,), {}, (0,)),
    ("prelu", (X, W), {}, (0, 1)),
    ("prelu", (X, W[:1]), {}, (0, 1)),
    ("prelu", (X4[:, :5], W), {}, (0, 1)),
    ("pixel_shuffle", (X4, 2), {}, (0,)),
    ("pixel_unshuffle", (X4, 2), {}, (0,)),
    ("pixel_shuffle", (X4[0, :, :2, :2].reshape(2, 4, 2, 2).copy(), 2), {}, (0,)),
    ("pixel_unshuffle", (X4.reshape(2, 2, 4, 4, 6), 2), {}, (0,)),
], ids=lambda v: v if isinstance(v, str) else None)
def test_functional_matches_torch(fn, args, kw, grad_of):
    _check(fn, args, kw, grad_of)


@pytest.mark.parametrize("fn,shape", [("dropout2d", (8, 16, 3, 3)), ("dropout2d", (8, 16, 5)),
                                      ("dropout1d", (8, 16, 5)), ("dropout1d", (16, 5))])
def test_channel_dropout_zeroes_whole_channels(fn, shape):
    tp.manual_seed(0)
    x = tp.ones(*shape, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = getattr(tp.nn.functional, fn)(x, 0.5)
    y.sum().backward()
    out = y.detach().numpy()
    channels = out.reshape(-1, shape[-1] if len(shape) == 2 else int(np.prod(shape[2:])))
    assert set(np.unique(channels).tolist()) == {0.0, 2.0}  # kept channels are scaled by 1 / (1 - p)
    assert ((channels == 0).all(1) | (channels == 2).all(1)).all()
    np.testing.assert_array_equal(x.grad.numpy(), out)
    assert getattr(tp.nn.functional, fn)(x, 0.5, training=False) is x
    assert not getattr(tp.nn.functional, fn)(x, 1.0).detach().numpy().any()


def test_new_layers_load_torch_state_and_match():
    cases = [(lambda m: m.nn.PReLU(5, init=0.1), X4[:, :5]), (lambda m: m.nn.Threshold(0.1, 20.0), X),
             (lambda m: m.nn.Hardshrink(0.3), X), (lambda m: m.nn.Softshrink(0.3), X), (lambda m: m.nn.Tanhshrink(), X),
             (lambda m: m.nn.PixelShuffle(2), X4), (lambda m: m.nn.PixelUnshuffle(2), X4)]
    for make, x in cases:
        want_m, got_m = make(torch), make(tp)
        got_m.load_state_dict(want_m.state_dict())
        outs = []
        for mod, m in ((tp, got_m), (torch, want_m)):
            t = mod.tensor(x)
            t.requires_grad_(True)
            y = m(t)
            (y * y).sum().backward()
            outs.append([y.detach().numpy(), t.grad.numpy()] + [p.grad.numpy() for p in m.parameters()])
        for a, b in zip(*outs):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert list(tp.nn.MultiLabelSoftMarginLoss(weight=tp.ones(3)).state_dict()) == ["weight"]


def test_loss_modules_forward_their_options():
    t = np.array([1.0, -1.0, 1.0, 1.0, -1.0, 1.0], np.float32)
    pairs = [
        (lambda m: m.nn.MarginRankingLoss(0.2), lambda m: (m.tensor(X[:, 0]), m.tensor(Y[:, 0]), m.tensor(t))),
        (lambda m: m.nn.TripletMarginLoss(margin=0.5, p=1, swap=True), lambda m: (m.tensor(X), m.tensor(Y), m.tensor(Z))),
        (lambda m: m.nn.GaussianNLLLoss(full=True, eps=1e-2), lambda m: (m.tensor(X), m.tensor(Y), m.tensor(np.abs(Z)))),
        (lambda m: m.nn.PoissonNLLLoss(log_input=False, full=True), lambda m: (m.tensor(np.abs(X)), m.tensor(np.abs(Y) * 3))),
        (lambda m: m.nn.CosineEmbeddingLoss(0.1, reduction="sum"), lambda m: (m.tensor(X), m.tensor(Y), m.tensor(t))),
        (lambda m: m.nn.HingeEmbeddingLoss(0.5, reduction="none"), lambda m: (m.tensor(X), m.tensor(LABELS))),
        (lambda m: m.nn.SoftMarginLoss(reduction="sum"), lambda m: (m.tensor(X), m.tensor(LABELS))),
        (lambda m: m.nn.MultiLabelSoftMarginLoss(weight=m.tensor(W)), lambda m: (m.tensor(X), m.tensor(MULTI))),
    ]
    for make, args in pairs:
        got = make(tp)(*args(tp)).detach().numpy()
        want = make(torch)(*args(torch)).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_bad_input_is_a_clear_error():
    F = tp.nn.functional
    with pytest.raises(ValueError, match=r"prelu: .*2 values .*shape \(2, 3\) has 3 channels"):
        F.prelu(tp.ones(2, 3), tp.ones(2))
    with pytest.raises(ValueError, match="pixel_shuffle.*divisible by 4"):
        F.pixel_shuffle(tp.ones(1, 3, 2, 2), 2)
    with pytest.raises(ValueError, match=r"gaussian_nll_loss: var of shape \(3, 2\)"):
        F.gaussian_nll_loss(tp.ones(2, 3), tp.ones(2, 3), tp.ones(3, 2))
    with pytest.raises(ValueError, match="negative"):
        F.gaussian_nll_loss(tp.ones(2, 3), tp.ones(2, 3), -tp.ones(2, 3))
    with pytest.raises(ValueError, match="margin"):
        F.triplet_margin_loss(tp.ones(2, 3), tp.ones(2, 3), tp.ones(2, 3), margin=0.0)
    with pytest.raises(ValueError, match="dimension"):
        F.margin_ranking_loss(tp.ones(2), tp.ones(2), tp.ones(2, 1))
    with pytest.raises(ValueError, match="dropout1d: Expected 2D or 3D input"):
        F.dropout1d(tp.ones(2, 3, 4, 5))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("make,shape", [
    (lambda m, mode: m.nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode=mode), (2, 2, 5, 6)),
    (lambda m, mode: m.nn.Conv2d(2, 3, (3, 4), padding="same", dilation=(1, 2), padding_mode=mode), (2, 2, 7, 9)),
    (lambda m, mode: m.nn.Conv1d(2, 3, 3, stride=2, padding=2, padding_mode=mode), (2, 2, 7)),
    (lambda m, mode: m.nn.Conv2d(2, 3, 3, padding=1, padding_mode=mode), (2, 5, 5)),  # unbatched
], ids=["2d", "2d-same-dilated", "1d-strided", "2d-unbatched"])
def test_conv_padding_modes_match_torch(make, shape, mode):
    want_m, got_m = make(torch, mode), make(tp, mode)
    got_m.load_state_dict(want_m.state_dict())
    assert repr(got_m) == repr(want_m)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    outs = []
    for mod, m in ((tp, got_m), (torch, want_m)):
        t = mod.tensor(x)
        t.requires_grad_(True)
        y = m(t)
        (y * y).sum().backward()
        outs.append([y.detach().numpy(), t.grad.numpy(), m.weight.grad.numpy(), m.bias.grad.numpy()])
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)


def test_prelu_single_slope_keeps_a_0d_input_0d():
    x = tp.tensor(np.float32(-2.0))
    y = tp.nn.functional.prelu(x, tp.tensor(np.array([0.25], np.float32)))
    assert tuple(y.shape) == () and y.item() == -0.5


# ---------------------------------------------------------------- interpolate / Upsample
_INTERP = []
for _nd, _modes in ((1, ["nearest", "nearest-exact", "linear", "area"]),
                    (2, ["nearest", "nearest-exact", "bilinear", "bicubic", "area"]), (3, ["trilinear"])):
    for _mode in _modes:
        for _ac in ([False, True] if "linear" in _mode or _mode == "bicubic" else [None]):
            for _spec in [dict(size=7), dict(size=3), dict(scale_factor=2), dict(scale_factor=0.5),
                          dict(scale_factor=1.7), dict(size=1), dict(scale_factor=2.5, recompute_scale_factor=True)]:
                _INTERP.append((_nd, _mode, _ac, _spec))


@pytest.mark.parametrize("nd,mode,align_corners,spec", _INTERP,
                         ids=[f"{n}d-{m}-{a}-{'-'.join(f'{k}{v}' for k, v in s.items())}" for n, m, a, s in _INTERP])
def test_interpolate_matches_torch(nd, mode, align_corners, spec):
    rng = np.random.default_rng(0)
    for n_in in (1, 4, 5):
        shape = (2, 3) + (n_in, n_in + 2, n_in + 1)[:nd]
        x = rng.standard_normal(shape).astype(np.float32)
        kw = dict(spec)
        if "size" in kw and nd > 1:
            kw["size"] = tuple(kw["size"] + i for i in range(nd))
        outs = []
        for mod in (tp, torch):
            t = mod.tensor(x)
            t.requires_grad_(True)
            try:
                y = mod.nn.functional.interpolate(t, mode=mode, align_corners=align_corners, **kw)
                w = mod.tensor((np.arange(y.numel(), dtype=np.float32) % 7).reshape(tuple(y.shape)))
                (y * w).sum().backward()
            except (ValueError, RuntimeError):  # an empty output: both refuse (torch in its backward)
                outs.append(None)
                continue
            outs.append((y.detach().numpy(), t.grad.numpy()))
        assert (outs[0] is None) == (outs[1] is None), (shape, kw)
        if outs[0] is not None:
            assert outs[0][0].shape == outs[1][0].shape
            np.testing.assert_allclose(outs[0][0], outs[1][0], rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=1e-5, atol=1e-4)


def test_upsample_modules_match_torch():
    x = np.random.default_rng(5).standard_normal((1, 2, 3, 4)).astype(np.float32)
    outs = []
    for mod in (tp, torch):
        nn = mod.nn
        m = nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                          nn.UpsamplingNearest2d(size=(9, 11)), nn.UpsamplingBilinear2d(scale_factor=0.5))
        t = mod.tensor(x)
        t.requires_grad_(True)
        y = m(t)
        y.sum().backward()
        outs.append((y.detach().numpy(), t.grad.numpy(), repr(m[0])))
    np.testing.assert_allclose(outs[0][0], outs[1][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=1e-5, atol=1e-5)
    assert outs[0][2] == outs[1][2]


def test_interpolate_second_derivative_and_compile():
    x = tp.tensor(np.random.default_rng(1).standard_normal((1, 2, 3, 4)))
    x.requires_grad_(True)
    f = lambda t: tp.nn.functional.interpolate(t, size=(5, 7), mode="bilinear")  # noqa: E731
    assert tp.autograd.gradcheck(f, (x,)) and tp.autograd.gradgradcheck(f, (x,))
    x32 = tp.randn(1, 2, 3, 4)
    np.testing.assert_allclose(tp.compile(f)(x32).numpy(), f(x32).numpy(), rtol=1e-6, atol=1e-6)


def test_interpolate_bad_arguments():
    F = tp.nn.functional
    with pytest.raises(ValueError, match="exactly one of size or scale_factor"):
        F.interpolate(tp.ones(1, 1, 4), size=2, scale_factor=2.0)
    with pytest.raises(ValueError, match="bilinear' expects a 4-D input"):
        F.interpolate(tp.ones(1, 1, 4), size=2, mode="bilinear")
    with pytest.raises(ValueError, match="align_corners"):
        F.interpolate(tp.ones(1, 1, 4), size=2, mode="nearest", align_corners=True)
    with pytest.raises(NotImplementedError, match="lanczos"):
        F.interpolate(tp.ones(1, 1, 4, 4), size=2, mode="lanczos")
    with pytest.raises(ValueError, match="positive"):
        F.interpolate(tp.ones(1, 1, 1), scale_factor=0.5)
