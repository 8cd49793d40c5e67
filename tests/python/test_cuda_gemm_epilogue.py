"""GEMM epilogues in CUDA regions (issue 12 item 6): a product whose result
only feeds a bias row and/or relu / tanh-GELU becomes one cuBLASLt call with
that epilogue (`_gemm_epilogue`). Without a GPU: which GEMMs take an epilogue
(`_stax_cuda_externs`), and that the rewritten graph computes what the original
does (run on the CPU, the fused node is the unfused reference). On a GPU:
tp.compile with the fused call against the unfused eager result, float32 and
the 16-bit types."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import _C

gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")


def _lin_gelu(x, w, b):
    return F.gelu(F.linear(x, w, b), approximate="tanh")


def _lin_relu(x, w, b):
    return F.linear(x, w, b).relu()


def _mm_add_gelu(x, w, b):
    return F.gelu(x @ w.t() + b, approximate="tanh")


def _bias_first(x, w, b):
    return b + x @ w.t()


def _mm_relu(x, w, b):
    return (x @ w.t()).relu() * 2


def _lin3d_gelu(x, w, b):
    return F.gelu(F.linear(x.view(2, -1, x.shape[-1]), w, b), approximate="tanh")


# name: (function, expected extern calls)
FUSED = {
    "linear_gelu": (_lin_gelu, ["_gemm_epilogue:gelu_tanh"]),
    "linear_relu": (_lin_relu, ["_gemm_epilogue:relu"]),
    "mm_add_gelu": (_mm_add_gelu, ["_gemm_epilogue:gelu_tanh"]),
    "bias_first": (_bias_first, ["_gemm_epilogue:none"]),
    "mm_relu": (_mm_relu, ["_gemm_epilogue:relu:nobias"]),
    "linear3d_gelu": (_lin3d_gelu, ["_gemm_epilogue:gelu_tanh"]),
}

NOT_FUSED = {
    # cuBLASLt's GELU is the tanh approximation: the exact gelu stays a kernel of its own.
    "erf_gelu": (lambda x, w, b: F.gelu(F.linear(x, w, b)), ["addmm"]),
    # The product is also a result and its tail is not a tanh-GELU (whose AUX epilogue keeps it, below).
    "used_twice": (lambda x, w, b: (lambda h: (h.relu(), h))(F.linear(x, w, b)), ["addmm"]),
    # A bias that is not a row of the result's width (a column) is a pointwise kernel.
    "column_bias": (lambda x, w, b: (x @ w.t() + b[:8].view(8, 1)).relu(), ["matmul"]),
    # linear alone: addmm's eager kernel already adds the bias in the epilogue.
    "linear": (lambda x, w, b: F.linear(x, w, b), ["addmm"]),
    # float64: cuBLASLt has no double GELU epilogue to rely on.
    "float64": (lambda x, w, b: F.gelu(F.linear(x.double(), w.double(), b.double()), approximate="tanh"), None),
}


def _args(dt=tp.float32, m=8, k=16, n=32):
    return tp.randn(m, k).to(dt), (tp.randn(n, k) / 4).to(dt), tp.randn(n).to(dt)


@pytest.mark.parametrize("dt", [tp.float32, tp.bfloat16, tp.float16])
@pytest.mark.parametrize("name", sorted(FUSED))
def test_gemm_with_a_pointwise_tail_takes_the_epilogue(name, dt):
    fn, want = FUSED[name]
    assert _C._stax_cuda_externs(_C._capture(fn, *_args(dt))) == want


@pytest.mark.parametrize("name", sorted(NOT_FUSED))
def test_tails_cublaslt_cannot_apply_are_left_alone(name):
    fn, want = NOT_FUSED[name]
    got = _C._stax_cuda_externs(_C._capture(fn, *_args()))
    assert not any(e.startswith("_gemm_epilogue") for e in got)
    if want is not None:
        assert got == want


@pytest.mark.parametrize("name", sorted(FUSED) + ["used_twice"])
def test_rewritten_graph_computes_the_original(name):
    fn = FUSED[name][0] if name in FUSED else NOT_FUSED[name][0]
    args = _args()
    gm = _C._stax_gemm_epilogue_pass(_C._capture(fn, *args))
    assert ("_gemm_epilogue" in gm.code) == (name in FUSED)
    got, want = gm(*args), fn(*args)
    got = got if isinstance(got, (tuple, list)) else [got]
    want = want if isinstance(want, (tuple, list)) else [want]
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- with a GPU


@gpu
@pytest.mark.parametrize("dt", [tp.float32, tp.bfloat16, tp.float16])
@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_gemm_matches_the_unfused_result(name, dt):
    fn = FUSED[name][0]
    args = _args(dt, m=96, k=80, n=136)
    ref = fn(*[a.float() for a in args])  # float32 on the CPU, from the same inputs
    f = tp.compile(fn, strict_native=True)
    got = f(*[a.cuda() for a in args])
    assert got.dtype == dt and got.device.type == "cuda"
    # float32: full FP32 GEMM (no TF32 unless allowed); 16-bit: one rounding of the result.
    tol = 1e-4 if dt == tp.float32 else (1e-2 if dt == tp.bfloat16 else 2e-3)
    np.testing.assert_allclose(got.cpu().float().numpy(), ref.numpy(), rtol=tol, atol=tol * 4)
    again = f(*[a.cuda() for a in args])
    np.testing.assert_array_equal(again.cpu().float().numpy(), got.cpu().float().numpy())


@gpu
def test_misaligned_and_strided_bias_rows():
    x, w, b = _args(m=64, k=32, n=48)
    big = tp.randn(3 * 48 + 1)
    bigc = big.cuda()
    for sl in (slice(1, 49), slice(0, 144, 3)):  # 4-byte aligned; stride 3 (views of one device buffer)
        f = tp.compile(_lin_gelu, strict_native=True)
        got = f(x.cuda(), w.cuda(), bigc[sl])
        np.testing.assert_allclose(got.cpu().numpy(), _lin_gelu(x, w, big[sl]).numpy(), rtol=1e-4, atol=1e-4)


@gpu
def test_eager_gemm_epilogue_operator_with_an_empty_sum():
    # K = 0: no GEMM to carry the epilogue; the unfused operators give act(bias).
    x, w, b = tp.randn(4, 0), tp.randn(6, 0), tp.randn(6)
    got = tp.compile(_lin_relu, strict_native=True)(x.cuda(), w.cuda(), b.cuda())
    np.testing.assert_allclose(got.cpu().numpy(), _lin_relu(x, w, b).numpy())


# ------------------------------------------------- backward epilogues (BGRAD)
# A linear layer's backward: its weight gradient (a product reading the output
# gradient g) beside its bias gradient (g's column sum) is one cuBLASLt call
# with the BGRADA / BGRADB epilogue (`_gemm_bgrad`), reading g once.


def _wgrad_t(x, g):  # what the linear formula gives: (x^T g)^T through a view, and sum(g, 0)
    return (x.t() @ g).view(x.shape[1], g.shape[1]).t(), g.sum(0)


def _wgrad(x, g):
    return g.t() @ x, g.sum(0, keepdim=True)


def _xg(x, g):
    return x.t() @ g * 2, g.sum(0)


BGRAD = {
    "weight_grad_transposed": (_wgrad_t, ["_gemm_bgrad:bias_grad_a"]),
    "weight_grad": (_wgrad, ["_gemm_bgrad:bias_grad_a"]),
    "x_t_g": (_xg, ["_gemm_bgrad:bias_grad_b"]),
}
BGRAD_NOT_FUSED = {
    "row_sum": (lambda x, g: (x.t() @ g, g.sum(1)), ["matmul"]),  # not a bias gradient of this product
    "g_on_the_left": (lambda x, g: (g @ tp.ones(g.shape[1], 3), g.sum(0)), None),  # g @ y: no BGRAD form
}


def _bargs(dt=tp.float32, m=12, k=16, n=24):
    return tp.randn(m, k).to(dt), tp.randn(m, n).to(dt)


@pytest.mark.parametrize("dt", [tp.float32, tp.bfloat16])
@pytest.mark.parametrize("name", sorted(BGRAD))
def test_weight_and_bias_gradients_take_one_bgrad_call(name, dt):
    fn, want = BGRAD[name]
    assert _C._stax_cuda_externs(_C._capture(fn, *_bargs(dt))) == want


@pytest.mark.parametrize("name", sorted(BGRAD_NOT_FUSED))
def test_sums_that_are_not_bias_gradients_are_left_alone(name):
    fn, want = BGRAD_NOT_FUSED[name]
    got = _C._stax_cuda_externs(_C._capture(fn, *_bargs()))
    assert not any(e.startswith("_gemm_bgrad") for e in got)
    if want is not None:
        assert got == want
    # float64: no epilogue (the library has none to rely on for double).
    assert not any(e.startswith("_gemm_bgrad") for e in
                   _C._stax_cuda_externs(_C._capture(_wgrad, *[a.double() for a in _bargs()])))


@pytest.mark.parametrize("name", sorted(BGRAD))
def test_bgrad_rewrite_computes_the_original(name):
    fn = BGRAD[name][0]
    args = _bargs()
    gm = _C._stax_gemm_epilogue_pass(_C._capture(fn, *args))
    assert "_gemm_bgrad" in gm.code
    for g, w in zip(gm(*args), fn(*args)):
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)


def test_linear_training_backward_takes_bgrad_for_every_bias():
    import tensorplay.nn as nn
    m = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
    f = tp.compile(lambda x: (m(x) ** 2).mean())
    f(tp.randn(10, 16)).backward()
    got = _C._stax_cuda_externs(f.last_aot["backward"])
    assert got.count("_gemm_bgrad:bias_grad_a") == 2, got


@gpu
@pytest.mark.parametrize("dt", [tp.float32, tp.bfloat16])
@pytest.mark.parametrize("name", sorted(BGRAD))
def test_bgrad_call_matches_the_unfused_result(name, dt):
    fn = BGRAD[name][0]
    args = _bargs(dt, m=200, k=96, n=136)
    ref = fn(*[a.float() for a in args])
    got = tp.compile(fn, strict_native=True)(*[a.cuda() for a in args])
    tol = 1e-4 if dt == tp.float32 else 2e-2
    for g, w in zip(got, ref):
        assert g.dtype == dt and g.device.type == "cuda"
        np.testing.assert_allclose(g.cpu().float().numpy(), w.numpy(), rtol=tol, atol=tol * 8)


@gpu
def test_compiled_linear_training_with_bgrad_matches_cpu_gradients():
    import tensorplay.nn as nn
    tp.manual_seed(0)
    cpu = nn.Sequential(nn.Linear(48, 64), nn.ReLU(), nn.Linear(64, 40))
    tp.manual_seed(0)
    cu = nn.Sequential(nn.Linear(48, 64), nn.ReLU(), nn.Linear(64, 40)).cuda()
    x = tp.randn(33, 48)
    (cpu(x) ** 2).mean().backward()
    f = tp.compile(lambda x: (cu(x) ** 2).mean(), strict_native=True)
    f(x.cuda()).backward()
    assert _C._stax_cuda_externs(f.last_aot["backward"]).count("_gemm_bgrad:bias_grad_a") == 2
    pc = dict(cpu.named_parameters())
    for n, p in cu.named_parameters():
        np.testing.assert_allclose(p.grad.cpu().numpy(), pc[n].grad.numpy(), rtol=1e-4, atol=1e-6)


# ------------------------------------------- GELU_AUX (forward) / DGELU (backward)
# Training a tanh-GELU layer: the forward keeps the pre-activation y for the
# backward, so y and gelu(y) come from one GELU_AUX(_BIAS) call; the backward's
# (g @ w) * gelu'(y) is one DGELU call reading y as its auxiliary input.


def _gelu_kept(x, w, b):
    h = F.linear(x, w, b)
    return F.gelu(h, approximate="tanh"), h


def _dgelu(g, w, h):  # the derivative formula as the joint graph records it
    t = tp.tanh((h + h * h * h * 0.044715) * 0.7978845608028654)
    d = (t + 1.0) * 0.5 + h * 0.5 * (1.0 - t * t) * ((h * h * 0.134145 + 1.0) * 0.7978845608028654)
    return (g @ w) * d


def _not_dgelu(g, w, h):  # an erf-GELU's derivative: not what DGELU computes
    return (g @ w) * (0.5 * (1 + tp.erf(h * 0.7071067811865476)))


def _gargs(dt=tp.float32, m=24, k=16, n=32):
    return tp.randn(m, k).to(dt), (tp.randn(n, k) / 4).to(dt), tp.randn(n).to(dt)


def _dargs(dt=tp.float32, m=24, k=16, n=32):
    return tp.randn(m, k).to(dt), (tp.randn(k, n) / 4).to(dt), (tp.randn(m, n) * 2).to(dt)


@pytest.mark.parametrize("fn", [_gelu_kept])
def test_kept_product_under_tanh_gelu_takes_gelu_aux(fn):
    # ([B, T, C] layers: view -> gelu beside the kept addmm, in the training test below.)
    g = _C._capture(fn, *_gargs())
    assert _C._stax_cuda_externs(g) == ["_gemm_epilogue:gelu_tanh_aux"]
    gm = _C._stax_gemm_epilogue_pass(g)
    args = _gargs()
    for got, want in zip(gm(*args), fn(*args)):
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_gelu_derivative_times_a_product_takes_dgelu():
    g = _C._capture(_dgelu, *_dargs())
    assert _C._stax_cuda_externs(g) == ["_gemm_dgelu"]
    args = _dargs()
    np.testing.assert_allclose(_C._stax_gemm_epilogue_pass(g)(*args).numpy(), _dgelu(*args).numpy(), rtol=1e-5,
                               atol=1e-5)
    assert _C._stax_cuda_externs(_C._capture(_not_dgelu, *_dargs())) == ["matmul"]


def test_gelu_layer_training_takes_aux_dgelu_and_bgrad():
    import tensorplay.nn as nn
    m = nn.Sequential(nn.Linear(16, 32), nn.GELU(approximate="tanh"), nn.Linear(32, 8))
    f = tp.compile(lambda x: (m(x) ** 2).mean())
    f(tp.randn(2, 5, 16)).backward()
    assert "_gemm_epilogue:gelu_tanh_aux" in _C._stax_cuda_externs(f.last_aot["forward"])
    bw = _C._stax_cuda_externs(f.last_aot["backward"])
    assert "_gemm_dgelu" in bw and bw.count("_gemm_bgrad:bias_grad_a") == 2, bw


@gpu
@pytest.mark.parametrize("dt", [tp.float32, tp.bfloat16])
def test_gelu_aux_and_dgelu_calls_match_the_unfused_result(dt):
    tol = 1e-4 if dt == tp.float32 else 2e-2
    args = _gargs(dt, m=96, k=80, n=136)
    ref = _gelu_kept(*[a.float() for a in args])
    got = tp.compile(_gelu_kept, strict_native=True)(*[a.cuda() for a in args])
    for g, w in zip(got, ref):
        assert g.dtype == dt
        np.testing.assert_allclose(g.cpu().float().numpy(), w.numpy(), rtol=tol, atol=tol * 4)
    args = _dargs(dt, m=96, k=80, n=136)
    ref = _dgelu(*[a.float() for a in args])
    got = tp.compile(_dgelu, strict_native=True)(*[a.cuda() for a in args])
    np.testing.assert_allclose(got.cpu().float().numpy(), ref.numpy(), rtol=tol, atol=tol * 4)


@gpu
def test_compiled_gelu_mlp_training_matches_cpu_gradients():
    import tensorplay.nn as nn
    make = lambda: nn.Sequential(nn.Linear(48, 64), nn.GELU(approximate="tanh"), nn.Linear(64, 40))
    tp.manual_seed(0)
    cpu = make()
    tp.manual_seed(0)
    cu = make().cuda()
    x = tp.randn(3, 11, 48)
    (cpu(x) ** 2).mean().backward()
    f = tp.compile(lambda x: (cu(x) ** 2).mean(), strict_native=True)
    f(x.cuda()).backward()
    assert "_gemm_dgelu" in _C._stax_cuda_externs(f.last_aot["backward"])
    pc = dict(cpu.named_parameters())
    for n, p in cu.named_parameters():
        np.testing.assert_allclose(p.grad.cpu().numpy(), pc[n].grad.numpy(), rtol=1e-4, atol=1e-6)
