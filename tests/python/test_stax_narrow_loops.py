"""Generated code over narrow inner dims (extents below one vector: loops the
printer leaves scalar and the C++ compiler vectorizes), against eager.

GCC 12.2 -O3 with AVX2/AVX-512 turned the if-converted loop of ReLU's backward
(`t = x < 0 ? 0 : x; out = t > 0 ? g : 0`) over a 5x5 or Nx10 nest into wrong
code: compiled training of a width-10 ReLU layer returned garbage gradients
(code_cache.cpp now passes -fno-tree-loop-if-convert)."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F

SHAPES = [(5, 5), (32, 10), (1000, 10), (3, 5, 7), (9, 9), (6, 5)]


def _rand(shape, seed=0):
    return tp.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("shape", SHAPES)
def test_relu_gradient(shape):
    x = _rand(shape).requires_grad_(True)
    g = tp.autograd.grad(tp.compile(F.relu)(x).sum(), x)[0]
    np.testing.assert_array_equal(g.numpy(), (x > 0).float().numpy())


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name, fn", [
    ("where_relu", lambda x, y: tp.where(x.relu() > 0, y, 0.0)),
    ("where_clamp", lambda x, y: tp.where(x.clamp(min=0) > 0, y, y * 2)),
    ("where_max", lambda x, y: tp.where(tp.maximum(x, y) > 0.5, x, y)),
    ("hardtanh_grad_like", lambda x, y: tp.where((x.clamp(-1, 1) > -1) & (x.clamp(-1, 1) < 1), y, 0.0)),
    ("leaky", lambda x, y: F.leaky_relu(x, 0.1) * (x.relu() > 0)),
])
def test_conditional_pointwise(shape, name, fn):
    x, y = _rand(shape, 1), _rand(shape, 2)
    np.testing.assert_array_equal(tp.compile(fn)(x, y).numpy(), fn(x, y).numpy())


def test_training_a_width_10_relu_layer_matches_eager():
    tp.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 10), nn.ReLU(), nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 3))
    twin = nn.Sequential(nn.Linear(20, 10), nn.ReLU(), nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 3))
    twin.load_state_dict(model.state_dict())
    x, y = _rand((100, 20), 3), tp.from_numpy(np.random.default_rng(4).integers(0, 3, 100))
    step = tp.compile(lambda x, y: F.cross_entropy(model(x), y))
    opt, opt2 = tp.optim.SGD(model.parameters(), lr=0.5), tp.optim.SGD(twin.parameters(), lr=0.5)
    for _ in range(4):
        for o in (opt, opt2):
            o.zero_grad()
        a = step(x, y)
        a.backward()
        b = F.cross_entropy(twin(x), y)
        b.backward()
        np.testing.assert_allclose(a.item(), b.item(), rtol=1e-5)
        for p, q in zip(model.parameters(), twin.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6)
        opt.step()
        opt2.step()
