"""The CUDA device (Section 9). Three groups:
- no GPU (CI): tp.cuda reports none and every move to "cuda" raises a clear RuntimeError;
- NVRTC importable: every generated kernel source compiles (NVRTC needs no GPU);
- a GPU: results of the CUDA kernels against NumPy on the CPU copy, the allocator, DLPack."""
import numpy as np
import pytest

import tensorplay as tp

HAS_GPU = tp.cuda.is_available()
gpu = pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU")
no_gpu = pytest.mark.skipif(HAS_GPU, reason="a CUDA GPU is present")


# ---------------------------------------------------------------- without a GPU
@no_gpu
def test_no_gpu_reports_none():
    assert tp.cuda.is_available() is False
    assert tp.cuda.device_count() == 0
    assert tp.cuda.memory_allocated() == 0
    assert tp.cuda.memory_reserved() == 0
    tp.cuda.empty_cache()  # harmless without a GPU


@no_gpu
@pytest.mark.parametrize("make", [
    lambda: tp.zeros(3, device="cuda"),
    lambda: tp.ones(2, 2, device="cuda:0"),
    lambda: tp.arange(4, device=tp.device("cuda")),
    lambda: tp.ones(2).cuda(),
    lambda: tp.ones(2).to("cuda"),
    lambda: tp.ones(2).to(device="cuda:0", dtype=tp.float64),
    lambda: tp.tensor([1.0], device="cuda"),
], ids=["zeros", "ones", "arange", "cuda()", "to", "to_dtype", "tensor"])
def test_no_gpu_cuda_raises_clearly(make):
    with pytest.raises(RuntimeError, match="not available"):
        make()


@no_gpu
def test_no_gpu_runtime_calls_raise():
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        tp.cuda.current_device()
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        tp.cuda.synchronize()


def test_cuda_device_objects():
    d = tp.device("cuda:1")
    assert (d.type, d.index, str(d)) == ("cuda", 1, "cuda:1")
    assert tp.device("cuda").index is None
    assert tp.device("cuda", 0) == tp.device("cuda:0")


def test_cpu_tensor_device_properties():
    x = tp.ones(3)
    assert x.cpu() is x
    assert x.to("cpu") is x
    assert not x.is_cuda and x.is_cpu and x.get_device() == -1
    assert x.__dlpack_device__() == (1, 0)


# ---------------------------------------------------------------- NVRTC (no GPU needed)
nvrtc = pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed (pip install nvidia-cuda-nvrtc)")


@nvrtc
@pytest.mark.parametrize("name,source", tp.cuda._kernel_sources(), ids=[n for n, _ in tp.cuda._kernel_sources()])
def test_generated_kernel_source_compiles(name, source):
    cubin = tp.cuda._nvrtc_compile(source, name, 80)
    assert cubin[:4] == b"\x7fELF"


@nvrtc
def test_nvrtc_compile_error_carries_log():
    with pytest.raises(RuntimeError, match="undefined_thing"):
        tp.cuda._nvrtc_compile('extern "C" __global__ void k() { undefined_thing(); }', "k", 80)


# ---------------------------------------------------------------- on a GPU
def _np(t):
    return t.cpu().numpy()


@gpu
def test_roundtrip_and_device():
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    x = tp.from_numpy(a).cuda()
    assert x.is_cuda and not x.is_cpu and x.get_device() == 0
    assert x.device == tp.device("cuda:0") and str(x.device) == "cuda:0"
    assert x.__dlpack_device__() == (2, 0)
    np.testing.assert_array_equal(_np(x), a)
    np.testing.assert_array_equal(x.to("cpu").numpy(), a)
    assert x.cuda() is x and x.to("cuda:0") is x
    assert x.tolist() == a.tolist()
    assert float(x[1, 2]) == float(a[1, 2])
    y = tp.from_numpy(a).to("cuda", tp.float64)
    assert y.dtype == tp.float64 and y.is_cuda
    assert tp.from_numpy(a).to(y).dtype == tp.float64  # to(other): its dtype and device


@gpu
def test_numpy_of_cuda_tensor_raises_pytorch_message():
    x = tp.ones(2, device="cuda")
    with pytest.raises(TypeError, match=r"can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu\(\)"):
        x.numpy()


@gpu
def test_repr_names_device():
    assert repr(tp.ones(2, device="cuda")) == "tensor([1., 1.], device='cuda:0')"
    assert repr(tp.zeros(0, 3, device="cuda")) == "tensor([], device='cuda:0', size=(0, 3))"


@gpu
def test_factories_on_cuda():
    np.testing.assert_array_equal(_np(tp.zeros(2, 3, device="cuda")), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(_np(tp.ones(4, device="cuda", dtype=tp.float64)), np.ones(4))
    np.testing.assert_array_equal(_np(tp.full((2,), 7.5, device="cuda")), np.full(2, 7.5, np.float32))
    np.testing.assert_array_equal(_np(tp.arange(5, device="cuda")), np.arange(5))
    assert tp.empty(3, device="cuda").is_cuda
    tp.manual_seed(0)
    r = tp.randn(100, device="cuda")
    tp.manual_seed(0)
    np.testing.assert_array_equal(_np(r), tp.randn(100).numpy())  # same stream of numbers as on the CPU
    t = tp.tensor([[1.0, 2.0]], device="cuda", requires_grad=True)
    assert t.is_cuda and t.requires_grad


UNARY = {
    "neg": np.negative, "exp": np.exp, "log": np.log, "relu": lambda a: np.maximum(a, 0),
    "sigmoid": lambda a: 1 / (1 + np.exp(-a)), "tanh": np.tanh, "sqrt": np.sqrt,
}


@gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_against_numpy(op, dtype):
    a = np.random.default_rng(1).standard_normal((5, 7)).astype(dtype) * 3
    a[0, 0] = np.nan
    got = _np(getattr(tp, op)(tp.from_numpy(a).cuda()))
    with np.errstate(all="ignore"):
        want = UNARY[op](a).astype(dtype)
    tol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    # a strided (transposed) input
    got_t = _np(getattr(tp, op)(tp.from_numpy(a).cuda().t()))
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(got_t, UNARY[op](a.T).astype(dtype), rtol=tol, atol=tol, equal_nan=True)


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


@gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((4, 5), (4, 5)), ((4, 5), (5,)), ((3, 1, 5), (1, 4, 1)), ((), (2, 3))],
                         ids=["same", "row", "outer", "scalar"])
def test_binary_against_numpy(op, dtype, shapes):
    rng = np.random.default_rng(2)
    a = rng.standard_normal(shapes[0]).astype(dtype)
    b = rng.standard_normal(shapes[1]).astype(dtype) + 3
    got = _np(getattr(tp, op)(tp.from_numpy(a).cuda(), tp.from_numpy(b).cuda()))
    np.testing.assert_allclose(got, BINARY[op](a, b), rtol=1e-6, atol=1e-6)


@gpu
def test_binary_with_python_numbers_alpha_and_views():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = tp.from_numpy(a).cuda()
    np.testing.assert_allclose(_np(x * 2 + 1), a * 2 + 1)
    np.testing.assert_allclose(_np(1 - x), 1 - a)
    np.testing.assert_allclose(_np(tp.add(x, x, alpha=3)), a + 3 * a)
    np.testing.assert_allclose(_np(x.t() + x.t()), (a + a).T)
    np.testing.assert_allclose(_np(x[:, 1:3] * x[:, :2]), a[:, 1:3] * a[:, :2])
    np.testing.assert_allclose(_np(x.reshape(4, 3).contiguous()), a.reshape(4, 3))
    np.testing.assert_allclose(_np(x.t().contiguous()), a.T)


@gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_sum_against_numpy(dtype):
    a = np.random.default_rng(3).standard_normal((37, 1000)).astype(dtype)
    x = tp.from_numpy(a).cuda()
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(_np(x.sum(dim=-1)), a.sum(-1), rtol=tol, atol=tol)
    np.testing.assert_allclose(_np(x.sum(1, keepdim=True)), a.sum(1, keepdims=True), rtol=tol, atol=tol)
    np.testing.assert_allclose(_np(x.sum()), a.sum(), rtol=tol)
    assert _np(tp.zeros(3, 0, device="cuda").sum(-1)).tolist() == [0, 0, 0]


@gpu
def test_op_without_cuda_kernel_raises_not_implemented():
    x = tp.ones(2, 2, device="cuda")
    with pytest.raises(NotImplementedError, match=r"matmul.*cuda:0"):  # float matmul: cuBLASLt; int64: none
        tp.ones(2, 2, dtype=tp.int64, device="cuda") @ tp.ones(2, 2, dtype=tp.int64, device="cuda")
    # Operators without a hand-written kernel are generated by Stax (int64, any dims).
    assert _np(tp.ones(2, dtype=tp.int64, device="cuda") + 1).tolist() == [2, 2]
    assert _np(x.sum(0)).tolist() == [2.0, 2.0]


@gpu
def test_mixed_devices_raise():
    with pytest.raises(RuntimeError, match="same device"):
        tp.ones(2, device="cuda") + tp.ones(2)


@gpu
def test_copy_and_clone_on_device():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = tp.from_numpy(a).cuda()
    y = tp.zeros(2, 3, device="cuda")
    y.copy_(x)
    np.testing.assert_array_equal(_np(y), a)
    z = tp.zeros(2, 3, device="cuda")
    z.copy_(tp.from_numpy(a))  # host to device
    np.testing.assert_array_equal(_np(z), a)
    c = x.clone()
    assert c.data_ptr() != x.data_ptr()
    np.testing.assert_array_equal(_np(c), a)


@gpu
def test_caching_allocator_reuses_and_counts():
    tp.cuda.synchronize()
    tp.cuda.empty_cache()
    base = tp.cuda.memory_allocated()
    x = tp.empty(1000, device="cuda")  # 4000 bytes -> one 4096-byte block
    assert tp.cuda.memory_allocated() - base == 4096
    assert tp.cuda.memory_reserved() >= tp.cuda.memory_allocated()
    p = x.data_ptr()
    del x
    assert tp.cuda.memory_allocated() == base
    y = tp.empty(1000, device="cuda")
    assert y.data_ptr() == p  # the freed block came back
    big = tp.empty(64 << 20, dtype=tp.uint8, device="cuda")
    assert tp.cuda.max_memory_allocated() >= base + (64 << 20)
    reserved = tp.cuda.memory_reserved()
    del big
    tp.cuda.empty_cache()
    assert tp.cuda.memory_reserved() <= reserved - (64 << 20)
    del y


torch = pytest.importorskip("torch") if HAS_GPU else None


@gpu
def test_dlpack_exchange_with_torch_is_zero_copy():
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    x = tp.arange(6, dtype=tp.float32, device="cuda").reshape(2, 3)
    t = torch.from_dlpack(x)
    assert t.is_cuda and t.data_ptr() == x.data_ptr()
    np.testing.assert_array_equal(t.cpu().numpy(), _np(x))
    src = torch.arange(8, dtype=torch.float64, device="cuda").reshape(2, 4)
    y = tp.from_dlpack(src)
    assert y.is_cuda and y.data_ptr() == src.data_ptr()
    np.testing.assert_array_equal(_np(y * 2), (src * 2).cpu().numpy())


@gpu
def test_new_factories_follow_self_device_and_as_tensor_moves():
    x = tp.ones(2, device="cuda")
    assert x.new_zeros(3).is_cuda and x.new_full((2,), 4.0).is_cuda and x.new_tensor([1.0]).is_cuda
    assert not x.new_zeros(3, device="cpu").is_cuda
    a = tp.as_tensor([1.0, 2.0], device="cuda")
    assert a.is_cuda and a.tolist() == [1.0, 2.0]
    assert tp.as_tensor(x) is x


@gpu
def test_kernels_are_cached_by_source():
    x = tp.ones(3, 3, device="cuda", dtype=tp.float64)
    tp.exp(x)
    n = tp.cuda._rt.compiled_kernel_count()
    tp.exp(x * 2)  # same op, dtype and rank: no new compile (mul may add one)
    tp.exp(x)
    assert tp.cuda._rt.compiled_kernel_count() <= n + 1


@gpu
def test_kernel_cubins_are_cached_on_disk(tmp_path):
    import os
    import subprocess
    import sys
    code = "import tensorplay as tp; print(tp.exp(tp.ones(3, device='cuda')).tolist())"
    env = dict(os.environ, TP_CACHE_DIR=str(tmp_path))
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    cubins = list((tmp_path / "cuda").glob("*.cubin"))
    assert cubins and all(p.read_bytes()[:4] == b"\x7fELF" for p in cubins)
    for p in cubins:  # a damaged entry is recompiled, not loaded
        p.write_bytes(b"\x7fELF garbage")
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert first.stdout == second.stdout and "2.718" in first.stdout


@no_gpu
def test_no_gpu_pin_memory_raises():
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        tp.ones(2).pin_memory()
    assert tp.ones(2).is_pinned() is False


@gpu
def test_pinned_memory_and_async_upload():
    a = np.arange(1 << 20, dtype=np.float32)
    h = tp.from_numpy(a).pin_memory()
    assert h.is_pinned() and not h.is_cuda and not tp.from_numpy(a).is_pinned()
    np.testing.assert_array_equal(h.numpy(), a)
    d = h.cuda(non_blocking=True)
    d2 = h.to("cuda", non_blocking=True)
    tp.cuda.synchronize()
    np.testing.assert_array_equal(_np(d), a)
    np.testing.assert_array_equal(_np(d2 * 2), a * 2)


@gpu
def test_cuda_scalar_tensors_used_as_numbers_are_read_on_the_host():
    x = tp.arange(6, dtype=tp.float32, device="cuda")
    i = tp.tensor(2, device="cuda")
    assert float(x[i]) == 2.0  # a 0-d CUDA index acts like the int it holds
    g = tp.Generator()
    g.set_state(g.get_state().cuda())
