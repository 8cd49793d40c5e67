"""Tensor repr in PyTorch's layout, checked against torch's own repr (the
"torch." prefix of dtype names aside) and a few literal expectations."""
import re

import numpy as np
import pytest

import tensorplay as tp


def test_literals():
    assert repr(tp.tensor([1.0, 2.0, 3.0])) == "tensor([1., 2., 3.])"
    assert repr(tp.tensor([[0.1, -1.2]])) == "tensor([[ 0.1000, -1.2000]])"
    assert repr(tp.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(tp.tensor([True, False])) == "tensor([ True, False])"
    assert repr(tp.tensor(2.5)) == "tensor(2.5000)"
    assert repr(tp.zeros(0, 3)) == "tensor([], size=(0, 3))"
    assert repr(tp.zeros(0, dtype=tp.int64)) == "tensor([], dtype=tensorplay.int64)"
    assert repr(tp.tensor([1.5], dtype=tp.float64)) == "tensor([1.5000], dtype=tensorplay.float64)"
    x = tp.tensor([1.0, 2.0], requires_grad=True)
    assert repr(x) == "tensor([1., 2.], requires_grad=True)"
    assert repr(x * 2) == "tensor([2., 4.], grad_fn=<MulBackward0>)"
    assert str(tp.tensor([1e-5, 1.0])) == "tensor([1.0000e-05, 1.0000e+00])"


def _arrays():
    rng = np.random.default_rng(0)
    f = np.float32
    yield "vec", np.array([1.0, 2.0, 3.0], f)
    yield "neg", np.array([[0.1, -1.2]], f)
    yield "randn", rng.standard_normal((3, 4)).astype(f)
    yield "randn3d", rng.standard_normal((2, 3, 4)).astype(f)
    yield "randn4d", rng.standard_normal((2, 1, 2, 3)).astype(f)
    yield "scalar", np.array(3.25, f)
    yield "scalar_int_float", np.array(-7.0, f)
    yield "ints_as_float", np.array([1.0, 20.0, -300.0], f)
    yield "int_float_wide", np.array([1.0, 1e5], f)
    yield "big", np.array([1e10, 1.0], f)
    yield "tiny", np.array([1e-5, 0.5], f)
    yield "tiny_only", np.array([1e-7, 2e-7], f)
    yield "huge_ints", np.array([1e9, 2e9], f)
    yield "zeros", np.zeros((2, 2), f)
    yield "negzero", np.array([-0.0, 0.0, 1.5], f)
    yield "special", np.array([np.nan, np.inf, -np.inf, 1.25], f)
    yield "special_int", np.array([np.nan, 2.0, -np.inf], f)
    yield "only_nan", np.array([np.nan, np.nan], f)
    yield "wrap", rng.standard_normal(30).astype(f)
    yield "wrap_rows", (rng.standard_normal((3, 20)) * 100).astype(f)
    yield "summ1d", np.arange(2000, dtype=f) / 7
    yield "summ2d", rng.standard_normal((50, 50)).astype(f)
    yield "summ3d", rng.standard_normal((12, 10, 20)).astype(f)
    yield "summ_short_rows", rng.standard_normal((1001, 1)).astype(f)
    yield "f64", rng.standard_normal((2, 2))
    yield "f64_scalar", np.array(1.0)
    yield "f16", np.array([0.5, 1.25, -3.0], np.float16)
    yield "int64", np.array([[1, -20, 300], [4, 5, 6]], np.int64)
    yield "int64_scalar", np.array(42, np.int64)
    yield "int32", np.array([1, 2, -3], np.int32)
    yield "int16", np.array([7, -8], np.int16)
    yield "int8", np.array([[1], [-2]], np.int8)
    yield "uint8", np.array([0, 255], np.uint8)
    yield "int_summ", np.arange(1500, dtype=np.int64)
    yield "bool", np.array([[True, False], [False, True]])
    yield "bool_scalar", np.array(True)
    yield "empty1d", np.zeros(0, f)
    yield "empty2d", np.zeros((0, 3), f)
    yield "empty3d", np.zeros((2, 0, 1), f)
    yield "empty_int", np.zeros((0,), np.int64)
    yield "empty_f64", np.zeros((3, 0), np.float64)
    yield "empty_bool", np.zeros((0, 2), bool)
    yield "long_suffix", rng.standard_normal(7)


CASES = list(_arrays())


def assert_same(ours, theirs):
    """Equal to torch's repr with tensorplay's dtype names. A suffix may wrap
    differently: "tensorplay." is longer than "torch.", and suffixes move to
    the next line past 80 columns."""
    expected = theirs.replace("torch.", "tensorplay.")
    if ours == expected:
        return
    unwrap = re.compile(r",\n *(?=(dtype|requires_grad|grad_fn|size)=)")
    assert unwrap.sub(", ", ours) == unwrap.sub(", ", expected)


@pytest.mark.parametrize("name,arr", CASES, ids=[c[0] for c in CASES])
def test_matches_torch(name, arr):
    torch = pytest.importorskip("torch")
    assert_same(repr(tp.tensor(arr)), repr(torch.from_numpy(arr.copy())))


@pytest.mark.parametrize("name,arr", [c for c in CASES if c[1].dtype.kind == "f"],
                         ids=[c[0] for c in CASES if c[1].dtype.kind == "f"])
def test_matches_torch_with_grad(name, arr):
    torch = pytest.importorskip("torch")
    a = torch.from_numpy(arr.copy()).requires_grad_()
    t = tp.tensor(arr, requires_grad=True)
    assert_same(repr(t), repr(a))
    assert_same(repr(t * 2), repr(a * 2))


def test_bfloat16_matches_torch():
    torch = pytest.importorskip("torch")
    arr = np.array([0.5, 1.25, -3.0, 100.0], np.float32)
    assert_same(repr(tp.tensor(arr).to(tp.bfloat16)), repr(torch.from_numpy(arr).to(torch.bfloat16)))


def test_non_contiguous_views():
    torch = pytest.importorskip("torch")
    arr = np.arange(24, dtype=np.float32).reshape(4, 6) / 3
    t = tp.tensor(arr).transpose(0, 1)[::2]
    a = torch.from_numpy(arr).t()[::2]
    assert repr(t) == repr(a)


@pytest.mark.parametrize("opts", [dict(precision=2), dict(sci_mode=True), dict(sci_mode=False),
                                  dict(threshold=5, edgeitems=2), dict(linewidth=30), dict(profile="short"),
                                  dict(profile="full")])
def test_printoptions_match_torch(opts):
    torch = pytest.importorskip("torch")
    arr = (np.random.default_rng(1).standard_normal((4, 9)) * [[1], [10], [100], [1e-3]]).astype(np.float32)
    try:
        tp.set_printoptions(**opts)
        torch.set_printoptions(**opts)
        assert_same(repr(tp.tensor(arr)), repr(torch.from_numpy(arr)))
        assert_same(repr(tp.tensor(arr[3])), repr(torch.from_numpy(arr[3])))
    finally:
        tp.set_printoptions(profile="default")
        torch.set_printoptions(profile="default")
