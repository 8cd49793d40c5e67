"""Device indices on CUDA (issue 12 item 1): everything a PyTorch user does with
cuda:1 — moves (``.to("cuda:1")``, ``.cuda(1)``), copies between GPUs, operators
that run on the GPU their tensors live on (hand-written kernels, cuBLASLt, cuDNN,
Stax-generated operators, index kernels), the current device (``set_device``,
``with tp.cuda.device(1)``), per-device streams, events, memory statistics and
CUDA graphs, tp.compile on cuda:1 (regions, reduce-overhead, training), autograd,
DLPack with torch, seeding — and the error an operator raises when its tensors
live on two devices.

Three groups: no GPU needed (the Python surface), one GPU (device checks
against the CPU), two GPUs (everything above; skipped with fewer)."""
import contextlib
import gc

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

N_GPUS = tp.cuda.device_count()
gpu = pytest.mark.skipif(N_GPUS < 1, reason="no CUDA GPU")
two_gpus = pytest.mark.skipif(N_GPUS < 2, reason="needs two CUDA GPUs")
D0, D1 = "cuda:0", "cuda:1"


def _np(t):
    return t.cpu().numpy()


def _host64(t):
    return t.cpu().to(tp.float64).numpy()  # converted on the host: any dtype


def _rand(*shape, seed=0, dtype=np.float32):
    return tp.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def _on(t, index):
    return t.device == tp.device("cuda", index) and t.get_device() == index and t.is_cuda


@contextlib.contextmanager
def _quiet_allocator():
    """No garbage collection inside: a cycle collected mid-test would free
    another test's tensors and move the per-device statistics."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _torch_gpus(n):
    return torch is not None and torch.cuda.is_available() and torch.cuda.device_count() >= n


# ------------------------------------------------------------------ no GPU needed

def test_cuda_seeding_names_seed_the_shared_default_generator():
    tp.cuda.manual_seed(123)
    a = tp.randn(5)
    tp.manual_seed(123)
    b = tp.randn(5)
    tp.cuda.manual_seed_all(123)
    c = tp.randn(5)
    assert a.tolist() == b.tolist() == c.tolist()
    assert tp.cuda.initial_seed() == 123
    tp.cuda.seed_all()
    assert tp.cuda.initial_seed() != 123 or tp.randn(5).tolist() != a.tolist()


def test_device_context_manager_without_a_device_changes_nothing():
    # torch.cuda.device(None) / device(-1) are no-ops (no CUDA needed); so is
    # device_of a CPU tensor. With a GPU the current device stays as it was.
    current = tp.cuda.current_device if N_GPUS >= 1 else (lambda: None)
    before = current()
    for ctx in (tp.cuda.device(None), tp.cuda.device(-1), tp.cuda.device_of(tp.ones(2))):
        with ctx:
            assert current() == before
        assert current() == before


@pytest.mark.skipif(N_GPUS >= 1, reason="a CUDA GPU is present")
def test_device_context_manager_without_a_gpu_raises_clearly():
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        with tp.cuda.device(0):
            pass


# ------------------------------------------------------------------ one GPU

@gpu
def test_cpu_tensor_beside_a_cuda_tensor_names_operator_and_devices():
    x = tp.ones(2, 3, device="cuda")
    with pytest.raises(RuntimeError, match=r"add: Expected all tensors to be on the same device.*cuda:0 and cpu"):
        x + tp.ones(2, 3)
    with pytest.raises(RuntimeError, match=r"mul: Expected all tensors .*cuda:0 and cpu"):
        tp.ones(3) * x  # the CPU tensor first: the GPU one is still named first
    with pytest.raises(RuntimeError, match=r"maximum: Expected all tensors .*cuda:0 and cpu"):
        tp.maximum(x, tp.ones(2, 3))  # a Stax-generated operator: the same check, before any kernel
    with pytest.raises(RuntimeError, match=r"(mm|matmul): Expected all tensors .*cuda:0 and cpu"):
        x @ tp.ones(3, 2)
    # A 0-d CPU tensor is a number, as in PyTorch.
    np.testing.assert_allclose(_np(x * tp.tensor(3.0)), np.full((2, 3), 3.0))


@gpu
def test_copy_into_a_host_tensor_from_a_cuda_one():
    src = _rand(4, 5, seed=1)
    dst = tp.zeros(4, 5)
    out = dst.copy_(src.cuda())
    assert out is dst and not dst.is_cuda
    np.testing.assert_array_equal(dst.numpy(), src.numpy())


@gpu
def test_like_factories_follow_the_device_of_self():
    x = tp.ones(2, 3, device="cuda")
    for t in (tp.zeros_like(x), tp.ones_like(x), tp.full_like(x, 2.0), tp.randn_like(x), tp.empty_like(x)):
        assert t.is_cuda and t.get_device() == 0 and tuple(t.shape) == (2, 3)
    np.testing.assert_array_equal(_np(tp.full_like(x, 2.0)), np.full((2, 3), 2.0))
    assert not tp.zeros_like(x, device="cpu").is_cuda  # device= still decides


@gpu
def test_invalid_device_ordinals_raise():
    bad = N_GPUS
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        tp.ones(2, device=f"cuda:{bad}")
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        tp.ones(2).to(f"cuda:{bad}")
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        tp.ones(2).cuda(bad)
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        tp.cuda.set_device(bad)
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        tp.cuda.Stream(device=bad)
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        tp.cuda.device(bad)
    assert tp.cuda.current_device() == 0


@gpu
def test_device_context_manager_and_device_of_on_one_gpu():
    x = tp.ones(2, device="cuda")
    with tp.cuda.device(0):
        assert tp.cuda.current_device() == 0
    with tp.cuda.device_of(x):
        assert tp.cuda.current_device() == 0
    with tp.cuda.device("cuda:0"), tp.cuda.device(tp.device("cuda", 0)):
        assert tp.ones(1, device="cuda").get_device() == 0


@gpu
def test_max_autotune_captures_cuda_graphs_and_no_cudagraphs_does_not():
    # PyTorch's max-autotune also uses CUDA graphs; max-autotune-no-cudagraphs does not.
    def f(x):
        return (x * 2.0 + 1.0).relu().sum(dim=-1)

    x = _rand(64, 256, seed=2).cuda()
    want = _np(f(x))
    for mode, graphed in (("max-autotune", True), ("max-autotune-no-cudagraphs", False)):
        g = tp.compile(f, mode=mode, strict_native=True)
        before = tp.cuda._graph_region_stats()
        for _ in range(4):
            np.testing.assert_allclose(_np(g(x)), want, rtol=1e-5, atol=1e-4)
        after = tp.cuda._graph_region_stats()
        if graphed:
            assert after["captures"] - before["captures"] == 1 and after["replays"] - before["replays"] >= 2
        else:
            assert after == before


# ------------------------------------------------------------------ two GPUs

@two_gpus
def test_moves_name_the_device_index():
    a = _rand(3, 4, seed=3)
    forms = [a.to(D1), a.cuda(1), a.cuda(D1), a.cuda(device=1), a.to(tp.device("cuda", 1)), a.to(1),
             a.to(device=D1, dtype=tp.float32), a.to(tp.ones(1, device=D1)),
             tp.tensor(a.tolist(), device=D1), tp.as_tensor(a, device=D1)]
    for t in forms:
        assert _on(t, 1), t.device
        np.testing.assert_array_equal(_np(t), a.numpy())
    z = tp.zeros(2, 2, device=D1)
    assert _on(z, 1) and _on(z.new_ones(3), 1) and _on(tp.zeros_like(z), 1) and _on(tp.ones_like(z), 1)
    assert _on(tp.randn(4, device=D1), 1)
    assert "device='cuda:1'" in repr(z) and "device='cuda:0'" in repr(z.to(D0))
    assert str(z.device) == D1 and z.device.index == 1 and z.device.type == "cuda"
    # A tensor already there is returned itself.
    assert z.to(D1) is z and z.cuda(1) is z


@two_gpus
@pytest.mark.parametrize("dtype", [tp.float32, tp.float64, tp.int64, tp.bool, tp.float16, tp.bfloat16])
def test_copies_between_gpus_round_trip(dtype):
    a = (_rand(6, 10, seed=4) * 10).to(dtype)
    x0 = a.to(D0)
    x1 = x0.to(D1)
    assert _on(x1, 1) and x1.data_ptr() != x0.data_ptr()
    back = x1.to(D0)
    assert _on(back, 0)
    np.testing.assert_array_equal(_host64(back), _host64(a))
    # Strided views of another GPU's tensor come over compacted.
    for view in (x0.t(), x0[1:5, ::3], x0[:, 2]):
        moved = view.to(D1)
        assert _on(moved, 1) and moved.is_contiguous()
        np.testing.assert_array_equal(_host64(moved), _host64(view))
    empty = tp.zeros(0, 3, dtype=dtype, device=D0).to(D1)
    assert _on(empty, 1) and tuple(empty.shape) == (0, 3)


@two_gpus
def test_copy_in_place_from_another_gpu():
    src = _rand(8, 16, seed=5)
    dst = tp.zeros(8, 16, device=D1)
    out = dst.copy_(src.to(D0))
    assert out is dst and _on(dst, 1)
    np.testing.assert_array_equal(_np(dst), src.numpy())
    row = tp.zeros(8, 16, device=D0)
    row.copy_(_rand(16, seed=6).to(D1))  # broadcast source from another GPU
    np.testing.assert_array_equal(_np(row), np.broadcast_to(_rand(16, seed=6).numpy(), (8, 16)))
    dst.copy_(src.to(D0).t().contiguous().t())  # a strided source
    np.testing.assert_array_equal(_np(dst), src.numpy())
    host = tp.zeros(8, 16)
    host.copy_(dst)
    np.testing.assert_array_equal(host.numpy(), src.numpy())


@two_gpus
def test_operators_on_gpu1_run_there_and_allocate_only_there():
    with _quiet_allocator():
        _operators_on_gpu1()


def _operators_on_gpu1():
    keep0 = tp.ones(1, device=D0)  # device 0 initialised, its statistics settled
    base0 = tp.cuda.memory_allocated(0)
    a, b = _rand(64, 96, seed=7), _rand(96, 32, seed=8)
    x, w = a.to(D1), b.to(D1)
    y = x @ w  # cuBLASLt, its handle and workspace on device 1
    s = F.softmax(y, dim=-1)  # generated by Stax
    r = (s * 2.0 + y).relu().sum(dim=-1)  # hand-written pointwise + row sum
    m = tp.maximum(y, tp.zeros_like(y)).amax(dim=0)  # generated, reduction over dim 0
    for t in (y, s, r, m):
        assert _on(t, 1)
    ya = a.numpy().astype(np.float64) @ b.numpy().astype(np.float64)
    np.testing.assert_allclose(_np(y), ya, rtol=1e-4, atol=1e-4)
    e = np.exp(ya - ya.max(-1, keepdims=True))
    sa = e / e.sum(-1, keepdims=True)
    np.testing.assert_allclose(_np(s), sa, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_np(r), np.maximum(sa * 2 + ya, 0).sum(-1), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(_np(m), np.maximum(ya, 0).max(0), rtol=1e-4, atol=1e-4)
    assert tp.cuda.memory_allocated(1) > 0
    assert tp.cuda.memory_allocated(0) == base0  # nothing of this ran or lived on device 0
    del keep0


@two_gpus
def test_the_same_kernels_alternate_between_gpus():
    # Modules (NVRTC CUBINs), cuBLASLt handles, cuDNN handles and the generated-
    # operator cache are per device: a module loaded in device 0's context cannot launch on device 1.
    a, b = _rand(16, 24, seed=9), _rand(24, 8, seed=10)
    img, k = _rand(2, 3, 10, 10, seed=11), _rand(4, 3, 3, 3, seed=12)
    idx = tp.tensor([3, 0, 7, 3])
    table = _rand(10, 5, seed=13)
    want = None
    for dev in (D0, D1, D0, D1):
        got = [
            _np(tp.exp(a.to(dev)) - 1.0),
            _np(a.to(dev) @ b.to(dev)),
            _np(F.softmax(a.to(dev), dim=0)),
            _np(F.conv2d(img.to(dev), k.to(dev), padding=1)),
            _np(F.embedding(idx.to(dev), table.to(dev))),
            _np(F.max_pool2d(img.to(dev), 2)),
        ]
        if want is None:
            want = [_np(tp.exp(a) - 1.0), _np(a @ b), _np(F.softmax(a, dim=0)), _np(F.conv2d(img, k, padding=1)),
                    _np(F.embedding(idx, table)), _np(F.max_pool2d(img, 2))]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


@two_gpus
def test_operands_on_two_gpus_raise_naming_operator_and_devices():
    x0, x1 = tp.ones(2, 3, device=D0), tp.ones(2, 3, device=D1)
    with pytest.raises(RuntimeError, match=r"add: Expected all tensors to be on the same device.*cuda:0 and cuda:1"):
        x0 + x1
    with pytest.raises(RuntimeError, match=r"Expected all tensors .*cuda:1 and cuda:0"):
        x1 * x0
    with pytest.raises(RuntimeError, match=r"Expected all tensors .*cuda:0 and cuda:1"):
        x0 @ x1.t()
    with pytest.raises(RuntimeError, match=r"Expected all tensors .*cuda:1 and cuda:0"):
        tp.where(x1 > 0, x1, x0)
    with pytest.raises(RuntimeError, match=r"Expected all tensors .*cuda:0 and cuda:1"):
        F.embedding(tp.tensor([0, 1], device=D0), x1)
    with pytest.raises(RuntimeError, match="same device"):
        tp.compile(lambda a, b: a * 2.0 + b)(x0, x1)


@two_gpus
def test_current_device_set_device_and_context_manager():
    assert tp.cuda.current_device() == 0
    try:
        tp.cuda.set_device(1)
        assert tp.cuda.current_device() == 1
        assert _on(tp.ones(2, device="cuda"), 1) and _on(tp.ones(2).cuda(), 1) and _on(tp.ones(2).to("cuda"), 1)
        # "cuda" names the current device, as in PyTorch: a cuda:0 tensor moves.
        assert _on(tp.ones(2, device=D0).to("cuda"), 1)
    finally:
        tp.cuda.set_device(0)
    with tp.cuda.device(1):
        assert tp.cuda.current_device() == 1 and _on(tp.zeros(3, device="cuda"), 1)
        with tp.cuda.device(D0):
            assert _on(tp.zeros(3, device="cuda"), 0)
        assert tp.cuda.current_device() == 1
        x0 = tp.ones(4, device=D0)
        assert _on(x0 + 1.0, 0)  # a tensor's operators run where it lives, whatever is current
    assert tp.cuda.current_device() == 0
    with tp.cuda.device_of(tp.ones(1, device=D1)):
        assert tp.cuda.current_device() == 1
    assert tp.cuda.current_device() == 0


@two_gpus
def test_memory_statistics_are_per_device():
    with _quiet_allocator():
        _memory_statistics()


def _memory_statistics():
    tp.cuda.empty_cache()
    before = [tp.cuda.memory_allocated(i) for i in (0, 1)]
    big = tp.empty(1 << 20, device=D1)  # 4 MiB
    assert tp.cuda.memory_allocated(1) - before[1] >= 4 << 20
    assert tp.cuda.memory_allocated("cuda:1") == tp.cuda.memory_allocated(tp.device("cuda", 1))
    assert tp.cuda.memory_allocated(0) == before[0]
    assert tp.cuda.max_memory_allocated(1) >= tp.cuda.memory_allocated(1)
    assert tp.cuda.memory_reserved(1) >= tp.cuda.memory_allocated(1)
    with tp.cuda.device(1):
        assert tp.cuda.memory_allocated() == tp.cuda.memory_allocated(1)
    del big
    assert tp.cuda.memory_allocated(1) == before[1]
    tp.cuda.reset_peak_memory_stats(1)
    assert tp.cuda.max_memory_allocated(1) == tp.cuda.memory_allocated(1)
    reserved = tp.cuda.memory_reserved(1)
    assert reserved > 0  # the freed 4 MiB segment stays cached
    tp.cuda.empty_cache()
    assert tp.cuda.memory_reserved(1) < reserved


@two_gpus
def test_streams_and_events_are_per_device():
    s1 = tp.cuda.Stream(device=1)
    assert s1.device == tp.device("cuda", 1) and s1.device_index == 1
    a = _rand(512, 512, seed=14)
    x1 = a.to(D1)
    with tp.cuda.stream(s1):
        assert tp.cuda.current_stream(1) == s1
        assert tp.cuda.current_stream(0) == tp.cuda.default_stream(0)  # device 0's stream is untouched
        y = (x1 @ x1).relu()
        done = tp.cuda.Event()
        done.record(s1)
    s0 = tp.cuda.Stream(device=0)
    s0.wait_event(done)  # a stream of device 0 waits for an event of device 1
    s0.wait_stream(s1)
    tp.cuda.current_stream(1).wait_stream(s1)
    done.synchronize()
    assert done.query() and s1.query()
    s1.synchronize()
    tp.cuda.synchronize(1)
    tp.cuda.synchronize("cuda:1")
    ref = a.numpy().astype(np.float64)
    np.testing.assert_allclose(_np(y), np.maximum(ref @ ref, 0), rtol=1e-3, atol=1e-2)
    t0, t1 = tp.cuda.Event(enable_timing=True), tp.cuda.Event(enable_timing=True)
    t0.record(tp.cuda.current_stream(1))
    (x1 * 2.0).sum()
    t1.record(tp.cuda.current_stream(1))
    t1.synchronize()
    assert t0.elapsed_time(t1) >= 0.0


@two_gpus
def test_copies_between_gpus_wait_for_side_stream_work():
    # The copy runs after the work queued so far on the source's current stream,
    # and work queued later on the target's current stream runs after the copy.
    a = _rand(1024, 1024, seed=15)
    x0 = a.to(D0)
    s0, s1 = tp.cuda.Stream(device=0), tp.cuda.Stream(device=1)
    with tp.cuda.stream(s0), tp.cuda.stream(s1):
        y0 = (x0 @ x0) * 0.5  # still running on s0 when the copy is queued
        y1 = y0.to(D1)
        z1 = y1 + 1.0  # on s1, after the copy
        dst = tp.zeros(1024, 1024, device=D1)
        dst.copy_(y0)
    tp.cuda.synchronize(1)  # the reads below are on the legacy stream, which does not wait for s1
    ref = a.numpy().astype(np.float64)
    ref = (ref @ ref) * 0.5
    np.testing.assert_allclose(_np(y1), ref, rtol=1e-3, atol=1e-2)
    np.testing.assert_allclose(_np(z1), ref + 1.0, rtol=1e-3, atol=1e-2)
    np.testing.assert_allclose(_np(dst), ref, rtol=1e-3, atol=1e-2)


@two_gpus
def test_pinned_upload_to_gpu1():
    a = _rand(300, seed=16)
    p = a.pin_memory()
    x = p.to(D1, non_blocking=True)
    tp.cuda.synchronize(1)
    assert _on(x, 1)
    np.testing.assert_array_equal(_np(x), a.numpy())


@two_gpus
def test_autograd_backward_runs_on_gpu1():
    w = tp.randn(8, 4, device=D1, requires_grad=True)
    xin = tp.randn(5, 8, device=D1)
    loss = (F.softmax(xin @ w, dim=-1) * tp.arange(4.0, device=D1)).sum() + (w * w).sum()
    loss.backward()
    assert _on(w.grad, 1)
    wc = w.detach().cpu().requires_grad_(True)
    lc = (F.softmax(xin.cpu() @ wc, dim=-1) * tp.arange(4.0)).sum() + (wc * wc).sum()
    lc.backward()
    np.testing.assert_allclose(_np(w.grad), wc.grad.numpy(), rtol=1e-4, atol=1e-5)


@two_gpus
def test_module_on_gpu1_trains_eager_and_compiled():
    tp.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    ref = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    ref.load_state_dict(model.state_dict())
    model.to(D1)
    assert all(_on(p, 1) for p in model.parameters())
    x, target = _rand(10, 16, seed=17), tp.tensor([0, 1, 2, 3, 0, 1, 2, 3, 0, 1])
    compiled = tp.compile(model, strict_native=True)
    opt = tp.optim.SGD(model.parameters(), lr=0.1)
    ropt = tp.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(3):
        opt.zero_grad()
        ropt.zero_grad()
        out = compiled(x.to(D1))
        assert _on(out, 1)
        loss = F.cross_entropy(out, target.to(D1))
        loss.backward()
        rloss = F.cross_entropy(ref(x), target)
        rloss.backward()
        np.testing.assert_allclose(float(loss), float(rloss), rtol=1e-4, atol=1e-5)
        for p, q in zip(model.parameters(), ref.parameters()):
            assert _on(p.grad, 1)
            np.testing.assert_allclose(_np(p.grad), q.grad.numpy(), rtol=1e-3, atol=1e-5)
        opt.step()
        ropt.step()


@two_gpus
def test_compiled_function_on_gpu1_and_then_gpu0():
    def f(x, y):
        return (F.softmax(x, dim=-1) * y + tp.tanh(x)).sum(dim=0)

    a, b = _rand(32, 64, seed=18), _rand(32, 64, seed=19)
    want = _np(f(a, b))
    g = tp.compile(f, strict_native=True)
    with _quiet_allocator():
        keep0 = tp.ones(1, device=D0)
        base0 = tp.cuda.memory_allocated(0)
        r1 = g(a.to(D1), b.to(D1))
        assert _on(r1, 1)
        np.testing.assert_allclose(_np(r1), want, rtol=1e-4, atol=1e-4)
        assert tp.cuda.memory_allocated(0) == base0  # the region's buffers and constants are device 1's
    r0 = g(a.to(D0), b.to(D0))  # another device: another specialization, launched on device 0
    assert _on(r0, 0)
    np.testing.assert_allclose(_np(r0), want, rtol=1e-4, atol=1e-4)
    r1 = g(a.to(D1), b.to(D1))
    assert _on(r1, 1)
    np.testing.assert_allclose(_np(r1), want, rtol=1e-4, atol=1e-4)
    del keep0


@two_gpus
@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_cuda_graphs_of_compiled_regions_on_gpu1(mode):
    def f(x):
        return (x * 2.0 + 1.0).relu().sum(dim=-1)

    a = _rand(64, 256, seed=20)
    x = a.to(D1)
    want = _np(f(a))
    g = tp.compile(f, mode=mode, strict_native=True)
    before = tp.cuda._graph_region_stats()
    outs = []
    for _ in range(4):
        out = g(x)
        assert _on(out, 1)
        outs.append(_np(out))
        del out
    after = tp.cuda._graph_region_stats()
    assert after["captures"] - before["captures"] == 1 and after["replays"] - before["replays"] >= 2
    for o in outs:
        np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-4)


@two_gpus
def test_user_cuda_graph_on_gpu1():
    with tp.cuda.device(1):
        g = tp.cuda.CUDAGraph()
        static_in = _rand(256, seed=21).to(D1)
        static_in * 2.0  # warm-up
        with tp.cuda.graph(g):
            static_out = static_in * 2.0 + 1.0
    assert _on(static_out, 1) and g.node_count() >= 1
    for seed in (22, 23):
        new = _rand(256, seed=seed)
        static_in.copy_(new.to(D1))
        g.replay()
        np.testing.assert_allclose(_np(static_out), new.numpy() * 2.0 + 1.0, rtol=1e-6)


@two_gpus
def test_random_operators_follow_the_seed_on_every_gpu():
    x = tp.ones(1000)
    masks = []
    for dev in (D0, D1):
        tp.cuda.manual_seed_all(7)
        masks.append(_np(F.dropout(x.to(dev), 0.5, training=True)))
        tp.cuda.manual_seed(7)
        r = tp.randn(50, device=dev)
        assert _on(r, int(dev[-1]))
        tp.manual_seed(7)
        np.testing.assert_array_equal(_np(r), tp.randn(50).numpy())
    np.testing.assert_array_equal(masks[0], masks[1])
    assert 300 < (masks[0] != 0).sum() < 700


@two_gpus
def test_dlpack_with_torch_keeps_the_device_index():
    if not _torch_gpus(2):
        pytest.skip("torch with two CUDA GPUs is not available here")
    x = tp.arange(12, dtype=tp.float32, device=D1).reshape(3, 4)
    assert x.__dlpack_device__() == (2, 1)
    t = torch.from_dlpack(x)
    assert t.device == torch.device("cuda", 1) and t.data_ptr() == x.data_ptr()
    np.testing.assert_array_equal(t.cpu().numpy(), _np(x))
    src = torch.arange(8, dtype=torch.float64, device="cuda:1").reshape(2, 4)
    y = tp.from_dlpack(src)
    assert _on(y, 1) and y.data_ptr() == src.data_ptr()
    np.testing.assert_array_equal(_np(y * 2.0), (src * 2).cpu().numpy())


@two_gpus
def test_work_on_gpu1_leaves_the_callers_current_device():
    # PyTorch in the same thread reads the driver's current context as its
    # current device: an operation on cuda:1 must not leave device 1 current.
    if not _torch_gpus(2):
        pytest.skip("torch with two CUDA GPUs is not available here")
    torch.cuda.init()
    torch.cuda.set_device(0)
    assert torch.cuda.current_device() == 0
    x = _rand(32, 32, seed=24).to(D1)
    assert torch.cuda.current_device() == 0
    y = x @ x + 1.0
    assert torch.cuda.current_device() == 0
    F.softmax(y, dim=-1).to(D0)
    assert torch.cuda.current_device() == 0
    tp.cuda.synchronize(1)
    assert torch.cuda.current_device() == 0
    tp.compile(lambda a: (a * 3.0).relu(), strict_native=True)(y)
    assert torch.cuda.current_device() == 0
    tp.from_dlpack(torch.ones(3, device="cuda:1"))
    torch.from_dlpack(y)
    assert torch.cuda.current_device() == 0
    assert torch.zeros(1, device="cuda").device == torch.device("cuda", 0)
    # And tp.cuda.set_device is seen by torch, as torch.cuda.set_device would be by tp.
    try:
        tp.cuda.set_device(1)
        assert torch.cuda.current_device() == 1
        x + 1.0
        tp.ones(2, device=D0) * 2.0
        assert torch.cuda.current_device() == 1
    finally:
        tp.cuda.set_device(0)
    assert torch.cuda.current_device() == 0
