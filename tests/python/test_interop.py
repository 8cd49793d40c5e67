"""DLPack interchange with NumPy and PyTorch: zero-copy in both directions,
every dtype, strided views, capsules, lifetimes and errors."""
import gc

import numpy as np
import pytest

import tensorplay as tp

NP_DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64]
TP_OF = {np.bool_: "bool", np.uint8: "uint8", np.int8: "int8", np.int16: "int16", np.int32: "int32",
         np.int64: "int64", np.float16: "float16", np.float32: "float32", np.float64: "float64"}


def sample(dtype, shape=(2, 3)):
    a = np.arange(int(np.prod(shape))).reshape(shape) % 7
    return (a > 2).astype(dtype) if dtype is np.bool_ else a.astype(dtype)


@pytest.mark.parametrize("dtype", NP_DTYPES)
def test_numpy_to_tp_zero_copy(dtype):
    a = sample(dtype)
    t = tp.from_dlpack(a)
    assert t.dtype == getattr(tp, TP_OF[dtype])
    assert tuple(t.shape) == a.shape
    assert t.data_ptr() == a.ctypes.data
    np.testing.assert_array_equal(np.from_dlpack(t), a)
    a[0, 0] = 1  # a write through NumPy is seen by the tensor
    assert np.from_dlpack(t)[0, 0] == a[0, 0]


@pytest.mark.parametrize("dtype", NP_DTYPES)
def test_tp_to_numpy_zero_copy(dtype):
    t = tp.tensor(sample(dtype))
    a = np.from_dlpack(t)
    assert a.dtype == np.dtype(dtype)
    assert a.ctypes.data == t.data_ptr()
    t.fill_(1)  # a write through TensorPlay is seen by NumPy
    assert np.all(a == np.ones_like(a))


def test_strided_views_both_ways():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    view = base[1:, ::2].T
    t = tp.from_dlpack(view)
    assert tuple(t.shape) == view.shape
    assert tuple(t.stride()) == tuple(s // 4 for s in view.strides)
    np.testing.assert_array_equal(np.from_dlpack(t), view)
    src = tp.arange(24, dtype=tp.float64).reshape(4, 6)
    v = src.transpose(0, 1)[1:5]
    a = np.from_dlpack(v)
    np.testing.assert_array_equal(a, np.arange(24.0).reshape(4, 6).T[1:5])
    v.fill_(-1)
    assert np.all(a == -1)


def test_zero_dim_and_empty():
    t = tp.from_dlpack(np.array(3.5))
    assert t.dim() == 0 and t.item() == 3.5
    e = tp.from_dlpack(np.zeros((0, 3), dtype=np.int64))
    assert tuple(e.shape) == (0, 3)
    assert np.from_dlpack(tp.zeros(0, 2)).shape == (0, 2)
    assert np.from_dlpack(tp.tensor(2.0)).shape == ()


def test_lifetimes():
    a = np.arange(6.0)
    t = tp.from_dlpack(a)
    del a
    gc.collect()
    np.testing.assert_array_equal(np.from_dlpack(t), np.arange(6.0))
    t2 = tp.arange(5, dtype=tp.float64)
    b = np.from_dlpack(t2)
    del t2
    gc.collect()
    np.testing.assert_array_equal(b, np.arange(5.0))


def test_dlpack_device_and_errors():
    t = tp.ones(2)
    assert t.__dlpack_device__() == (1, 0)
    with pytest.raises(TypeError, match="from_dlpack"):
        tp.from_dlpack([1, 2, 3])
    x = tp.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="requires grad"):
        x.__dlpack__()
    cap = tp.ones(2).__dlpack__()
    tp.from_dlpack(cap)
    with pytest.raises(ValueError, match="capsule"):
        tp.from_dlpack(cap)  # already consumed


def test_unconsumed_capsules_are_freed():
    # A capsule nobody consumes must release its tensor: 40 x 64 MiB would raise
    # the peak resident size by 2.5 GiB if the memory leaked.
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    for versioned in (None, (1, 0)):
        for _ in range(20):
            tp.ones(16 * 1024 * 1024).__dlpack__(max_version=versioned)
    gc.collect()
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 1024, f"peak memory grew by {grown_mib:.0f} MiB: unconsumed capsules leak"


def test_copy_flag():
    t = tp.ones(3)
    a = np.from_dlpack(tp.from_dlpack(t.__dlpack__(max_version=(1, 0), copy=True)))
    t.fill_(2)
    assert np.all(a == 1)


# ---- PyTorch ----
TORCH_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_torch_round_trip_zero_copy(name):
    torch = pytest.importorskip("torch")
    src = (torch.arange(12).reshape(3, 4) % 5)
    src = (src > 2) if name == "bool" else src.to(getattr(torch, name))
    t = tp.from_dlpack(src)
    assert t.dtype == getattr(tp, name)
    assert t.data_ptr() == src.data_ptr()
    back = torch.from_dlpack(t)
    assert back.dtype == src.dtype and back.data_ptr() == src.data_ptr()
    assert torch.equal(back, src)
    t.fill_(1)  # seen by torch
    assert torch.equal(src, torch.ones_like(src))
    src.zero_()  # seen by tensorplay
    assert not bool(t.to(tp.float64).sum())


def test_torch_strided_and_legacy_capsule():
    torch = pytest.importorskip("torch")
    base = torch.arange(20.0).reshape(4, 5)
    view = base.t()[1:4]
    t = tp.from_dlpack(view)
    assert tuple(t.stride()) == view.stride()
    np.testing.assert_array_equal(np.from_dlpack(t), view.numpy())
    cap = torch.utils.dlpack.to_dlpack(base)
    t2 = tp.from_dlpack(cap)
    assert t2.data_ptr() == base.data_ptr()
    x = tp.arange(6, dtype=tp.float32).reshape(2, 3).transpose(0, 1)
    tt = torch.utils.dlpack.from_dlpack(x.__dlpack__())
    assert tt.stride() == tuple(x.stride())
    assert torch.equal(tt, torch.arange(6.0).reshape(2, 3).t())
