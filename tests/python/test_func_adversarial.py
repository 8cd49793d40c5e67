"""Regressions from an outside bug hunt on forward-mode AD and tp.func: each
test compares with torch.func (or an analytic value) on float64 inputs."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.autograd.forward_ad as fwAD

torch = pytest.importorskip("torch")
tfwAD = torch.autograd.forward_ad

X = [0.5, -1.2, 0.8]
Y = [1.5, 0.3, -2.0]
V = [0.3, -0.7, 1.1]


def _np(x):
    return np.asarray(x.detach().tolist() if hasattr(x, "detach") else x, dtype=float)


def _both(fn):
    """fn(L) for L = tensorplay and torch, as arrays."""
    return _np(fn(tp)), _np(fn(torch))


def _t(L, a):
    return L.tensor(a, dtype=L.float64)


# ---- double backward through a write into a view ----
def test_double_backward_through_a_write_into_a_view():
    # The gradient of z[1].copy_(a * a) reaches a through CopySlices; with
    # create_graph that step must be recorded (it was written through an
    # unrecorded region, so d/da of the gradient lost the a * a path).
    def run(L):
        a = _t(L, X).requires_grad_(True)
        z = L.zeros(2, 3, dtype=L.float64)
        z[1].copy_(a * a)
        w = z[1]  # a view whose history is regenerated from z's (ViewOfBase)
        out = ((z.sum(0) + w.sin()) * a.exp()).sum()
        (g,) = L.autograd.grad(out, [a], create_graph=True)
        return L.autograd.grad(g.sum(), [a])[0]
    ours, theirs = _both(run)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


# ---- nested reverse transforms closing over the outer variable (bug01) ----
def test_grad_of_grad_closing_over_the_outer_input():
    ours, theirs = _both(lambda L: L.func.grad(
        lambda x: L.func.grad(lambda y: (x * y ** 2).sum())(_t(L, Y)).sum())(_t(L, X)))
    np.testing.assert_allclose(ours, 2 * np.array(Y), rtol=1e-12)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_grad_of_vjp_closing_over_the_outer_input():
    ours, theirs = _both(lambda L: L.func.grad(
        lambda x: L.func.vjp(lambda y: x * y.sin(), _t(L, Y))[1](_t(L, V))[0].sum())(_t(L, X)))
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_jacrev_of_grad_closing_over_the_outer_input():
    # d/dx of grad_y sum(x_i * y_j^3 * x_j): a cross term the closure carries
    def f(L):
        return L.func.jacrev(lambda x: L.func.grad(lambda y: (x * y ** 3).sum() * x.sum())(_t(L, Y)))(_t(L, X))
    ours, theirs = _both(f)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_grad_result_keeps_graph_only_towards_outer_tensors():
    w = tp.tensor([1.0, 2.0], dtype=tp.float64, requires_grad=True)
    y = tp.tensor([3.0, 4.0], dtype=tp.float64)
    g = tp.func.grad(lambda a: (w * a ** 2).sum())(y)
    assert g.requires_grad  # torch.func: the gradient depends on w, which the caller's autograd tracks
    (gw,) = tp.autograd.grad(g.sum(), [w])
    np.testing.assert_allclose(_np(gw), 2 * _np(y))
    assert not tp.func.grad(lambda a: (a ** 2).sum())(y).requires_grad
    with tp.no_grad():
        assert not tp.func.grad(lambda a: (w * a ** 2).sum())(y).requires_grad


# ---- forward-over-reverse through indexing backward (bug02) ----
_INDEXING = {
    "select": lambda a: a[0] * a[0] + a[1] * a[2],
    "slice": lambda a: (a ** 3).sum() * a[1:].sum(),
    "narrow": lambda a: (a.narrow(0, 1, 2) ** 2).prod(),
    "split": lambda a: (a.split([1, 2])[1].exp() * a.split([1, 2])[0]).sum(),
    "chunk": lambda a: (a.reshape(3, 1).chunk(3)[2] ** 3).sum() * a[0],
    "unbind": lambda a: a.unbind(0)[0] * a.unbind(0)[2].sin(),
    "glu": lambda a: _glu(a),
    "cross": lambda a: _cross(a),
    "inplace_view": lambda a: _inplace_view(a),
}


def _glu(a):
    L = tp if isinstance(a, tp.Tensor) else torch
    return L.nn.functional.glu(L.cat([a, a.flip(0) * 2]), -1).pow(2).sum()


def _cross(a):
    L = tp if isinstance(a, tp.Tensor) else torch
    b = L.stack([a[1], a[2] * a[0], a[0] ** 2])
    return (L.linalg.cross(a, b) ** 2).sum()


def _inplace_view(a):
    L = tp if isinstance(a, tp.Tensor) else torch
    z = L.zeros(2, 3, dtype=a.dtype)
    z[1].copy_(a * a)
    z[0, 1:].mul_(a[:2])
    return (z.sum(0) * a.exp()).sum()


@pytest.mark.parametrize("name", sorted(_INDEXING))
@pytest.mark.parametrize("route", ["jvp", "jacfwd"])
def test_forward_over_reverse_through_indexing_backward(name, route):
    fn = _INDEXING[name]
    x = np.array(X)
    thess = torch.func.jacrev(torch.func.grad(fn))(torch.tensor(x)).numpy()
    if route == "jacfwd":
        got = _np(tp.func.jacfwd(tp.func.grad(fn))(tp.tensor(x)))
        np.testing.assert_allclose(got, thess, rtol=1e-10, atol=1e-12)
    else:
        for k in range(3):
            e = np.eye(3)[k]
            got = _np(tp.func.jvp(tp.func.grad(fn), (tp.tensor(x),), (tp.tensor(e),))[1])
            np.testing.assert_allclose(got, thess @ e, rtol=1e-10, atol=1e-12)


def test_write_of_a_dual_into_a_view_of_a_plain_tensor_under_no_grad():
    def run(L, A):
        with A.dual_level():
            d = A.make_dual(_t(L, [1.0, 2.0]), _t(L, [3.0, 4.0]))
            with L.no_grad():
                z = L.zeros(3, 2, dtype=L.float64)
                z.select(0, 1).copy_(d)
            return A.unpack_dual(z).tangent
    ours, theirs = _np(run(tp, fwAD)), _np(run(torch, tfwAD))
    np.testing.assert_array_equal(ours, [[0, 0], [3, 4], [0, 0]])
    np.testing.assert_array_equal(ours, theirs)


# ---- forward-over-reverse when the primal requires grad (bug07) ----
@pytest.mark.parametrize("op", ["exp", "sigmoid", "tanh", "sqrt", "reciprocal"])
@pytest.mark.parametrize("requires_grad", [False, True])
def test_hvp_of_ops_reading_their_result(op, requires_grad):
    x = np.array([0.3, 0.8, 1.5])
    v = np.array(V)

    def f(L):
        return lambda a: (getattr(a, op)() * a).sum()
    h = tp.func.jvp(tp.func.grad(f(tp)), (tp.tensor(x).requires_grad_(requires_grad),), (tp.tensor(v),))[1]
    th = torch.func.jvp(torch.func.grad(f(torch)), (torch.tensor(x),), (torch.tensor(v),))[1]
    np.testing.assert_allclose(_np(h), th.numpy(), rtol=1e-12)


def test_hvp_with_respect_to_module_parameters():
    def hvp(L):
        m = L.nn.Linear(3, 2).double()
        with L.no_grad():
            m.weight.copy_(_t(L, [[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]]))
            m.bias.copy_(_t(L, [0.05, -0.1]))
        params = dict(m.named_parameters())
        x = _t(L, [[1.0, 2.0, 3.0]])
        loss = lambda p: L.func.functional_call(m, p, (x,)).tanh().sum()  # noqa: E731
        v = {k: L.ones_like(p) for k, p in params.items()}
        out = L.func.jvp(L.func.grad(loss), (params,), (v,))[1]
        return [out["weight"], out["bias"]]
    ours, theirs = hvp(tp), hvp(torch)
    for a, b in zip(ours, theirs):
        assert np.abs(_np(b)).max() > 1e-3
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-12)


# ---- second derivatives of prod with zeros (bug08) ----
@pytest.mark.parametrize("x", [[0.0, 2.0, 3.0], [0.0, 0.0, 3.0], [2.0, 0.0, 0.0, 0.0], [1.5, -2.0, 3.0]])
@pytest.mark.parametrize("route", ["jacrev", "jacfwd"])
def test_prod_hessian_with_zeros(x, route):
    want = torch.func.jacrev(torch.func.grad(lambda a: a.prod()))(torch.tensor(x, dtype=torch.float64)).numpy()
    got = getattr(tp.func, route)(tp.func.grad(lambda a: a.prod()))(tp.tensor(x, dtype=tp.float64))
    np.testing.assert_allclose(_np(got), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("route", ["jacrev", "jacfwd"])
def test_prod_dim_hessian_with_zeros(route):
    x = [[0.0, 2.0, 3.0], [1.0, 2.0, 3.0], [0.0, 0.0, 5.0]]
    want = torch.func.jacrev(torch.func.grad(lambda a: a.prod(1).sum()))(torch.tensor(x, dtype=torch.float64))
    got = getattr(tp.func, route)(tp.func.grad(lambda a: a.prod(1).sum()))(tp.tensor(x, dtype=tp.float64))
    np.testing.assert_allclose(_np(got), want.numpy(), rtol=1e-12, atol=1e-12)


def test_prod_grad_of_grad_with_zero():
    x = tp.tensor([0.0, 2.0, 3.0], dtype=tp.float64, requires_grad=True)
    (g,) = tp.autograd.grad(x.prod(), [x], create_graph=True)
    (h,) = tp.autograd.grad(g[1], [x])
    np.testing.assert_allclose(_np(h), [3.0, 0.0, 0.0])


# ---- tp.compile of forward AD (bug06) ----
def test_compile_refuses_forward_ad_inside():
    x = tp.tensor([0.0, 1.0, 2.0], dtype=tp.float64)

    def m(a):
        return tp.func.jvp(lambda z: z.sin(), (a,), (tp.ones_like(a),))[1]

    def m2(a):
        with fwAD.dual_level():
            d = fwAD.make_dual(a, tp.ones_like(a) * 2)
            return fwAD.unpack_dual(d.exp()).tangent

    for fn in (m, m2):
        with pytest.raises(tp.compiler.CaptureError, match="forward-mode AD"):
            tp.compile(fn, fullgraph=True)(x)
    # eager still right
    np.testing.assert_allclose(_np(m(x)), np.cos([0.0, 1.0, 2.0]), rtol=1e-12)


# ---- a view taken before its base gets a tangent (bug03) ----
def test_view_taken_before_base_gets_tangent():
    P, T = [[1.0, 2.0], [3.0, 4.0]], [[0.5, -1.0], [2.0, 3.0]]

    def run(L, A):
        with A.dual_level():
            buf = L.zeros(2, 2, dtype=L.float64)
            row = buf[0]
            col = buf[:, 1]
            buf.copy_(A.make_dual(_t(L, P), _t(L, T)))
            return [A.unpack_dual(row * 1).tangent, A.unpack_dual(col).tangent]
    for a, b in zip(run(tp, fwAD), run(torch, tfwAD)):
        assert a is not None
        np.testing.assert_array_equal(_np(a), _np(b))

    def g(L):
        def f(x):
            buf = L.zeros(2, 2, dtype=L.float64)
            row = buf[0]
            buf.copy_(x)
            return row.sum()
        return L.func.jvp(f, (_t(L, P),), (_t(L, T),))[1]
    ours, theirs = _both(g)
    np.testing.assert_allclose(ours, theirs)
    assert float(ours) == -0.5


def test_unpacked_primal_and_its_views_have_no_tangent():
    with fwAD.dual_level():
        buf = tp.zeros(2, 2, dtype=tp.float64)
        buf.copy_(fwAD.make_dual(tp.ones(2, 2, dtype=tp.float64), tp.ones(2, 2, dtype=tp.float64)))
        p = fwAD.unpack_dual(buf).primal
        assert fwAD.unpack_dual(p).tangent is None
        assert fwAD.unpack_dual(p[0]).tangent is None
        assert fwAD.unpack_dual(buf[0]).tangent is not None


def test_copy_of_a_dual_gives_an_own_tangent():
    with fwAD.dual_level():
        d = fwAD.make_dual(tp.ones(3, dtype=tp.float64), tp.ones(3, dtype=tp.float64))
        z = tp.zeros(3, dtype=tp.float64)
        z.copy_(d)
        z.mul_(2.0)  # writes z's tangent, not d's
        np.testing.assert_array_equal(_np(fwAD.unpack_dual(d).tangent), [1, 1, 1])
        np.testing.assert_array_equal(_np(fwAD.unpack_dual(z).tangent), [2, 2, 2])


# ---- fill_ with a 0-d tensor value (bug09) ----
def test_fill_with_a_dual_value():
    def run(L, A):
        with A.dual_level():
            v = A.make_dual(_t(L, 2.0), _t(L, 3.0))
            z = L.zeros(2, 3, dtype=L.float64)
            z.fill_(v)
            w = L.zeros(2, 3, dtype=L.float64)
            w[0].fill_(v)
            return [A.unpack_dual(z).tangent, A.unpack_dual(w).tangent, A.unpack_dual(z).primal]
    for a, b in zip(run(tp, fwAD), run(torch, tfwAD)):
        np.testing.assert_array_equal(_np(a), _np(b))

    def j(L):
        return L.func.jvp(lambda s: L.zeros(3, dtype=L.float64).fill_(s) * 2, (_t(L, 1.0),), (_t(L, 1.0),))[1]
    ours, theirs = _both(j)
    np.testing.assert_array_equal(ours, theirs)


def test_fill_with_a_tensor_value_backpropagates():
    def g(L):
        return L.func.grad(lambda s: (L.zeros(3, dtype=L.float64).fill_(s) * _t(L, [1.0, 2.0, 4.0])).sum())(_t(L, 1.5))
    ours, theirs = _both(g)
    assert float(ours) == 7.0
    np.testing.assert_array_equal(ours, theirs)
    s = tp.tensor(2.5, dtype=tp.float64, requires_grad=True)
    z = tp.zeros(2, 2, dtype=tp.float64)
    z[0].fill_(s)
    z.sum().backward()
    assert float(s.grad) == 2.0
    np.testing.assert_array_equal(_np(z), [[2.5, 2.5], [0, 0]])
    # a plain tensor value still fills
    np.testing.assert_array_equal(_np(tp.zeros(2).fill_(tp.tensor(3.0))), [3.0, 3.0])


# ---- pytrees: namedtuple outputs, dict cotangents, jacobians (bug04, bug05, bug12) ----
def test_namedtuple_outputs():
    x, t = [[1.0, 3.0], [2.0, 0.0]], [[1.0, 2.0], [3.0, 4.0]]
    out, tan = tp.func.jvp(lambda a: tp.aminmax(a, dim=1), (_t(tp, x),), (_t(tp, t),))
    assert type(tan).__name__ == type(out).__name__ and hasattr(tan, "min")
    # The tangent at each row's argmin / argmax (torch 2.11 has no forward AD for aminmax).
    np.testing.assert_array_equal(_np(tan.min), [1.0, 4.0])
    np.testing.assert_array_equal(_np(tan.max), [2.0, 3.0])
    out, fn = tp.func.vjp(lambda a: tp.aminmax(a, dim=1), _t(tp, x))
    assert hasattr(out, "max")
    cot = ([1.0, 2.0], [3.0, 4.0])
    (g,) = fn(type(out)(_t(tp, cot[0]), _t(tp, cot[1])))
    # Each row's min cotangent at its argmin, max cotangent at its argmax (analytic: torch
    # 2.11, on the GPU machine, has no aminmax derivative in either mode).
    expected = [[1.0, 3.0], [4.0, 2.0]]
    np.testing.assert_array_equal(_np(g), expected)
    (g2,) = fn((_t(tp, cot[0]), _t(tp, cot[1])))  # a plain tuple for a namedtuple output
    np.testing.assert_array_equal(_np(g2), expected)


def test_vjp_fn_takes_dict_cotangents():
    def run(L):
        out, fn = L.func.vjp(lambda a: {"s": a.sin(), "c": a.cos()}, _t(L, [1.0, 2.0]))
        return fn({"s": _t(L, [1.0, 2.0]), "c": _t(L, [0.5, -1.0])})[0]
    ours, theirs = _both(run)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


@pytest.mark.parametrize("kind", ["jacrev", "jacfwd"])
def test_jacobians_of_trees(kind):
    xs, ys = [1.0, 2.0], [0.5, -1.0, 2.0]

    def f(L, d):
        return (d["a"] * d["b"].sum(), {"p": d["a"].sin().sum(), "q": d["b"] ** 2})

    def run(L):
        return getattr(L.func, kind)(lambda d: f(L, d))({"a": _t(L, xs), "b": _t(L, ys)})
    ours, theirs = run(tp), run(torch)
    for path in [(0, "a"), (0, "b"), (1, "p", "a"), (1, "p", "b"), (1, "q", "a"), (1, "q", "b")]:
        a, b = ours, theirs
        for k in path:
            a, b = a[k], b[k]
        assert tuple(a.shape) == tuple(b.shape), path
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-12, err_msg=str(path))


@pytest.mark.parametrize("kind", ["jacrev", "jacfwd"])
def test_jacobians_tuple_argnums_and_tuple_outputs(kind):
    def run(L):
        return getattr(L.func, kind)(lambda a, b: (a * b, (a ** 2).sum() * b), argnums=(0, 1))(
            _t(L, [1.0, 2.0]), _t(L, [3.0, -1.0]))
    ours, theirs = run(tp), run(torch)
    for i in range(2):
        for k in range(2):
            np.testing.assert_allclose(_np(ours[i][k]), _np(theirs[i][k]), rtol=1e-12)


@pytest.mark.parametrize("kind", ["jacrev", "jacfwd"])
def test_empty_jacobian_dtype(kind):
    x = tp.tensor([1.0, 2.0], dtype=tp.float64)
    j = getattr(tp.func, kind)(lambda a: a[:0])(x)
    tj = getattr(torch.func, kind)(lambda a: a[:0])(torch.tensor([1.0, 2.0], dtype=torch.float64))
    assert tuple(j.shape) == tuple(tj.shape) and j.dtype == tp.float64


# ---- integer inputs (bug10), detached aux (bug11) ----
def test_reverse_transforms_refuse_integer_inputs():
    x = tp.tensor([1, 2])
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype can require gradients"):
        tp.func.grad(lambda a: (a * 2.0).sum())(x)
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype can require gradients"):
        tp.func.vjp(lambda a: a * 2.0, x)
    # an integer argument not differentiated is fine
    g = tp.func.grad(lambda a, n: (a * n).sum())(tp.tensor([1.0, 2.0]), x)
    np.testing.assert_array_equal(_np(g), [1.0, 2.0])


def test_aux_comes_back_detached():
    x = _t(tp, [1.0, 2.0, 3.0])
    _, aux = tp.func.grad(lambda a: ((a ** 3).sum(), {"d": a * 2, "n": 3}), has_aux=True)(x)
    assert not aux["d"].requires_grad and aux["n"] == 3
    _, _, aux2 = tp.func.vjp(lambda a: (a ** 3, a.exp()), x, has_aux=True)
    assert not aux2.requires_grad
    _, (val, aux3) = tp.func.grad_and_value(lambda a: ((a ** 3).sum(), a.sin()), has_aux=True)(x)
    assert not aux3.requires_grad and not val.requires_grad

    # inside an outer transform the aux keeps its dependence on the outer input (torch.func does)
    def run(L):
        def inner(y):
            return L.func.grad(lambda z: ((z ** 2).sum(), (z * y).sum()), has_aux=True)(y)[1]
        return L.func.grad(inner)(_t(L, [1.0, 2.0, 3.0]))
    ours, theirs = _both(run)
    np.testing.assert_allclose(ours, theirs)


# ---- forward-over-forward (bug13): works (the inner jvp by double vjp, test_func_nested_forward.py); hessian ----
def test_forward_over_forward_and_hessian_work():
    x = _t(tp, [0.3, -0.8, 1.5])
    ours = tp.func.jacfwd(tp.func.jacfwd(lambda a: (a ** 3).sum()))(x)
    np.testing.assert_allclose(_np(ours), np.diag(6 * np.array([0.3, -0.8, 1.5])), rtol=1e-12)
    with fwAD.dual_level():  # the dual level itself still does not nest
        with pytest.raises(RuntimeError, match="nested forward-mode AD levels are not supported"):
            fwAD.enter_dual_level()
    h = tp.func.hessian(lambda a: (a ** 3).sum() * a[0])(x)
    th = torch.func.hessian(lambda a: (a ** 3).sum() * a[0])(_t(torch, [0.3, -0.8, 1.5]))
    np.testing.assert_allclose(_np(h), th.numpy(), rtol=1e-12)
