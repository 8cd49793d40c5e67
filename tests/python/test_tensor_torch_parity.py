"""Tensor behaviours a PyTorch user relies on, checked against torch (CPU) as the
oracle: bool() of several elements, views made under no_grad, Tensor._base, and
Adam after a parameter's dtype changed under it."""
import numpy as np
import pytest

import tensorplay as tp

torch = pytest.importorskip("torch")


def _exc(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return type(e)
    return None


# ---- bool() of a tensor that is not one element ----

@pytest.mark.parametrize("shape", [(3,), (0,), (2, 2)])
def test_bool_of_several_elements_raises_runtime_error(shape):
    assert _exc(lambda: bool(torch.ones(shape))) is RuntimeError
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(tp.ones(shape))
    with pytest.raises(RuntimeError, match="ambiguous"):
        if tp.ones(shape):
            pass
    with pytest.raises(RuntimeError, match="ambiguous"):
        tp.ones(shape) and 1  # noqa: B015


def test_bool_of_one_element_and_int_float_unchanged():
    assert bool(tp.ones(1)) and not bool(tp.zeros(1, 1)) and bool(tp.tensor(2.0))
    # int()/float() of several elements stay ValueError, as torch
    for conv in (int, float):
        assert _exc(lambda: conv(torch.ones(3))) is ValueError
        with pytest.raises(ValueError):
            conv(tp.ones(3))


@pytest.mark.parametrize("fullgraph", [True, False])
def test_bool_of_several_elements_in_compiled_function(fullgraph):
    def f(x):
        if x > 0:
            return x + 1
        return x - 1

    cf = tp.compile(f, fullgraph=fullgraph)
    with pytest.raises(RuntimeError, match="ambiguous"):
        cf(tp.ones(3))
    # one element: a data gate, both branches as eager
    assert cf(tp.ones(1)).item() == 2.0 and cf(-tp.ones(1)).item() == -2.0


# ---- item() of a tensor without exactly one element ----

@pytest.mark.parametrize("shape", [(3,), (0,), (2, 2)])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_item_of_several_elements_raises_runtime_error(shape, dtype):
    # torch: RuntimeError (int()/float() of the same tensor: ValueError)
    assert _exc(lambda: torch.ones(shape, dtype=getattr(torch, dtype)).item()) is RuntimeError
    n = int(np.prod(shape))
    with pytest.raises(RuntimeError, match=f"a Tensor with {n} elements cannot be converted to Scalar") as ei:
        tp.ones(shape, dtype=getattr(tp, dtype)).item()
    assert not isinstance(ei.value, ValueError)
    for conv in (int, float):
        with pytest.raises(ValueError, match="only one element tensors"):
            conv(tp.ones(shape, dtype=getattr(tp, dtype)))


@pytest.mark.parametrize("fullgraph", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_item_of_several_elements_in_compiled_function(fullgraph, dtype):
    # float: item() stays a 0-d tensor of the graph; int: a data gate. Both
    # raise eager's error type at capture.
    def f(x):
        return x * x.item()

    cf = tp.compile(f, fullgraph=fullgraph)
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar") as ei:
        cf(tp.ones(3, dtype=getattr(tp, dtype)))
    assert not isinstance(ei.value, ValueError)
    x = tp.full((1,), 3, dtype=getattr(tp, dtype))
    assert cf(x).item() == 9


# ---- views made under no_grad of a tensor that requires grad ----

def _no_grad_view(lib, make):
    p = lib.ones(4, requires_grad=True)
    with lib.no_grad():
        v = make(p)
    return p, v


VIEWS = [lambda p: p[1:], lambda p: p.view(2, 2), lambda p: p.unsqueeze(0), lambda p: p.t() if p.dim() == 2 else p[::2]]


@pytest.mark.parametrize("k", range(len(VIEWS)))
def test_no_grad_view_flags_match_torch(k):
    for lib in (torch, tp):
        p, v = _no_grad_view(lib, VIEWS[k])
        assert v.requires_grad is True and v.is_leaf is True and v.grad_fn is None, lib
        with lib.no_grad():
            w = v[0:]  # a no_grad view of it: the same
        assert w.requires_grad and w.is_leaf
        u = v[0:]  # a grad-mode view of it: a non-leaf with a view node
        assert u.requires_grad and not u.is_leaf and u.grad_fn is not None
        assert not p.detach().requires_grad
    with tp.no_grad():
        d = tp.ones(3, requires_grad=True).detach()[1:]
    assert not d.requires_grad
    with tp.no_grad():  # a base that does not require grad: nothing changes
        assert not tp.ones(3)[1:].requires_grad


def test_no_grad_view_gradient_flow_matches_torch():
    res = {}
    for lib in (torch, tp):
        p, v = _no_grad_view(lib, lambda p: p[1:])
        y = (v * 3).sum()
        assert y.requires_grad and y.grad_fn is not None
        y.backward()  # runs (torch: no error) and the gradient goes to neither
        res[lib] = (p.grad, v.grad)
    assert res[torch] == (None, None) and res[tp] == (None, None)


def test_no_grad_view_inplace_matches_torch():
    for lib in (torch, tp):
        p, v = _no_grad_view(lib, lambda p: p[1:])
        assert _exc(lambda: v.mul_(2)) is RuntimeError  # ambiguous write in grad mode
        with lib.no_grad():
            v.mul_(2)
        assert p.detach().tolist() == [1.0, 2.0, 2.0, 2.0]


# ---- Adam after the parameter's dtype changed under it ----

def _adam_after_swap(lib, opt_cls, swap_before_first_step=False, **kw):
    p = lib.nn.Parameter(lib.ones(3))
    opt = getattr(lib.optim, opt_cls)([p], lr=0.1, **kw)
    if not swap_before_first_step:
        p.grad = lib.ones(3)
        opt.step()
    p.data = p.data.double()
    p.grad = lib.ones(3, dtype=lib.float64)
    opt.step()
    return p


@pytest.mark.parametrize("opt_cls,kw", [("Adam", {}), ("AdamW", {}), ("Adam", {"amsgrad": True}),
                                        ("NAdam", {}), ("RAdam", {}), ("Adamax", {})])
def test_adam_state_dtype_mismatch_raises_like_torch(opt_cls, kw):
    assert _exc(lambda: _adam_after_swap(torch, opt_cls, **kw)) is RuntimeError
    with pytest.raises(RuntimeError, match="float32|float"):
        _adam_after_swap(tp, opt_cls, **kw)


@pytest.mark.parametrize("opt_cls", ["Adam", "AdamW", "SGD"])
def test_dtype_change_before_first_step_is_fine(opt_cls):
    got = _adam_after_swap(tp, opt_cls, swap_before_first_step=True)
    want = _adam_after_swap(torch, opt_cls, swap_before_first_step=True)
    assert got.dtype == tp.float64
    assert got.detach().tolist() == pytest.approx(want.detach().tolist(), rel=1e-12)


def test_module_double_before_optimizer():
    for lib in (torch, tp):
        lib.manual_seed(0)
    m = tp.nn.Linear(3, 2).double()
    opt = tp.optim.Adam(m.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        m(tp.ones(4, 3, dtype=tp.float64)).sum().backward()
        opt.step()
    assert all(s["exp_avg"].dtype == tp.float64 for s in opt.state.values())


def test_sgd_momentum_after_swap_runs_like_torch():
    # torch's SGD keeps its float32 momentum buffer (in-place add of a float64 grad) and runs
    want = _adam_after_swap(torch, "SGD", momentum=0.9)
    got = _adam_after_swap(tp, "SGD", momentum=0.9)
    assert got.dtype == tp.float64
    assert got.detach().tolist() == pytest.approx(want.detach().tolist(), rel=1e-6)


def test_lerp_does_not_promote_end_like_torch():
    for lib in (torch, tp):
        a, b = lib.ones(3), lib.ones(3, dtype=lib.float64)
        assert _exc(lambda: lib.lerp(a, b, 0.5)) is RuntimeError
        assert _exc(lambda: a.lerp_(b, 0.5)) is RuntimeError
        assert lib.lerp(a, a, lib.tensor(0.5, dtype=lib.float64)).dtype == lib.float32


# ---- Tensor._base ----

_BASE_CASES = {
    "view": lambda x: x.view(24), "view_tuple": lambda x: x.view((4, 6)), "reshape": lambda x: x.reshape(4, 6),
    "T": lambda x: x.T, "mT": lambda x: x.mT, "flatten": lambda x: x.flatten(), "squeeze": lambda x: x.squeeze(),
    "unsqueeze": lambda x: x.unsqueeze(0), "expand": lambda x: x.expand(2, 2, 3, 4), "permute": lambda x: x.permute(2, 0, 1),
    "transpose": lambda x: x.transpose(0, 1), "narrow": lambda x: x.narrow(0, 0, 1), "select": lambda x: x.select(0, 1),
    "split": lambda x: x.split(1)[0], "chunk": lambda x: x.chunk(2)[1], "unbind": lambda x: x.unbind()[0],
    "diagonal": lambda x: x.diagonal(), "unfold": lambda x: x.unfold(2, 2, 1), "fn_reshape": lambda x: x.__class__.reshape(x, (24,)),
    "getitem": lambda x: x[0, :, 1], "getitem_none": lambda x: x[None], "view_of_view": lambda x: x[1].t()[0],
    "view_dtype": lambda x: x.view(_int32(x)),
    "detach": lambda x: x.detach(), "data": lambda x: x.data, "clone": lambda x: x.clone(),
    "contiguous": lambda x: x.contiguous(), "add": lambda x: x + 1, "reshape_copy": lambda x: x.transpose(0, 1).reshape(-1),
}


def _int32(x):
    return torch.int32 if isinstance(x, torch.Tensor) else tp.int32


def _base_kind(r, x):
    return "x" if r._base is x else ("none" if r._base is None else "other")


@pytest.mark.parametrize("name", sorted(_BASE_CASES))
def test_base_matches_torch(name):
    f = _BASE_CASES[name]
    xt, x = torch.ones(2, 3, 4), tp.ones(2, 3, 4)
    assert _base_kind(f(x), x) == _base_kind(f(xt), xt)
    assert x._base is None


@pytest.mark.parametrize("requires_grad", [False, True])
def test_base_identity_and_grad_mode(requires_grad):
    x = tp.ones(4, 3, requires_grad=requires_grad)
    v = x[1:]
    assert v._base is x and v._base is v._base
    with tp.no_grad():
        assert x.t()._base is x
    i = tp.arange(6)
    assert i.view(2, 3)._base is i  # integer tensors too
    # the base outlives the Python name it was made from: one object, the same memory
    y = tp.arange(6.0).view(2, 3)
    b = y._base
    assert b is y._base and b.shape == (6,)
    b[0] = 42.0
    assert y[0, 0].item() == 42.0


def test_base_of_parameter_view_is_the_parameter():
    lin = tp.nn.Linear(3, 2)
    wt = lin.weight.t()
    assert wt._base is lin.weight and isinstance(wt._base, tp.nn.Parameter)


# ---- exception types of bad input ----

# Bad shapes and dtypes inside operators: PyTorch raises RuntimeError, where our
# classes say ValueError / TypeError. Ours are both, so user code written for
# either catches them (a port from PyTorch writes `except RuntimeError:`).
_BAD_INPUT = {
    "reshape": lambda m: m.ones(6).reshape(-1, 4),
    "view": lambda m: m.ones(6).view(4, 2),
    "matmul": lambda m: m.ones(2, 3) @ m.ones(2, 3),
    "broadcast add": lambda m: m.ones(3) + m.ones(4),
    "cat": lambda m: m.cat([m.ones(2, 3), m.ones(3, 2)]),
    "expand": lambda m: m.ones(3).expand(2, 4),
    "mean of int64": lambda m: m.zeros(2, dtype=m.int64).mean(),
    "dim out of range": lambda m: m.ones(3).sum(5),
    "index out of range": lambda m: m.ones(3)[5],
}


@pytest.mark.parametrize("case", sorted(_BAD_INPUT))
def test_bad_input_raises_what_torch_raises(case):
    fn = _BAD_INPUT[case]
    want = _exc(lambda: fn(torch))
    assert want is not None
    with pytest.raises(want):
        fn(tp)


@pytest.mark.parametrize("case", ["reshape", "matmul", "mean of int64"])
def test_bad_input_is_still_a_value_or_type_error(case):
    # Code written for the Python convention keeps working too.
    with pytest.raises((ValueError, TypeError)) as info:
        _BAD_INPUT[case](tp)
    assert isinstance(info.value, RuntimeError)
    compiled = tp.compile(lambda: _BAD_INPUT[case](tp))
    with pytest.raises(type(info.value)):
        compiled()


def test_bad_input_exception_pickles():
    import pickle
    try:
        tp.ones(3) + tp.ones(4)
    except RuntimeError as e:
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == str(e)
