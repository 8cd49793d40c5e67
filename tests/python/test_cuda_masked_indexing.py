"""Indexing whose result size depends on the data, and scatter_reduce, on CUDA
(cuda/mask_kernels.cpp, cuda/scatter_reduce.cpp): nonzero / argwhere /
where(cond) / nonzero(as_tuple=True), masked_select and bool masks in x[...]
(read, write, accumulate), advanced indexing with several index tensors
(x[i, j], x[:, i, j], x[i, :, j], broadcast, negative, int32 and host
indices), index_put with several index tensors, and scatter_reduce (sum, prod,
mean, amax, amin; include_self both ways). Every result against the CPU
operator: bit for bit where the CPU's order does not matter (moves, integers,
amax/amin), within float tolerance for float sums and products; gradients
against the CPU's; indices out of range raise IndexError naming the operator,
the index, the dim and its size. Without a GPU only the NVRTC compilation of
every kernel source runs."""
import numpy as np
import pytest
import tensorplay as tp
from test_cuda_index_async import _sync_checks

gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")
nvrtc = pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed")

DTYPES = [tp.float32, tp.float16, tp.bfloat16, tp.float64, tp.int64, tp.int32, tp.bool]
PREFIXES = ("tp_nonzero_", "tp_advidx_", "tp_sreduce_")


def _np(t):
    t = t.detach().cpu()
    return t.float().numpy() if t.dtype in (tp.bfloat16, tp.float16) else t.numpy()


def _same(got, want):
    """Bit for bit (NaN equal to NaN), same dtype and shape, got on the device."""
    assert got.device.type == "cuda"
    assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape), (got.dtype, got.shape, want.shape)
    np.testing.assert_array_equal(_np(got), _np(want))


def _close(got, want, tol):
    assert got.device.type == "cuda"
    assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(_np(got), _np(want), rtol=tol, atol=tol)


def _data(shape, dtype, seed=0):
    """About half zeros; floats also hold a -0.0 (zero for nonzero) and a NaN (not zero)."""
    tp.manual_seed(seed)
    x = tp.randn(*shape)
    x = x * (x.abs() > 0.6).float() * 3
    if dtype == tp.bool:
        return x != 0
    if dtype in (tp.int64, tp.int32):
        return x.to(dtype)
    x = x.to(dtype)
    if x.numel() > 6:
        flat = x.view(-1)
        flat[3] = -0.0
        flat[5] = float("nan")
    return x


@nvrtc
@pytest.mark.parametrize("arch", [80, 90])
def test_mask_and_scatter_reduce_sources_compile(arch):
    names = [n for n, _ in tp.cuda._kernel_sources() if n.startswith(PREFIXES)]
    for reduce in ["sum", "prod", "mean", "amax", "amin"]:
        for dt in ["float32", "float64", "int64", "bool"]:
            assert f"tp_sreduce_{reduce}_{dt}_int64" in names
    for dt in ["float32", "float64", "float16", "bfloat16", "int32", "int64", "bool"]:
        assert f"tp_advidx_acc_{dt}" in names
    assert {"tp_nonzero_count_b2_f", "tp_nonzero_write_b1_i", "tp_advidx_offsets_int32"} <= set(names)
    for name, src in tp.cuda._kernel_sources():
        if name in names:
            assert tp.cuda._nvrtc_compile(src, name, arch)[:4] == b"\x7fELF", name


# ---- nonzero and its aliases ----

@gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7,), (5, 9), (3, 4, 70), (2, 3, 4, 5)])
def test_nonzero_matches_cpu(dtype, shape):
    x = _data(shape, dtype, seed=len(shape))
    _same(tp.nonzero(x.cuda()), tp.nonzero(x))


@gpu
def test_nonzero_many_blocks_and_layouts():
    # > 1024 tiles of 256: blocks take runs of tiles; the order stays row-major
    tp.manual_seed(5)
    x = tp.rand((1 << 20) + 37) < 0.3
    _same(tp.nonzero(x.cuda()), tp.nonzero(x))
    y = tp.randn(300, 500)
    y = y * (y > 0.8).float()
    _same(tp.nonzero(y.cuda()), tp.nonzero(y))
    # strided, transposed and expanded (stride 0) inputs are read through their strides
    _same(tp.nonzero(y.cuda().t()), tp.nonzero(y.t()))
    _same(tp.nonzero(y.cuda()[1::3, ::7]), tp.nonzero(y[1::3, ::7]))
    e = (tp.arange(4) % 2).reshape(4, 1).expand(4, 6)
    _same(tp.nonzero(e.cuda()), tp.nonzero(e))


@gpu
def test_nonzero_edges_and_aliases():
    for x in [tp.zeros(0, 3), tp.zeros(4, 0, 2), tp.tensor(2.0), tp.tensor(0.0), tp.tensor(-0.0), tp.ones(3, 5),
              tp.zeros(3, 5), tp.tensor([float("nan"), -0.0, 0.0, 1e-40])]:
        _same(tp.nonzero(x.cuda()), tp.nonzero(x))
    x = _data((4, 6), tp.float32, 3)
    _same(tp.argwhere(x.cuda()), tp.argwhere(x))
    for got, want in zip(tp.where(x.cuda() > 0), tp.where(x > 0)):
        _same(got, want)
    for got, want in zip(x.cuda().nonzero(as_tuple=True), x.nonzero(as_tuple=True)):
        _same(got, want)
    assert tp.count_nonzero(x.cuda()).item() == tp.nonzero(x).shape[0]


# ---- masks: masked_select, x[mask], x[mask] = v ----

@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.float16, tp.bfloat16, tp.int64, tp.bool])
def test_mask_reads_match_cpu(dtype):
    x = _data((4, 5, 6), dtype, 1)
    m3 = _data((4, 5, 6), tp.bool, 2)
    m2 = _data((4, 5), tp.bool, 3)
    m2b = _data((5, 6), tp.bool, 4)
    xc = x.cuda()
    _same(tp.masked_select(xc, m3.cuda()), tp.masked_select(x, m3))
    _same(xc[m3.cuda()], x[m3])
    _same(xc[m2.cuda()], x[m2])          # a mask over the leading dims: two index tensors
    _same(xc[:, m2b.cuda()], x[:, m2b])  # after a whole dim
    _same(xc[m2.cuda(), 1:4], x[m2, 1:4])
    _same(tp.masked_select(xc, m2b.cuda()), tp.masked_select(x, m2b))  # the mask broadcasts
    _same(tp.masked_select(xc[0, :, :1], m2b.cuda()), tp.masked_select(x[0, :, :1], m2b))  # x broadcasts
    _same(xc[m3], x[m3])                 # a host mask for a device tensor
    _same(xc.permute(2, 0, 1)[m3.permute(2, 0, 1).cuda()], x.permute(2, 0, 1)[m3.permute(2, 0, 1)])


@gpu
def test_mask_reads_empty_full_and_0d():
    x = _data((3, 4), tp.float32, 6)
    for m in [tp.zeros(3, 4, dtype=tp.bool), tp.ones(3, 4, dtype=tp.bool)]:
        _same(x.cuda()[m.cuda()], x[m])
        _same(tp.masked_select(x.cuda(), m.cuda()), tp.masked_select(x, m))
    for keep in [True, False]:
        s = tp.tensor(3.5)
        _same(tp.masked_select(s.cuda(), tp.tensor(keep).cuda()), tp.masked_select(s, tp.tensor(keep)))
    _same(x.cuda()[True], x[True])
    _same(x.cuda()[False], x[False])


@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.bfloat16, tp.int64, tp.int32, tp.bool])
def test_mask_writes_match_cpu(dtype):
    x = _data((4, 5, 6), dtype, 7)
    m3 = _data((4, 5, 6), tp.bool, 8)
    m2 = _data((4, 5), tp.bool, 9)
    m2b = _data((5, 6), tp.bool, 10)
    vals = _data((int(m3.sum().item()),), dtype, 11)
    row = _data((6,), dtype, 12)
    cases = [
        (lambda t, d: t.__setitem__(m3.to(d), vals.to(d)), "3-d mask, one value each"),
        (lambda t, d: t.__setitem__(m2.to(d), row.to(d)), "2-d leading mask, a broadcast row"),
        (lambda t, d: t.__setitem__((slice(None), m2b.to(d)), 1), "mask after a whole dim, a number"),
        (lambda t, d: t.__setitem__(m3.to(d), vals[0].to(d)), "a 0-d device value"),
    ]
    for write, what in cases:
        want = x.clone()
        write(want, "cpu")
        got = x.cuda()
        ptr = got.data_ptr()
        write(got, "cuda")
        assert got.data_ptr() == ptr, what
        _same(got, want)
    # into a strided (transposed) destination, in place
    want = x.clone().permute(2, 1, 0)
    want[m3.permute(2, 1, 0)] = vals
    got = x.cuda().permute(2, 1, 0)
    got[m3.permute(2, 1, 0).cuda()] = vals.cuda()
    _same(got, want)


@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.float16, tp.bfloat16, tp.int64, tp.int32, tp.bool])
def test_index_put_several_indices_accumulate(dtype):
    tp.manual_seed(13)
    x = _data((5, 6, 3), dtype, 14)
    i = tp.tensor([0, 4, 4, -1, 2, 0, 4])
    j = tp.tensor([1, 5, 5, 5, -6, 1, 5])
    v = _data((7, 3), dtype, 15)
    if dtype in (tp.float32, tp.float16, tp.bfloat16):
        v = tp.randn(7, 3).to(dtype)  # no NaN: the sum's order is free on the device
    want = tp.index_put(x, (i, j), v, accumulate=True)
    got = tp.index_put(x.cuda(), (i.cuda(), j.to(tp.int32).cuda()), v.cuda(), accumulate=True)
    tol = {tp.float32: 1e-6, tp.float16: 1e-2, tp.bfloat16: 2e-2}.get(dtype, 0)
    if tol:
        _close(got, want, tol)
    else:
        _same(got, want)
    y = x.cuda()
    y.index_put_((i.cuda(), j.cuda()), v.cuda(), accumulate=True)
    _close(y, want, tol) if tol else _same(y, want)
    # without accumulate and distinct positions: bit for bit, out of place and in place
    iu, ju = tp.tensor([0, 4, 3, 1]), tp.tensor([[2], [0], [5]])
    vu = _data((3, 4, 3), dtype, 16)
    _same(tp.index_put(x.cuda(), (iu.cuda(), ju.cuda()), vu.cuda()), tp.index_put(x, (iu, ju), vu))
    y = x.cuda()
    y.index_put_((iu.cuda(), ju.cuda()), vu.cuda())
    _same(y, tp.index_put(x, (iu, ju), vu))


# ---- several index tensors ----

@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.float16, tp.bfloat16, tp.int64, tp.int32, tp.bool])
def test_several_index_tensors_read_matches_cpu(dtype):
    x = _data((5, 6, 7), dtype, 17)
    i = tp.tensor([0, 4, -1, 2])
    j = tp.tensor([[1], [5], [-6]])  # broadcasts with i to [3, 4]
    xc, ic, jc = x.cuda(), i.cuda(), j.cuda()
    _same(xc[ic, jc], x[i, j])                  # B at the front
    _same(xc[:, jc, ic], x[:, j, i])            # B in the middle
    _same(xc[ic, :, jc], x[i, :, j])            # not adjacent: B first
    _same(xc[ic, j.to(tp.int32).cuda(), 2], x[i, j.to(tp.int32), 2])
    _same(xc[[0, 1, 1], [2, 3, 3]], x[[0, 1, 1], [2, 3, 3]])  # host index lists
    _same(xc.permute(2, 0, 1)[:, ic, jc], x.permute(2, 0, 1)[:, i, j])  # a strided self
    _same(xc[ic[:0], jc[:0]], x[i[:0], j[:0]])  # nothing selected
    _same(xc[tp.tensor(1).cuda(), ic], x[tp.tensor(1), i])  # a 0-d index


@gpu
def test_out_of_range_indices_raise_and_the_process_goes_on():
    # Synchronous checks (tp.cuda.set_sync_checks): IndexError from the call, as on the CPU.
    x = tp.randn(5, 6).cuda()
    with _sync_checks():
        with pytest.raises(IndexError, match=r"index: index 9 is out of bounds for dimension 0 with size 5"):
            x[tp.tensor([0, 9]).cuda(), tp.tensor([1, 1]).cuda()]
        with pytest.raises(IndexError, match=r"index: index -7 is out of bounds for dimension 1 with size 6"):
            x[tp.tensor([0, 1]).cuda(), tp.tensor([1, -7]).cuda()]
        with pytest.raises(IndexError, match=r"index_put_: index 6 is out of bounds for dimension 1 with size 6"):
            x.index_put_((tp.tensor([0]).cuda(), tp.tensor([6]).cuda()), tp.tensor(1.0).cuda(), accumulate=True)
        with pytest.raises(IndexError, match=r"scatter_reduce.two: index 6 is out of bounds for dimension 1 with size 6"):
            tp.scatter_reduce(x, 1, tp.tensor([[0, 6]]).cuda(), tp.ones(1, 2).cuda(), "amax")
    with pytest.raises(IndexError, match="mask"):
        x[tp.ones(4, 6, dtype=tp.bool).cuda()]
    _same(x[tp.tensor([4]).cuda(), tp.tensor([5]).cuda()], x.cpu()[tp.tensor([4]), tp.tensor([5])])


@gpu
def test_out_of_range_indices_are_reported_at_the_next_synchronization():
    # The default (asynchronous) checks: no host sync per call; the next
    # synchronization raises, naming the operator, and clears the status.
    x = tp.randn(5, 6).cuda()
    with _sync_checks(False):
        for call, msg in [
            (lambda: x[tp.tensor([0, 9]).cuda(), tp.tensor([1, 1]).cuda()],
             r"index: index 9 is out of bounds for dimension 0 with size 5"),
            (lambda: x.index_put_((tp.tensor([0]).cuda(), tp.tensor([6]).cuda()), tp.tensor(1.0).cuda(),
                                  accumulate=True),
             r"index_put_: index 6 is out of bounds for dimension 1 with size 6"),
            (lambda: tp.scatter_reduce(x, 1, tp.tensor([[0, 6]]).cuda(), tp.ones(1, 2).cuda(), "amax"),
             r"scatter_reduce.two: index 6 is out of bounds for dimension 1 with size 6"),
        ]:
            call()
            with pytest.raises(RuntimeError, match=msg):
                tp.cuda.synchronize()
            tp.cuda.synchronize()  # cleared
    _same(x[tp.tensor([4]).cuda(), tp.tensor([5]).cuda()], x.cpu()[tp.tensor([4]), tp.tensor([5])])


# ---- scatter_reduce ----

REDUCES = ["sum", "prod", "mean", "amax", "amin"]


def _sr_inputs(dtype, reduce, seed):
    tp.manual_seed(seed)
    idx = tp.randint(0, 6, (4, 9))
    if dtype == tp.bool:
        return tp.rand(4, 6) > 0.5, idx, tp.rand(5, 10) > 0.5
    if dtype in (tp.int64, tp.int32, tp.int16, tp.uint8):
        lo, hi = (-3, 4) if reduce == "prod" else (-50, 50)
        return tp.randint(lo, hi, (4, 6)).to(dtype), idx, tp.randint(lo, hi, (5, 10)).to(dtype)
    if reduce == "prod":
        return (1 + 0.1 * tp.randn(4, 6)).to(dtype), idx, (1 + 0.1 * tp.randn(5, 10)).to(dtype)
    return tp.randn(4, 6).to(dtype), idx, tp.randn(5, 10).to(dtype)


@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.float64, tp.float16, tp.bfloat16, tp.int64, tp.int32, tp.int16,
                                   tp.uint8, tp.bool])
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_matches_cpu(dtype, reduce, include_self):
    # narrow integers compute in int64 on both sides (converted by the kernels' own casts on the device)
    x, idx, src = _sr_inputs(dtype, reduce, REDUCES.index(reduce) + 10 * include_self)
    exact = dtype in (tp.int64, tp.int32, tp.int16, tp.uint8, tp.bool) or reduce in ("amax", "amin")
    tol = {tp.float32: 1e-5, tp.float64: 1e-12, tp.float16: 2e-3, tp.bfloat16: 1e-2}.get(dtype, 0)
    for dim, i in [(1, idx), (0, idx[:, :6] % 4)]:
        want = tp.scatter_reduce(x, dim, i, src, reduce, include_self=include_self)
        got = tp.scatter_reduce(x.cuda(), dim, i.cuda(), src.cuda(), reduce, include_self=include_self)
        _same(got, want) if exact else _close(got, want, tol)
    # int32 indices; index and src laid out column-major (strided reads)
    it, st = idx.to(tp.int32).t(), src.t()
    want = tp.scatter_reduce(x, 1, it.t(), st.t(), reduce, include_self=include_self)
    got = x.cuda().scatter_reduce(1, it.cuda().t(), st.cuda().t(), reduce=reduce, include_self=include_self)
    _same(got, want) if exact else _close(got, want, tol)


@gpu
def test_scatter_reduce_nan_and_empty_index():
    x = tp.tensor([[1.0, 2.0, 3.0]])
    idx = tp.tensor([[0, 0, 2, 2]])
    src = tp.tensor([[float("nan"), 5.0, -1.0, 7.0]])
    for reduce in REDUCES:
        for inc in [True, False]:
            want = tp.scatter_reduce(x, 1, idx, src, reduce, include_self=inc)
            got = tp.scatter_reduce(x.cuda(), 1, idx.cuda(), src.cuda(), reduce, include_self=inc)
            _same(got, want)
    e = tp.zeros(1, 0, dtype=tp.int64)
    _same(tp.scatter_reduce(x.cuda(), 1, e.cuda(), src.cuda(), "amax"), tp.scatter_reduce(x, 1, e, src, "amax"))


# ---- gradients against the CPU's ----

def _grads(fn, *inputs, device):
    leaves = [t.to(device).detach().requires_grad_() for t in inputs]
    fn(*leaves).backward()
    return [t.grad for t in leaves]


def _check_grads(fn, *inputs, tol=1e-5):
    for got, want in zip(_grads(fn, *inputs, device="cuda"), _grads(fn, *inputs, device="cpu")):
        assert got.device.type == "cuda"
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=tol, atol=tol)


@gpu
def test_mask_and_several_index_gradients_match_cpu():
    tp.manual_seed(21)
    x = tp.randn(4, 5, 6)
    w = tp.randn(4, 5, 6)
    m3 = tp.rand(4, 5, 6) > 0.5
    m2 = tp.rand(4, 5) > 0.4
    mb = tp.rand(5, 6) > 0.5
    _check_grads(lambda x: (tp.masked_select(x, m3.to(x.device)) ** 2).sum(), x)
    _check_grads(lambda x: (tp.masked_select(x, mb.to(x.device)) * 3).sum(), x)  # x's grad sums the broadcast
    _check_grads(lambda x: (x[m2.to(x.device)] * w[m2].to(x.device)).sum(), x)
    i, j = tp.tensor([0, 3, 3, -1, 0]), tp.tensor([1, 4, 4, 4, 1])  # repeated positions add up
    _check_grads(lambda x: (x[i.to(x.device), j.to(x.device)] ** 2).sum(), x)
    _check_grads(lambda x: (x[:, j.to(x.device), i.to(x.device)].exp()).sum(), x)

    def put(x, v):
        y = x * 1
        y[m2.to(x.device)] = v
        return (y * w.to(x.device)).sum()

    _check_grads(put, x, tp.randn(int(m2.sum().item()), 6))


@gpu
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_gradients_match_cpu(reduce, include_self):
    tp.manual_seed(22)
    x = 1 + 0.2 * tp.randn(4, 6) if reduce == "prod" else tp.randn(4, 6)
    src = 1 + 0.2 * tp.randn(4, 9) if reduce == "prod" else tp.randn(4, 9)
    idx = tp.randint(0, 6, (4, 9))
    w = tp.randn(4, 6)
    _check_grads(lambda x, s: (tp.scatter_reduce(x, 1, idx.to(x.device), s, reduce, include_self=include_self)
                               * w.to(x.device)).sum(), x, src, tol=1e-4)
