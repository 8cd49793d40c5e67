"""Compiled CUDA regions given host values eager accepts beside device tensors
(found by the compiled OpInfo walk on the H200): an index built from a Python
list and saved for indexing's backward, and item() of a CUDA tensor during
capture."""
import numpy as np
import pytest

import tensorplay as tp

cuda = pytest.mark.skipif(not tp.cuda.is_available(), reason="needs a CUDA device")


@cuda
@pytest.mark.parametrize("fn", [
    lambda x: x[[0, 2]].sin().sum(),
    lambda x: x[[0, 2], [1, 1]].sum(),
    lambda x: tp.diag(x).exp().sum(),
])
def test_compiled_backward_with_host_index(fn):
    xa = np.random.default_rng(0).standard_normal((3, 3)).astype(np.float32)
    x = tp.from_numpy(xa).cuda().requires_grad_(True)
    y = tp.from_numpy(xa).cuda().requires_grad_(True)
    a, b = tp.compile(fn)(x), fn(y)
    a.backward()
    b.backward()
    np.testing.assert_allclose(a.item(), b.item(), rtol=1e-5)
    np.testing.assert_allclose(x.grad.cpu().numpy(), y.grad.cpu().numpy(), rtol=1e-5, atol=1e-6)


@cuda
def test_item_of_a_cuda_tensor_in_a_compiled_function():
    x = tp.tensor([1.5, 2.0]).cuda()
    f = tp.compile(lambda t: t * t[0].item())
    np.testing.assert_allclose(f(x).cpu().numpy(), (x * 1.5).cpu().numpy())
    n = tp.compile(lambda a, b: tp.linspace(a, b, 5))
    np.testing.assert_allclose(n(tp.tensor(0.0).cuda(), tp.tensor(1.0).cuda()).cpu().numpy(),
                               np.linspace(0, 1, 5), rtol=1e-6)


def _fallbacks():
    return tp.compiler.metrics.fallback_count


@cuda
@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_a_0d_cpu_scalar_beside_cuda_tensors_is_generated_code(mode):
    # Eager accepts a 0-d CPU tensor beside CUDA tensors (as PyTorch does); the
    # compiled region used to refuse it and run eagerly, with a warning.
    def fn(x, s):
        return (x * s + s).sin()

    f = tp.compile(fn, mode=mode)
    x = tp.from_numpy(np.random.default_rng(1).standard_normal((64, 33)).astype(np.float32)).cuda()
    before = _fallbacks()
    for v in (2.5, -1.25, 0.5, 3.0):  # a new value each call: the graph's replay reads it
        s = tp.tensor(v)
        np.testing.assert_allclose(f(x, s).cpu().numpy(), fn(x, s).cpu().numpy(), rtol=1e-5, atol=1e-6)
    assert _fallbacks() == before


def _optimizers():
    return [
        ("SGD", lambda ps: tp.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-3)),
        ("Adam", lambda ps: tp.optim.Adam(ps, lr=1e-2)),
        ("AdamW", lambda ps: tp.optim.AdamW(ps, lr=1e-2, weight_decay=0.1)),
        ("RMSprop", lambda ps: tp.optim.RMSprop(ps, lr=1e-3, momentum=0.5)),
    ]


@cuda
@pytest.mark.parametrize("name,make", _optimizers(), ids=[n for n, _ in _optimizers()])
def test_compiled_optimizer_step_on_cuda_is_generated_code(name, make):
    # tp.compile(opt.step) passes its float hyperparameters as 0-d CPU float64
    # inputs; on CUDA parameters every step used to fall back to eager.
    import tensorplay.nn as nn

    def model():
        tp.manual_seed(0)
        return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4)).cuda()

    me, mc = model(), model()
    oe, oc = make(list(me.parameters())), make(list(mc.parameters()))
    se, sc = tp.optim.lr_scheduler.StepLR(oe, 1, gamma=0.5), tp.optim.lr_scheduler.StepLR(oc, 1, gamma=0.5)
    step = tp.compile(oc.step)
    rng = np.random.default_rng(2)
    before, kernels = _fallbacks(), tp.compiler.metrics.generated_kernel_count
    for _ in range(4):
        x = tp.from_numpy(rng.standard_normal((8, 16)).astype(np.float32)).cuda()
        for m, o in ((me, oe), (mc, oc)):
            o.zero_grad()
            m(x).square().mean().backward()
        oe.step()
        step()
        se.step()
        sc.step()  # a new lr each step: the same compiled version, the new value
        for a, b in zip(me.parameters(), mc.parameters()):
            np.testing.assert_allclose(b.detach().cpu().numpy(), a.detach().cpu().numpy(), rtol=1e-5, atol=1e-6)
    assert _fallbacks() == before
    assert tp.compiler.metrics.generated_kernel_count > kernels
