"""Autograd beyond single derivative formulas: backward/grad options,
accumulation, retain_graph, create_graph, grad modes, inference mode, hooks,
retain_grad, custom Functions, in-place rules and saved-tensor versions,
gradcheck/gradgradcheck themselves."""
import numpy as np
import pytest

import tensorplay as tp


def f64(*shape, seed=0):
    rng = np.random.default_rng(seed)
    return tp.tensor(rng.standard_normal(shape), dtype=tp.float64, requires_grad=True)


# ---- backward ----
def test_backward_non_scalar_needs_gradient():
    x = f64(2, 3)
    y = x * 2
    with pytest.raises(RuntimeError, match=r"scalar outputs.*\[2, 3\]"):
        y.backward()
    y.backward(tp.ones(2, 3, dtype=tp.float64))
    np.testing.assert_allclose(x.grad.numpy(), np.full((2, 3), 2.0))


def test_backward_gradient_shape_checked():
    x = f64(2, 3)
    with pytest.raises(ValueError, match=r"\[3\].*\[2, 3\]"):
        (x * 2).backward(tp.ones(3, dtype=tp.float64))


def test_grad_accumulates_across_calls():
    x = f64(3)
    (x * 3).sum().backward()
    (x * 4).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 7.0))
    x.grad = None
    (x * 1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.ones(3))


def test_retain_graph():
    x = f64(3)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    g1 = x.grad.numpy().copy()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * g1)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()


def test_create_graph_second_derivative():
    x = f64(4)
    y = (x * x * x).sum()
    (g,) = tp.autograd.grad(y, x, create_graph=True)
    assert g.requires_grad
    np.testing.assert_allclose(g.detach().numpy(), 3 * x.detach().numpy() ** 2)
    (g2,) = tp.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(g2.numpy(), 6 * x.detach().numpy())


def test_backward_create_graph_grad_has_history():
    x = f64(3)
    (x.tanh().sum()).backward(create_graph=True)
    assert x.grad.requires_grad
    g = x.grad
    x.grad = None
    g.sum().backward()
    t = np.tanh(x.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), -2 * t * (1 - t * t))


def test_third_derivative():
    x = f64(3)
    (g1,) = tp.autograd.grad((x.exp() * x).sum(), x, create_graph=True)
    (g2,) = tp.autograd.grad(g1.sum(), x, create_graph=True)
    (g3,) = tp.autograd.grad(g2.sum(), x)
    xv = x.detach().numpy()
    np.testing.assert_allclose(g3.numpy(), np.exp(xv) * (xv + 3))


def test_autograd_grad_options():
    x, z = f64(3), f64(3, seed=1)
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="input 1 was not used"):
        tp.autograd.grad(y, [x, z], retain_graph=True)
    gx, gz = tp.autograd.grad(y, [x, z], allow_unused=True, retain_graph=True)
    assert gz is None
    np.testing.assert_allclose(gx.numpy(), np.full(3, 2.0))
    assert x.grad is None  # grad() never writes .grad
    gx, gz = tp.autograd.grad(y, [x, z], materialize_grads=True)
    np.testing.assert_allclose(gz.numpy(), np.zeros(3))


def test_autograd_grad_wrt_non_leaf():
    x = f64(3)
    h = x * 3
    y = (h * h).sum()
    gh, gx = tp.autograd.grad(y, [h, x])
    np.testing.assert_allclose(gh.numpy(), 2 * h.detach().numpy())
    np.testing.assert_allclose(gx.numpy(), 18 * x.detach().numpy())


def test_autograd_backward_function_and_inputs():
    x, z = f64(2), f64(2, seed=1)
    a, b = x * 2, z * 3
    tp.autograd.backward([a.sum(), b.sum()])
    np.testing.assert_allclose(x.grad.numpy(), [2, 2])
    np.testing.assert_allclose(z.grad.numpy(), [3, 3])
    x.grad = None
    z.grad = None
    tp.autograd.backward((x * z).sum(), inputs=[x])
    assert z.grad is None
    np.testing.assert_allclose(x.grad.numpy(), z.detach().numpy())
    h = x * 1
    (h * z).sum().backward(inputs=[z, h])
    np.testing.assert_allclose(z.grad.numpy(), x.detach().numpy())
    np.testing.assert_allclose(h.grad.numpy(), z.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), z.detach().numpy())  # unchanged


def test_requires_grad_errors():
    with pytest.raises(TypeError, match="floating point"):
        tp.tensor([1, 2]).requires_grad_()
    x = f64(2)
    y = x * 2
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad = False
    with pytest.raises(RuntimeError, match="does not require grad"):
        tp.ones(2).sum().backward()


# ---- grad modes ----
def test_no_grad_context_and_decorator():
    x = f64(2)
    with tp.no_grad():
        assert not tp.is_grad_enabled()
        assert not (x * 2).requires_grad
        with tp.enable_grad():
            assert (x * 2).requires_grad
    assert tp.is_grad_enabled()

    @tp.no_grad()
    def f(t):
        return t * 2

    assert not f(x).requires_grad

    @tp.no_grad
    def g(t):
        return t * 2

    assert not g(x).requires_grad
    assert tp.is_grad_enabled()


def test_set_grad_enabled_forms():
    x = f64(2)
    tp.set_grad_enabled(False)
    assert not tp.is_grad_enabled()
    tp.set_grad_enabled(True)
    with tp.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert tp.is_grad_enabled()

    @tp.set_grad_enabled(False)
    def f(t):
        return t * 2

    assert tp.is_grad_enabled()
    assert not f(x).requires_grad
    assert tp.is_grad_enabled()


def test_grad_mode_restored_after_exception():
    with pytest.raises(ValueError):
        with tp.no_grad():
            raise ValueError("x")
    assert tp.is_grad_enabled()


def test_no_grad_generator_decorator():
    x = f64(2)

    @tp.no_grad()
    def gen():
        yield (x * 2).requires_grad
        yield (x * 3).requires_grad

    assert list(gen()) == [False, False]


# ---- inference mode ----
def test_inference_mode():
    x = f64(2)
    with tp.inference_mode():
        assert tp.is_inference_mode_enabled()
        assert not tp.is_grad_enabled()
        y = x * 2
        assert y.is_inference() and not y.requires_grad
    assert not tp.is_inference_mode_enabled()
    assert not x.is_inference()
    w = f64(2, seed=3)
    with pytest.raises(RuntimeError, match="inference tensor"):
        y * w
    with pytest.raises(RuntimeError, match="inference tensor"):
        y.requires_grad_()
    with pytest.raises(RuntimeError, match="inference tensor"):
        y.add_(1)
    z = y.clone()  # outside inference mode: a normal tensor
    assert not z.is_inference()
    (z * w).sum().backward()


def test_inference_mode_decorator():
    @tp.inference_mode()
    def f(t):
        return t * 2

    out = f(f64(2))
    assert out.is_inference()

    @tp.inference_mode
    def g(t):
        return t * 2

    assert g(f64(2)).is_inference()


# ---- detach / leaves / grad_fn ----
def test_detach_and_leaf():
    x = f64(3)
    y = x * 2
    assert x.is_leaf and not y.is_leaf
    d = y.detach()
    assert d.is_leaf and not d.requires_grad
    d.add_(1)  # shares memory with y
    np.testing.assert_allclose(y.detach().numpy(), 2 * x.detach().numpy() + 1)
    y2 = x * 3
    y2.detach_()
    assert y2.is_leaf and y2.grad_fn is None and not y2.requires_grad


def test_grad_fn_inspection():
    x = f64(2)
    y = (x * 2).exp()
    assert y.grad_fn.name() == "ExpBackward0"
    (mul, nr), = y.grad_fn.next_functions
    assert mul.name() == "MulBackward0" and nr == 0
    acc = mul.next_functions[0][0]
    assert acc.name() == "AccumulateGrad"
    assert mul.next_functions[1][0] is None  # the number 2 needs no grad
    assert "ExpBackward0" in repr(y.grad_fn)
    assert x.grad_fn is None


def test_retain_grad_non_leaf():
    x = f64(3)
    h = x * 2
    h.retain_grad()
    assert h.retains_grad
    (h * h).sum().backward()
    np.testing.assert_allclose(h.grad.numpy(), 2 * h.detach().numpy())
    y = x * 5
    (y * 1).sum().backward()
    with pytest.warns(UserWarning, match="non-leaf"):
        assert y.grad is None


def test_grad_assignment_checked():
    x = f64(3)
    with pytest.raises(ValueError, match="shape"):
        x.grad = tp.zeros(2, dtype=tp.float64)
    x.grad = tp.ones(3, dtype=tp.float64)
    (x * 1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 2.0))


# ---- hooks ----
def test_register_hook_replaces_gradient():
    x = f64(3)
    seen = []
    h = x.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 10)
    (x * 2).sum().backward()
    np.testing.assert_allclose(seen[0], np.full(3, 2.0))
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 20.0))
    h.remove()
    x.grad = None
    (x * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 2.0))


def test_hook_on_non_leaf():
    x = f64(3)
    y = x * 2
    y.register_hook(lambda g: g * 0)
    (y * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.zeros(3))
    with pytest.raises(RuntimeError, match="doesn't require"):
        tp.ones(2).register_hook(lambda g: g)


def test_post_accumulate_grad_hook():
    x = f64(2)
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.numpy().copy()))
    (x * 3).sum().backward()
    np.testing.assert_allclose(seen[0], [3.0, 3.0])


# ---- in-place ----
def test_inplace_on_leaf_requiring_grad_is_an_error():
    x = f64(3)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.add_(1)
    with tp.no_grad():
        x.add_(1)  # allowed: an optimizer step
    with pytest.raises(RuntimeError, match="view of a leaf"):
        x[0:2].mul_(2)


def test_inplace_on_non_leaf_records():
    x = f64(3)
    w = f64(3, seed=1)
    y = x * 2
    y.mul_(w)
    assert y.grad_fn.name() == "MulBackward0"
    y.add_(x)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * w.detach().numpy() + 1)
    np.testing.assert_allclose(w.grad.numpy(), 2 * x.detach().numpy())


def test_inplace_into_tensor_without_grad():
    x = f64(3)
    buf = tp.zeros(3, dtype=tp.float64)
    buf.copy_(x * 3)
    assert buf.requires_grad and not buf.is_leaf
    buf.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 3.0))


def test_inplace_through_view_of_non_leaf():
    x = f64(2, 3)
    y = x * 1
    y[0].mul_(5)
    y[:, 1].fill_(0)
    y.sum().backward()
    expect = np.ones((2, 3))
    expect[0] = 5
    expect[:, 1] = 0
    np.testing.assert_allclose(x.grad.numpy(), expect)


def _both(fn, shape=(3, 4), seed=0):
    """Runs fn(x, lib) with tensorplay and with torch on the same float64 leaf; returns both grads."""
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(seed).standard_normal(shape)
    x, tx = tp.tensor(a, dtype=tp.float64, requires_grad=True), torch.tensor(a, requires_grad=True)
    fn(x, tp)
    fn(tx, torch)
    return x.grad.numpy(), tx.grad.numpy()


def test_inplace_through_nested_views_matches_torch():
    def f(x, lib):
        y = x * 1
        v = y[1]
        v.mul_(3)
        w = v[1:3]
        w.add_(w * 2)
        ((y * y).sum() + (v * 5).sum() + w.sum()).backward()

    ours, theirs = _both(f)
    np.testing.assert_allclose(ours, theirs)


def test_view_taken_before_base_write_is_regenerated():
    def f(x, lib):
        y = x * 2
        col = y[:, 0]      # a view made before the write below
        y[1].mul_(5)       # writes through another view, changing col[1]
        (col * col).sum().backward()

    ours, theirs = _both(f)
    np.testing.assert_allclose(ours, theirs)
    y = f64(2, 3) * 1
    col = y[:, 0]
    assert col.grad_fn.name() == "SelectBackward0"
    y[1].mul_(2)
    assert y.grad_fn.name() == "CopySlices"
    assert col.grad_fn.name() == "AsStridedBackward0"


def test_create_graph_through_inplace():
    x = f64(3)
    y = x * x
    y.mul_(x)
    (g,) = tp.autograd.grad(y.sum(), x, create_graph=True)
    (g2,) = tp.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(g2.numpy(), 6 * x.detach().numpy())


def test_saved_tensor_modified_inplace():
    x = f64(3)
    y = x * 1
    z = y.exp()  # exp saves its output...
    w = y * y    # ...and mul its inputs
    y.add_(1)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation: \[float64 \[3\]\] is at version 1; "
                                           r"expected version 0"):
        w.sum().backward()
    z.exp_() if hasattr(z, "exp_") else z.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        (z * 1).sum().backward()


def test_inplace_after_save_not_needed_is_fine():
    x = f64(3)
    y = x * 2
    s = y + 1  # add's derivative reads no saved value
    y.mul_(3)
    s.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 2.0))


# ---- custom Function ----
class Cube(tp.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x * x * x * scale

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x * ctx.scale, None


def test_custom_function():
    x = f64(4)
    y = Cube.apply(x, 2.0)
    assert y.grad_fn.name() == "CubeBackward"
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 6 * x.detach().numpy() ** 2)
    assert tp.autograd.gradcheck(lambda t: Cube.apply(t, 1.5), (f64(3),))


def test_custom_function_double_backward():
    assert tp.autograd.gradgradcheck(lambda t: Cube.apply(t, 0.5), (f64(3),))


class SplitTwo(tp.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        idx = tp.arange(x.shape[0])
        ctx.mark_non_differentiable(idx)
        return x * 2, x * 3, idx

    @staticmethod
    def backward(ctx, ga, gb, gidx):
        assert gidx is None or not gidx.requires_grad
        return ga * 2 + gb * 3


def test_custom_function_multiple_outputs_and_materialize():
    x = f64(3)
    a, b, idx = SplitTwo.apply(x)
    assert not idx.requires_grad
    a.sum().backward()  # b gets no gradient: materialized as zeros
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 2.0))


class NoMaterialize(tp.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 1, x * 1

    @staticmethod
    def backward(ctx, ga, gb):
        assert gb is None
        return ga


def test_custom_function_set_materialize_grads():
    x = f64(2)
    a, _ = NoMaterialize.apply(x)
    a.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.ones(2))


class NeedsGrad(tp.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.flags = ctx.needs_input_grad
        return x * y

    @staticmethod
    def backward(ctx, g):
        return g, None


def test_custom_function_needs_input_grad_and_checks():
    x = f64(2)
    y = tp.ones(2, dtype=tp.float64)
    NeedsGrad.apply(x, y).sum().backward()
    with tp.no_grad():
        assert not NeedsGrad.apply(x, y).requires_grad

    class Bad(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g, g

    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        Bad.apply(x).sum().backward()

    class WrongShape(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.sum()

        @staticmethod
        def backward(ctx, g):
            return tp.ones(5, dtype=tp.float64)

    with pytest.raises(ValueError, match=r"WrongShapeBackward.*\[5\].*\[2\]"):
        WrongShape.apply(x).backward()


def test_custom_function_saved_tensor_version_check():
    x = f64(3)
    h = x * 1
    y = Cube.apply(h, 1.0)
    h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


# ---- gradcheck itself ----
def test_gradcheck_passes_on_correct_formulas():
    a, b = f64(3, 4), f64(4, 2, seed=1)
    assert tp.autograd.gradcheck(lambda x, y: (x @ y).tanh(), (a, b))
    assert tp.autograd.gradcheck(lambda x: (x.exp(), x.sum()), (f64(2, 2),))


def test_gradcheck_catches_a_wrong_formula():
    class WrongSquare(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x  # should be 2 * x

    with pytest.raises(RuntimeError, match=r"output 0 with respect to input 0: max difference"):
        tp.autograd.gradcheck(WrongSquare.apply, (f64(3),))
    assert tp.autograd.gradcheck(WrongSquare.apply, (f64(3),), raise_exception=False) is False


def test_gradcheck_catches_a_missing_derivative():
    class Detached(tp.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_non_differentiable(out := x * 2)
            return out

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="does not require grad"):
        tp.autograd.gradcheck(Detached.apply, (f64(3),))


def test_gradcheck_non_contiguous_and_extra_args():
    a = f64(4, 3).transpose(0, 1)
    a = a.detach().requires_grad_()
    assert not a.is_contiguous()
    assert tp.autograd.gradcheck(lambda x, k: (x * k).sigmoid(), (a, 3.0))


def test_gradgradcheck():
    assert tp.autograd.gradgradcheck(lambda x: (x * x).tanh(), (f64(3),))
    assert tp.autograd.gradgradcheck(lambda x, y: x @ y, (f64(2, 3), f64(3, 2, seed=1)))


def test_deep_graphs_free_and_run_without_recursion():
    # A chain of 2e5 nodes: nested destructors would overflow the C stack.
    x = tp.ones(1, requires_grad=True)
    y = x
    for _ in range(200000):
        y = y * 1.0
    del y
    y = x * 1
    for _ in range(100000):
        y.mul_(1.0)
    y.sum().backward()
    assert x.grad.item() == 1.0


def test_gradcheck_rejects_overlapping_inputs():
    x = f64(3, 1).expand(3, 4)
    with pytest.raises(ValueError, match="input 0 has overlapping memory"):
        tp.autograd.gradcheck(lambda t: t * 2, (x,))


def test_write_into_view_of_plain_tensor_gives_base_history():
    def f(x, lib):
        buf = lib.zeros(3, 4, dtype=lib.float64)
        row = buf[2]          # made before buf has any history
        buf[0].copy_(x[0] * 2)
        buf[1, 1:3].mul_(0.5)
        buf[1].add_(x[1])
        assert buf.requires_grad and not buf.is_leaf
        ((buf * buf).sum() + (row * x[2]).sum()).backward()

    ours, theirs = _both(f)
    np.testing.assert_allclose(ours, theirs)


def test_view_made_before_base_gained_history():
    x = f64(3)
    buf = tp.zeros(2, 3, dtype=tp.float64)
    first = buf[0]
    buf[0].copy_(x)
    (first * 3).sum().backward()  # first reads memory that now depends on x
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 3.0))


def test_data_property_reads_without_history_and_assignment_keeps_the_object():
    x = tp.ones(3, requires_grad=True)
    d = x.data
    assert not d.requires_grad and d.data_ptr() == x.data_ptr()
    d.mul_(2)  # writes through, no autograd error: .data is outside the graph
    assert x.detach().numpy().tolist() == [2.0, 2.0, 2.0]
    before = id(x)
    x.data = tp.zeros(2, dtype=tp.float64)
    assert id(x) == before and x.requires_grad and x.is_leaf
    assert x.shape == (2,) and x.dtype == tp.float64
    (x * 3).sum().backward()
    assert x.grad.numpy().tolist() == [3.0, 3.0]
    p = tp.nn.Parameter(tp.ones(2))
    p.data = tp.full((2,), 5.0)
    assert isinstance(p, tp.nn.Parameter) and p.detach().numpy().tolist() == [5.0, 5.0]


def test_as_strided_scatter_gradient_matches_finite_differences():
    # The OpInfo oracle cannot check this one: PyTorch's derivative of
    # as_strided_scatter passes the gradient through the overwritten positions.
    x = tp.randn(3, 3, dtype=tp.float64, requires_grad=True)
    s = tp.randn(2, 2, dtype=tp.float64, requires_grad=True)
    f = lambda x, s: tp.as_strided_scatter(x, s, (2, 2), (1, 2), 1)  # noqa: E731
    assert tp.autograd.gradcheck(f, (x, s))
    (gx,) = tp.autograd.grad(f(x, s).sum(), (x,))
    assert gx.flatten()[1:5].abs().sum().item() == 0  # the overwritten positions get no gradient
