"""masked_scatter / Tensor.masked_scatter(_) (ops/masked_scatter_ops.cpp, CUDA:
cuda/masked_scatter.cpp): values against PyTorch CPU for every dtype, mask
broadcasting (out of place both ways, in place into self's shape), source of
any shape consumed row-major, strided and aliasing inputs, the error for a
source with too few elements (naming the operator and the sizes), gradients
for self and source against PyTorch and finite differences. The CUDA tests
skip without a GPU; the kernels' NVRTC compilation runs wherever NVRTC is."""
import numpy as np
import pytest
import torch

import tensorplay as tp
from fd_check import check_gradients

gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")
nvrtc = pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed")
DEVICES = ["cpu", pytest.param("cuda", marks=gpu)]
DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"]


def _np(t):
    t = t.detach().cpu()
    return t.float().numpy() if t.dtype in (tp.bfloat16, tp.float16) else t.numpy()


def _torch_np(t):
    t = t.detach()
    return t.float().numpy() if t.dtype in (torch.bfloat16, torch.float16) else t.numpy()


def _pair(a, dtype, device):
    """The same values as a TensorPlay tensor on `device` and a torch CPU tensor."""
    t = torch.tensor(a).to(getattr(torch, dtype))
    return tp.tensor(a).to(getattr(tp, dtype)).to(device), t


def _check(got, want, device):
    assert got.device.type == device
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(_np(got), _torch_np(want))


def _values(shape, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 20).round()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_values_every_dtype(device, dtype):
    rng = np.random.default_rng(1)
    m = rng.random((5, 7)) < 0.4
    x, tx = _pair(_values((5, 7), 2), dtype, device)
    s, ts = _pair(_values((6, 4), 3), dtype, device)  # 24 >= the true positions; consumed flattened
    mask, tmask = tp.tensor(m).to(device), torch.tensor(m)
    _check(tp.masked_scatter(x, mask, s), torch.masked_scatter(tx, tmask, ts), device)
    _check(x.masked_scatter(mask, s), tx.masked_scatter(tmask, ts), device)
    y, ty = _pair(_values((5, 7), 2), dtype, device)
    assert y.masked_scatter_(mask, s) is y
    ty.masked_scatter_(tmask, ts)
    _check(y, ty, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("xshape,mshape", [((2, 3), (3,)), ((3,), (2, 3)), ((4, 1, 5), (3, 1)), ((), (2, 2)),
                                           ((2, 2), ()), ((), ()), ((0, 3), (3,)), ((3, 4), (0, 1, 4))])
def test_broadcasting(device, xshape, mshape):
    rng = np.random.default_rng(4)
    m = rng.random(mshape) < 0.5
    x, tx = _pair(_values(xshape, 5), "float32", device)
    s, ts = _pair(_values((40,), 6), "float32", device)
    _check(tp.masked_scatter(x, tp.tensor(m).to(device), s), torch.masked_scatter(tx, torch.tensor(m), ts), device)


@pytest.mark.parametrize("device", DEVICES)
def test_inplace_mask_must_broadcast_to_self(device):
    x = tp.zeros(3, device=device)
    with pytest.raises(ValueError, match="masked_scatter_.*does not broadcast"):
        x.masked_scatter_(tp.ones(2, 3, dtype=tp.bool, device=device), tp.ones(6, device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_strided_inputs_and_inplace_into_a_view(device):
    rng = np.random.default_rng(7)
    base, tbase = _pair(_values((6, 8), 8), "float64", device)
    m = rng.random((3, 3)) < 0.6
    mask, tmask = tp.tensor(m).to(device).t(), torch.tensor(m).t()  # transposed mask
    src, tsrc = _pair(_values((10, 6), 9), "float64", device)
    x, tx = base[::2, 1:4], tbase[::2, 1:4]  # shape (3, 3), not contiguous
    _check(x.masked_scatter(mask, src.t()), tx.masked_scatter(tmask, tsrc.t()), device)
    x.masked_scatter_(mask, src[:, ::2])
    tx.masked_scatter_(tmask, tsrc[:, ::2])
    _check(base, tbase, device)  # written through the view only


@pytest.mark.parametrize("device", DEVICES)
def test_source_aliasing_self(device):
    # source is self's own memory: read before anything is written (PyTorch's
    # CPU kernel reads the values it has already written there; here the
    # result is the same as with a copy of source)
    x, tx = _pair(np.arange(12.0).reshape(3, 4), "float32", device)
    m = np.arange(12).reshape(3, 4) % 3 != 0
    x.masked_scatter_(tp.tensor(m).to(device), x)
    tx.masked_scatter_(torch.tensor(m), tx.clone())
    _check(x, tx, device)


@pytest.mark.parametrize("device", DEVICES)
def test_too_few_source_elements_raises(device):
    x = tp.zeros(2, 3, device=device)
    mask = tp.tensor([True, False, True]).to(device)
    with pytest.raises(RuntimeError, match=r"masked_scatter: source has 3 elements \(shape \[3\]\).*4 true"):
        tp.masked_scatter(x, mask, tp.ones(3, device=device))
    with pytest.raises(RuntimeError, match="masked_scatter_: source has 2 elements"):
        x.masked_scatter_(mask, tp.ones(2, device=device))
    assert float(x.abs().sum()) == 0.0  # nothing written before the error
    # exactly enough is fine, and no true position needs no source at all
    assert tp.masked_scatter(x, mask, tp.ones(4, device=device)).sum().item() == 4
    assert tp.masked_scatter(x, mask & False, tp.ones(0, device=device)).sum().item() == 0


@pytest.mark.parametrize("device", DEVICES)
def test_bad_dtypes_raise(device):
    x = tp.zeros(3, device=device)
    with pytest.raises(TypeError, match="masked_scatter: expected a bool mask"):
        tp.masked_scatter(x, tp.ones(3, dtype=tp.int64, device=device), tp.ones(3, device=device))
    with pytest.raises(TypeError, match="masked_scatter: expected self and source to have the same dtype"):
        tp.masked_scatter(x, tp.ones(3, dtype=tp.bool, device=device), tp.ones(3, dtype=tp.float64, device=device))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("xshape,mshape,sshape", [((3, 4), (3, 4), (2, 7)), ((3, 1), (1, 4), (13,)),
                                                  ((4,), (3, 4), (3, 5))])
def test_gradients_match_torch(device, xshape, mshape, sshape):
    rng = np.random.default_rng(11)
    m = rng.random(mshape) < 0.5
    xa, sa, wa = rng.standard_normal(xshape), rng.standard_normal(sshape), None
    x = tp.tensor(xa, device=device, requires_grad=True)
    s = tp.tensor(sa, device=device, requires_grad=True)
    y = tp.masked_scatter(x, tp.tensor(m).to(device), s)
    wa = rng.standard_normal(tuple(y.shape))
    (y * tp.tensor(wa, device=device)).sum().backward()
    tx = torch.tensor(xa, requires_grad=True)
    ts = torch.tensor(sa, requires_grad=True)
    (torch.masked_scatter(tx, torch.tensor(m), ts) * torch.tensor(wa)).sum().backward()
    np.testing.assert_allclose(_np(x.grad), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_np(s.grad), ts.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert tuple(s.grad.shape) == sshape and x.grad.device.type == device


@pytest.mark.parametrize("device", DEVICES)
def test_unused_source_gradient_is_zero_even_for_inf_and_nan(device):
    mask = tp.tensor([True, False, True]).to(device)
    s = tp.tensor([1.0, 2.0, float("inf"), float("nan"), -0.5], device=device, requires_grad=True)
    y = tp.masked_scatter(tp.zeros(3, device=device), mask, s)
    (y * tp.tensor([3.0, 4.0, 5.0], device=device)).sum().backward()
    assert s.grad.device.type == device
    np.testing.assert_array_equal(_np(s.grad), [3.0, 5.0, 0.0, 0.0, 0.0])


def test_gradients_finite_differences():
    m = tp.tensor([[True, False, True, True], [False, True, False, False]])
    rng = np.random.default_rng(12)
    check_gradients(lambda x, s: tp.masked_scatter(x, m, s), rng.standard_normal((2, 4)),
                    rng.standard_normal((3, 3)))
    # in place on a copy: same derivatives
    check_gradients(lambda x, s: (x * 1.0).masked_scatter_(m, s), rng.standard_normal((2, 4)),
                    rng.standard_normal((5,)))
    # broadcast self: its gradient sums over the broadcast dim
    check_gradients(lambda x, s: tp.masked_scatter(x, m, s), rng.standard_normal((4,)), rng.standard_normal((6,)))


@nvrtc
@pytest.mark.parametrize("arch", [80, 90])
def test_kernel_sources_compile(arch):
    names = [n for n, _ in tp.cuda._kernel_sources() if n.startswith("tp_mscatter_")]
    assert set(names) == {"tp_mscatter_count", "tp_mscatter_write_b1", "tp_mscatter_write_b2",
                          "tp_mscatter_write_b4", "tp_mscatter_write_b8"}
    for name, src in tp.cuda._kernel_sources():
        if name in names:
            assert tp.cuda._nvrtc_compile(src, name, arch)[:4] == b"\x7fELF", name


@gpu
def test_cuda_large_matches_cpu_across_blocks():
    # more than kMaxBlocks tiles of 256: blocks take several tiles and sum the counts before them
    tp.manual_seed(0)
    x = tp.randn(1100, 300)
    mask = tp.rand(1100, 300) < 0.3
    src = tp.randn(1100 * 300)
    want = tp.masked_scatter(x, mask, src)
    got = tp.masked_scatter(x.cuda(), mask.cuda(), src.cuda())
    np.testing.assert_array_equal(_np(got), _np(want))


def test_forward_mode_tangent_matches_torch():
    rng = np.random.default_rng(13)
    m = rng.random((3, 4)) < 0.5
    xa, sa, txa, tsa = (rng.standard_normal(s) for s in [(3, 4), (14,), (3, 4), (14,)])
    f = lambda x, s: tp.masked_scatter(x, tp.tensor(m), s)  # noqa: E731
    _, tout = tp.func.jvp(f, (tp.tensor(xa), tp.tensor(sa)), (tp.tensor(txa), tp.tensor(tsa)))
    tf = lambda x, s: torch.masked_scatter(x, torch.tensor(m), s)  # noqa: E731
    _, want = torch.func.jvp(tf, (torch.tensor(xa), torch.tensor(sa)), (torch.tensor(txa), torch.tensor(tsa)))
    np.testing.assert_allclose(_np(tout), want.numpy(), rtol=1e-12, atol=1e-12)
