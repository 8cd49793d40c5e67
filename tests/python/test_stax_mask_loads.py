"""A bool buffer read as a where's condition in vector code (C++ backend).

A backward keeps masks as bool tensors (relu's `x > 0` saved instead of x), so
its kernels read `where(mask, g, 0)` from a loaded bool. The scheduler used to
refuse vector lanes for any nest with a bool load, and the compiled CNN
training step's batch_norm-relu backward ran as scalar loops (slower than
eager). The mask's bytes are now widened to lane masks (`tp_load_mask`); these
check the values against eager / NumPy in every vector plan (inner, outer,
masked tail, broadcast mask, float64) and that the vector plan is taken."""
import re

import numpy as np
import pytest

import tensorplay as tp


def _check(fn, *args, rtol=1e-5, atol=1e-5, options=None):
    cf = tp.compile(fn, strict_native=True, options=options or {})
    got, want = cf(*args), fn(*args)
    if not isinstance(got, tuple):
        got, want = (got,), (want,)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=rtol, atol=atol)
    return cf


def _mask(*shape):
    return tp.rand(*shape) > 0.5


@pytest.mark.parametrize("n", [16, 1000, 1037])  # whole vectors, and scalar tails
def test_pointwise_where_on_a_loaded_mask_is_vectorized(n):
    m, a, b = _mask(3, n), tp.randn(3, n), tp.randn(3, n)
    cf = _check(lambda m, a, b: tp.where(m, a * 2, b - 1), m, a, b)
    assert "= tp_load_mask(" in cf.last_source
    want = np.where(m.numpy(), a.numpy() * 2, b.numpy() - 1)
    np.testing.assert_allclose(cf(m, a, b).numpy(), want, rtol=1e-6)


def test_row_sums_of_a_masked_gradient_are_vectorized():
    # relu backward then a per-channel sum (batch_norm's weight/bias gradient).
    m, g, x = _mask(4, 6, 300), tp.randn(4, 6, 300), tp.randn(4, 6, 300)
    fn = lambda m, g, x: (tp.where(m, g, 0.0).sum((0, 2)), (tp.where(m, g, 0.0) * x).sum((0, 2)))
    cf = _check(fn, m, g, x, rtol=1e-4, atol=1e-4)
    assert "= tp_load_mask(" in cf.last_source


def test_column_sums_of_a_masked_gradient_keep_values():
    # The outer-vectorized plan (a sum over rows) reads the mask along the kept dim.
    m, g = _mask(500, 40), tp.randn(500, 40)
    cf = _check(lambda m, g: tp.where(m, g, 0.0).sum(0), m, g, rtol=1e-4, atol=1e-4)
    assert "vectorized across" in cf.last_source and "= tp_load_mask(" in cf.last_source


def test_a_broadcast_mask_selects_whole_vectors():
    # One mask value per row: invariant along the vector loop, it stays a scalar.
    m, a = _mask(7, 1), tp.randn(7, 64)
    cf = _check(lambda m, a: tp.where(m, a.exp(), a), m, a)
    np.testing.assert_allclose(cf(m, a).numpy(), np.where(m.numpy(), np.exp(a.numpy()), a.numpy()), rtol=1e-6)


def test_float64_values_take_the_mask_as_64_bit_lanes():
    m, a = _mask(5, 203), tp.randn(5, 203, dtype=tp.float64)
    cf = _check(lambda m, a: (tp.where(m, a, -a) * 3).sum(1), m, a, rtol=1e-12, atol=1e-12)
    assert "= tp_load_mask(" in cf.last_source


@pytest.mark.parametrize("cols", [17, 77, 1023])
def test_masked_tails_read_only_the_live_mask_bytes(cols):
    # A masked tail loads the mask's live lanes only; the values equal the
    # scalar-tail kernel's (and eager's), whatever lies past the row.
    m, a = _mask(5, cols + 8), tp.randn(5, cols)
    fn = lambda m, a: tp.where(m[:, :cols], a.exp(), 0.0).sum(1)
    masked = _check(fn, m, a, rtol=1e-5, atol=1e-5, options={"stax_masked_tails": True})
    _check(fn, m, a, rtol=1e-5, atol=1e-5, options={"stax_masked_tails": False})
    if "// masked tail" in masked.last_source:  # AVX-512 hosts
        assert "= tp_load_mask_m(" in masked.last_source


def test_a_mask_used_other_than_as_a_condition_keeps_scalar_code_correct():
    # mask.float() (a cast) and a logical op are not lane masks: still right.
    m, n, a = _mask(3, 100), _mask(3, 100), tp.randn(3, 100)
    _check(lambda m, n, a: (tp.where(m & n, a, 0.0) + m.float() * a), m, n, a)


def test_relu_backward_of_a_compiled_conv_bn_step_is_vectorized(monkeypatch, capfd):
    # The bench's CNN block (conv-bn-relu-maxpool): the batch_norm backward
    # reads relu's saved mask; its kernels must take the vector plan, and the
    # gradients equal eager's.
    import tensorplay.nn as nn
    import tensorplay.nn.functional as F

    tp.manual_seed(0)
    conv, bn = nn.Conv2d(2, 8, 3, padding=1), nn.BatchNorm2d(8)
    params = list(conv.parameters()) + list(bn.parameters())

    def step(x):
        return F.max_pool2d(F.relu(bn(conv(x))), 2).square().mean()

    x = tp.randn(6, 2, 16, 16)
    monkeypatch.setenv("TP_LOGS", "code")  # the backward's source (compiled at the first backward)
    capfd.readouterr()
    grads = []
    for f in (step, tp.compile(step, strict_native=True)):
        for p in params:
            p.grad = None
        f(x).backward()
        grads.append([p.grad.numpy().copy() for p in params])
    for g, w in zip(grads[1], grads[0]):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    cap = capfd.readouterr()
    logs = cap.out + cap.err
    assert "(backward)" in logs
    backward = logs[logs.index("(backward)"):]
    assert "= tp_load_mask(" in backward


def test_a_symbolic_element_count_stays_in_vector_code():
    # A mean over a symbolic batch divides by a position (256 * s0 in the CNN's
    # batch_norm backward); a value that does not move with the lanes (here the
    # whole mean: the row's sum over the count) is scalar code splatted into
    # the vector, so it no longer makes the dynamic version's pointwise kernel
    # scalar (one version for all sizes).
    f = lambda x, g: g * x - (g * x).mean((0, 2), keepdim=True)
    cf = tp.compile(f, dynamic=True, strict_native=True)
    for n in (3, 5, 8):
        x, g = tp.randn(n, 4, 100), tp.randn(n, 4, 100)
        np.testing.assert_allclose(cf(x, g).numpy(), f(x, g).numpy(), rtol=1e-5, atol=1e-5)
    assert cf.num_specializations == 1
    assert "mul, mean, sub -> out0, vectorized" in cf.last_source
    assert re.search(r"float (t\d+) = \(float\)\(t\d+\);\n.*\n *vf t\d+ = tp_splat_vf\(t\d+\);", cf.last_source)


def test_a_position_moving_with_the_lanes_keeps_scalar_code_correct():
    # An index that varies along the vector loop (an iota) is still refused.
    f = lambda x: x + tp.arange(x.shape[1], dtype=tp.float32)
    _check(f, tp.randn(3, 100))
