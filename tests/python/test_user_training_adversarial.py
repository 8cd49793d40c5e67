"""Compiled training as an adversarial user writes it: things done to the model,
the optimizer and the tensors between and around compiled calls, checked
against eager TensorPlay and PyTorch (values, gradients, warnings, errors)."""

import warnings

import numpy as np
import pytest

import tensorplay as tp


def test_a_non_leaf_free_tensor_does_not_make_compile_warn():
    # The capture's search for free tensors read `.grad` of every tensor that
    # requires grad; on a non-leaf (a weight built as `randn(...) * 0.5`) that
    # is eager's "non-leaf .grad accessed" warning, which the user never
    # caused (and under -W error the search swallowed it as an exception).
    ws = [tp.randn(4, 4, requires_grad=True) * 0.5]

    def f(x):
        for w in ws:
            x = x @ w
        return x.sum()

    x = tp.randn(2, 4)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        want = f(x)
        got = tp.compile(f)(x)
    assert [str(r.message) for r in rec] == []
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    assert got.requires_grad


@pytest.mark.parametrize("dynamic", [True, None])
def test_a_result_that_is_a_view_of_the_input_in_dynamic_training(dynamic):
    # `a.view(-1)` of an input that requires grad: the joint graph's tangent has
    # the composite size s0*s1, so the symbolic training capture is refused and
    # the version made static; the result's view replay (aliasing the input as
    # eager's does) still carried the view's symbolic size and raised
    # "evaluate: no value for size variable s1" at the first call.
    cf = tp.compile(lambda a: a.view(-1), dynamic=dynamic)
    for n in (4, 6):
        a = tp.randn(n, 8, requires_grad=True)
        v = cf(a)
        assert v.shape == (n * 8,) and v.grad_fn is not None
        (v * tp.arange(n * 8.0)).sum().backward()
        np.testing.assert_array_equal(a.grad.numpy(), np.arange(n * 8.0, dtype=np.float32).reshape(n, 8))


def _two_layers():
    tp.manual_seed(0)
    w = tp.randn(8, 8, requires_grad=True)
    return w, (lambda x: ((x @ w).tanh() @ w).tanh().sum())


@pytest.mark.parametrize("budget", [1.5, 2.0, float("inf"), float("nan"), -1, -0.5, True, None])
def test_an_activation_memory_budget_that_is_neither_bytes_nor_a_fraction_is_refused(budget):
    # 1.5 (a fraction above 1) was read as 1 byte, so everything was recomputed;
    # inf and 1e20 became out-of-range byte counts (an undefined float -> int cast).
    w, f = _two_layers()
    with pytest.raises(ValueError, match=r"activation_memory_budget.*fraction in \[0, 1\]"):
        tp.compile(f, options={"activation_memory_budget": budget})(tp.randn(4, 8))


@pytest.mark.parametrize("budget", ["1.5", "inf", "nan", "-1", "1e30"])
def test_an_activation_memory_budget_text_that_is_neither_bytes_nor_a_fraction_is_refused(budget):
    # The C++ option parser itself (text options reach it unchecked by Python).
    w, f = _two_layers()
    with pytest.raises(ValueError, match=r"activation_memory_budget.*fraction in \[0, 1\]"):
        tp.compile(f, options={"activation_memory_budget": budget})(tp.randn(4, 8))


@pytest.mark.parametrize("budget,saved", [("0.5", 128), ("128", 128), ("99999999999999999999", 256)])
def test_activation_memory_budget_as_text(budget, saved):
    w, f = _two_layers()
    cf = tp.compile(f, options={"activation_memory_budget": budget})
    cf(tp.randn(4, 8)).backward()
    assert cf.last_aot["saved_bytes"] == saved


@pytest.mark.parametrize("budget,saved", [(1.0, 256), (1, 0), (0.5, 128), (0.0, 0), (10 ** 20, 256), (2 ** 70, 256),
                                          (np.float32(0.5), 128), (np.int64(128), 128)])
def test_activation_memory_budget_bytes_and_fractions(budget, saved):
    # The unconstrained cut saves two 4x8 float32 activations (256 bytes).
    w, f = _two_layers()
    x = tp.randn(4, 8)
    f(x).backward()
    want = w.grad.numpy().copy()
    w.grad = None
    cf = tp.compile(f, options={"activation_memory_budget": budget})
    cf(x).backward()
    assert cf.last_aot["saved_bytes"] == saved
    np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-5, atol=1e-6)


# ------------------------------------------------ custom Functions under forward-mode AD

def _straight_through(with_jvp, via_numpy=False):
    class Round(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            if via_numpy:  # the implementation leaves the operators: no tangent to trace
                return tp.tensor(np.round(x.detach().numpy()))
            return x.round()

        @staticmethod
        def backward(ctx, g):
            return g

    if with_jvp:
        Round.jvp = staticmethod(lambda ctx, t: t * 3)
    return Round


@pytest.mark.parametrize("via_numpy", [False, True])
def test_a_custom_function_without_jvp_refuses_forward_mode_ad(via_numpy):
    # Before: forward ran on the dual input and its operators' tangents came out
    # (round's: 0, where the Function's own derivative is 1), or none at all
    # (numpy); PyTorch raises NotImplementedError.
    import tensorplay.autograd.forward_ad as fwAD
    R = _straight_through(False, via_numpy)
    x = tp.tensor([0.2, 1.7, -0.6], dtype=tp.float64)
    with fwAD.dual_level():
        with pytest.raises(NotImplementedError, match="Round.*jvp"):
            R.apply(fwAD.make_dual(x, tp.ones(3, dtype=tp.float64)))
    with pytest.raises(NotImplementedError, match="Round.*jvp"):
        tp.func.jvp(R.apply, (x,), (tp.ones(3, dtype=tp.float64),))
    np.testing.assert_array_equal(R.apply(x).numpy(), [0.0, 2.0, -1.0])  # no tangent: as before


@pytest.mark.parametrize("via_numpy", [False, True])
def test_a_custom_functions_jvp_gives_the_tangent(via_numpy):
    import torch
    R = _straight_through(True, via_numpy)

    class TR(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.round()

        @staticmethod
        def backward(ctx, g):
            return g

        @staticmethod
        def jvp(ctx, t):
            return t * 3

    x, t = np.array([0.2, 1.7, -0.6]), np.array([1.0, -2.0, 0.5])
    y, jy = tp.func.jvp(R.apply, (tp.tensor(x),), (tp.tensor(t),))
    import torch.autograd.forward_ad as tfw
    with tfw.dual_level():
        want = tfw.unpack_dual(TR.apply(tfw.make_dual(torch.tensor(x), torch.tensor(t))))
    np.testing.assert_array_equal(y.numpy(), want.primal.numpy())
    np.testing.assert_array_equal(jy.numpy(), want.tangent.numpy())


def test_a_custom_functions_jvp_with_several_inputs_and_outputs_and_reverse_mode():
    import tensorplay.autograd.forward_ad as fwAD

    class MulAdd(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, k):
            ctx.save_for_backward(x, y)
            ctx.k = k
            return x * y * k, x + y

        @staticmethod
        def backward(ctx, g1, g2):
            x, y = ctx.saved_tensors
            return g1 * y * ctx.k + g2, g1 * x * ctx.k + g2, None

        @staticmethod
        def jvp(ctx, tx, ty, tk):
            assert tk is None  # a number's tangent
            x, y = ctx.saved_tensors
            return (tx * y + x * ty) * ctx.k, tx + ty

    tp.manual_seed(0)
    a, b, ta = (tp.randn(3, dtype=tp.float64) for _ in range(3))
    # b has no tangent: jvp sees zeros for it (materialized, as for gradients)
    a_req = a.clone().requires_grad_()
    with fwAD.dual_level():
        p, s = MulAdd.apply(fwAD.make_dual(a_req, ta), b, 2.0)
        tp_, ts = fwAD.unpack_dual(p).tangent, fwAD.unpack_dual(s).tangent
        (p.sum() + s.sum()).backward()  # reverse mode through the same call
    np.testing.assert_allclose(tp_.detach().numpy(), (ta * b * 2).numpy(), rtol=1e-15)
    np.testing.assert_allclose(ts.detach().numpy(), ta.numpy(), rtol=1e-15)
    np.testing.assert_allclose(a_req.grad.numpy(), (b * 2 + 1).numpy(), rtol=1e-15)


def test_full_backward_hooks_pass_forward_mode_tangents_through():
    # The hooks wrap a module call in identity Functions: they need a jvp too.
    import tensorplay.autograd.forward_ad as fwAD
    tp.manual_seed(0)
    m = tp.nn.Linear(3, 2).double()
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append(go[0].shape))
    x = tp.randn(4, 3, dtype=tp.float64, requires_grad=True)
    t = tp.randn(4, 3, dtype=tp.float64)
    with fwAD.dual_level():
        y = m(fwAD.make_dual(x, t))
        tangent = fwAD.unpack_dual(y).tangent
    np.testing.assert_allclose(tangent.detach().numpy(), (t @ m.weight.t()).detach().numpy(), rtol=1e-14)
    y.sum().backward()
    assert seen == [(4, 2)]
    np.testing.assert_allclose(x.grad.numpy(), m.weight.sum(0).expand(4, 3).detach().numpy(), rtol=1e-14)


# ------------------------------------------------ custom Functions inside tp.compile

class _STE(tp.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, g):
        return g


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "stax"])
def test_a_custom_function_in_a_compiled_training_function_runs_its_backward(backend):
    # The capture ran forward under no_grad and derived the backward from the
    # graph: _STE.backward never ran and no gradient went through the call, so
    # with another path to w the compiled gradient was silently wrong (it was
    # then refused with a CaptureError). Its backward is now the call's
    # derivative in the joint graph (tests/python/test_compile_custom_function.py).
    w = tp.randn(3, 3, requires_grad=True)
    x = tp.randn(2, 3)

    def f(x):
        h = x @ w
        return (_STE.apply(h) * 2).sum() + h.sum()

    tp.compile(f, backend=backend)(x).backward()
    got, w.grad = w.grad, None
    f(x).backward()
    np.testing.assert_allclose(got.numpy(), w.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(got.numpy(), np.repeat(x.numpy().sum(0)[:, None] * 3, 3, 1), rtol=1e-5)


def test_a_custom_function_in_compiled_inference_is_captured():
    f = tp.compile(lambda x: _STE.apply(x * 2) + 1)
    with tp.no_grad():
        np.testing.assert_array_equal(f(tp.tensor([0.3, 0.8])).numpy(), [2.0, 3.0])


# ------------------------------------------------ model = tp.compile(model), the PyTorch idiom

def test_a_compiled_module_answers_for_its_module_in_a_training_loop():
    # `model = tp.compile(model)` then model.parameters() / .train() / .eval() /
    # .state_dict() raised AttributeError ('CompiledFunction' has no attribute).
    import torch

    def build(L):
        return L.nn.Sequential(L.nn.Linear(8, 16), L.nn.BatchNorm1d(16), L.nn.ReLU(), L.nn.Linear(16, 4))

    tp.manual_seed(0)
    model = build(tp)
    tmodel = build(torch)
    with torch.no_grad():
        for p, q in zip(tmodel.state_dict().values(), model.state_dict().values()):
            p.copy_(torch.from_numpy(q.numpy().copy()))
    orig = model
    model = tp.compile(model)
    # (SGD: Adam would amplify the rounding noise of the first bias's gradient,
    # zero in exact arithmetic before batch norm, into lr-sized steps.)
    opt = tp.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.1, momentum=0.9)
    x, y = tp.randn(16, 8), tp.randn(16, 4)
    tx, ty = torch.from_numpy(x.numpy().copy()), torch.from_numpy(y.numpy().copy())
    for step in range(4):
        model.train()
        tmodel.train()
        opt.zero_grad()
        topt.zero_grad()
        loss = tp.nn.functional.mse_loss(model(x), y)
        loss.backward()
        tloss = torch.nn.functional.mse_loss(tmodel(tx), ty)
        tloss.backward()
        opt.step()
        topt.step()
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-4)
        model.eval()
        tmodel.eval()
        assert not orig.training and model.training is False
        with tp.no_grad():
            np.testing.assert_allclose(model(x).numpy(), tmodel(tx).detach().numpy(), rtol=1e-4, atol=1e-5)
    assert model._orig_mod is orig
    assert list(model.state_dict()) == list(orig.state_dict())
    assert len(list(model.parameters())) == 6
    with pytest.raises(AttributeError, match="no_such_attribute"):
        model.no_such_attribute
    with pytest.raises(AttributeError, match="'CompiledFunction' object has no attribute 'parameters'"):
        tp.compile(lambda t: t * 2).parameters


def test_tp_compile_as_a_decorator_of_a_modules_forward():
    # `@tp.compile def forward(self, x)` in the class body: the CompiledFunction
    # was no descriptor, so model(x) called it without self ("missing a
    # required argument: 'x'").
    class Net(tp.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = tp.nn.Linear(8, 16), tp.nn.Linear(16, 4)

        @tp.compile
        def forward(self, x):
            return self.l2(self.l1(x).relu())

        def eager(self, x):
            return self.l2(self.l1(x).relu())

    tp.manual_seed(0)
    a, b = Net(), Net()
    x = tp.randn(4, 8)
    for net in (a, b, a):  # each instance its own parameters
        np.testing.assert_allclose(net(x).detach().numpy(), net.eager(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    (a(x) ** 2).sum().backward()
    got = [p.grad.numpy().copy() for p in a.parameters()]
    a.zero_grad()
    (a.eager(x) ** 2).sum().backward()
    for g, p in zip(got, a.parameters()):
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert isinstance(Net.__dict__["forward"], tp._C.CompiledFunction) and Net.forward is Net.__dict__["forward"]


# ------------------------------------------------ dynamic training of the usual flatten

@pytest.mark.parametrize("flatten", [
    lambda h: h.view(h.size(0), -1),
    lambda h: h.view(h.shape[0] * 2, -1),
    lambda h: h.view(h.shape[0], h.shape[1], -1).flatten(1),
])
def test_view_with_an_inferred_dim_trains_in_one_dynamic_version(flatten):
    # `x.view(x.size(0), -1)` (a CNN's flatten): the joint trace replayed the view
    # with its -1, which did not match the capture's resolved symbolic sizes, so
    # the batch symbol was fixed and every batch size compiled its own version
    # ("the joint trace numbers the sizes differently from the forward").
    tp.manual_seed(0)
    conv = tp.nn.Conv2d(3, 4, 3, padding=1)
    lin = tp.nn.Linear(4 * 5 * 5, 2)

    def loss_fn(x):
        return (lin(flatten(conv(x).relu()).reshape(x.shape[0], -1)) ** 2).mean()

    tp.compiler.reset()
    cf = tp.compile(loss_fn, dynamic=True)
    for n in (4, 6, 7, 12):  # (a first batch of 3 or 5 is duck-sized with the channels / the height)
        x = tp.randn(n, 3, 5, 5)
        got = cf(x)
        got.backward()
        grads = [p.grad.numpy().copy() for p in (*conv.parameters(), *lin.parameters())]
        for p in (*conv.parameters(), *lin.parameters()):
            p.grad = None
        want = loss_fn(x)
        want.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        for g, p in zip(grads, (*conv.parameters(), *lin.parameters())):
            np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-4, atol=1e-6)
            p.grad = None
    assert tp.compiler.metrics.as_dict()["captures"] == 1
