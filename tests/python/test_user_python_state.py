"""Python numbers a compiled function reads besides its arguments: globals,
closure variables (and short lists of numbers in them) and number attributes of
the modules it calls. The capture bakes them into the graph, so they must select
the version; a changed value used to keep running the old one silently."""

import numpy as np

import tensorplay as tp
import tensorplay.nn as nn

LR = 0.1
SCHEDULE = [1.0, 0.5]


def _sgd_step(w, g):
    w.sub_(g * LR * SCHEDULE[0])
    return w.sum()


def test_a_global_learning_rate_changed_between_calls():
    global LR
    f = tp.compile(_sgd_step, strict_native=True)
    w, g = tp.ones(4), tp.full((4,), 2.0)
    np.testing.assert_allclose(f(w, g).item(), 4 * (1 - 0.2), rtol=1e-6)
    try:
        LR = 0.01
        np.testing.assert_allclose(f(w, g).item(), 4 * (0.8 - 0.02), rtol=1e-6)
        SCHEDULE[0] = 0.5  # an element of a global list
        np.testing.assert_allclose(f(w, g).item(), 4 * (0.78 - 0.01), rtol=1e-6)
    finally:
        LR = 0.1
        SCHEDULE[0] = 1.0
    np.testing.assert_allclose(w.numpy(), np.full(4, 0.77), rtol=1e-6)


def test_closure_numbers_rebound_or_mutated():
    scale, shift = 2.0, [1.0]

    def f(x):
        return x * scale + shift[0]

    g = tp.compile(f, strict_native=True)
    x = tp.arange(3.0)
    np.testing.assert_allclose(g(x).numpy(), f(x).numpy())
    scale = 3.0  # noqa: F841 -- read by f through its closure cell
    np.testing.assert_allclose(g(x).numpy(), f(x).numpy())
    shift[0] = -1.0
    np.testing.assert_allclose(g(x).numpy(), f(x).numpy())
    np.testing.assert_allclose(g(x).numpy(), x.numpy() * 3 - 1)


class _Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.temperature = 1.0

    def forward(self, x):
        return self.lin(x) / self.temperature


def test_module_number_attributes_changed_between_calls():
    tp.manual_seed(0)
    m = _Scaled()
    x = tp.randn(2, 3)
    for f in (tp.compile(m, strict_native=True), tp.compile(lambda x: m(x), strict_native=True)):
        m.temperature = 1.0
        with tp.no_grad():
            f(x)
            m.temperature = 4.0
            np.testing.assert_allclose(f(x).numpy(), m(x).numpy(), rtol=1e-6)


def test_dropout_probability_changed_between_calls():
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    f = tp.compile(m, strict_native=True)
    x = tp.randn(3, 4)
    with tp.no_grad():
        f(x)
        m[1].p = 0.0  # the capture baked p = 0.5 in
        np.testing.assert_allclose(f(x).numpy(), m[0](x).numpy(), rtol=1e-6)


def test_unchanged_state_reuses_the_version():
    tp.manual_seed(0)
    m = _Scaled()
    f = tp.compile(lambda x: m(x) * LR)
    x = tp.randn(2, 3)
    with tp.no_grad():
        for _ in range(3):
            f(x)
    assert tp.compiler.metrics.compile_count == 1
    assert tp.compiler.metrics.recompiles == 0


def test_item_returned_by_a_compiled_step_is_a_python_float():
    # Eager returns floats; the capture's item() is a 0-d tensor of the graph,
    # which used to reach the caller (f"{acc:.3f}" raised TypeError).
    w = tp.randn(3, requires_grad=True)

    def step(x):
        loss = (x * w).sum()
        return loss, {"acc": (x > 0).float().mean().item(), "mean": x.mean().item()}

    g = tp.compile(step, strict_native=True)
    for _ in range(2):
        x = tp.randn(3)
        loss, stats = g(x)
        want = step(x)[1]
        assert type(stats["acc"]) is float and type(stats["mean"]) is float
        assert f"{stats['acc']:.3f}" == f"{want['acc']:.3f}"
        np.testing.assert_allclose(stats["mean"], want["mean"], rtol=1e-6)
    loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), x.numpy(), rtol=1e-6)


CONFIG_SCALE = 2.0


def _helper(x):
    return x * CONFIG_SCALE


def test_a_number_read_by_a_helper_the_function_calls():
    global CONFIG_SCALE
    f = tp.compile(lambda x: _helper(x) + 1, strict_native=True)
    x = tp.ones(3)
    np.testing.assert_allclose(f(x).numpy(), [3, 3, 3])
    try:
        CONFIG_SCALE = 5.0
        np.testing.assert_allclose(f(x).numpy(), [6, 6, 6])
    finally:
        CONFIG_SCALE = 2.0
