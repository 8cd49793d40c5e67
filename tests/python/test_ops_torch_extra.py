"""Operators added for PyTorch users (ops/counting_ops.cpp, ops/extra_composite_ops.cpp):
bincount, histc, histogram, mode, cummax/cummin, multinomial, tril/triu_indices,
nansum/nanmean/nanmedian, aminmax, logaddexp2, renorm, trapezoid, cumulative_trapezoid, trapz,
isin, unravel_index, block_diag, combinations, bernoulli(self, p); and eager 16-bit floor/trunc
division. Values against PyTorch (CPU), gradients against finite differences, compiled against
eager, errors name the operator, multinomial by its statistics."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the oracle; these tests skip without it

import tensorplay as tp  # noqa: E402
from fd_check import check_gradients  # noqa: E402

NAN, INF = float("nan"), float("inf")
TP_DT = {"float32": tp.float32, "float64": tp.float64, "int64": tp.int64, "int32": tp.int32, "int16": tp.int16,
         "uint8": tp.uint8, "bool": tp.bool, "float16": tp.float16, "bfloat16": tp.bfloat16}


def t_of(a, dtype=None):
    """A TensorPlay and a PyTorch tensor of the same values."""
    a = np.asarray(a)
    x, y = tp.tensor(a), torch.tensor(a)
    if dtype is not None:
        x, y = x.to(TP_DT[dtype]), y.to(getattr(torch, dtype))
    return x, y


def same(got, want, exact=True, **tol):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w, exact, **tol)
        return
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
    g = got.float().numpy() if got.dtype in (tp.float16, tp.bfloat16) else got.numpy()
    w = want.float().numpy() if want.dtype in (torch.float16, torch.bfloat16) else want.numpy()
    if exact:
        np.testing.assert_array_equal(g, w)
    else:
        np.testing.assert_allclose(g, w, equal_nan=True, **tol)


rng = np.random.default_rng(7)


# ---- bincount ----
@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "int16"])
def test_bincount_counts(dtype):
    a = rng.integers(0, 9, size=50)
    x, y = t_of(a, dtype)
    same(tp.bincount(x), torch.bincount(y))
    same(tp.bincount(x, minlength=20), torch.bincount(y, minlength=20))
    same(x.bincount(), y.bincount())


@pytest.mark.parametrize("wdtype", ["float32", "float64", "float16", "int64"])
def test_bincount_weights_dtype(wdtype):
    a = rng.integers(0, 5, size=30)
    w = rng.standard_normal(30).astype(np.float32)
    x, y = t_of(a)
    wx, wy = t_of(w, wdtype) if wdtype != "int64" else t_of(np.arange(30), "int64")
    same(tp.bincount(x, weights=wx, minlength=3), torch.bincount(y, weights=wy, minlength=3), exact=False,
         rtol=1e-6, atol=1e-6)


def test_bincount_weights_gradient():
    # PyTorch has no derivative here; each weight's is the gradient of its value's bin.
    idx = tp.tensor([0, 3, 3, 1, 5])
    check_gradients(lambda w: tp.bincount(idx, weights=w, minlength=7), rng.standard_normal(5))


def test_bincount_empty_and_errors():
    same(tp.bincount(tp.tensor([], dtype=tp.int64), minlength=3), torch.bincount(torch.tensor([], dtype=torch.int64),
                                                                                  minlength=3))
    same(tp.bincount(tp.tensor([], dtype=tp.int64)), torch.bincount(torch.tensor([], dtype=torch.int64)))
    with pytest.raises(ValueError, match="bincount.*non-negative"):
        tp.bincount(tp.tensor([1, -1]))
    with pytest.raises(ValueError, match=r"bincount.*1-D.*\[2, 2\]"):
        tp.bincount(tp.tensor([[1, 2], [3, 4]]))
    with pytest.raises(ValueError, match="bincount.*float32"):
        tp.bincount(tp.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="bincount.*weights.*same shape"):
        tp.bincount(tp.tensor([1, 2]), weights=tp.ones(3))
    with pytest.raises(ValueError, match="bincount.*minlength"):
        tp.bincount(tp.tensor([1, 2]), minlength=-1)


# ---- histc / histogram ----
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_histc(dtype):
    a = rng.standard_normal(500)
    x, y = t_of(a, dtype)
    same(tp.histc(x), torch.histc(y))
    same(tp.histc(x, bins=7, min=-1, max=1), torch.histc(y, bins=7, min=-1, max=1))
    # values exactly on edges, the right end, out of range and NaN
    e = np.array([0.0, 0.25, 0.5, 0.75, 1.0, 1.5, -0.1, NAN, 0.1, 0.3])
    x, y = t_of(e, dtype)
    same(tp.histc(x, bins=4, min=0, max=1), torch.histc(y, bins=4, min=0, max=1))
    # data range; all equal values widen by one on each side
    x, y = t_of([2.0, 2.0, 2.0], dtype)
    same(tp.histc(x, bins=3), torch.histc(y, bins=3))
    same(x.histc(5), y.histc(5))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_histc_16bit_bins_like_pytorch(dtype):
    """PyTorch bins 16-bit values in the 16-bit type (rounded range ends, rounding after every
    step, no settling against edges): values near edges land where its bins put them."""
    r = np.random.default_rng(5)
    for _ in range(40):
        lo, hi, bins = float(r.uniform(-10, 0)), float(r.uniform(0.1, 10)), int(r.integers(1, 100))
        x, y = t_of(r.uniform(lo, hi, size=300).astype(np.float32), dtype)
        same(tp.histc(x, bins, lo, hi), torch.histc(y, bins, lo, hi))
        same(tp.histc(x, bins), torch.histc(y, bins))


def test_histc_errors():
    with pytest.raises(TypeError, match="histc.*floating.*int64"):
        tp.histc(tp.tensor([1, 2]))
    with pytest.raises(ValueError, match="histc.*bins"):
        tp.histc(tp.tensor([1.0]), bins=0)
    with pytest.raises(ValueError, match="histc.*max must be larger than min"):
        tp.histc(tp.tensor([1.0]), bins=2, min=3, max=1)
    with pytest.raises(ValueError, match="histc.*not finite"):
        tp.histc(tp.tensor([1.0, INF]), bins=2)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_histogram(dtype):
    a = rng.standard_normal(300)
    x, y = t_of(a, dtype)
    same(tp.histogram(x), torch.histogram(y))
    same(tp.histogram(x, 9, range=(-2.0, 1.5)), torch.histogram(y, 9, range=(-2.0, 1.5)))
    w = np.abs(rng.standard_normal(300))
    wx, wy = t_of(w, dtype)
    # weights summed in the input's type (the order of a long sum may differ from PyTorch's)
    same(tp.histogram(x, 6, weight=wx, density=True), torch.histogram(y, 6, weight=wy, density=True), exact=False,
         rtol=2e-6)
    ex, ey = t_of([-1.0, -0.5, 0.0, 0.3, 2.0], dtype)
    same(tp.histogram(x, ex), torch.histogram(y, ey))
    same(tp.histogram(x, ex, weight=wx, density=True), torch.histogram(y, ey, weight=wy, density=True),
         exact=False, rtol=1e-5)
    same(x.histogram(4), y.histogram(4))


def test_histogram_errors():
    with pytest.raises(TypeError, match="histogram.*floating"):
        tp.histogram(tp.tensor([1, 2]))
    with pytest.raises(ValueError, match="histogram.*increasing"):
        tp.histogram(tp.tensor([1.0]), tp.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match="histogram.*weight"):
        tp.histogram(tp.tensor([1.0, 2.0]), 3, weight=tp.ones(3))


# ---- mode ----
@pytest.mark.parametrize("dtype", ["int64", "int32", "float32", "float64", "bool", "float16"])
@pytest.mark.parametrize("dim,keepdim", [(-1, False), (0, True), (1, False)])
def test_mode_vs_torch(dtype, dim, keepdim):
    a = rng.integers(0, 4, size=(5, 7, 3))
    x, y = t_of(a, dtype)
    same(tp.mode(x, dim, keepdim), tuple(torch.mode(y, dim, keepdim)))
    same(x.mode(dim=dim, keepdim=keepdim), tuple(y.mode(dim=dim, keepdim=keepdim)))


def test_mode_ties_smallest_value_last_index():
    x, y = t_of([[1, 2, 2, 3, 3], [4, 4, 1, 1, 0], [7, 7, 7, 7, 7]])
    same(tp.mode(x, 1), tuple(torch.mode(y, 1)))
    same(tp.mode(tp.tensor(3.0)), tuple(torch.mode(torch.tensor(3.0))))


def test_mode_grad_and_errors():
    # the mode is piecewise constant in its inputs' ties: compare the gradient with PyTorch's
    a = np.array([[1.0, 2.0, 2.0, 0.5], [3.0, 3.0, 1.0, 1.0]])
    x, y = tp.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    w = rng.standard_normal(2)
    (tp.mode(x, 1)[0] * tp.tensor(w)).sum().backward()
    (torch.mode(y, 1)[0] * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.grad.numpy())
    with pytest.raises(IndexError, match="mode.*dimension"):
        tp.mode(tp.ones(2, 3), 2)
    with pytest.raises(IndexError, match=r"mode.*size 0.*\[2, 0\]"):
        tp.mode(tp.ones(2, 0), 1)


# ---- multinomial ----
def test_multinomial_with_replacement_statistics():
    p = np.array([0.1, 0.0, 0.6, 0.3])
    tp.manual_seed(3)
    s = tp.multinomial(tp.tensor(p), 40000, replacement=True).numpy()
    assert s.dtype == np.int64 and s.shape == (40000,)
    freq = np.bincount(s, minlength=4) / s.size
    assert freq[1] == 0
    # 5 sigma of a binomial proportion
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / s.size) + 1e-12), freq


def test_multinomial_without_replacement_statistics():
    w = np.array([1.0, 2.0, 0.0, 5.0])  # unnormalized weights
    tp.manual_seed(5)
    rows = 20000
    s = tp.multinomial(tp.tensor(np.tile(w, (rows, 1))), 2).numpy()
    assert s.shape == (rows, 2)
    assert np.all(s[:, 0] != s[:, 1]) and not np.any(s == 2)
    p = w / w.sum()
    freq = np.bincount(s[:, 0], minlength=4) / rows  # the first draw follows p
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / rows) + 1e-12), freq
    # the second draw given the first is category 3: proportional to the rest (1, 2)
    second = s[s[:, 0] == 3, 1]
    q = np.mean(second == 1)
    n = second.size
    assert abs(q - 2 / 3) <= 5 * np.sqrt(2 / 9 / n)
    # all categories drawn without replacement: a permutation of the positive ones
    full = tp.multinomial(tp.tensor([0.2, 0.3, 0.5]), 3).numpy()
    assert sorted(full) == [0, 1, 2]


def test_multinomial_generator_and_seed_reproducible():
    g1, g2 = tp.Generator().manual_seed(11), tp.Generator().manual_seed(11)
    p = tp.tensor([[0.2, 0.3, 0.5], [0.5, 0.5, 0.0]])
    a = tp.multinomial(p, 6, True, generator=g1).numpy()
    b = tp.multinomial(p, 6, True, generator=g2).numpy()
    np.testing.assert_array_equal(a, b)
    c = tp.multinomial(p, 6, True, generator=g1).numpy()
    assert not np.array_equal(a, c)  # the generator advanced
    assert np.all(a[1] != 2)


def test_multinomial_errors():
    with pytest.raises(ValueError, match="multinomial.*without replacement"):
        tp.multinomial(tp.tensor([0.5, 0.5]), 3)
    with pytest.raises(ValueError, match="multinomial.*not enough"):
        tp.multinomial(tp.tensor([0.5, 0.0, 0.5]), 3)
    with pytest.raises(ValueError, match="multinomial.*element < 0"):
        tp.multinomial(tp.tensor([0.5, -0.1]), 1)
    with pytest.raises(ValueError, match="multinomial.*nan"):
        tp.multinomial(tp.tensor([0.5, NAN]), 1)
    with pytest.raises(ValueError, match="multinomial.*sum"):
        tp.multinomial(tp.tensor([0.0, 0.0]), 1, True)
    with pytest.raises(ValueError, match="multinomial.*1 or 2 dim"):
        tp.multinomial(tp.ones(2, 2, 2), 1)
    with pytest.raises(TypeError, match="multinomial.*floating"):
        tp.multinomial(tp.tensor([1, 2]), 1)


# ---- tril_indices / triu_indices ----
@pytest.mark.parametrize("r,c", [(3, 4), (4, 3), (0, 3), (5, 5), (1, 1)])
@pytest.mark.parametrize("off", [-6, -1, 0, 2, 7])
def test_tri_indices(r, c, off):
    same(tp.tril_indices(r, c, off), torch.tril_indices(r, c, off))
    same(tp.triu_indices(r, c, off), torch.triu_indices(r, c, off))
    same(tp.tril_indices(r, c, off, dtype=tp.int32), torch.tril_indices(r, c, off, dtype=torch.int32))


def test_tri_indices_errors():
    with pytest.raises(ValueError, match="tril_indices.*non-negative"):
        tp.tril_indices(-1, 3)


# ---- NaN-ignoring reductions ----
NANS = np.array([[1.0, NAN, 3.0, -2.0], [NAN, NAN, NAN, NAN], [0.5, 2.0, NAN, 4.0]])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_nansum_nanmean(dtype):
    x, y = t_of(NANS, dtype)
    tol = dict(rtol=1e-3) if dtype == "float16" else dict(rtol=1e-6)
    for kw in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}, {"dim": (0, 1)}):
        same(tp.nansum(x, **kw), torch.nansum(y, **kw), exact=False, **tol)
        same(tp.nanmean(x, **kw), torch.nanmean(y, **kw), exact=False, **tol)
    same(x.nansum(dtype=tp.float64), y.nansum(dtype=torch.float64), exact=False)


def test_nansum_ints_and_nanmean_error():
    x, y = t_of([[1, 2], [3, 4]], "int32")
    same(tp.nansum(x), torch.nansum(y))
    same(tp.nansum(x, 1), torch.nansum(y, 1))
    with pytest.raises(TypeError, match="nanmean.*int32"):
        tp.nanmean(x)


def test_nan_reductions_grad():
    a = np.array([[1.0, NAN, 3.0], [0.5, 2.0, NAN]])
    for i, (f, tf) in enumerate(((lambda t: tp.nansum(t, 1), lambda t: torch.nansum(t, 1)),
                                 (lambda t: tp.nanmean(t, 0), lambda t: torch.nanmean(t, 0)),
                                 (lambda t: tp.nanmedian(t, 1)[0], lambda t: torch.nanmedian(t, 1)[0]))):
        x = tp.tensor(a, requires_grad=True)
        f(x).sum().backward()
        ty = torch.tensor(a, requires_grad=True)
        tf(ty).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), ty.grad.numpy(), err_msg=str(i))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_nanmedian(dtype):
    a = np.array([[NAN, 1.0, 5.0, 2.0], [NAN, NAN, NAN, NAN], [3.0, 3.0, 1.0, NAN], [4.0, 2.0, 2.0, 9.0]])
    if dtype == "int64":
        a = np.nan_to_num(a, nan=7.0)
    x, y = t_of(a, dtype)
    same(tp.nanmedian(x), torch.nanmedian(y))
    for d in (0, 1, -1):
        got, want = tp.nanmedian(x, d), torch.nanmedian(y, d)
        same(got[0], want[0])
        # an all-NaN row's index is unspecified (PyTorch returns any of its positions)
        keep = ~torch.isnan(y).all(dim=d).numpy()
        np.testing.assert_array_equal(got[1].numpy()[keep], want[1].numpy()[keep])
        got_k = tp.nanmedian(x, d, keepdim=True)
        assert tuple(got_k[0].shape) == tuple(torch.nanmedian(y, d, keepdim=True)[0].shape)
    with pytest.raises(IndexError, match="nanmedian.*empty"):
        tp.nanmedian(tp.ones(0))


# ---- aminmax / logaddexp2 / renorm / trapezoid ----
@pytest.mark.parametrize("dtype", ["int64", "float32", "bool", "uint8"])
def test_aminmax(dtype):
    a = rng.integers(0, 9, size=(4, 5))
    x, y = t_of(a, dtype)
    same(tuple(tp.aminmax(x)), tuple(torch.aminmax(y)))
    same(tuple(tp.aminmax(x, dim=1, keepdim=True)), tuple(torch.aminmax(y, dim=1, keepdim=True)))
    same(tuple(x.aminmax(dim=0)), tuple(y.aminmax(dim=0)))
    with pytest.raises(Exception, match="aminmax"):
        tp.aminmax(tp.ones(0))


def test_aminmax_nan_and_grad():
    x, y = t_of([[1.0, NAN], [2.0, 3.0]])
    same(tuple(tp.aminmax(x, dim=1)), tuple(torch.aminmax(y, dim=1)))
    check_gradients(lambda t: tp.aminmax(t, dim=0)[1], np.array([[1.0, 4.0], [2.0, 3.0]]))


def test_logaddexp2():
    a = np.array([0.0, 1.0, -INF, INF, 100.0, -100.0, INF, NAN])
    b = np.array([0.0, 3.0, -INF, INF, -100.0, 2.0, -INF, 1.0])
    for dt in ("float32", "float64"):
        (x, y), (u, v) = t_of(a, dt), t_of(b, dt)
        same(tp.logaddexp2(x, u), torch.logaddexp2(y, v), exact=False, rtol=1e-6)
    # integers compute in the default float (PyTorch refuses them)
    same(tp.logaddexp2(tp.tensor([1, 2]), tp.tensor([3, 4])), torch.logaddexp2(torch.tensor([1.0, 2.0]),
                                                                             torch.tensor([3.0, 4.0])), exact=False)
    check_gradients(tp.logaddexp2, rng.standard_normal(5), rng.standard_normal(5))


def test_renorm():
    a = rng.standard_normal((4, 3, 2)) * 3
    for p, dim, maxnorm in ((2, 0, 1.5), (1, 1, 2.0), (3.5, -1, 0.5), (2, 0, 100.0)):
        x, y = t_of(a)
        same(tp.renorm(x, p, dim, maxnorm), torch.renorm(y, p, dim, maxnorm), exact=False, rtol=1e-12)
        x.renorm_(p, dim, maxnorm)
        y.renorm_(p, dim, maxnorm)
        same(x, y, exact=False, rtol=1e-12)
    check_gradients(lambda t: tp.renorm(t, 2, 0, 1.0), a)
    with pytest.raises(ValueError, match="renorm.*2 dimensions"):
        tp.renorm(tp.ones(3), 2, 0, 1.0)
    with pytest.raises(ValueError, match="renorm.*maxnorm"):
        tp.renorm(tp.ones(3, 2), 2, 0, -1.0)


def test_trapezoid():
    a = rng.standard_normal((3, 5))
    xs = np.sort(rng.standard_normal(5))
    y, ty = t_of(a)
    same(tp.trapezoid(y), torch.trapezoid(ty), exact=False, rtol=1e-12)
    same(tp.trapezoid(y, dx=0.5, dim=0), torch.trapezoid(ty, dx=0.5, dim=0), exact=False, rtol=1e-12)
    same(tp.trapezoid(y, tp.tensor(xs)), torch.trapezoid(ty, torch.tensor(xs)), exact=False, rtol=1e-12)
    x2 = rng.standard_normal((3, 5))
    same(tp.trapezoid(y, tp.tensor(x2)), torch.trapezoid(ty, torch.tensor(x2)), exact=False, rtol=1e-12)
    same(tp.trapezoid(tp.tensor([1, 2, 4])), torch.trapezoid(torch.tensor([1, 2, 4])), exact=False)
    same(tp.trapezoid(tp.ones(2, 0)), torch.trapezoid(torch.ones(2, 0)))
    check_gradients(lambda t, u: tp.trapezoid(t, u), a, xs)
    with pytest.raises(ValueError, match="trapezoid"):
        tp.trapezoid(y, tp.ones(4))


# ---- cummax / cummin ----
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "bool", "float16"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cummax_cummin(dtype, dim):
    a = rng.integers(0, 4, size=(6, 9)).astype(np.float64)
    if dtype.startswith("float"):
        a[1, 3] = NAN
        a[4, 0] = NAN
    x, y = t_of(a, dtype)
    same(tp.cummax(x, dim), tuple(torch.cummax(y, dim)))
    same(tp.cummin(x, dim), tuple(torch.cummin(y, dim)))
    same(x.cummax(dim), tuple(y.cummax(dim)))


def test_cummax_edge_shapes_and_grad():
    for shape in ((0,), (3, 0), (1,), ()):
        x, y = t_of(rng.standard_normal(shape))
        same(tp.cummax(x, 0 if shape else 0), tuple(torch.cummax(y, 0)))
    check_gradients(lambda t: tp.cummax(t, 1)[0], rng.standard_normal((3, 6)))
    check_gradients(lambda t: tp.cummin(t, 0)[0], rng.standard_normal((5, 2)))
    with pytest.raises(IndexError, match="cummax.*dimension"):
        tp.cummax(tp.ones(2, 3), 2)


# ---- isin ----
@pytest.mark.parametrize("edt,tdt", [("int64", "int64"), ("int32", "float32"), ("float64", "float64"),
                                     ("uint8", "int64")])
def test_isin(edt, tdt):
    e = rng.integers(0, 12, size=(4, 5))
    s = rng.integers(0, 12, size=7)
    (x, y), (u, v) = t_of(e, edt), t_of(s, tdt)
    for inv in (False, True):
        same(tp.isin(x, u, invert=inv), torch.isin(y, v, invert=inv))
        same(tp.isin(x, u, assume_unique=True, invert=inv), torch.isin(y, v, invert=inv))
    same(tp.isin(x, 3), torch.isin(y, 3))
    same(tp.isin(3, u), torch.isin(3, v))
    same(tp.isin(x, tp.tensor([], dtype=tp.int64)), torch.isin(y, torch.tensor([], dtype=torch.int64)))


def test_isin_nan_and_float_precision():
    x, y = t_of([NAN, 1.0, 0.1, 2.0])
    u, v = t_of([NAN, 0.1, 2.0])
    same(tp.isin(x, u), torch.isin(y, v))
    # large int64 values stay exact (no float round trip)
    big = np.array([2**53 + 1, 2**53], dtype=np.int64)
    same(tp.isin(tp.tensor(big), tp.tensor(big[1:])), torch.isin(torch.tensor(big), torch.tensor(big[1:])))


# ---- unravel_index / block_diag / combinations ----
def test_unravel_index():
    x, y = t_of([0, 5, 7, 23, -1])
    same(tp.unravel_index(x, (2, 3, 4)), torch.unravel_index(y, (2, 3, 4)))
    same(tp.unravel_index(tp.tensor(5), (6,)), torch.unravel_index(torch.tensor(5), (6,)))
    x, y = t_of([[1, 2], [3, 4]], "int32")
    same(tp.unravel_index(x, (5, 1)), torch.unravel_index(y, (5, 1)))
    with pytest.raises(IndexError, match="unravel_index.*range"):
        tp.unravel_index(tp.tensor([24]), (2, 3, 4))
    with pytest.raises(TypeError, match="unravel_index.*integer"):
        tp.unravel_index(tp.tensor([1.0]), (2, 3))


def test_block_diag():
    mats = [rng.standard_normal((2, 3)), np.array(5.0), np.array([1.0, 2.0]), np.zeros((0, 2)), np.ones((1, 0))]
    ts = [t_of(m) for m in mats]
    same(tp.block_diag(*[a for a, _ in ts]), torch.block_diag(*[b for _, b in ts]))
    same(tp.block_diag(tp.ones(2, 2, dtype=tp.int32), tp.tensor([[1.5]])),
         torch.block_diag(torch.ones(2, 2, dtype=torch.int32), torch.tensor([[1.5]])))
    same(tp.block_diag(), torch.block_diag())
    check_gradients(lambda a, b: tp.block_diag(a, b), rng.standard_normal((2, 2)), rng.standard_normal(3))
    with pytest.raises(ValueError, match=r"block_diag.*\[1, 2, 2\]"):
        tp.block_diag(tp.ones(1, 2, 2))


@pytest.mark.parametrize("r", [0, 1, 2, 3, 5])
@pytest.mark.parametrize("rep", [False, True])
def test_combinations(r, rep):
    x, y = t_of(np.array([3, 1, 4, 1]))
    same(tp.combinations(x, r, with_replacement=rep), torch.combinations(y, r, with_replacement=rep))
    x, y = t_of(np.array([], dtype=np.float32))
    same(tp.combinations(x, r, rep), torch.combinations(y, r, rep))


def test_combinations_grad_and_errors():
    check_gradients(lambda t: tp.combinations(t, 2), rng.standard_normal(4))
    with pytest.raises(ValueError, match="combinations.*1D"):
        tp.combinations(tp.ones(2, 2))


# ---- 16-bit floor / trunc division (eager CPU) ----
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_floor_trunc_division_rounds_like_pytorch(dtype):
    """PyTorch rounds to the 16-bit type after every step of a tensor-by-tensor floor/trunc
    division, and once when dividing by a 0-d tensor or a Python number; both must match bit
    for bit (a single rounding of the float32 quotient differed in ~1% of elements)."""
    r = np.random.default_rng(1)
    a = np.concatenate([r.standard_normal(20000) * 100, [0, -0.0, 1, -1, 5, INF, -INF, NAN, 3, 7]])
    b = np.concatenate([r.standard_normal(20000) * 3, [0, 0, 0, -0.0, INF, 2, 0, 1, -INF, -0.0]])
    (x, tx), (y, ty) = t_of(a.astype(np.float32), dtype), t_of(b.astype(np.float32), dtype)

    def check(got, want):
        g, w = got.float().numpy(), want.float().numpy()
        ok = ((g == w) & (np.signbit(g) == np.signbit(w))) | (np.isnan(g) & np.isnan(w))
        assert ok.all(), (int((~ok).sum()), g[~ok][:3], w[~ok][:3])

    for mode in ("floor", "trunc"):
        check(tp.div(x, y, rounding_mode=mode), torch.div(tx, ty, rounding_mode=mode))
        c, d = x.clone(), tx.clone()
        c.div_(y, rounding_mode=mode)
        d.div_(ty, rounding_mode=mode)
        check(c, d)
        for s in (3, 0.3, -2.5):
            check(tp.div(x, s, rounding_mode=mode), torch.div(tx, s, rounding_mode=mode))
    check(x // y, tx // ty)
    check(tp.floor_divide(x[:20000].reshape(100, -1)[:, :10], y[:10]),
          torch.floor_divide(tx[:20000].reshape(100, -1)[:, :10], ty[:10]))
    check(7.3 // y, 7.3 // ty)
    check(x // tp.tensor(0.3), tx // torch.tensor(0.3))
    check(x // tp.tensor(0.3).to(TP_DT[dtype]), tx // torch.tensor(0.3).to(getattr(torch, dtype)))
    c, d = x.clone(), tx.clone()
    c.floor_divide_(y)
    d.floor_divide_(ty)
    check(c, d)


# ---- layouts users hand in, and compiled functions ----
def test_non_contiguous_inputs():
    a = rng.standard_normal((7, 6))
    a[2, 1] = NAN
    x, y = t_of(a)
    xt, yt = x.t(), y.t()  # transposed views
    same(tp.nansum(xt, 1), torch.nansum(yt, 1), exact=False, rtol=1e-12)
    same(tp.cummax(xt, 1), tuple(torch.cummax(yt, 1)))
    same(tp.nanmedian(xt, 0), tuple(torch.nanmedian(yt, 0)))
    i, j = t_of(rng.integers(0, 6, size=(8, 5)))
    same(tp.mode(i.t(), 1), tuple(torch.mode(j.t(), 1)))
    same(tp.bincount(i[:, 2]), torch.bincount(j[:, 2]))
    same(tp.histc(x.nan_to_num()[:, ::2], 6), torch.histc(y.nan_to_num()[:, ::2], 6))
    same(tp.isin(i[::2], i[1, ::2]), torch.isin(j[::2], j[1, ::2]))


COMPILED = {
    "nansum": lambda x: (tp.nansum(x, 1) ** 2).sum(),
    "cummax": lambda x: (tp.cummax(x, 1)[0] * tp.arange(10.0)).sum(),
    "nanmedian": lambda x: tp.nanmedian(x, 1)[0].sum(),
    "logaddexp2": lambda x: tp.nansum(tp.logaddexp2(x, 2 * x)),
    "block_diag": lambda x: (tp.block_diag(tp.nan_to_num(x), tp.nan_to_num(x[0:1])) ** 2).sum(),
}


@pytest.mark.parametrize("name", sorted(COMPILED))
def test_compiled_matches_eager_with_gradients(name):
    f = COMPILED[name]
    a = rng.standard_normal((6, 10))
    a[2, 3] = NAN
    x1, x2 = tp.tensor(a, requires_grad=True), tp.tensor(a, requires_grad=True)
    tp.compiler.reset()
    l1 = f(x1)
    l1.backward()
    l2 = tp.compile(f)(x2)
    l2.backward()
    assert tp.compiler.metrics.fallback_count == 0
    np.testing.assert_allclose(l2.item(), l1.item(), rtol=1e-12)
    np.testing.assert_allclose(x2.grad.numpy(), x1.grad.numpy(), rtol=1e-12, atol=1e-12, equal_nan=True)


def test_compiled_counting_ops_match_eager():
    """bincount's result size depends on the data: a compiled function runs it eagerly (with a
    warning naming it); mode and histc are compiled around as extern calls. Same values either way."""
    i = tp.tensor(rng.integers(0, 5, size=(8, 16)))
    for f in (lambda t: tp.bincount(t.reshape(-1)) + 1, lambda t: tp.mode(t, 1)[0] + 1,
              lambda t: tp.histc(t.float(), 10) + 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the fallback notice for bincount
            got = tp.compile(f)(i)
        want = f(i)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_cumulative_trapezoid_and_trapz():
    a = rng.standard_normal((3, 5))
    xs = np.sort(rng.standard_normal(5))
    x2 = rng.standard_normal((3, 5))
    y, ty = t_of(a)
    same(tp.cumulative_trapezoid(y), torch.cumulative_trapezoid(ty), exact=False, rtol=1e-12)
    same(tp.cumulative_trapezoid(y, dx=0.3, dim=0), torch.cumulative_trapezoid(ty, dx=0.3, dim=0), exact=False,
         rtol=1e-12)
    same(tp.cumulative_trapezoid(y, tp.tensor(xs)), torch.cumulative_trapezoid(ty, torch.tensor(xs)), exact=False,
         rtol=1e-12)
    same(tp.cumulative_trapezoid(y, tp.tensor(x2)), torch.cumulative_trapezoid(ty, torch.tensor(x2)), exact=False,
         rtol=1e-12)
    same(tp.cumulative_trapezoid(tp.tensor([1, 2, 3])), torch.cumulative_trapezoid(torch.tensor([1, 2, 3])))
    same(tp.cumulative_trapezoid(tp.ones(2, 0)), torch.cumulative_trapezoid(torch.ones(2, 0)))
    same(tp.trapz(y, tp.tensor(xs)), torch.trapz(ty, torch.tensor(xs)), exact=False, rtol=1e-12)
    same(tp.trapz(y, dx=2.0), torch.trapz(ty, dx=2.0), exact=False, rtol=1e-12)
    check_gradients(lambda t, u: tp.cumulative_trapezoid(t, u), a, xs)


def test_bernoulli_with_p():
    tp.manual_seed(0)
    s = tp.bernoulli(tp.zeros(100000), 0.3)
    assert s.dtype == tp.float32 and set(np.unique(s.numpy())) <= {0.0, 1.0}
    assert abs(float(s.mean()) - 0.3) < 5 * np.sqrt(0.3 * 0.7 / 1e5)
    g1, g2 = tp.Generator().manual_seed(3), tp.Generator().manual_seed(3)
    np.testing.assert_array_equal(tp.bernoulli(tp.zeros(50), 0.5, generator=g1).numpy(),
                                  tp.bernoulli(tp.zeros(50), 0.5, generator=g2).numpy())
    assert tp.zeros(3, dtype=tp.float16).bernoulli(0.5).dtype == tp.float16
    with pytest.raises(ValueError, match="bernoulli.*p=1.5"):
        tp.bernoulli(tp.zeros(3), 1.5)
