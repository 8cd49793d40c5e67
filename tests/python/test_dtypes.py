"""The ten dtypes: promotion (PyTorch's table), conversions (NumPy's values),
narrow arithmetic computed in a wider type and narrowed back, NumPy interop."""
import itertools

import numpy as np
import pytest

import tensorplay as tp

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
NUMPY = {d: np.dtype(d) for d in DTYPES if d not in ("bfloat16",)}
NUMPY["bool"] = np.dtype(np.bool_)


def tpd(name):
    return getattr(tp, name)


def as_float64(t):
    return t.to(tp.float64).numpy()


# ---------------------------------------------------------------- promotion


@pytest.mark.parametrize("a,b", list(itertools.combinations_with_replacement(DTYPES, 2)))
def test_promote_types_matches_pytorch_table(a, b):
    torch = pytest.importorskip("torch")
    want = torch.promote_types(getattr(torch, a), getattr(torch, b))
    got = tp.promote_types(tpd(a), tpd(b))
    assert str(got).split(".")[-1] == str(want).split(".")[-1]
    assert tp.promote_types(tpd(b), tpd(a)) == got


def test_promote_types_without_torch_spot_checks():
    assert tp.promote_types(tp.uint8, tp.int8) == tp.int16
    assert tp.promote_types(tp.uint8, tp.int64) == tp.int64
    assert tp.promote_types(tp.float16, tp.bfloat16) == tp.float32
    assert tp.promote_types(tp.int64, tp.float16) == tp.float16
    assert tp.promote_types(tp.bool, tp.int8) == tp.int8


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scalar", [True, 3, 2.5])
def test_python_scalars_do_not_widen_tensors(dtype, scalar):
    torch = pytest.importorskip("torch")
    want = torch.result_type(torch.ones(2, dtype=getattr(torch, dtype)), scalar)
    got = tp.result_type(tp.ones(2, dtype=tpd(dtype)), scalar)
    assert str(got).split(".")[-1] == str(want).split(".")[-1]


def test_zero_dim_tensors_rank_below_dimensioned_ones():
    x = tp.ones(3, dtype=tp.float16)
    assert (x + tp.tensor(1.0, dtype=tp.float64)).dtype == tp.float16
    assert (tp.ones(3, dtype=tp.int8) + tp.tensor(1.0)).dtype == tp.float32
    assert (tp.ones(3, dtype=tp.int8) + tp.tensor(1000)).dtype == tp.int8


def test_can_cast_follows_category_rule():
    assert tp.can_cast(tp.int8, tp.float16)
    assert not tp.can_cast(tp.float32, tp.int64)
    assert not tp.can_cast(tp.int32, tp.bool)
    assert tp.can_cast(tp.bool, tp.uint8)


def test_default_dtype_is_float32_and_can_be_changed():
    assert tp.get_default_dtype() == tp.float32
    assert tp.tensor([1.5]).dtype == tp.float32
    tp.set_default_dtype(tp.float64)
    try:
        assert tp.tensor([1.5]).dtype == tp.float64
        assert (tp.ones(2, dtype=tp.int64) * 1.5).dtype == tp.float64
    finally:
        tp.set_default_dtype(tp.float32)
    with pytest.raises(TypeError, match="set_default_dtype.*int64"):
        tp.set_default_dtype(tp.int64)


# ---------------------------------------------------------------- conversions

VALUES = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 3.7, 127.0, 128.0, 255.0, 256.0, -129.0, 65504.0, 70000.0,
                   1e-8, 6e-8, 1e-5], dtype=np.float64)


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != "bfloat16"])
def test_float64_to_each_dtype_matches_numpy_for_in_range_values(dtype):
    src = VALUES
    if NUMPY[dtype].kind in "iu":
        info = np.iinfo(NUMPY[dtype])
        src = src[(src >= info.min) & (src <= info.max)]
    got = tp.tensor(src).to(tpd(dtype)).numpy()
    with np.errstate(over="ignore"):  # 70000 -> float16 inf is the expected value
        want = src.astype(NUMPY[dtype])
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_float16_rounding_is_exact_against_numpy():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(5000) * s for s in (1e-6, 1e-3, 1.0, 100.0, 6e4)]).astype(np.float32)
    x = np.concatenate([x, [np.inf, -np.inf, 65519.0, 65520.0, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26]]).astype(np.float32)
    got = tp.from_numpy(x).half().numpy()
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    assert np.isnan(tp.tensor([float("nan")]).half().float().numpy()[0])


def test_bfloat16_matches_pytorch_rounding():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(20000) * 10.0 ** rng.integers(-30, 30, 20000)).astype(np.float32)
    got = tp.from_numpy(x).bfloat16().float().numpy()
    want = torch.from_numpy(x).bfloat16().float().numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("src,dst", [("int64", "int8"), ("int64", "uint8"), ("int32", "int16"), ("float32", "uint8")])
def test_narrowing_wraps_like_pytorch(src, dst):
    torch = pytest.importorskip("torch")
    vals = [0, 1, -1, 127, 128, 255, 256, -129, 300, 40000, -40000]
    got = tp.tensor(vals).to(tpd(src)).to(tpd(dst)).numpy()
    want = torch.tensor(vals).to(getattr(torch, src)).to(getattr(torch, dst)).numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_item_and_roundtrip(dtype):
    t = tp.tensor([1, 0, 1]).to(tpd(dtype))
    assert t.dtype == tpd(dtype)
    assert t.element_size() == (2 if dtype in ("int16", "float16", "bfloat16") else
                                1 if dtype in ("bool", "uint8", "int8") else
                                4 if dtype in ("int32", "float32") else 8)
    v = t[0].item()
    assert v == 1 and (isinstance(v, bool) if dtype == "bool" else True)
    assert as_float64(t).tolist() == [1.0, 0.0, 1.0]


# ---------------------------------------------------------------- arithmetic in narrow dtypes


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32"])
def test_integer_arithmetic_wraps_in_the_narrow_type(dtype):
    npd = NUMPY[dtype]
    info = np.iinfo(npd)
    a = np.array([info.max, info.min, 0, 5], dtype=npd)
    x = tp.from_numpy(a.copy())
    np.testing.assert_array_equal((x + x).numpy(), a + a)
    np.testing.assert_array_equal((x * 3).numpy(), (a * np.array(3, dtype=npd)))
    assert (x + x).dtype == tpd(dtype) and (x * 3).dtype == tpd(dtype)
    assert (x / 2).dtype == tp.float32


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_arithmetic_is_float32_rounded_once(dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    a = rng.standard_normal(1000).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    x, y = tp.from_numpy(a).to(tpd(dtype)), tp.from_numpy(b).to(tpd(dtype))
    tx, ty = torch.from_numpy(a).to(getattr(torch, dtype)), torch.from_numpy(b).to(getattr(torch, dtype))
    for got, want in [(x + y, tx + ty), (x * y, tx * ty), (x - y * 2, tx - ty * 2), (x.sum(), tx.sum())]:
        assert got.dtype == tpd(dtype)
        np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=1e-2, atol=1e-2)
    np.testing.assert_array_equal((x + y).float().numpy(), (tx + ty).float().numpy())


def test_inplace_on_narrow_dtype_writes_through_views_and_bumps_version():
    base = tp.tensor([250, 1, 2, 3]).to(tp.uint8)
    v = base[0:2]
    before = base._version
    v += 10
    assert base.numpy().tolist() == [4, 11, 2, 3]  # 260 wraps to 4
    assert base._version > before
    h = tp.tensor([1.0, 2.0]).half()
    h.mul_(3)
    assert h.dtype == tp.float16 and h.float().numpy().tolist() == [3.0, 6.0]


def test_mixed_narrow_operands_promote():
    a = tp.tensor([1, 2]).to(tp.uint8)
    b = tp.tensor([-1, -2]).to(tp.int8)
    c = a + b
    assert c.dtype == tp.int16 and c.numpy().tolist() == [0, 0]
    assert (tp.ones(2, dtype=tp.float16) + tp.ones(2, dtype=tp.bfloat16)).dtype == tp.float32


# ---------------------------------------------------------------- NumPy interop


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != "bfloat16"])
def test_from_numpy_and_numpy_share_memory_for_every_numpy_dtype(dtype):
    a = np.zeros(4, dtype=NUMPY[dtype])
    t = tp.from_numpy(a)
    assert t.dtype == tpd(dtype)
    a[1] = 1
    assert t[1].item() == 1
    back = t.numpy()
    assert back.dtype == NUMPY[dtype]
    back[2] = 1
    assert a[2] == 1


def test_bfloat16_numpy_is_a_clear_error():
    with pytest.raises(TypeError, match="bfloat16"):
        tp.ones(2, dtype=tp.bfloat16).numpy()


def test_tensor_from_numpy_keeps_dtype_and_python_values_use_defaults():
    assert tp.tensor(np.ones(2, np.int16)).dtype == tp.int16
    assert tp.tensor(np.ones(2, np.float64)).dtype == tp.float64
    assert tp.tensor([1, 2]).dtype == tp.int64
    assert tp.tensor([True]).dtype == tp.bool
    assert tp.tensor([1.0], dtype=tp.bfloat16).dtype == tp.bfloat16
    with pytest.raises(TypeError, match="tensor"):
        tp.tensor(["a"])


def test_dtype_properties():
    assert tp.float16.itemsize == 2 and tp.bfloat16.is_floating_point
    assert not tp.uint8.is_signed and tp.int8.is_signed
    assert repr(tp.bfloat16) == "tensorplay.bfloat16"
    assert tp.half == tp.float16 and tp.short == tp.int16 and tp.int == tp.int32


def test_to_accepts_pytorchs_argument_forms():
    x = tp.ones(2)
    assert x.to(tp.float64).dtype == tp.float64
    assert x.to("cpu") is x and x.to(x) is x and x.to(tp.float32) is x
    assert x.to(tp.ones(1, dtype=tp.int8)).dtype == tp.int8
    assert x.to("cpu", tp.float16).dtype == tp.float16
    assert x.to(dtype=tp.int32, non_blocking=True).dtype == tp.int32
    y = x.to(tp.float32, copy=True)
    assert y is not x and y.data_ptr() != x.data_ptr()
    if not tp.cuda.is_available():  # with a GPU, test_cuda.py covers moves to it
        with pytest.raises(RuntimeError, match="'cuda' is not available"):
            x.to("cuda")
        with pytest.raises(RuntimeError, match="'cuda:3' is not available"):
            x.to(3)  # an ordinal is an accelerator index, as in PyTorch
    with pytest.raises(TypeError, match="to\\(\\)"):
        x.to(3.5)


def test_narrow_integer_comparisons_and_extrema_compute_in_the_promoted_dtype():
    # PyTorch converts the other operand into the promoted narrow type first: -1 becomes
    # 255 for uint8 (the generated CUDA kernels do the same). Widening each operand to
    # int64 on its own compared the mathematical values on the CPU.
    import torch

    a_np = np.array([255, 0, 7], dtype=np.uint8)
    a, ta = tp.tensor(a_np), torch.tensor(a_np)
    for other in (-1, 255, 300):
        for name in ("eq", "ne", "lt", "le", "gt", "ge"):
            got = getattr(tp, name)(a, other).numpy()
            want = getattr(torch, name)(ta, other).numpy()
            np.testing.assert_array_equal(got, want, err_msg=f"{name}(uint8, {other})")
    for name in ("maximum", "minimum"):
        got = getattr(tp, name)(a, tp.tensor(-1)).numpy()
        want = getattr(torch, name)(ta, torch.tensor(-1)).numpy()
        np.testing.assert_array_equal(got, want)
        assert got.dtype == np.uint8
    i8 = tp.tensor(np.array([-128, 5], dtype=np.int8))
    np.testing.assert_array_equal((i8 == 128).numpy(), torch.tensor([-128, 5], dtype=torch.int8).eq(128).numpy())
    b = tp.tensor(a_np.copy())
    b.eq_(tp.tensor(-1))  # in place: the result is written back into the uint8 tensor itself
    np.testing.assert_array_equal(b.numpy(), torch.tensor(a_np).eq_(torch.tensor(-1)).numpy())
    # Same-dtype and int64-promoted comparisons are unchanged.
    np.testing.assert_array_equal((a > tp.tensor([1, 1, 1])).numpy(), [True, False, True])
