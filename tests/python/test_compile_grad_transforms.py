"""tp.compile of a reverse-mode transform (tp.func.grad / grad_and_value /
jacrev): the transform runs over tp.compile(f), so the forward and the backward
are generated code (strict_native), the results equal the eager transform's,
and a gradient that would need a double backward through the region raises."""
import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.utils._pytree import tree_leaves


def _gen(seed):
    return tp.Generator().manual_seed(seed)


def _f(x):
    return (x.sin() * x).sum()


def _np(t):
    return t.detach().numpy()


def test_grad_of_a_function_is_native_and_equals_eager():
    x = tp.randn(4, 7, generator=_gen(0))
    tp.compiler.reset()
    cg = tp.compile(tp.func.grad(_f), strict_native=True)
    np.testing.assert_allclose(_np(cg(x)), _np(tp.func.grad(_f)(x)), rtol=1e-6, atol=1e-7)
    m = tp.compiler.metrics
    assert m.aot_regions == 1 and m.fallback_count == 0 and m.generated_kernel_count >= 2
    # a second call at other values reuses the version and is still right
    y = tp.randn(4, 7, generator=_gen(1))
    np.testing.assert_allclose(_np(cg(y)), _np(tp.func.grad(_f)(y)), rtol=1e-6, atol=1e-7)
    assert tp.compiler.metrics.captures == 1
    assert not x.requires_grad and not y.requires_grad  # the caller's tensors are left alone


def test_grad_and_value_argnums_and_aux():
    def f(a, b, scale):
        y = (a @ b).tanh()
        return (y * scale).sum(), {"mean": y.mean()}

    a, b = tp.randn(3, 4, generator=_gen(2)), tp.randn(4, 5, generator=_gen(3))
    for transform in (tp.func.grad, tp.func.grad_and_value):
        eager = transform(f, argnums=(0, 1), has_aux=True)(a, b, 0.5)
        comp = tp.compile(transform(f, argnums=(0, 1), has_aux=True))(a, b, 0.5)
        flat_e, flat_c = tree_leaves(eager), tree_leaves(comp)
        assert len(flat_e) == len(flat_c)
        for e, c in zip(flat_e, flat_c):
            np.testing.assert_allclose(_np(c), _np(e), rtol=1e-5, atol=1e-6)
            assert not c.requires_grad  # aux and values come back detached, as eager's


def test_functional_training_loop_equals_eager_step_by_step():
    # JAX-style: parameters as a dict of detached tensors, updated functionally.
    model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 3))
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    x, y = tp.randn(8, 6, generator=_gen(4)), tp.randn(8, 3, generator=_gen(5))

    def loss(p, x, y):
        return ((tp.func.functional_call(model, p, (x,)) - y) ** 2).mean()

    step = tp.compile(tp.func.grad_and_value(loss), strict_native=True)
    pe, pc = dict(params), dict(params)
    for _ in range(4):
        gc, lc = step(pc, x, y)
        ge, le = tp.func.grad_and_value(loss)(pe, x, y)
        np.testing.assert_allclose(float(lc), float(le), rtol=1e-6)
        assert gc.keys() == ge.keys()
        for k in gc:
            np.testing.assert_allclose(_np(gc[k]), _np(ge[k]), rtol=1e-5, atol=1e-7)
        pc = {k: pc[k] - 0.1 * gc[k] for k in pc}
        pe = {k: pe[k] - 0.1 * ge[k] for k in pe}
    assert float(lc) < float(loss(params, x, y))  # it trained
    for k, v in model.named_parameters():  # the module's own parameters are untouched
        np.testing.assert_array_equal(_np(v), _np(params[k]))


def test_grad_against_finite_differences():
    def f(x):
        return (tp.nn.functional.softmax(x * 3.0, dim=-1) * x.cos()).sum()

    x = tp.randn(2, 5, dtype=tp.float64, generator=_gen(6))
    g = _np(tp.compile(tp.func.grad(f))(x))
    xn, eps = x.numpy(), 1e-6
    num = np.zeros_like(xn)
    for i in np.ndindex(xn.shape):
        d = np.zeros_like(xn)
        d[i] = eps
        num[i] = (float(f(tp.tensor(xn + d))) - float(f(tp.tensor(xn - d)))) / (2 * eps)
    np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8)


def test_jacrev_and_vmap_of_a_compiled_grad():
    x = tp.randn(4, generator=_gen(7))

    def h(x):
        return x.sin() * x.exp()

    np.testing.assert_allclose(_np(tp.compile(tp.func.jacrev(h))(x)), _np(tp.func.jacrev(h)(x)), rtol=1e-6,
                               atol=1e-7)
    W = tp.randn(5, 4, generator=_gen(8))  # per-sample gradients
    np.testing.assert_allclose(_np(tp.func.vmap(tp.compile(tp.func.grad(_f)))(W)),
                               _np(tp.func.vmap(tp.func.grad(_f))(W)), rtol=1e-6, atol=1e-7)


def test_an_argument_that_requires_grad_is_used_as_is():
    x = tp.randn(6, generator=_gen(9)).requires_grad_()
    with tp.no_grad():
        g = tp.compile(tp.func.grad(_f))(x)
    np.testing.assert_allclose(_np(g), _np(tp.func.grad(_f)(x.detach())), rtol=1e-6, atol=1e-7)
    assert x.grad is None


def test_a_gradient_that_must_stay_differentiable_raises_and_names_the_way_out():
    model = nn.Linear(4, 1)  # its parameters require grad: eager keeps the graph to them
    x = tp.randn(3, 4, generator=_gen(10))

    def saliency(x):
        return model(x).sum()

    with pytest.raises(RuntimeError, match=r"tp.compile\(tp.func.grad\(f\)\).*tp.no_grad\(\)"):
        tp.compile(tp.func.grad(saliency))(x)
    with tp.no_grad():  # no outer derivative wanted: fine
        np.testing.assert_allclose(_np(tp.compile(tp.func.grad(saliency))(x)),
                                   _np(tp.func.grad(saliency)(x)), rtol=1e-6)
    with pytest.raises(RuntimeError, match="has to stay differentiable"):
        tp.compile(tp.func.grad(tp.func.grad(_f)))(tp.randn((), generator=_gen(11)))
