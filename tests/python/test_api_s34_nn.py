"""Session 34 API gaps, part 4: F.max_unpool1d/2d/3d and nn.MaxUnpool*, nn.LazyLinear: values
and gradients against torch, output_size handling, errors."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tensorplay as tp
import tensorplay.nn.functional as F

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("n,shape,k,s,p", [(1, (2, 3, 9), 3, 2, 1), (2, (2, 3, 6, 8), 2, None, 0),
                                           (2, (3, 7, 7), 3, 2, 1), (3, (1, 2, 4, 4, 6), 2, None, 0)])
def test_max_unpool_matches_torch_with_gradients(n, shape, k, s, p):
    x = RNG.standard_normal(shape)
    pool_t = getattr(TF, f"max_pool{n}d")
    out_t, ind_t = pool_t(torch.tensor(x), k, s, p, return_indices=True)
    a = out_t.detach().numpy()
    xi, ti = tp.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    ind = tp.tensor(ind_t.numpy())
    r = getattr(F, f"max_unpool{n}d")(xi, ind, k, s, p)
    t = getattr(TF, f"max_unpool{n}d")(ti, ind_t, k, s, p)
    assert tuple(r.shape) == tuple(t.shape)
    np.testing.assert_array_equal(r.detach().numpy(), t.detach().numpy())
    w = RNG.standard_normal(tuple(t.shape))
    (r * tp.tensor(w)).sum().backward()
    (t * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(xi.grad.numpy(), ti.grad.numpy())
    mod = getattr(tp.nn, f"MaxUnpool{n}d")(k, s, p)
    np.testing.assert_array_equal(mod(xi, ind).detach().numpy(), t.detach().numpy())


def test_max_unpool_roundtrip_with_tensorplay_pool_and_output_size():
    x = tp.tensor(RNG.standard_normal((1, 2, 7, 9)))
    out, ind = F.max_pool2d(x, 2, return_indices=True)
    tout, tind = TF.max_pool2d(torch.tensor(x.numpy()), 2, return_indices=True)
    r = tp.nn.MaxUnpool2d(2)(out, ind, output_size=x.shape)
    t = torch.nn.MaxUnpool2d(2)(tout, tind, output_size=tuple(x.shape))
    assert tuple(r.shape) == (1, 2, 7, 9)
    np.testing.assert_array_equal(r.numpy(), t.numpy())
    with pytest.raises(ValueError, match="max_unpool2d.*output_size"):
        F.max_unpool2d(out, ind, 2, output_size=(10, 9))
    with pytest.raises(ValueError, match="max_unpool2d.*indices"):
        F.max_unpool2d(out, ind[..., :2], 2)
    with pytest.raises(ValueError, match="max_unpool2d"):
        F.max_unpool2d(out[0, 0, 0], ind[0, 0, 0], 2)
    with pytest.raises(TypeError, match="max_unpool2d.*int64"):
        F.max_unpool2d(out, ind.to(tp.int32), 2)


def test_lazy_linear_becomes_linear():
    tp.manual_seed(0)
    m = tp.nn.LazyLinear(4)
    w = m.weight
    assert m.weight.numel() == 0
    x = tp.randn(5, 3)
    y = m(x)
    assert type(m) is tp.nn.Linear and m.in_features == 3
    assert m.weight is w and tuple(w.shape) == (4, 3) and tuple(m.bias.shape) == (4,)
    np.testing.assert_allclose(y.detach().numpy(), (x @ m.weight.T + m.bias).detach().numpy(), rtol=1e-6)
    assert float(m.weight.abs().max()) <= 1 / np.sqrt(3) + 1e-6   # Linear's init bound
    y.sum().backward()
    assert tuple(m.weight.grad.shape) == (4, 3)
    nb = tp.nn.LazyLinear(2, bias=False, dtype=tp.float64)
    assert nb(tp.randn(2, 6, dtype=tp.float64)).dtype == tp.float64 and nb.bias is None
    assert set(tp.nn.Linear(3, 4).state_dict()) == set(m.state_dict())


@pytest.mark.parametrize("kw", [dict(), dict(stride=2), dict(stride=(2, 1, 2), padding=(1, 0, 1)),
                                dict(stride=2, output_padding=1), dict(dilation=(2, 1, 1), padding=1),
                                dict(groups=2), dict(stride=(1, 2, 2), output_padding=(0, 1, 1), dilation=2)])
def test_conv_transpose3d_matches_torch_with_gradients(kw):
    groups = kw.get("groups", 1)
    x = RNG.standard_normal((2, 4, 3, 4, 5))
    w = RNG.standard_normal((4, 6 // groups, 2, 3, 2))
    b = RNG.standard_normal(6)
    ts = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    ps = [tp.tensor(a, requires_grad=True) for a in (x, w, b)]
    t = TF.conv_transpose3d(*ts, **kw)
    r = F.conv_transpose3d(*ps, **kw)
    assert tuple(r.shape) == tuple(t.shape)
    np.testing.assert_allclose(r.detach().numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-10)
    g = RNG.standard_normal(tuple(t.shape))
    (t * torch.tensor(g)).sum().backward()
    (r * tp.tensor(g)).sum().backward()
    for p_, t_ in zip(ps, ts):
        np.testing.assert_allclose(p_.grad.numpy(), t_.grad.numpy(), rtol=1e-9, atol=1e-9)


def test_conv_transpose3d_module_and_errors():
    m = tp.nn.ConvTranspose3d(3, 5, 3, stride=2, padding=1)
    tm = torch.nn.ConvTranspose3d(3, 5, 3, stride=2, padding=1)
    assert tuple(m.weight.shape) == tuple(tm.weight.shape)
    with tp.no_grad():
        m.weight.copy_(tp.tensor(tm.weight.detach().numpy()))
        m.bias.copy_(tp.tensor(tm.bias.detach().numpy()))
    x = RNG.standard_normal((1, 3, 3, 4, 4)).astype(np.float32)
    r = m(tp.tensor(x), output_size=(6, 8, 8))
    t = tm(torch.tensor(x), output_size=(6, 8, 8))
    np.testing.assert_allclose(r.detach().numpy(), t.detach().numpy(), rtol=1e-4, atol=1e-5)
    r1 = m(tp.tensor(x[0]))   # unbatched
    assert tuple(r1.shape) == tuple(tm(torch.tensor(x[0])).shape)
    with pytest.raises(ValueError, match="conv_transpose3d.*channels"):
        F.conv_transpose3d(tp.randn(1, 2, 3, 3, 3), tp.randn(3, 1, 2, 2, 2))
    with pytest.raises(ValueError, match="conv_transpose3d.*5D weight"):
        F.conv_transpose3d(tp.randn(1, 2, 3, 3, 3), tp.randn(2, 1, 2, 2))
