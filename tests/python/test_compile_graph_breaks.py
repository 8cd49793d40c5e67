"""Graph breaks: under fullgraph=False (the default, as in PyTorch 2) a function
whose capture is refused (t.numpy(), a dual level, Python's random module, a
write tp.compile cannot express...) runs as Python from then on, with its modules
and optimizer steps compiled, and one warning naming the reason. Results and
side effects are eager's; fullgraph=True and strict_native=True keep the error."""
import random
import warnings

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
from tensorplay.autograd import forward_ad as fwAD


def _calls_with_warnings(f, *args):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = f(*args)
    return r, [str(x.message) for x in w if "graph break" in str(x.message)]


def numpy_roundtrip(x):
    return tp.from_numpy(x.numpy() * 2) + x.sin()


def test_numpy_inside_runs_eagerly_with_one_warning():
    f = tp.compile(numpy_roundtrip)
    x = tp.randn(5)
    r, w = _calls_with_warnings(f, x)
    np.testing.assert_allclose(r.numpy(), numpy_roundtrip(x).numpy(), rtol=1e-6)
    assert len(w) == 1 and "numpy()" in w[0] and "numpy_roundtrip" in w[0]
    for _ in range(2):  # later calls: no capture tried again, no warning, new inputs read
        y = tp.randn(7)
        r, w = _calls_with_warnings(f, y)
        np.testing.assert_allclose(r.numpy(), numpy_roundtrip(y).numpy(), rtol=1e-6)
        assert w == []


@pytest.mark.parametrize("opts", [dict(fullgraph=True), dict(strict_native=True)])
def test_fullgraph_and_strict_native_keep_the_error(opts):
    with pytest.raises(tp.compiler.CaptureError, match="numpy"):
        tp.compile(numpy_roundtrip, **opts)(tp.randn(3))


def test_the_failed_capture_writes_are_made_once():
    def f(x):
        x.add_(1)
        x.numpy()
        return x * 2

    x = tp.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = tp.compile(f)(x)
    np.testing.assert_array_equal(x.numpy(), [2.0, 2.0, 2.0])  # once, not once per attempt
    np.testing.assert_array_equal(r.numpy(), [4.0, 4.0, 4.0])


def test_forward_mode_ad_inside_and_forward_transforms_of_the_function():
    def tangent(a):
        with fwAD.dual_level():
            return fwAD.unpack_dual(fwAD.make_dual(a, tp.ones_like(a) * 2).exp()).tangent

    def loss(u):
        return (u.sin() * u).sum()

    x = tp.tensor([0.0, 1.0, 2.0], dtype=tp.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(tp.compile(tangent)(x).numpy(), 2 * np.exp(x.numpy()))
        np.testing.assert_allclose(tp.compile(tp.func.hessian(loss))(x).numpy(), tp.func.hessian(loss)(x).numpy())
        np.testing.assert_allclose(tp.compile(tp.func.jacfwd(lambda u: u.sin() * u))(x).numpy(),
                                   tp.func.jacfwd(lambda u: u.sin() * u)(x).numpy())
        out, t = tp.compile(lambda u: tp.func.jvp(tp.sin, (u,), (tp.ones_like(u),)))(x)
    np.testing.assert_allclose(t.numpy(), np.cos(x.numpy()))


def test_python_random_draws_are_fresh_at_every_call():
    def jitter(x):
        return x * (1 + random.random())

    f = tp.compile(jitter)
    random.seed(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = [f(tp.ones(2)).numpy()[0] for _ in range(3)]
    random.seed(3)
    want = [jitter(tp.ones(2)).numpy()[0] for _ in range(3)]
    np.testing.assert_allclose(got, want)
    assert len(set(got)) == 3


def test_modules_called_by_a_broken_function_stay_compiled():
    tp.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 3))

    def f(x):
        y = m(x)
        scale = float(np.abs(y.detach().numpy()).max())  # data leaves the program: a break
        return y / scale

    cf = tp.compile(f)
    x = tp.randn(5, 4)
    before = tp.compiler.metrics.compile_count
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = cf(x)
    np.testing.assert_allclose(got.detach().numpy(), f(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert cf._stepwise_on
    assert tp.compiler.metrics.compile_count > before  # the module's forward was generated code
    got.sum().backward()  # gradients reach the parameters through the compiled module
    assert all(p.grad is not None for p in m.parameters())


def test_an_eager_error_after_the_break_is_eagers_own():
    def f(x, o):
        return tp.sum(x, 0, out=o) * x.numpy().sum()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cf = tp.compile(f)
        x = tp.ones(2, 3)
        try:
            want = f(x, tp.zeros(3))
        except Exception as e:  # whatever eager does, compiled does the same
            with pytest.raises(type(e)):
                cf(x, tp.zeros(3))
        else:
            np.testing.assert_allclose(cf(x, tp.zeros(3)).numpy(), want.numpy())


class _Breaks(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Sequential(nn.Linear(4, 8), nn.Tanh())
        self.b = nn.Linear(8, 2)

    def forward(self, x):
        h = self.a(x)
        peak = float(np.abs(h.detach().numpy()).max())  # a break inside the module's own forward
        return self.b(h / peak)


@pytest.mark.parametrize("how", ["tp.compile", "module.compile"])
def test_a_module_whose_forward_breaks_runs_its_submodules_compiled(how):
    tp.manual_seed(0)
    m, ref = _Breaks(), _Breaks()
    ref.load_state_dict(m.state_dict())
    if how == "tp.compile":
        cm = tp.compile(m)
    else:
        m.compile()
        cm = m
    x = tp.randn(6, 4)
    before = tp.compiler.metrics.compile_count
    r, w = _calls_with_warnings(cm, x)
    assert len(w) == 1 and "_Breaks" in w[0]
    np.testing.assert_allclose(r.detach().numpy(), ref(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert tp.compiler.metrics.compile_count > before  # self.a and self.b are generated code
    r.square().sum().backward()
    ref(x).square().sum().backward()
    for p, q in zip(m.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(tp.compiler.CaptureError, match="numpy"):
        tp.compile(_Breaks(), fullgraph=True)(x)


class _CountsCalls(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x):
        self.calls += 1  # before the refused statement: the failed capture ran it too
        h = self.lin(x)
        return h * float(np.abs(h.detach().numpy()).max())


@pytest.mark.parametrize("how", ["module", "function"])
def test_module_attributes_rebound_before_the_break_change_once(how):
    tp.manual_seed(0)
    m = _CountsCalls()
    f = tp.compile(m) if how == "module" else tp.compile(lambda x: m(x) + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            f(tp.randn(2, 4))
    assert m.calls == 3


def test_a_branch_on_grad_fn_takes_eagers_way():
    # The capture records no autograd, so an intermediate computed from a tensor
    # that requires grad had grad_fn None there: `if h.grad_fn is None` took the
    # other branch than eager's, silently (the compiled call returned zeros).
    w = tp.randn(3, 3, requires_grad=True)

    def f(x):
        h = x @ w
        if h.grad_fn is None:
            return h * 0
        return h.relu()

    x = tp.randn(4, 3)
    r, warned = _calls_with_warnings(tp.compile(f), x)
    np.testing.assert_allclose(r.detach().numpy(), f(x).detach().numpy(), rtol=1e-6)
    assert len(warned) == 1 and "grad_fn" in warned[0]
    with pytest.raises(tp.compiler.CaptureError, match="grad_fn"):
        tp.compile(f, fullgraph=True)(x)
    # a leaf's and a no-grad value's grad_fn (None, as in eager) do not break the graph
    g = tp.compile(lambda x: (x @ w.detach()) * (w.grad_fn is None) * ((x + 1).grad_fn is None))
    r, warned = _calls_with_warnings(g, x)
    assert warned == []
    np.testing.assert_allclose(r.numpy(), (x @ w.detach()).numpy(), rtol=1e-6)


def test_printing_a_result_that_requires_grad_does_not_break_the_graph(capsys):
    # The repr reads grad_fn; with grad_fn refused inside a capture, print(h)
    # broke the graph and the first call printed twice.
    w = tp.randn(3, requires_grad=True)

    def f(x):
        h = (x * w).sum()
        print("h", h)
        return h * 2

    r, warned = _calls_with_warnings(tp.compile(f), tp.ones(3))
    assert warned == [] and capsys.readouterr().out.count("h tensor(") == 1
