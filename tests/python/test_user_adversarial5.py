"""Adversarial user tests, round 5: training loops and calling conventions of
PyTorch users, under tp.compile.

Each test is a bug found by writing a realistic user program: a silent wrong
result, a crash or a misleading error. Compiled results are compared with eager
ones ("compiling is unobservable") and, where the semantics come from PyTorch,
with torch (CPU).
"""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn


def _np(t):
    return t.detach().numpy()


# ---------------------------------------------------------------- keyword arguments of a compiled module
class _Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x, mask=None, scale=1.0):
        y = self.fc(x) * scale
        return y if mask is None else y.masked_fill(mask, 0.0)


class _Extra(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x, **extra):
        y = self.fc(x)
        if "bias" in extra:
            y = y + extra["bias"]
        return y.relu() if extra.get("act") == "relu" else y


@pytest.mark.parametrize("how", ["tp.compile", "Module.compile", "hooked"])
def test_a_compiled_module_called_with_keyword_arguments(how):
    # `model(x, mask=m)` on tp.compile(model) raised "keyword-only and **kwargs
    # parameters are not supported": keywords were bound against the module's
    # __call__(*args, **kwargs) instead of its forward's signature.
    m = _Masked()
    if how == "Module.compile":
        m.compile()
        cm = m
    else:
        if how == "hooked":
            m.register_forward_hook(lambda mod, args, out: None)
        cm = tp.compile(m)
    x = tp.randn(2, 3)
    mask = tp.tensor([[True, False, True], [False, False, True]])
    calls = [((x,), {}), ((x, mask), {}), ((x,), {"mask": mask}), ((x,), {"scale": 3.0}),
             ((x, mask), {"scale": 2.0}), ((), {"x": x, "scale": 4.0, "mask": mask}), ((x,), {})]
    for args, kw in calls:
        np.testing.assert_allclose(_np(cm(*args, **kw)), _np(m.forward(*args, **kw)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("how", ["module", "function"])
def test_double_star_keyword_arguments_reach_the_compiled_function(how):
    # A forward(self, x, **extra) / def f(x, **kw) raised TypeError for any keyword;
    # the extra keywords are now one dict argument (its keys select the version).
    b = tp.randn(3)
    x = tp.randn(2, 3)
    if how == "module":
        m = _Extra()
        cf, ref = tp.compile(m), m.forward
    else:
        def ref(x, **kw):
            return x * kw.get("s", 1.0) + (kw["b"] if "b" in kw else 0)
        cf = tp.compile(ref)
    kws = ([{}, {"bias": b}, {"act": "relu"}, {"bias": b, "act": "relu"}, {"act": "relu", "bias": b * 2}]
           if how == "module" else [{}, {"s": 2.0}, {"b": b}, {"s": 3.0, "b": b}, {"b": b * 2, "s": 3.0}])
    for kw in kws:
        np.testing.assert_allclose(_np(cf(x, **kw)), _np(ref(x, **kw)), rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError):
        cf(x, 1)  # too many positional arguments, as eager


# ---------------------------------------------------------------- `.grad` read inside a compiled function
def _sgd_if_grad(params, lr):
    with tp.no_grad():
        for p in params:
            if p.grad is not None:
                p.sub_(lr * p.grad)


@pytest.mark.parametrize("how", ["list argument", "module argument", "tensor argument"])
def test_an_update_that_skips_parameters_without_a_gradient_sees_them_get_one(how):
    # The version captured while a parameter's grad was None skipped it, and was
    # reused after backward() gave it one: a silent no-op update. The other way
    # round, a tensor argument's `p.grad` was re-read as the capture's gradient
    # object, stale once backward() replaced it.
    def run(step):
        tp.manual_seed(0)
        model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
        x = tp.randn(5, 3)
        for i in range(4):
            model.zero_grad(set_to_none=True)
            if i == 0:  # only the head gets a gradient (a frozen-then-unfrozen body)
                model[1](model[0](x).detach()).sum().backward()
            else:
                model(x).sum().backward()
            if how == "list argument":
                step(list(model.parameters()), 0.1)
            elif how == "module argument":
                step(model, 0.1)
            else:
                for p in model.parameters():
                    step(p, 0.1)
        return [_np(p) for p in model.parameters()]

    if how == "module argument":
        def update(m, lr):
            _sgd_if_grad(m.parameters(), lr)
    elif how == "tensor argument":
        def update(p, lr):
            _sgd_if_grad([p], lr)
    else:
        update = _sgd_if_grad
    for a, b in zip(run(tp.compile(update)), run(update)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_the_gradient_of_a_tensor_argument_is_read_at_every_call():
    def upd(p, lr):
        with tp.no_grad():
            p.sub_(lr * p.grad)

    cf = tp.compile(upd)
    p = tp.ones(3, requires_grad=True)
    (p * 2).sum().backward()
    cf(p, 0.1)
    p.grad = None
    (p * 3).sum().backward()  # another gradient object
    cf(p, 0.1)
    np.testing.assert_allclose(_np(p), [0.5, 0.5, 0.5], rtol=1e-6)
    p.grad = None
    with pytest.raises(TypeError):  # as eager: 0.1 * None
        cf(p, 0.1)


def test_zeroing_the_gradient_of_a_tensor_argument_in_a_compiled_function_persists():
    def zero(params):
        for p in params:
            if p.grad is not None:
                p.grad.zero_()

    cf = tp.compile(zero)
    p = tp.ones(3, requires_grad=True)
    (p * 2).sum().backward()
    g = p.grad
    cf([p])
    assert p.grad is g
    np.testing.assert_array_equal(_np(p.grad), [0, 0, 0])


def test_a_changed_gradient_presence_is_named_in_the_recompile_log(capfd, monkeypatch):
    monkeypatch.setenv("TP_LOGS", "recompiles")
    cf = tp.compile(lambda p: p * 2 if p.grad is None else p * 2 + p.grad)
    p = tp.ones(2, requires_grad=True)
    cf(p)
    p.grad = tp.ones(2)
    np.testing.assert_allclose(_np(cf(p)), [3, 3])
    assert "p.grad is a tensor now (it was None when captured)" in capfd.readouterr().err


# ---------------------------------------------------------------- copies of a compiled module
def test_deepcopy_and_pickle_of_a_compiled_module():
    # copy.deepcopy(tp.compile(model)) (an EMA / teacher copy) raised "cannot
    # pickle 'CompiledFunction' object"; so did pickling it. The copy is a compiled
    # module over a copy of the module, with the same options.
    import copy
    import pickle

    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    cm = tp.compile(m, options={"warn_fallback": False})
    x = tp.randn(5, 3)
    y = _np(cm(x))
    ema = copy.deepcopy(cm)
    assert ema._orig_mod is not m and ema._orig_mod[0].weight is not m[0].weight
    np.testing.assert_allclose(_np(ema(x)), y, rtol=1e-6)
    with tp.no_grad():
        m[0].weight.add_(1.0)
    np.testing.assert_allclose(_np(ema(x)), y, rtol=1e-6)  # its own parameters
    np.testing.assert_allclose(_np(cm(x)), _np(m(x)), rtol=1e-6)
    loaded = pickle.loads(pickle.dumps(cm))
    np.testing.assert_allclose(_np(loaded(x)), _np(m(x)), rtol=1e-6)
    both = copy.deepcopy({"compiled": cm, "model": m})  # one copy of the module, shared
    assert both["compiled"]._orig_mod is both["model"]
    assert copy.copy(cm)._orig_mod is m
    f = tp.compile(lambda t: t + 1)
    assert copy.deepcopy(f) is f  # a function copies as itself


# ---------------------------------------------------------------- writes through `.data`
def test_an_ema_update_through_data_in_a_compiled_function_is_applied():
    # `q.data.lerp_(p.data, d)` / `w.data.add_(u)` on tensors the capture never
    # traced: each `.data` is a new alias without an owner path, so the write was
    # dropped (no write-back) and every call was a silent no-op. It is now read as
    # `.data` of its tensor, found through that tensor's path, and written back.
    import copy

    tp.manual_seed(0)
    model = nn.Linear(3, 3)
    ema, ema_ref = copy.deepcopy(model), copy.deepcopy(model)

    def update(src, dst, decay):
        for p, q in zip(src.parameters(), dst.parameters()):
            q.data.lerp_(p.data, 1 - decay)

    compiled = tp.compile(update)
    for _ in range(3):
        with tp.no_grad():
            model.weight.add_(0.5)
        compiled(model, ema, 0.9)
        update(model, ema_ref, 0.9)
        np.testing.assert_allclose(_np(ema.weight), _np(ema_ref.weight), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(_np(ema.bias), _np(ema_ref.bias), rtol=1e-6, atol=1e-7)
    assert ema.weight.requires_grad and ema.weight.is_leaf

    w = tp.zeros(3, requires_grad=True)
    u = tp.ones(3)

    def add():
        w.data.add_(u.data)

    step = tp.compile(add)
    for i in range(3):
        step()
        np.testing.assert_array_equal(_np(w), [i + 1.0] * 3)
    w.data = tp.zeros(4)  # another memory: read through w again
    u.data = tp.ones(4)
    step()
    np.testing.assert_array_equal(_np(w), [1.0] * 4)
