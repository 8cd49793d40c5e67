"""native_batch_norm with training=False lowered to a pointwise function of the
running statistics (no extern call), fused with its neighbours, equal to eager
bit for bit, with the op's other two results (running mean, rstd) as eager
returns them. Training mode and affine=False still run as extern calls."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F


def same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())


def stats(c, dtype):
    return (tp.randn(c, dtype=dtype), (tp.rand(c, dtype=dtype) + 0.5), tp.randn(c, dtype=dtype), tp.randn(c, dtype=dtype))


@pytest.mark.parametrize("dtype", [tp.float32, tp.float64])
@pytest.mark.parametrize("shape", [(4, 3, 5, 2), (2, 6, 7), (3, 1, 4), (5, 2)])
def test_eval_batch_norm_fused_equals_eager(dtype, shape):
    x = tp.randn(*shape, dtype=dtype)
    rm, rv, w, b = stats(shape[1], dtype)
    f = lambda x: F.batch_norm(x * 2 - 1, rm, rv, w, b, training=False, eps=1e-3).relu() + 0.5
    cf = tp.compile(f, strict_native=True)
    same(cf(x), f(x))
    assert "// extern" not in cf.last_source
    assert "native_batch_norm" in cf.last_source  # lowered inside the region, not decomposed away


def test_eval_native_batch_norm_returns_all_three_results():
    x = tp.randn(3, 4, 6)
    rm, rv, w, b = stats(4, tp.float32)
    f = lambda x: tuple(tp.native_batch_norm(x + 1, w, b, rm, rv, False, 0.1, 1e-5))
    cf = tp.compile(f, strict_native=True)
    got, want = cf(x), f(x)
    assert len(got) == 3
    for g, w_ in zip(got, want):
        same(g, w_)
    assert "// extern" not in cf.last_source


def test_eval_module_and_training_mode_still_extern():
    m = nn.BatchNorm2d(3)
    m.running_mean.copy_(tp.randn(3))
    m.running_var.copy_(tp.rand(3) + 0.5)
    x = tp.randn(2, 3, 4, 4)
    m.eval()
    cf = tp.compile(lambda x: m(x).relu(), strict_native=True)
    same(cf(x), m(x).relu())
    assert "// extern" not in cf.last_source
    # The gradient through the compiled region (eval: the statistics are constants).
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    (cf(xa) * 3).sum().backward()
    (m(xb).relu() * 3).sum().backward()
    np.testing.assert_allclose(xa.grad.numpy(), xb.grad.numpy(), rtol=1e-6, atol=1e-6)
    # training=True: batch statistics and the running-stat update stay an extern call, as eager.
    x = tp.randn(2, 3, 4, 4)
    rm, rv = tp.zeros(3), tp.ones(3)
    rm2, rv2 = tp.zeros(3), tp.ones(3)
    f = lambda x, rm, rv: F.batch_norm(x, rm, rv, None, None, training=True)
    cf = tp.compile(f, strict_native=True)
    np.testing.assert_allclose(cf(x, rm, rv).numpy(), f(x, rm2, rv2).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rm.numpy(), rm2.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(rv.numpy(), rv2.numpy(), rtol=1e-6, atol=1e-7)
    assert "// extern" in cf.last_source
