"""tp.autograd.Function inside tp.compile with gradients (graph/custom_function.h).

The Function's forward is captured into the forward graph and its backward,
traced on the joint graph's values (the incoming gradients and what ctx saved),
is the call's derivative in the joint graph: the compiled gradients are the
user's backward's, checked against eager (and PyTorch, finite differences).
Before, such a call raised CaptureError ("the compiled backward ... would not
call X.backward").
"""
import warnings

import numpy as np
import pytest

import tensorplay as tp

BACKENDS = ["aot_eager", "stax"]


def _grads(f, args, params):
    """(result, grads of the tensors in args/params that require grad) of f(*args).sum()."""
    for t in list(args) + list(params):
        if isinstance(t, tp.Tensor):
            t.grad = None
    out = f(*args)
    loss = out if out.dim() == 0 else out.sum()
    loss.backward()
    return out.detach().clone(), [t.grad.clone() if t.grad is not None else None
                                  for t in list(args) + list(params) if isinstance(t, tp.Tensor) and t.requires_grad]


def _check(f, args, params=(), backend="aot_eager", rtol=1e-6, atol=1e-7, **kw):
    """f compiled against f eager: result and every gradient."""
    want_out, want = _grads(f, args, params)
    got_out, got = _grads(tp.compile(f, backend=backend, **kw), args, params)
    np.testing.assert_allclose(got_out.numpy(), want_out.numpy(), rtol=rtol, atol=atol)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert (g is None) == (w is None)
        if g is not None:
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=rtol, atol=atol)
    return got


class Sq(tp.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


class STE(tp.autograd.Function):
    """Straight-through rounding: forward rounds, backward passes the gradient."""
    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, g):
        return g


@pytest.mark.parametrize("backend", ["eager"] + BACKENDS)
def test_the_reproducer_gives_eagers_gradient(backend):
    tp.manual_seed(0)
    w = tp.randn(4, 4, requires_grad=True)
    x = tp.randn(3, 4, requires_grad=True)
    _check(lambda x: Sq.apply(x @ w).sum(), (x,), (w,), backend=backend, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_straight_through_estimator_gets_exactly_eagers_gradients(backend):
    # Differentiating the captured operators would give round's derivative, 0.
    tp.manual_seed(1)
    w = tp.randn(5, 3, requires_grad=True)
    x = tp.randn(4, 5)
    f = lambda x: (STE.apply(x @ w) * tp.arange(3.0)).sum()
    (gw,) = _check(f, (x,), (w,), backend=backend, rtol=0, atol=0)
    np.testing.assert_array_equal(gw.numpy(), np.outer(x.numpy().sum(0), np.arange(3.0)).astype(np.float32))


def test_the_joint_graph_holds_the_users_backward_and_no_custom_node():
    tp.manual_seed(0)
    w = tp.randn(4, 4, requires_grad=True)
    cf = tp.compile(lambda x: Sq.apply(x @ w).sum(), backend="aot_eager")
    cf(tp.randn(3, 4)).backward()
    aot = cf.last_aot
    assert "custom_function" not in aot["joint"]
    assert "custom_function" in cf.last_graph.code  # the forward graph's node, named after the Function
    assert "name='Sq'" in cf.last_graph.code
    # backward: 2 * x * g (mul, mul) then the matmul's gradient
    assert aot["joint"].count("tp.mul(") >= 3


class SoftplusFn(tp.autograd.Function):
    """log(1 + exp(x)) with a hand-written derivative (the sigmoid)."""
    @staticmethod
    def forward(ctx, x):
        y = tp.log1p(tp.exp(x))
        ctx.save_for_backward(x)
        return y

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * tp.sigmoid(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_smooth_custom_op_matches_finite_differences(backend):
    tp.manual_seed(2)
    x = tp.randn(3, 4, dtype=tp.float64, requires_grad=True)
    w = tp.randn(4, 2, dtype=tp.float64, requires_grad=True)
    cf = tp.compile(lambda x: (SoftplusFn.apply(x @ w) ** 2).sum(), backend=backend)
    cf(x).backward()
    gx = x.grad.numpy().copy()
    eps = 1e-6
    xv = x.detach().numpy()
    num = np.zeros_like(xv)
    with tp.no_grad():
        for i in np.ndindex(*xv.shape):
            d = np.zeros_like(xv)
            d[i] = eps
            num[i] = (cf(tp.tensor(xv + d)).item() - cf(tp.tensor(xv - d)).item()) / (2 * eps)
    np.testing.assert_allclose(gx, num, rtol=1e-6, atol=1e-8)


class Swish(tp.autograd.Function):
    """A memory-saving activation: keeps x only, recomputes sigmoid(x) in backward."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * tp.sigmoid(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = tp.sigmoid(x)
        return g * (s * (1 + x * (1 - s)))


def test_the_partition_cuts_across_the_users_backward():
    # The user's backward is ordinary operators of the joint graph: the min cut
    # keeps the GEMM's output (32x64 float32) and recomputes the sigmoid chain.
    tp.manual_seed(21)
    w = tp.randn(64, 64, requires_grad=True)
    x = tp.randn(32, 64)
    f = lambda x: Swish.apply(x @ w).sum()
    _check(f, (x,), (w,), rtol=1e-5, atol=1e-5)
    cf = tp.compile(f, backend="aot_eager")
    cf(x).backward()
    saved = {name: nbytes for name, nbytes, by_reference in cf.last_aot["saved"] if not by_reference}
    assert saved == {"matmul": 32 * 64 * 4}
    assert "sigmoid" in cf.last_aot["recomputed"]


class SavesEverything(tp.autograd.Function):
    """Saves an input, an intermediate and an output."""
    @staticmethod
    def forward(ctx, x):
        t = tp.exp(x)
        y = t * x
        ctx.save_for_backward(x, t, y)
        return y

    @staticmethod
    def backward(ctx, g):
        x, t, y = ctx.saved_tensors
        return g * (t + y)  # d(x e^x) = e^x + x e^x


@pytest.mark.parametrize("backend", BACKENDS)
def test_saved_inputs_intermediates_and_outputs(backend):
    tp.manual_seed(3)
    x = tp.randn(6, requires_grad=True)
    _check(lambda x: SavesEverything.apply(x * 2).sum(), (x,), backend=backend, rtol=1e-5)


class Scaled(tp.autograd.Function):
    """Non-tensor ctx attributes: a number, a shape, a flag; a tensor kept on ctx."""
    @staticmethod
    def forward(ctx, x, scale, flip):
        ctx.scale = scale
        ctx.shape = x.shape
        ctx.flip = flip
        ctx.extra = (x.abs(), {"k": 2})  # a tensor inside a tuple: a saved value too
        return (x * scale).reshape(-1)

    @staticmethod
    def backward(ctx, g):
        a, d = ctx.extra
        gx = g.reshape(ctx.shape) * ctx.scale * (-1 if ctx.flip else 1) + a * d["k"]
        return gx, None, None


@pytest.mark.parametrize("flip", [False, True])
def test_non_tensor_ctx_attributes_and_arguments(flip):
    tp.manual_seed(4)
    x = tp.randn(2, 3, requires_grad=True)
    _check(lambda x: Scaled.apply(x + 1, 2.5, flip) * tp.arange(6.0), (x,))


class NeedsCheck(tp.autograd.Function):
    seen = []

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        NeedsCheck.seen.append(ctx.needs_input_grad)
        a, b = ctx.saved_tensors
        ga = g * b if ctx.needs_input_grad[0] else None
        gb = g * a if ctx.needs_input_grad[1] else None
        return ga, gb


@pytest.mark.parametrize("backend", BACKENDS)
def test_needs_input_grad_is_eagers(backend):
    tp.manual_seed(5)
    w = tp.randn(3, requires_grad=True)
    c = tp.randn(3)  # no grad
    NeedsCheck.seen.clear()
    _check(lambda c: NeedsCheck.apply(w * 2, c + 1).sum(), (c,), (w,), backend=backend)
    assert NeedsCheck.seen[0] == NeedsCheck.seen[1] == (True, False)  # eager's, then the trace's
    NeedsCheck.seen.clear()
    _check(lambda c: NeedsCheck.apply(c + 1, w).sum(), (c,), (w,), backend=backend)
    assert NeedsCheck.seen[0] == NeedsCheck.seen[1] == (False, True)


class MulAdd(tp.autograd.Function):
    """Several inputs (one a number) and outputs; None for the number and an unused input."""
    @staticmethod
    def forward(ctx, x, y, k, z):
        ctx.save_for_backward(x, y)
        ctx.k = k
        return x * y * k, x + y

    @staticmethod
    def backward(ctx, g1, g2):
        x, y = ctx.saved_tensors
        return g1 * y * ctx.k + g2, g1 * x * ctx.k + g2, None, None


@pytest.mark.parametrize("backend", BACKENDS)
def test_several_inputs_and_outputs_and_none_gradients(backend):
    tp.manual_seed(6)
    x = tp.randn(4, requires_grad=True)
    y = tp.randn(4, requires_grad=True)
    z = tp.randn(4, requires_grad=True)

    def f(x, y, z):
        p, s = MulAdd.apply(x, y, 3.0, z)
        return (p * 2 + s.exp()).sum() + z.sum()

    gx, gy, gz = _check(f, (x, y, z), backend=backend, rtol=1e-5)
    np.testing.assert_array_equal(gz.numpy(), np.ones(4, np.float32))  # z only through the sum


class ArgmaxAndValue(tp.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        i = x.argmax(dim=1)
        v = x.amax(dim=1)
        m = (x > 0).to(x.dtype)  # a floating output marked non-differentiable
        ctx.mark_non_differentiable(i, m)
        ctx.save_for_backward(x, i)
        return v, i, m

    @staticmethod
    def backward(ctx, gv, gi, gm):
        x, i = ctx.saved_tensors
        assert gm is not None  # materialized zeros, as for any output without a gradient
        onehot = (tp.arange(x.shape[1]).unsqueeze(0) == i.unsqueeze(1)).to(x.dtype)
        return onehot * gv.unsqueeze(1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mark_non_differentiable(backend):
    tp.manual_seed(7)
    x = tp.randn(3, 5, requires_grad=True)

    def f(x):
        v, i, m = ArgmaxAndValue.apply(x * 1.5)
        assert not i.dtype.is_floating_point
        return v.sum() * 2 + (m * x).sum() + i.sum().to(x.dtype)

    _check(f, (x,), backend=backend)


class TwoOuts(tp.autograd.Function):
    calls = []

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        TwoOuts.calls.append((g1 is None, g2 is None))
        gx = None
        if g1 is not None:
            gx = g1 * 2
        if g2 is not None:
            gx = g2 * 3 if gx is None else gx + g2 * 3
        return gx


@pytest.mark.parametrize("backend", BACKENDS)
def test_set_materialize_grads_false_passes_none(backend):
    tp.manual_seed(8)
    x = tp.randn(4, requires_grad=True)
    TwoOuts.calls.clear()
    _check(lambda x: TwoOuts.apply(x)[1].sin().sum(), (x,), backend=backend, rtol=1e-5)
    assert TwoOuts.calls == [(True, False), (True, False)]  # eager, then the trace


class ScaleGrad(tp.autograd.Function):
    """Returns its input; a gradient reversal/scale layer."""
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x

    @staticmethod
    def backward(ctx, g):
        return -ctx.alpha * g, None


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_output_that_is_its_input(backend):
    tp.manual_seed(9)
    w = tp.randn(3, 3, requires_grad=True)
    x = tp.randn(2, 3)
    # the input is also used directly: only the Function's use is reversed
    (gw,) = _check(lambda x: (ScaleGrad.apply(x @ w, 0.5) ** 2).sum() + (x @ w).sum(), (x,), (w,),
                   backend=backend, rtol=1e-5)
    # and returned by the compiled function itself
    _check(lambda x: ScaleGrad.apply(x @ w, 2.0), (x,), (w,), backend=backend, rtol=1e-5)


def test_a_function_returning_the_compiled_functions_input():
    tp.manual_seed(9)
    x = tp.randn(2, 3, requires_grad=True)
    _check(lambda x: ScaleGrad.apply(x, 3.0), (x,))
    _check(lambda x: ScaleGrad.apply(x, 3.0) * x, (x,))


class Pair(tp.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        from collections import namedtuple
        ctx.info = namedtuple("Info", "ta shape")(a * 1, a.shape)  # a namedtuple holding a tensor and a size
        return a * b

    @staticmethod
    def backward(ctx, g):
        return g * ctx.info.ta.reshape(ctx.info.shape) + 1, g * 2


def test_the_same_tensor_twice_and_a_namedtuple_on_ctx():
    tp.manual_seed(19)
    x = tp.randn(3, requires_grad=True)
    _check(lambda a, b: Pair.apply(a, b).sum(), (x, x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_function_applied_twice_keeps_two_saved_values(backend):
    tp.manual_seed(10)
    w = tp.randn(4, 4, requires_grad=True)
    x = tp.randn(2, 4)
    _check(lambda x: Sq.apply(Sq.apply(x @ w) - 1).sum() + Sq.apply(x.sin() @ w).mean(), (x,), (w,),
           backend=backend, rtol=1e-5)


class LinearFn(tp.autograd.Function):
    """A linear layer with a hand-written backward."""
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return x @ weight.t() + bias

    @staticmethod
    def backward(ctx, g):
        x, weight = ctx.saved_tensors
        return g @ weight, g.t() @ x, g.sum(0)


class Net(tp.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = tp.nn.Linear(6, 8)
        self.l2 = tp.nn.Linear(8, 3)

    def forward(self, x):
        h = LinearFn.apply(x, self.l1.weight, self.l1.bias)
        return self.l2(STE.apply(h * 4) / 4)


def _copy(src, dst):
    with tp.no_grad():
        for p, q in zip(dst.parameters(), src.parameters()):
            p.copy_(q)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_in_a_compiled_module_with_parameters_inside(backend):
    tp.manual_seed(11)
    model, ref = Net(), Net()
    _copy(model, ref)
    x = tp.randn(5, 6)
    cm = tp.compile(model, backend=backend)
    cm(x).pow(2).sum().backward()
    ref(x).pow(2).sum().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_a_straight_through_quantizer_trains_as_in_eager():
    tp.manual_seed(12)
    model, ref = Net(), Net()
    _copy(model, ref)
    cm = tp.compile(model)
    opt = tp.optim.SGD(model.parameters(), lr=0.05)
    ropt = tp.optim.SGD(ref.parameters(), lr=0.05)
    x, y = tp.randn(16, 6), tp.randn(16, 3)
    losses, rlosses = [], []
    for _ in range(4):
        opt.zero_grad()
        ropt.zero_grad()
        loss = tp.nn.functional.mse_loss(cm(x), y)
        rloss = tp.nn.functional.mse_loss(ref(x), y)
        loss.backward()
        rloss.backward()
        opt.step()
        ropt.step()
        losses.append(loss.item())
        rlosses.append(rloss.item())
    np.testing.assert_allclose(losses, rlosses, rtol=1e-5)
    assert losses[-1] < losses[0]
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_gradients_match_pytorch():
    import torch

    class TSq(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.round() * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x

    class PSq(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.round() * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x

    rng = np.random.default_rng(0)
    xv, wv = rng.standard_normal((3, 4)), rng.standard_normal((4, 4))
    w = tp.tensor(wv, requires_grad=True)
    tp.compile(lambda x: PSq.apply(x @ w).sum())(tp.tensor(xv)).backward()
    tw = torch.tensor(wv, requires_grad=True)
    TSq.apply(torch.tensor(xv) @ tw).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-12)
    # torch.compile runs the custom backward in training too (its aot_eager
    # backend: no C++ build needed here)
    cw = torch.tensor(wv, requires_grad=True)
    torch.compile(lambda x: TSq.apply(x @ cw).sum(), backend="aot_eager")(torch.tensor(xv)).backward()
    np.testing.assert_allclose(w.grad.numpy(), cw.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("dynamic", [None, True])
def test_dynamic_batch_sizes(dynamic):
    tp.manual_seed(13)
    w = tp.randn(4, 3, requires_grad=True)

    class RowScale(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            n = x.shape[0]
            ctx.save_for_backward(x)
            return x * n  # a size read in forward: its value at each call

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.shape[0]

    f = lambda x: (RowScale.apply(x @ w).tanh() + Sq.apply(x @ w)).sum()
    cf = tp.compile(f, dynamic=dynamic)
    for n in (3, 5, 8, 5, 3):
        x = tp.randn(n, 4)
        w.grad = None
        got = cf(x)
        got.backward()
        g = w.grad.clone()
        w.grad = None
        want = f(x)
        want.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        np.testing.assert_allclose(g.numpy(), w.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_dynamic_shapes_keep_one_version_for_a_size_free_function():
    tp.manual_seed(14)
    w = tp.randn(4, 3, requires_grad=True)
    cf = tp.compile(lambda x: Sq.apply(x @ w).sum(), dynamic=True, backend="aot_eager")
    for n in (3, 5, 8):
        w.grad = None
        x = tp.randn(n, 4)
        cf(x).backward()
        np.testing.assert_allclose(w.grad.numpy(), (x.t() @ (2 * (x @ w))).detach().numpy(), rtol=1e-5)
    assert cf.num_specializations == 1


def test_dynamic_shapes_with_materialized_zero_gradients_keep_one_version():
    # The zeros backward gets for outputs without a gradient (an argmax marked
    # non-differentiable) are made from the outputs' symbolic sizes: zeros_like
    # fixed them, and every batch size compiled its own training version.
    tp.manual_seed(18)
    w = tp.randn(4, 5, requires_grad=True)

    def f(x):
        v, i, m = ArgmaxAndValue.apply(x @ w)
        return v.sum() * 2 + (m * (x @ w)).sum()

    cf = tp.compile(f, dynamic=True, backend="aot_eager")
    for n in (3, 6, 9):
        x = tp.randn(n, 4)
        (gw,) = _grads(cf, (x,), (w,))[1]
        (want,) = _grads(f, (x,), (w,))[1]
        np.testing.assert_allclose(gw.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    assert cf.num_specializations == 1


def test_strict_native_generates_forward_and_backward_code():
    tp.manual_seed(15)
    w = tp.randn(8, 8, requires_grad=True)
    x = tp.randn(4, 8)
    tp.compiler.reset()
    before = tp.compiler.metrics.fallback_count
    _check(lambda x: (SoftplusFn.apply(x @ w) * STE.apply(x @ w)).sum(), (x,), (w,), backend="stax",
           strict_native=True, rtol=1e-5, atol=1e-6)  # gradients up to ~10: sums reassociate
    assert tp.compiler.metrics.fallback_count == before
    assert tp.compiler.metrics.aot_regions >= 1


def _other_region_double_backward_error():
    w = tp.randn(3, requires_grad=True)
    loss = tp.compile(lambda x: (x * w).sin().sum())(tp.randn(3))
    (g,) = tp.autograd.grad(loss, w, create_graph=True)
    return g


def test_double_backward_raises_as_other_compiled_regions():
    w = tp.randn(3, requires_grad=True)
    loss = tp.compile(lambda x: Sq.apply(x * w).sum())(tp.randn(3))
    with pytest.raises(RuntimeError, match=r"double backward \(create_graph=True\) through the compiled region"):
        tp.autograd.grad(loss, w, create_graph=True)
    with pytest.raises(RuntimeError, match=r"double backward \(create_graph=True\) through the compiled region"):
        _other_region_double_backward_error()


def test_under_no_grad_inside_the_function_no_gradient_goes_through():
    tp.manual_seed(16)
    w = tp.randn(3, requires_grad=True)

    def f(x):
        with tp.no_grad():
            c = Sq.apply(x * w)  # a constant for autograd, as in eager
        return (c * w).sum() + Sq.apply(w).sum()

    (gw,) = _check(f, (tp.randn(3),), (w,))


def test_inputs_without_grad_record_nothing():
    tp.manual_seed(17)
    w = tp.randn(3, requires_grad=True)
    calls = []

    class Spy(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            calls.append(1)
            return g * 2

    cf = tp.compile(lambda x: (Spy.apply(x) * w).sum())
    cf(tp.randn(3)).backward()
    assert calls == []  # eager records no node either
    assert "custom_function" not in cf.last_graph.code


# ------------------------------------------------ what a backward trace cannot hold

def _fallback(f, args, params, match, rounds=2):
    """f compiled falls back to eager autograd (warning, fallback_count) with eager's gradients."""
    tp.compiler.reset()
    cf = tp.compile(f)
    for r in range(rounds):
        before = tp.compiler.metrics.fallback_count
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            want_out, want = _grads(f, [a(r) if callable(a) else a for a in args], params)
            got_out, got = _grads(cf, [a(r) if callable(a) else a for a in args], params)
        if r == 0:
            assert tp.compiler.metrics.fallback_count == before + 1
            msgs = [str(w.message) for w in ws]
            assert any("running eagerly" in m and match in m for m in msgs), msgs
            assert not any("Traceback" in m for m in msgs), msgs  # the reason, not a Python traceback
        np.testing.assert_allclose(got_out.numpy(), want_out.numpy(), rtol=1e-6)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)


class BranchOnValue(tp.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if x.sum() > 0:  # data-dependent Python branch
            return g * 10
        return -g


def test_a_backward_branching_on_values_falls_back_with_eagers_gradients():
    w = tp.tensor([1.0, 2.0], requires_grad=True)
    # round 0: x.sum() > 0, round 1: < 0 (the traced branch would be wrong there)
    xs = lambda r: tp.tensor([1.0, 1.0]) * (1 if r == 0 else -1)
    _fallback(lambda x: BranchOnValue.apply(x * w).sum(), [xs], [w], "BranchOnValue.backward reads a tensor's value")


class ItemAndNumpy(tp.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        k = int(x.abs().argmax().item())  # an integer item(): a value the trace cannot follow
        s = float(np.abs(g.numpy()).sum())
        return g * k + s


def test_a_backward_calling_item_and_numpy_falls_back():
    w = tp.tensor([1.0, 2.0, 3.0], requires_grad=True)
    xs = lambda r: tp.tensor([1.0, 5.0, 2.0]) if r == 0 else tp.tensor([1.0, 1.0, 9.0])
    _fallback(lambda x: ItemAndNumpy.apply(x * w).sum(), [xs], [w], "ItemAndNumpy.backward")


class Recompute(tp.autograd.Function):
    """Saves the input only and recomputes in backward with autograd (the reentrant-checkpoint idiom)."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return tp.tanh(x) * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with tp.enable_grad():
            xx = x.detach().requires_grad_()
            (gx,) = tp.autograd.grad(tp.tanh(xx) * xx, xx, g)
        return gx


def test_a_backward_running_autograd_falls_back_naming_the_exception():
    w = tp.tensor([0.5, -1.0, 2.0], requires_grad=True)
    _fallback(lambda x: Recompute.apply(x * w).sum(), [tp.tensor([1.0, 2.0, 3.0])], [w],
              "Recompute.backward cannot be traced into the compiled backward: CaptureError: making a tensor require grad")


class CountsOnCtx(tp.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.calls = 0
        return x * 2

    @staticmethod
    def backward(ctx, g):
        ctx.calls += 1
        return g * ctx.calls


def test_a_backward_changing_ctx_falls_back():
    w = tp.tensor([1.0, 2.0], requires_grad=True)
    _fallback(lambda x: CountsOnCtx.apply(x * w).sum(), [tp.tensor([3.0, 4.0])], [w], "changes ctx (calls)")


SCALE = tp.tensor([1.0, 2.0, 3.0], requires_grad=True)


class ReadsAGlobal(tp.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * SCALE.detach()  # a tensor that is none of its values


def test_a_backward_reading_a_free_tensor_falls_back():
    w = tp.tensor([1.0, 2.0, 3.0], requires_grad=True)

    def f(x):
        return ReadsAGlobal.apply(x * w).sum()

    tp.compiler.reset()
    cf = tp.compile(f)
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        cf(tp.ones(3)).backward()
    assert any("ReadsAGlobal.backward reads a float32[3] tensor" in str(m.message) for m in ws)
    np.testing.assert_allclose(w.grad.numpy(), [1.0, 2.0, 3.0])
    with tp.no_grad():
        SCALE.mul_(10)  # eager reads the global's current value: so does the fallback
    w.grad = None
    cf(tp.ones(3)).backward()
    np.testing.assert_allclose(w.grad.numpy(), [10.0, 20.0, 30.0])


def test_strict_native_raises_naming_the_function():
    w = tp.tensor([1.0, 2.0], requires_grad=True)
    cf = tp.compile(lambda x: BranchOnValue.apply(x * w).sum(), strict_native=True)
    with pytest.raises(tp.compiler.BackendError, match=r"BranchOnValue\.backward reads a tensor's value"):
        cf(tp.ones(2))


class Dirty(tp.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_mark_dirty_is_refused_naming_the_function():
    w = tp.tensor([1.0, 2.0], requires_grad=True)
    # (the forward's write into x * w, an intermediate with a history, is refused
    # first: test_user_adversarial6.py)
    with pytest.raises(tp.compiler.CaptureError,
                       match=r"Function Dirty\.apply .*marks an input dirty|mul_ under no_grad .*intermediate"):
        tp.compile(lambda x: Dirty.apply(x * w).sum(), fullgraph=True)(tp.ones(2))


def test_a_wrong_number_of_gradients_raises_as_in_eager():
    class TooFew(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return (g,)

    w = tp.tensor([1.0, 2.0], requires_grad=True)
    f = lambda x: TooFew.apply(x * w, x).sum()
    with pytest.raises(RuntimeError, match="returned an incorrect number of gradients"):
        f(tp.ones(2)).backward()
    with pytest.raises(RuntimeError, match="returned an incorrect number of gradients"):
        tp.compile(f, strict_native=True)(tp.ones(2)).backward()


def test_the_eager_backend_refuses_a_saved_value_written_in_place_as_eager_does():
    # (the interpreter's autograd Function: ctx.saved_tensors' version check)
    def f(x):
        h = x * 2
        return Sq.apply(h), h

    for fn in (f, tp.compile(f, backend="eager")):
        x = tp.randn(3, requires_grad=True)
        y, h = fn(x)
        with tp.no_grad():
            h.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


class NoisyGrad(tp.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g + tp.rand_like(g)  # a stochastic gradient


def test_a_backward_drawing_random_numbers_falls_back_with_eagers_draws():
    # Before, the joint graph got the draw's generator state as an extra input
    # and the call failed ("graph expects input #2"); the draw the failed trace
    # made is undone, so even the first call's gradient is eager's.
    w = tp.ones(3, requires_grad=True)
    f = lambda x: NoisyGrad.apply(x * w).sum()
    tp.compiler.reset()
    cf = tp.compile(f)
    for _ in range(2):
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            tp.manual_seed(3)
            w.grad = None
            cf(tp.ones(3)).backward()
        got = w.grad.clone()
        tp.manual_seed(3)
        w.grad = None
        f(tp.ones(3)).backward()
        np.testing.assert_array_equal(got.numpy(), w.grad.numpy())
    assert tp.compiler.metrics.fallback_count == 1


@pytest.mark.skipif(not tp.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("backend", ["eager"] + BACKENDS)
def test_on_cuda(backend):
    # The node's results are aliases made outside the kernels (no CUDA kernel
    # exists for it): capture, joint graph and interpreter never dispatch it.
    tp.manual_seed(20)
    w = tp.randn(8, 8, device="cuda", requires_grad=True)
    x = tp.randn(4, 8, device="cuda")
    f = lambda x: (STE.apply(x @ w) + Sq.apply(x @ w)).sum()
    want_out, (want,) = _grads(f, (x,), (w,))
    got_out, (got,) = _grads(tp.compile(f, backend=backend), (x,), (w,))
    np.testing.assert_allclose(got.cpu().numpy(), want.cpu().numpy(), rtol=1e-5, atol=1e-5)
