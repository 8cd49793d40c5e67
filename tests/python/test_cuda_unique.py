"""unique / unique_consecutive on CUDA (cuda/unique_kernels.cpp): values,
inverse indices and counts equal to PyTorch CPU's (and to TensorPlay's CPU
operator) for every dtype, dim=None and dim=k (rows compared
lexicographically), sorted=True/False (both sorted, as PyTorch's CUDA
kernel), NaN (each NaN its own value), -0.0 beside 0.0 (the first one kept),
0-d and empty inputs, inputs read through strides, and more entries than one
block's tiles. Without a GPU only the kernels' NVRTC compilation runs (and
the CPU side of the oracle is checked against PyTorch)."""
import numpy as np
import pytest
import torch

import tensorplay as tp

gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")
nvrtc = pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed")
DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"]
DEVICES = ["cpu", pytest.param("cuda", marks=gpu)]


def _np(t):
    t = t.detach().cpu()
    return t.float().numpy() if t.dtype in (tp.bfloat16, tp.float16) else t.numpy()


def _torch_np(t):
    return t.float().numpy() if t.dtype in (torch.bfloat16, torch.float16) else t.numpy()


def _data(shape, dtype, seed, lo=-4, hi=5):
    """Small integers, so values repeat; the same values for both frameworks."""
    a = np.random.default_rng(seed).integers(lo, hi, size=shape)
    if dtype == "bool":
        a = a > 0
    elif dtype == "uint8":
        a = np.abs(a)
    return a


def _pair(a, dtype, device):
    return tp.tensor(a).to(getattr(tp, dtype)).to(device), torch.tensor(a).to(getattr(torch, dtype))


def _same(got, want, device):
    assert got.device.type == device
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape), (tuple(got.shape), tuple(want.shape))
    np.testing.assert_array_equal(_np(got), _torch_np(want))


def _check_all(fn, tfn, x, tx, device, **kw):
    got = fn(x, return_inverse=True, return_counts=True, **kw)
    want = tfn(tx, return_inverse=True, return_counts=True, **kw)
    for g, w in zip(got, want):
        _same(g, w, device)
    _same(fn(x, **kw), tfn(tx, **kw), device)  # the single-result form


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (37,), (6, 7), (3, 4, 5)])
def test_unique_flat(device, dtype, shape):
    x, tx = _pair(_data(shape, dtype, 1), dtype, device)
    for s in (True, False):  # sorted=False is sorted too (PyTorch's CUDA kernel always sorts)
        got = tp.unique(x, sorted=s, return_inverse=True, return_counts=True)
        want = torch.unique(tx, sorted=True, return_inverse=True, return_counts=True)
        for g, w in zip(got, want):
            _same(g, w, device)
    _check_all(tp.unique_consecutive, torch.unique_consecutive, x, tx, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "int64", "bfloat16", "int8", "bool"])
@pytest.mark.parametrize("shape,dim", [((6, 3), 0), ((6, 3), 1), ((4, 5, 2), 1), ((4, 5, 2), -1), ((3, 4, 5), 0),
                                       ((9,), 0)])
def test_unique_dim(device, dtype, shape, dim):
    # values in {0, 1}: rows repeat
    x, tx = _pair(_data(shape, dtype, 2, 0, 2), dtype, device)
    _check_all(tp.unique, torch.unique, x, tx, device, dim=dim)
    _check_all(tp.unique_consecutive, torch.unique_consecutive, x, tx, device, dim=dim)
    got = x.unique(dim=dim, return_inverse=True)
    want = tx.unique(dim=dim, return_inverse=True)
    for g, w in zip(got, want):
        _same(g, w, device)


@pytest.mark.parametrize("device", DEVICES)
def test_nan_each_its_own_value_and_signed_zero(device):
    nan = float("nan")
    a = np.array([nan, 1.0, -0.0, nan, 1.0, 0.0, -2.0, nan, nan])
    for dtype in ("float32", "float64", "float16", "bfloat16"):
        x, tx = _pair(a, dtype, device)
        _check_all(tp.unique, torch.unique, x, tx, device)
        _check_all(tp.unique_consecutive, torch.unique_consecutive, x, tx, device)
        v = tp.unique(x)
        assert int(v.isnan().sum()) == 4  # four NaN values, one per NaN
        assert np.signbit(_np(v)[1])  # -0.0 came first: it is the one kept
    # Rows holding NaN: never equal to another row. PyTorch's CPU kernel places
    # them first here (its row comparison has no order for NaN); TensorPlay
    # orders NaN above numbers, as in its 1-D sort, on both devices.
    rows = np.array([[nan, 1.0], [0.0, 2.0], [nan, 1.0], [0.0, 2.0]])
    x, tx = _pair(rows, "float32", device)
    v, inv, cnt = tp.unique(x, dim=0, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(_np(v), [[0.0, 2.0], [nan, 1.0], [nan, 1.0]])
    assert _np(inv).tolist() == [1, 0, 2, 0] and _np(cnt).tolist() == [2, 1, 1]
    assert v.device.type == device
    _check_all(tp.unique_consecutive, torch.unique_consecutive, x, tx, device, dim=0)


@pytest.mark.parametrize("device", DEVICES)
def test_zero_d_and_empty(device):
    x, tx = _pair(np.array(3.5), "float32", device)
    _check_all(tp.unique, torch.unique, x, tx, device)
    _check_all(tp.unique_consecutive, torch.unique_consecutive, x, tx, device)
    for shape, dims in [((0,), [None, 0]), ((0, 3), [None, 0]), ((2, 0, 3), [None])]:
        x, tx = _pair(np.zeros(shape), "float32", device)
        for d in dims:
            kw = {} if d is None else {"dim": d}
            _check_all(tp.unique, torch.unique, x, tx, device, **kw)
            _check_all(tp.unique_consecutive, torch.unique_consecutive, x, tx, device, **kw)
    with pytest.raises(IndexError, match="unique"):
        tp.unique(tp.tensor(1.0).to(device), dim=0)


@pytest.mark.parametrize("device", DEVICES)
def test_strided_input(device):
    a = _data((8, 10), "int64", 3)
    x, tx = _pair(a, "int64", device)
    for xs, txs in [(x.t(), tx.t()), (x[::2, 1::3], tx[::2, 1::3])]:
        _check_all(tp.unique, torch.unique, xs, txs, device)
        _check_all(tp.unique, torch.unique, xs, txs, device, dim=1)
        _check_all(tp.unique_consecutive, torch.unique_consecutive, xs, txs, device, dim=0)


@gpu
def test_cuda_many_entries():
    # more tiles than blocks (1024 x 256): blocks take several tiles and rank across them
    a = _data((300_000,), "int64", 4, -5000, 5000)
    x, tx = _pair(a, "int64", "cuda")
    _check_all(tp.unique, torch.unique, x, tx, "cuda")
    _check_all(tp.unique_consecutive, torch.unique_consecutive, x, tx, "cuda")
    rows = _data((20_000, 3), "int64", 5, 0, 6)
    x, tx = _pair(rows, "int64", "cuda")
    _check_all(tp.unique, torch.unique, x, tx, "cuda", dim=0)


@nvrtc
@pytest.mark.parametrize("arch", [80, 90])
def test_kernel_sources_compile(arch):
    names = [n for n, _ in tp.cuda._kernel_sources() if n.startswith("tp_unique_")]
    for dt in DTYPES:
        assert f"tp_unique_key_{dt}" in names
    for c in ("f32", "f64", "i64"):
        assert {f"tp_unique_count_{c}", f"tp_unique_group_{c}", f"tp_unique_column_{c}"} <= set(names)
    for name, src in tp.cuda._kernel_sources():
        if name in names:
            assert tp.cuda._nvrtc_compile(src, name, arch)[:4] == b"\x7fELF", name
