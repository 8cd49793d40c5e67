"""Lazy modules (LazyConv*, LazyConvTranspose*, LazyBatchNorm*, LazyInstanceNorm*,
LazyLinear): shapes, class change, state_dict keys and results as PyTorch's;
the same Parameter objects before and after; initialization as the eager
layer's; training, optimizers and tp.compile."""
import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn as nn

RNG = np.random.default_rng(11)

CASES = [
    ("LazyConv1d", (6, 3), dict(stride=2, padding=1), (2, 4, 9)),
    ("LazyConv1d", (6, 3), dict(groups=2), (4, 8)),  # unbatched
    ("LazyConv2d", (5, 3), dict(padding=1, bias=False), (2, 3, 6, 7)),
    ("LazyConv2d", (4, 2), dict(groups=2, dilation=2, padding_mode="reflect", padding=1), (1, 6, 8, 8)),
    ("LazyConv3d", (3, 2), dict(), (1, 2, 4, 5, 3)),
    ("LazyConvTranspose1d", (4, 3), dict(stride=2, groups=2), (2, 6, 5)),
    ("LazyConvTranspose2d", (3, 3), dict(stride=2, output_padding=1, padding=1), (1, 2, 4, 4)),
    ("LazyConvTranspose3d", (2, 2), dict(), (1, 3, 2, 3, 2)),
    ("LazyBatchNorm1d", (), dict(), (4, 3)),
    ("LazyBatchNorm1d", (), dict(momentum=0.3), (4, 3, 5)),
    ("LazyBatchNorm2d", (), dict(affine=False), (3, 2, 4, 4)),
    ("LazyBatchNorm3d", (), dict(track_running_stats=False), (2, 3, 2, 2, 2)),
    ("LazyInstanceNorm1d", (), dict(affine=False, track_running_stats=False), (2, 3, 6)),
    ("LazyInstanceNorm2d", (), dict(), (2, 3, 4, 4)),
    ("LazyInstanceNorm3d", (), dict(), (1, 3, 2, 2, 2)),
    ("LazyBatchNorm2d", (), dict(bias=False), (3, 2, 4, 4)),
    ("LazyLinear", (4,), dict(), (3, 7)),
]


def _copy_into_torch(tm, m):
    with torch.no_grad():
        for name, p in m.named_parameters():
            dict(tm.named_parameters())[name].copy_(torch.tensor(p.detach().numpy()))


@pytest.mark.parametrize("name,args,kw,shape", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_matches_torch_lazy_module(name, args, kw, shape):
    import inspect
    if "bias" in kw and "bias" not in inspect.signature(getattr(torch.nn, name).__init__).parameters:
        pytest.skip(f"this torch's {name} has no bias argument")
    m = getattr(nn, name)(*args, **kw)
    tm = getattr(torch.nn, name)(*args, **kw)
    before = dict(m.named_parameters())
    assert all(p.numel() == 0 for p in before.values())
    assert m.has_uninitialized_params()
    x = RNG.standard_normal(shape).astype(np.float32)
    xi, xt = tp.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    tm(xt)  # materialize torch's, then give it our initialized weights
    y = m(xi)
    assert type(m) is getattr(nn, name.replace("Lazy", ""))
    assert type(m).__name__ == type(tm).__name__
    _copy_into_torch(tm, m)
    for k, p in m.named_parameters():
        assert p is before[k]  # the same objects, now with their shapes
    assert {k: tuple(v.shape) for k, v in m.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in tm.state_dict().items()}
    with torch.no_grad():
        tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()})
    xt.grad = None
    t = tm(xt)
    np.testing.assert_allclose(y.detach().numpy(), t.detach().numpy(), rtol=1e-4, atol=1e-5)
    g = RNG.standard_normal(tuple(t.shape)).astype(np.float32)
    (y * tp.tensor(g)).sum().backward()
    (t * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(xi.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    for k, p in m.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), dict(tm.named_parameters())[k].grad.numpy(), rtol=1e-4, atol=1e-4)
    assert repr(m).startswith(type(tm).__name__)


def test_initialization_is_the_eager_layers():
    x = tp.randn(2, 5, 6, 6)
    tp.manual_seed(3)
    lazy = nn.LazyConv2d(8, 3, padding=1)
    lazy(x)
    tp.manual_seed(3)
    eager = nn.Conv2d(5, 8, 3, padding=1)
    np.testing.assert_array_equal(lazy.weight.detach().numpy(), eager.weight.detach().numpy())
    np.testing.assert_array_equal(lazy.bias.detach().numpy(), eager.bias.detach().numpy())


def test_building_a_lazy_module_draws_no_random_numbers():
    tp.manual_seed(5)
    a = tp.rand(3)
    tp.manual_seed(5)
    nn.LazyConv2d(4, 3)
    nn.LazyLinear(2)
    b = tp.rand(3)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_optimizer_made_before_the_first_call_trains():
    tp.manual_seed(0)
    model = nn.Sequential(nn.LazyConv1d(4, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(1))
    opt = tp.optim.SGD(model.parameters(), lr=0.05)
    x, y = tp.randn(8, 2, 10), tp.randn(8, 1)
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < losses[0] * 0.8
    assert [type(m).__name__ for m in model] == ["Conv1d", "ReLU", "Flatten", "Linear"]


def test_lazy_batchnorm_running_stats_update():
    bn = nn.LazyBatchNorm1d(momentum=0.5)
    x = tp.randn(16, 3) * 2 + 1
    bn(x)
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.5 * x.mean(0).numpy(), rtol=1e-5, atol=1e-6)
    assert int(bn.num_batches_tracked) == 1
    bn.eval()
    assert tuple(bn(x).shape) == (16, 3)


def test_compiled_model_with_lazy_modules():
    tp.manual_seed(1)
    model = nn.Sequential(nn.LazyLinear(8), nn.ReLU(), nn.LazyLinear(2))
    c = tp.compile(model)
    x = tp.randn(4, 6)
    first = c(x)  # runs eagerly: it gives the lazy modules their shapes
    assert [type(m).__name__ for m in model] == ["Linear", "ReLU", "Linear"]
    ref = model(x)
    np.testing.assert_array_equal(first.detach().numpy(), ref.detach().numpy())
    kernels = int(tp.compiler.metrics.generated_kernel_count)
    out = c(x)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-6, atol=1e-6)
    assert int(tp.compiler.metrics.generated_kernel_count) > kernels  # the second call is compiled
    out.sum().backward()
    assert model[0].weight.grad is not None


def test_compiled_lazy_module_itself():
    conv = nn.LazyConv2d(3, 3)
    c = tp.compile(conv)
    x = tp.randn(1, 2, 5, 5)
    np.testing.assert_allclose(c(x).detach().numpy(), c(x).detach().numpy())
    assert type(conv) is nn.Conv2d and conv.in_channels == 2


def test_strict_native_refuses_the_eager_first_call():
    c = tp.compile(nn.Sequential(nn.LazyLinear(2)), strict_native=True)
    with pytest.raises(tp.compiler.BackendError, match="lazy"):
        c(tp.randn(2, 3))


def test_lazy_module_first_called_inside_a_compiled_function_says_what_to_do():
    m = nn.Sequential(nn.LazyLinear(3))
    f = tp.compile(lambda x: m(x), options={"warn_fallback": False}, fullgraph=True)
    with pytest.warns(UserWarning):
        with pytest.raises(tp.compiler.CaptureError, match="run one eager call first"):
            f(tp.randn(2, 4))
    m(tp.randn(2, 4))
    assert tuple(f(tp.randn(2, 4)).shape) == (2, 3)


def test_unbatched_instance_norm_takes_channels_from_dim_0():
    m = nn.LazyInstanceNorm2d()
    m.eval()
    assert tuple(m(tp.randn(3, 4, 4)).shape) == (3, 4, 4) and m.num_features == 3


def test_bad_first_input():
    with pytest.raises(ValueError, match="LazyConv2d"):
        nn.LazyConv2d(3, 3)(tp.randn(5, 5))
    with pytest.raises(ValueError, match="LazyBatchNorm2d"):
        nn.LazyBatchNorm2d()(tp.randn(2, 3))
    with pytest.raises(ValueError, match="groups"):
        nn.LazyConv2d(3, 3, groups=2)  # out_channels not divisible by groups
    m = nn.LazyConv2d(4, 3, groups=2)
    with pytest.raises(ValueError, match="divisible"):
        m(tp.randn(1, 3, 5, 5))  # 3 input channels, 2 groups


def test_moved_or_cast_before_the_first_call():
    m = nn.Sequential(nn.LazyConv2d(4, 3), nn.LazyBatchNorm2d()).double()
    y = m(tp.randn(2, 3, 6, 6, dtype=tp.float64))
    assert y.dtype == tp.float64 and m[0].weight.dtype == tp.float64 and m[1].running_mean.dtype == tp.float64
    assert m[1].num_batches_tracked.dtype == tp.int64
