"""Aliasing between the arguments of a compiled function, as a user meets it:
the same tensor (or two views of one tensor) passed as two arguments after a
version was built for distinct tensors. A version captured with distinct inputs
computes a write into one without its effect on the other, so reusing it for
aliased inputs gave silently different results from eager."""

import numpy as np
import pytest

import tensorplay as tp


def _f_write_then_read(a, b):
    a.add_(1)
    return a + b


def test_same_tensor_twice_after_a_version_for_distinct_tensors():
    g = tp.compile(_f_write_then_read, strict_native=True)
    x, y = tp.ones(3), tp.ones(3)
    np.testing.assert_allclose(g(x, y).numpy(), [3, 3, 3])
    z = tp.ones(3)
    # Eager gives 4 (b sees a's write); the distinct-input version computed 3.
    # The capture for aliased inputs that are written refuses with a clear error.
    with pytest.raises(tp.compiler.CaptureError, match="shares memory"):
        g(z, z)
    # Distinct tensors still run the first version.
    x2, y2 = tp.ones(3), tp.ones(3)
    np.testing.assert_allclose(g(x2, y2).numpy(), [3, 3, 3])
    np.testing.assert_allclose(x2.numpy(), [2, 2, 2])


def test_two_views_of_one_tensor_after_a_version_for_distinct_tensors():
    def f(a, b):
        a.mul_(2)
        return a.sum() + b.sum()

    g = tp.compile(f, strict_native=True)
    g(tp.ones(4), tp.ones(2))
    z = tp.ones(4)
    with pytest.raises(tp.compiler.CaptureError, match="shares memory"):
        g(z, z[:2])


def test_read_only_aliasing_matches_eager_in_both_orders():
    f = lambda a, b: a * b + a  # noqa: E731
    g = tp.compile(f, strict_native=True)
    x, y = tp.arange(3.0), tp.full((3,), 2.0)
    np.testing.assert_allclose(g(x, x).numpy(), f(x, x).numpy())
    np.testing.assert_allclose(g(x, y).numpy(), f(x, y).numpy())
    np.testing.assert_allclose(g(y, y).numpy(), f(y, y).numpy())


def test_recompile_log_names_the_shared_memory(capfd, monkeypatch):
    monkeypatch.setenv("TP_LOGS", "recompiles")
    g = tp.compile(lambda a, b: a * b, backend="aot_eager")
    g(tp.ones(2), tp.ones(2))
    x = tp.ones(2)
    g(x, x)
    assert "b shares memory with a" in capfd.readouterr().err


@pytest.mark.parametrize("backend", ["stax", "aot_eager"])
@pytest.mark.parametrize("dynamic", [None, True])
def test_results_that_are_views_of_another_result_share_its_memory(backend, dynamic):
    # Eager: `y.view(-1)` is y's memory, so a write into one result shows in the
    # other. Compiled results used to be independent copies.
    def f(x):
        y = x.exp()
        return y, y.view(-1), y.view(-1)[2:], y.t()

    g = tp.compile(f, backend=backend, dynamic=dynamic)
    for n in (3, 5):
        x = tp.randn(n, 4)
        got, want = g(x), f(x.clone())
        got[0].add_(100)
        want[0].add_(100)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
        got[2].mul_(0)  # a view of a view of the first result
        want[2].mul_(0)
        np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), rtol=1e-6)


def test_view_of_a_result_in_training_keeps_its_gradient():
    w = tp.randn(4, 4, requires_grad=True)

    def f(x):
        y = x @ w
        return y[0], y

    g = tp.compile(f, strict_native=True)
    x = tp.randn(3, 4)
    a, b = g(x)
    (a.sum() * 2 + b.sum()).backward()
    got = w.grad.numpy().copy()
    w.grad = None
    a, b = f(x)
    (a.sum() * 2 + b.sum()).backward()
    np.testing.assert_allclose(got, w.grad.numpy(), rtol=1e-5)


@pytest.mark.parametrize("backend", ["aot_eager", "stax"])
def test_returned_views_of_an_unreturned_intermediate_share_memory(backend):
    def f(x):
        y = x * 2
        return y[0], y.view(-1), y.t()[1:]

    g = tp.compile(f, backend=backend, strict_native=backend == "stax")
    for x in (tp.ones(2, 3), tp.arange(6.0).reshape(2, 3)):
        a, b, c = g(x)
        ea, eb, ec = f(x)
        for got, want in ((a, ea), (b, eb), (c, ec)):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
        a.add_(1)
        ea.add_(1)
        np.testing.assert_array_equal(b.numpy(), eb.numpy())  # a write through one shows in the others
        np.testing.assert_array_equal(c.numpy(), ec.numpy())


def test_returned_views_of_an_unreturned_intermediate_in_training():
    w = tp.tensor([[1.0, -2.0, 3.0], [0.5, 0.25, -1.0]], requires_grad=True)

    def f(x):
        y = x * w
        return y[0], y[:, 1]

    g = tp.compile(f, backend="aot_eager")
    x = tp.arange(6.0).reshape(2, 3)
    a, b = g(x)
    (a.sum() + 2 * b.sum()).backward()
    got = w.grad.numpy().copy()
    w.grad = None
    ea, eb = f(x)
    (ea.sum() + 2 * eb.sum()).backward()
    np.testing.assert_allclose(got, w.grad.numpy(), rtol=1e-6)
