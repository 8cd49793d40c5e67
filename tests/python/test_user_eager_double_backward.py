"""Second-order gradients as users take them (create_graph=True), against PyTorch and
finite differences: WGAN-GP gradient penalties of convolutional critics (with pooling and
batch norm), MAML through a CNN with batch norm in training mode, Hessian-vector products
through a focal-style cross entropy whose incoming gradient depends on the parameters.

Each case used to fail: the gradient operators of conv2d / pooling / nll_loss had no
derivative of their own (a penalty raised, or silently lost a path), and batch norm's
backward ignored gradients reaching its saved mean and rstd."""

import numpy as np
import pytest

import tensorplay as tp

torch = pytest.importorskip("torch")


def _init(mod, model, scale=0.5):
    rng = np.random.default_rng(0)
    with mod.no_grad():
        for p in model.parameters():
            p.copy_(mod.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32) * scale))


def _penalty(mod, layers):
    critic = mod.nn.Sequential(*layers(mod))
    _init(mod, critic)
    x = mod.tensor(np.random.default_rng(1).standard_normal((2, 2, 6, 6)).astype(np.float32))
    x.requires_grad_(True)
    (g,) = mod.autograd.grad(critic(x).sum(), x, create_graph=True)
    penalty = ((g.reshape(2, -1).norm(2, dim=1) - 1) ** 2).mean()
    penalty.backward()
    # The last bias does not change the input gradient: its .grad stays None in both.
    grads = [None if p.grad is None else p.grad.numpy() for p in critic.parameters()]
    return [penalty.item()] + grads + [x.grad.numpy()]


_CRITICS = {
    "conv": lambda m: [m.nn.Conv2d(2, 3, 3), m.nn.Tanh(), m.nn.Flatten(), m.nn.Linear(48, 1)],
    "conv-strided-grouped": lambda m: [m.nn.Conv2d(2, 4, 3, stride=2, padding=1, groups=2), m.nn.Softplus(),
                                       m.nn.Conv2d(4, 2, 2), m.nn.Tanh(), m.nn.Flatten(), m.nn.Linear(8, 1)],
    "maxpool": lambda m: [m.nn.Conv2d(2, 3, 3), m.nn.Tanh(), m.nn.MaxPool2d(2), m.nn.Flatten(), m.nn.Linear(12, 1)],
    "avgpool": lambda m: [m.nn.Conv2d(2, 3, 3), m.nn.Tanh(), m.nn.AvgPool2d(2), m.nn.Flatten(), m.nn.Linear(12, 1)],
    "adaptive": lambda m: [m.nn.Conv2d(2, 3, 3), m.nn.Tanh(), m.nn.AdaptiveAvgPool2d(1), m.nn.Flatten(),
                           m.nn.Linear(3, 1)],
    "conv1d": lambda m: [m.nn.Flatten(2), m.nn.Conv1d(2, 3, 3), m.nn.Tanh(), m.nn.Flatten(), m.nn.Linear(102, 1)],
    "batchnorm": lambda m: [m.nn.Conv2d(2, 3, 3), m.nn.BatchNorm2d(3), m.nn.Tanh(), m.nn.MaxPool2d(2),
                            m.nn.Flatten(), m.nn.Linear(12, 1)],
}


@pytest.mark.parametrize("critic", list(_CRITICS))
def test_gradient_penalty_of_a_conv_critic_matches_torch(critic):
    got, want = _penalty(tp, _CRITICS[critic]), _penalty(torch, _CRITICS[critic])
    assert [a is None for a in got] == [b is None for b in want]
    for a, b in zip(got, want):
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)


def _maml(mod):
    nn, F = mod.nn, mod.nn.functional
    net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(16, 3))
    _init(mod, net)
    rng = np.random.default_rng(2)
    xs, xq = (mod.tensor(rng.standard_normal((6, 1, 4, 4)).astype(np.float32)) for _ in range(2))
    ys, yq = mod.tensor(np.array([0, 1, 2, 0, 1, 2])), mod.tensor(np.array([2, 1, 0, 0, 2, 1]))
    params = dict(net.named_parameters())

    def forward(p, x):
        h = F.conv2d(x, p["0.weight"], p["0.bias"], padding=1)
        h = F.batch_norm(h, None, None, p["1.weight"], p["1.bias"], training=True)
        h = F.max_pool2d(mod.relu(h), 2)
        return F.linear(h.flatten(1), p["5.weight"], p["5.bias"])
    inner = F.cross_entropy(forward(params, xs), ys)
    grads = mod.autograd.grad(inner, list(params.values()), create_graph=True)
    fast = {k: v - 0.4 * g for (k, v), g in zip(params.items(), grads)}
    outer = F.cross_entropy(forward(fast, xq), yq)
    outer.backward()
    return [outer.item()] + [p.grad.numpy() for p in net.parameters()]


def test_maml_through_a_cnn_with_batch_norm_matches_torch():
    for a, b in zip(_maml(tp), _maml(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)


def _focal_hvp(mod, use_nll):
    nn, F = mod.nn, mod.nn.functional
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 4))
    _init(mod, model, 1.0)
    rng = np.random.default_rng(0)
    x = mod.tensor(rng.standard_normal((6, 3)).astype(np.float32))
    y = mod.tensor(np.array([0, 3, 1, 2, 0, 1]))
    out = model(x)
    ce = F.nll_loss(F.log_softmax(out, 1), y, reduction="none") if use_nll else F.cross_entropy(out, y, reduction="none")
    loss = ((1 - mod.exp(-ce)) ** 2 * ce).mean()  # the loss's incoming gradient depends on the parameters
    params = list(model.parameters())
    grads = mod.autograd.grad(loss, params, create_graph=True)
    return [h.numpy() for h in mod.autograd.grad(sum((g * g).sum() for g in grads), params)]


@pytest.mark.parametrize("use_nll", [False, True], ids=["cross_entropy", "nll_loss"])
def test_hessian_vector_product_through_a_focal_loss_matches_torch(use_nll):
    for a, b in zip(_focal_hvp(tp, use_nll), _focal_hvp(torch, use_nll)):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)


def _r(*shape, seed=[0]):
    seed[0] += 1
    t = tp.tensor(np.random.default_rng(seed[0]).standard_normal(shape))
    return t.requires_grad_()


_F = tp.nn.functional
_SECOND_ORDER = {
    "conv2d": (lambda x, w, b: _F.conv2d(x, w, b, stride=(2, 1), padding=1, dilation=(1, 2), groups=2),
               lambda: (_r(2, 2, 5, 5), _r(4, 1, 3, 2), _r(4))),
    "conv2d-unbatched": (lambda x, w: _F.conv2d(x, w, None, padding=1, groups=2), lambda: (_r(2, 5, 5), _r(4, 1, 3, 2))),
    "conv1d": (lambda x, w: _F.conv1d(x, w, None, stride=2, padding=1), lambda: (_r(2, 3, 7), _r(2, 3, 3))),
    "max_pool2d": (lambda x: _F.max_pool2d(x, 3, 2, 1, ceil_mode=True), lambda: (_r(2, 2, 5, 5),)),
    "max_pool2d-dilated": (lambda x: _F.max_pool2d(x, 2, 1, 0, dilation=2), lambda: (_r(2, 2, 5, 5),)),
    "max_pool1d": (lambda x: _F.max_pool1d(x, 3, 2, 1), lambda: (_r(2, 3, 7),)),
    "avg_pool2d": (lambda x: _F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
                   lambda: (_r(2, 2, 5, 5),)),
    "avg_pool2d-divisor": (lambda x: _F.avg_pool2d(x, 2, divisor_override=3), lambda: (_r(2, 2, 4, 4),)),
    "adaptive_avg_pool2d": (lambda x: _F.adaptive_avg_pool2d(x, (3, 2)), lambda: (_r(2, 2, 5, 5),)),
    "batch_norm-train": (lambda x, w, b: _F.batch_norm(x, None, None, w, b, training=True),
                         lambda: (_r(4, 3, 2), _r(3), _r(3))),
    "native_batch_norm-all-outputs": (
        lambda x: sum(t.sum() * 1.5 for t in tp.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5)),
        lambda: (_r(3, 4, 2),)),
    "native_layer_norm-all-outputs": (
        lambda x, w: sum(t.sum() for t in tp.native_layer_norm(x, [4], w, None, 1e-5)), lambda: (_r(3, 4), _r(4))),
    "native_layer_norm": (lambda x, w, b: tp.native_layer_norm(x, [2, 4], w, b, 1e-5)[0],
                          lambda: (_r(3, 2, 4), _r(2, 4), _r(2, 4))),
    "cross_entropy": (lambda x: _F.cross_entropy(x, tp.tensor(np.array([0, 4, -100, 2])), weight=tp.tensor(
        np.array([1.0, 2.0, 0.5, 1.5, 3.0])), label_smoothing=0.2), lambda: (_r(4, 5),)),
    "nll_loss-none": (lambda x: _F.nll_loss(_F.log_softmax(x, 1), tp.tensor(np.array([[0, 4, 1], [2, 2, 1]])),
                                            reduction="none"), lambda: (_r(2, 5, 3),)),
}


@pytest.mark.parametrize("name", list(_SECOND_ORDER))
def test_second_derivatives_match_finite_differences(name):
    fn, make = _SECOND_ORDER[name]
    inputs = make()
    assert tp.autograd.gradcheck(fn, inputs)
    assert tp.autograd.gradgradcheck(fn, inputs)
