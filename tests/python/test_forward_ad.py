"""Forward-mode AD (tp.autograd.forward_ad, tp.func.jvp) and the tp.func transforms.

Every tangent formula is checked three ways on float64 inputs:
  - against central finite differences along the tangent, (f(x + e t) - f(x - e t)) / 2e;
  - against reverse mode through the transposition identity <vjp(u), t> = <u, jvp(t)>;
  - against torch.func.jvp on the same inputs (PyTorch is the oracle).
(tests/python/fd_check.py checks vector-Jacobian products, one backward per
output; a directional difference is the forward-mode counterpart, written here.)
"""
import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.autograd.forward_ad as fwAD

RNG_SEED = 1234


# ---------------------------------------------------------------------------
# Inputs: (shape, domain) -> float64 array.
def _array(rng, shape, domain):
    if domain == "pos":
        return rng.uniform(0.5, 2.0, shape)
    if domain == "unit":  # (-1, 1) open
        return rng.uniform(-0.8, 0.8, shape)
    if domain == "prob":
        return rng.uniform(0.1, 0.9, shape)
    if domain == "gt1":
        return rng.uniform(1.2, 3.0, shape)
    if domain == "nonint":  # away from integers and half-integers (rounding ops)
        return np.floor(rng.uniform(-3, 3, shape)) + rng.uniform(0.1, 0.4, shape)
    return rng.standard_normal(shape)


# (id, fn(lib, *xs), [(shape, domain)], compare_with_torch)
def _idx(L, v):
    return L.tensor(v, dtype=L.int64)


F = lambda L: L.nn.functional  # noqa: E731
N = "normal"
CASES = [
    # ---- pointwise unary ----
    *[(n, (lambda n: lambda L, x: getattr(L, n)(x))(n), [((3, 4), d)], True) for n, d in [
        ("exp", N), ("exp2", N), ("expm1", N), ("log", "pos"), ("log2", "pos"), ("log10", "pos"), ("log1p", "pos"),
        ("sqrt", "pos"), ("rsqrt", "pos"), ("sin", N), ("cos", N), ("tan", "unit"), ("asin", "unit"),
        ("acos", "unit"), ("atan", N), ("sinh", N), ("cosh", N), ("tanh", N), ("asinh", N), ("acosh", "gt1"),
        ("atanh", "unit"), ("erf", N), ("erfc", N), ("erfinv", "unit"), ("sigmoid", N), ("logit", "prob"),
        ("reciprocal", "pos"), ("relu", N), ("abs", N), ("neg", N), ("square", N), ("frac", "nonint"),
        ("floor", "nonint"), ("ceil", "nonint"), ("round", "nonint"), ("trunc", "nonint"), ("sign", N)]],
    ("gelu", lambda L, x: F(L).gelu(x), [((3, 4), N)], True),
    ("gelu_tanh", lambda L, x: F(L).gelu(x, approximate="tanh"), [((3, 4), N)], True),
    ("silu", lambda L, x: F(L).silu(x), [((3, 4), N)], True),
    ("mish", lambda L, x: F(L).mish(x), [((3, 4), N)], True),
    ("softplus", lambda L, x: F(L).softplus(x, beta=2.0), [((3, 4), N)], True),
    ("elu", lambda L, x: F(L).elu(x, alpha=0.7), [((3, 4), N)], True),
    ("leaky_relu", lambda L, x: F(L).leaky_relu(x, 0.2), [((3, 4), N)], True),
    ("hardtanh", lambda L, x: F(L).hardtanh(x, -0.5, 0.5), [((3, 4), N)], True),
    ("logit_eps", lambda L, x: L.logit(x, eps=0.2), [((3, 4), "prob")], True),
    # ---- pointwise binary / ternary (with broadcasting and Python numbers) ----
    ("add_alpha", lambda L, x, y: L.add(x, y, alpha=2.5), [((3, 4), N), ((4,), N)], True),
    ("sub", lambda L, x, y: x - y, [((3, 1), N), ((1, 4), N)], True),
    ("mul", lambda L, x, y: x * y, [((2, 3, 4), N), ((3, 4), N)], True),
    ("div", lambda L, x, y: x / y, [((3, 4), N), ((3, 4), "pos")], True),
    ("scalar_ops", lambda L, x: (2 - x) * 3 / (x * x + 1) + 0.5 ** x, [((3, 4), N)], True),
    ("maximum", lambda L, x, y: L.maximum(x, y), [((3, 4), N), ((3, 4), N)], True),
    ("minimum", lambda L, x, y: L.minimum(x, y), [((3, 4), N), ((4,), N)], True),
    ("pow", lambda L, x, y: L.pow(x, y), [((3, 4), "pos"), ((3, 4), N)], True),
    ("pow_scalar", lambda L, x: x ** 3, [((3, 4), N)], True),
    ("atan2", lambda L, x, y: L.atan2(x, y), [((3, 4), N), ((3, 4), N)], True),
    ("hypot", lambda L, x, y: L.hypot(x, y), [((3, 4), N), ((3, 4), N)], True),
    ("fmod", lambda L, x, y: L.fmod(x, y), [((3, 4), "nonint"), ((3, 4), "gt1")], True),
    ("remainder", lambda L, x, y: L.remainder(x, y), [((3, 4), "nonint"), ((3, 4), "gt1")], True),
    ("where", lambda L, x, y: L.where(x > 0, x, y), [((3, 4), N), ((3, 4), N)], True),
    ("lerp", lambda L, x, y, w: L.lerp(x, y, w), [((3, 4), N), ((3, 4), N), ((3, 4), N)], True),
    ("addcmul", lambda L, x, y, z: L.addcmul(x, y, z, value=0.5), [((3, 4), N), ((3, 4), N), ((4,), N)], True),
    ("addcdiv", lambda L, x, y, z: L.addcdiv(x, y, z, value=2.0), [((3, 4), N), ((3, 4), N), ((3, 4), "pos")], True),
    ("clamp_tensor", lambda L, x, lo, hi: L.clamp(x, lo, lo + hi), [((3, 4), N), ((3, 4), N), ((3, 4), "pos")], True),
    ("clamp_scalar", lambda L, x: L.clamp(x, -0.5, 0.5), [((3, 4), N)], True),
    # ---- reductions ----
    ("sum_all", lambda L, x: x.sum(), [((3, 4), N)], True),
    ("sum_dim", lambda L, x: x.sum(dim=(0, 2), keepdim=True), [((2, 3, 4), N)], True),
    ("mean_dim", lambda L, x: x.mean(dim=1), [((2, 3, 4), N)], True),
    ("amax", lambda L, x: L.amax(x, dim=1), [((3, 5), N)], True),
    ("amin_keep", lambda L, x: L.amin(x, dim=(0, 1), keepdim=True), [((3, 4, 2), N)], True),
    ("max_all", lambda L, x: x.max(), [((3, 4), N)], True),
    ("max_dim", lambda L, x: x.max(dim=1).values, [((3, 4), N)], True),
    ("min_dim_keep", lambda L, x: x.min(dim=0, keepdim=True)[0], [((3, 4), N)], True),
    ("prod_all", lambda L, x: x.prod(), [((2, 3), "pos")], True),
    ("prod_dim", lambda L, x: x.prod(dim=1), [((3, 4), N)], True),
    ("var", lambda L, x: x.var(dim=1), [((3, 5), N)], True),
    ("var_correction", lambda L, x: L.var(x, dim=0, correction=0, keepdim=True), [((4, 3), N)], True),
    ("std_all", lambda L, x: x.std(), [((3, 4), N)], True),
    ("logsumexp", lambda L, x: L.logsumexp(x, dim=1), [((3, 4), N)], True),
    ("softmax", lambda L, x: L.softmax(x, dim=-1), [((3, 4), N)], True),
    ("log_softmax", lambda L, x: F(L).log_softmax(x, dim=0), [((3, 4), N)], True),
    ("cumsum", lambda L, x: L.cumsum(x, dim=1), [((3, 4), N)], True),
    ("cumprod", lambda L, x: L.cumprod(x, dim=1), [((3, 4), "pos")], True),
    ("norm", lambda L, x: L.norm(x, dim=1), [((3, 4), N)], True),
    ("sort_values", lambda L, x: L.sort(x, dim=1).values, [((3, 4), N)], True),
    ("topk_values", lambda L, x: L.topk(x, 2, dim=0).values, [((3, 4), N)], True),
    # ---- views and shape copies ----
    ("view", lambda L, x: x.view(4, 3), [((3, 4), N)], True),
    ("reshape_of_transpose", lambda L, x: x.t().reshape(12), [((3, 4), N)], True),
    ("view_of_expand", lambda L, x, y: (x.expand(2, 3, 4) * y).view(6, 4), [((3, 4), N), ((2, 3, 4), N)], True),
    ("permute", lambda L, x: x.permute(2, 0, 1), [((2, 3, 4), N)], True),
    ("transpose", lambda L, x: x.transpose(0, 2), [((2, 3, 4), N)], True),
    ("expand", lambda L, x: x.expand(2, 3, 4), [((3, 1), N)], True),
    ("slice", lambda L, x: x[1:, ::2], [((3, 4), N)], True),
    ("select", lambda L, x: x[1], [((3, 4), N)], True),
    ("squeeze_unsqueeze", lambda L, x: x.squeeze(1).unsqueeze(0), [((3, 1, 4), N)], True),
    ("flatten", lambda L, x: x.flatten(1), [((2, 3, 4), N)], True),
    ("cat", lambda L, x, y: L.cat([x, y, x], dim=1), [((3, 2), N), ((3, 4), N)], True),
    ("stack", lambda L, x, y: L.stack([x, y], dim=1), [((3, 4), N), ((3, 4), N)], True),
    ("index_select", lambda L, x: L.index_select(x, 1, _idx(L, [3, 0, 3])), [((3, 4), N)], True),
    ("gather", lambda L, x: L.gather(x, 1, _idx(L, [[0, 2], [1, 1], [3, 0]])), [((3, 4), N)], True),
    ("advanced_index", lambda L, x: x[_idx(L, [2, 0])], [((3, 4), N)], True),
    ("flip_roll", lambda L, x: L.roll(L.flip(x, [0]), 1, 1), [((3, 4), N)], True),
    ("tril_diagonal", lambda L, x: L.tril(x).diagonal() + L.triu(x, 1).sum(0)[:3], [((3, 4), N)], True),
    ("masked_fill", lambda L, x: x.masked_fill(x > 0.3, 2.0), [((3, 4), N)], True),
    ("scatter", lambda L, x, y: x.scatter(1, _idx(L, [[1], [0], [3]]), y), [((3, 4), N), ((3, 1), N)], True),
    ("index_add", lambda L, x, y: x.index_add(0, _idx(L, [2, 0]), y, alpha=0.5), [((3, 4), N), ((2, 4), N)], True),
    ("repeat", lambda L, x: x.repeat(2, 1), [((2, 3), N)], True),
    ("clone_contiguous", lambda L, x: x.t().contiguous().clone(), [((3, 4), N)], True),
    ("split_unbind", lambda L, x: x.split(2, dim=1)[1] * x.unbind(0)[0][:2], [((3, 4), N)], True),
    # ---- matmul ----
    ("mm", lambda L, x, y: L.mm(x, y), [((3, 4), N), ((4, 2), N)], True),
    ("bmm", lambda L, x, y: L.bmm(x, y), [((2, 3, 4), N), ((2, 4, 2), N)], True),
    ("matmul_broadcast", lambda L, x, y: L.matmul(x, y), [((2, 3, 4), N), ((4, 5), N)], True),
    ("matmul_vec", lambda L, x, y: x @ y, [((3, 4), N), ((4,), N)], True),
    ("addmm", lambda L, b, x, y: L.addmm(b, x, y, beta=0.5, alpha=2.0), [((2,), N), ((3, 4), N), ((4, 2), N)], True),
    ("baddbmm", lambda L, b, x, y: L.baddbmm(b, x, y, alpha=0.5), [((2, 3, 2), N), ((2, 3, 4), N), ((2, 4, 2), N)], True),
    ("linear", lambda L, x, w, b: F(L).linear(x, w, b), [((3, 4), N), ((5, 4), N), ((5,), N)], True),
    ("linear_nobias", lambda L, x, w: F(L).linear(x, w), [((2, 3, 4), N), ((5, 4), N)], True),
    # ---- nn ----
    ("layer_norm", lambda L, x, w, b: F(L).layer_norm(x, (4,), w, b), [((3, 4), N), ((4,), N), ((4,), N)], True),
    ("layer_norm_2d", lambda L, x: F(L).layer_norm(x, (3, 4)), [((2, 3, 4), N)], True),
    ("batch_norm_train", lambda L, x, w, b: F(L).batch_norm(x, None, None, w, b, training=True),
     [((4, 3, 2, 2), N), ((3,), N), ((3,), N)], True),
    ("conv2d", lambda L, x, w, b: F(L).conv2d(x, w, b, stride=1, padding=1), [((2, 2, 5, 5), N), ((3, 2, 3, 3), N),
                                                                            ((3,), N)], True),
    ("conv2d_strided", lambda L, x, w: F(L).conv2d(x, w, stride=2), [((1, 2, 5, 5), N), ((2, 2, 2, 2), N)], True),
    ("max_pool2d", lambda L, x: F(L).max_pool2d(x, 2), [((2, 2, 4, 4), N)], True),
    ("avg_pool2d", lambda L, x: F(L).avg_pool2d(x, 2, stride=1), [((1, 2, 4, 4), N)], True),
    ("adaptive_avg_pool2d", lambda L, x: F(L).adaptive_avg_pool2d(x, (2, 1)), [((1, 2, 4, 4), N)], True),
    ("embedding", lambda L, w: F(L).embedding(_idx(L, [[0, 2], [4, 2]]), w), [((5, 3), N)], True),
    ("cross_entropy", lambda L, x: F(L).cross_entropy(x, _idx(L, [1, 0, 3])), [((3, 4), N)], True),
    ("cross_entropy_sum", lambda L, x: F(L).cross_entropy(x, _idx(L, [1, 0, 3]), reduction="sum"), [((3, 4), N)],
     True),
    ("nll_loss", lambda L, x: F(L).nll_loss(x, _idx(L, [1, 0, 3]), weight=L.tensor([1., 2., .5, 1.], dtype=L.float64)),
     [((3, 4), N)], True),
    ("mse_loss", lambda L, x, y: F(L).mse_loss(x, y), [((3, 4), N), ((3, 4), N)], True),
    ("mlp", lambda L, x, w1, w2: L.tanh(F(L).gelu(x @ w1) @ w2).sum(-1).softmax(0),
     [((4, 3), N), ((3, 5), N), ((5, 2), N)], True),
]


def _inputs(spec, seed):
    rng = np.random.default_rng(seed)
    return [_array(rng, s, d) for s, d in spec]


def _tp(arrays):
    return [tp.tensor(a) for a in arrays]


def _np(t):
    return np.array(t.detach().contiguous().numpy(), dtype=np.float64)


@pytest.mark.parametrize("name,fn,spec,with_torch", CASES, ids=[c[0] for c in CASES])
def test_tangent_formula(name, fn, spec, with_torch):
    xs = _inputs(spec, RNG_SEED)
    ts = _inputs([(s, N) for s, _ in spec], RNG_SEED + 1)
    f = lambda *a: fn(tp, *a)  # noqa: E731
    out, tout = tp.func.jvp(f, tuple(_tp(xs)), tuple(_tp(ts)))
    assert tout.dtype == tp.float64 and tuple(tout.shape) == tuple(out.shape)
    np.testing.assert_allclose(_np(out), _np(f(*_tp(xs))), rtol=1e-12, atol=1e-12)

    # Central differences along the tangent.
    eps = 1e-6
    with tp.no_grad():
        plus = _np(f(*[tp.tensor(x + eps * t) for x, t in zip(xs, ts)]))
        minus = _np(f(*[tp.tensor(x - eps * t) for x, t in zip(xs, ts)]))
    np.testing.assert_allclose(_np(tout), (plus - minus) / (2 * eps), rtol=1e-5, atol=1e-7,
                               err_msg="tangent vs finite differences")

    # Transposition: <vjp(u), t> = <u, jvp(t)>.
    u = np.random.default_rng(RNG_SEED + 2).standard_normal(tuple(out.shape))
    _, vjp_fn = tp.func.vjp(f, *_tp(xs))
    cots = vjp_fn(tp.tensor(u))
    lhs = sum(float(np.sum(_np(c) * t)) for c, t in zip(cots, ts))
    rhs = float(np.sum(u * _np(tout)))
    assert lhs == pytest.approx(rhs, rel=1e-9, abs=1e-9)

    if with_torch:
        tf = lambda *a: fn(torch, *a)  # noqa: E731
        _, ttout = torch.func.jvp(tf, tuple(torch.tensor(x) for x in xs), tuple(torch.tensor(t) for t in ts))
        np.testing.assert_allclose(_np(tout), ttout.numpy(), rtol=1e-9, atol=1e-10, err_msg="tangent vs torch")


# ---------------------------------------------------------------------------
def test_every_differentiable_operator_has_a_tangent_formula():
    names = {n for n, *_ in tp._C._fwd_coverage()}
    assert set(tp._C._fwd_formula_names()) <= names  # no formula registered under a misspelled name
    missing = [n for n, has_backward, has_jvp, composite, _ in tp._C._fwd_coverage()
               if has_backward and not composite and not has_jvp and not n.split(".")[0].endswith("_")]
    assert missing == []  # in-place ops use their out-of-place twin's formula


def test_make_dual_unpack_dual():
    x, t = tp.randn(3, dtype=tp.float64), tp.randn(3, dtype=tp.float64)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, t)
        u = fwAD.unpack_dual(d)
        assert isinstance(u, fwAD.UnpackedDualTensor) and u.primal is not None
        np.testing.assert_array_equal(_np(u.primal), _np(x))
        np.testing.assert_array_equal(_np(u.tangent), _np(t))
        primal, tangent = u  # a named tuple
        assert fwAD.unpack_dual(primal).tangent is None  # the unpacked primal carries no tangent
        assert fwAD.unpack_dual(x).tangent is None
        y = d * 2
        assert fwAD.unpack_dual(y > 0).tangent is None  # comparisons give no tangent
        assert fwAD.unpack_dual(tp.argmax(d)).tangent is None
    assert fwAD.unpack_dual(d).tangent is None  # tangents are dropped with the level
    assert fwAD.unpack_dual(y).tangent is None


def test_make_dual_keeps_reverse_history():
    x = tp.randn(3, dtype=tp.float64, requires_grad=True)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, tp.ones(3, dtype=tp.float64))
        (d * d).sum().backward()
    np.testing.assert_allclose(_np(x.grad), 2 * _np(x))


def test_nested_level_refused():
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="dual_level: nested"):
            with fwAD.dual_level():
                pass
    with fwAD.dual_level():  # the failed nesting left the state usable
        pass


def test_make_dual_errors():
    x = tp.randn(3)
    with pytest.raises(RuntimeError, match="make_dual: no dual level is open"):
        fwAD.make_dual(x, x)
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match=r"make_dual: the tangent must have the primal's shape: primal \[3\], "
                                               r"tangent \[4\]"):
            fwAD.make_dual(x, tp.randn(4))
        with pytest.raises(ValueError, match="make_dual: expected primal to be a floating-point tensor, got int64"):
            fwAD.make_dual(tp.arange(3), x)
        with pytest.raises(ValueError, match="make_dual: expected tangent to be a floating-point tensor, got int64"):
            fwAD.make_dual(x, tp.arange(3))
        with pytest.raises(TypeError, match="make_dual"):
            fwAD.make_dual(x, 1.0)


def test_op_without_formula_raises_naming_it():
    p = tp.full((4,), 0.5, dtype=tp.float64)
    with fwAD.dual_level():
        d = fwAD.make_dual(p, tp.ones(4, dtype=tp.float64))
        with pytest.raises(NotImplementedError, match="forward-mode AD: no tangent formula for 'bernoulli'"):
            tp.bernoulli(d)
        with pytest.raises(NotImplementedError, match="no tangent formula for 'scatter_reduce.two' with reduce='prod'"):
            tp.zeros(2, dtype=tp.float64).scatter_reduce(0, tp.tensor([0, 1, 1, 0]), d, "prod")
        with pytest.raises(NotImplementedError, match="'cumprod' needs an input without zeros"):
            tp.cumprod(d * tp.tensor([1.0, 0.0, 1.0, 1.0], dtype=tp.float64), 0)


def test_inplace_ops_update_the_tangent():
    xs = _inputs([((3, 4), N), ((3, 4), N)], 5)
    ts = _inputs([((3, 4), N), ((3, 4), N)], 6)

    def f(L, x, y):
        z = x.clone()
        z.mul_(y)
        z.add_(x, alpha=2.0)
        z.exp_()
        z[0].copy_(y[1])
        z[:, 1].zero_()
        return z

    _, tout = tp.func.jvp(lambda *a: f(tp, *a), tuple(_tp(xs)), tuple(_tp(ts)))
    _, ttout = torch.func.jvp(lambda *a: f(torch, *a), tuple(map(torch.tensor, xs)), tuple(map(torch.tensor, ts)))
    np.testing.assert_allclose(_np(tout), ttout.numpy(), rtol=1e-12)


def test_inplace_on_plain_tensor_with_dual_operand():
    with fwAD.dual_level():
        y = fwAD.make_dual(tp.ones(3, dtype=tp.float64), tp.full((3,), 2.0, dtype=tp.float64))
        z = tp.zeros(3, dtype=tp.float64)
        z.add_(y * 3)
        np.testing.assert_allclose(_np(fwAD.unpack_dual(z).tangent), [6.0, 6.0, 6.0])


def test_dropout_tangent_uses_the_mask():
    x, t = tp.randn(200, dtype=tp.float64) + 3, tp.randn(200, dtype=tp.float64)
    tp.manual_seed(0)
    out, tout = tp.func.jvp(lambda a: tp.nn.functional.dropout(a, p=0.3, training=True), (x,), (t,))
    kept = _np(out) != 0
    assert 0 < kept.sum() < 200
    np.testing.assert_allclose(_np(tout), np.where(kept, _np(t) / 0.7, 0.0), rtol=1e-12)
    _, tout_eval = tp.func.jvp(lambda a: tp.nn.functional.dropout(a, p=0.3, training=False), (x,), (t,))
    np.testing.assert_array_equal(_np(tout_eval), _np(t))


def test_batch_norm_eval_tangent_vs_torch():
    rng = np.random.default_rng(3)
    x, t, w, b, tw = (rng.standard_normal(s) for s in [(4, 3, 2), (4, 3, 2), (3,), (3,), (3,)])
    rm, rv = rng.standard_normal(3), rng.uniform(0.5, 2, 3)

    def f(L, x, w):
        return F(L).batch_norm(x, L.tensor(rm), L.tensor(rv), w, L.tensor(b), training=False)

    _, tout = tp.func.jvp(lambda *a: f(tp, *a), (tp.tensor(x), tp.tensor(w)), (tp.tensor(t), tp.tensor(tw)))
    _, ttout = torch.func.jvp(lambda *a: f(torch, *a), (torch.tensor(x), torch.tensor(w)),
                              (torch.tensor(t), torch.tensor(tw)))
    np.testing.assert_allclose(_np(tout), ttout.numpy(), rtol=1e-10)


def test_amax_ties_share_the_tangent_like_torch():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    t = np.array([[1.0, 2.0, 4.0], [1.0, 2.0, 6.0]])
    _, tout = tp.func.jvp(lambda a: tp.amax(a, dim=1), (tp.tensor(x),), (tp.tensor(t),))
    _, ttout = torch.func.jvp(lambda a: torch.amax(a, dim=1), (torch.tensor(x),), (torch.tensor(t),))
    np.testing.assert_allclose(_np(tout), ttout.numpy())
    np.testing.assert_allclose(_np(tout), [3.0, 3.0])


def test_float32_tangent():
    x, t = tp.randn(3, 4), tp.randn(3, 4)
    out, tout = tp.func.jvp(lambda a: (a.sin() @ a.t()).softmax(-1), (x,), (t,))
    assert tout.dtype == tp.float32
    _, ttout = torch.func.jvp(lambda a: (a.sin() @ a.t()).softmax(-1), (torch.tensor(x.numpy()),),
                              (torch.tensor(t.numpy()),))
    np.testing.assert_allclose(tout.numpy(), ttout.numpy(), rtol=1e-4, atol=1e-6)


# ---------------------------------------------------------------------------
# tp.func
def _mlp(L, x, w):
    return (L.tanh(x @ w).softmax(-1) * x.sum(-1, keepdim=True)).sum()


def test_jvp_structures_and_aux():
    x, y = tp.randn(3, dtype=tp.float64), tp.randn(3, dtype=tp.float64)
    tx, ty = tp.ones(3, dtype=tp.float64), tp.zeros(3, dtype=tp.float64)
    (o1, o2), (t1, t2), aux = tp.func.jvp(lambda a, b: ((a * b, a.exp()), "aux"), (x, y), (tx, ty), has_aux=True)
    assert aux == "aux"
    np.testing.assert_allclose(_np(t1), _np(y))
    np.testing.assert_allclose(_np(t2), np.exp(_np(x)))
    # An output not depending on the inputs has a zero tangent.
    _, t = tp.func.jvp(lambda a: tp.ones(2, dtype=tp.float64), (x,), (tx,))
    np.testing.assert_array_equal(_np(t), [0.0, 0.0])


def test_jvp_errors():
    x = tp.randn(3)
    with pytest.raises(RuntimeError, match="jvp.*expected primals to be a tuple"):
        tp.func.jvp(tp.sin, x, (x,))
    with pytest.raises(RuntimeError, match=r"jvp: tangents\[0\] has shape \(2,\) but primals\[0\] has shape \(3,\)"):
        tp.func.jvp(tp.sin, (x,), (tp.randn(2),))
    with pytest.raises(RuntimeError, match="jvp: expected tangents to have the same structure"):
        tp.func.jvp(tp.sin, (x,), (x, x))


def test_vjp_and_grad_vs_torch():
    rng = np.random.default_rng(7)
    x, w, u = rng.standard_normal((4, 3)), rng.standard_normal((3, 5)), rng.standard_normal((4, 5))
    out, fn = tp.func.vjp(lambda a, b: tp.tanh(a @ b), tp.tensor(x), tp.tensor(w))
    tout, tfn = torch.func.vjp(lambda a, b: torch.tanh(a @ b), torch.tensor(x), torch.tensor(w))
    assert not out.requires_grad
    for g, tg in zip(fn(tp.tensor(u)), tfn(torch.tensor(u))):
        np.testing.assert_allclose(_np(g), tg.numpy(), rtol=1e-12)
    g = tp.func.grad(lambda a, b: _mlp(tp, a, b), argnums=(0, 1))(tp.tensor(x), tp.tensor(w))
    tg = torch.func.grad(lambda a, b: _mlp(torch, a, b), argnums=(0, 1))(torch.tensor(x), torch.tensor(w))
    # The gradient in w is zero mathematically (softmax rows sum to 1): both libraries give
    # rounding noise of ~1e-18 there, which only an absolute tolerance can compare.
    for a, b in zip(g, tg):
        np.testing.assert_allclose(_np(a), b.numpy(), rtol=1e-12, atol=1e-15)
    g1, (val, aux) = tp.func.grad_and_value(lambda a: (_mlp(tp, a, tp.tensor(w)), 7), has_aux=True)(tp.tensor(x))
    np.testing.assert_allclose(_np(g1), tg[0].numpy(), rtol=1e-12)
    assert aux == 7 and float(val) == pytest.approx(float(_mlp(torch, torch.tensor(x), torch.tensor(w))))


def test_grad_errors():
    with pytest.raises(RuntimeError, match=r"grad\(f\): expected f\(\*args\) to return a scalar Tensor, got shape \(3,\)"):
        tp.func.grad(tp.sin)(tp.randn(3))
    with pytest.raises(RuntimeError, match="grad: argnums 2 out of range"):
        tp.func.grad(lambda a: a.sum(), argnums=2)(tp.randn(3))
    with pytest.raises(RuntimeError, match="vjp_fn: cotangents\\[0\\] has shape"):
        tp.func.vjp(tp.sin, tp.randn(3))[1](tp.randn(4))


def test_jacobians_vs_torch():
    rng = np.random.default_rng(11)
    x, w = rng.standard_normal(4), rng.standard_normal((4, 3))
    f = lambda L, a, b: L.nn.functional.softmax(L.sin(a) @ b, dim=0)  # noqa: E731
    for ours, theirs in [(tp.func.jacrev, torch.func.jacrev), (tp.func.jacfwd, torch.func.jacfwd)]:
        j = ours(lambda a, b: f(tp, a, b), argnums=(0, 1))(tp.tensor(x), tp.tensor(w))
        tj = theirs(lambda a, b: f(torch, a, b), argnums=(0, 1))(torch.tensor(x), torch.tensor(w))
        for a, b in zip(j, tj):
            assert tuple(a.shape) == tuple(b.shape)
            np.testing.assert_allclose(_np(a), b.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("outer", ["jacfwd", "jacrev"])
def test_hessian_forward_over_reverse_vs_torch(outer):
    # jacfwd(grad(f)) pushes tangents through the derivative formulas of the
    # backward pass (forward-over-reverse); jacrev(grad(f)) is reverse-over-reverse.
    rng = np.random.default_rng(12)
    x = rng.standard_normal(5)
    w = rng.standard_normal((5, 3))

    def f(L, a):
        h = L.nn.functional.layer_norm((a.exp() * a).reshape(1, 5) @ L.tensor(w), (3,))
        return (L.tanh(h).log_softmax(-1) * L.sigmoid(h)).sum() + (a ** 3).prod() / L.cosh(a).sum()

    hess = getattr(tp.func, outer)(tp.func.grad(lambda a: f(tp, a)))(tp.tensor(x))
    thess = torch.func.jacfwd(torch.func.grad(lambda a: f(torch, a)))(torch.tensor(x))
    np.testing.assert_allclose(_np(hess), thess.numpy(), rtol=1e-9, atol=1e-11)


def test_hessian_vector_product_reverse_over_forward():
    rng = np.random.default_rng(13)
    x, v = rng.standard_normal(4), rng.standard_normal(4)
    f = lambda L, a: (L.sin(a) * a.exp()).sum() + (a @ a) ** 2  # noqa: E731
    _, vjp_fn = tp.func.vjp(lambda a: tp.func.jvp(lambda b: f(tp, b), (a,), (tp.tensor(v),))[1], tp.tensor(x))
    (hvp,) = vjp_fn(tp.tensor(1.0, dtype=tp.float64))
    thess = torch.func.hessian(lambda a: f(torch, a))(torch.tensor(x))
    np.testing.assert_allclose(_np(hvp), thess.numpy() @ v, rtol=1e-10)


def test_compiled_function_inside_a_dual_level_keeps_tangents():
    # Regression: the compiled call bypassed the dispatcher hook, so results of a
    # tp.compile'd function had no tangent (silently).
    import tensorplay.autograd.forward_ad as fwAD

    def f(x):
        return (x * x).sin().sum(-1) + x[:, 0]

    cf = tp.compile(f)
    x, t = tp.randn(3, 4, dtype=tp.float64), tp.randn(3, 4, dtype=tp.float64)
    cf(x)  # compiled and cached before the dual level
    with fwAD.dual_level():
        y = cf(fwAD.make_dual(x, t))
        got = fwAD.unpack_dual(y).tangent
    _, want = tp.func.jvp(f, (x,), (t,))
    assert got is not None
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    strict = tp.compile(f, strict_native=True)
    with fwAD.dual_level():
        with pytest.raises(tp.compiler.BackendError, match="forward-mode AD"):
            strict(fwAD.make_dual(x, t))
