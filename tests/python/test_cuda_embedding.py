"""Embedding and the integer-indexed row operators on CUDA (cuda/index_kernels.cpp):
F.embedding / nn.Embedding forward and backward (padding_idx included),
index_select, gather, index_put with accumulate, eagerly and inside compiled
regions (extern calls of these kernels: the CUDA printer has no status word for
checked indices), against the CPU. An index out of range is reported at the
next synchronization as a RuntimeError (with synchronous checks: IndexError
from the call, as on the CPU; test_cuda_index_async.py); an operator without a CUDA kernel raises NotImplementedError
naming it and the device."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F

gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")
nvrtc = pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed")


def _close(got, want, rtol=1e-5, atol=1e-6):
    assert got.device.type == "cuda"
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=rtol, atol=atol)


def test_cuda_regions_call_the_index_kernels_instead_of_checked_loops():
    # Without a GPU: what a CUDA region would run. The checked loop forms
    # (a status word the CUDA printer does not have) decline there.
    w = tp.randn(10, 8)
    i = tp.tensor([[1, 2, 7], [0, 0, 3]])
    g = tp._C._capture(lambda i, w: F.embedding(i, w).relu() * 2 + tp.index_select(w, 1, i[0]).sum(), i, w)
    assert tp._C._stax_cuda_externs(g) == ["embedding", "index_select"]
    g2 = tp._C._capture(lambda x, i: tp.gather(x, 1, i) * 3, tp.randn(4, 5), tp.tensor([[0, 1], [4, 4], [2, 2], [1, 0]]))
    assert tp._C._stax_cuda_externs(g2) == ["gather"]


@nvrtc
def test_index_kernel_sources_compile_for_sm90():
    for name, src in tp.cuda._kernel_sources():
        if name.startswith(("tp_index_", "tp_gather_")):
            assert tp.cuda._nvrtc_compile(src, name, 90)[:4] == b"\x7fELF", name


@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.float64, tp.bfloat16])
@pytest.mark.parametrize("idtype", [tp.int64, tp.int32])
def test_embedding_forward_matches_cpu(dtype, idtype):
    w = tp.randn(50, 24).to(dtype)
    i = tp.randint(0, 50, (3, 7)).to(idtype)
    got = F.embedding(i.cuda(), w.cuda())
    assert got.dtype == dtype and got.shape == (3, 7, 24)
    np.testing.assert_array_equal(got.cpu().float().numpy(), F.embedding(i, w).float().numpy())


@gpu
@pytest.mark.parametrize("padding_idx", [None, 4, -1])
def test_embedding_backward_matches_cpu_with_repeats_and_padding(padding_idx):
    tp.manual_seed(0)
    cpu = nn.Embedding(30, 16, padding_idx=padding_idx)
    cu = nn.Embedding(30, 16, padding_idx=padding_idx).cuda()
    cu.weight.data = cpu.weight.detach().clone().cuda()
    i = tp.tensor([[4, 4, 4, 29], [0, 29, 4, 7], [7, 7, 7, 7]])
    g = tp.randn(3, 4, 16)
    (cpu(i) * g).sum().backward()
    (cu(i.cuda()) * g.cuda()).sum().backward()
    assert cu.weight.grad.device.type == "cuda"
    _close(cu.weight.grad, cpu.weight.grad, rtol=1e-5, atol=1e-5)


@gpu
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select_and_gather_match_cpu(dim):
    x = tp.randn(6, 9, 5)
    i = tp.tensor([0, 3, 3, 4, 1])
    _close(tp.index_select(x.cuda(), dim, i.cuda()), tp.index_select(x, dim, i))
    xt = x.transpose(0, 2)  # a strided source
    _close(tp.index_select(xt.cuda(), dim, i.cuda()), tp.index_select(xt, dim, i))
    gi = tp.randint(0, x.shape[dim], (6, 4, 5))
    _close(tp.gather(x.cuda(), dim, gi.cuda()), tp.gather(x, dim, gi))
    gt = tp.randint(0, xt.shape[dim], (5, 4, 5))
    _close(tp.gather(xt.cuda(), dim, gt.cuda()), tp.gather(xt, dim, gt))


@gpu
def test_index_put_accumulates_repeated_rows_on_cuda():
    base = tp.randn(8, 3)
    i = tp.tensor([1, 1, 5, 7, 1])
    v = tp.randn(5, 3)
    _close(tp.index_put(base.cuda(), (i.cuda(),), v.cuda(), True), tp.index_put(base, (i,), v, True), atol=1e-5)
    j = tp.tensor([6, 0, 2])  # distinct rows: a plain write
    _close(tp.index_put(base.cuda(), (j.cuda(),), v[:3].cuda()), tp.index_put(base, (j,), v[:3]))


@gpu
@pytest.mark.parametrize("bad", [30, -1])
def test_index_out_of_range_raises_index_error_on_cuda(bad):
    w = tp.randn(30, 4).cuda()
    old = tp.cuda.get_sync_checks()
    tp.cuda.set_sync_checks(True)  # at the call, as on the CPU
    try:
        with pytest.raises(IndexError, match=r"embedding: index .*(out of range|out of bounds).*size 30"):
            F.embedding(tp.tensor([1, bad]).cuda(), w)
        with pytest.raises(IndexError, match="index_select"):
            tp.index_select(w, 0, tp.tensor([bad]).cuda())
    finally:
        tp.cuda.set_sync_checks(old)
    # asynchronous (the default): at the next synchronization point
    tp.cuda.set_sync_checks(False)
    try:
        F.embedding(tp.tensor([1, bad]).cuda(), w)
        with pytest.raises(RuntimeError, match=rf"^embedding: index {bad} is out of bounds .*size 30"):
            tp.cuda.synchronize()
    finally:
        tp.cuda.set_sync_checks(old)


@gpu
def test_operator_without_a_cuda_kernel_is_named_with_the_device():
    x = tp.ones(2, 2, dtype=tp.int64).cuda()  # index_add, nonzero, unique and bernoulli(p) have paths now
    with pytest.raises(NotImplementedError, match=r"matmul.*cuda:0"):
        x @ x


class _Bag(nn.Module):
    def __init__(self):
        super().__init__()
        self.e = nn.Embedding(40, 16, padding_idx=3)
        self.l = nn.Linear(16, 5)

    def forward(self, i):
        return self.l(self.e(i).tanh()).mean(1)


@gpu
def test_compiled_embedding_model_inference_and_training_match_cpu():
    tp.manual_seed(0)
    cpu = _Bag()
    tp.manual_seed(0)
    cu = _Bag().cuda()
    i = tp.tensor([[1, 3, 5, 5, 39], [19, 0, 3, 1, 1]])
    ic = i.cuda()
    with tp.no_grad():
        f = tp.compile(cu, strict_native=True)
        _close(f(ic), cpu(i), atol=1e-5)
    loss = lambda m, i: (m(i) ** 2).mean()
    loss(cpu, i).backward()
    step = tp.compile(lambda i: loss(cu, i), strict_native=True)
    lg = step(ic)
    _close(lg, loss(cpu, i), atol=1e-6)
    lg.backward()
    pc = dict(cpu.named_parameters())
    for n, p in cu.named_parameters():
        _close(p.grad, pc[n].grad, rtol=1e-4, atol=1e-6)
