"""The nn layers / functional forms and top-level / Tensor names added in session 33, against
PyTorch: values, gradients, tp.compile equal to eager, and errors naming the function."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tensorplay as tp
import tensorplay.nn.functional as F

rng = np.random.default_rng(0)


def _close(a, b, tol=1e-6):
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol, equal_nan=True)


X3 = rng.standard_normal((2, 3, 6))
X4 = rng.standard_normal((2, 6, 5, 7))
X5 = rng.standard_normal((1, 2, 4, 5, 6))


# -------------------------------------------------------------- padding layers
@pytest.mark.parametrize("kind", ["Zero", "Constant", "Reflection", "Replication", "Circular"])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_padding_layers_match_torch(kind, nd):
    x = {1: X3, 2: X4, 3: X5}[nd]
    pad = (1, 2, 2, 1, 1, 0)[:2 * nd]
    args = (pad, 1.5) if kind == "Constant" else (pad,)
    a = getattr(tp.nn, f"{kind}Pad{nd}d")(*args)(tp.tensor(x))
    b = getattr(torch.nn, f"{kind}Pad{nd}d")(*args)(torch.tensor(x))
    _close(a, b, 0)
    # an int padding pads every side
    a = getattr(tp.nn, f"{kind}Pad{nd}d")(*((1, 0.5) if kind == "Constant" else (1,)))(tp.tensor(x))
    b = getattr(torch.nn, f"{kind}Pad{nd}d")(*((1, 0.5) if kind == "Constant" else (1,)))(torch.tensor(x))
    _close(a, b, 0)


def test_padding_gradient_and_errors():
    x = tp.tensor(X4, requires_grad=True)
    tx = torch.tensor(X4, requires_grad=True)
    tp.nn.ReflectionPad2d((1, 2, 0, 1))(x).pow(2).sum().backward()
    torch.nn.ReflectionPad2d((1, 2, 0, 1))(tx).pow(2).sum().backward()
    _close(x.grad, tx.grad, 1e-12)
    with pytest.raises(ValueError, match="ZeroPad2d"):
        tp.nn.ZeroPad2d((1, 2, 3))
    with pytest.raises(ValueError, match="ReflectionPad1d"):
        tp.nn.ReflectionPad1d(1)(tp.zeros(1, 2, 3, 4, 5))


# --------------------------------------------------------------- pooling
def test_adaptive_and_lp_pools_match_torch():
    _close(tp.nn.AdaptiveAvgPool1d(4)(tp.tensor(X3)), torch.nn.AdaptiveAvgPool1d(4)(torch.tensor(X3)))
    _close(F.adaptive_avg_pool1d(tp.tensor(X3[0]), (5,)), TF.adaptive_avg_pool1d(torch.tensor(X3[0]), (5,)))
    _close(tp.nn.AdaptiveMaxPool1d(4)(tp.tensor(X3)), torch.nn.AdaptiveMaxPool1d(4)(torch.tensor(X3)))
    a, ai = tp.nn.AdaptiveMaxPool2d((2, 3), return_indices=True)(tp.tensor(X4))
    b, bi = torch.nn.AdaptiveMaxPool2d((2, 3), return_indices=True)(torch.tensor(X4))
    _close(a, b, 0)
    assert np.array_equal(ai.numpy(), bi.numpy())
    for p in (1, 2, 3):
        _close(tp.nn.LPPool1d(p, 3, 2)(tp.tensor(X3)), torch.nn.LPPool1d(p, 3, 2)(torch.tensor(X3)), 1e-10)
        _close(tp.nn.LPPool2d(p, (2, 3))(tp.tensor(X4)), torch.nn.LPPool2d(p, (2, 3))(torch.tensor(X4)), 1e-10)
    x = tp.tensor(np.abs(X4) + 0.1, requires_grad=True)
    tx = torch.tensor(np.abs(X4) + 0.1, requires_grad=True)
    F.lp_pool2d(x, 2.0, 2).sum().backward()
    TF.lp_pool2d(tx, 2.0, 2).sum().backward()
    _close(x.grad, tx.grad, 1e-10)


def test_with_indices_forms():
    for tp_f, t_f, x, arg in ((F.max_pool1d_with_indices, TF.max_pool1d_with_indices, X3, 2),
                              (F.max_pool2d_with_indices, TF.max_pool2d_with_indices, X4, 2),
                              (F.adaptive_max_pool1d_with_indices, TF.adaptive_max_pool1d_with_indices, X3, 4),
                              (F.adaptive_max_pool2d_with_indices, TF.adaptive_max_pool2d_with_indices, X4, 3)):
        a, ai = tp_f(tp.tensor(x), arg)
        b, bi = t_f(torch.tensor(x), arg)
        _close(a, b, 0)
        assert np.array_equal(ai.numpy(), bi.numpy())


# --------------------------------------------------------- activations, dropout
def test_inplace_activation_spellings():
    cases = [("relu_", ()), ("elu_", (0.7,)), ("leaky_relu_", (0.2,)), ("hardtanh_", (-0.5, 0.5)),
             ("threshold_", (0.1, 20.0)), ("selu_", ()), ("celu_", (1.3,)), ("rrelu_", (0.1, 0.3, False))]
    for name, args in cases:
        x = tp.tensor(X4.copy())
        r = getattr(F, name)(x, *args)
        tx = torch.tensor(X4.copy())
        getattr(TF, name)(tx, *args)
        assert r is x, name
        _close(x, tx, 1e-12)


def test_softmax2d_channel_shuffle_rrelu():
    _close(tp.nn.Softmax2d()(tp.tensor(X4)), torch.nn.Softmax2d()(torch.tensor(X4)), 1e-12)
    _close(tp.nn.ChannelShuffle(3)(tp.tensor(X4)), torch.nn.ChannelShuffle(3)(torch.tensor(X4)), 0)
    _close(F.channel_shuffle(tp.tensor(X5), 2), TF.channel_shuffle(torch.tensor(X5), 2), 0)
    m, tm = tp.nn.RReLU(0.1, 0.3).eval(), torch.nn.RReLU(0.1, 0.3).eval()
    _close(m(tp.tensor(X4)), tm(torch.tensor(X4)), 1e-12)
    with pytest.raises(ValueError, match="channel_shuffle"):
        F.channel_shuffle(tp.tensor(X4), 4)
    with pytest.raises(ValueError, match="Softmax2d"):
        tp.nn.Softmax2d()(tp.zeros(3, 4))


def test_alpha_dropouts_keep_moments_and_compile():
    tp.manual_seed(0)
    y = tp.nn.AlphaDropout(0.3).train()(tp.randn(200_000))
    assert abs(float(y.mean())) < 0.02 and abs(float(y.std()) - 1) < 0.02
    y = tp.nn.FeatureAlphaDropout(0.3).train()(tp.randn(4000, 50, 3))
    assert abs(float(y.mean())) < 0.02 and abs(float(y.std()) - 1) < 0.03
    v = y.numpy()
    assert np.all(np.ptp(v, axis=2)[np.all(np.isclose(v, v[:, :, :1]), axis=2)] == 0)  # whole channels drop
    for m in (tp.nn.AlphaDropout(0.2), tp.nn.FeatureAlphaDropout(0.2), tp.nn.Dropout3d(0.2)):
        x = tp.randn(2, 4, 3, 3, 3)
        assert np.array_equal(m.eval()(x).numpy(), x.numpy())
        m.train()
        cf = tp.compile(lambda x, m=m: m(x))
        tp.manual_seed(9)
        e = m(x)
        tp.manual_seed(9)
        assert np.array_equal(cf(x).numpy(), e.numpy())


# ------------------------------------------------------------------- bilinear
def test_bilinear_matches_torch_values_and_grads():
    m = tp.nn.Bilinear(3, 4, 2)
    tm = torch.nn.Bilinear(3, 4, 2)
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(m.weight.detach().numpy()))
        tm.bias.copy_(torch.tensor(m.bias.detach().numpy()))
    assert float(m.weight.abs().max()) <= 1 / math.sqrt(3)
    a = rng.standard_normal((7, 3)).astype(np.float32)
    b = rng.standard_normal((7, 4)).astype(np.float32)
    y, ty = m(tp.tensor(a), tp.tensor(b)), tm(torch.tensor(a), torch.tensor(b))
    _close(y, ty, 1e-5)
    y.pow(2).sum().backward()
    ty.pow(2).sum().backward()
    _close(m.weight.grad, tm.weight.grad, 1e-4)
    _close(m.bias.grad, tm.bias.grad, 1e-4)
    assert tp.nn.Bilinear(3, 4, 2, bias=False).bias is None
    cy = tp.compile(lambda a, b: m(a, b))(tp.tensor(a), tp.tensor(b))
    _close(cy, y, 1e-6)
    with pytest.raises(ValueError, match="bilinear"):
        F.bilinear(tp.zeros(2, 5), tp.zeros(2, 4), m.weight)


def test_pdist_values_and_grad():
    x = rng.standard_normal((6, 3))
    for p in (0.5, 1.0, 2.0, 3.0, float("inf")):
        _close(F.pdist(tp.tensor(x), p), TF.pdist(torch.tensor(x), p), 1e-12)
    a = tp.tensor(x, requires_grad=True)
    ta = torch.tensor(x, requires_grad=True)
    F.pdist(a).sum().backward()
    TF.pdist(ta).sum().backward()
    _close(a.grad, ta.grad, 1e-12)


# ------------------------------------------------------------- margin losses
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multi_margin_loss(reduction):
    x = rng.standard_normal((5, 4))
    t = np.array([0, 3, 1, 2, 3])
    w = rng.random(4)
    for p in (1, 2):
        a = tp.tensor(x, requires_grad=True)
        ta = torch.tensor(x, requires_grad=True)
        la = tp.nn.MultiMarginLoss(p, 0.7, tp.tensor(w), reduction=reduction)(a, tp.tensor(t))
        lt = torch.nn.MultiMarginLoss(p, 0.7, torch.tensor(w), reduction=reduction)(ta, torch.tensor(t))
        _close(la, lt, 1e-12)
        la.sum().backward()
        lt.sum().backward()
        _close(a.grad, ta.grad, 1e-12)
    _close(F.multi_margin_loss(tp.tensor(x[0]), tp.tensor(t[:1]), reduction=reduction),
           TF.multi_margin_loss(torch.tensor(x[0]), torch.tensor(t[:1]), reduction=reduction), 1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin_loss(reduction):
    x = rng.standard_normal((5, 4))
    t = np.array([[3, 0, -1, 1], [0, 1, 2, 3], [1, -1, 0, 0], [-1, 2, 2, 2], [2, 2, -1, 0]])
    a = tp.tensor(x, requires_grad=True)
    ta = torch.tensor(x, requires_grad=True)
    la = tp.nn.MultiLabelMarginLoss(reduction=reduction)(a, tp.tensor(t))
    lt = torch.nn.MultiLabelMarginLoss(reduction=reduction)(ta, torch.tensor(t))
    _close(la, lt, 1e-12)
    la.sum().backward()
    lt.sum().backward()
    _close(a.grad, ta.grad, 1e-12)
    _close(F.multilabel_margin_loss(tp.tensor(x[0]), tp.tensor(t[0]), reduction=reduction),
           TF.multilabel_margin_loss(torch.tensor(x[0]), torch.tensor(t[0]), reduction=reduction), 1e-12)


def test_triplet_margin_with_distance_loss():
    an, po, ne = [rng.standard_normal((4, 3)) for _ in range(3)]
    for kw in (dict(), dict(swap=True, margin=0.5), dict(reduction="none")):
        _close(tp.nn.TripletMarginWithDistanceLoss(**kw)(tp.tensor(an), tp.tensor(po), tp.tensor(ne)),
               torch.nn.TripletMarginWithDistanceLoss(**kw)(torch.tensor(an), torch.tensor(po), torch.tensor(ne)),
               1e-12)
    _close(F.triplet_margin_with_distance_loss(tp.tensor(an), tp.tensor(po), tp.tensor(ne),
                                               distance_function=lambda a, b: 1 - F.cosine_similarity(a, b)),
           TF.triplet_margin_with_distance_loss(torch.tensor(an), torch.tensor(po), torch.tensor(ne),
                                                distance_function=lambda a, b: 1 - TF.cosine_similarity(a, b)),
           1e-12)
    with pytest.raises(ValueError, match="triplet_margin_with_distance_loss"):
        F.triplet_margin_with_distance_loss(tp.tensor(an), tp.tensor(po), tp.tensor(ne), margin=0.0)


def test_losses_compiled_equal_eager():
    x = tp.tensor(rng.standard_normal((5, 4)))
    t = tp.tensor(np.array([0, 3, 1, 2, 3]))
    tt = tp.tensor(np.array([[3, 0, -1, 1], [0, 1, 2, 3], [1, -1, 0, 0], [-1, 2, 2, 2], [2, 2, -1, 0]]))

    def f(x, t, tt):
        return F.multi_margin_loss(x, t) + F.multilabel_margin_loss(x, tt) + F.pdist(x).sum()

    _close(tp.compile(f)(x, t, tt), f(x, t, tt), 1e-12)


# ------------------------------------------------- top-level and Tensor names
def test_finfo_iinfo_match_torch():
    for d, td in ((tp.float16, torch.float16), (tp.bfloat16, torch.bfloat16), (tp.float32, torch.float32),
                  (tp.float64, torch.float64)):
        a, b = tp.finfo(d), torch.finfo(td)
        for f in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
            assert getattr(a, f) == getattr(b, f), (d, f)
    assert tp.finfo().eps == torch.finfo().eps
    for d, td in ((tp.uint8, torch.uint8), (tp.int8, torch.int8), (tp.int16, torch.int16), (tp.int32, torch.int32),
                  (tp.int64, torch.int64)):
        a, b = tp.iinfo(d), torch.iinfo(td)
        assert (a.bits, a.min, a.max) == (b.bits, b.min, b.max)
    with pytest.raises(TypeError, match="finfo"):
        tp.finfo(tp.int32)
    with pytest.raises(TypeError, match="iinfo"):
        tp.iinfo(tp.float32)


def test_constants_and_broadcasting_helpers():
    assert (tp.pi, tp.e, tp.inf) == (torch.pi, torch.e, torch.inf) and math.isnan(tp.nan) and tp.newaxis is None
    for shapes in (((2, 1), (3,)), ((1,), (4, 1, 2), 2), ((), (3, 3))):
        assert tuple(tp.broadcast_shapes(*shapes)) == tuple(torch.broadcast_shapes(*shapes))
    with pytest.raises(RuntimeError, match="broadcast_shapes"):
        tp.broadcast_shapes((2, 3), (4,))
    a, b = tp.broadcast_tensors(tp.ones(2, 1), tp.arange(3))
    assert a.shape == b.shape == (2, 3)
    assert b.numpy().tolist() == [[0, 1, 2], [0, 1, 2]]


def test_inplace_tensor_methods_match_torch():
    a = rng.random((3, 3)) + 0.5
    b = rng.random((3, 3)) + 0.5
    cases = [("addmm_", (b, b)), ("cumsum_", (0,)), ("cumprod_", (1,)), ("lgamma_", ()), ("digamma_", ()),
             ("i0_", ()), ("sinc_", ()), ("xlogy_", (b,)), ("float_power_", (2.0,)), ("copysign_", (-b,)),
             ("heaviside_", (b,)), ("sgn_", ()), ("rad2deg_", ()), ("deg2rad_", ()), ("logit_", ()),
             ("polygamma_", (1,)), ("mvlgamma_", (2,)), ("addr_", (b[0], b[1]))]
    for name, args in cases:
        x, tx = tp.tensor(a.copy()), torch.tensor(a.copy())
        r = getattr(x, name)(*[tp.tensor(v) if isinstance(v, np.ndarray) else v for v in args])
        getattr(tx, name)(*[torch.tensor(v) if isinstance(v, np.ndarray) else v for v in args])
        assert r is x, name
        _close(x, tx, 1e-8)  # i0's series and digamma's expansion differ from torch's in the 10th digit
    v, tv = tp.tensor(a[0].copy()), torch.tensor(a[0].copy())
    v.addmv_(tp.tensor(b), tp.tensor(b[1]), beta=0.5)
    tv.addmv_(torch.tensor(b), torch.tensor(b[1]), beta=0.5)
    _close(v, tv, 1e-12)
    x = tp.tensor(np.arange(6).reshape(2, 3) + 1)
    tx = torch.tensor(np.arange(6).reshape(2, 3) + 1)
    x.lcm_(tp.tensor([4, 6, 9]))
    tx.lcm_(torch.tensor([4, 6, 9]))
    assert x.numpy().tolist() == tx.numpy().tolist()
    with pytest.raises(RuntimeError, match="addmm"):
        tp.zeros(2, 2).addmm_(tp.zeros(3, 2), tp.zeros(2, 3))
    with pytest.raises(RuntimeError, match="xlogy_"):
        tp.zeros(3, dtype=tp.int64).xlogy_(tp.ones(3))


def test_misc_tensor_methods_match_torch():
    x = rng.standard_normal((2, 3, 4))
    t, tt = tp.tensor(x), torch.tensor(x)
    _close(t.sum_to_size(3, 1), tt.sum_to_size(3, 1), 1e-12)
    _close(t.sum_to_size((1, 3, 4)), tt.sum_to_size((1, 3, 4)), 1e-12)
    with pytest.raises(RuntimeError, match="sum_to_size"):
        t.sum_to_size(2, 2)
    p = tp.tensor(np.abs(x) + 2)
    _close(tp.mvlgamma(p, 3), torch.mvlgamma(torch.tensor(np.abs(x) + 2), 3), 1e-12)
    _close(p.polygamma(2), torch.tensor(np.abs(x) + 2).polygamma(2), 1e-10)
    with pytest.raises(RuntimeError, match="mvlgamma"):
        tp.mvlgamma(tp.tensor([0.2]), 3)
    assert t.nbytes == tt.nbytes and t.itemsize == tt.itemsize
    assert t.is_signed() and not tp.zeros(2, dtype=tp.uint8).is_signed()
    assert not t.is_complex() and not tp.is_complex(t) and not t.is_conj() and not t.is_neg()
    assert t.conj() is t and tp.conj(t) is t and t.resolve_conj() is t and tp.resolve_neg(t) is t
    assert t.is_same_size(tp.zeros(2, 3, 4)) and not t.is_same_size(tp.zeros(3))
    m = tp.tensor(x[0])
    _close(m.H, torch.tensor(x[0]).H, 0)
    _close(t.adjoint(), tt.adjoint(), 0)
    _close(tp.sinc(t), torch.sinc(tt), 1e-12)


# ---------------------------------------------------------------- Transformer
def _copy_to_torch(m, tm):
    missing = tm.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in m.state_dict().items()})
    assert not missing.missing_keys and not missing.unexpected_keys


@pytest.mark.parametrize("batch_first,norm_first", [(False, False), (True, True), (True, False)])
def test_transformer_matches_torch(batch_first, norm_first):
    m = tp.nn.Transformer(16, 4, 2, 2, 32, dropout=0.0, batch_first=batch_first, norm_first=norm_first).eval()
    tm = torch.nn.Transformer(16, 4, 2, 2, 32, dropout=0.0, batch_first=batch_first, norm_first=norm_first).eval()
    _copy_to_torch(m, tm)
    r = np.random.default_rng(1)
    src = r.standard_normal((5, 3, 16)).astype(np.float32)
    tgt = r.standard_normal((4, 3, 16)).astype(np.float32)
    if batch_first:
        src, tgt = src.transpose(1, 0, 2).copy(), tgt.transpose(1, 0, 2).copy()
    mask = tp.nn.Transformer.generate_square_subsequent_mask(4)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(4)
    assert np.array_equal(mask.numpy(), tmask.numpy())
    kpm = np.zeros((3, 5), bool)
    kpm[1, 3:] = True
    a = m(tp.tensor(src), tp.tensor(tgt), tgt_mask=mask, src_key_padding_mask=tp.tensor(kpm),
          memory_key_padding_mask=tp.tensor(kpm))
    b = tm(torch.tensor(src), torch.tensor(tgt), tgt_mask=tmask, src_key_padding_mask=torch.tensor(kpm),
           memory_key_padding_mask=torch.tensor(kpm))
    _close(a, b, 1e-5)
    c = tp.compile(lambda s, t: m(s, t, tgt_mask=mask))(tp.tensor(src), tp.tensor(tgt))
    _close(c, m(tp.tensor(src), tp.tensor(tgt), tgt_mask=mask), 1e-5)


def test_transformer_decoder_gradients_match_torch():
    layer = tp.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, activation="gelu")
    dec = tp.nn.TransformerDecoder(layer, 2, norm=tp.nn.LayerNorm(8))
    tlayer = torch.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, activation="gelu")
    tdec = torch.nn.TransformerDecoder(tlayer, 2, norm=torch.nn.LayerNorm(8))
    _copy_to_torch(dec, tdec)
    r = np.random.default_rng(2)
    tgt = r.standard_normal((4, 2, 8)).astype(np.float32)
    mem = r.standard_normal((6, 2, 8)).astype(np.float32)
    a = dec(tp.tensor(tgt), tp.tensor(mem))
    b = tdec(torch.tensor(tgt), torch.tensor(mem))
    _close(a, b, 1e-5)
    a.pow(2).sum().backward()
    b.pow(2).sum().backward()
    tparams = dict(tdec.named_parameters())
    for name, p in dec.named_parameters():
        _close(p.grad, tparams[name].grad, 1e-4)


def test_transformer_errors_and_init():
    m = tp.nn.Transformer(8, 2, 1, 1, 16)
    with pytest.raises(RuntimeError, match="Transformer.*batch"):
        m(tp.zeros(3, 2, 8), tp.zeros(3, 4, 8))
    with pytest.raises(RuntimeError, match="Transformer.*d_model"):
        m(tp.zeros(3, 2, 6), tp.zeros(3, 2, 6))
    with pytest.raises(RuntimeError, match="TransformerDecoderLayer.*activation"):
        tp.nn.TransformerDecoderLayer(8, 2, activation="tanh")
    w = m.encoder.layers[0].linear1.weight  # xavier-uniform bound sqrt(6 / (fan_in + fan_out))
    assert float(w.abs().max()) <= math.sqrt(6 / (8 + 16)) + 1e-6


# ------------------------------------------------------------------ 3-d pools
X3D = rng.standard_normal((2, 3, 7, 8, 9))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=(3, 2, 2), stride=(2, 1, 2), padding=1),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                                dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
                                dict(kernel_size=2, divisor_override=3)])
def test_avg_pool3d_matches_torch(kw):
    a, ta = tp.tensor(X3D, requires_grad=True), torch.tensor(X3D, requires_grad=True)
    y, ty = tp.nn.AvgPool3d(**kw)(a), torch.nn.AvgPool3d(**kw)(ta)
    _close(y, ty, 1e-12)
    y.pow(2).sum().backward()
    ty.pow(2).sum().backward()
    _close(a.grad, ta.grad, 1e-12)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=(3, 2, 2), stride=(2, 1, 2), padding=1),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                                dict(kernel_size=2, dilation=2)])
def test_max_pool3d_matches_torch_with_indices(kw):
    a, ta = tp.tensor(X3D, requires_grad=True), torch.tensor(X3D, requires_grad=True)
    (y, i), (ty, ti) = tp.nn.MaxPool3d(return_indices=True, **kw)(a), torch.nn.MaxPool3d(return_indices=True, **kw)(ta)
    _close(y, ty, 0)
    assert np.array_equal(i.numpy(), ti.numpy())
    y.pow(2).sum().backward()
    ty.pow(2).sum().backward()
    _close(a.grad, ta.grad, 1e-12)
    (y, i), (ty, ti) = F.max_pool3d_with_indices(tp.tensor(X3D[0]), 2), TF.max_pool3d_with_indices(
        torch.tensor(X3D[0]), 2)
    _close(y, ty, 0)
    assert np.array_equal(i.numpy(), ti.numpy())


@pytest.mark.parametrize("size", [(2, 3, 4), 3, (None, 2, 5), (7, 8, 9)])
def test_adaptive_pool3d_matches_torch(size):
    _close(tp.nn.AdaptiveAvgPool3d(size)(tp.tensor(X3D)), torch.nn.AdaptiveAvgPool3d(size)(torch.tensor(X3D)), 1e-12)
    (y, i), (ty, ti) = (tp.nn.AdaptiveMaxPool3d(size, True)(tp.tensor(X3D)),
                        torch.nn.AdaptiveMaxPool3d(size, True)(torch.tensor(X3D)))
    _close(y, ty, 0)
    assert np.array_equal(i.numpy(), ti.numpy())


def test_pool3d_compiled_and_errors():
    x = tp.tensor(X3D)

    def f(x):
        return F.max_pool3d(x, 2).sum() + F.avg_pool3d(x, 3, 2, 1).sum() + F.adaptive_avg_pool3d(x, 2).sum()

    _close(tp.compile(f)(x), f(x), 1e-10)
    with pytest.raises(ValueError, match="max_pool3d"):
        F.max_pool3d(tp.zeros(3, 4, 5), 2)
    with pytest.raises(ValueError, match="avg_pool3d"):
        F.avg_pool3d(x, (2, 2))


def test_top_level_inplace_functions():
    x = tp.tensor([0.5, 1.0])
    assert tp.xlogy_(x, tp.tensor([2.0, 3.0])) is x
    _close(x, torch.xlogy(torch.tensor([0.5, 1.0]), torch.tensor([2.0, 3.0])), 1e-7)
    y = tp.tensor([90.0])
    tp.deg2rad_(y)
    _close(y, np.array([math.pi / 2], np.float32), 1e-7)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
                                dict(kernel_size=(2, 3, 2), stride=1, padding=(1, 1, 0), divisor_override=3)])
def test_avg_pool3d_integer_input_matches_torch(kw):
    # one truncating division of the exact box sum, in the input's dtype (two per-pass means round twice)
    a = rng.integers(-9, 9, (2, 3, 5, 6, 7))
    r, t = F.avg_pool3d(tp.tensor(a), **kw), TF.avg_pool3d(torch.tensor(a), **kw)
    assert r.dtype == tp.int64
    np.testing.assert_array_equal(r.numpy(), t.numpy())


def test_adaptive_avg_pool3d_bfloat16_rounds_once():
    a = rng.standard_normal((2, 3, 7, 9, 11)).astype(np.float32)
    r = F.adaptive_avg_pool3d(tp.tensor(a).to(tp.bfloat16), (3, 4, 5))
    # the float32 means of the bfloat16 values, rounded once to bfloat16 (not once per pass)
    t = TF.adaptive_avg_pool3d(torch.tensor(a).to(torch.bfloat16).float(), (3, 4, 5)).to(torch.bfloat16)
    assert r.dtype == tp.bfloat16
    np.testing.assert_allclose(r.float().numpy(), t.float().numpy(), rtol=1e-2, atol=1e-3)


def test_margin_losses_zero_dim_input_and_pdist_p0_grad():
    for reduction in ("none", "mean"):
        for fn, tfn in ((F.multi_margin_loss, TF.multi_margin_loss),
                        (F.multilabel_margin_loss, TF.multilabel_margin_loss)):
            r = fn(tp.tensor(0.5), tp.tensor(0), reduction=reduction)
            t = tfn(torch.tensor(0.5), torch.tensor(0), reduction=reduction)
            assert r.shape == tuple(t.shape) and float(r) == float(t)
    x = tp.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    out = F.pdist(x, 0.0)
    assert out.requires_grad
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((4, 3)))


def test_mvlgamma_keeps_16bit_dtype():
    a = rng.uniform(2.1, 9.0, (50,)).astype(np.float32)
    for dt, tdt in ((tp.float16, torch.float16), (tp.bfloat16, torch.bfloat16)):
        r, t = tp.tensor(a).to(dt).mvlgamma(3), torch.tensor(a).to(tdt).mvlgamma(3)
        assert r.dtype == dt
        np.testing.assert_allclose(r.float().numpy(), t.float().numpy(), rtol=2e-2)
