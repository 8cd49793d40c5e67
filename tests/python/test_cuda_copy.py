"""copy_ into CUDA tensors with PyTorch's semantics: any destination strides,
any source dtype, device and broadcastable shape (a column of a matrix, a
transposed view, int64/bool into float32, a CPU source, a source overlapping
the destination). Before, only a contiguous destination of the source's dtype
had a kernel: `x[:, 1].copy_(y)` raised NotImplementedError on CUDA."""
import numpy as np
import pytest

import tensorplay as tp

gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="needs a CUDA device")


def _np(t):
    return t.cpu().numpy()


@gpu
def test_copy_into_a_column_and_a_transposed_view():
    x = tp.zeros(4, 5, device="cuda")
    x[:, 1].copy_(tp.arange(4.0, device="cuda"))
    ref = np.zeros((4, 5), np.float32)
    ref[:, 1] = np.arange(4.0)
    np.testing.assert_array_equal(_np(x), ref)
    a = tp.zeros(3, 4, device="cuda")
    a.t().copy_(tp.arange(12.0, device="cuda").reshape(4, 3))
    np.testing.assert_array_equal(_np(a), np.arange(12.0, dtype=np.float32).reshape(4, 3).T)


@pytest.mark.parametrize("src_dtype,dst_dtype", [("int64", "float32"), ("bool", "float32"), ("float32", "int64"),
                                                 ("float32", "bfloat16"), ("float64", "float32"), ("int32", "int8")])
@gpu
def test_copy_converts_the_dtype_into_strided_and_contiguous_destinations(src_dtype, dst_dtype):
    rng = np.random.default_rng(0)
    v = rng.integers(-5, 6, size=(4, 3)).astype(src_dtype)
    src = tp.tensor(v, device="cuda")
    for dst in (tp.zeros(4, 3, dtype=getattr(tp, dst_dtype), device="cuda"),
                tp.zeros(3, 4, dtype=getattr(tp, dst_dtype), device="cuda").t()):
        dst.copy_(src)
        want = v.astype(np.float32 if dst_dtype == "bfloat16" else dst_dtype)  # small integers: exact in bfloat16
        np.testing.assert_array_equal(_np(dst.to(tp.float64)), want.astype(np.float64))


@gpu
def test_copy_broadcasts_and_takes_a_cpu_source():
    x = tp.zeros(3, 4, device="cuda")
    x[:, :2].copy_(tp.tensor([1.0, 2.0]))  # CPU row broadcast into a strided CUDA slice
    x[2].copy_(tp.tensor(7.0))  # 0-d CPU source
    ref = np.zeros((3, 4), np.float32)
    ref[:, :2] = [1.0, 2.0]
    ref[2] = 7.0
    np.testing.assert_array_equal(_np(x), ref)
    cpu_strided = tp.arange(12.0).reshape(4, 3).t()  # a non-contiguous CPU source
    y = tp.zeros(3, 4, device="cuda")
    y.copy_(cpu_strided)
    np.testing.assert_array_equal(_np(y), np.arange(12.0, dtype=np.float32).reshape(4, 3).T)


@gpu
def test_copy_from_memory_overlapping_the_destination():
    v = np.arange(16.0, dtype=np.float32).reshape(4, 4)
    x = tp.tensor(v, device="cuda")
    x.copy_(x.t())
    np.testing.assert_array_equal(_np(x), v.T)
    y = tp.arange(10.0, device="cuda")
    y[1:].copy_(y[:-1].clone() * 0 + y[:-1])  # shifted overlap through a view
    z = tp.arange(10.0, device="cuda")
    z[1:].copy_(z[:-1])
    ref = np.arange(10.0, dtype=np.float32)
    ref[1:] = np.arange(9.0)
    np.testing.assert_array_equal(_np(z), ref)


@gpu
def test_in_place_comparison_into_a_float_tensor_and_empty_copies():
    x = tp.tensor([1.0, 2.0, 1.0], device="cuda")
    x.eq_(1.0)
    np.testing.assert_array_equal(_np(x), [1.0, 0.0, 1.0])
    e = tp.zeros(0, 3, device="cuda")
    e.copy_(tp.zeros(0, 3, dtype=tp.int64, device="cuda"))
    assert tuple(e.shape) == (0, 3)


@gpu
def test_copy_into_a_view_keeps_gradients_flowing():
    w = tp.randn(4, 3, device="cuda", requires_grad=True)
    buf = tp.zeros(3, 4, device="cuda")
    buf.t().copy_(w * 2)
    buf.sum().backward()
    np.testing.assert_array_equal(_np(w.grad), np.full((4, 3), 2.0, np.float32))
