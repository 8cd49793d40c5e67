"""tp.autograd.functional (vjp, jvp, jacobian, hessian, vhp, hvp).

Every function is checked on float64 inputs three ways:
  - against central finite differences computed here from the function's values
    (first differences for Jacobians, second differences for Hessians), so a bug
    shared by all of TensorPlay's derivative paths cannot hide;
  - against the tp.func transforms (jacrev, jacfwd, vjp, jvp, hessian);
  - against torch.autograd.functional on the same numbers (skipped without torch).
Then the structure of the results (Tensor vs tuple, tuple of tuples), create_graph
(a derivative of the result equals the analytic one), strict mode, v checks and
error messages.
"""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.autograd.functional as AF

try:
    import torch
    import torch.autograd.functional as TF
except ImportError:  # pragma: no cover - torch is optional
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

F64 = tp.float64


def _np(t):
    return np.array(t.detach().contiguous().numpy(), dtype=np.float64)


def _tp(a, requires_grad=False):
    return tp.tensor(np.array(a, dtype=np.float64), requires_grad=requires_grad)


# ---------------------------------------------------------------------------
# Functions, written once for both libraries: make(L) returns the function for
# library L (tp or torch), with its constants built in L.
_RNG = np.random.default_rng(7)
_W = _RNG.standard_normal((2, 3))
_A = _RNG.standard_normal((3, 3))


def _single_single(L):  # Tensor -> Tensor
    return lambda x: x.sin() * x.exp() + x.unsqueeze(1) @ x.unsqueeze(0) @ x.cos()


def _tuple_tuple(L):  # (Tensor, Tensor) -> (Tensor, Tensor, Tensor)
    W = L.tensor(_W)
    return lambda x, y: ((W @ (x * y).tanh()) * x[0], (x * x).sum() * y, (x * y.exp()).sum(0, keepdim=True))


def _tuple_single(L):  # (Tensor, Tensor) -> Tensor
    return lambda x, y: x.unsqueeze(1) * y.sigmoid() + (x * x).sum()


def _single_tuple(L):  # Tensor (2, 3) -> (Tensor, Tensor)
    return lambda x: (x.tanh().sum(1), (x.unsqueeze(0) * x.unsqueeze(1)).exp().sum(2))


# (id, make, [input shapes], inputs passed as a tuple, outputs come as a tuple)
CASES = [
    ("single->single", _single_single, [(3,)], False, False),
    ("tuple->tuple", _tuple_tuple, [(3,), (3,)], True, True),
    ("tuple->single", _tuple_single, [(3,), (2,)], True, False),
    ("single->tuple", _single_tuple, [(2, 3)], False, True),
    ("1-tuple->1-tuple", lambda L: (lambda x: (x.exp() * x.sum(),)), [(4,)], True, True),
]
CASE_IDS = [c[0] for c in CASES]


def _scalar_single(L):
    A = L.tensor(_A)
    return lambda x: (x.sin() * (A @ x)).sum() + (x ** 4).sum()


def _scalar_tuple(L):
    return lambda x, y: (x.unsqueeze(1) * y.unsqueeze(0)).tanh().sum() + (x.exp() * y[0] ** 3).sum()


# (id, make, [input shapes], inputs passed as a tuple)
SCALAR_CASES = [
    ("single", _scalar_single, [(3,)], False),
    ("tuple", _scalar_tuple, [(2,), (3,)], True),
    ("0-d in, (1,) out", lambda L: (lambda x: (x.sin() * x * x).reshape(1)), [()], False),
]
SCALAR_IDS = [c[0] for c in SCALAR_CASES]


def _arrays(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1.0, 1.0, s) for s in shapes]


def _call(make, arrays, as_tuple, L=tp):
    ts = [L.tensor(a) for a in arrays]
    return tuple(ts) if as_tuple else ts[0]


def _values(make, arrays):
    """The function's outputs at arrays, as a list of float64 numpy arrays."""
    f = make(tp)
    with tp.no_grad():
        out = f(*[tp.tensor(a) for a in arrays])
    return [_np(o) for o in (out if isinstance(out, tuple) else (out,))]


def _fd_jacobian(make, arrays, eps=1e-6):
    """[output][input] blocks of shape out.shape + in.shape, central differences."""
    outs = _values(make, arrays)
    blocks = [[np.zeros(o.shape + a.shape) for a in arrays] for o in outs]
    for m, a in enumerate(arrays):
        for j in range(a.size):
            plus = [x.copy() for x in arrays]
            minus = [x.copy() for x in arrays]
            plus[m].reshape(-1)[j] += eps
            minus[m].reshape(-1)[j] -= eps
            for i, (p, q) in enumerate(zip(_values(make, plus), _values(make, minus))):
                blocks[i][m].reshape(p.size, a.size)[:, j] = ((p - q) / (2 * eps)).reshape(-1)
    return blocks


def _fd_hessian(make, arrays, h=1e-4):
    """[input i][input j] blocks of shape in_i.shape + in_j.shape by second differences of the scalar."""
    sizes = [a.size for a in arrays]
    offsets = np.cumsum([0] + sizes)
    flat0 = np.concatenate([a.reshape(-1) for a in arrays])

    def value(flat):
        parts = [flat[offsets[k]:offsets[k + 1]].reshape(a.shape) for k, a in enumerate(arrays)]
        return float(_values(make, parts)[0].reshape(-1)[0])

    n = flat0.size
    H = np.zeros((n, n))
    for p in range(n):
        for q in range(n):
            def at(sp, sq):
                f = flat0.copy()
                f[p] += sp * h
                f[q] += sq * h
                return value(f)
            H[p, q] = (at(1, 1) - at(1, -1) - at(-1, 1) + at(-1, -1)) / (4 * h * h)
    return [[H[offsets[i]:offsets[i + 1], offsets[j]:offsets[j + 1]].reshape(ai.shape + aj.shape)
             for j, aj in enumerate(arrays)] for i, ai in enumerate(arrays)]


def _blocks(res, outs_tuple, ins_tuple):
    """A jacobian/hessian result as [output][input] blocks, asserting its structure."""
    if outs_tuple:
        assert isinstance(res, tuple), f"expected a tuple over outputs, got {type(res).__name__}"
        rows = list(res)
    else:
        assert isinstance(res, tp.Tensor) or isinstance(res, tuple) and ins_tuple
        rows = [res]
    out = []
    for r in rows:
        if ins_tuple:
            assert isinstance(r, tuple), f"expected a tuple over inputs, got {type(r).__name__}"
            out.append([_np(b) for b in r])
        else:
            assert isinstance(r, tp.Tensor), f"expected a Tensor block, got {type(r).__name__}"
            out.append([_np(r)])
    return out


def _as_list(res, as_tuple):
    if as_tuple:
        assert isinstance(res, tuple), f"expected a tuple, got {type(res).__name__}"
        return [_np(r) for r in res]
    assert isinstance(res, tp.Tensor), f"expected a Tensor, got {type(res).__name__}"
    return [_np(res)]


def _close(a, b, tol=1e-6):
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# ---------------------------------------------------------------------------
# Against finite differences
@pytest.mark.parametrize("vectorize,strategy", [(False, "reverse-mode"), (True, "reverse-mode"),
                                                (True, "forward-mode")])
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_jacobian_matches_finite_differences(case, vectorize, strategy):
    _, make, shapes, ins_tuple, outs_tuple = case
    arrays = _arrays(shapes)
    res = AF.jacobian(make(tp), _call(make, arrays, ins_tuple), vectorize=vectorize, strategy=strategy)
    got = _blocks(res, outs_tuple, ins_tuple)
    want = _fd_jacobian(make, arrays)
    assert len(got) == len(want)
    for gi, wi in zip(got, want):
        for g, w in zip(gi, wi):
            assert g.shape == w.shape
            _close(g, w)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_vjp_and_jvp_match_finite_differences(case):
    _, make, shapes, ins_tuple, outs_tuple = case
    arrays = _arrays(shapes)
    J = _fd_jacobian(make, arrays)
    outs = _values(make, arrays)
    rng = np.random.default_rng(3)
    u = [rng.standard_normal(o.shape) for o in outs]
    t = [rng.standard_normal(a.shape) for a in arrays]
    out, vjp = AF.vjp(make(tp), _call(make, arrays, ins_tuple), _call(None, u, outs_tuple))
    for o, w in zip(_as_list(out, outs_tuple), outs):
        _close(o, w, 1e-12)
    for m, (g, a) in enumerate(zip(_as_list(vjp, ins_tuple), arrays)):
        want = sum(u[i].reshape(-1) @ J[i][m].reshape(u[i].size, a.size) for i in range(len(outs)))
        _close(g, want.reshape(a.shape))
    out, jvp = AF.jvp(make(tp), _call(make, arrays, ins_tuple), _call(None, t, ins_tuple))
    for o, w in zip(_as_list(out, outs_tuple), outs):
        _close(o, w, 1e-12)
    for i, (g, o) in enumerate(zip(_as_list(jvp, outs_tuple), outs)):
        want = sum(J[i][m].reshape(o.size, a.size) @ t[m].reshape(-1) for m, a in enumerate(arrays))
        _close(g, want.reshape(o.shape))


@pytest.mark.parametrize("vectorize,strategy", [(False, "reverse-mode"), (True, "reverse-mode"),
                                                (True, "forward-mode")])
@pytest.mark.parametrize("case", SCALAR_CASES, ids=SCALAR_IDS)
def test_hessian_matches_finite_differences(case, vectorize, strategy):
    _, make, shapes, ins_tuple = case
    arrays = _arrays(shapes, seed=1)
    res = AF.hessian(make(tp), _call(make, arrays, ins_tuple), vectorize=vectorize, outer_jacobian_strategy=strategy)
    got = _blocks(res, ins_tuple, ins_tuple)
    want = _fd_hessian(make, arrays)
    for gi, wi in zip(got, want):
        for g, w in zip(gi, wi):
            assert g.shape == w.shape
            _close(g, w, 1e-5)


@pytest.mark.parametrize("which", ["hvp", "vhp"])
@pytest.mark.parametrize("case", SCALAR_CASES, ids=SCALAR_IDS)
def test_hvp_vhp_match_finite_differences(case, which):
    _, make, shapes, ins_tuple = case
    arrays = _arrays(shapes, seed=2)
    v = [np.random.default_rng(5).standard_normal(a.shape) for a in arrays]
    out, res = getattr(AF, which)(make(tp), _call(make, arrays, ins_tuple), _call(None, v, ins_tuple))
    _close(_np(out), _values(make, arrays)[0], 1e-12)
    H = _fd_hessian(make, arrays)
    for i, (g, a) in enumerate(zip(_as_list(res, ins_tuple), arrays)):
        want = sum(H[i][j].reshape(a.size, b.size) @ v[j].reshape(-1) for j, b in enumerate(arrays))
        _close(g, want.reshape(a.shape), 1e-5)


# ---------------------------------------------------------------------------
# Against tp.func
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_agrees_with_tp_func(case):
    _, make, shapes, ins_tuple, outs_tuple = case
    arrays = _arrays(shapes, seed=4)
    f = make(tp)
    xs = [tp.tensor(a) for a in arrays]
    argnums = tuple(range(len(xs))) if ins_tuple else 0
    for func_jac in (tp.func.jacrev, tp.func.jacfwd):
        ref = func_jac(f, argnums=argnums)(*xs)
        got = AF.jacobian(f, _call(make, arrays, ins_tuple))
        for gi, ri in zip(_blocks(got, outs_tuple, ins_tuple), _blocks(ref, outs_tuple, ins_tuple)):
            for g, r in zip(gi, ri):
                _close(g, r, 1e-12)
    rng = np.random.default_rng(8)
    t = tuple(tp.tensor(rng.standard_normal(a.shape)) for a in arrays)
    _, ref_t = tp.func.jvp(f, tuple(xs), t)
    _, got_t = AF.jvp(f, _call(make, arrays, ins_tuple), t if ins_tuple else t[0])
    for g, r in zip(_as_list(got_t, outs_tuple), _as_list(ref_t, outs_tuple)):
        _close(g, r, 1e-12)
    out, fn = tp.func.vjp(f, *xs)
    u = tp.func._map_tensors(out, lambda o: tp.tensor(rng.standard_normal(tuple(o.shape))))
    ref_u = fn(u)
    _, got_u = AF.vjp(f, _call(make, arrays, ins_tuple), u)
    for g, r in zip(_as_list(got_u, ins_tuple), _as_list(ref_u if ins_tuple else ref_u[0], ins_tuple)):
        _close(g, r, 1e-12)


@pytest.mark.parametrize("case", SCALAR_CASES, ids=SCALAR_IDS)
def test_hessian_agrees_with_tp_func_hessian(case):
    _, make, shapes, ins_tuple = case
    arrays = _arrays(shapes, seed=6)
    f = make(tp)
    xs = [tp.tensor(a) for a in arrays]
    scalar = lambda *a: f(*a).reshape(())  # noqa: E731
    ref = tp.func.hessian(scalar, argnums=tuple(range(len(xs))))(*xs)
    got = _blocks(AF.hessian(f, _call(make, arrays, ins_tuple)), ins_tuple, ins_tuple)
    for gi, ri in zip(got, ref):
        for g, r in zip(gi, ri):
            _close(g, _np(r), 1e-10)


# ---------------------------------------------------------------------------
# Against torch.autograd.functional
def _torch_list(res):
    return [r.detach().numpy() for r in (res if isinstance(res, tuple) else (res,))]


def _torch_blocks(res, outs_tuple, ins_tuple):
    return [[b.detach().numpy() for b in (row if ins_tuple else (row,))] for row in (res if outs_tuple else (res,))]


@needs_torch
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_vjp_jvp_jacobian_match_torch(case):
    _, make, shapes, ins_tuple, outs_tuple = case
    arrays = _arrays(shapes, seed=9)
    rng = np.random.default_rng(10)
    u = [rng.standard_normal(o.shape) for o in _values(make, arrays)]
    t = [rng.standard_normal(a.shape) for a in arrays]
    x_tp, x_th = _call(make, arrays, ins_tuple), _call(make, arrays, ins_tuple, torch)
    for name, v in (("vjp", u), ("jvp", t)):
        v_tuple = outs_tuple if name == "vjp" else ins_tuple
        got = getattr(AF, name)(make(tp), x_tp, _call(None, v, v_tuple))
        ref = getattr(TF, name)(make(torch), x_th, _call(None, v, v_tuple, torch))
        for g_part, r_part in zip(got, ref):
            assert isinstance(g_part, tuple) == isinstance(r_part, tuple), name
            for g, r in zip([_np(p) for p in (g_part if isinstance(g_part, tuple) else (g_part,))],
                            _torch_list(r_part)):
                _close(g, r, 1e-12)
    for vectorize, strategy in ((False, "reverse-mode"), (True, "reverse-mode"), (True, "forward-mode")):
        got = AF.jacobian(make(tp), x_tp, vectorize=vectorize, strategy=strategy)
        ref = TF.jacobian(make(torch), x_th, vectorize=vectorize, strategy=strategy)
        for gi, ri in zip(_blocks(got, outs_tuple, ins_tuple), _torch_blocks(ref, outs_tuple, ins_tuple)):
            for g, r in zip(gi, ri):
                assert g.shape == r.shape
                _close(g, r, 1e-12)


@needs_torch
@pytest.mark.parametrize("case", SCALAR_CASES, ids=SCALAR_IDS)
def test_hessian_hvp_vhp_match_torch(case):
    _, make, shapes, ins_tuple = case
    arrays = _arrays(shapes, seed=11)
    v = [np.random.default_rng(12).standard_normal(a.shape) for a in arrays]
    x_tp, x_th = _call(make, arrays, ins_tuple), _call(make, arrays, ins_tuple, torch)
    for vectorize, strategy in ((False, "reverse-mode"), (True, "reverse-mode"), (True, "forward-mode")):
        got = AF.hessian(make(tp), x_tp, vectorize=vectorize, outer_jacobian_strategy=strategy)
        ref = TF.hessian(make(torch), x_th, vectorize=vectorize, outer_jacobian_strategy=strategy)
        for gi, ri in zip(_blocks(got, ins_tuple, ins_tuple), _torch_blocks(ref, ins_tuple, ins_tuple)):
            for g, r in zip(gi, ri):
                assert g.shape == r.shape
                _close(g, r, 1e-10)
    for name in ("hvp", "vhp"):
        out, got = getattr(AF, name)(make(tp), x_tp, _call(None, v, ins_tuple))
        r_out, ref = getattr(TF, name)(make(torch), x_th, _call(None, v, ins_tuple, torch))
        _close(_np(out), r_out.numpy(), 1e-12)
        assert tuple(out.shape) == tuple(r_out.shape)
        for g, r in zip(_as_list(got, ins_tuple), _torch_list(ref)):
            _close(g, r, 1e-10)


@needs_torch
def test_v_none_single_element_matches_torch():
    a = np.array([0.7])
    f = lambda x: (x.sin() * x).sum() * 2  # noqa: E731
    for name in ("vjp", "jvp", "vhp", "hvp"):
        _, got = getattr(AF, name)(f, _tp(a))
        _, ref = getattr(TF, name)(f, torch.tensor(a))
        _close(_np(got), ref.numpy(), 1e-12)


# ---------------------------------------------------------------------------
# Structure
def test_result_structure_follows_inputs_and_outputs():
    x, y = _tp([1.0, 2.0]), _tp([3.0, 4.0, 5.0])
    j = AF.jacobian(lambda x, y: (x * 2, y.sum()), (x, y))
    assert isinstance(j, tuple) and len(j) == 2 and all(isinstance(r, tuple) and len(r) == 2 for r in j)
    assert [[tuple(b.shape) for b in r] for r in j] == [[(2, 2), (2, 3)], [(2,), (3,)]]
    j = AF.jacobian(lambda x: (x * 2, x.sum()), x)
    assert isinstance(j, tuple) and [tuple(b.shape) for b in j] == [(2, 2), (2,)]
    j = AF.jacobian(lambda x, y: x.sum() * y, (x, y))
    assert isinstance(j, tuple) and [tuple(b.shape) for b in j] == [(3, 2), (3, 3)]
    assert isinstance(AF.jacobian(lambda x: x * 2, x), tp.Tensor)
    h = AF.hessian(lambda x, y: (x.sum() * y).sum(), (x, y))
    assert [[tuple(b.shape) for b in r] for r in h] == [[(2, 2), (2, 3)], [(3, 2), (3, 3)]]
    assert isinstance(AF.hessian(lambda x: (x ** 3).sum(), x), tp.Tensor)
    # a list of inputs counts as a tuple; a 1-tuple stays a tuple
    out, g = AF.vjp(lambda x: x * 3, [x], _tp([1.0, 1.0]))
    assert isinstance(g, tuple) and len(g) == 1 and isinstance(out, tp.Tensor)
    out, g = AF.jvp(lambda x: (x * 3,), x, _tp([1.0, 0.0]))
    assert isinstance(out, tuple) and isinstance(g, tuple) and _np(g[0]).tolist() == [3.0, 0.0]


def test_results_are_detached_without_create_graph():
    x = _tp([0.5, -1.0], requires_grad=True)
    v = _tp([1.0, 2.0], requires_grad=True)
    f = lambda x: x.exp() * x  # noqa: E731
    g = lambda x: (x ** 3).sum()  # noqa: E731
    results = [*AF.vjp(f, x, v), *AF.jvp(f, x, v), AF.jacobian(f, x), AF.jacobian(f, x, vectorize=True),
               AF.hessian(g, x), *AF.hvp(g, x, v), *AF.vhp(g, x, v)]
    for r in results:
        assert not r.requires_grad
    assert x.grad is None and v.grad is None


# ---------------------------------------------------------------------------
# create_graph: the result is differentiable, and its derivative is the analytic one
def _grad_of(out, wrt):
    return [_np(g) for g in tp.autograd.grad(out, wrt)]


def test_create_graph_vjp_jvp():
    a, b = np.array([0.3, -0.7, 1.1]), np.array([0.5, 2.0, -1.0])
    x, v = _tp(a, True), _tp(b, True)
    _, g = AF.vjp(lambda x: x ** 3, x, v, create_graph=True)  # g = 3 x^2 v
    assert g.requires_grad
    dx, dv = _grad_of(g.sum(), [x, v])
    _close(dx, 6 * a * b, 1e-12)
    _close(dv, 3 * a ** 2, 1e-12)
    out, t = AF.jvp(lambda x: x.sin() * x, x, v, create_graph=True)  # t = (cos x * x + sin x) v
    assert out.requires_grad and t.requires_grad
    dx, dv = _grad_of(t.sum(), [x, v])
    _close(dx, (2 * np.cos(a) - a * np.sin(a)) * b, 1e-12)
    _close(dv, np.cos(a) * a + np.sin(a), 1e-12)
    # jvp with create_graph also works inside a second jvp (double-vjp all the way down)
    _, tt = AF.jvp(lambda x: AF.jvp(lambda y: y ** 4, x, v.detach(), create_graph=True)[1], x.detach(),
                   _tp(np.ones(3)))
    _close(_np(tt), 12 * a ** 2 * b, 1e-12)


@pytest.mark.parametrize("vectorize", [False, True])
def test_create_graph_jacobian(vectorize):
    a = np.array([0.3, -0.7, 1.1])
    x = _tp(a, True)
    J = AF.jacobian(lambda x: x.unsqueeze(1) * x.unsqueeze(0) ** 2, x, create_graph=True, vectorize=vectorize)
    assert J.requires_grad and tuple(J.shape) == (3, 3, 3)
    # J[i,j,k] = d(x_i x_j^2)/dx_k, so sum(J) = sum_k d/dx_k (S1 S2) = n S2 + 2 S1^2 (S1 = sum x, S2 = sum x^2,
    # n = 3) and its gradient is 2 n x + 4 S1
    want = 6 * a + 4 * a.sum()
    _close(_grad_of(J.sum(), [x])[0], want, 1e-12)


def test_create_graph_hessian_third_derivative():
    a = np.array([0.3, -0.7, 1.1])
    x = _tp(a, True)
    for vectorize in (False, True):
        H = AF.hessian(lambda x: (x ** 4).sum() + x.prod(), x, create_graph=True, vectorize=vectorize)
        assert H.requires_grad
        # H = diag(12 x^2) + offdiag prod/(x_i x_j); d/dx sum(diag) = 24 x; use the diagonal only
        (d,) = tp.autograd.grad((H * tp.eye(3, dtype=F64)).sum(), [x])
        _close(_np(d), 24 * a, 1e-12)


@pytest.mark.parametrize("which", ["hvp", "vhp"])
def test_create_graph_hvp_vhp(which):
    a, b = np.array([0.3, -0.7, 1.1]), np.array([1.0, 2.0, 3.0])
    x, v = _tp(a, True), _tp(b, True)
    _, r = getattr(AF, which)(lambda x: (x ** 4).sum(), x, v, create_graph=True)  # 12 x^2 v
    assert r.requires_grad
    dx, dv = _grad_of(r.sum(), [x, v])
    _close(dx, 24 * a * b, 1e-12)
    _close(dv, 12 * a ** 2, 1e-12)


def test_create_graph_keeps_dependence_on_caller_graph():
    # inputs that are themselves functions of a leaf stay connected to it
    w = _tp([2.0], True)
    x = w * _tp([1.0, 3.0])
    J = AF.jacobian(lambda x: x ** 2, x, create_graph=True)  # diag(2 w [1, 3])
    (dw,) = tp.autograd.grad(J.sum(), [w])
    _close(_np(dw), [8.0], 1e-12)


# ---------------------------------------------------------------------------
# Outputs independent of inputs, strict
def test_independent_outputs_give_zeros():
    x, y = _tp([1.0, 2.0]), _tp([3.0])
    const = lambda x, y: (x * 2, tp.ones(2, dtype=F64))  # noqa: E731
    J = AF.jacobian(const, (x, y))
    expected = [[2 * np.eye(2), np.zeros((2, 1))], [np.zeros((2, 2)), np.zeros((2, 1))]]
    for gi, wi in zip(_blocks(J, True, True), expected):
        for g, w in zip(gi, wi):
            _close(g, w, 0)
    J = AF.jacobian(const, (x, y), vectorize=True)
    for gi, wi in zip(_blocks(J, True, True), expected):
        for g, w in zip(gi, wi):
            _close(g, w, 0)
    _, g = AF.vjp(const, (x, y), (_tp([1.0, 1.0]), _tp([1.0, 1.0])))
    _close(_np(g[0]), [2.0, 2.0], 0)
    _close(_np(g[1]), [0.0], 0)
    _, t = AF.jvp(const, (x, y), (_tp([1.0, 1.0]), _tp([1.0])))
    _close(_np(t[1]), [0.0, 0.0], 0)
    _, hv = AF.hvp(lambda x, y: (x * x).sum(), (x, y), (_tp([1.0, 1.0]), _tp([1.0])))
    _close(_np(hv[0]), [2.0, 2.0], 0)
    _close(_np(hv[1]), [0.0], 0)
    H = AF.hessian(lambda x, y: x.sum() * 3, (x, y))
    assert all(np.all(_np(b) == 0) for r in H for b in r)


@pytest.mark.parametrize("call", [
    lambda f, x: AF.vjp(f, x, _tp([1.0, 1.0]), strict=True),
    lambda f, x: AF.jvp(f, x, (_tp([1.0, 1.0]), _tp([1.0, 1.0])), strict=True),
    lambda f, x: AF.jacobian(f, x, strict=True),
], ids=["vjp", "jvp", "jacobian"])
def test_strict_raises_for_unused_input(call):
    x, y = _tp([1.0, 2.0]), _tp([3.0, 4.0])
    with pytest.raises(RuntimeError, match="independent of input 1. This is not allowed in strict mode"):
        call(lambda x, y: x * 2, (x, y))
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not require gradients"):
        call(lambda x, y: tp.ones(2, dtype=F64), (x, y))
    call(lambda x, y: x * y, (x, y))  # both used: fine


def test_strict_second_order():
    x = _tp([1.0, 2.0])
    lin = lambda x: (x * 3).sum()  # noqa: E731 - its gradient does not depend on x
    for name in ("vhp", "hvp"):
        with pytest.raises(RuntimeError, match="strict mode"):
            getattr(AF, name)(lin, x, _tp([1.0, 1.0]), strict=True)
        _, r = getattr(AF, name)(lin, x, _tp([1.0, 1.0]))
        _close(_np(r), [0.0, 0.0], 0)
    with pytest.raises(RuntimeError, match="hessian.*independent.*strict mode"):
        AF.hessian(lin, x, strict=True)
    _close(_np(AF.hessian(lambda x: (x ** 3).sum(), x, strict=True)), np.diag([6.0, 12.0]), 1e-12)
    for call in (lambda: AF.jacobian(lambda x: x * 3, x, strict=True, create_graph=True),
                 lambda: AF.vjp(lambda x: x * 3, x, x, strict=True, create_graph=True),
                 lambda: AF.jvp(lambda x: x * 3, x, x, strict=True, create_graph=True)):
        with pytest.raises(RuntimeError, match="jacobian .* independent of input 0.*strict mode when create_graph"):
            call()
    for name in ("hvp", "vhp"):  # a quadratic's Hessian is constant: fine, unless create_graph=True
        getattr(AF, name)(lambda x: (x * x).sum(), x, x, strict=True)
        with pytest.raises(RuntimeError, match="hessian .* independent of input 0.*strict mode when create_graph"):
            getattr(AF, name)(lambda x: (x * x).sum(), x, x, strict=True, create_graph=True)
    # a cubic's are not constant
    _, r = AF.hvp(lambda x: (x ** 3).sum(), x, x, strict=True, create_graph=True)
    assert r.requires_grad


# ---------------------------------------------------------------------------
# v and argument checks, errors
def test_v_shape_errors_name_function_and_shapes():
    x = _tp([1.0, 2.0, 3.0])

    def cube(x):
        return x ** 3

    with pytest.raises(RuntimeError, match=r"vjp: v has shape \(2,\) but output 0 of the function 'cube' has "
                                           r"shape \(3,\)"):
        AF.vjp(cube, x, _tp([1.0, 2.0]))
    with pytest.raises(RuntimeError, match=r"jvp: v\[1\] has shape \(3,\) but input 1 of the function"):
        AF.jvp(lambda a, b: a * b.sum(), (x, _tp([1.0])), (x, x))
    with pytest.raises(RuntimeError, match=r"hvp: v has 2 Tensors but the function .* has 1 inputs"):
        AF.hvp(lambda a: a.sum(), (x,), (x, x))
    with pytest.raises(RuntimeError, match=r"vhp: v should be a single Tensor"):
        AF.vhp(lambda a: a.sum(), x, (x, x))
    with pytest.raises(RuntimeError, match=r"vjp: v can be None only .*'cube'.*shapes \(3,\)"):
        AF.vjp(cube, x)
    for name in ("jvp", "hvp", "vhp"):
        with pytest.raises(RuntimeError, match=rf"{name}: v can be None only .*single input"):
            getattr(AF, name)(lambda a: a.sum(), x)
    with pytest.raises(TypeError, match=r"v must be a Tensor or a tuple of Tensors"):
        AF.vjp(cube, x, [1.0, 2.0, 3.0])


def test_non_tensor_outputs_and_bad_arguments():
    x = _tp([1.0, 2.0])

    def bad(x):
        return x.sum(), 3.0

    for call in (lambda: AF.vjp(bad, x, (x, x)), lambda: AF.jvp(bad, x, x), lambda: AF.jacobian(bad, x)):
        with pytest.raises(TypeError, match=r"outputs of the user-provided function 'bad'.* index 1 has type float"):
            call()
    with pytest.raises(TypeError, match="inputs must be a Tensor or a tuple of Tensors"):
        AF.jacobian(lambda x: x, [x, 2.0])
    with pytest.raises(RuntimeError, match="hessian.*single element, got shape \\(2,\\)"):
        AF.hessian(lambda x: x * 2, x)
    with pytest.raises(RuntimeError, match="vhp.*should return a single Tensor"):
        AF.vhp(lambda x: (x.sum(), x.sum()), x, x)
    with pytest.raises(RuntimeError, match="floating point"):
        AF.jacobian(lambda x: x * 2, tp.tensor([1, 2]))
    with pytest.raises(NotImplementedError, match="vectorize=True"):
        AF.jacobian(lambda x: x * 2, x, strategy="forward-mode")
    with pytest.raises(NotImplementedError, match="create_graph"):
        AF.jacobian(lambda x: x * 2, x, strategy="forward-mode", vectorize=True, create_graph=True)
    with pytest.raises(RuntimeError, match="strict=True and vectorize=True"):
        AF.jacobian(lambda x: x * 2, x, strict=True, vectorize=True)
    with pytest.raises(ValueError, match="strategy"):
        AF.jacobian(lambda x: x * 2, x, strategy="sideways")


# ---------------------------------------------------------------------------
# Vectorized Jacobians: through vmap where possible, the loop otherwise
def test_vectorize_uses_vmap_and_no_per_row_loop(monkeypatch):
    def no_loop(*a, **k):
        raise AssertionError("the per-row loop ran")

    monkeypatch.setattr(AF, "_jacobian_rows", no_loop)
    W = _tp(_W)
    x = _tp([0.1, 0.2, 0.3])
    J = AF.jacobian(lambda x: (W @ x).tanh(), x, vectorize=True)
    d = 1 - np.tanh(_W @ _np(x)) ** 2
    _close(_np(J), d[:, None] * _W, 1e-12)


def test_vectorized_hessian_batches_the_gradient(monkeypatch):
    # the outer Jacobian vmaps tp.func.grad by vmap's own rule: no per-row loop, no per-example fallback
    monkeypatch.setattr(AF, "_jacobian_rows", lambda *a: (_ for _ in ()).throw(AssertionError("loop ran")))
    tp.func.vmap_fallback_counts.clear()
    arrays = _arrays([(2,), (3,)], seed=13)
    H = AF.hessian(_scalar_tuple(tp), tuple(tp.tensor(a) for a in arrays), vectorize=True)
    for gi, wi in zip(_blocks(H, True, True), _fd_hessian(_scalar_tuple, arrays)):
        for g, w in zip(gi, wi):
            _close(g, w, 1e-5)
    assert not tp.func.vmap_fallback_counts
    x = _tp([0.3, -0.8, 1.5], True)
    H = AF.hessian(lambda a: (a ** 3).sum() * a[0], x, vectorize=True, create_graph=True)
    (d,) = tp.autograd.grad((H * tp.eye(3, dtype=F64)).sum(), [x])  # diag: 12 x0^2, 6 x_i x0
    _close(_np(d), [24 * 0.3 + 6 * (-0.8 + 1.5), 6 * 0.3, 6 * 0.3], 1e-12)


def test_vmap_over_functional_calls_matches_a_loop():
    xs = tp.tensor(np.random.default_rng(14).standard_normal((4, 3)))
    v = _tp([1.0, -2.0, 0.5])
    calls = [lambda x: AF.jacobian(lambda y: y.sin() * y, x),
             lambda x: AF.vjp(lambda y: y.sin() * y, x, v)[1],
             lambda x: AF.jvp(lambda y: y.sin() * y, x, v)[1],
             lambda x: AF.hvp(lambda y: (y.sin() * y).sum(), x, v)[1],
             lambda x: AF.hessian(lambda y: (y.sin() * y).sum(), x)]
    for fn in calls:
        got = tp.vmap(fn)(xs)
        want = np.stack([_np(fn(xs[i])) for i in range(4)])
        _close(_np(got), want, 1e-12)


def test_vectorize_falls_back_for_data_dependent_functions(monkeypatch):
    calls = []
    real = AF._jacobian_rows
    monkeypatch.setattr(AF, "_jacobian_rows", lambda *a: calls.append(1) or real(*a))

    def gated(x):
        return x * 2 if float(x.sum()) > 0 else x * 3

    J = AF.jacobian(gated, _tp([1.0, 2.0]), vectorize=True)
    _close(_np(J), 2 * np.eye(2), 0)
    J = AF.jacobian(gated, _tp([-1.0, -2.0]), vectorize=True)
    _close(_np(J), 3 * np.eye(2), 0)
    assert len(calls) == 2


# ---------------------------------------------------------------------------
# A small MLP: the Hessian of its loss w.r.t. its weights
def _mlp_loss(L, X, Y):
    def loss(W1, b1, W2):
        h = (X @ W1 + b1).tanh()
        return ((h @ W2 - Y) ** 2).mean()
    return loss


def test_mlp_loss_hessian_wrt_weights():
    rng = np.random.default_rng(21)
    X, Y = rng.standard_normal((5, 3)), rng.standard_normal((5, 1))
    params = [rng.standard_normal((3, 2)) * 0.7, rng.standard_normal((2,)) * 0.3, rng.standard_normal((2, 1))]
    make = lambda L: _mlp_loss(L, L.tensor(X), L.tensor(Y))  # noqa: E731
    H = AF.hessian(make(tp), tuple(tp.tensor(p) for p in params))
    got = _blocks(H, True, True)
    want = _fd_hessian(make, params)
    n = sum(p.size for p in params)
    full = np.block([[g.reshape(pi.size, pj.size) for g, pj in zip(gi, params)] for gi, pi in zip(got, params)])
    assert full.shape == (n, n)
    np.testing.assert_allclose(full, full.T, atol=1e-12)  # symmetric
    for gi, wi in zip(got, want):
        for g, w in zip(gi, wi):
            _close(g, w, 1e-5)
    assert np.abs(full).max() > 1e-3  # not trivially zero
    # the vectorized Hessian and tp.func.hessian agree
    Hv = _blocks(AF.hessian(make(tp), tuple(tp.tensor(p) for p in params), vectorize=True), True, True)
    ref = tp.func.hessian(make(tp), argnums=(0, 1, 2))(*[tp.tensor(p) for p in params])
    for gi, vi, ri in zip(got, Hv, ref):
        for g, v, r in zip(gi, vi, ri):
            _close(g, v, 1e-12)
            _close(g, _np(r), 1e-12)
    if torch is not None:
        th = TF.hessian(make(torch), tuple(torch.tensor(p) for p in params))
        for gi, ri in zip(got, th):
            for g, r in zip(gi, ri):
                _close(g, r.detach().numpy(), 1e-12)


# ---------------------------------------------------------------------------
def test_exported_as_tp_autograd_functional():
    assert tp.autograd.functional is AF
    for name in ("vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"):
        assert callable(getattr(tp.autograd.functional, name))


def test_checks_can_fail():
    # the finite-difference helpers detect a wrong Jacobian / Hessian (guards against vacuous comparisons)
    arrays = _arrays([(3,)])
    J = AF.jacobian(_single_single(tp), tp.tensor(arrays[0]))
    with pytest.raises(AssertionError):
        _close(_np(J) * 1.001, _fd_jacobian(_single_single, arrays)[0][0])
    H = AF.hessian(_scalar_single(tp), tp.tensor(arrays[0]))
    with pytest.raises(AssertionError):
        _close(_np(H).T + np.eye(3) * 1e-3, _fd_hessian(_scalar_single, arrays)[0][0], 1e-5)
