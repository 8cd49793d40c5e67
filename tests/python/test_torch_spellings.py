"""PyTorch spellings added for ported code: top-level forms of nn.functional
operations (with integer reductions), float classification and bits (frexp,
nextafter), the legacy Cholesky/triangular solvers, in-place scatter_reduce_
and small helpers -- values (and gradients where they exist) against torch."""
import numpy as np
import pytest
import torch

import tensorplay as tp

RNG = np.random.default_rng(5)


def pair(*shape, positive=False, dtype=np.float64):
    a = RNG.standard_normal(shape).astype(dtype)
    if positive:
        a = np.abs(a) + 0.1
    return tp.tensor(a), torch.tensor(a)


def close(a, b, **kw):
    a = a.detach().numpy() if isinstance(a, tp.Tensor) else np.asarray(a)
    b = b.detach().numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
    np.testing.assert_allclose(a, b, rtol=kw.get("rtol", 1e-10), atol=kw.get("atol", 1e-12))


TOP_LEVEL = [
    ("hardshrink", lambda m, x: m.hardshrink(x, 0.3), (3, 4)),
    ("pixel_shuffle", lambda m, x: m.pixel_shuffle(x, 2), (1, 8, 3, 3)),
    ("pixel_unshuffle", lambda m, x: m.pixel_unshuffle(x, 2), (1, 2, 4, 6)),
    ("channel_shuffle", lambda m, x: m.channel_shuffle(x, 2), (1, 4, 2, 2)),
    ("cosine_similarity", lambda m, x: m.cosine_similarity(x, x.flip(0), 1), (4, 5)),
    ("pairwise_distance", lambda m, x: m.pairwise_distance(x, x.flip(0)), (4, 5)),
    ("pdist", lambda m, x: m.pdist(x), (5, 3)),
    ("avg_pool1d", lambda m, x: m.avg_pool1d(x, 3, 2, 1), (2, 3, 9)),
    ("adaptive_avg_pool1d", lambda m, x: m.adaptive_avg_pool1d(x, 4), (2, 3, 9)),
    ("max_pool1d", lambda m, x: m.max_pool1d(x, 3, 2, 1), (2, 3, 9)),
    ("max_pool3d", lambda m, x: m.max_pool3d(x, 2), (1, 2, 4, 4, 4)),
    ("adaptive_max_pool1d", lambda m, x: m.adaptive_max_pool1d(x, 3)[0], (2, 3, 9)),
    ("celu", lambda m, x: m.celu(x, 0.7), (6,)),
    ("selu", lambda m, x: m.selu(x), (6,)),
    ("threshold", lambda m, x: m.threshold(x, 0.1, -2.0), (6,)),
    ("constant_pad_nd", lambda m, x: m.constant_pad_nd(x, [1, 2, 0, 1], 3.0), (2, 3)),
    ("group_norm", lambda m, x: m.group_norm(x, 2, None, None, 1e-5, True), (2, 4, 3)),
    ("instance_norm", lambda m, x: m.instance_norm(x, None, None, None, None, True, 0.1, 1e-5, False), (2, 3, 5)),
    ("conv3d", lambda m, x: m.conv3d(x, m.ones(3, 2, 2, 2, 2, dtype=x.dtype)), (1, 2, 3, 3, 3)),
    ("adjoint", lambda m, x: m.adjoint(x), (2, 3, 4)),
]


@pytest.mark.parametrize("name,f,shape", TOP_LEVEL, ids=[c[0] for c in TOP_LEVEL])
def test_top_level_functional_spellings(name, f, shape):
    a, b = pair(*shape)
    a.requires_grad_(True)
    b.requires_grad_(True)
    r, t = f(tp, a), f(torch, b)
    close(r, t)
    g = RNG.standard_normal(tuple(t.shape))
    (r * tp.tensor(g)).sum().backward()
    (t * torch.tensor(g)).sum().backward()
    # torch's float64 celu gradient is only float32-accurate (ours matches
    # exp(x / alpha) computed in high precision to 1 ulp)
    close(a.grad, b.grad, rtol=1e-7 if name == "celu" else 1e-10)


def test_celu_gradient_is_exact_in_float64():
    v = np.array([-1.0, -0.2, -3.0, 0.4])
    x = tp.tensor(v, requires_grad=True)
    tp.celu(x, 0.7).sum().backward()
    exact = np.where(v < 0, np.exp(v / 0.7), 1.0)
    np.testing.assert_allclose(x.grad.numpy(), exact, rtol=4e-16)


def test_prelu_bilinear_and_conv_transpose3d():
    x, xt = pair(2, 3, 4)
    w, wt = pair(3)
    close(tp.prelu(x, w), torch.prelu(xt, wt))
    close(x.prelu(w), xt.prelu(wt))
    a, at = pair(4, 3)
    b, bt = pair(4, 2)
    W, Wt = pair(5, 3, 2)
    close(tp.bilinear(a, b, W), torch.bilinear(at, bt, Wt))
    v, vt = pair(1, 2, 3, 3, 3)
    k, kt = pair(2, 3, 2, 2, 2)
    close(tp.conv_transpose3d(v, k, stride=2), torch.conv_transpose3d(vt, kt, stride=2))


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_losses_with_integer_reductions(reduction):
    x1, t1 = pair(6)
    x2, t2 = pair(6)
    y = np.sign(RNG.standard_normal(6))
    yt, ytp = torch.tensor(y), tp.tensor(y)
    close(tp.margin_ranking_loss(x1, x2, ytp, 0.2, reduction), torch.margin_ranking_loss(t1, t2, yt, 0.2, reduction))
    close(tp.hinge_embedding_loss(x1, ytp, 1.0, reduction), torch.hinge_embedding_loss(t1, yt, 1.0, reduction))
    m1, mt1 = pair(6, 4)
    m2, mt2 = pair(6, 4)
    close(tp.cosine_embedding_loss(m1, m2, ytp, 0.1, reduction),
          torch.cosine_embedding_loss(mt1, mt2, yt, 0.1, reduction))
    m3, mt3 = pair(6, 4)
    close(tp.triplet_margin_loss(m1, m2, m3, 1.0, 2.0, 1e-6, False, reduction),
          torch.triplet_margin_loss(mt1, mt2, mt3, 1.0, 2.0, 1e-6, False, reduction))
    lp, lpt = pair(6, positive=True)
    close(tp.poisson_nll_loss(x1, lp, True, False, 1e-8, reduction),
          torch.poisson_nll_loss(t1, lpt, True, False, 1e-8, reduction))
    logp = tp.log_softmax(m1, 1)
    q = tp.softmax(m2, 1)
    close(tp.kl_div(logp, q, reduction), torch.kl_div(torch.log_softmax(mt1, 1), torch.softmax(mt2, 1), reduction))
    with pytest.raises(ValueError, match="reduction"):
        tp.kl_div(logp, q, 7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_frexp_matches_torch(dtype):
    info = np.finfo(dtype)
    vals = np.array([0.0, -0.0, 1.0, -3.0, 0.75, 1e-3, info.tiny, info.tiny / 8, info.smallest_subnormal, info.max,
                     -info.max, np.inf, -np.inf, np.nan, 2.0 ** 20, 3.1e7], dtype=dtype)
    vals = np.concatenate([vals, RNG.standard_normal(200).astype(dtype) * 10.0 ** RNG.integers(-30, 30, 200)])
    vals = vals.astype(dtype)
    m, e = tp.frexp(tp.tensor(vals))
    tm, te = torch.frexp(torch.tensor(vals))
    np.testing.assert_array_equal(m.numpy(), tm.numpy())
    np.testing.assert_array_equal(e.numpy(), te.numpy())
    assert e.dtype == tp.int32 and m.dtype == tp.tensor(vals).dtype
    with pytest.raises(TypeError, match="frexp"):
        tp.frexp(tp.tensor([1, 2]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nextafter_matches_torch(dtype):
    info = np.finfo(dtype)
    special = [0.0, -0.0, 1.0, -1.0, info.max, -info.max, np.inf, -np.inf, np.nan, info.smallest_subnormal,
               -info.smallest_subnormal, info.tiny]
    a = np.array(special * len(special) + list(RNG.standard_normal(50)), dtype=dtype)
    b = np.array([s for s in special for _ in special] + list(RNG.standard_normal(50)), dtype=dtype)
    r = tp.nextafter(tp.tensor(a), tp.tensor(b))
    t = torch.nextafter(torch.tensor(a), torch.tensor(b))
    np.testing.assert_array_equal(r.numpy(), t.numpy())
    x = tp.tensor(a.copy())
    x.nextafter_(tp.tensor(b))
    np.testing.assert_array_equal(x.numpy(), t.numpy())


def test_classification():
    x = tp.tensor([1.0, float("inf"), -float("inf"), float("nan"), 0.0])
    xt = torch.tensor(x.numpy())
    for name in ("isposinf", "isneginf", "isreal"):
        np.testing.assert_array_equal(getattr(tp, name)(x).numpy(), getattr(torch, name)(xt).numpy())
        np.testing.assert_array_equal(getattr(x, name)().numpy(), getattr(xt, name)().numpy())
    i = tp.tensor([1, 2])
    assert not tp.isposinf(i).any() and tp.isposinf(i).dtype == tp.bool


def test_classification_and_frexp_compile():
    f = tp.compile(lambda x: tp.frexp(x)[0] + tp.isposinf(x).float())
    x = tp.tensor([3.0, float("inf"), 0.1, -7.0])
    np.testing.assert_array_equal(f(x).numpy(), (tp.frexp(x)[0] + tp.isposinf(x).float()).numpy())


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_and_inverse(upper):
    a = RNG.standard_normal((2, 4, 4))
    A = a @ a.transpose(0, 2, 1) + 4 * np.eye(4)
    B = RNG.standard_normal((2, 4, 3))
    At = torch.tensor(A)
    L = torch.linalg.cholesky(At, upper=upper)
    Lp = tp.tensor(L.numpy(), requires_grad=True)
    Bp = tp.tensor(B, requires_grad=True)
    Lt, Bt = L.clone().requires_grad_(True), torch.tensor(B, requires_grad=True)
    r, t = tp.cholesky_solve(Bp, Lp, upper), torch.cholesky_solve(Bt, Lt, upper)
    close(r, t, rtol=1e-9)
    close(r, np.linalg.solve(A, B), rtol=1e-9)
    r.sum().backward()
    t.sum().backward()
    close(Bp.grad, Bt.grad, rtol=1e-9)
    # The factor's gradient follows PyTorch's convention (L differentiated as a
    # full matrix in A = L L^T: the unread triangle gets values too).
    close(Lp.grad, Lt.grad, rtol=1e-8, atol=1e-10)
    close(tp.cholesky_inverse(tp.tensor(L.numpy()), upper), torch.cholesky_inverse(L, upper), rtol=1e-9)
    close(tp.tensor(B).cholesky_solve(tp.tensor(L.numpy()), upper), t, rtol=1e-9)


@pytest.mark.filterwarnings("ignore:torch.triangular_solve is deprecated")
@pytest.mark.parametrize("upper,transpose,unit", [(True, False, False), (False, True, False), (True, True, True)])
def test_triangular_solve(upper, transpose, unit):
    A = np.triu(RNG.standard_normal((3, 3))) + 3 * np.eye(3) if upper else np.tril(RNG.standard_normal((3, 3))) + \
        3 * np.eye(3)
    b = RNG.standard_normal((3, 2))
    r = tp.triangular_solve(tp.tensor(b), tp.tensor(A), upper, transpose, unit)
    t = torch.triangular_solve(torch.tensor(b), torch.tensor(A), upper, transpose, unit)
    close(r.solution, t.solution, rtol=1e-10)
    close(r.cloned_coefficient, t.cloned_coefficient)
    sol, coeff = r
    close(sol, t[0], rtol=1e-10)


def test_scatter_reduce_inplace():
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            base = RNG.standard_normal(5)
            src = RNG.standard_normal(6)
            idx = np.array([0, 1, 0, 4, 4, 1])
            x = tp.tensor(base)
            out = x.scatter_reduce_(0, tp.tensor(idx), tp.tensor(src), reduce, include_self=include_self)
            xt = torch.tensor(base)
            xt.scatter_reduce_(0, torch.tensor(idx), torch.tensor(src), reduce, include_self=include_self)
            assert out is x
            close(x, xt)
    leaf = tp.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError):
        leaf.scatter_reduce_(0, tp.tensor([0]), tp.ones(1), "sum")


def test_small_helpers():
    a, at = pair(5)
    b, bt = pair(5)
    close(tp.vdot(a, b), torch.vdot(at, bt))
    with pytest.raises(ValueError, match="vdot"):
        tp.vdot(tp.ones(2, 2), tp.ones(2, 2))
    close(tp.rsub(a, b, alpha=2), torch.rsub(at, bt, alpha=2))
    close(tp.rsub(a, 3.0), torch.rsub(at, 3.0))
    close(tp.fill(a, 2.5), torch.fill(at, 2.5))
    s = tp.scalar_tensor(3)
    assert s.dim() == 0 and s.dtype == tp.float32 and float(s) == 3.0
    assert tp.scalar_tensor(2, dtype=tp.int64).dtype == tp.int64
    e = tp.empty_strided((2, 3), (1, 2))
    assert tuple(e.shape) == (2, 3) and e.stride() == (1, 2)
    assert tp.empty_strided((0, 3), (3, 1)).numel() == 0
    with pytest.raises(ValueError, match="empty_strided"):
        tp.empty_strided((2, 3), (1,))
    assert tp.is_same_size(tp.ones(2, 3), tp.zeros(2, 3)) and not tp.ones(2).is_same_size(tp.ones(3))
    parts = tp.arange(10).split_with_sizes([3, 7])
    assert [p.numel() for p in parts] == [3, 7]
    with pytest.raises(ValueError, match="split_with_sizes"):
        tp.split_with_sizes(tp.arange(10), [3, 3])
    assert [p.numel() for p in tp.unsafe_chunk(tp.arange(10), 3)] == [4, 4, 2]
    assert [p.numel() for p in tp.unsafe_split(tp.arange(10), 4)] == [4, 4, 2]
    assert tp.typename(tp.ones(2)) == "tensorplay.FloatTensor" and tp.typename(3) == "int"
    tp.set_num_interop_threads(2)
    assert tp.get_num_interop_threads() == 2
    tp.set_num_interop_threads(1)
    x = tp.ones(4)
    tp.dropout_(x, 0.5, False)
    assert float(x.sum()) == 4.0
    thr = tp.tensor([-1.0, 0.5])
    tp.threshold_(thr, 0.0, 9.0)
    np.testing.assert_array_equal(thr.numpy(), [9.0, 0.5])
