"""Operators that had a CPU kernel but no CUDA path (scripts/cuda_op_audit.py;
cuda/gap_kernels.h): fill_, normal_ / uniform_ / bernoulli_ (drawn on the
host: the same numbers as on the CPU for one seed), one_hot, searchsorted /
bucketize, kthvalue / median, erfinv. Each CUDA result against TensorPlay's
CPU operator (bit for bit except erfinv, which uses CUDA's erfinvf), and the
CPU operator against PyTorch where the two agree by definition. Without a
GPU only the kernels' NVRTC compilation (and the CPU side) runs."""
import numpy as np
import pytest
import torch

import tensorplay as tp

gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")
nvrtc = pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed")
PREFIXES = ("tp_fill_", "tp_one_hot", "tp_searchsorted_", "tp_kth_pick_", "tp_kth_qsel_", "tp_special_erfinv_")


def _np(t):
    t = t.detach().cpu()
    return t.float().numpy() if t.dtype in (tp.bfloat16, tp.float16) else t.numpy()


def _same(got, want):
    assert got.device.type == "cuda"
    assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape), (got.dtype, got.shape, want.shape)
    np.testing.assert_array_equal(_np(got), _np(want))


@nvrtc
@pytest.mark.parametrize("arch", [80, 90])
def test_kernel_sources_compile(arch):
    names = [n for n, _ in tp.cuda._kernel_sources() if n.startswith(PREFIXES)]
    assert {"tp_fill_b1", "tp_fill_b8", "tp_one_hot_int64", "tp_one_hot_range_uint8", "tp_searchsorted_f64",
            "tp_kth_pick_f32", "tp_kth_pick_i64", "tp_kth_qsel_f32", "tp_kth_qsel_f64", "tp_kth_qsel_i64",
            "tp_special_erfinv_f64"} <= set(names)
    for name, src in tp.cuda._kernel_sources():
        if name in names:
            assert tp.cuda._nvrtc_compile(src, name, arch)[:4] == b"\x7fELF", name


# ---- fill_ and the random fills ----

@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.float64, tp.float16, tp.bfloat16, tp.int64, tp.int32, tp.int8,
                                   tp.uint8, tp.bool])
def test_fill(dtype):
    x = tp.zeros(5, 6, dtype=dtype, device="cuda")
    assert x.fill_(3) is x
    _same(x, tp.zeros(5, 6, dtype=dtype).fill_(3))
    base = tp.zeros(6, 8, dtype=dtype, device="cuda")
    base[::2, 1::3].fill_(1)  # through a strided view only
    want = tp.zeros(6, 8, dtype=dtype)
    want[::2, 1::3].fill_(1)
    _same(base, want)


@gpu
def test_fill_value_conversion():
    x = tp.empty(4, device="cuda")
    _same(x.fill_(float("nan")), tp.empty(4).fill_(float("nan")))
    _same(tp.empty(3, dtype=tp.int64, device="cuda").fill_(-7), tp.full((3,), -7, dtype=tp.int64))


@gpu
@pytest.mark.parametrize("call", [lambda t: t.normal_(2.0, 3.0), lambda t: t.uniform_(-1.0, 4.0),
                                  lambda t: t.bernoulli_(0.3)])
def test_random_fills_same_numbers_as_cpu(call):
    tp.manual_seed(123)
    want = call(tp.empty(7, 9))
    tp.manual_seed(123)
    got = tp.empty(7, 9, device="cuda")
    assert call(got) is got
    _same(got, want)
    tp.manual_seed(5)
    want = tp.empty(9, 7).t()  # a CPU view fills in its own row-major order; so must the CUDA one
    call(want)
    tp.manual_seed(5)
    base = tp.zeros(9, 7, device="cuda")
    got = base.t()  # not contiguous
    call(got)
    _same(got.contiguous(), want.contiguous())


# ---- one_hot ----

@gpu
@pytest.mark.parametrize("dtype", [tp.int64, tp.int32, tp.uint8])
def test_one_hot(dtype):
    x = tp.tensor([[0, 3, 1], [2, 2, 0]]).to(dtype)
    _same(tp.nn.functional.one_hot(x.cuda()), tp.nn.functional.one_hot(x))
    _same(tp.nn.functional.one_hot(x.cuda(), 6), tp.nn.functional.one_hot(x, 6))
    _same(tp.nn.functional.one_hot(x.cuda().t(), 4), tp.nn.functional.one_hot(x.t(), 4))
    np.testing.assert_array_equal(_np(tp.nn.functional.one_hot(x.cuda())),
                                  torch.nn.functional.one_hot(torch.tensor(_np(x)).long()).numpy())


@gpu
def test_one_hot_errors_and_empty():
    with pytest.raises(ValueError, match="one_hot: class values must be non-negative, got -1"):
        tp.nn.functional.one_hot(tp.tensor([0, -1, 2], device="cuda"))
    with pytest.raises(ValueError, match="one_hot: class values must be smaller than num_classes 3, got 3"):
        tp.nn.functional.one_hot(tp.tensor([0, 3], device="cuda"), 3)
    _same(tp.nn.functional.one_hot(tp.zeros(0, dtype=tp.int64, device="cuda"), 4),
          tp.nn.functional.one_hot(tp.zeros(0, dtype=tp.int64), 4))
    with pytest.raises(ValueError, match="can not infer"):
        tp.nn.functional.one_hot(tp.zeros(0, dtype=tp.int64, device="cuda"))


# ---- searchsorted / bucketize ----

def _ss_cases():
    nan = float("nan")
    seq1 = [-3.0, -1.0, -1.0, 0.0, 2.5, 2.5, 7.0, nan]
    vals = [[-5.0, -1.0, 0.0, 2.5, 3.0], [7.0, 8.0, nan, -3.0, 1.0]]
    return seq1, vals


@gpu
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_and_bucketize(right):
    seq1, vals = _ss_cases()
    seq, v = tp.tensor(seq1), tp.tensor(vals)
    _same(tp.searchsorted(seq.cuda(), v.cuda(), right=right), tp.searchsorted(seq, v, right=right))
    _same(tp.searchsorted(seq.cuda(), v.cuda(), side="right" if right else "left", out_int32=True),
          tp.searchsorted(seq, v, side="right" if right else "left", out_int32=True))
    _same(tp.bucketize(v.cuda(), seq.cuda(), right=right), tp.bucketize(v, seq, right=right))
    # N-D: one sequence per row; integers compare as int64
    seq2 = tp.sort(tp.randint(-20, 20, (3, 11)))[0]
    v2 = tp.randint(-25, 25, (3, 6))
    _same(tp.searchsorted(seq2.cuda(), v2.cuda(), right=right), tp.searchsorted(seq2, v2, right=right))
    # mixed: int sequence, float values (double comparison)
    _same(tp.searchsorted(seq2.cuda(), v2.cuda().float() + 0.5, right=right),
          tp.searchsorted(seq2, v2.float() + 0.5, right=right))
    # the CPU against PyTorch (NaN-free cases)
    np.testing.assert_array_equal(_np(tp.searchsorted(seq2.cuda(), v2.cuda(), right=right)),
                                  torch.searchsorted(torch.tensor(_np(seq2)), torch.tensor(_np(v2)),
                                                     right=right).numpy())


@gpu
def test_searchsorted_sorter_and_scalar_and_empty():
    tp.manual_seed(3)
    seq = tp.randn(2, 9)
    sorter = tp.argsort(seq, dim=-1)
    v = tp.randn(2, 4)
    _same(tp.searchsorted(seq.cuda(), v.cuda(), sorter=sorter.cuda()), tp.searchsorted(seq, v, sorter=sorter))
    s1 = tp.tensor([1.0, 2.0, 3.0])
    _same(tp.searchsorted(s1.cuda(), tp.tensor(2.0).cuda()), tp.searchsorted(s1, tp.tensor(2.0)))
    _same(tp.searchsorted(tp.zeros(0).cuda(), tp.ones(3).cuda()), tp.searchsorted(tp.zeros(0), tp.ones(3)))
    _same(tp.searchsorted(s1.cuda(), tp.ones(0).cuda()), tp.searchsorted(s1, tp.ones(0)))


# ---- kthvalue / median ----

@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.float64, tp.bfloat16, tp.int64])
@pytest.mark.parametrize("shape,dim", [((9,), 0), ((5, 8), 1), ((5, 8), 0), ((3, 4, 5), 1), ((), 0)])
def test_kthvalue_median(dtype, shape, dim):
    tp.manual_seed(7)
    x = tp.randint(-4, 5, shape).to(dtype)  # many ties: the index of a tie must be the CPU's
    D = 1 if not shape else shape[dim]
    for keepdim in (False, True):
        for k in sorted({1, (D + 1) // 2, D}):
            got = tp.kthvalue(x.cuda(), k, dim, keepdim)
            want = tp.kthvalue(x, k, dim, keepdim)
            _same(got[0], want[0])
            _same(got[1], want[1])
        got = tp.median(x.cuda(), dim, keepdim)
        want = tp.median(x, dim, keepdim)
        _same(got[0], want[0])
        _same(got[1], want[1])
    _same(tp.median(x.cuda()), tp.median(x))


@gpu
def test_median_and_kthvalue_nan():
    nan = float("nan")
    x = tp.tensor([[1.0, nan, 3.0, nan, 0.0], [2.0, 2.0, 1.0, 5.0, 4.0], [nan, nan, nan, nan, nan]])
    for dim in (0, 1):
        for got, want in [(tp.median(x.cuda(), dim), tp.median(x, dim)),
                          (tp.kthvalue(x.cuda(), 2, dim), tp.kthvalue(x, 2, dim))]:
            _same(got[0], want[0])
            _same(got[1], want[1])
    _same(tp.median(x.cuda()), tp.median(x))
    np.testing.assert_array_equal(_np(tp.median(x.cuda(), 1)[1]), torch.median(torch.tensor(_np(x)), 1)[1].numpy())


# ---- erfinv ----

@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.float64, tp.float16, tp.bfloat16])
def test_erfinv(dtype):
    x = tp.cat([tp.linspace(-1.0, 1.0, 101), tp.tensor([1.5, -2.0, float("nan"), 0.999999])]).to(dtype)
    got, want = tp.erfinv(x.cuda()), tp.erfinv(x)
    assert got.dtype == dtype and got.device.type == "cuda"
    tol = {tp.float32: 2e-6, tp.float64: 1e-13, tp.float16: 1e-3, tp.bfloat16: 8e-3}[dtype]
    np.testing.assert_allclose(_np(got), _np(want), rtol=tol, atol=tol)  # inf / nan in the same places
    _same(tp.erfinv(tp.tensor([0, 1], device="cuda")), tp.erfinv(tp.tensor([0, 1])))  # int64 -> float32
    for it in (tp.uint8, tp.int8, tp.int16, tp.bool):  # every integer dtype converts first, as on the CPU
        _same(tp.erfinv(tp.tensor([0, 1], dtype=it, device="cuda")), tp.erfinv(tp.tensor([0, 1], dtype=it)))


# ---- repeat_interleave ----

@gpu
def test_repeat_interleave_int_and_tensor():
    x = tp.arange(12.0).reshape(3, 4)
    for kw in [dict(dim=0), dict(dim=1), dict(dim=-1), {}]:
        _same(x.cuda().repeat_interleave(3, **kw), x.repeat_interleave(3, **kw))
    r = tp.tensor([2, 0, 3])
    _same(x.cuda().repeat_interleave(r.cuda(), dim=0), x.repeat_interleave(r, dim=0))
    _same(tp.repeat_interleave(r.cuda()), tp.repeat_interleave(r))
    _same(tp.repeat_interleave(r.cuda().int()), tp.repeat_interleave(r.int()))
    _same(tp.repeat_interleave(tp.zeros(0, dtype=tp.int64, device="cuda")), tp.repeat_interleave(tp.zeros(0, dtype=tp.int64)))
    with pytest.raises(ValueError, match="repeats must be non-negative, got -1 at position 1"):
        tp.repeat_interleave(tp.tensor([1, -1, 2], device="cuda"))
    with pytest.raises(ValueError, match="output_size=4 does not match"):
        tp.repeat_interleave(r.cuda(), output_size=4)
    # gradient through the int form (a broadcast view and a copy)
    w = tp.arange(6.0).reshape(2, 3).cuda().requires_grad_()
    w.repeat_interleave(2, dim=1).sum().backward()
    _same(w.grad, tp.full((2, 3), 2.0))


@gpu
def test_index_fill_and_logcumsumexp_stay_on_the_device():
    # Their decompositions built host tensors (the fill value, logcumsumexp's -inf pad),
    # which the same-device check refused for a CUDA input.
    rng = np.random.default_rng(3)
    v = rng.standard_normal((3, 5)).astype(np.float32)
    idx = tp.tensor([0, 2, 2])
    for dev_idx in (idx, idx.cuda()):
        got = tp.tensor(v).cuda().index_fill(1, dev_idx, -1.5)
        np.testing.assert_array_equal(got.cpu().numpy(), tp.tensor(v).index_fill(1, idx, -1.5).numpy())
        got_t = tp.tensor(v).cuda().index_fill(0, dev_idx, tp.tensor(4.0))
        np.testing.assert_array_equal(got_t.cpu().numpy(), tp.tensor(v).index_fill(0, idx, tp.tensor(4.0)).numpy())
    got = tp.logcumsumexp(tp.tensor(v).cuda(), 1).cpu().numpy()
    np.testing.assert_allclose(got, tp.logcumsumexp(tp.tensor(v), 1).numpy(), rtol=1e-6, atol=1e-6)
