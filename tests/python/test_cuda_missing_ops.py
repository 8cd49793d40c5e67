"""Operators the CUDA device walk (test_device_placement.py, on an H200) found
without a CUDA kernel, each of which raised the dispatcher's NotImplementedError
on a GPU: lgamma, digamma, polygamma, i0, special_i1 (and multigammaln through
lgamma), float64 erf and erf-GELU, round with decimals (cuda/special_kernels.cpp),
native_layer_norm and as_strided_scatter (cuda/composite_kernels.cpp), cumprod's
backward and cummax / cummin (cuda/cum_kernels.cpp).

Without a GPU:
- every new kernel source compiles with NVRTC (sm_80, sm_90);
- the same sources, compiled as host C++ with the GPU-only spellings defined
  away, give the CPU operators' values bit for bit (the transcription of the
  CPU algorithms is checked; on the GPU only CUDA's libm and FMA contraction
  differ);
- the composite kernels run on the fake device (host memory labelled cuda:0,
  their pieces on the CPU kernels) against the CPU operators.
With a GPU: each operator on CUDA against the CPU (values, dtypes, gradients)."""
import ctypes
import math
import shutil
import subprocess

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F

C = tp._C
nvrtc = pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed")
gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")
PREFIXES = ("tp_special_", "tp_cumprod_bw_", "tp_cummax_", "tp_cummin_")
SPECIAL = ["lgamma", "digamma", "polygamma", "i0", "i1", "erf", "gelu", "round_dec"]


def _sources():
    return {n: s for n, s in tp.cuda._kernel_sources() if n.startswith(PREFIXES)}


@nvrtc
@pytest.mark.parametrize("arch", [80, 90])
def test_kernel_sources_compile(arch):
    src = _sources()
    want = {f"tp_special_{s}_{t}" for s in SPECIAL for t in ("f32", "f64")}
    want |= {"tp_cumprod_bw_f32", "tp_cumprod_bw_f64"}
    want |= {f"tp_cum{m}_{t}" for m in ("max", "min") for t in ("f32", "f64", "i64")}
    assert want <= set(src)
    for name, s in src.items():
        assert tp.cuda._nvrtc_compile(s, name, arch)[:4] == b"\x7fELF", name


# ---- the kernel sources as host code, against the CPU operators ------------------

HOST_PRELUDE = r"""
#include <cmath>
#include <cstring>
using namespace std;
#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__ __restrict
static inline double __longlong_as_double(long long v) { double d; memcpy(&d, &v, 8); return d; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
/* one thread: the grid-stride loops visit every element / slice in order */
static struct { long long x; } blockIdx = {0}, blockDim = {1}, gridDim = {1}, threadIdx = {0};
"""


@pytest.fixture(scope="module")
def host_kernels(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++")
    if not cxx:
        pytest.skip("no host C++ compiler")
    d = tmp_path_factory.mktemp("host_kernels")
    # Each source in its own namespace (they all typedef T); extern "C" names stay unique.
    # erfinv is CUDA's own erfinvf / erfinv (no host counterpart; test_cuda_gap_ops checks it on a GPU).
    srcs = [s for n, s in _sources().items() if not n.startswith("tp_special_erfinv_")]
    body = "".join(f"namespace k{i} {{\n{s}\n}}\n" for i, s in enumerate(srcs))
    (d / "k.cpp").write_text(HOST_PRELUDE + body)
    subprocess.run([cxx, "-O1", "-ffp-contract=off", "-shared", "-fPIC", str(d / "k.cpp"), "-o", str(d / "k.so")],
                   check=True, capture_output=True)
    return ctypes.CDLL(str(d / "k.so"))


def _ptr(a):
    return ctypes.c_void_p(a.ctypes.data)


L = ctypes.c_longlong


def _special_inputs():
    rng = np.random.default_rng(0)
    return np.concatenate([rng.standard_normal(300) * 5, rng.uniform(-40, 40, 300),
                           [0.0, -0.0, 1, 2, -1, -2, -2.5, 0.5, 1e-8, -1e-8, 1.4616321449683623, 30, 30.5, -30.5,
                            50, 300, 700, math.inf, -math.inf, math.nan, 1e10, -1e5 - 0.25,
                            # reflection for x < 0 (the recurrence took |x| steps: these hung)
                            -1e12 + 0.5, -4503599627370495.5, -1e15 - 0.25, -3.0000001, -1e-300, -7.25]])
    # (an even count: the GPU test reads them as a transposed [2, n/2] view too)


HOST_SPECIAL = {
    "lgamma": (tp.lgamma, 0), "digamma": (tp.digamma, 0), "i0": (tp.i0, 0), "i1": (tp.special.i1, 0),
    "polygamma": (lambda t: tp.polygamma(2, t), 2),
}


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("name", sorted(HOST_SPECIAL))
def test_special_sources_compute_the_cpu_values(host_kernels, name, t):
    fn, order = HOST_SPECIAL[name]
    dt = np.float64 if t == "f64" else np.float32
    x = _special_inputs().astype(dt)
    y = np.empty_like(x)
    getattr(host_kernels, f"tp_special_{name}_{t}")(_ptr(x), _ptr(y), L(x.size), L(order), ctypes.c_double(1.0))
    np.testing.assert_array_equal(y, fn(tp.from_numpy(x)).numpy())


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("order", [1, 3, 4, 7, 161])
def test_polygamma_source_orders_compute_the_cpu_values(host_kernels, order, t):
    dt = np.float64 if t == "f64" else np.float32
    x = _special_inputs().astype(dt)
    y = np.empty_like(x)
    host_kernels[f"tp_special_polygamma_{t}"](_ptr(x), _ptr(y), L(x.size), L(order), ctypes.c_double(1.0))
    np.testing.assert_array_equal(y, tp.polygamma(order, tp.from_numpy(x)).numpy())


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("decimals", [1, 2, 3, -1, -2])
def test_round_decimals_source_computes_the_cpu_values(host_kernels, t, decimals):
    dt = np.float64 if t == "f64" else np.float32
    x = (np.random.default_rng(1).standard_normal(500) * 10 ** (2 - decimals)).astype(dt)
    x[:4] = [0.125, -2.5, 1234.5678, 0.05]
    y = np.empty_like(x)
    a = 10.0 ** abs(decimals)
    getattr(host_kernels, f"tp_special_round_dec_{t}")(_ptr(x), _ptr(y), L(x.size), L(1 if decimals > 0 else -1),
                                                       ctypes.c_double(a))
    np.testing.assert_array_equal(y, tp.round(tp.from_numpy(x), decimals=decimals).numpy())


@pytest.mark.parametrize("name", ["erf", "gelu"])
def test_float64_erf_and_gelu_sources(host_kernels, name):
    x = np.concatenate([np.linspace(-10, 10, 801), [0.0, -0.0, math.inf, -math.inf, math.nan]])
    y = np.empty_like(x)
    getattr(host_kernels, f"tp_special_{name}_f64")(_ptr(x), _ptr(y), L(x.size), L(0), ctypes.c_double(1.0))
    want = (tp.erf if name == "erf" else F.gelu)(tp.from_numpy(x)).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-14, atol=1e-300)


def _slices(shape, dim):
    return int(np.prod(shape[:dim])), shape[dim], int(np.prod(shape[dim + 1:]))


SCAN_SHAPES = [((5, 7), 1), ((4, 6, 3), 1), ((8,), 0), ((3, 5), 0), ((2, 1, 4), 2)]


@pytest.mark.parametrize("t", ["f32", "f64"])
@pytest.mark.parametrize("shape,dim", SCAN_SHAPES)
def test_cumprod_backward_source_computes_the_cpu_values(host_kernels, t, shape, dim):
    dt = np.float64 if t == "f64" else np.float32
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(dt)
    x.flat[rng.integers(0, x.size, 3)] = 0  # slices with one and with two zeros
    g = rng.standard_normal(shape).astype(dt)
    o = np.empty_like(x)
    scratch = np.empty(shape, np.float64)
    getattr(host_kernels, f"tp_cumprod_bw_{t}")(_ptr(g), _ptr(x), _ptr(o), _ptr(scratch), *map(L, _slices(shape, dim)))
    xt = tp.from_numpy(x.copy()).requires_grad_()
    tp.cumprod(xt, dim).backward(tp.from_numpy(g))
    np.testing.assert_array_equal(o, xt.grad.numpy())


@pytest.mark.parametrize("t", ["f32", "f64", "i64"])
@pytest.mark.parametrize("which", ["max", "min"])
@pytest.mark.parametrize("shape,dim", SCAN_SHAPES)
def test_cummax_cummin_sources_compute_the_cpu_values(host_kernels, t, which, shape, dim):
    dt = {"f32": np.float32, "f64": np.float64, "i64": np.int64}[t]
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 3, shape).astype(dt)  # many ties
    if t != "i64":
        x.flat[rng.integers(0, x.size, 2)] = np.nan
    v, ind = np.empty_like(x), np.empty(shape, np.int64)
    getattr(host_kernels, f"tp_cum{which}_{t}")(_ptr(x), _ptr(v), _ptr(ind), *map(L, _slices(shape, dim)))
    wv, wi = (tp.cummax if which == "max" else tp.cummin)(tp.from_numpy(x), dim)
    np.testing.assert_array_equal(v, wv.numpy())
    np.testing.assert_array_equal(ind, wi.numpy())


# ---- composite kernels on the fake device (host memory labelled cuda:0) ----------

class _FakeDevice:
    """The fake device with the composite kernels on; on exit, checks that the
    composite kernel ran (else the fake device's CPU kernel answered)."""

    def __enter__(self):
        self.calls = C._testing_fake_device_composite_calls()
        C._testing_fake_device(True, composites=True)

    def __exit__(self, *exc):
        C._testing_fake_device(False)
        if exc[0] is None:
            assert C._testing_fake_device_composite_calls() > self.calls, "the composite kernel did not run"


def _fake(t):
    return C._testing_fake_device_label(t)


def _host(t):
    return C._testing_fake_device_unlabel(t).clone()


LN_CASES = [((4, 10), [10], True, True), ((2, 3, 8), [8], True, False), ((2, 3, 8), [3, 8], False, True),
            ((5, 6), [6], False, False), ((3, 1000), [1000], True, True)]
# Empty inputs allocate on the device directly (not on the fake device).
LN_EMPTY = [((0, 6), [6], True, True), ((4, 0), [0], False, False)]


@pytest.mark.parametrize("dtype", [tp.float32, tp.float64, tp.float16])
@pytest.mark.parametrize("shape,norm,w,b", LN_CASES)
def test_native_layer_norm_composite_on_the_fake_device(dtype, shape, norm, w, b):
    x = (tp.randn(*shape) * 3 + 1).to(dtype)
    wt = tp.randn(*norm).to(dtype) if w else None
    bt = tp.randn(*norm).to(dtype) if b else None
    want = tp.native_layer_norm(x, norm, wt, bt, 1e-5)
    with _FakeDevice():
        got = tp.native_layer_norm(_fake(x), norm, _fake(wt) if w else None, _fake(bt) if b else None, 1e-5)
        assert all(str(t.device) == "cuda:0" for t in got)
        got = [_host(t) for t in got]
    tol = {tp.float32: 1e-5, tp.float64: 1e-12, tp.float16: 2e-3}[dtype]
    for g, e in zip(got, want):
        assert g.dtype == e.dtype and tuple(g.shape) == tuple(e.shape) and g.is_contiguous()
        np.testing.assert_allclose(g.float().numpy(), e.float().numpy(), rtol=tol, atol=tol * 4)


SCATTERS = {
    "as_strided": (lambda s, v: tp.as_strided_scatter(s, v, (2, 3), (1, 4), 1), (2, 3)),
    "as_strided_rows": (lambda s, v: tp.as_strided_scatter(s, v, (3, 2), (2, 1), 0), (3, 2)),
    "select": (lambda s, v: tp.select_scatter(s, v, 1, 2), (4,)),
    "slice": (lambda s, v: tp.slice_scatter(s, v, 1, 1, 5, 2), (4, 2)),
}


@pytest.mark.parametrize("dtype", [tp.float32, tp.int64, tp.bool])
@pytest.mark.parametrize("name", sorted(SCATTERS))
def test_view_scatters_on_the_fake_device(name, dtype):
    fn, vshape = SCATTERS[name]
    s = (tp.randn(4, 6) * 5).to(dtype)
    v = (tp.randn(*vshape) * 5).to(dtype)
    want = fn(s, v)
    st = s.t().contiguous().t()  # a strided self
    with _FakeDevice():
        fs = _fake(s)
        got = fn(fs, _fake(v))
        assert str(got.device) == "cuda:0"
        assert tp.equal(_host(fs), s)  # self unchanged
        got = _host(got)
    assert got.dtype == want.dtype and tp.equal(got, want)
    assert tp.equal(fn(st, v), want)


# ---- on a GPU: against the CPU ----------------------------------------------------

def _np(t):
    t = t.detach().cpu()
    return t.float().numpy() if t.dtype in (tp.float16, tp.bfloat16) else t.numpy()


GPU_SPECIAL = {
    "lgamma": tp.lgamma, "digamma": tp.digamma, "i0": tp.i0, "i1": tp.special.i1,
    "polygamma0": lambda t: tp.polygamma(0, t), "polygamma1": lambda t: tp.polygamma(1, t),
    "polygamma3": lambda t: tp.polygamma(3, t), "gammaln": tp.special.gammaln,
    "multigammaln": lambda t: tp.special.multigammaln(t.abs() + 2, 3),
}


@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.float64, tp.float16, tp.int64])
@pytest.mark.parametrize("name", sorted(GPU_SPECIAL))
def test_special_functions_on_cuda_match_the_cpu(name, dtype):
    fn = GPU_SPECIAL[name]
    if dtype == tp.int64:
        x = tp.arange(-30, 60, dtype=tp.int64)
    else:
        x = tp.from_numpy(_special_inputs()).to(dtype)
    want, got = fn(x), fn(x.cuda())
    assert got.device.type == "cuda" and got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape)
    # CUDA's libm (a few ulp) and FMA contraction are the only differences from the
    # CPU's double evaluation; the result rounds once to its dtype.
    f64 = want.dtype == tp.float64
    np.testing.assert_allclose(_np(got), _np(want), rtol=1e-10 if f64 else 2e-6, atol=1e-9 if f64 else 1e-6)
    # An empty input.
    e, we = fn(x[:0].cuda()), fn(x[:0])
    assert e.device.type == "cuda" and e.dtype == we.dtype and tuple(e.shape) == (0,)
    # A strided input (a transposed view on the device).
    xs = x.cuda().reshape(2, -1).t()
    assert not xs.is_contiguous()
    np.testing.assert_allclose(_np(fn(xs)), _np(fn(x.reshape(2, -1).t())), rtol=1e-10 if f64 else 2e-6,
                               atol=1e-9 if f64 else 1e-6)


@gpu
@pytest.mark.parametrize("name", ["lgamma", "digamma", "i0", "i1", "polygamma1"])
def test_special_function_gradients_on_cuda(name):
    fn = GPU_SPECIAL[name]
    x = tp.rand(40, dtype=tp.float64) * 4 + 0.25
    g = tp.randn(40, dtype=tp.float64)
    xc = x.clone().requires_grad_()
    fn(xc).backward(g)
    xg = x.cuda().requires_grad_()
    fn(xg).backward(g.cuda())
    np.testing.assert_allclose(_np(xg.grad), _np(xc.grad), rtol=1e-10, atol=1e-12)


@gpu
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_float64_gelu_and_erf_on_cuda(approximate):
    x = tp.cat([tp.linspace(-12, 12, 2001, dtype=tp.float64), tp.tensor([math.inf, -math.inf, math.nan], dtype=tp.float64)])
    # Absolute tolerances: 1 + tanh(u) (tanh form) and erfc cancel near -1 / large
    # arguments, where a few ulp of CUDA's libm are large relative to the value.
    got = F.gelu(x.cuda(), approximate=approximate)
    assert got.dtype == tp.float64 and got.device.type == "cuda"
    np.testing.assert_allclose(_np(got), _np(F.gelu(x, approximate=approximate)), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(_np(tp.erf(x.cuda())), _np(tp.erf(x)), rtol=1e-13, atol=1e-15)
    # Training in float64: gelu's gradient on the device.
    xc = x[:2001].clone().requires_grad_()
    F.gelu(xc, approximate=approximate).sum().backward()
    xg = x[:2001].cuda().requires_grad_()
    F.gelu(xg, approximate=approximate).sum().backward()
    np.testing.assert_allclose(_np(xg.grad), _np(xc.grad), rtol=1e-12, atol=1e-12)
    # float32 stays generated (not this kernel) and still runs.
    x32 = x.float()
    np.testing.assert_allclose(_np(F.gelu(x32.cuda())), _np(F.gelu(x32)), rtol=1e-5, atol=1e-6)


@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.float64, tp.float16, tp.bfloat16])
@pytest.mark.parametrize("decimals", [0, 2, -1, 3])
def test_round_with_decimals_on_cuda(dtype, decimals):
    x = (tp.randn(300, dtype=tp.float64) * 10 ** (2 - decimals)).to(dtype)
    def same(got, want):
        assert got.dtype == want.dtype and got.device.type == "cuda"
        if dtype in (tp.float16, tp.bfloat16):  # float32 on both devices, rounded once
            np.testing.assert_allclose(_np(got), _np(want), rtol={tp.float16: 2e-3, tp.bfloat16: 1.6e-2}[dtype])
        else:
            np.testing.assert_array_equal(_np(got), _np(want))  # IEEE mul/div/rint in the tensor's type

    same(tp.round(x.cuda(), decimals=decimals), tp.round(x, decimals=decimals))
    xs = x.cuda().reshape(20, 15).t()  # strided
    same(tp.round(xs, decimals=decimals), tp.round(x.reshape(20, 15).t(), decimals=decimals))


@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.float64, tp.float16, tp.bfloat16])
@pytest.mark.parametrize("shape,norm,w,b", LN_CASES + LN_EMPTY)
def test_native_layer_norm_on_cuda(dtype, shape, norm, w, b):
    x = (tp.randn(*shape) * 3 + 1).to(dtype)
    wt = tp.randn(*norm).to(dtype) if w else None
    bt = tp.randn(*norm).to(dtype) if b else None
    want = tp.native_layer_norm(x, norm, wt, bt, 1e-5)
    got = tp.native_layer_norm(x.cuda(), norm, wt.cuda() if w else None, bt.cuda() if b else None, 1e-5)
    tol = {tp.float32: 1e-5, tp.float64: 1e-12, tp.float16: 2e-3, tp.bfloat16: 2e-2}[dtype]
    for g, e in zip(got, want):
        assert g.device.type == "cuda" and g.dtype == e.dtype and tuple(g.shape) == tuple(e.shape)
        np.testing.assert_allclose(_np(g), _np(e), rtol=tol, atol=tol * 4)


@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.float64])
def test_native_layer_norm_gradients_on_cuda(dtype):
    # The backward reads the saved mean and rstd (outputs 1 and 2).
    x, w, b = tp.randn(6, 5, 16, dtype=dtype), tp.randn(16, dtype=dtype), tp.randn(16, dtype=dtype)
    gy = tp.randn(6, 5, 16, dtype=dtype)

    def run(dev):
        ts = [t.to(dev).requires_grad_() for t in (x, w, b)]
        y, mean, rstd = tp.native_layer_norm(ts[0], [16], ts[1], ts[2], 1e-5)
        (y * gy.to(dev)).sum().backward()
        return [t.grad for t in ts]

    tol = 1e-4 if dtype == tp.float32 else 1e-11
    for g, e in zip(run("cuda"), run("cpu")):
        np.testing.assert_allclose(_np(g), _np(e), rtol=tol, atol=tol)


@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.int64, tp.bool, tp.float16])
@pytest.mark.parametrize("name", sorted(SCATTERS))
def test_view_scatters_on_cuda(name, dtype):
    fn, vshape = SCATTERS[name]
    s = (tp.randn(4, 6) * 5).to(dtype)
    v = (tp.randn(*vshape) * 5).to(dtype)
    sc = s.cuda()
    got = fn(sc, v.cuda())
    assert got.device.type == "cuda" and got.dtype == dtype
    assert tp.equal(got.cpu(), fn(s, v))
    assert tp.equal(sc.cpu(), s)  # self unchanged
    assert tp.equal(fn(sc.t().contiguous().t(), v.cuda()).cpu(), fn(s, v))  # a strided self


@gpu
def test_as_strided_scatter_gradient_on_cuda():
    s, v = tp.randn(4, 6), tp.randn(2, 3)
    gy = tp.randn(4, 6)

    def run(dev):
        a, b = s.to(dev).requires_grad_(), v.to(dev).requires_grad_()
        (tp.as_strided_scatter(a, b, (2, 3), (1, 4), 1) * gy.to(dev)).sum().backward()
        return a.grad.cpu(), b.grad.cpu()

    for g, e in zip(run("cuda"), run("cpu")):
        assert tp.equal(g, e)


@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.float64])
@pytest.mark.parametrize("shape,dim", SCAN_SHAPES)
def test_cumprod_backward_on_cuda(dtype, shape, dim):
    rng = np.random.default_rng(4)
    x = tp.from_numpy(rng.standard_normal(shape)).to(dtype)
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.numel(), 3).tolist()] = 0
    g = tp.randn(*shape, dtype=dtype)

    def run(dev):
        xd = x.to(dev).requires_grad_()
        tp.cumprod(xd, dim).backward(g.to(dev))
        return xd.grad

    got, want = run("cuda"), run("cpu")
    assert got.device.type == "cuda"
    # Products and sums unfused (__dmul_rn / __dadd_rn): the CPU's bits.
    np.testing.assert_array_equal(_np(got), _np(want))


@gpu
def test_cumprod_backward_of_an_empty_tensor_on_cuda():
    x = tp.empty(0, 4, device="cuda").requires_grad_()
    tp.cumprod(x, 1).sum().backward()
    assert x.grad.device.type == "cuda" and tuple(x.grad.shape) == (0, 4)


@gpu
@pytest.mark.parametrize("dtype", [tp.float32, tp.float64, tp.float16, tp.int64, tp.int32, tp.bool])
@pytest.mark.parametrize("which", ["cummax", "cummin"])
@pytest.mark.parametrize("shape,dim", SCAN_SHAPES + [((), 0), ((0, 3), 1)])
def test_cummax_cummin_on_cuda(dtype, which, shape, dim):
    x = tp.from_numpy(np.random.default_rng(5).integers(-3, 3, shape).astype(np.float64))
    if dtype.is_floating_point and x.numel() > 2:
        x.reshape(-1)[1] = math.nan
    x = x.to(dtype)
    fn = getattr(tp, which)
    gv, gi = fn(x.cuda(), dim)
    wv, wi = fn(x, dim)
    assert gv.device.type == "cuda" and gv.dtype == wv.dtype and gi.dtype == tp.int64
    np.testing.assert_array_equal(_np(gv), _np(wv))
    np.testing.assert_array_equal(_np(gi), _np(wi))


@gpu
def test_cummax_gradient_on_cuda():
    x = tp.randn(5, 8)
    g = tp.randn(5, 8)

    def run(dev):
        xd = x.to(dev).requires_grad_()
        tp.cummax(xd, 1)[0].backward(g.to(dev))
        return xd.grad.cpu()

    # scatter_add of the gradient: float atomics on the device, in any order.
    np.testing.assert_allclose(run("cuda").numpy(), run("cpu").numpy(), rtol=1e-5, atol=1e-6)
