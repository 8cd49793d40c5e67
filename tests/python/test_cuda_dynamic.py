"""Dynamic shapes on CUDA (issues 11 and 12): the CUDA printer takes symbolic
sizes — kernels receive every size as an argument, loop to size expressions and
make each size-dependent launch choice (grid, block, split factor) at launch —
so `tp.compile(f, dynamic=True)` on CUDA tensors is ONE version running
generated kernels at every size, and automatic dynamic on CUDA turns symbolic
at the second size as on the CPU.

Without a GPU: the printed symbolic source (the `_testing_stax_cuda_symbolic`
hook marks every size equal to a hint as a symbol, as the CPU tests do) is
compiled by NVRTC for sm_80 and sm_90. With a GPU: tp.compile under
strict_native=True (an interpreted or eager fallback would raise) against
eager at sizes 1, 2, primes and large ones, the number of versions, CUDA graph
mode at changing sizes, and one region called beyond its 32-bit caps."""
import numpy as np
import pytest
import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F
from tensorplay import _C
from test_dynamic_training_cnn import Net

nvrtc = pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed (pip install nvidia-cuda-nvrtc)")
gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")

A, B = 37, 53  # distinctive hints


def ex11(x):
    return (x * 2 + 1).relu()


def ex11_sum(x, w):
    return ((x + w).relu() * 2).sum(-1)


def softmax5(x):
    m = x.amax(-1, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(-1, keepdim=True)


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b)


def row_sum(x):
    return x.sum(-1)


def col_sum(x):
    return x.sum(0)


def total(x):
    return x.sum()


def row_mean(x):
    return x.mean(-1)


def views(x):
    # reshape over symbolic dims, a transpose and a reduction over the new dim
    n, d = x.shape
    return (x.reshape(n, d // 2, 2).sum(-1).t() * 3).contiguous()


# name: (function, make(rows, cols) -> inputs, hints, expected forms)
CASES = {
    "ex11": (ex11, lambda r, c: [tp.randn(r, c)], (A, B), ["flat"]),
    "ex11_sum": (ex11_sum, lambda r, c: [tp.randn(r, c), tp.randn(c)], (A, B), ["row"]),
    "softmax": (softmax5, lambda r, c: [tp.randn(r, c)], (A, B), ["row"]),
    "layer_norm": (layer_norm, lambda r, c: [tp.randn(r, c), tp.randn(c), tp.randn(c)], (A, B), ["row"]),
    "row_sum": (row_sum, lambda r, c: [tp.randn(r, c)], (A, B), ["row"]),
    "col_sum": (col_sum, lambda r, c: [tp.randn(r, c)], (A, B), ["column"]),
    "total": (total, lambda r, c: [tp.randn(r, c)], (A, B), ["row"]),
    "row_mean": (row_mean, lambda r, c: [tp.randn(r, c)], (A, B), ["row"]),
}


def symbolic(name):
    fn, make, hints, _ = CASES[name]
    return _C._testing_stax_cuda_symbolic(fn, make(*hints), list(hints))


# --- the printed source (no GPU) ------------------------------------------------

@pytest.mark.parametrize("name", sorted(CASES))
def test_symbolic_kernels_take_sizes_as_arguments(name):
    src, kernels, caps, _ = symbolic(name)
    assert [k[1] for k in kernels] == CASES[name][3]
    assert all(k[5] for k in kernels)  # every launch re-made from the call's sizes
    assert "const i64 tp_arg_size0" in src and "const i64 tp_arg_size1" in src
    # No hint is baked into the loops: at twice the hints (the same 32-bit
    # caps, grown from the hints by doublings) the source is the same.
    fn, make, hints, _ = CASES[name]
    src2, _, _, _ = _C._testing_stax_cuda_symbolic(fn, make(2 * A, 2 * B), [2 * A, 2 * B])
    assert src2 == src


@nvrtc
@pytest.mark.parametrize("arch", [80, 90])
@pytest.mark.parametrize("name", sorted(CASES))
def test_symbolic_source_compiles_with_nvrtc(name, arch):
    src, _, _, _ = symbolic(name)
    assert tp.cuda._nvrtc_compile(src, "sym_" + name, arch)[:4] == b"\x7fELF"


def test_32_bit_indices_under_caps_near_the_hints():
    # The declared ranges are unbounded: the indices are proved 32-bit under
    # per-symbol caps grown from the hints (calls beyond them run a 64-bit build).
    src, _, caps, _ = symbolic("softmax")
    assert len(caps) == 2 and caps[0] >= A and caps[1] >= B
    assert caps[0] * caps[1] <= 1 << 30 and caps[0] * caps[1] >= 1 << 27
    assert "const int tp_size0 = (int)tp_arg_size0" in src


def test_symbolic_register_row_has_a_run_time_fallback():
    # K vector groups a thread are planned for rows up to 2048 groups; the block
    # is chosen at launch, and a longer row takes the plain path.
    src, kernels, _, _ = symbolic("softmax")
    assert "float4 tp_c0[4]" in src
    assert "<= 4 * (int)blockDim.x) {" in src
    assert "__launch_bounds__(512)" in src


def test_symbolic_flat_loop_has_no_division_per_item():
    src, _, _, _ = symbolic("ex11")
    # The grid-stride step is split once into rows and a remainder.
    assert "tp_so" in src and "tp_sg" in src
    body = src[src.index("for (int o"):]
    assert " / " not in body.split("\n")[0]


def test_symbolic_flat_loops_skip_a_zero_count():
    # Rows shorter than one vector have no vector groups, rows of a multiple of
    # 4 no tail: those loops' step divisions would divide by zero (an illegal
    # address on the GPU at sizes (2, 3) and (32768, 8192) before the guard).
    src, _, _, _ = symbolic("ex11")
    assert src.count("const int tp_per") == 2
    assert src.count(" > 0) {\n    const int tp_per") == 2


def linear_relu(x, w, b):
    return (x @ w + b).relu()


def bias_and_weight_grads(g, x):
    # A backward's bias gradient (column sums of g) beside the weight gradient
    # x^T @ g: the CUDA preparation fuses them into one cuBLASLt call with the
    # bias-gradient epilogue (two results).
    return x.t() @ g, g.sum(0)


@pytest.mark.parametrize("fn,make", [
    (linear_relu, lambda n: [tp.randn(n, 12), tp.randn(12, 24), tp.randn(24)]),
    (bias_and_weight_grads, lambda n: [tp.randn(n, 24), tp.randn(n, 12)]),
], ids=["gemm_epilogue", "gemm_bias_grad"])
def test_fused_gemm_calls_keep_symbolic_sizes(fn, make):
    # Symbolic training on CUDA (issue 11): the GEMM epilogue fusions made
    # their nodes without symbolic sizes, so a symbolic forward's fused
    # product was refused and a symbolic backward's two-result bias-gradient
    # call read its results' symbolic sizes out of range (std::out_of_range).
    src, kernels, _, _ = _C._testing_stax_cuda_symbolic(fn, make(A), [A])
    # Still fused at symbolic sizes: the region is the one library call (an
    # unfused ReLU or column sum would be a generated kernel).
    assert kernels == []


def test_static_source_has_no_size_arguments():
    fn, make, hints, _ = CASES["softmax"]
    src = _C._stax_cuda_source(_C._capture(fn, *make(*hints)))
    assert "tp_arg_size" not in src and "tp_size" not in src


# --- on a GPU ---------------------------------------------------------------------

def _cuda(a):
    return tp.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).cuda()


def _rng(seed=0):
    return np.random.default_rng(seed)


def _close(got, want, rtol=1e-5, atol=1e-5, msg=""):
    got = got.cpu().numpy() if hasattr(got, "cpu") else got
    want = want.cpu().numpy() if hasattr(want, "cpu") else want
    assert got.shape == want.shape, msg
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=msg)


SIZES = [(2, 3), (3, 2), (2, 2), (7, 13), (13, 7), (97, 1031), (1031, 97), (257, 4099), (4, 12289), (3001, 2)]


@gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_region_at_many_sizes_equals_eager(name):
    fn, make, hints, _ = CASES[name]
    _, _, _, run = symbolic(name)
    for r, c in SIZES:
        if name == "views" and c % 2:
            continue
        inputs = [t.cuda() for t in make(r, c)]
        got = run(inputs)
        want = fn(*inputs)
        _close(got[0], want, rtol=1e-4, atol=1e-4, msg=f"{name} at {(r, c)}")


def _compile(fn, **kw):
    return tp.compile(fn, dynamic=True, strict_native=True, **kw)


@gpu
@pytest.mark.parametrize("fn", [ex11, softmax5, row_sum, col_sum, total, row_mean, views],
                         ids=["ex11", "softmax", "row_sum", "col_sum", "total", "row_mean", "views"])
def test_dynamic_true_is_one_generated_version_over_batch_sizes(fn):
    g = _rng(1)
    f = _compile(fn)
    before = tp.compiler.metrics.fallback_count
    for n in [2, 3, 5, 7, 64, 97, 1000, 4099]:
        x = _cuda(g.standard_normal((n, 258)))
        _close(f(x), fn(x), rtol=1e-4, atol=1e-4, msg=str(n))
    assert f.num_specializations == 1
    assert tp.compiler.metrics.fallback_count == before


@gpu
@pytest.mark.parametrize("fn", [softmax5, layer_norm, row_sum, ex11], ids=["softmax", "layer_norm", "row_sum", "ex11"])
def test_dynamic_true_over_the_feature_dim(fn):
    # Rows of 2 to 12289 floats: the register rows (K = 4 groups a thread,
    # block at launch) and, past 512 x 4 groups, the plain row path.
    g = _rng(2)
    f = _compile(fn)
    for d in [2, 3, 5, 64, 127, 1000, 4096, 8191, 8192, 12289]:
        x = _cuda(g.standard_normal((6, d)))
        args = [x] if fn is not layer_norm else [x, _cuda(g.standard_normal(d)), _cuda(g.standard_normal(d))]
        _close(f(*args), fn(*args), rtol=1e-4, atol=1e-4, msg=str(d))
    assert f.num_specializations == 1


@gpu
def test_size_one_is_its_own_static_version():
    f = _compile(softmax5)
    g = _rng(3)
    for n in [4, 1, 9, 1, 2]:
        x = _cuda(g.standard_normal((n, 33)))
        _close(f(x), softmax5(x), msg=str(n))
    assert f.num_specializations == 2  # 0 and 1 are never symbolic


@gpu
def test_automatic_dynamic_on_cuda_turns_symbolic_at_the_second_size():
    f = tp.compile(ex11_sum, strict_native=True)
    g = _rng(4)
    w = _cuda(g.standard_normal(128))
    for n in [8, 16, 24, 32, 40, 333]:
        x = _cuda(g.standard_normal((n, 128)))
        _close(f(x, w), ex11_sum(x, w), rtol=1e-4, atol=1e-4, msg=str(n))
    assert f.num_specializations == 2  # static at 8, symbolic from 16 on


@gpu
def test_split_reduction_over_symbolic_sizes():
    # The split factor follows the call's size (1 block for a few items, up to
    # 1024 for millions); the combine is deterministic at each size.
    f = _compile(total)
    g = _rng(5)
    for n in [3, 100, 5000, 1 << 20, (1 << 22) + 7]:
        x = _cuda(g.standard_normal(n))
        a, b = f(x), f(x)
        assert a.cpu().numpy() == b.cpu().numpy()
        np.testing.assert_allclose(a.cpu().numpy(), x.cpu().numpy().astype(np.float64).sum(), rtol=1e-5, atol=1e-3)
    assert f.num_specializations == 1


@gpu
def test_calls_beyond_the_32_bit_caps_run_the_wide_build():
    src, kernels, caps, run = symbolic("row_sum")
    g = _rng(6)
    x = _cuda(g.standard_normal((40, 30)))
    _close(run([x])[0], x.sum(-1), rtol=1e-5, atol=1e-5)
    n = caps[0] + 3  # past symbol 0's cap: the 64-bit print, compiled now
    x = _cuda(g.standard_normal((n, 3)))
    _close(run([x])[0], x.sum(-1), rtol=1e-5, atol=1e-5)


@gpu
def test_reduce_overhead_with_dynamic_sizes():
    stats = tp.cuda._graph_region_stats
    f = tp.compile(softmax5, mode="reduce-overhead", dynamic=True, strict_native=True)
    g = _rng(7)
    xs = {n: _cuda(g.standard_normal((n, 200))) for n in [16, 48, 5]}
    before = stats()
    for n in [16, 16, 16, 48, 48, 16, 5, 5, 5, 48]:
        _close(f(xs[n]), softmax5(xs[n]), msg=str(n))
    after = stats()
    assert f.num_specializations == 1
    assert after["captures"] - before["captures"] >= 3  # a graph per size change
    assert after["replays"] - before["replays"] >= 3


# --- symbolic training on CUDA (issue 11) ----------------------------------------
# tp.compile(step, dynamic=True) of a training step on CUDA tensors: the joint
# graph traced with the capture's symbols, partitioned once, one forward and
# one backward CUDA region for every batch size; the loss and every .grad
# against the eager CUDA step at each size.

def _train_and_compare(params, step, batches, rtol=2e-4, atol=1e-4):
    tp.compiler.reset()
    cf = tp.compile(step, dynamic=True, strict_native=True)
    for i, inputs in enumerate(batches):
        for p in params:
            p.grad = None
        loss = cf(*inputs)
        loss.backward()
        got = [p.grad.clone() for p in params]
        for p in params:
            p.grad = None
        ref = step(*inputs)
        ref.backward()
        _close(loss.detach(), ref.detach(), rtol=rtol, atol=atol, msg=f"loss, batch {i}")
        for k, (g, p) in enumerate(zip(got, params)):
            assert p.grad is not None
            _close(g, p.grad, rtol=rtol, atol=atol, msg=f"grad {k}, batch {i}")
    assert cf.num_specializations == 1
    assert tp.compiler.metrics.aot_regions == 1  # one joint graph, one partition
    assert tp.compiler.metrics.compile_count == 2  # one forward and one backward region
    assert tp.compiler.metrics.fallback_count == 0


@gpu
def test_mlp_training_with_dynamic_true_on_cuda_is_one_version():
    tp.manual_seed(0)
    m = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 5)).cuda()

    def step(x, y):
        return F.cross_entropy(m(x), y)

    batches = []
    for n in [32, 48, 17, 2, 3, 97, 257]:
        tp.manual_seed(n)
        batches.append((tp.randn(n, 12).cuda(), tp.randint(0, 5, (n,)).cuda()))
    _train_and_compare(list(m.parameters()), step, batches)


class _Block(nn.Module):
    """Pre-LN attention block: layer_norm, Linear, softmax attention, GELU."""
    D = 16

    def __init__(self):
        super().__init__()
        D = self.D
        self.ln = nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D)
        self.o = nn.Linear(D, D)
        self.ff = nn.Linear(D, D)

    def forward(self, x):
        D = self.D
        h = self.ln(x)
        q, k, v = self.qkv(h).split(D, dim=-1)
        a = ((q @ k.transpose(-2, -1)) * (1.0 / D ** 0.5)).softmax(-1)
        x = x + self.o(a @ v)
        return x + F.gelu(self.ff(x))


@gpu
def test_attention_block_training_over_sequence_lengths_on_cuda_is_one_version():
    tp.manual_seed(1)
    blk = _Block().cuda()

    def step(x):
        return blk(x).pow(2).mean()

    batches = []
    for t in [9, 12, 5, 17, 2, 33, 64]:
        tp.manual_seed(100 + t)
        batches.append((tp.randn(3, t, _Block.D).cuda(),))
    _train_and_compare(list(blk.parameters()), step, batches)


@gpu
def test_cnn_with_batch_norm_training_on_cuda_is_one_version():
    tp.manual_seed(0)
    net = Net().cuda()

    def step(x, y):
        return F.cross_entropy(net(x), y)

    batches = []
    for n in [8, 16, 3, 7, 13]:
        tp.manual_seed(200 + n)
        batches.append((tp.randn(n, 2, 10, 10).cuda(), tp.randint(0, 5, (n,)).cuda()))
    # Each step in training mode updates the running statistics twice (compiled
    # and eager): the comparison is of losses and gradients only.
    _train_and_compare(list(net.parameters()), step, batches, rtol=5e-4, atol=2e-4)

