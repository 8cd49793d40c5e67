"""Random draws in dynamic-shape captures: one version serves every size, and at
each size the compiled function draws eager's numbers and moves the generators as
far as eager's calls would (a draw's counters are ceil(numel / per) at the call's
sizes, and each later draw starts after them). Before, a capture that drew random
numbers was kept static: dropout under dynamic=True recompiled at every size."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F


_GEN = tp.Generator()


def _draws(x):
    # Draws of several sizes, dtypes and generators, in an order whose offsets depend on x's size.
    a = F.dropout(x, 0.5, training=True) * 2
    b = tp.randn(x.shape[0], 3, generator=_GEN)
    c = F.dropout(x.t(), 0.3)
    d = tp.rand(x.shape[0], dtype=tp.float64)
    e = tp.empty(x.shape[0], 2).uniform_(-1, 1)
    return a, b, c, d, e


def _run(f, sizes):
    tp.manual_seed(1)
    _GEN.manual_seed(7)
    outs = []
    for n in sizes:
        outs += [t.numpy().copy() for t in f(tp.ones(n, 4) + n)]
    return outs, tp.rand(4).numpy(), tp.rand(4, generator=_GEN).numpy()


SIZES = [8, 3, 5, 8, 13, 6]


@pytest.mark.parametrize("backend", ["stax", "aot_eager", "eager"])
def test_one_version_draws_eagers_numbers_at_every_size(backend):
    cf = tp.compile(_draws, dynamic=True, backend=backend, strict_native=backend == "stax")
    expected, got = _run(_draws, SIZES), _run(cf, SIZES)
    for e, c in zip(expected[0], got[0]):
        np.testing.assert_array_equal(c, e)
    np.testing.assert_array_equal(got[1], expected[1])  # the default generator moved as far as eager's
    np.testing.assert_array_equal(got[2], expected[2])  # and the user's generator too
    assert cf.num_specializations == 1


def test_automatic_dynamic_shapes_keep_random_captures_to_two_versions():
    cf = tp.compile(_draws)  # static first, symbolic once a size changes
    expected, got = _run(_draws, SIZES), _run(cf, SIZES)
    for e, c in zip(expected[0], got[0]):
        np.testing.assert_array_equal(c, e)
    np.testing.assert_array_equal(got[1], expected[1])
    assert cf.num_specializations == 2


@pytest.mark.parametrize("budget", [None, 0])
def test_transformer_training_with_dropout_over_sequence_lengths(budget):
    # The mask is drawn in the forward and (budget 0) drawn again in the backward's
    # recomputation: both at the call's sizes.
    def run(compiled):
        tp.manual_seed(0)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.2, batch_first=True)
        f = lambda x: layer(x).square().mean()  # noqa: E731
        if compiled:
            f = tp.compile(f, dynamic=True, options={} if budget is None else {"activation_memory_budget": budget})
        tp.manual_seed(5)
        out = []
        for s in [7, 12, 5, 9]:
            layer.zero_grad()
            loss = f(tp.randn(3, s, 16))
            loss.backward()
            out.append([loss.detach().numpy()] + [p.grad.numpy().copy() for p in layer.parameters()])
        return out, f

    (eager, _), (compiled, cf) = run(False), run(True)
    for e, c in zip(eager, compiled):
        for a, b in zip(e, c):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    assert cf.num_specializations == 1


@pytest.mark.skipif(not tp.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("backend", ["stax", "eager"])
def test_cuda_random_draws_are_eagers_at_every_call(backend):
    def f(x):
        return F.dropout(x, 0.5, training=True) * 2, F.dropout(x.t() + 1, 0.25), tp.rand_like(x)

    def run(g):
        tp.manual_seed(3)
        outs = []
        for n in [8, 3, 5, 8, 13]:
            outs += [t.cpu().numpy().copy() for t in g(tp.ones(n, 4, device="cuda") + n)]
        return outs

    # Eager's CUDA kernels compute the host's Philox stream: the captured draw is the
    # host's, moved to the device (a graph with a device move is kept static for now,
    # so no version count here). rand_like's move is recorded too: before, it was a
    # free tensor, the capture's numbers at every call.
    cf = tp.compile(f, dynamic=True, backend=backend)
    for e, c in zip(run(f), run(cf)):
        np.testing.assert_array_equal(c, e)
