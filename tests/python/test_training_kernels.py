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
