"""The split form of a reduction over all elements (issue 12): x.sum(),
x.mean(), x.amax() and losses over a large tensor run on many blocks, each
publishing a partial that the last block to arrive combines in block order.
The partials and the arrival counter are a per-launch scratch buffer from the
stream-ordered caching allocator (the kernel's last argument), so one compiled
region may run on two streams at once. Without a GPU: the printed form and its
NVRTC compilation; on a GPU: the result against NumPy in float64, bitwise
identical across calls, and concurrent launches on two streams."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import _C

gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")
nvrtc = pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed")

CASES = {
    "sum": (lambda x: x.sum(), 1, lambda a: a.sum()),
    "mean": (lambda x: x.mean(), 1, lambda a: a.mean()),
    "amax": (lambda x: x.amax(), 1, lambda a: a.max()),
    "amin": (lambda x: x.amin(), 1, lambda a: a.min()),
    "mse_loss": (lambda x, y: F.mse_loss(x, y), 2, lambda a, b: ((a - b) ** 2).mean()),
}


def _inputs(n, count, dtype=tp.float32):
    return [tp.randn(n, dtype=dtype) * 3 + 1 for _ in range(count)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_large_reduction_over_all_elements_is_split(name):
    fn, count, _ = CASES[name]
    kernels = _C._stax_cuda_kernels(_C._capture(fn, *_inputs(1 << 20, count)))
    assert len(kernels) == 1
    _, form, block, _, blocks = kernels[0]
    assert form == "row" and block == 512 and blocks > 1


def test_small_reduction_keeps_one_block():
    kernels = _C._stax_cuda_kernels(_C._capture(lambda x: x.sum(), tp.randn(1000)))
    assert kernels[0][4] == 1 and kernels[0][2] == 1024


def test_two_reductions_in_one_row_keep_one_block():
    # The second reduction reads the first's total: one block must see both.
    x = tp.randn(1 << 20)
    kernels = _C._stax_cuda_kernels(_C._capture(lambda x: (x - x.mean()).abs().sum(), x))
    assert all(k[4] == 1 for k in kernels)


@nvrtc
@pytest.mark.parametrize("arch", [80, 90])
@pytest.mark.parametrize("dtype", [tp.float32, tp.float64])
def test_split_source_compiles(arch, dtype):
    g = _C._capture(lambda x: x.mean(), *_inputs(1 << 20, 1, dtype))
    src = _C._stax_cuda_source(g)
    assert "tp_scratch" in src and "atomicAdd" in src
    for name, *_ in _C._stax_cuda_kernels(g):
        assert tp.cuda._nvrtc_compile(src, name, arch)[:4] == b"\x7fELF"


def test_split_scratch_is_a_kernel_argument_not_module_memory():
    # Module-scope __device__ partials were shared by concurrent launches of
    # one region (two streams): the scratch must come with each launch.
    src = _C._stax_cuda_source(_C._capture(lambda x: x.sum(), *_inputs(1 << 20, 1)))
    assert "__device__ float" not in src and "__device__ double" not in src and "__device__ unsigned" not in src
    assert "unsigned char* __restrict__ tp_scratch)" in src


@gpu
@pytest.mark.parametrize("n", [1 << 16, 1_000_003, 1 << 24])
@pytest.mark.parametrize("name", sorted(CASES))
def test_split_reduction_matches_numpy_and_repeats_bitwise(name, n):
    fn, count, ref = CASES[name]
    cpu = _inputs(n, count)
    args = [a.to("cuda") for a in cpu]
    f = tp.compile(fn, strict_native=True)
    first = f(*args).cpu().numpy()
    want = ref(*[a.numpy().astype(np.float64) for a in cpu])
    np.testing.assert_allclose(first, want, rtol=1e-5, atol=1e-6)
    for _ in range(3):  # the counter is reset by the last block: later launches combine afresh
        assert f(*args).cpu().numpy().tobytes() == first.tobytes()


@gpu
def test_eager_sum_of_a_large_cuda_tensor_is_split_and_exact():
    x = tp.randn(1 << 22)
    got = x.to("cuda").mean()
    np.testing.assert_allclose(got.cpu().numpy(), x.numpy().astype(np.float64).mean(), rtol=1e-5, atol=1e-7)


@gpu
@pytest.mark.parametrize("name", ["sum", "amax"])
def test_one_split_region_on_two_streams_at_once(name):
    # Regression: the partials and the counter were per module, so launches of
    # one compiled region on two streams at the same time mixed their partials
    # (a block of one launch could count itself last for the other). Both
    # streams wait for one long piece of work on a third stream, so their
    # reductions (64 blocks each: both fit on the GPU together) start together.
    fn, _, ref = CASES[name]
    n = 1 << 20
    cpu = [tp.randn(n) * 3 + k for k in (1.0, -7.0)]
    want = [ref(x.numpy().astype(np.float64)) for x in cpu]
    xs = [x.to("cuda") for x in cpu]
    f = tp.compile(fn, strict_native=True)
    assert _C._stax_cuda_kernels(_C._capture(fn, cpu[0]))[0][4] > 1  # split form
    f(xs[0])
    tp.cuda.synchronize()
    gate, streams = tp.cuda.Stream(), [tp.cuda.Stream(), tp.cuda.Stream()]
    assert len({gate.cuda_stream, *(s.cuda_stream for s in streams)}) == 3
    big = tp.randn(1 << 24).to("cuda")
    outs = [[], []]
    for _ in range(4):
        with tp.cuda.stream(gate):
            for _ in range(20):
                big = big * 1.0
        for s in streams:
            s.wait_stream(gate)
        for _ in range(10):
            for s, x, o in zip(streams, xs, outs):
                with tp.cuda.stream(s):
                    o.append(f(x))
        for s in streams:
            gate.wait_stream(s)
    tp.cuda.synchronize()
    for o, w in zip(outs, want):
        got = np.array([r.cpu().numpy() for r in o], dtype=np.float64)
        np.testing.assert_allclose(got, np.full_like(got, w), rtol=1e-5, atol=1e-5)
        assert len({r.cpu().numpy().tobytes() for r in o}) == 1  # deterministic on both streams


@gpu
def test_split_reduction_under_cuda_graph_replays():
    # The per-launch scratch (allocation + counter memset) is recorded into the
    # graph: every replay starts from a zeroed counter and sees new input data.
    x = tp.randn(1 << 20) * 2 + 1
    xc = x.to("cuda")
    f = tp.compile(lambda v: v.mean(), mode="reduce-overhead")
    before = tp.cuda._graph_region_stats()
    for k in range(5):
        if k == 3:
            xc.mul_(3.0)
            x = x * 3.0
        np.testing.assert_allclose(f(xc).cpu().numpy(), x.numpy().astype(np.float64).mean(), rtol=1e-5, atol=1e-6)
    after = tp.cuda._graph_region_stats()
    assert after["captures"] - before["captures"] == 1 and after["replays"] - before["replays"] >= 2
