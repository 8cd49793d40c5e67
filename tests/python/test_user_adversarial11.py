"""Outside testing, eleventh round: a user's training code under tp.compile
compared with eager TensorPlay (and PyTorch's behaviour): in-place writes into
values the backward saved, exceptions raised inside a compiled function, and
the composition of tp.func transforms with tp.compile."""

import numpy as np
import pytest

import tensorplay as tp

nn = tp.nn


# ------------------- in-place writes into saved values: only where eager raises

def _h(lin, x):
    return lin(x)


_WRITES = {
    # eager trains: nothing saved is written, or the reader is off the result's path
    "mul_by_number_then_add_": (lambda lin, x: (lambda h: ((h * 2) + h.add_(1)).sum())(_h(lin, x)), False),
    "relu_": (lambda lin, x: _h(lin, x).relu_().sum(), False),
    "sin_then_mul_": (lambda lin, x: _h(lin, x).sin_().mul_(2).sum(), False),
    "exp_then_add_": (lambda lin, x: (lambda h: (lambda a: (h.add_(1) + a).sum())(h.exp()))(_h(lin, x)), False),
    "sin_off_the_path_then_add_": (lambda lin, x: (lambda h: (lambda a: h.add_(1).sum())(h.sin()))(_h(lin, x)),
                                   False),
    # eager raises "modified by an inplace operation" at backward
    "sin_then_add_": (lambda lin, x: (lambda h: (lambda a: (h.add_(1) + a).sum())(h.sin()))(_h(lin, x)), True),
    "sigmoid_then_write_through_a_view": (
        lambda lin, x: (lambda a: (a.__setitem__((0,), 0.0), a.sum())[1])(_h(lin, x).sigmoid()), True),
    "mul_then_zero_the_other_factor": (
        lambda lin, x: (lambda h, k: (lambda y: (k.zero_(), y.sum())[1])(h * k))(_h(lin, x), _h(lin, x) + 0), True),
}


@pytest.mark.parametrize("name", sorted(_WRITES))
def test_an_in_place_write_after_a_save_trains_or_raises_exactly_as_eager(name):
    f, raises = _WRITES[name]

    def run(C):
        tp.manual_seed(0)
        lin = nn.Linear(3, 4)
        g = C(lambda x: f(lin, x))
        out = g(tp.randn(2, 3, generator=tp.Generator().manual_seed(1)))  # the forward itself never raises
        if raises:
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                out.backward()
            return None
        out.backward()
        return lin.weight.grad.numpy().copy()

    want, got = run(lambda g: g), run(tp.compile)
    if not raises:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
