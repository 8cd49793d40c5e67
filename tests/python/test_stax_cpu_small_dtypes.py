"""Narrow integers in generated CPU kernels: int32, int16, int8 and uint8
tensors (int32 indices from NumPy, quantized data) used to send the whole
region to eager ("dtype int32 is not supported by generated kernels yet").
CPU regions now take them as inputs, results and values inside a region:
registers of the type's own width (arithmetic on i64 operands, wrapped at the
assignment, as eager wraps), float -> integer through int64 as eager converts,
sums/prods accumulating in their int64 result, max/min identities at the
type's limits. Integer division stays the eager kernel (an extern call), so a
zero divisor raises as in eager instead of trapping. Every case runs under
strict_native (a fallback would raise) and equals eager bit for bit."""
import numpy as np
import pytest

import tensorplay as tp

INTS = [tp.int32, tp.int16, tp.int8, tp.uint8]
_LIMITS = {tp.int32: (-(2**31), 2**31 - 1), tp.int16: (-(2**15), 2**15 - 1), tp.int8: (-128, 127),
           tp.uint8: (0, 255), tp.int64: (-(2**63), 2**63 - 1)}


def _ints(shape, dtype, lo=None, hi=None, seed=0):
    tp.manual_seed(seed)
    dlo, dhi = _LIMITS[dtype]
    lo = dlo if lo is None else max(lo, dlo)
    hi = dhi if hi is None else min(hi, dhi)
    return tp.randint(lo, hi + 1, shape, dtype=tp.int64).to(dtype)


def _same(got, want):
    if not isinstance(want, (tuple, list)):
        got, want = (got,), (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert tuple(g.shape) == tuple(w.shape)
        gn, wn = g.numpy(), w.numpy()
        if np.issubdtype(wn.dtype, np.floating):
            np.testing.assert_allclose(gn, wn, rtol=1e-6, atol=1e-6)
        else:
            np.testing.assert_array_equal(gn, wn)


def _check(fn, *args, **kw):
    cf = tp.compile(fn, strict_native=True, **kw)
    _same(cf(*args), fn(*args))
    return cf


# name: (function, number of integer operands, extra float operands)
POINTWISE = {
    "add": lambda a, b: a + b,
    "sub_mul_number": lambda a, b: a * b - 7,
    "neg_abs": lambda a, b: (-a, a.abs()),
    "where": lambda a, b: tp.where(a > b, a, b * 2),
    "compare": lambda a, b: ((a < b) | (a == 3), a >= 5),
    "bitwise": lambda a, b: ((a & b) ^ (a | 5), ~a),
    "maximum_minimum": lambda a, b: (tp.maximum(a, b), tp.minimum(a, b)),
    "clamp": lambda a, b: a.clamp(3, 30),
    "to_float": lambda a, b: a.float() * 0.5 + b.double(),
    "to_int64": lambda a, b: a.long() * 3 + b,
    "true_div": lambda a, b: a / 7,
    "square": lambda a, b: a * a,
}


@pytest.mark.parametrize("dtype", INTS, ids=str)
@pytest.mark.parametrize("name", sorted(POINTWISE))
def test_pointwise_equals_eager_over_the_full_range(name, dtype):
    # Full-range operands: + and * overflow and wrap as eager's do.
    a, b = _ints((8, 37), dtype), _ints((8, 37), dtype, seed=1)
    cf = _check(POINTWISE[name], a, b)
    assert "is not supported" not in cf.last_source


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_wrap_around_at_the_type_limits(dtype):
    lo, hi = _LIMITS[dtype]
    a = tp.tensor([lo, lo + 1, -1 if lo < 0 else 1, 0, hi - 1, hi], dtype=tp.int64).to(dtype)
    _check(lambda a: (a + 1, a - 1, a * 2, -a, a.abs(), a * a), a)


def test_int8_overflow_and_negation_of_the_minimum():
    a = tp.tensor([100, -128, 127, -100], dtype=tp.int8)
    cf = _check(lambda a: (a * 3, -a, a.abs(), a + a), a)
    assert cf(a)[1].tolist() == [-100, -128, -127, 100]  # -(-128) stays -128, as eager
    assert cf(a)[0].tolist() == [44, 128 - 256, 125, -44]


def test_the_issue_example_casts_float_to_int32_in_a_generated_kernel():
    x = tp.randn(3, 4) * 100
    cf = _check(lambda x: x.int(), x)
    assert "(int)(i64)(" in cf.last_source


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_float_to_narrow_integer_converts_as_eager_including_specials(dtype):
    x = tp.tensor([0.0, -0.0, 0.7, -0.7, 1.5, -1.5, 127.9, -128.9, 300.5, -300.7, 3e9, -3e9, 1e20, -1e20,
                   float("inf"), float("-inf"), float("nan"), 1e-40])
    _check(lambda x: (x.to(dtype), (x * 2).to(dtype)), x)
    _check(lambda x: x.double().to(dtype), x)


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_mixed_dtype_promotion(dtype):
    a, x = _ints((6, 33), dtype, -50, 50), tp.randn(6, 33)
    i64 = _ints((6, 33), tp.int32, seed=3).long()
    _check(lambda a, x, i: (a * x, a + i, a + 1.5, a * 2, a == -1, (a > x).sum(-1)), a, x, i64)


def test_uint8_meets_int8_in_int16_and_compares_a_number_in_its_own_type():
    u, s = _ints((5, 40), tp.uint8), _ints((5, 40), tp.int8, seed=2)
    cf = _check(lambda u, s: (u + s, u * s, u == -1, u + 1), u, s)
    assert cf(u, s)[0].dtype == tp.int16


REDUCTIONS = {
    "row_sum": lambda a: a.sum(-1),
    "total_sum": lambda a: a.sum(),
    "column_sum": lambda a: a.sum(0),
    "keepdim_sum": lambda a: a.sum(1, keepdim=True) - a,
    "prod": lambda a: (a % 3 - 1).prod(-1),
    "amax_amin": lambda a: (a.amax(-1), a.amin(0)),
    "max_min_all": lambda a: (a.max(), a.min()),
    "argmax_argmin": lambda a: (a.argmax(-1), a.argmin(0)),
    "max_dim": lambda a: a.max(1),
    "bool_sum": lambda a: (a > 0).sum(-1),
    "cumsum": lambda a: a.cumsum(-1),
    "sum_then_pointwise": lambda a: a.sum(-1, dtype=tp.int32) * 2,
}


@pytest.mark.parametrize("dtype", INTS, ids=str)
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions_equal_eager(name, dtype):
    a = _ints((40, 77), dtype)
    _check(REDUCTIONS[name], a)


def test_int32_sum_accumulates_in_int64_beyond_int32():
    a = _ints((4, 64), tp.int32, 2**30, 2**31 - 1)
    cf = _check(lambda a: (a.sum(-1), a.sum()), a)
    assert cf(a)[1].item() == int(a.numpy().astype(np.int64).sum())


def test_max_of_values_at_the_limits_starts_from_the_type_limits():
    for dtype in INTS:
        lo, hi = _LIMITS[dtype]
        a = tp.full((3, 5), lo, dtype=dtype)
        b = tp.full((3, 5), hi, dtype=dtype)
        _check(lambda a, b: (a.amax(-1), b.amin(-1), a.max(), b.min()), a, b)


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_views_and_non_contiguous_inputs(dtype):
    a = _ints((12, 20), dtype)
    _check(lambda a: (a.t() + 1, a[:, ::3] * 2, a[2:7].reshape(-1), a.unsqueeze(0).expand(3, 12, 20).sum(0)), a)
    _check(lambda a: a * 2 + a.sum(0), a.t())  # a transposed input
    _check(lambda a: a + 1, a[:, 1::2])  # a strided input
    _check(lambda a, b: tp.cat([a, b], 0) - 1, a[:3], a[5:9])


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_dynamic_shapes(dtype):
    cf = tp.compile(lambda a: (a * 3 + 1, a.sum(-1)), strict_native=True, dynamic=True)
    for n in (5, 9, 33, 64):
        a = _ints((3, n), dtype, seed=n)
        _same(cf(a), (a * 3 + 1, a.sum(-1)))


@pytest.mark.parametrize("dtype", [tp.int32, tp.int64, tp.int8], ids=str)
def test_integer_division_equals_eager_and_a_zero_divisor_raises_as_in_eager(dtype):
    a = _ints((6, 17), dtype, -100, 100)
    tp.manual_seed(4)
    b = (tp.randint(1, 9, (6, 17)) * (tp.randint(0, 2, (6, 17)) * 2 - 1)).to(dtype)

    def f(a, b):
        return a // b + 1, a % b, tp.div(a, b, rounding_mode="trunc"), tp.fmod(a, b), a / b

    cf = _check(f, a, b)
    b0 = b.clone()
    b0[2, 3] = 0
    with pytest.raises(RuntimeError, match="integer division by zero"):
        f(a, b0)
    with pytest.raises(RuntimeError, match="integer division by zero"):
        cf(a, b0)


def test_int32_indices_gather_and_index_select():
    x = tp.randn(10, 6)
    idx = tp.tensor(np.array([3, 0, 9, 3], dtype=np.int32))
    _check(lambda x, i: (x[i] * 2, x.index_select(0, i) + 1), x, idx)


def test_training_with_an_int32_mask_gives_eager_gradients():
    tp.manual_seed(0)
    w = tp.randn(8, 5, requires_grad=True)
    x, m = tp.randn(3, 8), _ints((3, 5), tp.int32, 0, 2)

    def f(x, m):
        return ((x @ w) * m + m.sum(-1, keepdim=True)).square().mean()

    cf = tp.compile(f, strict_native=True)
    loss = cf(x, m)
    loss.backward()
    g = w.grad.clone()
    w.grad = None
    want = f(x, m)
    want.backward()
    np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-5)
    np.testing.assert_allclose(g.numpy(), w.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_narrow_integers_stay_scalar_code_and_do_not_warn():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cf = tp.compile(lambda a: a * 2 + 1)
        a = _ints((4, 100), tp.int32)
        _same(cf(a), a * 2 + 1)
    src = cf.last_source
    kernel = src[src.index("static void fused"):]  # (the prelude defines the vector loads)
    assert "const int* __restrict__" in kernel and "tp_load(" not in kernel and "vf " not in kernel


# --- 16-bit floats -----------------------------------------------------------
# bfloat16 / float16 in CPU regions, with the CUDA path's semantics: memory
# holds the 16-bit pattern, loads widen to float, arithmetic and reductions run
# in float, a store rounds to nearest even once (so a fused region rounds only
# what it writes: compared to a float64 reference it is no worse than eager,
# which rounds after every operator), an explicit cast inside an expression
# rounds. The conversions are integer code in the prelude (no _Float16/__bf16).

HALF = [tp.bfloat16, tp.float16]
_EPS = {tp.bfloat16: 2.0**-8, tp.float16: 2.0**-11}  # unit roundoff
_TINY = {tp.bfloat16: 2.0**-133, tp.float16: 2.0**-24}  # smallest subnormal


def _f64(t):
    return t.double().numpy()


def _within_one_rounding(got, ref, dtype, ulps=1.0):
    # |got - ref| <= ulps * (2 u |ref| + smallest subnormal), elementwise; same NaNs / infinities.
    g = _f64(got) if isinstance(got, tp.Tensor) else got
    bad = ~(np.isnan(g) == np.isnan(ref))
    fin = np.isfinite(ref) & ~np.isnan(g)
    err = np.abs(g[fin] - ref[fin])
    tol = ulps * (2 * _EPS[dtype] * np.abs(ref[fin]) + _TINY[dtype])
    assert not bad.any() and (err <= tol).all(), (err.max(initial=0), g[fin][err > tol][:5], ref[fin][err > tol][:5])


HALF_POINTWISE = {
    # name: (function, float64 reference of the same inputs)
    "affine": (lambda x, y: x * 3 + y, lambda x, y: x * 3 + y),
    "exp_chain": (lambda x, y: (x * 0.5 - y).exp(), lambda x, y: np.exp(x * 0.5 - y)),
    "tanh_mul": (lambda x, y: x.tanh() * y, lambda x, y: np.tanh(x) * y),
    "div_sqrt": (lambda x, y: x / (y.abs() + 1).sqrt(), lambda x, y: x / np.sqrt(np.abs(y) + 1)),
    "where_max": (lambda x, y: tp.where(x > y, x, y * 2).clamp(-1.5, 1.5),
                  lambda x, y: np.clip(np.where(x > y, x, y * 2), -1.5, 1.5)),
    "sigmoid": (lambda x, y: tp.sigmoid(x) - y, lambda x, y: 1 / (1 + np.exp(-x)) - y),
}


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("name", sorted(HALF_POINTWISE))
def test_half_pointwise_rounds_once_and_is_within_one_rounding_of_float64(name, dtype):
    fn, ref = HALF_POINTWISE[name]
    tp.manual_seed(0)
    x, y = tp.randn(16, 77).to(dtype), tp.randn(16, 77).to(dtype)
    cf = tp.compile(fn, strict_native=True)
    got, want = cf(x, y), fn(x, y)
    assert got.dtype == want.dtype == dtype and tuple(got.shape) == tuple(want.shape)
    r = ref(_f64(x), _f64(y))
    # Rounded once from float arithmetic: within one rounding (plus float's
    # own error, far below it); eager rounds after every operator.
    _within_one_rounding(got, r, dtype, ulps=1.01)
    e_c = np.abs(_f64(got) - r).max()
    e_e = np.abs(_f64(want) - r).max()
    assert e_c <= e_e * 1.0000001 + _TINY[dtype], (e_c, e_e)
    src = cf.last_source
    kernel = src[src.index("static void fused"):]
    assert ("tp_to_bf16(" if dtype == tp.bfloat16 else "tp_to_half(") in kernel


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_half_conversions_equal_eager_bit_for_bit_on_specials_ties_and_subnormals(dtype):
    vals = [0.0, -0.0, 1.0, 1 + 2.0**-8, 1 + 3 * 2.0**-8, 1 + 2.0**-11, 1 + 3 * 2.0**-11, -(1 + 2.0**-8),
            65504.0, 65519.0, 65520.0, 1e6, -1e6, 2.0**-14, 2.0**-15, 2.0**-24, 2.0**-25, 3 * 2.0**-25,
            2.0**-26, 1e-8, 1e-40, 2.0**-133, 2.0**-134, 3.0e38, 3.4e38, -3.4e38, float("inf"), float("-inf"),
            float("nan"), 0.1, -0.3, 1 / 3, 2.0**127 * (2 - 2.0**-8)]
    x = tp.tensor(vals)  # float32
    cf = tp.compile(lambda x: (x.to(dtype), x.double().to(dtype), (x * 1).to(dtype).float() * 2), strict_native=True)
    got, want = cf(x), (x.to(dtype), x.double().to(dtype), x.to(dtype).float() * 2)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        if g.dtype == dtype:
            gb, wb = g.view(tp.int16).numpy(), w.view(tp.int16).numpy()
            nan = np.isnan(_f64(w))
            np.testing.assert_array_equal(gb[~nan], wb[~nan])  # bit patterns: signs of zeros, ties to even
            assert np.isnan(_f64(g)[nan]).all()
        else:
            np.testing.assert_array_equal(g.numpy(), w.numpy())
    # and PyTorch's conversion agrees
    torch = pytest.importorskip("torch")
    tdt = torch.bfloat16 if dtype == tp.bfloat16 else torch.float16
    t = torch.tensor(np.array(vals, dtype=np.float32)).to(tdt).float().numpy()
    np.testing.assert_array_equal(got[0].float().numpy(), t)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_half_loads_widen_exactly_every_bit_pattern(dtype):
    # All 65536 patterns: load, widen, store back unchanged (NaNs stay NaN).
    bits = tp.tensor(np.arange(-32768, 32768, dtype=np.int16))
    x = bits.view(dtype)
    cf = tp.compile(lambda x: (x * 1, x.float()), strict_native=True)
    same, wide = cf(x)
    want = x.float()
    nan = np.isnan(_f64(want))
    np.testing.assert_array_equal(wide.numpy()[~nan], want.numpy()[~nan])
    np.testing.assert_array_equal(same.view(tp.int16).numpy()[~nan], bits.numpy()[~nan])
    assert np.isnan(wide.numpy()[nan]).all()


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_explicit_cast_inside_an_expression_rounds(dtype):
    tp.manual_seed(1)
    x = tp.randn(8, 40)
    fn = lambda x: (x * 1.001).to(dtype).float() * 3 + (x.to(dtype) * 2).float()
    got, want = tp.compile(fn, strict_native=True)(x), fn(x)
    np.testing.assert_array_equal(got.numpy(), want.numpy())  # every step as eager's, bit for bit


def test_bf16_sum_of_100k_elements_is_no_worse_than_eager():
    tp.manual_seed(2)
    x = (tp.rand(100_000) + 0.5).to(tp.bfloat16)
    ref = _f64(x).sum()
    for fn in (lambda x: x.sum(), lambda x: (x * 2).sum() / 2, lambda x: x.mean() * 100_000):
        got, want = tp.compile(fn, strict_native=True)(x), fn(x)
        e_c, e_e = abs(got.double().item() - ref), abs(want.double().item() - ref)
        assert e_c <= e_e + 1e-9 * abs(ref), (e_c, e_e)
        _within_one_rounding(got, np.array(ref), tp.bfloat16, ulps=2)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_half_reductions_within_one_rounding_of_float64(dtype):
    tp.manual_seed(3)
    x = tp.randn(24, 301).to(dtype)
    X = _f64(x)
    fn = lambda x: (x.sum(-1), x.sum(0), x.mean(-1), x.amax(-1), x.amin(0), tp.softmax(x, -1), x.var(-1), x.std(0))
    refs = (X.sum(-1), X.sum(0), X.mean(-1), X.max(-1), X.min(0),
            np.exp(X - X.max(-1, keepdims=True)) / np.exp(X - X.max(-1, keepdims=True)).sum(-1, keepdims=True),
            X.var(-1, ddof=1), X.std(0, ddof=1))
    got = tp.compile(fn, strict_native=True)(x)
    want = fn(x)
    for g, w, r in zip(got, want, refs):
        assert g.dtype == w.dtype == dtype
        _within_one_rounding(g, r, dtype, ulps=1.5)
    am, aw = tp.compile(lambda x: (x.argmax(-1), x.max(0)), strict_native=True)(x), (x.argmax(-1), x.max(0))
    np.testing.assert_array_equal(am[0].numpy(), aw[0].numpy())
    np.testing.assert_array_equal(am[1][0].float().numpy(), aw[1][0].float().numpy())


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_half_mixed_dtypes_promote_as_eager(dtype):
    tp.manual_seed(4)
    x, f, i = tp.randn(6, 33).to(dtype), tp.randn(6, 33), _ints((6, 33), tp.int32, -9, 9)
    fn = lambda x, f, i: (x + f, x * i, x * 2.5, x + 1, (x > f).sum(-1), x.double() + f, i.to(dtype) / 3)
    got, want = tp.compile(fn, strict_native=True)(x, f, i), fn(x, f, i)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
    np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())  # float32 arithmetic on exact widenings
    np.testing.assert_array_equal(got[4].numpy(), want[4].numpy())
    np.testing.assert_array_equal(got[5].numpy(), want[5].numpy())
    for k in (1, 2, 3, 6):  # one rounding of an exact (or float) value: equal to eager's single rounding
        np.testing.assert_array_equal(got[k].float().numpy(), want[k].float().numpy())


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_half_specials_propagate(dtype):
    x = tp.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-7, -1e-7, 60000.0]).to(dtype)
    fn = lambda x: (x * 2, x.abs(), -x, x.exp(), tp.maximum(x, x * 0), x + 60000)
    got, want = tp.compile(fn, strict_native=True)(x), fn(x)
    for g, w in zip(got, want):
        gb, wb = _f64(g), _f64(w)
        np.testing.assert_array_equal(np.isnan(gb), np.isnan(wb))
        np.testing.assert_array_equal(gb[~np.isnan(gb)], wb[~np.isnan(wb)])
        np.testing.assert_array_equal(np.signbit(gb[~np.isnan(gb)]), np.signbit(wb[~np.isnan(wb)]))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_half_views_non_contiguous_and_dynamic_shapes(dtype):
    tp.manual_seed(5)
    x = tp.randn(12, 20).to(dtype)
    fn = lambda x: (x.t() * 2, x[:, ::3] + 1, x[2:7].reshape(-1) * 3, x.unsqueeze(0).expand(3, 12, 20).sum(0))
    got, want = tp.compile(fn, strict_native=True)(x), fn(x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.float().numpy(), w.float().numpy())  # one operator each: eager's rounding
    got = tp.compile(lambda a: a * 2 + 1, strict_native=True)(x.t())  # a transposed input
    _within_one_rounding(got, _f64(x.t()) * 2 + 1, dtype)
    cf = tp.compile(lambda a: (a * 3, a.sum(-1)), strict_native=True, dynamic=True)
    for n in (5, 9, 33, 64):
        a = tp.randn(3, n).to(dtype)
        g = cf(a)
        np.testing.assert_array_equal(g[0].float().numpy(), (a * 3).float().numpy())
        _within_one_rounding(g[1], _f64(a).sum(-1), dtype, ulps=1.5)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_half_training_gradients_match_eager(dtype):
    tp.manual_seed(6)
    w0 = tp.randn(33).to(dtype)
    x = tp.randn(8, 33).to(dtype)

    def loss(w, x):
        return ((x * w).tanh() * 3 + w).square().mean()

    grads = []
    for f in (loss, tp.compile(loss, strict_native=True)):
        w = w0.clone().requires_grad_()
        v = f(w, x)
        v.backward()
        assert v.dtype == dtype and w.grad.dtype == dtype
        grads.append((v.double().item(), _f64(w.grad)))
    W, X = _f64(w0), _f64(x)
    t = np.tanh(X * W)
    r = t * 3 + W
    ref_v = (r ** 2).mean()
    ref_g = (2 * r * (3 * (1 - t ** 2) * X + 1)).sum(0) / r.size
    (ve, ge), (vc, gc) = grads
    assert abs(vc - ref_v) <= abs(ve - ref_v) + 2 * _EPS[dtype] * abs(ref_v)
    scale = np.abs(ref_g).max()
    e_e, e_c = np.abs(ge - ref_g).max(), np.abs(gc - ref_g).max()
    assert e_c <= max(e_e * 1.5, 4 * _EPS[dtype] * scale), (e_c, e_e)


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("n", [16, 1000, 1037])  # whole vectors, and scalar tails
def test_half_pointwise_nests_are_vectorized_with_widening_loads_and_rounding_stores(dtype, n):
    tp.manual_seed(7)
    x, y = tp.randn(3, n).to(dtype), tp.randn(3, n).to(dtype)
    m = tp.rand(3, n) > 0.5
    fn = lambda x, y, m: ((x * 2 + y).tanh(), (x.float() * 3).to(dtype) + y, tp.where(m, x, y - 1), x.float() * y)
    cf = tp.compile(fn, strict_native=True)
    got, want = cf(x, y, m), fn(x, y, m)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
    _within_one_rounding(got[0], np.tanh(_f64(x) * 2 + _f64(y)), dtype, ulps=1.01)
    for k in (1, 2, 3):  # the same roundings as eager's: bit for bit
        np.testing.assert_array_equal(got[k].float().numpy(), want[k].float().numpy())
    kernel = cf.last_source[cf.last_source.index("static void fused"):]
    tag = "bf16" if dtype == tp.bfloat16 else "half"
    assert f"tp_load_{tag}(" in kernel and f"tp_store_{tag}(" in kernel and f"tp_round_{tag}(" in kernel


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("n", [37, 1000, 5003])  # tails; a long row's blocked (cascaded) sum
def test_half_row_reductions_in_vector_lanes(dtype, n):
    tp.manual_seed(8)
    x = tp.randn(6, n).to(dtype)
    x[2, n // 2] = float("nan")
    X = _f64(x)
    fn = lambda x: (x.sum(-1), x.float().sum(-1), x.amax(-1), (x * 0.5).amin(-1), (x[:, :9] * 0.9).prod(-1),
                    ((x * 2 + 1).tanh() * x).sum(-1))
    cf = tp.compile(fn, strict_native=True)
    got = cf(x)
    refs = (X.sum(-1), X.sum(-1), X.max(-1), (X * 0.5).min(-1), (X[:, :9] * 0.9).prod(-1),
            (np.tanh(X * 2 + 1) * X).sum(-1))
    for k, (g, r) in enumerate(zip(got, refs)):
        if k == 1:  # a float32 sum of widened loads
            g = g.double().numpy()
            np.testing.assert_allclose(g[np.isfinite(r)], r[np.isfinite(r)], rtol=1e-5, atol=1e-4)
            assert np.isnan(g[2])
        else:
            _within_one_rounding(g, r, dtype, ulps=1.5 if k != 5 else 3)
    assert np.isnan(_f64(got[2])[2]) and np.isnan(_f64(got[3])[2])  # NaN propagates through vector max/min
    kernel = cf.last_source[cf.last_source.index("static void fused"):]
    assert ("tp_load_bf16(" if dtype == tp.bfloat16 else "tp_load_half(") in kernel and "tp_hsum(" in kernel
