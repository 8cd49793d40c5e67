"""CUDA Graphs: tp.compile(mode="reduce-overhead") on CUDA tensors (issue 12 item 7)
and tp.cuda.CUDAGraph. Every result is compared with eager; the graph-region
counters show which path a call took (capture, replay, launches one by one)."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F

gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")
pytestmark = gpu


def _np(t):
    return t.cpu().numpy()


def _stats():
    return tp.cuda._graph_region_stats()


def _delta(before):
    after = _stats()
    return {k: after[k] - before[k] for k in after}


def _rand(*shape, seed=0):
    return tp.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32)).cuda()


def example_1_1(x):
    return (x * 2.0 + 1.0).relu().sum(dim=-1)


def softmax(x):
    e = tp.exp(x - x.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


@pytest.mark.parametrize("fn", [example_1_1, softmax], ids=["example_1_1", "softmax"])
def test_reduce_overhead_equals_eager_and_replays(fn):
    x = _rand(64, 256)
    f = tp.compile(fn, mode="reduce-overhead")
    want = _np(fn(x))
    before = _stats()
    for _ in range(4):
        np.testing.assert_allclose(_np(f(x)), want, rtol=1e-5, atol=1e-5)
    d = _delta(before)
    assert d["captures"] == 1 and d["replays"] >= 2 and d["plain_calls"] <= 2  # warm-up, then the graph


def test_reduce_overhead_mlp_with_cublaslt_gemm():
    tp.manual_seed(0)
    m = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)).cuda()
    x = _rand(16, 32, seed=3)
    with tp.no_grad():
        want = _np(m(x))
        f = tp.compile(m, mode="reduce-overhead")
        before = _stats()
        for _ in range(4):
            np.testing.assert_allclose(_np(f(x)), want, rtol=1e-4, atol=1e-4)
    d = _delta(before)
    assert d["captures"] == 1 and d["replays"] >= 1


def test_outputs_kept_across_calls_stay_correct():
    # Exercise 27: an output kept from call N must not change when call N+1 replays.
    f = tp.compile(lambda x: x * 2.0 + 1.0, mode="reduce-overhead")
    xs = [_rand(8, seed=s) for s in range(5)]
    kept = [f(x) for x in xs]  # every output still referenced
    for x, y in zip(xs, kept):
        np.testing.assert_allclose(_np(y), _np(x) * 2.0 + 1.0, rtol=1e-6)
    # Dropping outputs lets the graph replay again.
    del kept, y
    before = _stats()
    for x in xs:
        np.testing.assert_allclose(_np(f(x)), _np(x) * 2.0 + 1.0, rtol=1e-6)
    assert _delta(before)["replays"] >= 4


def test_input_at_a_new_address_is_copied_in():
    f = tp.compile(lambda x: tp.tanh(x) * 3.0, mode="reduce-overhead")
    x1 = _rand(1000, seed=1)
    for _ in range(3):
        f(x1)
    before = _stats()
    x2 = _rand(1000, seed=2)  # another storage: read through a static buffer from now on
    np.testing.assert_allclose(_np(f(x2)), np.tanh(_np(x2)) * 3.0, rtol=1e-5, atol=1e-6)
    d = _delta(before)
    assert d["copied_inputs"] == 1 and d["captures"] == 1
    x3 = _rand(1000, seed=3)
    np.testing.assert_allclose(_np(f(x3)), np.tanh(_np(x3)) * 3.0, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(f(x1)), np.tanh(_np(x1)) * 3.0, rtol=1e-5, atol=1e-6)
    assert _delta(before)["captures"] == 1  # copied inputs need no new capture


def test_input_written_in_place_between_calls_is_seen():
    f = tp.compile(lambda x: x + 1.0, mode="reduce-overhead")
    x = _rand(64, seed=4)
    for k in range(4):
        x.mul_(2.0)  # same storage, new contents: the graph reads it in place
        np.testing.assert_allclose(_np(f(x)), _np(x) + 1.0, rtol=1e-6)


def test_parameter_updated_in_place_and_data_swapped():
    tp.manual_seed(1)
    m = nn.Linear(16, 16).cuda()
    x = _rand(4, 16, seed=5)
    f = tp.compile(m, mode="reduce-overhead")
    with tp.no_grad():
        for _ in range(3):
            np.testing.assert_allclose(_np(f(x)), _np(m(x)), rtol=1e-5, atol=1e-5)
        m.weight.mul_(0.5)  # in-place update (an optimizer step): seen by the replay
        np.testing.assert_allclose(_np(f(x)), _np(m(x)), rtol=1e-5, atol=1e-5)
        before = _stats()
        m.weight.data = _rand(16, 16, seed=6)  # new storage: captured again / copied in
        np.testing.assert_allclose(_np(f(x)), _np(m(x)), rtol=1e-5, atol=1e-5)
        d = _delta(before)
        assert d["copied_inputs"] + d["captures"] >= 1
        np.testing.assert_allclose(_np(f(x)), _np(m(x)), rtol=1e-5, atol=1e-5)


def test_recapture_on_shape_change():
    f = tp.compile(lambda x: x * x - 1.0, mode="reduce-overhead", dynamic=False)
    before = _stats()
    for n in (16, 32):
        x = _rand(n, seed=n)
        for _ in range(4):
            np.testing.assert_allclose(_np(f(x)), _np(x) ** 2 - 1.0, rtol=1e-6)
    assert _delta(before)["captures"] == 2


def test_reduce_overhead_on_a_side_stream_caller():
    f = tp.compile(lambda x: x * 3.0, mode="reduce-overhead")
    x = _rand(128, seed=7)
    s = tp.cuda.Stream()
    s.wait_stream(tp.cuda.current_stream())
    with tp.cuda.stream(s):
        outs = [f(x) for _ in range(3)]
        got = _np(outs[-1])
    np.testing.assert_allclose(got, _np(x) * 3.0, rtol=1e-6)


def test_user_cuda_graph_capture_and_replay():
    static_in = _rand(256, seed=8)
    g = tp.cuda.CUDAGraph()
    static_in * 2.0  # warm-up: kernel compiled and loaded
    with tp.cuda.graph(g):
        static_out = static_in * 2.0 + 1.0
    assert g.node_count() >= 1
    for seed in (9, 10):
        new = _rand(256, seed=seed)
        static_in.copy_(new)
        g.replay()
        np.testing.assert_allclose(_np(static_out), _np(new) * 2.0 + 1.0, rtol=1e-6)


def test_synchronizing_inside_a_capture_is_refused():
    g = tp.cuda.CUDAGraph()
    x = _rand(8, seed=11)
    with pytest.raises(RuntimeError, match="captured"):
        with tp.cuda.graph(g):
            (x * 2.0).cpu()
    # The thread is usable again afterwards.
    np.testing.assert_allclose(_np(x * 2.0), _np(x) * 2.0)


def test_reduce_overhead_with_an_input_written_in_place():
    def f(acc, x):
        acc.add_(x)
        return acc * 2.0

    acc = tp.zeros(32, device="cuda")
    acc_ref = tp.zeros(32, device="cuda")
    x = _rand(32, seed=12)
    g = tp.compile(f, mode="reduce-overhead")
    for _ in range(4):
        got = g(acc, x)
        want = f(acc_ref, x)
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-6)
        np.testing.assert_allclose(_np(acc), _np(acc_ref), rtol=1e-6)


def test_view_at_another_offset_of_the_same_storage():
    # Same storage, same layout, another offset: the graph must not read the captured address.
    f = tp.compile(lambda x: x * 10.0, mode="reduce-overhead")
    base = tp.arange(0, 65, device="cuda").float()
    a, b = base[:64], base[1:]
    for _ in range(3):
        np.testing.assert_allclose(_np(f(a)), _np(a) * 10.0)
    np.testing.assert_allclose(_np(f(b)), _np(b) * 10.0)
    np.testing.assert_allclose(_np(f(a)), _np(a) * 10.0)
