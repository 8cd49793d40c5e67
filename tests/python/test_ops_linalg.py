"""Matrix products (matmul, mm, bmm, addmm, baddbmm, linear, dot, outer) and
einsum against NumPy (and PyTorch when installed): batching, broadcasting,
1-D operands, non-contiguous operands, zero-size, int64, gradients vs finite
differences in float64, error messages."""

import numpy as np
import pytest

import tensorplay as tp
from fd_check import check_gradients


def rnd(shape, seed=0, dtype=np.float64):
    a = np.random.default_rng(seed).standard_normal(shape)
    if np.issubdtype(dtype, np.integer):
        return np.round(a * 5).astype(dtype)
    return a.astype(dtype)


def arr(t):
    return np.array(t.contiguous().numpy())


def gradcheck(fn, *arrays, eps=1e-6, rtol=1e-5, atol=1e-7):
    return check_gradients(fn, *arrays, eps=eps, rtol=rtol, atol=atol)


TOL = {np.float32: dict(rtol=1e-5, atol=1e-5), np.float64: dict(rtol=1e-12, atol=1e-12), np.int64: dict(rtol=0, atol=0)}

SHAPES = [
    ((3,), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3,)),
    ((2, 3), (3, 4)),
    ((5, 2, 3), (3, 4)),
    ((2, 3), (5, 3, 4)),
    ((5, 2, 3), (3,)),
    ((3,), (5, 3, 4)),
    ((2, 1, 2, 3), (4, 3, 5)),
    ((4, 2, 3), (4, 3, 2)),
]


# ---------------------------------------------------------------- matmul


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_matmul_shapes_dtypes(sa, sb, dtype):
    a, b = rnd(sa, 1, dtype), rnd(sb, 2, dtype)
    got = tp.matmul(tp.tensor(a), tp.tensor(b))
    want = np.matmul(a, b)
    assert tuple(got.shape) == want.shape
    assert got.dtype == tp.tensor(a).dtype
    np.testing.assert_allclose(arr(got), want, **TOL[dtype])
    np.testing.assert_allclose(arr(tp.tensor(a) @ tp.tensor(b)), want, **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_matmul_non_contiguous(dtype):
    a, b = rnd((4, 6), 1, dtype), rnd((5, 4), 2, dtype)
    ta, tb = tp.tensor(a), tp.tensor(b)
    # transposed operands (BLAS Trans flags), a sliced operand, an expanded batch
    np.testing.assert_allclose(arr(tp.matmul(ta.t(), tb.t())), a.T @ b.T, **TOL[dtype])
    c3 = rnd((3, 8), 5, dtype)  # both operands with a step in their last dim (copied once)
    np.testing.assert_allclose(arr(tp.matmul(ta[:, ::2], tp.tensor(c3)[:, ::2])), a[:, ::2] @ c3[:, ::2], **TOL[dtype])
    np.testing.assert_allclose(arr(tp.matmul(ta[::2, 1:5], tb[1:5, :4])), a[::2, 1:5] @ b[1:5, :4], **TOL[dtype])
    c = rnd((1, 3, 6), 3, dtype)
    tc = tp.tensor(c).expand(4, 3, 6)
    np.testing.assert_allclose(arr(tp.matmul(tc, ta.t())), np.broadcast_to(c, (4, 3, 6)) @ a.T, **TOL[dtype])
    x = rnd((2, 6, 3, 4), 4, dtype)  # a batch with a permuted layout
    tx = tp.tensor(x).permute(0, 2, 1, 3)
    np.testing.assert_allclose(arr(tp.matmul(tx, tb.t())), x.transpose(0, 2, 1, 3) @ b.T, **TOL[dtype])


def test_matmul_large_batch_and_linear_layer_shapes():
    a, b = rnd((6, 40, 70), 1), rnd((70, 30), 2)
    np.testing.assert_allclose(arr(tp.matmul(tp.tensor(a), tp.tensor(b))), a @ b, rtol=1e-12, atol=1e-10)
    a, b = rnd((6, 70, 80), 3, np.float32), rnd((6, 80, 90), 4, np.float32)
    np.testing.assert_allclose(arr(tp.matmul(tp.tensor(a), tp.tensor(b))), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("sa,sb", [((0, 3), (3, 4)), ((2, 0), (0, 4)), ((2, 3), (3, 0)), ((0, 2, 3), (3, 4)), ((0,), (0,))])
def test_matmul_zero_size(sa, sb):
    for dtype in (np.float32, np.int64):
        a, b = np.ones(sa, dtype), np.ones(sb, dtype)
        got = tp.matmul(tp.tensor(a), tp.tensor(b))
        want = np.matmul(a, b)
        assert tuple(got.shape) == want.shape
        np.testing.assert_array_equal(arr(got), want)


def test_matmul_special_values():
    a = np.array([[np.inf, 1.0], [np.nan, 0.0], [-0.0, -0.0]])
    b = np.array([[1.0], [2.0]])
    np.testing.assert_array_equal(arr(tp.matmul(tp.tensor(a), tp.tensor(b))), a @ b)


def test_matmul_errors():
    with pytest.raises(ValueError, match=r"matmul.*\[2, 3\].*\[4, 5\]"):
        tp.matmul(tp.ones(2, 3), tp.ones(4, 5))
    with pytest.raises(TypeError, match="matmul.*float32.*float64"):
        tp.matmul(tp.ones(2, 3), tp.ones(3, 2, dtype=tp.float64))
    with pytest.raises(ValueError, match="matmul.*0D"):
        tp.matmul(tp.ones([]), tp.ones(3))
    with pytest.raises(ValueError, match=r"matmul.*broadcast|matmul.*\[2\].*\[3\]"):
        tp.matmul(tp.ones(2, 2, 3), tp.ones(3, 3, 4))
    with pytest.raises(TypeError, match="matmul.*bool"):
        tp.matmul(tp.ones(2, 2, dtype=tp.bool), tp.ones(2, 2, dtype=tp.bool))


@pytest.mark.parametrize("sa,sb", SHAPES[:8])
def test_matmul_grad(sa, sb):
    gradcheck(tp.matmul, rnd(sa, 1), rnd(sb, 2))


def test_matmul_grad_broadcast_batch():
    gradcheck(tp.matmul, rnd((2, 1, 2, 3), 1), rnd((3, 3, 2), 2))


# ---------------------------------------------------------------- mm / bmm / addmm / baddbmm


def test_mm_bmm():
    a, b = rnd((3, 4), 1), rnd((4, 5), 2)
    np.testing.assert_allclose(arr(tp.mm(tp.tensor(a), tp.tensor(b))), a @ b, rtol=1e-12)
    np.testing.assert_allclose(arr(tp.tensor(a).mm(tp.tensor(b))), a @ b, rtol=1e-12)
    x, y = rnd((2, 3, 4), 3), rnd((2, 4, 5), 4)
    np.testing.assert_allclose(arr(tp.bmm(tp.tensor(x), tp.tensor(y))), x @ y, rtol=1e-12)
    with pytest.raises(ValueError, match=r"mm.*2-D.*\[3\]"):
        tp.mm(tp.ones(3), tp.ones(3, 2))
    with pytest.raises(ValueError, match=r"bmm.*batch.*\[2, 3, 4\].*\[3, 4, 5\]"):
        tp.bmm(tp.ones(2, 3, 4), tp.ones(3, 4, 5))
    with pytest.raises(ValueError, match=r"bmm.*3-D"):
        tp.bmm(tp.ones(3, 4), tp.ones(4, 5))
    gradcheck(tp.mm, rnd((2, 3), 1), rnd((3, 2), 2))
    gradcheck(tp.bmm, rnd((2, 2, 3), 1), rnd((2, 3, 2), 2))


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1), (2, 0)])
def test_addmm(beta, alpha):
    s, a, b = rnd((3, 5), 0), rnd((3, 4), 1), rnd((4, 5), 2)
    want = beta * s + alpha * (a @ b)
    np.testing.assert_allclose(arr(tp.addmm(tp.tensor(s), tp.tensor(a), tp.tensor(b), beta=beta, alpha=alpha)), want,
                               rtol=1e-12, atol=1e-12)
    # self broadcasts (a bias row)
    r = rnd((5,), 3)
    np.testing.assert_allclose(arr(tp.addmm(tp.tensor(r), tp.tensor(a), tp.tensor(b), beta=beta, alpha=alpha)),
                               beta * r + alpha * (a @ b), rtol=1e-12, atol=1e-12)
    gradcheck(lambda s, a, b: tp.addmm(s, a, b, beta=beta, alpha=alpha), r, a, b)


def test_addmm_beta_zero_ignores_nan_and_int():
    s = np.full((2, 2), np.nan)
    a, b = rnd((2, 3), 1), rnd((3, 2), 2)
    np.testing.assert_allclose(arr(tp.addmm(tp.tensor(s), tp.tensor(a), tp.tensor(b), beta=0)), a @ b, rtol=1e-12)
    si, ai, bi = rnd((2, 2), 1, np.int64), rnd((2, 3), 2, np.int64), rnd((3, 2), 3, np.int64)
    np.testing.assert_array_equal(arr(tp.addmm(tp.tensor(si), tp.tensor(ai), tp.tensor(bi), beta=2, alpha=3)),
                                  2 * si + 3 * (ai @ bi))
    with pytest.raises(ValueError, match=r"addmm.*\[4\].*broadcast"):
        tp.addmm(tp.ones(4), tp.ones(2, 3), tp.ones(3, 2))


def test_baddbmm():
    s, a, b = rnd((1, 3, 5), 0), rnd((2, 3, 4), 1), rnd((2, 4, 5), 2)
    np.testing.assert_allclose(arr(tp.baddbmm(tp.tensor(s), tp.tensor(a), tp.tensor(b), beta=0.5, alpha=-1.5)),
                               0.5 * s + -1.5 * (a @ b), rtol=1e-12, atol=1e-12)
    gradcheck(lambda s, a, b: tp.baddbmm(s, a, b, beta=0.5, alpha=2), s, a, b)


# ---------------------------------------------------------------- linear / dot / outer


@pytest.mark.parametrize("xshape", [(4,), (3, 4), (2, 3, 4), (2, 1, 3, 4)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear(xshape, bias):
    x, w, b = rnd(xshape, 1), rnd((5, 4), 2), rnd((5,), 3)
    want = x @ w.T + (b if bias else 0)
    got = tp.linear(tp.tensor(x), tp.tensor(w), tp.tensor(b) if bias else None)
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(arr(got), want, rtol=1e-12, atol=1e-12)
    if bias:
        gradcheck(lambda x, w, b: tp.linear(x, w, b), x, w, b)
    else:
        gradcheck(lambda x, w: tp.linear(x, w), x, w)


def test_linear_non_contiguous_input_and_errors():
    x, w, b = rnd((4, 3), 1), rnd((5, 4), 2), rnd((5,), 3)
    np.testing.assert_allclose(arr(tp.linear(tp.tensor(x).t(), tp.tensor(w), tp.tensor(b))), x.T @ w.T + b,
                               rtol=1e-12)
    with pytest.raises(ValueError, match=r"linear.*\[2, 3\].*\[5, 4\]"):
        tp.linear(tp.ones(2, 3), tp.ones(5, 4))


def test_dot_outer():
    a, b = rnd((5,), 1), rnd((5,), 2)
    np.testing.assert_allclose(arr(tp.dot(tp.tensor(a), tp.tensor(b))), np.dot(a, b), rtol=1e-12)
    np.testing.assert_allclose(arr(tp.outer(tp.tensor(a), tp.tensor(b[:3]))), np.outer(a, b[:3]), rtol=1e-12)
    ai = np.arange(4)
    np.testing.assert_array_equal(arr(tp.dot(tp.tensor(ai), tp.tensor(ai))), 14)
    np.testing.assert_array_equal(arr(tp.outer(tp.tensor(ai), tp.tensor(ai))), np.outer(ai, ai))
    with pytest.raises(ValueError, match="dot.*1D"):
        tp.dot(tp.ones(2, 2), tp.ones(2))
    with pytest.raises(ValueError, match="dot.*inconsistent"):
        tp.dot(tp.ones(2), tp.ones(3))
    gradcheck(tp.dot, a, b)
    gradcheck(tp.outer, a, b[:3])


# ---------------------------------------------------------------- einsum

EINSUM = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("ii->i", [(4, 4)]),
    ("bii->b", [(2, 3, 3)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ij->j", [(3, 4)]),
    ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,j", [(3,), (4,)]),
    ("ba,ca", [(3, 4), (5, 4)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,jk", [(2, 2, 3, 4), (4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ijk->", [(2, 3, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("ijk,ikl->jl", [(2, 3, 4), (2, 4, 5)]),
    ("i j, j k -> i k", [(2, 3), (3, 2)]),
    ("ij,kj->", [(0, 3), (2, 3)]),
    ("ab,b->a", [(3, 1), (4,)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM)
def test_einsum(eq, shapes):
    xs = [rnd(s, i) for i, s in enumerate(shapes)]
    np_eq = eq.replace(" ", "")
    if np_eq == "ab,b->a":  # size-1 dims broadcast (NumPy's einsum does not)
        want = np.einsum("ab,b->a", np.broadcast_to(xs[0], (3, 4)), xs[1])
    else:
        want = np.einsum(np_eq, *xs)
    got = tp.einsum(eq, *[tp.tensor(x) for x in xs])
    assert tuple(got.shape) == np.shape(want)
    np.testing.assert_allclose(arr(got), want, rtol=1e-12, atol=1e-12)
    # the list form
    np.testing.assert_allclose(arr(tp.einsum(eq, [tp.tensor(x) for x in xs])), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("eq,shapes", [EINSUM[i] for i in (0, 2, 3, 5, 12, 14, 18, 21)])
def test_einsum_grad(eq, shapes):
    xs = [rnd(s, i) for i, s in enumerate(shapes)]
    gradcheck(lambda *ts: tp.einsum(eq, *ts), *xs)


def test_einsum_non_contiguous_and_int():
    a = rnd((4, 3), 1)
    np.testing.assert_allclose(arr(tp.einsum("ij,jk->ik", tp.tensor(a).t(), tp.tensor(a))), a.T @ a, rtol=1e-12)
    ai = rnd((3, 3), 2, np.int64)
    np.testing.assert_array_equal(arr(tp.einsum("ij,jk->ik", tp.tensor(ai), tp.tensor(ai))), ai @ ai)
    np.testing.assert_array_equal(arr(tp.einsum("ii", tp.tensor(ai))), np.trace(ai))


def test_einsum_errors():
    with pytest.raises(ValueError, match="einsum.*2 operand terms but 1"):
        tp.einsum("ij,jk", tp.ones(2, 2))
    with pytest.raises(ValueError, match=r"einsum.*'ij'.*\[2\]"):
        tp.einsum("ij", tp.ones(2))
    with pytest.raises(ValueError, match="einsum.*'k'.*does not appear"):
        tp.einsum("ij->k", tp.ones(2, 2))
    with pytest.raises(ValueError, match="einsum.*broadcast.*'j'"):
        tp.einsum("ij,jk", tp.ones(2, 3), tp.ones(4, 2))
    with pytest.raises(ValueError, match="einsum.*repeated.*different sizes"):
        tp.einsum("ii", tp.ones(2, 3))
    with pytest.raises(TypeError, match="einsum.*same dtype"):
        tp.einsum("i,i", tp.ones(2), tp.ones(2, dtype=tp.float64))


# ---------------------------------------------------------------- PyTorch as a second oracle


def test_against_torch():
    torch = pytest.importorskip("torch")
    a, b = rnd((2, 3, 4), 1), rnd((4, 5), 2)
    np.testing.assert_allclose(arr(tp.matmul(tp.tensor(a), tp.tensor(b))),
                               torch.matmul(torch.tensor(a), torch.tensor(b)).numpy(), rtol=1e-12)
    s = rnd((2, 3, 5), 3)
    np.testing.assert_allclose(
        arr(tp.baddbmm(tp.tensor(s), tp.tensor(a), tp.tensor(np.stack([b, b])), beta=0.3, alpha=0.7)),
        torch.baddbmm(torch.tensor(s), torch.tensor(a), torch.tensor(np.stack([b, b])), beta=0.3, alpha=0.7).numpy(),
        rtol=1e-12)
    for eq, shapes in EINSUM[:22]:
        xs = [rnd(sh, i) for i, sh in enumerate(shapes)]
        np.testing.assert_allclose(arr(tp.einsum(eq, *[tp.tensor(x) for x in xs])),
                                   torch.einsum(eq, *[torch.tensor(x) for x in xs]).numpy(), rtol=1e-10, atol=1e-12)
