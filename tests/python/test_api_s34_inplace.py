"""Session 34 API gaps, part 1: bool ** bool and detach_() of a view as PyTorch refuses them,
tp.cpu.amp spellings, and the in-place shape methods (squeeze_, unsqueeze_, t_, transpose_,
swapdims_/swapaxes_, resize_, resize_as_): shapes, strides, memory sharing, version counter,
autograd (gradients against torch, leaves refused), and tp.compile (own values recorded,
arguments refused)."""
import numpy as np
import pytest
import torch

import tensorplay as tp


def _raises_like_torch(f_tp, f_torch, tp_exc=RuntimeError):
    with pytest.raises(Exception) as te:
        f_torch()
    with pytest.raises(tp_exc) as e:
        f_tp()
    return te.value, e.value


# ---- bool ** bool ------------------------------------------------------------------------------

def test_bool_tensor_pow_bool_tensor_is_refused_like_torch():
    a, ta = tp.tensor([True, False]), torch.tensor([True, False])
    _, e = _raises_like_torch(lambda: a ** a, lambda: ta ** ta, NotImplementedError)
    assert "pow" in str(e) and "bool" in str(e)
    _raises_like_torch(lambda: tp.pow(True, a), lambda: torch.pow(True, ta), NotImplementedError)
    _raises_like_torch(lambda: a ** tp.tensor(True), lambda: ta ** torch.tensor(True), NotImplementedError)


@pytest.mark.parametrize("e", [True, False])
def test_bool_tensor_pow_bool_number_stays_bool(e):
    a, ta = tp.tensor([True, False]), torch.tensor([True, False])
    r, t = a ** e, ta ** e
    assert r.dtype == tp.bool
    assert r.tolist() == t.tolist()


def test_bool_pow_with_integer_operands_is_unchanged():
    a, ta = tp.tensor([True, False]), torch.tensor([True, False])
    for f in (lambda x, T: x ** 2, lambda x, T: x ** T.tensor([2]), lambda x, T: T.tensor([2]) ** x,
              lambda x, T: T.ones(2) ** x):
        r, t = f(a, tp), f(ta, torch)
        assert str(r.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        assert r.tolist() == t.tolist()


# ---- detach_ of a view -------------------------------------------------------------------------

@pytest.mark.parametrize("make", [lambda T, x: x.view(2, 2), lambda T, x: x[1:], lambda T, x: x.unsqueeze(0)])
def test_detach__of_a_view_is_refused_like_torch(make):
    x, tx = tp.ones(4), torch.ones(4)
    _, e = _raises_like_torch(lambda: make(tp, x).detach_(), lambda: make(torch, tx).detach_())
    assert "detach_" in str(e) and "view" in str(e)
    w, tw = tp.ones(4, requires_grad=True), torch.ones(4, requires_grad=True)
    _raises_like_torch(lambda: make(tp, w).detach_(), lambda: make(torch, tw).detach_())


def test_detach__of_a_non_view_still_works():
    w = tp.ones(3, requires_grad=True)
    y = w * 2
    assert y.detach_() is y and not y.requires_grad and y.grad_fn is None
    d = w.detach()
    assert d.detach_() is d  # detach() is no view for _base, as in torch


# ---- tp.cpu.amp --------------------------------------------------------------------------------

def test_cpu_amp_spellings_are_tp_amp_for_the_cpu():
    import tensorplay.cpu.amp as cpu_amp
    assert cpu_amp is tp.cpu.amp
    assert issubclass(tp.cpu.amp.autocast, tp.autocast)
    assert issubclass(tp.cpu.amp.GradScaler, tp.amp.GradScaler)
    a, b = tp.randn(4, 4), tp.randn(4, 4)
    with tp.cpu.amp.autocast():
        assert tp.is_autocast_cpu_enabled()
        assert (a @ b).dtype == tp.bfloat16
    with tp.cpu.amp.autocast(dtype=tp.float16):
        assert (a @ b).dtype == tp.float16
    with tp.cpu.amp.autocast(enabled=False):
        assert (a @ b).dtype == tp.float32
    assert not tp.is_autocast_cpu_enabled()

    @tp.cpu.amp.autocast()
    def f(x, y):
        return x @ y
    assert f(a, b).dtype == tp.bfloat16
    s = tp.cpu.amp.GradScaler(init_scale=8.0)
    assert s.get_scale() == 8.0
    assert tp.cpu.is_available() and tp.cpu.device_count() == 1


# ---- in-place shape methods --------------------------------------------------------------------

CASES = [
    ("squeeze_", (3, 1, 4, 1), ()),
    ("squeeze_", (3, 1, 4, 1), (1,)),
    ("squeeze_", (3, 1, 4, 1), ((1, 3),)),
    ("squeeze_", (3, 1, 4, 1), (0,)),
    ("unsqueeze_", (3, 4), (0,)),
    ("unsqueeze_", (3, 4), (-1,)),
    ("t_", (3, 4), ()),
    ("t_", (3,), ()),
    ("transpose_", (2, 3, 4), (0, 2)),
    ("swapdims_", (2, 3, 4), (1, -1)),
    ("swapaxes_", (2, 3, 4), (0, 1)),
]


@pytest.mark.parametrize("name,shape,args", CASES)
def test_inplace_view_methods_match_torch(name, shape, args):
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    x, tx = tp.tensor(a), torch.tensor(a)
    v0 = x._version
    r, tr = getattr(x, name)(*args), getattr(tx, name)(*args)
    assert r is x
    assert tuple(x.shape) == tuple(tx.shape)
    assert tuple(x.stride()) == tuple(tx.stride())
    np.testing.assert_array_equal(x.numpy(), tx.numpy())
    assert x._version == v0 + 1  # an in-place op, as in torch


@pytest.mark.parametrize("name,shape,args", CASES)
def test_inplace_view_methods_gradients_match_torch(name, shape, args):
    rng = np.random.default_rng(1)
    a = rng.standard_normal(shape)
    w, tw = tp.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = w * 2, tw * 2
    getattr(y, name)(*args)
    getattr(ty, name)(*args)
    assert tuple(y.shape) == tuple(ty.shape)
    assert y.grad_fn is not None
    g = rng.standard_normal(tuple(ty.shape))
    (y * tp.tensor(g)).sum().backward()
    (ty * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-12)


def test_inplace_view_chain_and_saved_value_keep_old_shape():
    w = tp.randn(3, 1, dtype=tp.float64, requires_grad=True)
    y = w * 1
    z = y.exp()          # saves y with shape (3, 1)
    y.squeeze_().unsqueeze_(0).t_()
    assert tuple(y.shape) == (3, 1)
    (z.sum() + (y * 3).sum()).backward()
    np.testing.assert_allclose(w.grad.numpy(), np.exp(w.detach().numpy()) + 3)


def test_inplace_view_on_a_leaf_that_requires_grad_is_refused_like_torch():
    for name, args in (("squeeze_", ()), ("unsqueeze_", (0,)), ("t_", ()), ("transpose_", (0, 1))):
        w, tw = tp.ones(3, 1, requires_grad=True), torch.ones(3, 1, requires_grad=True)
        _, e = _raises_like_torch(lambda: getattr(w, name)(*args), lambda: getattr(tw, name)(*args))
        assert name in str(e) and "leaf" in str(e)
        assert tuple(w.shape) == (3, 1)
        with tp.no_grad():
            getattr(w, name)(*args)
        with torch.no_grad():
            getattr(tw, name)(*args)
        assert tuple(w.shape) == tuple(tw.shape) and w.is_leaf and w.requires_grad


def test_inplace_view_of_a_view_changes_only_the_view():
    x, tx = tp.arange(6.0).view(2, 3), torch.arange(6.0).view(2, 3)
    v, tv = x.view(6), tx.view(6)
    v.unsqueeze_(0)
    tv.unsqueeze_(0)
    assert tuple(v.shape) == tuple(tv.shape) == (1, 6) and tuple(x.shape) == (2, 3)
    assert v._base is x._base and tv._base is tx._base  # the root of the chain, as in torch
    v[0, 0] = 7.0
    assert x[0, 0].item() == 7.0


def test_inplace_view_bad_dims_raise():
    with pytest.raises(IndexError):
        tp.ones(3, 4).transpose_(0, 5)
    with pytest.raises(RuntimeError, match="t_"):
        tp.ones(2, 3, 4).t_()
    with pytest.raises(IndexError):
        tp.ones(3).unsqueeze_(3)


def test_resize_matches_torch():
    a = np.arange(6, dtype=np.float32)
    x, tx = tp.tensor(a).view(2, 3), torch.tensor(a).view(2, 3)
    assert x.resize_(3, 2) is x
    tx.resize_(3, 2)
    assert tuple(x.shape) == (3, 2) and tuple(x.stride()) == tuple(tx.stride())
    np.testing.assert_array_equal(x.numpy(), tx.numpy())
    x.resize_(2)
    tx.resize_(2)
    np.testing.assert_array_equal(x.numpy(), tx.numpy())
    y = tp.tensor(a)
    y.resize_([4, 4])            # grows: the first 6 elements are kept
    assert tuple(y.shape) == (4, 4) and tuple(y.stride()) == (4, 1)
    np.testing.assert_array_equal(y.reshape(-1)[:6].numpy(), a)
    z = tp.zeros(2, 3)
    z.resize_as_(tp.empty(3, 2))
    assert tuple(z.shape) == (3, 2)
    v0 = z._version
    z.resize_(6)
    assert z._version == v0 + 1


def test_resize_refusals():
    w, tw = tp.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    _, e = _raises_like_torch(lambda: w.resize_(4), lambda: tw.resize_(4))
    assert "resize_" in str(e) and "requires grad" in str(e)
    with pytest.raises(ValueError, match="resize_"):
        tp.ones(3).resize_(-1, 2)
    x = tp.ones(4)
    v = x.view(2, 2)
    with pytest.raises(RuntimeError, match="shares"):
        x.resize_(10)
    x.resize_(2)                 # shrinking needs no new memory
    assert v.shape == (2, 2)
    with pytest.raises(TypeError):
        tp.ones(3).resize_as_([1, 2])


def test_inplace_views_under_compile():
    def own(x):
        y = x * 2
        y.unsqueeze_(0)
        y.transpose_(0, 1)
        return y + 1

    cf = tp.compile(own, fullgraph=True)
    x = tp.randn(3)
    for _ in range(2):
        r = cf(x)
        assert tuple(r.shape) == (3, 1)
        np.testing.assert_allclose(r.numpy(), own(x).numpy())

    def arg(x):
        x.squeeze_()
        return x + 1

    with pytest.raises(tp.compiler.CaptureError, match="squeeze_"):
        tp.compile(arg, fullgraph=True)(tp.randn(3, 1))

    def res(x):
        y = x * 1
        y.resize_(2)
        return y

    with pytest.raises(tp.compiler.CaptureError, match="resize_"):
        tp.compile(res, fullgraph=True)(tp.randn(3))


def test_trapezoid_with_a_0d_x_raises_instead_of_crashing():
    # Found by test_errors' fuzz once new operator names shifted its draws: a 0-d x read
    # x.sizes()[dim] out of bounds (a segfault); torch refuses it too.
    for f in (tp.trapezoid, tp.cumulative_trapezoid, tp.trapz):
        with pytest.raises(ValueError, match="at least one dimension"):
            f(tp.ones(3), tp.tensor(2.0))
    assert tp.trapezoid(tp.ones(3), tp.tensor([0.0, 1.0, 3.0])).item() == 3.0
