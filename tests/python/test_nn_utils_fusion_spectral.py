"""nn.utils additions against torch: conv/linear + BatchNorm fusion for
inference, the hook-based spectral_norm (PyTorch's state_dict layout, power
iteration in training only), clip_grads_with_norm_ / clip_grad_norm, skip_init."""
import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn as nn

RNG = np.random.default_rng(3)


def to_torch(tp_mod, torch_mod):
    with torch.no_grad():
        torch_mod.load_state_dict({k: torch.tensor(v.numpy()) for k, v in tp_mod.state_dict().items()})


def randomize_bn(bn):
    with tp.no_grad():
        bn.running_mean.copy_(tp.randn(bn.num_features))
        bn.running_var.copy_(tp.rand(bn.num_features) + 0.5)
        if bn.weight is not None:
            bn.weight.copy_(tp.randn(bn.num_features))
            bn.bias.copy_(tp.randn(bn.num_features))


@pytest.mark.parametrize("conv_cls,bn_cls,shape,transpose,bias", [
    ("Conv2d", "BatchNorm2d", (2, 3, 6, 6), False, True),
    ("Conv1d", "BatchNorm1d", (2, 3, 7), False, False),
    ("ConvTranspose2d", "BatchNorm2d", (2, 3, 4, 4), True, True),
])
def test_fuse_conv_bn_eval(conv_cls, bn_cls, shape, transpose, bias):
    conv = getattr(nn, conv_cls)(3, 4, 3, bias=bias).double().eval()
    bn = getattr(nn, bn_cls)(4).double().eval()
    randomize_bn(bn)
    x = tp.tensor(RNG.standard_normal(shape))
    fused = nn.utils.fuse_conv_bn_eval(conv, bn, transpose=transpose)
    np.testing.assert_allclose(fused(x).detach().numpy(), bn(conv(x)).detach().numpy(), rtol=1e-10, atol=1e-10)
    assert fused is not conv and fused.bias is not None and isinstance(fused.weight, nn.Parameter)
    tconv = getattr(torch.nn, conv_cls)(3, 4, 3, bias=bias).double().eval()
    tbn = getattr(torch.nn, bn_cls)(4).double().eval()
    to_torch(conv, tconv)
    to_torch(bn, tbn)
    tf = torch.nn.utils.fuse_conv_bn_eval(tconv, tbn, transpose=transpose)
    np.testing.assert_allclose(fused.weight.detach().numpy(), tf.weight.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(fused.bias.detach().numpy(), tf.bias.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_fuse_linear_bn_eval_and_errors():
    lin = nn.Linear(5, 3).double().eval()
    bn = nn.BatchNorm1d(3).double().eval()
    randomize_bn(bn)
    x = tp.tensor(RNG.standard_normal((4, 5)))
    fused = nn.utils.fuse_linear_bn_eval(lin, bn)
    np.testing.assert_allclose(fused(x).detach().numpy(), bn(lin(x)).detach().numpy(), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="eval"):
        nn.utils.fuse_linear_bn_eval(lin.train(), bn)
    with pytest.raises(ValueError, match="num_features"):
        nn.utils.fuse_linear_bn_weights(tp.ones(3, 5), None, tp.zeros(2), tp.ones(2), 1e-5, None, None)


@pytest.mark.parametrize("cls,args,dim", [("Linear", (6, 4), None), ("Conv2d", (3, 5, 3), None),
                                          ("ConvTranspose2d", (3, 5, 3), None), ("Linear", (6, 4), 1)])
def test_spectral_norm_matches_torch(cls, args, dim):
    m = nn.utils.spectral_norm(getattr(nn, cls)(*args).double(), n_power_iterations=2, dim=dim)
    t = torch.nn.utils.spectral_norm(getattr(torch.nn, cls)(*args).double(), n_power_iterations=2, dim=dim)
    assert set(m.state_dict()) == set(t.state_dict()) == {"weight_orig", "weight_u", "weight_v", "bias"}
    assert {k: tuple(v.shape) for k, v in m.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in t.state_dict().items()}
    to_torch(m, t)  # same weights and power-iteration vectors
    shape = (3, args[0]) if cls == "Linear" else (1, 3, 6, 6)
    x = RNG.standard_normal(shape)
    for step in range(3):  # training: each call takes power steps
        y = m(tp.tensor(x))
        yt = t(torch.tensor(x))
        np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(m.weight_u.numpy(), t.weight_u.numpy(), rtol=1e-9, atol=1e-12)
    y.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(m.weight_orig.grad.numpy(), t.weight_orig.grad.numpy(), rtol=1e-8, atol=1e-10)
    m.eval()
    u = m.weight_u.clone()
    m(tp.tensor(x))
    np.testing.assert_array_equal(m.weight_u.numpy(), u.numpy())  # eval: no power step
    w = m.weight.detach().clone()
    nn.utils.remove_spectral_norm(m)
    assert set(m.state_dict()) == {"weight", "bias"} and isinstance(m.weight, nn.Parameter)
    np.testing.assert_allclose(m.weight.detach().numpy(), w.numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="not found"):
        nn.utils.remove_spectral_norm(m)


def test_spectral_norm_sigma_is_the_largest_singular_value():
    tp.manual_seed(0)
    m = nn.utils.spectral_norm(nn.Linear(8, 6).double(), n_power_iterations=50)
    m(tp.randn(1, 8, dtype=tp.float64))
    s = np.linalg.svd(m.weight.detach().numpy(), compute_uv=False)
    assert abs(s[0] - 1.0) < 1e-8
    with pytest.raises(RuntimeError, match="two spectral_norm"):
        nn.utils.spectral_norm(m)


def test_spectral_norm_trains_under_compile():
    import copy
    tp.manual_seed(1)
    eager = nn.utils.spectral_norm(nn.Linear(4, 4))
    compiled_mod = copy.deepcopy(eager)
    c = tp.compile(compiled_mod)
    opts = [tp.optim.SGD(m.parameters(), lr=0.1) for m in (eager, compiled_mod)]
    x = tp.randn(3, 4)
    for _ in range(4):  # the hook's power steps and the parameter updates, step by step
        outs = []
        for f, m, opt in ((eager, eager, opts[0]), (c, compiled_mod, opts[1])):
            opt.zero_grad()
            y = f(x)
            (y ** 2).mean().backward()
            opt.step()
            outs.append(y.detach().numpy())
        np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(compiled_mod.weight_u.numpy(), eager.weight_u.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(compiled_mod.weight_orig.detach().numpy(), eager.weight_orig.detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_clip_grads_with_norm_and_deprecated_alias():
    ps = [tp.randn(5, requires_grad=True) for _ in range(2)]
    for p in ps:
        p.grad = tp.ones(5) * 3
    total = nn.utils.get_total_norm([p.grad for p in ps])
    nn.utils.clip_grads_with_norm_(ps, 1.0, total)
    np.testing.assert_allclose(float(nn.utils.get_total_norm([p.grad for p in ps])), 1.0, rtol=1e-5)
    for p in ps:
        p.grad = tp.ones(5) * 3
    with pytest.warns(FutureWarning, match="clip_grad_norm_"):
        n = nn.utils.clip_grad_norm(ps, 2.0)
    np.testing.assert_allclose(float(n), float(total), rtol=1e-6)
    np.testing.assert_allclose(float(nn.utils.get_total_norm([p.grad for p in ps])), 2.0, rtol=1e-5)


def test_skip_init_draws_nothing_and_keeps_shapes():
    tp.manual_seed(0)
    a = tp.rand(2)
    tp.manual_seed(0)
    m = nn.utils.skip_init(nn.Linear, 7, 3)
    b = tp.rand(2)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert tuple(m.weight.shape) == (7, 3)[::-1] and isinstance(m.weight, nn.Parameter)
    with pytest.raises(TypeError):
        nn.utils.skip_init(nn.Linear(2, 2))
