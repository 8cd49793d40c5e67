"""tp.autograd.graph.saved_tensors_hooks / save_on_cpu / disable_saved_tensors_hooks
as PyTorch users apply them (activation offloading, compression, counting):
gradients unchanged with identity-like hooks, hooks see what is saved and
the backward sees what unpack returns, custom Functions and compiled training
regions included, nesting, errors."""
import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay.autograd.graph import disable_saved_tensors_hooks, save_on_cpu, saved_tensors_hooks


def model_and_data():
    tp.manual_seed(0)
    m = tp.nn.Sequential(tp.nn.Linear(6, 8), tp.nn.Tanh(), tp.nn.Linear(8, 1))
    return m, tp.randn(5, 6)


def grads_of(m, x, ctx=None, f=None):
    for p in m.parameters():
        p.grad = None
    run = f or m
    if ctx is None:
        loss = (run(x) ** 2).mean()
    else:
        with ctx:
            loss = (run(x) ** 2).mean()
    loss.backward()
    return [p.grad.numpy().copy() for p in m.parameters()]


def test_identity_hooks_change_no_gradient_and_see_every_saved_tensor():
    m, x = model_and_data()
    ref = grads_of(m, x)
    packed, unpacked = [], []

    def pack(t):
        packed.append(tuple(t.shape))
        return t

    def unpack(t):
        unpacked.append(tuple(t.shape))
        return t
    got = grads_of(m, x, saved_tensors_hooks(pack, unpack))
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(a, b)
    assert packed and sorted(packed) == sorted(unpacked)
    assert (5, 8) in packed  # the tanh result the backward reads


def test_same_tensors_packed_as_torch():
    tm = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    m, x = model_and_data()
    shapes = {"tp": [], "torch": []}
    with saved_tensors_hooks(lambda t: shapes["tp"].append(tuple(t.shape)) or t, lambda t: t):
        (m(x) ** 2).mean()
    with torch.autograd.graph.saved_tensors_hooks(lambda t: shapes["torch"].append(tuple(t.shape)) or t,
                                                  lambda t: t):
        (tm(torch.tensor(x.numpy())) ** 2).mean()
    # every tensor torch's backward keeps, ours keeps too (ours may skip ones a formula never reads)
    assert set(shapes["tp"]) <= set(shapes["torch"]) and (5, 8) in shapes["tp"]


def test_the_backward_uses_what_unpack_returns():
    x = tp.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with saved_tensors_hooks(lambda t: t.detach().clone(), lambda t: t * 10):
        y = (x * x).sum()  # d/dx = 2x, computed from the saved x
    y.backward()
    # both saved operands were unpacked as 10x: grad = g*other + g*self with other=self=10x
    np.testing.assert_allclose(x.grad.numpy(), [20.0, 40.0, 60.0], rtol=1e-6)


def test_pack_may_return_anything_and_free_the_original():
    m, x = model_and_data()
    ref = grads_of(m, x)
    store = {}

    def pack(t):
        key = len(store)
        store[key] = t.detach().numpy().copy()  # e.g. offloaded somewhere: only a key is kept
        return key

    def unpack(key):
        return tp.from_numpy(store[key])
    got = grads_of(m, x, saved_tensors_hooks(pack, unpack))
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_save_on_cpu_and_nesting():
    m, x = model_and_data()
    ref = grads_of(m, x)
    for a, b in zip(grads_of(m, x, save_on_cpu()), ref):
        np.testing.assert_array_equal(a, b)
    outer, inner = [], []
    xg = x.clone().requires_grad_(True)
    with saved_tensors_hooks(lambda t: outer.append(1) or t, lambda t: t):
        with saved_tensors_hooks(lambda t: inner.append(1) or t, lambda t: t):
            y = (xg * xg).sum()
        assert inner and not outer  # the innermost hooks apply
        z = xg.exp().sum()
    assert outer
    (y + z).backward()
    np.testing.assert_allclose(xg.grad.numpy(), (2 * x + x.exp()).numpy(), rtol=1e-6)


def test_custom_function_saved_tensors_go_through_the_hooks():
    class Cube(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

    x = tp.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    with saved_tensors_hooks(lambda t: seen.append("pack") or ("boxed", t), lambda b: seen.append("unpack") or b[1]):
        y = Cube.apply(x).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 12.0])
    assert seen.count("pack") >= 1 and seen.count("unpack") >= 1


def test_compiled_training_region_saves_through_the_hooks():
    m, x = model_and_data()
    c = tp.compile(lambda x: (m(x) ** 2).mean())
    for p in m.parameters():
        p.grad = None
    c(x).backward()
    ref = [p.grad.numpy().copy() for p in m.parameters()]
    count = []
    for p in m.parameters():
        p.grad = None
    with saved_tensors_hooks(lambda t: count.append(tuple(t.shape)) or ("cpu", t.clone()), lambda b: b[1]):
        loss = c(x)
    loss.backward()
    assert count  # the region's activations were packed
    for p, r in zip(m.parameters(), ref):
        np.testing.assert_allclose(p.grad.numpy(), r, rtol=1e-6, atol=1e-7)


def test_compiled_region_refuses_a_wrong_unpacked_tensor():
    m, x = model_and_data()
    c = tp.compile(lambda x: (m(x) ** 2).mean())
    c(x).backward()
    with saved_tensors_hooks(lambda t: t, lambda t: t[:1].clone()):
        loss = c(x)
    with pytest.raises(ValueError, match="unpack hook returned"):
        loss.backward()


def test_errors():
    x = tp.ones(3, requires_grad=True)
    with saved_tensors_hooks(lambda t: t, lambda t: "not a tensor"):
        y = (x * x).sum()
    with pytest.raises(TypeError, match="unpack hook must return a Tensor"):
        y.backward()
    with pytest.raises(TypeError, match="callable"):
        saved_tensors_hooks(1, 2)
    with disable_saved_tensors_hooks("no hooks here"):
        with pytest.raises(RuntimeError, match="no hooks here"):
            with saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        pass  # usable again after the disabled block
    with pytest.raises(ZeroDivisionError):
        with saved_tensors_hooks(lambda t: 1 / 0, lambda t: t):
            (x * x).sum()
    (x * x).sum().backward()  # the failed pack left no hooks installed
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
