"""Models as users write them, trained eagerly step by step against PyTorch on the same
data and weights: layers with inplace=True activations (MobileNet-style ReLU6 /
Hardswish, ELU, LeakyReLU, SiLU)."""

import numpy as np
import pytest

import tensorplay as tp

torch = pytest.importorskip("torch")

_ACTS = [("ReLU", {}), ("ReLU6", {}), ("LeakyReLU", {"negative_slope": 0.1}), ("ELU", {}), ("SiLU", {}),
         ("SELU", {}), ("CELU", {}), ("Hardtanh", {}), ("Hardswish", {}), ("Hardsigmoid", {}), ("Mish", {})]


def _tensor_like(p, arr):
    return torch.from_numpy(arr) if isinstance(p, torch.Tensor) else tp.tensor(arr)


def _copy_weights(model, seed):
    """The same weights in both frameworks: drawn from one NumPy generator in order."""
    rng = np.random.default_rng(seed)
    params = list(model.parameters())
    mod = torch if isinstance(params[0], torch.Tensor) else tp
    with mod.no_grad():
        for p in params:
            p.copy_(_tensor_like(p, rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.5))


def _train(mod, act, kw):
    nn = mod.nn
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), getattr(nn, act)(inplace=True, **kw),
                          nn.Conv2d(4, 4, 3, stride=2), getattr(nn, act)(inplace=True, **kw), nn.Flatten(),
                          nn.Linear(36, 3))
    _copy_weights(model, 0)
    rng = np.random.default_rng(1)
    x = _tensor_like(model[0].weight, rng.standard_normal((4, 3, 8, 8)).astype(np.float32))
    y = mod.tensor(rng.integers(0, 3, 4))
    opt = mod.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("act,kw", _ACTS, ids=[a for a, _ in _ACTS])
def test_inplace_activation_modules_train_like_torch(act, kw):
    # Most activations save their input; writing the result into that input made
    # backward raise a version-counter error (only ReLU/CELU/Hardsigmoid worked).
    got_l, got_p = _train(tp, act, kw)
    want_l, want_p = _train(torch, act, kw)
    np.testing.assert_allclose(got_l, want_l, rtol=1e-4, atol=1e-5)
    for a, b in zip(got_p, want_p):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("fn,kw", [("leaky_relu", {"negative_slope": 0.2}), ("elu", {}), ("silu", {}),
                                   ("hardswish", {}), ("relu6", {}), ("mish", {}), ("selu", {})])
def test_functional_inplace_writes_input_and_backpropagates(fn, kw):
    res = []
    for mod in (tp, torch):
        x = mod.tensor(np.array([[-1.0, 2.0, 0.5, -3.5]], np.float32))
        x.requires_grad_(True)
        h = x * 2
        r = getattr(mod.nn.functional, fn)(h, inplace=True, **kw)
        (r * mod.tensor(np.array([[1.0, 2.0, 3.0, 4.0]], np.float32))).sum().backward()
        res.append((r is h, h.detach().numpy().copy(), x.grad.numpy().copy()))
    assert res[0][0] and res[1][0]
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-6)
    np.testing.assert_allclose(res[0][2], res[1][2], rtol=1e-4, atol=1e-6)


def test_inplace_on_a_leaf_that_requires_grad_still_raises():
    with pytest.raises(RuntimeError, match="leaf"):
        tp.nn.functional.silu(tp.ones(2, requires_grad=True), inplace=True)


def test_inplace_under_no_grad_writes_the_input():
    t = tp.tensor(np.array([-1.0, 2.0], np.float32))
    with tp.no_grad():
        r = tp.nn.functional.leaky_relu(t, 0.5, inplace=True)
    assert r is t
    np.testing.assert_allclose(t.numpy(), [-0.5, 2.0])
