"""Compiled training as users write it, where an outside bug hunt found the
compiled call different from eager: an in-place write of a value that
requires grad into a tensor that does not, full backward hooks on a module
inside a compiled function, random draws under dynamic shapes, and `_base` of
results that view other results. Each test compares with eager TensorPlay
(compiling must be unobservable) or checks the error a capture raises instead
of a silently different result."""
import warnings

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F


@pytest.fixture(autouse=True)
def _fresh():
    tp.compiler.reset()
    yield
    tp.compiler.reset()


# ---- a value that requires grad written into a tensor that does not ----

def _write_into_argument(compiled):
    def fn(x, y):
        x.add_(y)  # a preallocated state buffer receiving a differentiable value
        return x * 2

    f = tp.compile(fn) if compiled else fn
    y = tp.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = tp.zeros(3)
    r = f(x, y)
    state = (x.requires_grad, x.grad_fn is not None)
    ((x * x).sum() + r.sum()).backward()
    return state, y.grad.numpy()


def test_inplace_write_of_grad_value_makes_the_argument_require_grad():
    (se, ge), (sc, gc) = _write_into_argument(False), _write_into_argument(True)
    assert se == sc == (True, True)
    np.testing.assert_allclose(gc, ge)  # [4, 6, 8]: through x's new history too
    np.testing.assert_allclose(gc, [4.0, 6.0, 8.0])


class _Memory(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("mem", tp.zeros(2, 3))

    def forward(self, x):
        h = self.lin(x)
        self.mem.copy_(h)
        return h.sum()


@pytest.mark.parametrize("compile_module", [False, True])
def test_buffer_written_with_grad_value_as_eager(compile_module):
    results = []
    for compiled in (False, True):
        tp.manual_seed(0)
        m = _Memory()
        f = m
        if compiled:
            f = tp.compile(m) if compile_module else tp.compile(lambda x: m(x))
        loss = f(tp.ones(2, 3))
        state = (m.mem.requires_grad, m.mem.grad_fn is not None)
        (loss + (m.mem * m.mem).sum()).backward()
        results.append((state, m.lin.weight.grad.numpy().copy()))
    (se, ge), (sc, gc) = results
    assert se == sc == (True, True)
    np.testing.assert_allclose(gc, ge, rtol=1e-5, atol=1e-6)


def test_batch_norm_running_statistics_never_require_grad():
    # The running statistics are written with values computed from activations
    # that require grad; eager's kernel updates them outside autograd.
    tp.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    ref = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    ref.load_state_dict(net.state_dict())
    cf = tp.compile(lambda x: net(x).pow(2).sum())
    for seed in range(3):
        tp.manual_seed(seed)
        x = tp.randn(5, 4)
        cf(x).backward()
        ref(x).pow(2).sum().backward()
        bn, rb = net[1], ref[1]
        assert not bn.running_mean.requires_grad and bn.running_mean.grad_fn is None
        assert not bn.running_var.requires_grad
        np.testing.assert_allclose(bn.running_mean.numpy(), rb.running_mean.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(bn.running_var.numpy(), rb.running_var.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(net[0].weight.grad.numpy(), ref[0].weight.grad.numpy(), rtol=1e-4, atol=1e-5)


# ---- full backward hooks on a module inside a compiled function ----

def _hooked_setup():
    tp.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    tp.manual_seed(1)
    return m, tp.randn(6, 4), tp.randn(6, 2)


def test_backward_hook_registered_after_the_first_call_is_refused_not_ignored():
    m, x, y = _hooked_setup()
    cf = tp.compile(lambda x, y: F.mse_loss(m(x), y), fullgraph=True)
    cf(x, y).backward()
    handle = m[2].register_full_backward_pre_hook(lambda mod, go: (go[0] * 3,))
    with pytest.raises(tp.compiler.CaptureError, match="full backward hooks"):
        cf(x, y)
    handle.remove()
    m.zero_grad()
    cf(x, y).backward()  # without the hook: the first version again
    ref = m[0].weight.grad.numpy().copy()
    m.zero_grad()
    F.mse_loss(m(x), y).backward()
    np.testing.assert_allclose(ref, m[0].weight.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_backward_hook_registered_before_the_first_call_is_refused():
    m, x, y = _hooked_setup()
    m[0].register_full_backward_hook(lambda mod, gi, go: None)
    cf = tp.compile(lambda x, y: F.mse_loss(m(x), y), fullgraph=True)
    with pytest.raises(tp.compiler.CaptureError, match="register_full_backward_hook"):
        cf(x, y)
    with tp.no_grad():  # no backward, nothing to call: compiles
        np.testing.assert_allclose(cf(x, y).item(), F.mse_loss(m(x), y).item(), rtol=1e-6)


def test_compiled_module_still_calls_its_submodules_backward_hooks():
    m, x, y = _hooked_setup()
    fired = []
    m[0].register_full_backward_hook(lambda mod, gi, go: fired.append(1))
    cm = tp.compile(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        F.mse_loss(cm(x), y).backward()
    assert fired == [1]


# ---- random draws under dynamic shapes ----

def _two_dropouts(compiled, dynamic, sizes):
    f = lambda x: (F.dropout(x, 0.5, training=True), F.dropout(x, 0.5, training=True))  # noqa: E731
    if compiled:
        f = tp.compile(f, dynamic=dynamic)
    tp.manual_seed(1)
    outs = []
    for n in sizes:
        a, b = f(tp.ones(n, 4))
        outs += [a.numpy().copy(), b.numpy().copy()]
    return outs, tp.rand(4).numpy()


@pytest.mark.parametrize("dynamic,sizes", [(True, [8, 3, 5]), (None, [8, 5, 3, 5])])
def test_dropout_masks_and_generator_advance_follow_the_call_size(dynamic, sizes):
    (eo, er), (co, cr) = _two_dropouts(False, dynamic, sizes), _two_dropouts(True, dynamic, sizes)
    for a, b in zip(eo, co):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(er, cr)  # the generator moved as far as eager's


def test_dropout_training_over_changing_sequence_lengths_matches_eager():
    def run(compiled):
        tp.manual_seed(0)
        lin = nn.Linear(6, 6)
        f = lambda x: F.dropout(F.dropout(lin(x), 0.3).relu(), 0.2).sum()  # noqa: E731
        if compiled:
            f = tp.compile(f, dynamic=True)
        grads = []
        for n in [7, 4, 9]:
            lin.zero_grad()
            x = tp.randn(n, 6)
            f(x).backward()
            grads.append(lin.weight.grad.numpy().copy())
        return grads

    for a, b in zip(run(False), run(True)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# ---- results that view other results ----

def test_results_viewing_a_result_have_it_as_base():
    def fn(x):
        h = x * 2
        return h, h[:, 0], h.t()

    cf = tp.compile(fn)
    for _ in range(2):
        h, col, ht = cf(tp.ones(2, 3))
        assert col._base is h and ht._base is h
        h.add_(10)
        np.testing.assert_array_equal(col.numpy(), [12.0, 12.0])
        np.testing.assert_array_equal(ht.numpy(), np.full((3, 2), 12.0))
