"""Asynchronous index checks of the CUDA index kernels (cuda/device_status.h,
issue 12): a checked launch (embedding, index_select, gather, scatter,
index_add, index_put, x[i]) makes no host synchronization; a bad index is
clamped on the device (no access outside the buffers), recorded, and raised as
a RuntimeError naming the operator, the index and the size at the next
synchronization point (tp.cuda.synchronize, downloads, .item(), repr,
stream/event synchronize, a CUDA graph replay), after which the status is
clear and later calls work. Synchronous checks (TP_CUDA_SYNC_CHECKS=1 or
tp.cuda.set_sync_checks(True)) raise IndexError from the call."""
import contextlib
import os
import subprocess
import sys

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F

gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")


@contextlib.contextmanager
def _sync_checks(on=True):
    old = tp.cuda.get_sync_checks()
    tp.cuda.set_sync_checks(on)
    try:
        yield
    finally:
        tp.cuda.set_sync_checks(old)


@pytest.fixture(autouse=True)
def _asynchronous():
    with _sync_checks(False):
        yield


def _ops(x, w, good, bad_value=None):
    """Every checked operator once, with index `good` (one entry replaced by bad_value)."""
    i = good.clone()
    if bad_value is not None:
        i[1] = bad_value
    ic = i.cuda()
    return {
        "embedding": lambda: F.embedding(ic, w),
        "index_select": lambda: tp.index_select(x, 0, ic),
        "gather": lambda: tp.gather(x, 0, ic.reshape(3, 1)),
        "scatter": lambda: tp.scatter(x, 0, ic.reshape(3, 1), 2.0),
        "scatter_add": lambda: tp.scatter_add(x, 0, ic.reshape(3, 1), tp.ones(3, 1).cuda()),
        "index_add": lambda: tp.index_add(x, 0, ic, tp.ones(3, 4).cuda()),
        "index_put": lambda: tp.index_put(x, (ic,), tp.ones(3, 4).cuda()),
        "index": lambda: x[ic],
    }


# ---- without a GPU ----

def test_sync_checks_switch_and_its_environment_default():
    with _sync_checks(True):
        assert tp.cuda.get_sync_checks() is True
    assert tp.cuda.get_sync_checks() is False
    code = "import tensorplay as tp; print(tp.cuda.get_sync_checks())"
    for env, want in (("1", "True"), ("0", "False"), ("", "False")):
        e = dict(os.environ, TP_CUDA_SYNC_CHECKS=env)
        out = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == want


@pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed")
def test_every_checked_kernel_records_through_the_host_mirror():
    srcs = [s for n, s in tp.cuda._kernel_sources() if "tp_pos(" in s]
    assert len(srcs) >= 40  # rows, puts, adds, gathers and scatters for two index types
    for s in srcs:
        # the winner of the CAS writes the page-locked mirror the host reads without a copy
        assert "atomicCAS" in s and "__threadfence_system()" in s and "h[0] = 1" in s


# ---- on a GPU ----

@gpu
def test_checked_launches_make_no_host_synchronization():
    x, w = tp.randn(9, 4).cuda(), tp.randn(9, 4).cuda()
    ops = _ops(x, w, tp.tensor([3, 8, 0]))
    for f in ops.values():  # compiled and loaded; the device status made
        f()
    tp.cuda.synchronize()
    before = tp.cuda._host_sync_count()
    outs = {name: [f() for _ in range(5)] for name, f in ops.items()}
    assert tp.cuda._host_sync_count() == before  # no call waited for the device
    tp.cuda.synchronize()
    assert tp.cuda._host_sync_count() == before + 1  # the counter does count synchronizations
    xc, wc, i = x.cpu(), w.cpu(), tp.tensor([3, 8, 0])
    np.testing.assert_array_equal(outs["embedding"][4].cpu().numpy(), F.embedding(i, wc).numpy())
    np.testing.assert_array_equal(outs["index_select"][0].cpu().numpy(), tp.index_select(xc, 0, i).numpy())
    np.testing.assert_array_equal(outs["index"][2].cpu().numpy(), xc[i].numpy())
    np.testing.assert_array_equal(outs["scatter"][1].cpu().numpy(), tp.scatter(xc, 0, i.reshape(3, 1), 2.0).numpy())


@gpu
@pytest.mark.parametrize("op", ["embedding", "index_select", "gather", "scatter", "scatter_add", "index_add",
                                "index_put", "index"])
def test_bad_index_is_reported_at_the_next_synchronization_and_cleared(op):
    x, w = tp.randn(9, 4).cuda(), tp.randn(9, 4).cuda()
    bad = -10 if op in ("index", "index_put") else 9  # these two count -9..-1 from the end
    f = _ops(x, w, tp.tensor([3, 8, 0]), bad)[op]
    f()  # no error at the call
    with pytest.raises(RuntimeError, match=rf"^{op}(\.\w+)?: index {bad} is out of bounds for dimension 0 with size 9"):
        tp.cuda.synchronize()
    tp.cuda.synchronize()  # reported once: the status is clear
    good = _ops(x, w, tp.tensor([3, 8, 0]))[op]()
    tp.cuda.synchronize()
    assert good.device.type == "cuda"
    f()  # and a second bad index is recorded again
    with pytest.raises(RuntimeError, match=rf"^{op}(\.\w+)?: index {bad} is out of bounds"):
        tp.cuda.synchronize()


@gpu
def test_first_bad_index_wins_until_reported():
    x = tp.randn(9, 4).cuda()
    tp.index_select(x, 0, tp.tensor([0, 11]).cuda())
    tp.gather(x, 0, tp.tensor([[12, 0, 0, 0]]).cuda())  # later on the same stream: not recorded
    with pytest.raises(RuntimeError, match=r"^index_select: index 11 is out of bounds for dimension 0 with size 9"):
        tp.cuda.synchronize()
    tp.cuda.synchronize()


@gpu
@pytest.mark.parametrize("point", ["cpu", "item", "numpy", "repr", "event", "stream", "copy_"])
def test_every_synchronization_point_reports(point):
    x = tp.randn(9, 4).cuda()
    y = tp.index_select(x, 0, tp.tensor([2, 40]).cuda())
    m = r"^index_select: index 40 is out of bounds for dimension 0 with size 9"
    with pytest.raises(RuntimeError, match=m):
        if point == "cpu":
            y.cpu()
        elif point == "item":
            y[0, 0].item()
        elif point == "numpy":
            y.cpu().numpy()
        elif point == "repr":
            repr(y)
        elif point == "event":
            e = tp.cuda.Event()
            e.record()
            e.synchronize()
        elif point == "stream":
            tp.cuda.current_stream().synchronize()
        else:
            tp.zeros(2, 4).copy_(y)
    tp.cuda.synchronize()


@gpu
def test_bad_indices_never_touch_memory_outside_the_buffers():
    x = tp.zeros(5, 3).cuda()
    guard = tp.zeros(64).cuda() + 7.0  # neighbouring allocations keep their values
    got = tp.index_add(x, 0, tp.tensor([1, 9, -6, 3]).cuda(), tp.ones(4, 3).cuda())
    x.index_put_((tp.tensor([100, 2]).cuda(),), tp.full((2, 3), 5.0).cuda())
    s = tp.scatter(tp.zeros(4, 4).cuda(), 1, tp.tensor([[1 << 40, 0, 0, 0]]).cuda(), 9.0)
    g = tp.gather(tp.arange(8.0).reshape(2, 4).cuda(), 1, tp.tensor([[0, 7], [-100, 2]]).cuda())
    e = F.embedding(tp.tensor([0, 1 << 33]).cuda(), tp.ones(3, 2).cuda())
    with pytest.raises(RuntimeError, match=r"^index_add: index (9|-6) is out of bounds"):
        tp.cuda.synchronize()
    want = np.zeros((5, 3), np.float32)
    want[[1, 3]] = 1.0  # only the good rows added
    np.testing.assert_array_equal(got.cpu().numpy(), want)
    want_x = np.zeros((5, 3), np.float32)
    want_x[2] = 5.0
    np.testing.assert_array_equal(x.cpu().numpy(), want_x)
    np.testing.assert_array_equal(s.cpu().numpy()[0], [9.0, 0, 0, 0])
    np.testing.assert_array_equal(g.cpu().numpy(), [[0.0, 0.0], [0.0, 6.0]])  # bad positions read as 0
    np.testing.assert_array_equal(e.cpu().numpy(), [[1.0, 1.0], [0.0, 0.0]])
    np.testing.assert_array_equal(guard.cpu().numpy(), np.full(64, 7.0, np.float32))


@gpu
def test_sync_checks_raise_index_error_at_the_call():
    x = tp.randn(9, 4).cuda()
    i = tp.tensor([0, 9]).cuda()
    tp.index_select(x, 0, tp.tensor([0, 1]).cuda())
    with _sync_checks(True):
        before = tp.cuda._host_sync_count()
        tp.index_select(x, 0, tp.tensor([0, 1]).cuda())
        assert tp.cuda._host_sync_count() == before + 1  # one synchronization a call
        with pytest.raises(IndexError, match=r"^index_select: index 9 is out of bounds for dimension 0 with size 9"):
            tp.index_select(x, 0, i)
    tp.cuda.synchronize()  # reported once


@gpu
def test_sync_checks_from_the_environment_raise_at_the_call():
    code = ("import tensorplay as tp\n"
            "x = tp.randn(9, 4).cuda()\n"
            "try:\n    tp.index_select(x, 0, tp.tensor([0, 9]).cuda())\n"
            "except IndexError as e:\n    print('raised', e)\n")
    e = dict(os.environ, TP_CUDA_SYNC_CHECKS="1")
    out = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "raised index_select: index 9 is out of bounds for dimension 0 with size 9" in out.stdout


@gpu
def test_an_error_still_pending_at_exit_is_printed():
    code = ("import tensorplay as tp\n"
            "x = tp.randn(9, 4).cuda()\n"
            "tp.index_select(x, 0, tp.tensor([0, 19]).cuda())\n")
    e = dict(os.environ, TP_CUDA_SYNC_CHECKS="0")
    out = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=120)
    assert "never reported before exit: index_select: index 19 is out of bounds" in out.stderr


@gpu
def test_compiled_region_without_cuda_graphs_checks_asynchronously():
    tp.manual_seed(3)
    w = tp.randn(30, 8).cuda()

    def f(i, c):
        return tp.gather(F.embedding(i, w), 1, c).squeeze(1) * 2.0

    g = tp.compile(f, strict_native=True)
    i, c = tp.tensor([1, 29, 3]).cuda(), tp.zeros(3, 1, dtype=tp.int64).cuda()
    want = f(i, c).cpu()
    g(i, c)
    tp.cuda.synchronize()
    before = tp.cuda._host_sync_count()
    outs = [g(i, c) for _ in range(5)]
    assert tp.cuda._host_sync_count() == before  # the region's extern index kernels did not synchronize
    for o in outs:
        np.testing.assert_array_equal(o.cpu().numpy(), want.numpy())
    bi = tp.tensor([1, 30, 3]).cuda()
    g(bi, c)
    with pytest.raises(RuntimeError, match=r"^embedding: index 30 is out of bounds for dimension 0 with size 30"):
        tp.cuda.synchronize()
    np.testing.assert_array_equal(g(i, c).cpu().numpy(), want.numpy())
    with _sync_checks(True), pytest.raises(IndexError, match=r"embedding: index 30 is out of bounds"):
        g(bi, c)


@gpu
def test_cuda_graph_replays_check_asynchronously():
    w = tp.randn(30, 4).cuda()
    idx = tp.tensor([1, 2, 3]).cuda()
    F.embedding(idx, w)
    tp.cuda.synchronize()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        out = F.embedding(idx, w)
    before = tp.cuda._host_sync_count()
    for _ in range(4):
        g.replay()
    assert tp.cuda._host_sync_count() == before  # a replay does not wait for the device
    idx.copy_(tp.tensor([0, 31, 2]).cuda())
    g.replay()
    with pytest.raises(RuntimeError, match=r"^embedding: index 31 is out of bounds for dimension 0 with size 30"):
        tp.cuda.synchronize()
    idx.copy_(tp.tensor([5, 6, 7]).cuda())
    g.replay()
    np.testing.assert_array_equal(out.cpu().numpy(), w.cpu().numpy()[[5, 6, 7]])
