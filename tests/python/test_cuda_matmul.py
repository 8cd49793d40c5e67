"""The matmul family on CUDA through cuBLASLt (issue 12 item 6, first step):
mm, bmm, matmul with broadcasting, addmm/baddbmm, linear; float32 (TF32 off),
float64, float16/bfloat16 with float32 accumulation; transposed and sliced
operands read in place; empty sizes; autograd through a Linear; a compiled MLP.
Results are compared with a float64 NumPy product of the same (rounded) data.
Everything that needs a GPU is skipped without one."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F

gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")

# Per dtype: (rtol, atol) against a float64 product of the rounded inputs, for
# products of standard normal data with K <= 128 (output rounding dominates).
TOL = {tp.float32: (1e-5, 1e-4), tp.float64: (1e-12, 1e-11), tp.float16: (2e-3, 2e-2), tp.bfloat16: (1.6e-2, 1e-1)}
DTYPES = [tp.float32, tp.float64, tp.float16, tp.bfloat16]


def _np(t):
    t = t.cpu() if t.device.type == "cuda" else t
    return (t.float() if t.dtype in (tp.float16, tp.bfloat16) else t).numpy().astype(np.float64)


def _rand(*shape, dtype=tp.float32, seed=0):
    rng = np.random.default_rng(seed)
    return tp.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(dtype)


def _check(got, want, dtype):
    assert got.device.type == "cuda" and got.dtype == dtype and tuple(got.shape) == want.shape
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(_np(got), want, rtol=rtol, atol=atol)


# ---------------------------------------------------------------- without a GPU
def test_cublaslt_loading_reports_clearly():
    why = tp._C._cuda.cublaslt_why_unavailable()
    if tp.cuda.is_cublaslt_available():
        assert why == "" and "cublasLt" in tp._C._cuda.cublaslt_path()
    else:  # names the library and how to install it
        assert "cuBLASLt" in why and "nvidia-cublas" in why


@pytest.mark.skipif(tp.cuda.is_available(), reason="a CUDA GPU is present")
def test_no_gpu_matmul_on_cuda_is_refused_clearly():
    with pytest.raises(RuntimeError, match="not available"):
        tp.ones(2, 2, device="cuda") @ tp.ones(2, 2, device="cuda")


def test_allow_tf32_switch():
    assert tp.backends.cuda.matmul.allow_tf32 is False  # off by default, as in PyTorch
    try:
        tp.backends.cuda.matmul.allow_tf32 = True
        assert tp.backends.cuda.matmul.allow_tf32 is True
    finally:
        tp.backends.cuda.matmul.allow_tf32 = False


# ---------------------------------------------------------------- on a GPU
@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_mm_layouts(dtype):
    a, b = _rand(48, 64, dtype=dtype, seed=1), _rand(64, 40, dtype=dtype, seed=2)
    ac, bc = a.cuda(), b.cuda()
    _check(tp.mm(ac, bc), _np(a) @ _np(b), dtype)
    # Transposed operands (read with the transpose flag, no copy).
    at, bt = a.t().contiguous(), b.t().contiguous()
    _check(at.cuda().t() @ bt.cuda().t(), _np(a) @ _np(b), dtype)
    _check(ac @ bt.cuda().t(), _np(a) @ _np(b), dtype)
    # Sliced operands: a leading dimension larger than the width, odd offsets,
    # a step in both dims (compacted first).
    big = _rand(70, 90, dtype=dtype, seed=3)
    bigc = big.cuda()
    _check(bigc[3:51, 1:65] @ bc, _np(big)[3:51, 1:65] @ _np(b), dtype)
    _check(bigc[::2, ::3][:, :30] @ bigc[:30, 5:17], (_np(big)[::2, ::3][:, :30]) @ _np(big)[:30, 5:17], dtype)
    _check(bigc[1:41, 2:66].t() @ bigc[5:45, 7:20], _np(big)[1:41, 2:66].T @ _np(big)[5:45, 7:20], dtype)


@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.bfloat16], ids=str)
@pytest.mark.parametrize("sa,sb", [
    ((5,), (5,)), ((3, 5), (5,)), ((5,), (5, 4)), ((2, 3, 4, 5), (5, 6)), ((5,), (2, 5, 3)),
    ((2, 1, 4, 5), (3, 5, 6)), ((4, 5), (2, 5, 6)), ((3, 4, 5), (3, 5, 6)), ((2, 3, 4, 5), (1, 3, 5, 2)),
])
def test_matmul_broadcasting(dtype, sa, sb):
    a, b = _rand(*sa, dtype=dtype, seed=4), _rand(*sb, dtype=dtype, seed=5)
    _check(a.cuda() @ b.cuda(), np.matmul(_np(a), _np(b)), dtype)


@gpu
def test_bmm_and_expanded_and_permuted_batches():
    a, b = _rand(6, 4, 5, seed=6), _rand(6, 5, 7, seed=7)
    _check(tp.bmm(a.cuda(), b.cuda()), _np(a) @ _np(b), tp.float32)
    # A batch broadcast by stride 0, and a batch dim that is not outermost.
    w = _rand(1, 5, 7, seed=8)
    _check(tp.bmm(a.cuda(), w.cuda().expand(6, 5, 7)), _np(a) @ _np(w), tp.float32)
    p = _rand(4, 6, 5, seed=9)
    _check(tp.bmm(p.cuda().permute(1, 0, 2), b.cuda()), _np(p).transpose(1, 0, 2) @ _np(b), tp.float32)
    # Batch strides no single stride walks: one GEMM per matrix.
    q = _rand(3, 8, 4, 5, seed=10)
    _check(q.cuda()[:, ::2] @ _rand(5, 2, dtype=tp.float32, seed=11).cuda(),
           _np(q)[:, ::2] @ _np(_rand(5, 2, seed=11)), tp.float32)
    _check(q.cuda()[:, ::2] @ _rand(3, 4, 5, 2, seed=12).cuda(), _np(q)[:, ::2] @ _np(_rand(3, 4, 5, 2, seed=12)),
           tp.float32)


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_addmm_and_baddbmm(dtype):
    x, w = _rand(9, 16, dtype=dtype, seed=13), _rand(16, 12, dtype=dtype, seed=14)
    bias, m = _rand(12, dtype=dtype, seed=15), _rand(9, 12, dtype=dtype, seed=16)
    X, W = _np(x), _np(w)
    _check(tp.addmm(bias.cuda(), x.cuda(), w.cuda()), _np(bias) + X @ W, dtype)  # the BIAS epilogue
    _check(tp.addmm(m.cuda(), x.cuda(), w.cuda()), _np(m) + X @ W, dtype)
    _check(tp.addmm(bias.cuda(), x.cuda(), w.cuda(), beta=0.5, alpha=2.0), 0.5 * _np(bias) + 2 * X @ W, dtype)
    _check(tp.addmm(m.cuda(), x.cuda(), w.cuda(), beta=0.0), X @ W, dtype)
    _check(tp.addmm(bias.cuda()[:1], x.cuda(), w.cuda()), _np(bias)[:1] + X @ W, dtype)
    _check(tp.addmm(m.cuda(), x.cuda(), w.cuda(), alpha=0.0), _np(m), dtype)
    a, b, s = _rand(3, 4, 5, dtype=dtype, seed=17), _rand(3, 5, 6, dtype=dtype, seed=18), _rand(6, dtype=dtype, seed=19)
    _check(tp.baddbmm(s.cuda(), a.cuda(), b.cuda(), beta=2.0), 2 * _np(s) + _np(a) @ _np(b), dtype)


@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.float16, tp.bfloat16], ids=str)
def test_linear(dtype):
    x, w, b = _rand(2, 7, 32, dtype=dtype, seed=20), _rand(24, 32, dtype=dtype, seed=21), _rand(24, dtype=dtype, seed=22)
    _check(F.linear(x.cuda(), w.cuda(), b.cuda()), _np(x) @ _np(w).T + _np(b), dtype)
    _check(F.linear(x.cuda(), w.cuda()), _np(x) @ _np(w).T, dtype)
    if dtype == tp.float32:  # rows that no view stacks: matmul, then add (no 16-bit CUDA add yet)
        _check(F.linear(x.cuda()[:, ::2], w.cuda(), b.cuda()), _np(x)[:, ::2] @ _np(w).T + _np(b), dtype)


@gpu
def test_empty_sizes():
    z = tp.zeros(0, 5).cuda() @ _rand(5, 3).cuda()
    assert tuple(z.shape) == (0, 3) and z.device.type == "cuda"
    k0 = tp.zeros(3, 0).cuda() @ tp.zeros(0, 4).cuda()
    assert _np(k0).tolist() == [[0.0] * 4] * 3
    m = _rand(3, 4, seed=23)
    np.testing.assert_allclose(_np(tp.addmm(m.cuda(), tp.zeros(3, 0).cuda(), tp.zeros(0, 4).cuda(), beta=0.5)),
                               0.5 * _np(m), rtol=1e-6)
    assert tuple((tp.zeros(2, 0, 3).cuda() @ _rand(3, 4).cuda()).shape) == (2, 0, 4)


@gpu
def test_tf32_and_mixed_devices():
    a, b = _rand(64, 128, seed=24), _rand(128, 32, seed=25)
    try:
        tp.backends.cuda.matmul.allow_tf32 = True
        np.testing.assert_allclose(_np(a.cuda() @ b.cuda()), _np(a) @ _np(b), rtol=1e-2, atol=5e-2)
    finally:
        tp.backends.cuda.matmul.allow_tf32 = False
    with pytest.raises(RuntimeError, match="same device"):
        a.cuda() @ b
    with pytest.raises(NotImplementedError, match="matmul.*cuda:0"):
        tp.ones(2, 2, dtype=tp.int64, device="cuda") @ tp.ones(2, 2, dtype=tp.int64, device="cuda")


def _mlp(x, w1, b1, w2, b2):
    return F.linear(F.linear(x, w1, b1).relu(), w2, b2)


def _mlp_params():
    return [_rand(64, 32, seed=30) * 0.2, _rand(64, seed=31), _rand(10, 64, seed=32) * 0.1, _rand(10, seed=33)]


@gpu
def test_linear_backward_on_cuda():
    x = _rand(8, 32, seed=26)
    cpu = [p.requires_grad_() for p in _mlp_params()]
    dev = [p.cuda().requires_grad_() for p in _mlp_params()]
    _mlp(x, *cpu).square().sum().backward()
    loss = _mlp(x.cuda(), *dev).square().sum()
    assert loss.device.type == "cuda"
    loss.backward()
    for i, (p, q) in enumerate(zip(dev, cpu)):
        assert p.grad is not None and p.grad.device.type == "cuda", i
        np.testing.assert_allclose(_np(p.grad), _np(q.grad), rtol=1e-4, atol=1e-4, err_msg=str(i))


@gpu
def test_compiled_mlp_on_cuda_equals_eager():
    params = [p.cuda() for p in _mlp_params()]
    compiled = tp.compile(_mlp, strict_native=True)
    for seed in (27, 28):  # the second call runs the cached artifact
        x = _rand(16, 32, seed=seed).cuda()
        got = compiled(x, *params)
        assert got.device.type == "cuda"
        np.testing.assert_allclose(_np(got), _np(_mlp(x, *params)), rtol=1e-5, atol=1e-5)
