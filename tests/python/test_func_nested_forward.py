"""Forward over forward in tp.func: jvp of jvp, jacfwd(jacfwd(f)) and mixes
with reverse transforms, against torch.func on float64 inputs (and analytic
values where torch is missing).

Dual levels do not nest (csrc/autograd/forward_ad.cpp keeps one tangent table),
so a tp.func.jvp called while a level is open computes its tangent J t by the
double-vjp trick on the reverse engine, whose operators the open level
differentiates (tp.func._jvp_in_open_level). Also: reverse transforms' detached
outputs (vjp's primal output, grad_and_value's value, has_aux outputs) keep the
open level's tangent.
"""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.autograd.forward_ad as fwAD

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

X = [0.3, -0.8, 1.5]
V = [1.0, 2.0, 0.5]
W = [-0.5, 0.25, 2.0]


def _np(t):
    return np.asarray(t.detach().numpy(), dtype=np.float64)


def _both(run, *arrays):
    """run(L, *tensors) for L = tp and torch, compared leaf by leaf; returns tp's result."""
    ours = run(tp, *[tp.tensor(np.array(a, dtype=np.float64)) for a in arrays])
    if torch is None:
        return ours
    theirs = run(torch, *[torch.tensor(np.array(a, dtype=np.float64)) for a in arrays])
    flat = lambda r: list(r) if isinstance(r, (tuple, list)) else [r]  # noqa: E731
    assert len(flat(ours)) == len(flat(theirs))
    for o, t in zip(flat(ours), flat(theirs)):
        assert tuple(o.shape) == tuple(t.shape)
        np.testing.assert_allclose(_np(o), t.detach().numpy(), rtol=1e-10, atol=1e-12)
    return ours


def f(x):
    return (x ** 3).sum() * x.sin() + x.exp() * x[0]


def g(x):  # scalar
    return (x ** 3).sum() * x[0] + (x.sin() * x.cos()).sum()


def test_jacfwd_of_jacfwd_is_the_hessian():
    x = np.array(X)
    H = tp.func.jacfwd(tp.func.jacfwd(lambda a: (a ** 3).sum() * a[0]))(tp.tensor(x))
    want = np.diag(6 * x * x[0]) + np.eye(3)[0][:, None] * 3 * x ** 2 + (np.eye(3)[0][:, None] * 3 * x ** 2).T
    want[0, 0] = 12 * x[0] ** 2
    np.testing.assert_allclose(_np(H), want, rtol=1e-12)
    assert not H.requires_grad


@needs_torch
def test_jvp_of_jvp_matches_torch():
    _both(lambda L, x, v, w: L.func.jvp(lambda y: L.func.jvp(f, (y,), (v,))[1], (x,), (w,)), X, V, W)


@needs_torch
@pytest.mark.parametrize("outer,inner", [("jacfwd", "jacfwd"), ("jacfwd", "jacrev"), ("jacrev", "jacfwd")])
def test_jacobians_of_jacobians_match_torch(outer, inner):
    _both(lambda L, x: getattr(L.func, outer)(getattr(L.func, inner)(f))(x), X)


@needs_torch
def test_third_order_and_reverse_on_top():
    _both(lambda L, x: L.func.jacfwd(L.func.jacfwd(L.func.jacfwd(g)))(x), X)
    _both(lambda L, x: L.func.grad(lambda y: L.func.jacfwd(L.func.jacfwd(g))(y).sum())(x), X)
    _both(lambda L, x: L.func.jacfwd(L.func.jacrev(L.func.jacfwd(g)))(x), X)


@needs_torch
def test_closed_over_and_several_arguments():
    # the outer derivative flows through the inner function's closure
    _both(lambda L, x: L.func.jacfwd(lambda y: L.func.jacfwd(lambda z: (z * y).sin())(y))(x), X)
    _both(lambda L, x, v: L.func.jacfwd(L.func.jacfwd(lambda a, b: (a * b.exp()).sum() * a, argnums=(0, 1)),
                                        argnums=1)(x, v), X, V)


@needs_torch
def test_has_aux_and_outputs_of_reverse_transforms_keep_tangents():
    # inner jvp's aux, inside an outer jvp
    _both(lambda L, x, v: L.func.jvp(lambda y: L.func.jvp(lambda z: (z.exp(), z.cos()), (y,), (v,), has_aux=True)[2],
                                     (x,), (v,))[1], X, V)
    # a reverse transform's detached outputs inside a forward one
    _both(lambda L, x, v: L.func.jvp(lambda y: L.func.grad(lambda z: ((z ** 3).sum(), z.sin()), has_aux=True)(y)[1],
                                     (x,), (v,))[1], X, V)
    _both(lambda L, x, v: L.func.jvp(lambda y: L.func.grad_and_value(g)(y)[1], (x,), (v,))[1], X, V)
    _both(lambda L, x, v: L.func.jvp(lambda y: L.func.vjp(lambda z: z.exp(), y)[0], (x,), (v,))[1], X, V)


def test_jvp_inside_a_user_dual_level():
    # tp.func.jvp inside `with dual_level()` used to raise; the user's tangent flows through it
    x, v, w = (tp.tensor(np.array(a)) for a in (X, V, W))
    with fwAD.dual_level():
        d = fwAD.make_dual(x, w)
        out, t = tp.func.jvp(lambda y: y ** 3, (d,), (v,))
        np.testing.assert_allclose(_np(t), 3 * np.array(X) ** 2 * np.array(V), rtol=1e-12)
        # d/d(outer) of 3 x^2 v along w is 6 x v w
        np.testing.assert_allclose(_np(fwAD.unpack_dual(t).tangent), 6 * np.array(X) * np.array(V) * np.array(W),
                                   rtol=1e-12)
        np.testing.assert_allclose(_np(fwAD.unpack_dual(out).tangent), 3 * np.array(X) ** 2 * np.array(W),
                                   rtol=1e-12)
    assert not t.requires_grad and not out.requires_grad


def test_inner_output_independent_of_input():
    H = tp.func.jacfwd(tp.func.jacfwd(lambda a: tp.ones(2, dtype=tp.float64) * 3))(tp.tensor(np.array(X)))
    assert tuple(H.shape) == (2, 3, 3) and not np.any(_np(H))
    H = tp.func.jacfwd(tp.func.jacfwd(lambda a: a * 2))(tp.tensor(np.array(X)))  # linear: zero second derivative
    assert tuple(H.shape) == (3, 3, 3) and not np.any(_np(H))


# Operators through jacfwd(jacfwd(f)), against torch's reverse-over-reverse (torch 2.13's own
# jacfwd(jacfwd(layer_norm)) and nested torch.autograd.functional.jvp of layer_norm disagree with finite
# differences; its jacrev(jacrev) agrees).
OPS = {
    "softmax": (lambda L, x: L.nn.functional.softmax(x, dim=-1), (2, 3)),
    "layer_norm": (lambda L, x: L.nn.functional.layer_norm(x, (3,)), (2, 3)),
    "max_pool2d": (lambda L, x: L.nn.functional.max_pool2d(x, 2) ** 2, (1, 1, 4, 4)),
    "conv2d": (lambda L, x: L.nn.functional.conv2d(x, x[:, :, :2, :2].transpose(0, 1) * 1), (1, 1, 3, 3)),
    "gelu": (lambda L, x: L.nn.functional.gelu(x), (4,)),
    "prod": (lambda L, x: x.prod(0), (2, 3)),
    "logsumexp": (lambda L, x: x.logsumexp(0) * x, (3,)),
    "linalg.inv": (lambda L, x: L.linalg.inv(x + 3 * L.eye(3, dtype=x.dtype)), (3, 3)),
    "where/index": (lambda L, x: L.where(x > 0, x ** 2, x ** 3)[L.tensor([0, 2, 2])], (4,)),
}


@needs_torch
@pytest.mark.parametrize("name", list(OPS))
def test_operators_forward_over_forward(name):
    fn, shape = OPS[name]
    a = np.random.default_rng(0).standard_normal(shape) + 0.1
    ours = tp.func.jacfwd(tp.func.jacfwd(lambda x: fn(tp, x)))(tp.tensor(a))
    theirs = torch.func.jacrev(torch.func.jacrev(lambda x: fn(torch, x)))(torch.tensor(a))
    np.testing.assert_allclose(_np(ours), theirs.numpy(), rtol=1e-10, atol=1e-12)


def test_layer_norm_forward_over_forward_matches_finite_differences():
    a = np.random.default_rng(0).standard_normal((2, 3)) + 0.1
    ln = lambda x: tp.nn.functional.layer_norm(x, (3,))  # noqa: E731
    H = _np(tp.func.jacfwd(tp.func.jacfwd(ln))(tp.tensor(a)))
    eps = 1e-6
    fd = np.zeros_like(H)
    for idx in np.ndindex(*a.shape):
        p, m = a.copy(), a.copy()
        p[idx] += eps
        m[idx] -= eps
        jp, jm = (_np(tp.func.jacrev(ln)(tp.tensor(q))) for q in (p, m))
        fd[(Ellipsis,) + idx] = (jp - jm) / (2 * eps)
    np.testing.assert_allclose(H, fd, rtol=1e-6, atol=1e-6)
