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
