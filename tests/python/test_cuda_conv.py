"""CNN operators on CUDA (issue 12 item 3): conv2d (through cuDNN where it
loads, and im2col + cuBLASLt, both checked) and its input/weight gradients,
float16/bfloat16 convolutions through cuDNN, max / average / adaptive pooling and their gradients,
batch_norm (training and evaluation), nll_loss / cross_entropy and its
gradient, each against the CPU kernels on the same values; the same
operators inside tp.compile; and an operator without a CUDA path is named.
Without a GPU only the NVRTC compilation of the kernel sources runs."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F

gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")
nvrtc = pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed")
cudnn = pytest.mark.skipif(not tp.cuda.is_cudnn_available(), reason="cuDNN not installed")

TOL = {tp.float32: dict(rtol=2e-4, atol=2e-4), tp.float64: dict(rtol=1e-10, atol=1e-10)}


def _close(got, want, dtype=tp.float32):
    assert got.device.type == "cuda"
    assert tuple(got.shape) == tuple(want.shape) and got.dtype == want.dtype
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.numpy(), **TOL[dtype])


def _leaf(t):
    return t.detach().to("cuda").requires_grad_(True)


@nvrtc
def test_cnn_kernel_sources_compile_for_sm80_and_sm90():
    names = dict(tp.cuda._kernel_sources())
    for k in ("im2col", "col2im", "maxpool", "maxpool_i32", "maxpool_grad", "avgpool_grad", "adaptive_avgpool",
              "adaptive_avgpool_warp", "adaptive_avgpool_grad", "nll_reduce", "nll_none", "nll_grad"):
        for dt in ("float32", "float64"):
            name = f"tp_{k}_{dt}"
            assert name in names
            for arch in (80, 90):
                assert tp.cuda._nvrtc_compile(names[name], name, arch)[:4] == b"\x7fELF"


CONV = [  # (input shape, weight shape, kwargs)
    ((2, 3, 9, 10), (4, 3, 3, 3), dict(padding=1)),
    ((2, 4, 11, 9), (6, 2, 3, 2), dict(stride=(2, 1), padding=(1, 0), groups=2)),
    ((1, 3, 12, 12), (5, 3, 3, 3), dict(dilation=2, padding=2, stride=2)),
    ((3, 8, 5, 5), (8, 1, 3, 3), dict(padding=1, groups=8)),  # depthwise
    ((2, 6, 7, 7), (4, 6, 1, 1), dict()),  # pointwise: the input is its own unfolded matrix
    ((3, 7, 8), (2, 3, 2, 2), dict(stride=2)),  # unbatched
]


def _cudnn_calls():
    return tp._C._cuda.cudnn_conv_calls()


@pytest.fixture(params=["cudnn", "im2col"])
def conv_impl(request):
    """Runs the test through cuDNN (skipped where it does not load) and through
    im2col + cuBLASLt, and checks afterwards that the path named ran."""
    if request.param == "cudnn" and not tp.cuda.is_cudnn_available():
        pytest.skip("cuDNN not installed")
    before, calls = tp.backends.cudnn.enabled, _cudnn_calls()
    tp.backends.cudnn.enabled = request.param == "cudnn"
    try:
        yield request.param
    finally:
        tp.backends.cudnn.enabled = before
    ran = _cudnn_calls() - calls
    assert ran > 0 if request.param == "cudnn" else ran == 0


def test_cudnn_library_loads_or_says_why():
    # No GPU needed: the library is opened (and its entry points resolved) or refused with a reason.
    if tp.cuda.is_cudnn_available():
        assert tp.backends.cudnn.version() >= 90000 and tp._C._cuda.cudnn_why_unavailable() == ""
    else:
        assert "cuDNN" in tp._C._cuda.cudnn_why_unavailable() and tp.backends.cudnn.version() is None


@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.float64])
@pytest.mark.parametrize("case", range(len(CONV)), ids=[str(c[1]) for c in CONV])
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d_and_both_gradients_match_cpu(case, bias, dtype, conv_impl):
    xs, ws, kw = CONV[case]
    x = tp.randn(*xs, dtype=dtype, requires_grad=True)
    w = tp.randn(*ws, dtype=dtype, requires_grad=True)
    b = tp.randn(ws[0], dtype=dtype, requires_grad=True) if bias else None
    y = F.conv2d(x, w, b, **kw)
    g = tp.randn(*y.shape, dtype=dtype)
    y.backward(g)
    xc, wc = _leaf(x), _leaf(w)
    bc = _leaf(b) if bias else None
    yc = F.conv2d(xc, wc, bc, **kw)
    _close(yc, y.detach(), dtype)
    yc.backward(g.to("cuda"))
    _close(xc.grad, x.grad, dtype)
    _close(wc.grad, w.grad, dtype)
    if bias:
        _close(bc.grad, b.grad, dtype)


@gpu
def test_conv2d_reads_a_non_contiguous_input(conv_impl):
    x = tp.randn(2, 9, 9, 3).permute(0, 3, 1, 2)
    w = tp.randn(4, 3, 3, 3)
    _close(F.conv2d(x.to("cuda"), w.to("cuda"), padding=1), F.conv2d(x, w, padding=1))


@gpu
def test_conv2d_float32_is_exact_without_tf32(conv_impl):
    # A long reduction (64 channels x 3 x 3): TF32's 10-bit mantissa would be
    # off by ~1e-3 relative; float32 FMA math stays within float32 rounding.
    x = tp.randn(4, 64, 12, 12, dtype=tp.float64)
    w = tp.randn(32, 64, 3, 3, dtype=tp.float64)
    want = F.conv2d(x, w, padding=1).numpy()
    got = F.conv2d(x.float().to("cuda"), w.float().to("cuda"), padding=1).cpu().numpy()
    assert not tp.backends.cuda.matmul.allow_tf32
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * np.abs(want).max())


@cudnn
@gpu
def test_cudnn_algorithm_is_chosen_per_operand_alignment():
    # Same shapes, operands at other alignments (a 4-byte offset): the plan of
    # the aligned call is not reused for the misaligned one.
    base = tp.randn(2 * 8 * 10 * 10 + 1)
    wb = tp.randn(16 * 8 * 3 * 3 + 1)
    xs = [base[:-1].view(2, 8, 10, 10), base[1:].view(2, 8, 10, 10)]
    ws = [wb[:-1].view(16, 8, 3, 3), wb[1:].view(16, 8, 3, 3)]
    xc, wc = base.to("cuda"), wb.to("cuda")
    xcs = [xc[:-1].view(2, 8, 10, 10), xc[1:].view(2, 8, 10, 10)]
    wcs = [wc[:-1].view(16, 8, 3, 3), wc[1:].view(16, 8, 3, 3)]
    calls = _cudnn_calls()
    for i in (0, 1):
        for j in (0, 1):
            _close(F.conv2d(xcs[i], wcs[j], padding=1), F.conv2d(xs[i], ws[j], padding=1))
    assert _cudnn_calls() - calls == 4


HALF_CONV = [((2, 8, 10, 9), (16, 8, 3, 3), dict(padding=1)),
             ((2, 8, 11, 11), (12, 4, 3, 3), dict(stride=2, padding=2, dilation=2, groups=2))]


@cudnn
@gpu
@pytest.mark.parametrize("dtype", [tp.bfloat16, tp.float16])
@pytest.mark.parametrize("case", range(len(HALF_CONV)))
def test_conv2d_16bit_through_cudnn_matches_float32_cpu(dtype, case):
    # The 16-bit operands converted exactly to float32 on the CPU are the
    # reference; the result differs by the 16-bit rounding of the output (and
    # of the gradients), float32 accumulation inside.
    xs, ws, kw = HALF_CONV[case]
    x16, w16, b16 = tp.randn(*xs).to(dtype), tp.randn(*ws).to(dtype), tp.randn(ws[0]).to(dtype)
    x, w, b = (t.float().requires_grad_(True) for t in (x16, w16, b16))
    y = F.conv2d(x, w, b, **kw)
    g = tp.randn(*y.shape).to(dtype)
    y.backward(g.float())
    xc, wc = _leaf(x16), _leaf(w16)
    yc = F.conv2d(xc, wc, b16.to("cuda"), **kw)
    assert yc.dtype == dtype
    yc.backward(g.to("cuda"))
    eps = 2.0 ** -7 if dtype == tp.bfloat16 else 2.0 ** -10
    for got, want in ((yc, y.detach()), (xc.grad, x.grad), (wc.grad, w.grad)):
        assert got.dtype == dtype and tuple(got.shape) == tuple(want.shape)
        want = want.numpy()
        np.testing.assert_allclose(got.detach().float().cpu().numpy(), want, rtol=2 * eps, atol=2 * eps * np.abs(want).max())


@gpu
def test_conv2d_16bit_without_cudnn_names_operator_and_dtype():
    before = tp.backends.cudnn.enabled
    tp.backends.cudnn.enabled = False
    try:
        x = tp.randn(1, 2, 5, 5).to(tp.bfloat16).to("cuda")
        w = tp.randn(3, 2, 3, 3).to(tp.bfloat16).to("cuda")
        with pytest.raises(NotImplementedError, match=r"conv2d.*cuda"):
            F.conv2d(x, w)
    finally:
        tp.backends.cudnn.enabled = before


POOL = [((2, 3, 9, 11), dict(kernel_size=3, stride=2, padding=1)),
        ((1, 2, 8, 8), dict(kernel_size=2)),
        ((2, 7, 10), dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 1), ceil_mode=True))]


@gpu
@pytest.mark.parametrize("case", range(len(POOL)))
def test_max_pool_values_indices_and_gradient(case):
    shape, kw = POOL[case]
    x = tp.randn(*shape, requires_grad=True)
    y, idx = F.max_pool2d(x, return_indices=True, **kw)
    g = tp.randn(*y.shape)
    y.backward(g)
    xc = _leaf(x)
    yc, ic = F.max_pool2d(xc, return_indices=True, **kw)
    _close(yc, y.detach())
    assert ic.dtype == tp.int64 and np.array_equal(ic.cpu().numpy(), idx.numpy())
    yc.backward(g.to("cuda"))
    _close(xc.grad, x.grad)


@gpu
def test_max_pool_overlapping_windows_and_dilation():
    x = tp.randn(2, 2, 9, 9, requires_grad=True)
    kw = dict(kernel_size=3, stride=1, dilation=2)
    y = F.max_pool2d(x, **kw)
    y.sum().backward()
    xc = _leaf(x)
    yc = F.max_pool2d(xc, **kw)
    yc.sum().backward()
    _close(yc, y.detach())
    _close(xc.grad, x.grad)


@gpu
@pytest.mark.parametrize("kw", [dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
                                dict(kernel_size=2, ceil_mode=True, stride=2),
                                dict(kernel_size=3, divisor_override=5, padding=1)])
def test_avg_pool_and_gradient(kw):
    x = tp.randn(2, 3, 9, 7, requires_grad=True)
    y = F.avg_pool2d(x, **kw)
    g = tp.randn(*y.shape)
    y.backward(g)
    xc = _leaf(x)
    yc = F.avg_pool2d(xc, **kw)
    _close(yc, y.detach())
    yc.backward(g.to("cuda"))
    _close(xc.grad, x.grad)


@gpu
@pytest.mark.parametrize("shape,out", [((2, 3, 10, 9), 1), ((2, 3, 10, 9), (3, 2)), ((2, 3, 10, 9), (4, 5)),
                                       ((2, 3, 10, 9), 7), ((3, 5, 33, 40), 1), ((3, 5, 33, 40), (2, 3))])
def test_adaptive_avg_pool_and_gradient(shape, out):
    # Large windows (33x40 into 1 or 2x3) take the warp-per-output kernel.
    x = tp.randn(*shape, requires_grad=True)
    y = F.adaptive_avg_pool2d(x, out)
    g = tp.randn(*y.shape)
    y.backward(g)
    xc = _leaf(x)
    yc = F.adaptive_avg_pool2d(xc, out)
    _close(yc, y.detach())
    yc.backward(g.to("cuda"))
    _close(xc.grad, x.grad)


@gpu
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_output_running_stats_and_gradients(training):
    x = tp.randn(4, 3, 5, 6, requires_grad=True) * 2 + 1
    x = x.detach().requires_grad_(True)
    w = tp.randn(3, requires_grad=True)
    b = tp.randn(3, requires_grad=True)
    rm, rv = tp.randn(3), tp.rand(3) + 0.5
    rmc, rvc = rm.to("cuda"), rv.to("cuda")
    y = F.batch_norm(x, rm, rv, w, b, training=training, momentum=0.2, eps=1e-4)
    g = tp.randn(*y.shape)
    y.backward(g)
    xc, wc, bc = _leaf(x), _leaf(w), _leaf(b)
    yc = F.batch_norm(xc, rmc, rvc, wc, bc, training=training, momentum=0.2, eps=1e-4)
    _close(yc, y.detach())
    _close(rmc, rm)
    _close(rvc, rv)
    yc.backward(g.to("cuda"))
    for got, want in ((xc.grad, x.grad), (wc.grad, w.grad), (bc.grad, b.grad)):
        _close(got, want)


@gpu
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_and_nll_gradient(reduction, weighted):
    x = tp.randn(6, 5, requires_grad=True)
    t = tp.tensor([0, 4, 2, -100, 1, 2])
    wt = tp.rand(5) + 0.5 if weighted else None
    y = F.cross_entropy(x, t, weight=wt, reduction=reduction)
    g = tp.randn(*y.shape) if y.dim() else tp.tensor(0.7)
    y.backward(g)
    xc = _leaf(x)
    yc = F.cross_entropy(xc, t.to("cuda"), weight=wt.to("cuda") if weighted else None, reduction=reduction)
    _close(yc, y.detach())
    yc.backward(g.to("cuda"))
    _close(xc.grad, x.grad)


@gpu
def test_nll_loss_with_spatial_dims():
    x = tp.randn(2, 4, 3, 5).log_softmax(1)
    t = tp.randint(0, 4, (2, 3, 5))
    _close(F.nll_loss(x.to("cuda"), t.to("cuda")), F.nll_loss(x, t))


def _cnn(x, w1, b1, w2, rm, rv, g, bb):
    y = F.conv2d(x, w1, b1, padding=1)
    y = F.batch_norm(y, rm, rv, g, bb, training=False)
    y = F.max_pool2d(F.relu(y), 2)
    y = F.conv2d(y, w2, stride=2, padding=1, groups=2)
    return F.adaptive_avg_pool2d(F.relu(y), 1).flatten(1)


@gpu
def test_cnn_under_tp_compile_matches_eager(conv_impl):
    args = [tp.randn(2, 3, 16, 16), tp.randn(8, 3, 3, 3), tp.randn(8), tp.randn(6, 4, 3, 3),
            tp.randn(8), tp.rand(8) + 0.5, tp.randn(8), tp.randn(8)]
    f = tp.compile(_cnn, strict_native=True)
    cu = [a.to("cuda") for a in args]
    want = _cnn(*args)
    _close(f(*cu), want)
    _close(f(*cu), want)


def test_cuda_region_adds_the_conv_bias_in_the_pointwise_tail():
    # No GPU needed: the region's plan. The library call convolves without the
    # bias and the kernel after it (relu) adds it, instead of a separate pass.
    g = tp._C._capture(lambda x, w, b: F.relu(F.conv2d(x, w, b, padding=1)),
                       tp.randn(2, 3, 8, 8), tp.randn(4, 3, 3, 3), tp.randn(4))
    assert [k[0] for k in tp._C._stax_cuda_kernels(g)] == ["fused_conv2d_relu_0"]


@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.bfloat16])
def test_compiled_conv_bias_equals_eager(dtype, conv_impl):
    # The compiled region adds the bias after the library call as eager does
    # (one rounding in the output type).
    if dtype == tp.bfloat16 and conv_impl == "im2col":
        pytest.skip("16-bit convolutions need cuDNN")
    x, w, b = (t.to(dtype).to("cuda") for t in (tp.randn(2, 4, 9, 9), tp.randn(6, 2, 3, 3), tp.randn(6)))

    def f(x, w, b):
        return F.conv2d(x, w, b, padding=1, groups=2), F.relu(F.conv2d(x, w, b, stride=2, groups=2))

    got = tp.compile(f, strict_native=True)(x, w, b)
    tol = 1e-6 if dtype == tp.float32 else 2.0 ** -7
    for g_, w_ in zip(got, f(x, w, b)):
        assert g_.dtype == dtype
        w_ = w_.float().cpu().numpy()
        np.testing.assert_allclose(g_.float().cpu().numpy(), w_, rtol=tol, atol=tol * np.abs(w_).max())


@gpu
def test_operator_without_cuda_kernel_names_operator_and_device():
    x = tp.ones(1, 1, 4, 4, dtype=tp.int64).to("cuda")
    w = tp.ones(1, 1, 2, 2, dtype=tp.int64).to("cuda")
    with pytest.raises(NotImplementedError, match=r"conv2d.*cuda"):
        F.conv2d(x, w)
