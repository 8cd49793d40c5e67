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
