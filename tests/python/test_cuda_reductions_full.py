"""Reductions on CUDA tensors (issue 12): whole-tensor max()/min(), argmax/argmin
(with and without dim), max/min over a dim (values + indices), amax/amin,
sum/mean/prod, all/any, var/std/var_mean (correction, large means), norm,
logsumexp, clamp/where — the calls of MLP / transformer / CNN training loops
and their metrics. Eager CUDA operators are one-operator Stax regions
(stax/backend/cuda_eager.cpp): before this file, max()/min() and norm were
extern calls (no loop rule) and the arg reductions a pair accumulator the CUDA
printer refuses, so each raised NotImplementedError on a GPU.

Also dynamic shapes: var/std on CUDA lower to two plain reductions in double
(static and symbolic), and a symbolic CUDA region whose print is refused is
compiled statically per call layout instead of running eagerly.

Without a GPU: every case's one-operator region has no extern call and its
source compiles with NVRTC for sm_90; the symbolic var/std sources compile and
compute in double; the specialized graph prints what a capture at those sizes
prints. With a GPU: each operator against CPU eager (and torch's semantics:
NaN propagation, first index of ties, errors on empty inputs)."""
import math

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import _C

nvrtc = pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed (pip install nvidia-cuda-nvrtc)")
gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")

FLOATS = ["float32", "float64", "bfloat16", "float16"]

# name: (function, dtypes it takes)
CASES = {
    "max": (lambda x: x.max(), FLOATS + ["int64", "bool"]),
    "min": (lambda x: x.min(), FLOATS + ["int64", "bool"]),
    "max_dim": (lambda x: x.max(dim=1), FLOATS + ["int64"]),
    "min_dim0_keep": (lambda x: x.min(0, keepdim=True), FLOATS + ["int64"]),
    "argmax": (lambda x: x.argmax(), FLOATS + ["int64"]),
    "argmin": (lambda x: x.argmin(), FLOATS + ["int64"]),
    "argmax1": (lambda x: x.argmax(1), FLOATS + ["int64"]),
    "argmin0_keep": (lambda x: x.argmin(0, keepdim=True), FLOATS + ["int64"]),
    "amax1": (lambda x: x.amax(1), FLOATS + ["int64"]),
    "amin_all": (lambda x: x.amin(), FLOATS + ["int64"]),
    "sum": (lambda x: x.sum(), FLOATS + ["int64"]),
    "mean": (lambda x: x.mean(), FLOATS),
    "prod1": (lambda x: x.prod(1), FLOATS + ["int64"]),
    "all": (lambda x: x.all(), FLOATS + ["int64", "bool"]),
    "any1": (lambda x: x.any(1), FLOATS + ["int64", "bool"]),
    "var": (lambda x: x.var(), FLOATS),
    "std1": (lambda x: x.std(1), FLOATS),
    "var0_corr0": (lambda x: x.var(0, correction=0), FLOATS),
    "var_mean1": (lambda x: tp.var_mean(x, 1), FLOATS),
    "std_mean": (lambda x: tp.std_mean(x), FLOATS),
    "norm": (lambda x: x.norm(), FLOATS),
    "norm1_dim": (lambda x: x.norm(1, dim=1), FLOATS),
    "norm_inf": (lambda x: x.norm(float("inf")), FLOATS),
    "norm3_dim0": (lambda x: x.norm(3, dim=0), ["float32", "float64"]),
    "norm0": (lambda x: x.norm(0), ["float32", "float64"]),
    "logsumexp1": (lambda x: x.logsumexp(1), FLOATS),
    "clamp": (lambda x: x.clamp(-1, 1), FLOATS + ["int64"]),
    "where": (lambda x: tp.where(x > 0, x, x * 2), FLOATS + ["int64"]),
    "accuracy": (lambda x: (x.argmax(1) == 3).float().mean(), FLOATS),
}


def _example(dtype, shape=(8, 33), seed=0):
    a = np.random.default_rng(seed).standard_normal(shape) * 3
    t = tp.from_numpy(a.astype(np.float64))
    if dtype == "bool":
        return t > 0
    if dtype == "int64":
        return t.round().to(tp.int64)
    return t.to(getattr(tp, dtype))


PAIRS = [(n, d) for n, (_, dts) in sorted(CASES.items()) for d in dts]


# --- without a GPU: the one-operator regions the eager CUDA layer generates ------

@pytest.mark.parametrize("name,dtype", PAIRS)
def test_eager_region_is_generated_without_extern_calls(name, dtype):
    # An extern call in a one-operator region is the operator itself through the
    # dispatcher again: cuda_eager.cpp refuses such a region (NotImplementedError
    # on the GPU). max()/min()/norm were extern calls, the arg reductions refused.
    fn, _ = CASES[name]
    g = _C._capture(fn, _example(dtype))
    assert _C._stax_cuda_externs(g) == []
    assert _C._stax_cuda_kernels(g)


@nvrtc
@pytest.mark.parametrize("name,dtype", [p for p in PAIRS if p[1] in ("float32", "bfloat16", "int64")])
def test_eager_region_source_compiles_with_nvrtc(name, dtype):
    fn, _ = CASES[name]
    src = _C._stax_cuda_source(_C._capture(fn, _example(dtype)))
    assert tp.cuda._nvrtc_compile(src, "red_" + name, 90)[:4] == b"\x7fELF"


def test_large_whole_tensor_max_is_one_generated_kernel():
    # The GPU run of bench_cuda_symbolic stopped at (want - got).abs().max() of
    # 32768 x 8192 floats: a whole-tensor max had no eager CUDA kernel.
    g = _C._capture(lambda x: x.abs().max(), tp.empty(4096, 4096))
    assert _C._stax_cuda_externs(g) == []
    assert [k[1] for k in _C._stax_cuda_kernels(g)] == ["row"]


def test_var_computes_in_double_on_cuda():
    # Both passes (mean, squared deviations) in double, the result rounded once.
    src = _C._stax_cuda_source(_C._capture(lambda x: x.var(-1), tp.randn(8, 33)))
    assert "const double t" in src and "- t" in src
    assert "Welford" not in src


VAR_CASES = {
    "var_row": lambda x: x.var(-1),
    "std_row_keep": lambda x: x.std(-1, keepdim=True),
    "var_col_corr0": lambda x: x.var(0, correction=0),
    "std_all": lambda x: x.std(),
    "var_mean_row": lambda x: tp.var_mean(x, -1),
    "normalize": lambda x: (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True, unbiased=False) + 1e-5).sqrt(),
    "argmax_row": lambda x: x.argmax(-1),
    "max_all": lambda x: x.max(),
}


@nvrtc
@pytest.mark.parametrize("name", sorted(VAR_CASES))
def test_symbolic_reduction_source_compiles_with_nvrtc(name):
    src, kernels, _, _ = _C._testing_stax_cuda_symbolic(VAR_CASES[name], [tp.randn(37, 53)], [37, 53])
    assert kernels and all(k[5] for k in kernels)  # launches made from the call's sizes
    assert "tp_arg_size0" in src and "tp_arg_size1" in src
    if name.startswith(("var", "std")):
        assert "double" in src
    assert tp.cuda._nvrtc_compile(src, "sym_" + name, 90)[:4] == b"\x7fELF"


SPECIALIZE = {
    "var_row": lambda x: x.var(-1),
    "layer_norm": lambda x: F.layer_norm(x, (x.shape[-1],)),
    "view_sum": lambda x: x.reshape(x.shape[0], -1, 1).sum(-1) * 2,
    "max_dim0": lambda x: x.max(0),
    "softmax": lambda x: x.softmax(-1),
}


@pytest.mark.parametrize("name", sorted(SPECIALIZE))
def test_specialized_graph_prints_as_a_capture_at_those_sizes(name):
    # The net under a refused symbolic print: the symbolic graph specialized at
    # a call's sizes (metas re-inferred, size attributes evaluated) is the
    # static capture at those sizes, so its region is what a static compile makes.
    fn = SPECIALIZE[name]
    y = tp.randn(70, 61)
    got = _C._testing_cuda_specialized_source(fn, [tp.randn(37, 53)], [37, 53], [y])
    assert got == _C._stax_cuda_source(_C._capture(fn, y))


def test_cuda_symbolic_fault_refuses_the_symbolic_print():
    _C._testing_plant_stax_fault("cuda_symbolic")
    try:
        with pytest.raises(Exception, match="symbolic print is refused"):
            _C._testing_stax_cuda_symbolic(VAR_CASES["var_row"], [tp.randn(37, 53)], [37, 53])
        # a static print is not affected
        assert _C._stax_cuda_source(_C._capture(VAR_CASES["var_row"], tp.randn(37, 53)))
    finally:
        _C._testing_clear_faults()


def test_compiled_cpu_max_min_equal_eager():
    # max()/min() now lower on the CPU too (amax/amin over every dim): NaN
    # propagates, integers and bools are exact.
    f = tp.compile(lambda x: (x.max(), x.min(), (x * 2).max()), strict_native=True)
    for a in [np.arange(-7, 50, dtype=np.float32), np.array([1.0, np.nan, 3.0], dtype=np.float32)]:
        x = tp.from_numpy(a)
        got = [t.numpy() for t in f(x)]
        want = [float(np.max(a)), float(np.min(a)), float(np.max(a * 2))]
        np.testing.assert_array_equal(got, want)
    g = tp.compile(lambda x: x.max() + x.min(), strict_native=True)
    xi = tp.from_numpy(np.array([[3, -9], [12, 4]], dtype=np.int64))
    assert int(g(xi).item()) == 3


# --- on a GPU ---------------------------------------------------------------------

def _np(t):
    if t.dtype in (tp.bfloat16, tp.float16):
        t = t.float()
    return t.cpu().numpy()


def _as_list(r):
    return list(r) if isinstance(r, (tuple, list)) else [r]


def _tol(dtype):
    return {"float32": 1e-5, "float64": 1e-12, "bfloat16": 2e-2, "float16": 2e-3}.get(dtype, 0)


def _check(fn, x, dtype, msg=""):
    want = _as_list(fn(x))
    got = _as_list(fn(x.cuda()))
    assert len(got) == len(want), msg
    for g, w in zip(got, want):
        assert g.device.type == "cuda", msg
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape), msg
        tol = _tol(dtype) if w.dtype not in (tp.int64, tp.bool) else 0
        np.testing.assert_allclose(_np(g), _np(w), rtol=tol, atol=tol, err_msg=msg)


@gpu
@pytest.mark.parametrize("name,dtype", PAIRS)
def test_operator_on_cuda_equals_cpu_eager(name, dtype):
    fn, _ = CASES[name]
    for shape, seed in [((8, 33), 0), ((1, 1), 1), ((3, 4099), 2), ((1031, 5), 3)]:
        x = _example(dtype, shape, seed)
        _check(fn, x, dtype, f"{name} {dtype} {shape}")


@gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64"])
def test_whole_tensor_reductions_of_many_elements(dtype):
    # split reductions (many blocks and a combine) and a non-contiguous input
    x = _example(dtype, (1 << 12, 257), 4)
    for fn in [lambda t: t.max(), lambda t: t.min(), lambda t: t.argmax(), lambda t: t.argmin(),
               lambda t: t.amax(), lambda t: t.t().max(), lambda t: t.t().argmax()]:
        _check(fn, x, dtype)


@gpu
def test_max_min_propagate_nan_and_argmax_names_the_first_nan():
    a = np.array([[1.0, np.nan, 5.0, np.nan], [2.0, 7.0, -1.0, 7.0]], dtype=np.float32)
    x = tp.from_numpy(a).cuda()
    assert math.isnan(x.max().item()) and math.isnan(x.min().item())
    assert int(x.argmax().item()) == 1 and int(x.argmin().item()) == 1
    v, i = x.max(1)
    assert math.isnan(v.cpu().numpy()[0]) and i.cpu().numpy().tolist() == [1, 1]
    v, i = x.min(1)
    assert math.isnan(v.cpu().numpy()[0]) and i.cpu().numpy().tolist() == [1, 2]
    assert x.argmax(1).cpu().numpy().tolist() == [1, 1]
    assert math.isnan(x.norm().item()) and math.isnan(x.norm(float("inf")).item())


@gpu
def test_argmax_ties_take_the_first_index():
    torch = pytest.importorskip("torch")
    a = np.array([[3, 1, 3, 3], [0, 0, 0, 0], [-2, 5, 5, -2]], dtype=np.float32)
    x = tp.from_numpy(a).cuda()
    t = torch.from_numpy(a)
    assert x.argmax(1).cpu().numpy().tolist() == t.argmax(1).tolist() == [0, 0, 1]
    assert x.argmin(1).cpu().numpy().tolist() == t.argmin(1).tolist()
    assert int(x.argmax().item()) == int(t.argmax()) and int(x.argmin().item()) == int(t.argmin())
    assert x.max(0)[1].cpu().numpy().tolist() == t.max(0)[1].tolist()
    xb = tp.from_numpy(a).to(tp.bfloat16).cuda()
    assert xb.argmax(1).cpu().numpy().tolist() == [0, 0, 1]


@gpu
@pytest.mark.parametrize("call", ["max", "min", "argmax", "argmin", "amax"])
def test_empty_input_raises_like_eager(call):
    fn = {"max": lambda t: t.max(), "min": lambda t: t.min(), "argmax": lambda t: t.argmax(),
          "argmin": lambda t: t.argmin(), "amax": lambda t: t.amax(1)}[call]
    x = tp.zeros(3, 0)
    with pytest.raises(Exception) as cpu_err:
        fn(x)
    with pytest.raises(type(cpu_err.value)):
        fn(x.cuda())


@gpu
def test_empty_sums_and_any_all():
    x = tp.zeros(3, 0).cuda()
    assert x.sum().item() == 0.0 and x.sum(1).cpu().numpy().tolist() == [0.0, 0.0, 0.0]
    assert bool(x.all().item()) is True and bool(x.any().item()) is False
    assert x.prod().item() == 1.0


@gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_var_std_with_a_large_mean_against_float64(dtype):
    # Both passes in double: the float mean's rounding no longer biases the
    # deviations (the float decomposition was ~1e-5 relative off here).
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((64, 4099)) * 0.5 + 1e4).astype(dtype)
    x = tp.from_numpy(a).cuda()
    ref = a.astype(np.float64)
    rtol = 1e-6 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(_np(x.var(-1)), ref.var(-1, ddof=1), rtol=rtol)
    np.testing.assert_allclose(_np(x.std(0, correction=0)), ref.std(0), rtol=rtol)
    np.testing.assert_allclose(_np(x.var()), ref.var(ddof=1), rtol=rtol)
    v, m = tp.var_mean(x, -1)
    np.testing.assert_allclose(_np(v), ref.var(-1, ddof=1), rtol=rtol)
    np.testing.assert_allclose(_np(m), ref.mean(-1), rtol=rtol)


def _cuda(a):
    return tp.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).cuda()


def _var_fn(x):
    return x.var(-1), x.std(0, correction=0)


@gpu
def test_dynamic_var_std_is_one_generated_version():
    # dynamic=True: var/std stay generated at every size (strict_native raises
    # on any eager fallback), accurate against float64 with a large mean.
    f = tp.compile(_var_fn, dynamic=True, strict_native=True)
    rng = np.random.default_rng(8)
    before = tp.compiler.metrics.fallback_count
    for n, d in [(2, 3), (7, 13), (97, 1031), (1031, 97), (4, 12289)]:
        a = rng.standard_normal((n, d)) * 0.5 + 1e4
        v, s = f(_cuda(a))
        ref = a.astype(np.float32).astype(np.float64)
        np.testing.assert_allclose(_np(v), ref.var(-1, ddof=1), rtol=1e-6, err_msg=str((n, d)))
        np.testing.assert_allclose(_np(s), ref.std(0), rtol=1e-6, err_msg=str((n, d)))
    assert f.num_specializations == 1
    assert tp.compiler.metrics.fallback_count == before


@gpu
def test_automatic_dynamic_var_and_argmax_stay_generated():
    def fn(x):
        return x.var(-1), x.argmax(-1), x.max()
    f = tp.compile(fn, strict_native=True)
    rng = np.random.default_rng(9)
    for n in [8, 16, 24, 333]:
        x = _cuda(rng.standard_normal((n, 128)))
        got, want = f(x), fn(x.cpu())
        np.testing.assert_allclose(_np(got[0]), _np(want[0]), rtol=1e-5, atol=1e-6)
        assert _np(got[1]).tolist() == _np(want[1]).tolist()
        assert float(got[2].item()) == float(want[2].item())
    assert f.num_specializations == 2  # static at 8, symbolic from 16 on


@gpu
def test_refused_symbolic_print_specializes_instead_of_running_eagerly():
    # The planted fault refuses every symbolic CUDA print: the backend compiles
    # statically per call layout (strict_native would raise on an eager fallback).
    def fn(x):
        return (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True) + 1e-5).sqrt()
    _C._testing_plant_stax_fault("cuda_symbolic")
    try:
        f = tp.compile(fn, dynamic=True, strict_native=True)
        rng = np.random.default_rng(10)
        before = tp.compiler.metrics.fallback_count
        built = _C._testing_cuda_specialized_versions()
        sizes = [(5, 64), (9, 64), (5, 64), (33, 100)]
        for n, d in sizes:
            x = _cuda(rng.standard_normal((n, d)))
            np.testing.assert_allclose(_np(f(x)), _np(fn(x.cpu())), rtol=1e-4, atol=1e-5)
        assert tp.compiler.metrics.fallback_count == before
        assert _C._testing_cuda_specialized_versions() - built == 3  # one per distinct layout
    finally:
        _C._testing_clear_faults()


@gpu
def test_training_loop_metrics_run_on_the_gpu():
    # What a classification loop computes per step: accuracy through argmax,
    # the gradient norm, the loss's max/min for logging.
    rng = np.random.default_rng(11)
    logits = _cuda(rng.standard_normal((256, 10)))
    y = tp.from_numpy(rng.integers(0, 10, 256)).cuda()
    acc = (logits.argmax(1) == y).float().mean()
    want = (logits.cpu().argmax(1) == y.cpu()).float().mean()
    assert float(acc.item()) == float(want.item())
    w = _cuda(rng.standard_normal((64, 32)))
    np.testing.assert_allclose(float(w.norm().item()), float(np.linalg.norm(_np(w).astype(np.float64))), rtol=1e-6)
    assert float(w.max().item()) == float(_np(w).max()) and float(w.min().item()) == float(_np(w).min())


# --- cumsum / cumprod, sort, topk: handwritten kernels (cuda/scan_sort.cpp) -------

def test_scan_and_sort_kernels_are_listed_for_the_nvrtc_check():
    # test_cuda.py compiles every listed source with NVRTC (sm_80 and sm_90).
    names = {n for n, _ in tp.cuda._kernel_sources()}
    for t in ["f32", "f64", "i64"]:
        assert {f"tp_cumsum_{t}", f"tp_cumprod_{t}", f"tp_sort_{t}"} <= names


def test_compiled_cuda_region_keeps_cumsum_sort_topk_as_extern_calls():
    # the rest of the region stays generated; the scan is no longer a refusal
    g = _C._capture(lambda x: (x.cumsum(1) * 2, x.topk(3, 1)[0] + 1, x.sort(0)[1]), tp.randn(8, 33))
    assert _C._stax_cuda_externs(g) == ["cumsum", "topk", "sort"]
    assert len(_C._stax_cuda_kernels(g)) >= 1


SCAN_SORT = {
    "cumsum1": (lambda x: x.cumsum(1), FLOATS + ["int64", "bool"]),
    "cumsum0": (lambda x: x.cumsum(0), FLOATS + ["int64"]),
    "cumsum_f64": (lambda x: x.cumsum(-1, dtype=tp.float64), ["float32", "int64"]),
    "sort1": (lambda x: x.sort(1), FLOATS + ["int64", "bool"]),
    "sort0_desc": (lambda x: x.sort(0, descending=True), FLOATS + ["int64"]),
    "argsort": (lambda x: x.argsort(-1), ["float32", "int64"]),
    "topk5": (lambda x: x.topk(5, 1), FLOATS + ["int64"]),
    "topk_smallest0": (lambda x: x.topk(2, 0, largest=False), ["float32", "int64"]),
}


@gpu
@pytest.mark.parametrize("name,dtype", [(n, d) for n, (_, dts) in sorted(SCAN_SORT.items()) for d in dts])
def test_scan_sort_topk_on_cuda_equal_cpu_eager(name, dtype):
    # Stable orders (ties by position, NaN above every number) and eager's
    # accumulation (double / wrapping int64, in order): indices exact.
    fn, _ = SCAN_SORT[name]
    for shape, seed in [((8, 33), 0), ((5, 1), 1), ((3, 1000), 2), ((300, 7), 3)]:
        if "topk5" in name and shape[1] < 5:
            continue
        x = _example(dtype, shape, seed)
        _check(fn, x, dtype, f"{name} {dtype} {shape}")


@gpu
def test_sort_and_topk_with_nan_and_ties_match_torch():
    torch = pytest.importorskip("torch")
    a = np.array([[2.0, np.nan, 2.0, -1.0, 5.0, np.nan, 5.0, 0.0]], dtype=np.float32)
    x = tp.from_numpy(a).cuda()
    t = torch.from_numpy(a)
    for desc in [False, True]:
        v, i = x.sort(1, descending=desc)
        tv, ti = t.sort(dim=1, descending=desc, stable=True)
        np.testing.assert_array_equal(_np(v), tv.numpy())
        assert _np(i).tolist() == ti.tolist()
    v, i = x.topk(3, 1)
    np.testing.assert_array_equal(_np(v), t.topk(3, 1)[0].numpy())


@gpu
def test_top5_accuracy_metric():
    rng = np.random.default_rng(12)
    logits = _cuda(rng.standard_normal((512, 1000)))
    y = tp.from_numpy(rng.integers(0, 1000, 512)).cuda()
    top5 = logits.topk(5, 1)[1]
    hits = (top5 == y.reshape(-1, 1)).any(1).float().mean()
    want_idx = np.argsort(-_np(logits), axis=1, kind="stable")[:, :5]
    assert _np(top5).tolist() == want_idx.tolist()
    assert float(hits.item()) == float((want_idx == _np(y)[:, None]).any(1).mean())


@gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_cumprod_equals_eager_bit_for_bit(dtype):
    # factors near 1 (int64: small integers, wrapping past 2^63 as eager does)
    rng = np.random.default_rng(14)
    a = rng.integers(-3, 4, (6, 50)) if dtype == "int64" else 1 + 0.05 * rng.standard_normal((6, 300))
    x = tp.from_numpy(a.astype(dtype))
    for dim in [0, 1]:
        np.testing.assert_array_equal(_np(x.cuda().cumprod(dim)), _np(x.cumprod(dim)))


@gpu
def test_long_cumsum_equals_eager_bit_for_bit():
    x = _cuda(np.random.default_rng(13).standard_normal(1 << 16))
    np.testing.assert_array_equal(_np(x.cumsum(0)), _np(x.cpu().cumsum(0)))


@gpu
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_dim_backward_on_cuda_equals_cpu(op, keepdim):
    # The one-hot of the picked index was built on the host (arange), so the
    # backward of max(dim)/min(dim) on a CUDA tensor raised "eq: cuda:0 and cpu".
    base = tp.tensor([[1.0, 3.0, 3.0, -2.0], [5.0, 5.0, 0.0, 7.0], [-1.0, -4.0, -4.0, 2.0]])
    for dim in (0, 1, -1):
        grads = []
        for dev in ("cpu", "cuda"):
            x = base.to(dev).detach().requires_grad_(True)
            values, indices = getattr(x, op)(dim, keepdim=keepdim)
            (values * tp.arange(values.numel()).reshape(values.shape).to(values.dtype).to(dev)).sum().backward()
            grads.append((x.grad.cpu().numpy(), indices.cpu().numpy()))
        np.testing.assert_array_equal(grads[1][1], grads[0][1])
        np.testing.assert_array_equal(grads[1][0], grads[0][0])
