"""Masked vector tails (TailMode::Masked, AVX-512 hosts): a vectorized nest whose
rows leave a partial vector runs it as one masked step when its body computes a
costly function. The dead lanes must never reach memory or a reduction (they
hold the identity), and results equal the scalar-tail kernels'."""
import numpy as np
import pytest

import tensorplay as tp


def both(fn, *args):
    masked = tp.compile(fn, strict_native=True, options={"stax_masked_tails": True})
    scalar = tp.compile(fn, strict_native=True, options={"stax_masked_tails": False})
    return masked, masked(*args), scalar, scalar(*args)


def has_avx512():
    cf = tp.compile(lambda v: v.exp(), strict_native=True)
    cf(tp.randn(2, 1000))
    return "// masked tail" in cf.last_source


@pytest.mark.parametrize("cols", [17, 77, 1000, 1023])
def test_pointwise_exp_masked_tail_writes_only_live_lanes(cols):
    x = tp.randn(5, cols)
    out_pad = tp.randn(5, cols + 8)  # a view with live memory right after each row's tail
    fn = lambda v, o: (v.exp() * 2, o[:, :cols].exp())
    m, got, s, want = both(fn, x, out_pad)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=2e-7)
    np.testing.assert_allclose(got[0].numpy(), (x.exp() * 2).numpy(), rtol=2e-7)
    if has_avx512():
        assert "// masked tail" in m.last_source and "// masked tail" not in s.last_source


@pytest.mark.parametrize("cols", [20, 77, 1000])
def test_reduction_masked_tail_uses_the_identity_in_dead_lanes(cols):
    # Dead lanes are loaded as 0: exp(0) = 1 would win a max of values < 1, a
    # min of values > 1, and add 1 per lane to a sum, if they were not masked.
    x = tp.rand(6, cols) + 0.5
    for fn in (lambda v: (-v.exp()).amax(1), lambda v: v.exp().amin(1), lambda v: v.exp().sum(1),
               lambda v: (v * 3).exp().amax(1, keepdim=True)):
        m, got, s, want = both(fn, x)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-6)
        np.testing.assert_allclose(got.numpy(), fn(x).numpy(), rtol=2e-6)


def test_nan_and_inf_in_the_tail():
    a = np.random.default_rng(0).standard_normal((3, 77)).astype(np.float32)
    a[0, 76] = np.nan
    a[1, 70] = np.inf
    a[2, 75] = -np.inf
    x = tp.tensor(a)
    for fn in (lambda v: v.exp(), lambda v: v.exp().amax(1), lambda v: v.exp().sum(1), lambda v: v.tanh() + 1):
        m, got, s, want = both(fn, x)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-6)


def test_cheap_bodies_keep_scalar_tails():
    # The scheduler keeps scalar tails where masked steps measured slower.
    x = tp.randn(4, 1000)
    for fn in (lambda v: v * 2 + 1, lambda v: v.sum(1), lambda v: tp.softmax(v, -1)):
        cf = tp.compile(fn, strict_native=True)
        np.testing.assert_allclose(cf(x).numpy(), fn(x).numpy(), rtol=2e-6, atol=1e-6)
        assert "// masked tail" not in cf.last_source
