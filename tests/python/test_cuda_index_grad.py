"""The accumulating and writing index operators on CUDA (cuda/index_kernels.cpp):
index_add(_), scatter_add(_), scatter(_) (src, value, reduce='add'),
index_put(_) with accumulate for 16-bit floats and integers, and advanced
indexing x[i] / x[:, i] with one index tensor; through them the gradients of
index_select, gather, x[i] and embedding on the device, eagerly and in a
compiled (strict_native) training step. Results against the CPU eager
operators and, where PyTorch sees a GPU, against torch on CUDA; out-of-range
indices raise IndexError naming the operator, the index and the size, and the
process goes on (synchronous checks here: the asynchronous report at the next
synchronization is test_cuda_index_async.py's)."""
import numpy as np
import pytest
import tensorplay as tp
import tensorplay.nn.functional as F
from test_cuda_index_async import _sync_checks

gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")
nvrtc = pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed")

FLOATS = [tp.float32, tp.float64, tp.bfloat16, tp.float16]
TOL = {tp.float32: 1e-5, tp.float64: 1e-12, tp.bfloat16: 3e-2, tp.float16: 3e-3}


def _np(t):
    t = t.detach().cpu()
    return t.float().numpy() if t.dtype in (tp.bfloat16, tp.float16) else t.numpy()


def _close(got, want, tol=1e-5):
    assert got.device.type == "cuda"
    assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape)
    if tol == 0:
        np.testing.assert_array_equal(_np(got), _np(want))
    else:
        np.testing.assert_allclose(_np(got), _np(want), rtol=tol, atol=tol)


def _torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


@nvrtc
@pytest.mark.parametrize("arch", [80, 90])
def test_index_kernel_sources_compile(arch):
    names = [n for n, _ in tp.cuda._kernel_sources() if n.startswith(("tp_index_", "tp_gather_", "tp_scatter_"))]
    # every accumulating dtype, for both index dtypes
    for dt in ["float32", "float64", "float16", "bfloat16", "int32", "int64"]:
        for it in ["int64", "int32"]:
            assert f"tp_index_add_{dt}_{it}" in names and f"tp_scatter_add_{dt}_{it}" in names
    for name, src in tp.cuda._kernel_sources():
        if name in names:
            assert tp.cuda._nvrtc_compile(src, name, arch)[:4] == b"\x7fELF", name


# ---- forward: against the CPU ----

@gpu
@pytest.mark.parametrize("dtype", FLOATS + [tp.int64, tp.int32])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_add_matches_cpu_with_repeated_indices(dtype, dim):
    tp.manual_seed(1)
    x = (tp.randn(5, 6, 4) * 4).to(dtype)
    i = tp.tensor([0, 3, 3, 1, 3, 0])[: x.shape[dim] + 1] % x.shape[dim]
    shape = list(x.shape)
    shape[dim] = i.shape[0]
    src = (tp.randn(*shape) * 4).to(dtype)
    alpha = 2 if dtype in (tp.int64, tp.int32) else 0.5
    want = tp.index_add(x, dim, i, src, alpha=alpha)
    _close(tp.index_add(x.cuda(), dim, i.cuda(), src.cuda(), alpha=alpha), want, TOL.get(dtype, 0))
    y = x.cuda()
    ptr = y.data_ptr()
    y.index_add_(dim, i.to(tp.int32).cuda(), src.cuda(), alpha=alpha)
    assert y.data_ptr() == ptr
    _close(y, want, TOL.get(dtype, 0))


@gpu
@pytest.mark.parametrize("dtype", FLOATS + [tp.int64])
def test_scatter_add_matches_cpu_with_repeated_indices(dtype):
    tp.manual_seed(2)
    x = tp.randn(4, 7).to(dtype)
    i = tp.tensor([[0, 0, 6, 6, 6], [1, 2, 1, 1, 0], [3, 3, 3, 3, 3]])
    src = tp.randn(3, 6).to(dtype)  # larger than the index: only its [3, 5] corner is read
    want = tp.scatter_add(x, 1, i, src[:, :5].contiguous())
    _close(tp.scatter_add(x.cuda(), 1, i.cuda(), src[:, :5].cuda()), tp.scatter_add(x, 1, i, src[:, :5]),
           TOL.get(dtype, 0))
    _close(tp.scatter_add(x.cuda(), 1, i.cuda(), src.cuda()), tp.scatter_add(x, 1, i, src), TOL.get(dtype, 0))
    y = x.cuda()
    y.scatter_add_(1, i.cuda(), src[:, :5].cuda())
    _close(y, want, TOL.get(dtype, 0))
    # dim 0, a transposed (strided) destination and source
    it = tp.tensor([[0, 1, 1], [2, 3, 0], [3, 3, 3]])
    _close(tp.scatter_add(x.cuda().t(), 0, it.cuda(), src.cuda().t()), tp.scatter_add(x.t(), 0, it, src.t()),
           TOL.get(dtype, 0))
    y = x.cuda().t()  # in place into a strided destination
    y.scatter_add_(0, it.cuda(), src.cuda().t())
    _close(y, tp.scatter_add(x.t(), 0, it, src.t()), TOL.get(dtype, 0))


@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.float64, tp.bfloat16, tp.int64, tp.bool])
def test_scatter_src_value_and_inplace_match_cpu(dtype):
    tp.manual_seed(3)
    x = (tp.randn(3, 5) > 0).to(dtype) if dtype == tp.bool else (tp.randn(3, 5) * 3).to(dtype)
    src = (tp.randn(3, 5) * 3).to(dtype)
    i = tp.tensor([[4, 0, 2], [1, 3, 0], [2, 2 + 1, 4]])  # distinct along dim 1 in each row: one writer
    _close(tp.scatter(x.cuda(), 1, i.cuda(), src.cuda()), tp.scatter(x, 1, i, src), 0)
    _close(tp.scatter(x.cuda(), 1, i.cuda(), 1), tp.scatter(x, 1, i, 1), 0)
    y = x.cuda()
    y.scatter_(1, i.cuda(), src.cuda())
    _close(y, tp.scatter(x, 1, i, src), 0)
    y = x.cuda()
    y.scatter_(1, i.cuda(), 0)
    _close(y, tp.scatter(x, 1, i, 0), 0)


@gpu
def test_scatter_reduce_add_matches_cpu_and_multiply_is_named_as_missing():
    x, src = tp.randn(3, 4), tp.randn(3, 4)
    i = tp.tensor([[0, 0, 3], [1, 1, 1], [2, 3, 2]])
    _close(tp.scatter(x.cuda(), 1, i.cuda(), src.cuda(), reduce="add"), tp.scatter(x, 1, i, src, reduce="add"))
    with pytest.raises(NotImplementedError, match=r"scatter.*cuda:0"):
        tp.scatter(x.cuda(), 1, i.cuda(), src.cuda(), reduce="multiply")


@gpu
@pytest.mark.parametrize("dtype", [tp.float16, tp.bfloat16, tp.float64, tp.int64, tp.int32])
def test_index_put_accumulate_16_bit_and_integer(dtype):
    tp.manual_seed(4)
    base = (tp.randn(9, 6) * 3).to(dtype)
    i = tp.tensor([1, 1, 5, -1, 1, 8, 5])  # negative: counted from the end (advanced indexing)
    v = (tp.randn(7, 6) * 3).to(dtype)
    want = tp.index_put(base, (i,), v, True)
    _close(tp.index_put(base.cuda(), (i.cuda(),), v.cuda(), True), want, TOL.get(dtype, 0))
    y = base.cuda()
    y.index_put_((i.cuda(),), v.cuda(), True)
    _close(y, want, TOL.get(dtype, 0))


@gpu
def test_16_bit_accumulation_into_neighbouring_elements_is_exact():
    # Neighbouring 16-bit elements share one 32-bit word: the compare-and-swap
    # loop must not lose either half's sum. Small integers are exact in fp16/bf16.
    for dtype in (tp.float16, tp.bfloat16):
        x = tp.zeros(8, 2, dtype=dtype).cuda()
        i = tp.tensor([0, 1, 0, 1] * 16).cuda()
        src = tp.ones(8, 64, dtype=dtype).cuda()
        got = tp.index_add(x, 1, i, src)  # columns 0 and 1 of each row: the two halves of a word
        assert _np(got).tolist() == [[32.0, 32.0]] * 8


@gpu
def test_advanced_indexing_with_one_index_tensor_and_its_gradient():
    tp.manual_seed(5)
    x = tp.randn(6, 5, 3)
    i = tp.tensor([[0, -1], [2, 2]])
    for key in [(i,), (slice(None), i), (slice(None), slice(None), tp.tensor([2, 0, 2]))]:
        xc = x.cuda().requires_grad_()
        xh = x.clone().requires_grad_()
        key_c = tuple(k.cuda() if isinstance(k, tp.Tensor) else k for k in key)
        yc, yh = xc[key_c], xh[key]
        _close(yc, yh)
        g = tp.randn(*yh.shape)
        yh.backward(g)
        yc.backward(g.cuda())
        _close(xc.grad, xh.grad)
    # a host index list on a device tensor, and an indexed write
    _close(x.cuda()[[4, 0, 4]], x[[4, 0, 4]])
    y = x.cuda()
    y[tp.tensor([5, 1]).cuda()] = 2.0
    want = x.clone()
    want[tp.tensor([5, 1])] = 2.0
    _close(y, want)


# ---- gradients of the row and dim-wise readers on the device ----

@gpu
@pytest.mark.parametrize("dtype", FLOATS)
def test_index_select_gather_embedding_gradients_match_cpu(dtype):
    tp.manual_seed(6)
    x = tp.randn(7, 5).to(dtype)
    i = tp.tensor([6, 0, 6, 6, 2])  # repeats: the gradient rows add up
    gi = tp.tensor([[0, 0, 4], [1, 1, 1], [3, 3, 0], [4, 2, 2], [0, 0, 0], [1, 2, 3], [4, 4, 4]])
    i3, gi4 = i[:3] % 5, gi[:4] % 7
    for f in [lambda t: tp.index_select(t, 0, i_), lambda t: tp.index_select(t, 1, i3_),
              lambda t: tp.gather(t, 1, gi_), lambda t: tp.gather(t, 0, gi4_),
              lambda t: F.embedding(i_, t)]:
        grads = []
        for dev in ["cpu", "cuda"]:
            i_, gi_, i3_, gi4_ = i.to(dev), gi.to(dev), i3.to(dev), gi4.to(dev)
            t = x.clone().to(dev).requires_grad_()  # a fresh leaf per case on both devices
            y = f(t)
            tp.manual_seed(7)
            y.backward(tp.randn(*y.shape).to(dtype).to(dev))
            grads.append(t.grad)
        assert grads[1].device.type == "cuda"
        _close(grads[1], grads[0], TOL[dtype])


@gpu
def test_scatter_and_index_add_gradients_match_cpu():
    tp.manual_seed(8)
    x, src, big = tp.randn(4, 6), tp.randn(4, 3), tp.randn(5, 4)  # big: larger than the index
    i = tp.tensor([[5, 0, 2], [1, 4, 3], [0, 4, 5], [2, 3, 1]])  # one writer per position
    ii = tp.tensor([5, 0, 5])
    for f, s in [(lambda a, b: tp.scatter_add(a, 1, i_, b), src), (lambda a, b: tp.scatter(a, 1, i_, b), src),
                 (lambda a, b: tp.index_add(a, 1, ii_, b, alpha=3), src),
                 (lambda a, b: tp.scatter(a, 1, i_, b), big), (lambda a, b: tp.scatter_add(a, 1, i_, b), big)]:
        got = []
        for dev in ["cpu", "cuda"]:
            i_, ii_ = i.to(dev), ii.to(dev)
            a, b = x.clone().to(dev).requires_grad_(), s.clone().to(dev).requires_grad_()  # fresh leaves
            y = f(a, b)
            (y * y).sum().backward()
            got.append((y, a.grad, b.grad))
        for c, h in zip(got[1], got[0]):
            _close(c, h)


@gpu
def test_empty_indices():
    x = tp.randn(4, 3).cuda().requires_grad_()
    e = tp.tensor([], dtype=tp.int64).cuda()
    y = tp.index_select(x, 0, e)
    assert tuple(y.shape) == (0, 3)
    y.sum().backward()
    assert _np(x.grad).tolist() == [[0.0] * 3] * 4
    z = tp.randn(4, 3).cuda()
    _close(tp.index_add(z, 0, e, tp.randn(0, 3).cuda()), z.cpu())
    ge = tp.zeros(4, 0, dtype=tp.int64).cuda()
    assert tuple(tp.gather(z, 1, ge).shape) == (4, 0)
    _close(tp.scatter_add(z, 1, ge, tp.randn(4, 0).cuda()), z.cpu())
    _close(tp.index_put(z, (e,), tp.randn(0, 3).cuda(), True), z.cpu())


@gpu
@pytest.mark.parametrize("it", [tp.uint8, tp.int8, tp.int16])
def test_narrow_index_dtypes_gather_scatter_add(it):
    # gather's gradient is scatter_add with the same index: an empty uint8 index (which
    # PyTorch accepts) had no CUDA kernel; non-empty narrow indices (accepted by the CPU
    # operators) are widened to int64 on the device, results as on the CPU.
    x = tp.randn(4, 7).cuda().requires_grad_()
    e = tp.zeros(4, 0, dtype=it)
    g = tp.gather(x, 1, e.cuda())
    assert tuple(g.shape) == (4, 0)
    g.sum().backward()
    assert _np(x.grad).tolist() == [[0.0] * 7] * 4
    i = tp.tensor([[0, 0, 6, 5], [1, 2, 1, 1], [3, 3, 3, 3]], dtype=it)
    src = tp.randn(3, 4)
    xc = x.detach().cpu()
    _close(tp.scatter_add(x.detach(), 1, i.cuda(), src.cuda()), tp.scatter_add(xc, 1, i, src))
    _close(tp.scatter(x.detach(), 1, i[:, :1].cuda(), src[:, :1].cuda()), tp.scatter(xc, 1, i[:, :1], src[:, :1]))
    y = x.detach().clone()
    y.scatter_add_(1, i.cuda(), src.cuda())
    _close(y, tp.scatter_add(xc, 1, i, src))
    xg = x.detach().clone().requires_grad_()
    out = tp.gather(xg, 1, i.cuda())
    _close(out, tp.gather(xc, 1, i), 0)
    out.sum().backward()
    xg_cpu = xc.clone().requires_grad_()
    tp.gather(xg_cpu, 1, i).sum().backward()
    _close(xg.grad, xg_cpu.grad)


# ---- bad indices ----

@gpu
@pytest.mark.parametrize("bad", [9, -10])
def test_out_of_range_raises_index_error_naming_op_index_and_size(bad):
    x = tp.randn(9, 4).cuda()
    b = tp.tensor([0, bad, 1]).cuda()
    cases = [
        ("index_add", lambda: tp.index_add(x, 0, b, tp.ones(3, 4).cuda())),
        ("index_add_", lambda: x.clone().index_add_(0, b, tp.ones(3, 4).cuda())),
        ("scatter_add", lambda: tp.scatter_add(x.t(), 1, b.reshape(1, 3), tp.ones(1, 3).cuda())),
        ("scatter", lambda: tp.scatter(x.t(), 1, b.reshape(1, 3), 1.0)),
        ("gather", lambda: tp.gather(x.t(), 1, b.reshape(1, 3))),
        ("index_select", lambda: tp.index_select(x, 0, b)),
    ]
    with _sync_checks():
        for op, f in cases:
            with pytest.raises(IndexError, match=rf"^{op}.*: index {bad} is out of bounds for dimension \d with size 9"):
                f()
        # advanced indexing counts -9..8 as in range
        with pytest.raises(IndexError, match=rf"index: index {bad} is out of bounds for dimension 0 with size 9"):
            x[b]
    with _sync_checks(False):  # the same messages at the next synchronization
        for op, f in cases:
            f()
            with pytest.raises(RuntimeError, match=rf"^{op}.*: index {bad} is out of bounds for dimension \d with size 9"):
                tp.cuda.synchronize()
    # the process and the device go on
    _close(tp.index_add(x, 0, tp.tensor([8, 8]).cuda(), tp.ones(2, 4).cuda()),
           tp.index_add(x.cpu(), 0, tp.tensor([8, 8]), tp.ones(2, 4)))


@gpu
def test_negative_dim_wise_indices_are_out_of_range_as_on_the_cpu():
    x = tp.randn(5, 3)
    for dev in ["cpu", "cuda"]:
        with _sync_checks(), pytest.raises(IndexError, match="index -1 is out of bounds"):
            tp.index_add(x.to(dev), 0, tp.tensor([-1]).to(dev), tp.ones(1, 3).to(dev))
        with _sync_checks(), pytest.raises(IndexError, match="index -1 is out of bounds"):
            tp.scatter_add(x.to(dev), 0, tp.tensor([[-1, 0, 0]]).to(dev), tp.ones(1, 3).to(dev))


# ---- against torch on CUDA ----

@gpu
def test_matches_torch_on_cuda():
    torch = _torch_cuda()
    tp.manual_seed(9)
    x, src = tp.randn(6, 5), tp.randn(6, 5)
    i = tp.tensor([[0, 4, 4, 1, 2], [3, 3, 3, 3, 3], [0, 1, 2, 3, 4], [4, 0, 0, 0, 1], [2, 2, 1, 1, 0], [1, 1, 1, 1, 1]])
    r = tp.tensor([5, 0, 5, 2])
    T = lambda t: torch.from_numpy(t.numpy()).cuda()
    want = torch.zeros(6, 5, device="cuda").scatter_add(1, T(i), T(src))
    np.testing.assert_allclose(_np(tp.zeros(6, 5).cuda().scatter_add(1, i.cuda(), src.cuda())), want.cpu().numpy(),
                               rtol=1e-5, atol=1e-6)
    want = T(x).index_add(0, T(r), T(src[:4]), alpha=2)
    np.testing.assert_allclose(_np(tp.index_add(x.cuda(), 0, r.cuda(), src[:4].cuda(), alpha=2)), want.cpu().numpy(),
                               rtol=1e-5, atol=1e-6)
    tx = T(x).requires_grad_()
    torch.gather(tx, 1, T(i)).pow(2).sum().backward()
    cx = x.cuda().requires_grad_()
    tp.gather(cx, 1, i.cuda()).pow(2).sum().backward()
    np.testing.assert_allclose(_np(cx.grad), tx.grad.cpu().numpy(), rtol=1e-5, atol=1e-6)


# ---- a compiled training step ----

class _Picker(tp.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = tp.nn.Parameter(tp.randn(12, 8))
        self.proj = tp.nn.Linear(8, 8)

    def forward(self, rows, cols):
        h = self.proj(tp.index_select(self.table, 0, rows)).tanh()
        return tp.gather(h, 1, cols)


@gpu
def test_compiled_training_step_with_index_select_and_gather_matches_cpu():
    tp.manual_seed(10)
    cpu = _Picker()
    cu = _Picker().cuda()
    for (n, p), q in zip(cu.named_parameters(), cpu.parameters()):
        p.data = q.detach().clone().cuda()
    rows, cols = tp.tensor([3, 3, 11, 0, 3]), tp.tensor([[0, 7], [1, 1], [2, 6], [7, 7], [0, 0]])
    loss = lambda m, r, c: (m(r, c) ** 2).mean()
    loss(cpu, rows, cols).backward()
    step = tp.compile(lambda r, c: loss(cu, r, c), strict_native=True)
    lg = step(rows.cuda(), cols.cuda())
    _close(lg, loss(cpu, rows, cols).detach(), 1e-5)
    lg.backward()
    pc = dict(cpu.named_parameters())
    for n, p in cu.named_parameters():
        _close(p.grad, pc[n].grad, 1e-4)
    # a second step reuses the compiled code with new index values
    for p in list(cu.parameters()) + list(cpu.parameters()):
        p.grad = None
    rows2 = tp.tensor([1, 1, 1, 1, 1])
    loss(cpu, rows2, cols).backward()
    lg = step(rows2.cuda(), cols.cuda())
    lg.backward()
    for n, p in cu.named_parameters():
        _close(p.grad, pc[n].grad, 1e-4)


# ---- CUDA graphs: the checked kernels' status is checked at the next
# synchronization (with synchronous checks: after each replay) ----

@gpu
@pytest.mark.parametrize("sync", [False, True])
def test_user_cuda_graph_with_checked_index_kernels_raises_on_replay_and_recovers(sync):
    tp.manual_seed(11)
    w = tp.randn(30, 4)
    wc = w.cuda()
    idx = tp.tensor([1, 2, 3]).cuda()
    z = tp.zeros(3, 30).cuda()
    F.embedding(idx, wc), z.scatter(1, idx.reshape(3, 1), 1.0)  # warm-up: kernels compiled and loaded
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):  # before the device status, the per-kernel read-back refused the capture
        out = F.embedding(idx, wc)
        hot = z.scatter(1, idx.reshape(3, 1), 1.0)  # the fill value: memsets recorded in the graph
    for rows in ([4, 29, 5], [0, 0, 7]):
        idx.copy_(tp.tensor(rows).cuda())
        g.replay()
        _close(out, F.embedding(tp.tensor(rows), w))
        _close(hot, tp.zeros(3, 30).scatter(1, tp.tensor(rows).reshape(3, 1), 1.0))
    idx.copy_(tp.tensor([4, 30, 5]).cuda())
    with _sync_checks(sync):
        if sync:
            with pytest.raises(IndexError, match="^embedding: index 30 is out of bounds for dimension 0 with size 30"):
                g.replay()
        else:
            g.replay()  # queued: the error comes at the next synchronization
            with pytest.raises(RuntimeError, match="^embedding: index 30 is out of bounds for dimension 0 with size 30"):
                tp.cuda.synchronize()
    idx.copy_(tp.tensor([9, 8, 7]).cuda())  # the report cleared the status
    g.replay()
    _close(out, F.embedding(tp.tensor([9, 8, 7]), w))


@gpu
def test_reduce_overhead_region_with_an_embedding_is_captured_and_checks_indices():
    tp.manual_seed(12)
    e = tp.nn.Embedding(30, 8).cuda()
    w = e.weight.detach().cpu()
    f = tp.compile(lambda i, c: tp.gather(e(i), 1, c).squeeze(1) * 2.0, mode="reduce-overhead")
    i, c = tp.tensor([1, 29, 3]).cuda(), tp.zeros(3, 1, dtype=tp.int64).cuda()
    with tp.no_grad():
        before = tp.cuda._graph_region_stats()
        for rows in ([1, 29, 3], [0, 5, 5], [7, 7, 2], [3, 2, 1]):
            i.copy_(tp.tensor(rows).cuda())
            np.testing.assert_allclose(_np(f(i, c)), _np(w[tp.tensor(rows), 0] * 2.0), rtol=1e-6)
        after = tp.cuda._graph_region_stats()
        assert after["captures"] - before["captures"] == 1
        assert after["replays"] - before["replays"] >= 2
        i.copy_(tp.tensor([1, -31, 2]).cuda())
        with _sync_checks(), pytest.raises(IndexError, match="embedding: index -31 is out of bounds for dimension 0 with size 30"):
            f(i, c)
        f(i, c)  # asynchronous: reported at the next synchronization
        with pytest.raises(RuntimeError, match="embedding: index -31 is out of bounds for dimension 0 with size 30"):
            tp.cuda.synchronize()
        i.copy_(tp.tensor([6, 6, 0]).cuda())
        np.testing.assert_allclose(_np(f(i, c)), _np(w[tp.tensor([6, 6, 0]), 0] * 2.0), rtol=1e-6)
