"""F.unfold / F.fold and nn.Unfold / nn.Fold against PyTorch: values,
gradients (against torch and finite differences), tp.compile, CUDA, and the
errors for inconsistent arguments."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F

torch = pytest.importorskip("torch")

CONFIGS = [
    dict(kernel_size=3),
    dict(kernel_size=1),
    dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 3)),
    dict(kernel_size=2, stride=2),                    # non-overlapping patches (ViT style)
    dict(kernel_size=3, padding=1, stride=1, dilation=2),
    dict(kernel_size=(7, 9)),                         # one block covering the image
]
SIZE = (7, 9)


def _rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("kw", CONFIGS)
@pytest.mark.parametrize("batched", [True, False])
def test_unfold_and_fold_match_torch(kw, batched):
    x = _rand((2, 3) + SIZE if batched else (3,) + SIZE)
    a = F.unfold(tp.from_numpy(x), **kw)
    b = torch.nn.functional.unfold(torch.from_numpy(x), **kw)
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    cols = _rand(tuple(b.shape), 1)
    c = F.fold(tp.from_numpy(cols), SIZE, **kw)
    d = torch.nn.functional.fold(torch.from_numpy(cols), SIZE, **kw)
    assert tuple(c.shape) == tuple(d.shape)
    np.testing.assert_allclose(c.numpy(), d.numpy(), rtol=1e-6, atol=1e-6)
    assert c.is_contiguous()


@pytest.mark.parametrize("kw", CONFIGS[:4])
def test_gradients_match_torch(kw):
    x = _rand((2, 2) + SIZE)
    xt = tp.from_numpy(x).requires_grad_(True)
    xr = torch.from_numpy(x).requires_grad_(True)
    ut, ur = F.unfold(xt, **kw), torch.nn.functional.unfold(xr, **kw)
    g = _rand(tuple(ur.shape), 2)
    ut.backward(tp.from_numpy(g))
    ur.backward(torch.from_numpy(g))
    np.testing.assert_allclose(xt.grad.numpy(), xr.grad.numpy(), rtol=1e-6, atol=1e-6)
    cols = _rand(tuple(ur.shape), 3)
    ct = tp.from_numpy(cols).requires_grad_(True)
    cr = torch.from_numpy(cols).requires_grad_(True)
    ft, fr = F.fold(ct, SIZE, **kw), torch.nn.functional.fold(cr, SIZE, **kw)
    gi = _rand(tuple(fr.shape), 4)
    ft.backward(tp.from_numpy(gi))
    fr.backward(torch.from_numpy(gi))
    np.testing.assert_allclose(ct.grad.numpy(), cr.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_gradcheck_float64():
    kw = dict(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    x = tp.from_numpy(np.random.default_rng(5).standard_normal((1, 2, 5, 6))).requires_grad_(True)
    assert tp.autograd.gradcheck(lambda x: F.unfold(x, **kw).sin(), (x,))
    n = F.unfold(x.detach(), **kw).shape
    c = tp.from_numpy(np.random.default_rng(6).standard_normal(tuple(n))).requires_grad_(True)
    assert tp.autograd.gradcheck(lambda c: F.fold(c, (5, 6), **kw).sin(), (c,))


def test_fold_is_the_adjoint_of_unfold():
    kw = dict(kernel_size=3, dilation=2, padding=2, stride=2)
    x, y = tp.from_numpy(_rand((1, 2) + SIZE)), None
    u = F.unfold(x, **kw)
    y = tp.from_numpy(_rand(tuple(u.shape), 7))
    lhs = float((u * y).sum())
    rhs = float((x * F.fold(y, SIZE, **kw)).sum())
    assert abs(lhs - rhs) <= 1e-4 * max(1.0, abs(lhs))


def test_convolution_by_unfold_matches_conv2d_and_compiles():
    """The textbook use: conv2d as unfold + matmul, trained under tp.compile."""
    x = tp.from_numpy(_rand((2, 3, 8, 8)))
    w = tp.from_numpy(_rand((4, 3, 3, 3), 8)).requires_grad_(True)

    def conv(x, w):
        cols = F.unfold(x, 3, padding=1)                          # (N, 27, 64)
        return (w.reshape(4, -1) @ cols).reshape(2, 4, 8, 8)

    np.testing.assert_allclose(conv(x, w).detach().numpy(), F.conv2d(x, w, padding=1).detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    loss = lambda x, w: conv(x, w).tanh().sum()  # noqa: E731
    closs = tp.compile(loss)
    a = closs(x, w)
    a.backward()
    g_c = w.grad.clone()
    w.grad = None
    b = loss(x, w)
    b.backward()
    np.testing.assert_allclose(a.item(), b.item(), rtol=1e-5)
    np.testing.assert_allclose(g_c.numpy(), w.grad.numpy(), rtol=1e-4, atol=1e-5)
    cf = tp.compile(lambda c: F.fold(c, (8, 8), 3, padding=1))
    c = F.unfold(x, 3, padding=1)
    np.testing.assert_allclose(cf(c).numpy(), F.fold(c, (8, 8), 3, padding=1).numpy(), rtol=1e-6, atol=1e-6)


def test_modules():
    x = tp.from_numpy(_rand((1, 2, 6, 6)))
    u, f = tp.nn.Unfold(2, stride=2), tp.nn.Fold((6, 6), 2, stride=2)
    assert "kernel_size=2" in repr(u) and "output_size=(6, 6)" in repr(f)
    np.testing.assert_array_equal(f(u(x)).numpy(), x.numpy())    # non-overlapping: fold inverts unfold


@pytest.mark.parametrize("call, match", [
    (lambda: F.unfold(tp.ones(2, 3), 2), "3-D .unbatched. or 4-D"),
    (lambda: F.unfold(tp.ones(1, 1, 3, 3), 4), "gives .* sliding blocks"),
    (lambda: F.unfold(tp.ones(1, 1, 3, 3), 2, stride=0), "stride must be at least 1"),
    (lambda: F.unfold(tp.ones(1, 1, 3, 3), 2, padding=-1), "padding must be at least 0"),
    (lambda: F.unfold(tp.ones(1, 1, 3, 3), (1, 2, 3)), "kernel_size must be an int or a pair"),
    (lambda: F.fold(tp.ones(1, 5, 4), (3, 3), 2), r"dimension 1 \(5\) must be divisible"),
    (lambda: F.fold(tp.ones(1, 4, 5), (3, 3), 2), "has 5 blocks .* give 2 x 2 = 4"),
    (lambda: F.fold(tp.ones(4), (3, 3), 2), "2-D .unbatched. or 3-D"),
    (lambda: F.fold(tp.ones(1, 4, 4), (0, 3), 2), "output_size must be a positive"),
])
def test_bad_arguments_raise_clearly(call, match):
    with pytest.raises((RuntimeError, ValueError, TypeError), match=match):
        call()


@pytest.mark.skipif(not tp.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu():
    kw = CONFIGS[2]
    x = tp.from_numpy(_rand((2, 3) + SIZE))
    u = F.unfold(x, **kw)
    np.testing.assert_array_equal(F.unfold(x.cuda(), **kw).cpu().numpy(), u.numpy())
    np.testing.assert_allclose(F.fold(u.cuda(), SIZE, **kw).cpu().numpy(), F.fold(u, SIZE, **kw).numpy(),
                               rtol=1e-6, atol=1e-6)


# ---- Tensor.unfold itself (regressions found through F.unfold) ----
@pytest.mark.parametrize("chain", [
    lambda t: t.unfold(1, 2, 1).unfold(0, 2, 1),       # windows of windows: overlapping input
    lambda t: t.unfold(1, 3, 1).unfold(2, 2, 1),
    lambda t: t[:, :1].expand(4, 3).unfold(1, 2, 1),    # windows of an expanded view
    lambda t: t[:, :1].expand(4, 3).as_strided((2, 2), (1, 1)),
])
def test_gradient_through_views_of_overlapping_views(chain):
    """Once each: the gradient of a window of windows used to count every
    overlap twice (as_strided's backward on an overlapping input)."""
    x = _rand((4, 5))
    a, b = tp.from_numpy(x).requires_grad_(True), torch.from_numpy(x).requires_grad_(True)
    ua, ub = chain(a), chain(b)
    g = _rand(tuple(ub.shape), 9)
    ua.backward(tp.from_numpy(g))
    ub.backward(torch.from_numpy(g))
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_compiled_unfold_of_unfold_and_of_offset_inputs():
    """Compiled unfold used to replay the capture's absolute strides and storage
    offset: wrong values for an unfold of an unfold, and for a slice of a
    larger tensor at another offset than the first call's."""
    x = tp.from_numpy(_rand((2, 3, 8, 8)))
    f = lambda x: x.unfold(2, 3, 1).unfold(3, 3, 1).permute(0, 1, 4, 5, 2, 3).reshape(2, 27, 36) * 1  # noqa: E731
    np.testing.assert_array_equal(tp.compile(f)(x).numpy(), f(x).numpy())
    base = tp.from_numpy(np.arange(40, dtype=np.float32).reshape(8, 5))
    cf = tp.compile(lambda t: t.unfold(0, 2, 1) * 1)
    for t in (base[2:6], base[0:4], base[4:8]):
        np.testing.assert_array_equal(cf(t).numpy(), t.unfold(0, 2, 1).numpy())


@pytest.mark.parametrize("step", [1, 2])
def test_compiled_unfold_with_dynamic_sizes(step):
    cf = tp.compile(lambda t: (t.unfold(1, 3, step) * 2).sum(-1), dynamic=True)
    for n in (9, 12, 7, 16):
        t = tp.from_numpy(_rand((2, n), n))
        np.testing.assert_allclose(cf(t).numpy(), (t.unfold(1, 3, step) * 2).sum(-1).numpy(), rtol=1e-6)


def test_unfold_forward_mode_matches_finite_differences():
    x, v = tp.from_numpy(_rand((3, 7)).astype(np.float64)), tp.from_numpy(_rand((3, 7), 1).astype(np.float64))
    f = lambda t: F.unfold(t.reshape(1, 1, 3, 7), (2, 3), stride=(1, 2)).sin()  # noqa: E731
    _, jv = tp.func.jvp(f, (x,), (v,))
    eps = 1e-6
    fd = (f(x + eps * v) - f(x - eps * v)) / (2 * eps)
    np.testing.assert_allclose(jv.numpy(), fd.numpy(), rtol=1e-6, atol=1e-8)
