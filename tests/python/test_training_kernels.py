"""Kernels of compiled training steps: the shapes a backward graph produces
(bias and LayerNorm-weight gradients are column sums over the rows of a
reshaped activation) compile to vectorized loops, with eager's values."""

import numpy as np

import tensorplay as tp


def _close(a, b, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=rtol, atol=atol)


def test_column_sum_through_a_view_that_merges_dims_is_vectorized():
    # The bias gradient of a linear layer on a [batch, seq, features] input:
    # a sum over rows of [16, 128, 64] read as [2048, 64]. The composed index
    # must simplify back to the flat one (no division by 16*... left), so the
    # sum vectorizes across the kept dim.
    def f(h, g):
        r = h.view(16, 128, 64).relu()
        return tp.where(r > 0, g.view(16, 128, 64), 0.0).view(2048, 64).sum(0)
    cf = tp.compile(f, strict_native=True)
    h, g = tp.randn(2048, 64), tp.randn(2048, 64)
    _close(cf(h, g), f(h, g), rtol=1e-4, atol=1e-4)
    src = cf.last_source
    assert "vectorized across" in src
    assert "/ 8192)" not in src  # (r*64 + o) // (128*64) folded away


def test_sibling_column_sums_each_get_the_vectorized_plan():
    # LayerNorm's weight and bias gradients: two sums over the rows of values
    # computed from the same inputs. Fused into one kernel they ran as scalar
    # strided loops; each now is its own kernel vectorized across the columns.
    def f(x, dy, rstd):
        xhat = x * rstd
        return (dy * xhat).sum((0, 1)), dy.sum((0, 1)), (dy - xhat).sum((0, 1))
    cf = tp.compile(f, strict_native=True)
    x, dy, rstd = tp.randn(8, 64, 96), tp.randn(8, 64, 96), tp.rand(8, 64, 1) + 0.5
    for a, b in zip(cf(x, dy, rstd), f(x, dy, rstd)):
        _close(a, b, rtol=1e-4, atol=1e-4)
    assert cf.last_source.count("vectorized across") >= 3


def test_column_sums_of_an_odd_width_keep_their_values():
    # 13 columns: fewer than one vector of lanes per group plus a tail.
    def f(x, y):
        return (x * y).sum(0), (x + y).sum(0)
    cf = tp.compile(f, strict_native=True)
    x, y = tp.randn(300, 13), tp.randn(300, 13)
    for a, b in zip(cf(x, y), f(x, y)):
        _close(a, b, rtol=1e-4, atol=1e-4)


def test_reused_temporaries_never_leak_into_results():
    # A region keeps its temporaries' memory from one call to the next; the
    # results of an earlier call must not change, and threads calling the same
    # region at once (one of them allocating its own temps) get their own values.
    import threading

    def f(x, w):
        h = (x @ w).relu()          # GEMM result: a temporary of the region
        return (h * 2 + 1).sum(-1), (h - 1).exp().mean(0)
    cf = tp.compile(f, strict_native=True)
    w = tp.randn(64, 64)
    xs = [tp.randn(256, 64) for _ in range(6)]
    first = cf(xs[0], w)
    first_np = [t.numpy().copy() for t in first]
    for x in xs[1:]:
        cf(x, w)
    for a, b in zip(first, first_np):
        np.testing.assert_array_equal(a.numpy(), b)
    results = {}

    def worker(i):
        for _ in range(5):
            results[i] = cf(xs[i], w)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, x in enumerate(xs):
        for a, b in zip(results[i], f(x, w)):
            _close(a, b, rtol=1e-4, atol=1e-3)


def test_slice_scatter_is_a_loop_and_equals_eager():
    # The gradient of a weight sliced three ways (attention's in_proj) is
    # zeros with each slice's gradient scattered in, summed: one fused loop now,
    # not eager scatter kernels inside the region.
    def f(a, b, c):
        z = tp.zeros(12, 5)
        return (tp.slice_scatter(z, a, dim=0, start=8, end=12) + tp.slice_scatter(z, b, dim=0, start=4, end=8)
                + tp.slice_scatter(z, c, dim=0, start=0, end=4))
    cf = tp.compile(f, strict_native=True)
    a, b, c = tp.randn(4, 5), tp.randn(4, 5), tp.randn(4, 5)
    np.testing.assert_array_equal(cf(a, b, c).numpy(), f(a, b, c).numpy())
    assert "// extern" not in cf.last_source and "slice_scatter" in cf.last_source


import pytest  # noqa: E402


@pytest.mark.parametrize("shape,src_shape,kw", [
    ((10, 3), (3, 3), dict(dim=0, start=2, end=8, step=2)),       # strided
    ((10, 3), (4, 3), dict(dim=0, start=-4)),                      # negative start, end None
    ((4, 9), (4, 3), dict(dim=1, start=1, end=100, step=3)),      # end past the size, inner dim
    ((4, 9), (4, 0), dict(dim=1, start=5, end=5)),                 # empty slice: the base
    ((2, 3, 8), (2, 3, 2), dict(dim=-1, start=6, end=8)),          # last dim, 3-D
])
def test_slice_scatter_lowering_cases(shape, src_shape, kw):
    def f(base, src):
        return tp.slice_scatter(base * 2, src + 1, **kw)
    cf = tp.compile(f, strict_native=True)
    base, src = tp.randn(*shape), tp.randn(*src_shape)
    np.testing.assert_array_equal(cf(base, src).numpy(), f(base, src).numpy())
