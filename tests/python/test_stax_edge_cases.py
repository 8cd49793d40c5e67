"""Compiled (Stax, strict_native) results equal eager's on the inputs where
they used to differ or crash: reductions of 0-d tensors, bool/int/float
promotion of Python numbers, zero-size tensors, and the rounding error of long
sums (Section 13.3: the compiled error may not exceed eager's)."""
import math

import numpy as np
import pytest

import tensorplay as tp

torch = pytest.importorskip("torch")


def _same(got, ref, exact=True):
    assert tuple(got.shape) == tuple(ref.shape), (got.shape, ref.shape)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    g, r = got.numpy(), ref.numpy()
    np.testing.assert_array_equal(np.isnan(g), np.isnan(r))
    if exact:
        np.testing.assert_array_equal(g, r)
    else:
        np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-6)


def _torch_np(t):
    return t.detach().numpy()


# ---------------------------------------------------------------------------
# 1. Reductions of 0-d tensors (dim -1 / 0 / None) used to write out of bounds.

ZERO_D_REDUCTIONS = {
    "sum": lambda a, kw: a.sum(**kw),
    "mean": lambda a, kw: a.mean(**kw),
    "amax": lambda a, kw: a.amax(**kw),
    "amin": lambda a, kw: a.amin(**kw),
    "any": lambda a, kw: a.any(**kw),
    "all": lambda a, kw: a.all(**kw),
}


@pytest.mark.parametrize("op", sorted(ZERO_D_REDUCTIONS))
@pytest.mark.parametrize("dim", [-1, 0, None])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool"])
def test_reduction_of_0d_tensor(op, dim, keepdim, dtype):
    if op == "mean" and dtype in ("int64", "bool"):
        pytest.skip("mean of an integer tensor is an error eagerly")
    val = {"float32": 1.5, "float64": -2.25, "int64": 7, "bool": True}[dtype]
    a = tp.tensor(val, dtype=getattr(tp, dtype))
    kw = {} if dim is None else {"dim": dim, "keepdim": keepdim}
    if dim is None and keepdim:
        pytest.skip("keepdim without dim is the same call")
    fn = lambda x: ZERO_D_REDUCTIONS[op](x, kw)  # noqa: E731
    ref = fn(a)
    got = tp.compile(fn, strict_native=True)(a)
    _same(got, ref)
    t = ZERO_D_REDUCTIONS[op](torch.tensor(val, dtype=getattr(torch, dtype)), kw)
    np.testing.assert_array_equal(got.numpy(), _torch_np(t))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [-1, 0])
def test_softmax_of_0d_tensor(name, dim):
    a = tp.tensor(1.5)
    fn = lambda x: getattr(x, name)(dim)  # noqa: E731
    got = tp.compile(fn, strict_native=True)(a)
    _same(got, fn(a))
    np.testing.assert_array_equal(got.numpy(), _torch_np(getattr(torch.tensor(1.5), name)(dim)))


def test_0d_reduction_inside_a_larger_program():
    fn = lambda a, b: (a.sum(-1) + b.amax(-1, keepdim=True)).softmax(0)  # noqa: E731
    a, b = tp.tensor(0.5), tp.randn(4)
    _same(tp.compile(fn, strict_native=True)(a, b), fn(a, b), exact=False)


# ---------------------------------------------------------------------------
# 2. Python numbers are typed by PyTorch's promotion, not by the tensor's dtype.

COMPARISONS = {
    "eq": lambda a, s: a == s,
    "ne": lambda a, s: a != s,
    "lt": lambda a, s: a < s,
    "le": lambda a, s: a <= s,
    "gt": lambda a, s: a > s,
    "ge": lambda a, s: a >= s,
    "rlt": lambda a, s: s < a,
}


@pytest.mark.parametrize("cmp", sorted(COMPARISONS))
@pytest.mark.parametrize("scalar", [2, -1, 0, 1, 0.5, -0.5, 1.0, True, False, 3.0, float("inf"), float("nan")])
@pytest.mark.parametrize("dtype", ["bool", "int64", "float32"])
def test_comparison_with_python_number(cmp, scalar, dtype):
    vals = {"bool": [True, False], "int64": [-1, 0, 1, 2], "float32": [-0.5, 0.0, 0.5, 2.5]}[dtype]
    a = tp.tensor(vals, dtype=getattr(tp, dtype))
    fn = lambda x: COMPARISONS[cmp](x, scalar)  # noqa: E731
    got = tp.compile(fn, strict_native=True)(a)
    _same(got, fn(a))
    t = COMPARISONS[cmp](torch.tensor(vals, dtype=getattr(torch, dtype)), scalar)
    np.testing.assert_array_equal(got.numpy(), _torch_np(t))


def test_issue_examples_bool_comparisons():
    b = tp.tensor([True, False])
    assert tp.compile(lambda b: b == 2, strict_native=True)(b).tolist() == [False, False]
    assert tp.compile(lambda b: b > -1, strict_native=True)(b).tolist() == [True, True]


@pytest.mark.parametrize("expr", [
    lambda b, i, f: (b + 2, b * 3, b * -1),
    lambda b, i, f: (i + 0.5, i * True, f + True, b + i, b * f),
    lambda b, i, f: (tp.where(b, i, 2.5), tp.where(b, 1, 0), tp.where(i > 0, f, 7)),
    lambda b, i, f: (i / 2, b / 2, tp.maximum(b, i), tp.minimum(f, i)),
    lambda b, i, f: ((b == i), (i < f), (b != f), (b > 0.5)),
])
def test_mixed_bool_int_float_arithmetic(expr):
    b = tp.tensor([True, False, True, False])
    i = tp.tensor([-2, 0, 3, 1])
    f = tp.tensor([0.5, -0.0, float("inf"), float("nan")])
    got = tp.compile(expr, strict_native=True)(b, i, f)
    ref = expr(b, i, f)
    for g, r in zip(got, ref):
        _same(g, r)


@pytest.mark.parametrize("op", ["amax", "amin", "sum", "any", "all"])
@pytest.mark.parametrize("vals", [[False, False], [True, True], [True, False]])
@pytest.mark.parametrize("dim", [None, 0])
def test_bool_reduction_identities(op, vals, dim):
    c = tp.tensor(vals)
    fn = (lambda x: getattr(x, op)()) if dim is None else (lambda x: getattr(x, op)(dim))
    got = tp.compile(fn, strict_native=True)(c)
    _same(got, fn(c))
    t = torch.tensor(vals)
    t = getattr(t, op)() if dim is None else getattr(t, op)(dim)
    np.testing.assert_array_equal(got.numpy(), _torch_np(t))


@pytest.mark.parametrize("op", ["amax", "amin"])
def test_int_reduction_identities(op):
    x = tp.tensor([[-2 ** 62, 5], [3, 2 ** 62]])
    for fn in (lambda a: getattr(a, op)(), lambda a: getattr(a, op)(0), lambda a: getattr(a, op)(1)):
        _same(tp.compile(fn, strict_native=True)(x), fn(x))


# ---------------------------------------------------------------------------
# 3. Zero-size tensors: compiled accepts what eager accepts, raises what it raises.

ZERO_SIZE = {
    "softmax_m2": (lambda x: x.softmax(-2), (0, 3)),
    "log_softmax_0": (lambda x: x.log_softmax(0), (0, 3)),
    "softmax_1_of_empty_rows": (lambda x: x.softmax(1), (0, 3)),
    "softmax_empty_dim": (lambda x: x.softmax(-1), (4, 0)),
    "sum_empty_dim": (lambda x: x.sum(0), (0, 3)),
    "sum_all_empty": (lambda x: x.sum(), (2, 0, 3)),
    "mean_empty_dim": (lambda x: x.mean(0), (0, 3)),
    "amax_kept_empty": (lambda x: x.amax(1), (0, 3)),
    "pointwise": (lambda x: (x * 2).exp() + 1, (0, 5)),
    "view_ops": (lambda x: x.t().reshape(3, 0).unsqueeze(0) * 2, (0, 3)),
    "any_all": (lambda x: (x > 0).any(0).float() + (x > 0).all(0).float(), (0, 3)),
}


@pytest.mark.parametrize("name", sorted(ZERO_SIZE))
def test_zero_size_matches_eager(name):
    fn, shape = ZERO_SIZE[name]
    x = tp.randn(*shape)
    got = tp.compile(fn, strict_native=True)(x)
    _same(got, fn(x))
    t = fn(torch.randn(*shape))
    assert tuple(got.shape) == tuple(t.shape)


@pytest.mark.parametrize("fn", [lambda x: x.amax(0), lambda x: x.amin(-2), lambda x: x.amax()])
def test_zero_size_reduction_without_identity_raises_like_eager(fn):
    x = tp.randn(0, 3)
    with pytest.raises(Exception) as eager:
        fn(x)
    with pytest.raises(Exception) as compiled:
        tp.compile(fn, strict_native=True)(x)
    assert type(compiled.value) is type(eager.value)


# ---------------------------------------------------------------------------
# 4. Long sums: compiled error against float64 is not above eager's.

def _max_err(t, ref64):
    return float(np.abs(t.numpy().astype(np.float64) - ref64).max())


@pytest.mark.parametrize("shape,fn", [
    ((8192, 2048), lambda x: x.sum(0)),         # outer-vectorized column sum
    ((8192, 2048), lambda x: x.mean(0)),
    ((2048, 8192), lambda x: x.t().sum(-1)),    # same, through a view
    ((4, 1 << 20), lambda x: x.sum(-1)),        # long rows, inner-vectorized
    ((1 << 22,), lambda x: x.sum()),            # all elements, chunked
    ((64, 4099, 3), lambda x: x.sum(1)),        # strided scalar loop with a tail
])
def test_long_sum_error_not_above_eager(shape, fn):
    rng = np.random.default_rng(0)
    a = rng.random(shape, dtype=np.float32) + np.float32(0.5)  # positive: error grows with n
    x = tp.tensor(a)
    ref64 = fn(tp.tensor(a.astype(np.float64))).numpy()
    eager_err = _max_err(fn(x), ref64)
    compiled_err = _max_err(tp.compile(fn, strict_native=True)(x), ref64)
    # Neither can beat the final rounding to float32 (half an ulp of the result).
    floor = 0.5 * float(np.spacing(np.abs(ref64).max().astype(np.float32)))
    assert compiled_err <= max(eager_err * 1.05, floor), (compiled_err, eager_err, floor)


def test_issue_column_sum_error():
    """The issue's case: x.sum(0) of 8192x2048 randn accumulated 8192 rows in
    one float per column (error 9.5e-4 against float64, eager 6.5e-5)."""
    tp.manual_seed(0)
    x = tp.randn(8192, 2048)
    ref64 = x.double().sum(0).numpy()
    eager_err = _max_err(x.sum(0), ref64)
    compiled_err = _max_err(tp.compile(lambda a: a.sum(0), strict_native=True)(x), ref64)
    assert compiled_err <= eager_err, (compiled_err, eager_err)


def test_long_sum_is_deterministic():
    x = tp.randn(8192, 2048)
    cf = tp.compile(lambda a: (a.sum(0), a.sum()), strict_native=True)
    first = cf(x)
    for _ in range(2):
        again = cf(x)
        for f, g in zip(first, again):
            np.testing.assert_array_equal(f.numpy(), g.numpy())


# ---------------------------------------------------------------------------
# Pointwise arithmetic is rounded per operator, as eager rounds it: the kernel
# compiler must not fuse a product and a sum into one multiply-add.

@pytest.mark.parametrize("fn", [
    lambda a, b, c: a * b + c,
    lambda a, b, c: c - a * b,
    lambda a, b, c: a * 3.0 + b * c,
    lambda a, b, c: (a * b + c).sum(-1),   # inside a reduction's body too
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pointwise_products_are_rounded_like_eager(fn, dtype):
    tp.manual_seed(3)
    a, b, c = (tp.randn(64, 257).to(getattr(tp, dtype)) for _ in range(3))
    got = tp.compile(fn, strict_native=True)(a, b, c)
    ref = fn(a, b, c)
    if got.dim() == 2:
        np.testing.assert_array_equal(got.numpy(), ref.numpy())
    else:  # a reduction's order differs; its products must still be rounded
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor"])
def test_logical_ops_native(name):
    f = tp.tensor([0.0, -0.0, float("nan"), 2.5, float("-inf"), 1.0])
    i = tp.tensor([0, 3, 0, -1, 0, 1])
    b = tp.tensor([True, False, False, True, True, False])
    fn = lambda x, y, z: (getattr(tp, name)(x, y), getattr(tp, name)(y, z), tp.logical_not(x))  # noqa: E731
    got = tp.compile(fn, strict_native=True)(f, i, b)
    tf, ti, tb = (torch.tensor(t.numpy()) for t in (f, i, b))
    ref = (getattr(torch, name)(tf, ti), getattr(torch, name)(ti, tb), torch.logical_not(tf))
    for g, e, t in zip(got, fn(f, i, b), ref):
        _same(g, e)
        np.testing.assert_array_equal(g.numpy(), t.numpy())


# ---------------------------------------------------------------------------
# Signed zeros (found by the random programs).

def test_adding_zero_keeps_ieee_signed_zero():
    """-0.0 + 0 is +0.0: the algebraic simplifier may not drop `x + 0` for
    floats (only `x + (-0.0)` and `x - 0` are identities)."""
    x = tp.tensor([-0.0, 0.0, -1.5, float("nan")])
    for fn in (lambda a: a + 0, lambda a: a + 0.0, lambda a: a - 0.0, lambda a: a + (-0.0),
               lambda a: a - (-0.0), lambda a: 0 + a):
        got = tp.compile(fn, strict_native=True)(x)
        ref = fn(x)
        assert got.numpy().tobytes() == ref.numpy().tobytes(), (got, ref)
        np.testing.assert_array_equal(np.signbit(got.numpy()), np.signbit(_torch_np(fn(torch.tensor(x.numpy())))))


def test_float_to_int_round_trip_gives_positive_zero():
    """(float)(int64)x must not become trunc(x): -0.3 -> 0 -> +0.0."""
    x = tp.tensor([-0.3, -0.0, 0.7, -2.5, 3.0])
    fn = lambda a: a.to(tp.int64).to(tp.float32).sqrt()  # noqa: E731
    got = tp.compile(fn, strict_native=True)(x)
    assert got.numpy().tobytes() == fn(x).numpy().tobytes(), got


# ---------------------------------------------------------------------------
# Every binary operator for every mix of bool/int64/float32/float64 tensors,
# 0-d tensors and Python numbers: compiled is bitwise eager (one compile per
# left dtype; operator/operand pairs eager refuses are left out).

BIN_OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "rsub": lambda a, b: b - a, "rdiv": lambda a, b: b / a,
    "maximum": lambda a, b: tp.maximum(a, b), "minimum": lambda a, b: tp.minimum(a, b),
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
    "where": lambda a, b: tp.where(a > 0, a, b),
}
VALUES = {
    "bool": [True, False, True, False, True, False],
    "int64": [-3, 0, 2, 1, -1, 7],
    "float32": [-1.5, -0.0, 0.0, float("inf"), float("nan"), 2.5],
    "float64": [0.1, -0.0, -float("inf"), 3.0, float("nan"), -2.0],
}


def _operands():
    ops = []
    for dt, vals in VALUES.items():
        ops.append((f"tensor {dt}", tp.tensor(vals, dtype=getattr(tp, dt))))
        ops.append((f"0-d {dt}", tp.tensor(vals[2], dtype=getattr(tp, dt))))
    for s in (True, 2, -1, 0, 0.5, -0.0, float("inf")):
        ops.append((f"number {s!r}", s))
    return ops


@pytest.mark.parametrize("left", sorted(VALUES))
def test_binary_ops_all_dtype_mixes_bitwise(left):
    a = tp.tensor(VALUES[left], dtype=getattr(tp, left))
    others = _operands()
    cases = []
    for name, op in BIN_OPS.items():
        for k, (what, b) in enumerate(others):
            try:
                op(a, b)
            except Exception:  # noqa: BLE001 - eager refuses: not compiled either
                continue
            if name == "where" and not isinstance(b, tp.Tensor):
                continue
            cases.append((name, k, what))
    tensors = [b for _, b in others if isinstance(b, tp.Tensor)]
    numbers = {k: b for k, (_, b) in enumerate(others) if not isinstance(b, tp.Tensor)}
    index = {k: sum(isinstance(b, tp.Tensor) for _, b in others[:k]) for k in range(len(others))}

    def fn(x, *ts):
        out = []
        for name, k, _ in cases:
            b = numbers[k] if k in numbers else ts[index[k]]
            out.append(BIN_OPS[name](x, b))
        return tuple(out)

    got = tp.compile(fn, strict_native=True)(a, *tensors)
    ref = fn(a, *tensors)
    for (name, _, what), g, r in zip(cases, got, ref):
        assert g.dtype == r.dtype and tuple(g.shape) == tuple(r.shape), (name, what)
        gn, rn = g.numpy(), r.numpy()
        same = np.array_equal(np.isnan(gn), np.isnan(rn)) if gn.dtype.kind == "f" else True
        gz = np.where(np.isnan(gn), 0, gn) if gn.dtype.kind == "f" else gn
        rz = np.where(np.isnan(rn), 0, rn) if rn.dtype.kind == "f" else rn
        assert same and gz.tobytes() == rz.tobytes(), f"{left} {name} {what}: {gn} != {rn}"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_exp_overflow_minus_itself_is_nan(dtype):
    """exp(inf) - exp(inf) is NaN: the prelude's final scaling multiply may not
    be contracted into the subtraction (random program seed 2705)."""
    x = tp.tensor([math.inf, -math.inf, 1.0, 2.0] * 5, dtype=getattr(tp, dtype))
    for fn in (lambda a: (a * a).exp() - (a * a).exp(), lambda a: a.exp() - a.exp(), lambda a: a.exp() - a,
               lambda a: a.log() - a.log()):
        got, ref = tp.compile(fn, strict_native=True)(x).numpy(), fn(x).numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))


def test_float64_rounded_to_float32_compares_like_eager():
    """(double)(float)x >= x may not be folded to x == x (GCC 12, -march=native;
    random program seed 3650)."""
    x = tp.tensor(np.random.default_rng(0).standard_normal((17, 2)))
    for fn in (lambda a: a.to(tp.float32) >= a, lambda a: a.to(tp.float32) == a,
               lambda a: tp.where(a.to(tp.float32) > a, 1.0, 0.0)):
        _same(tp.compile(fn, strict_native=True)(x), fn(x))


def test_float32_constants_widen_like_eager():
    x = tp.randn(4).double()
    fn = lambda a: a + tp.full((4,), 0.1, dtype=tp.float32).double()  # noqa: E731
    got = tp.compile(fn, strict_native=True)(x)
    assert got.numpy().tobytes() == fn(x).numpy().tobytes()
