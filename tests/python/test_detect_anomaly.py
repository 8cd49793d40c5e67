"""tp.autograd.detect_anomaly / set_detect_anomaly: a NaN produced in backward is reported by
the node that produced it (named after its forward operation), as in PyTorch."""
import math

import pytest

import tensorplay as tp


def _nan_in_backward():
    # sqrt at 0 has an infinite derivative; times the 0 gradient from the mask, NaN.
    x = tp.tensor([0.0, 4.0])
    x.requires_grad_(True)
    y = (tp.sqrt(x) * tp.tensor([0.0, 1.0])).sum()
    return x, y


def test_without_anomaly_mode_the_nan_reaches_grad():
    x, y = _nan_in_backward()
    y.backward()
    assert math.isnan(x.grad[0].item())


def test_detect_anomaly_names_the_backward_node():
    x, y = _nan_in_backward()
    with tp.autograd.detect_anomaly():
        assert tp.autograd.is_anomaly_enabled()
        with pytest.raises(RuntimeError, match="Sqrt.*nan"):
            y.backward()
    assert not tp.autograd.is_anomaly_enabled()
    # Also for autograd.grad, and as a decorator.

    @tp.autograd.detect_anomaly()
    def grads():
        x2, y2 = _nan_in_backward()
        return tp.autograd.grad(y2, [x2])

    with pytest.raises(RuntimeError, match="Sqrt.*nan"):
        grads()
    assert not tp.autograd.is_anomaly_enabled()


def test_set_detect_anomaly_call_and_context():
    tp.autograd.set_detect_anomaly(True)
    try:
        assert tp.autograd.is_anomaly_enabled()
        with tp.autograd.set_detect_anomaly(False):
            assert not tp.autograd.is_anomaly_enabled()
            x, y = _nan_in_backward()
            y.backward()  # off: no check
        assert tp.autograd.is_anomaly_enabled()
    finally:
        tp.autograd.set_detect_anomaly(False)
    assert not tp.autograd.is_anomaly_enabled()


def test_finite_gradients_pass_under_anomaly_mode():
    x = tp.tensor([1.0, 4.0])
    x.requires_grad_(True)
    with tp.autograd.detect_anomaly():
        (tp.sqrt(x) * 2).sum().backward()
    assert x.grad.tolist() == pytest.approx([1.0, 0.5])


def test_error_restores_the_mode():
    with pytest.raises(ZeroDivisionError):
        with tp.autograd.detect_anomaly():
            1 / 0
    assert not tp.autograd.is_anomaly_enabled()
