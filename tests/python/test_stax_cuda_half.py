"""16-bit floats on CUDA (issue 12 item 4): the CUDA printer loads bfloat16 /
float16 into float registers, computes in float, accumulates reductions in
float and rounds once at each store (8 halves = one 16-byte access where
aligned). No cuda_bf16.h / cuda_fp16.h: the prelude converts with integer
rounding (bf16) and PTX cvt (fp16), so the source compiles with NVRTC on a
machine without a GPU. On a GPU, tp.compile and the generated eager operators
match a float32 reference of the same 16-bit inputs within 16-bit rounding."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import _C

from test_stax_cuda import CASES, _graph

nvrtc = pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed (pip install nvidia-cuda-nvrtc)")
gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")

HALF = {"bf16": tp.bfloat16, "fp16": tp.float16}
# Cases whose inputs stay in range for float16 too (all of the float32 table).
NAMES = sorted(n for n in CASES if n != "chain_f64")


def _half_args(name, dt):
    return [a.to(dt) for a in CASES[name][1]()]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dt", sorted(HALF))
def test_half_region_is_printed_with_the_float_forms(name, dt):
    # The same thread mappings as float32: 16-bit inputs no longer refuse the region.
    fn, _, forms = CASES[name]
    g = _graph(fn, *_half_args(name, HALF[dt]))
    assert [k[1] for k in _C._stax_cuda_kernels(g)] == forms


def test_bf16_row_uses_eight_lane_vectors_and_float_accumulators():
    g = _graph(CASES["rms_norm"][0], tp.randn(16, 256).bfloat16(), tp.randn(256).bfloat16())
    src = _C._stax_cuda_source(g)
    assert "const tp_bf16* __restrict__ in0" in src and "tp_bf16* __restrict__ out0" in src
    assert "tp_bf16x8 tp_c" in src  # the row in registers, 8 halves per 16-byte load
    assert "float tp_acc" in src and "double tp_acc" not in src
    assert "#include" not in src  # no CUDA toolkit header needed


def test_number_operands_do_not_block_vectors():
    # x * 2 + 1.5 on bf16: the numbers stay float constants (no per-element cast),
    # so the flat kernel still moves 8 lanes per access.
    g = _graph(lambda x: x * 2 + 1.5, tp.randn(4, 64).bfloat16())
    src = _C._stax_cuda_source(g)
    assert "reinterpret_cast<tp_bf16x8*>(out0" in src
    (_, form, _, _, work), = _C._stax_cuda_kernels(g)
    assert form == "flat" and work == 4 * 8


def test_explicit_casts_round():
    g = _graph(lambda x: x.float().bfloat16() * 3, tp.randn(4, 64).bfloat16())
    assert "tp_bf16" in _C._stax_cuda_source(g)
    g = _graph(lambda x: (x.half() * 3).float(), tp.randn(4, 64))
    src = _C._stax_cuda_source(g)
    assert "tp_round_half" in src and "const float* __restrict__ in0" in src


@nvrtc
@pytest.mark.parametrize("arch", [80, 90])
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dt", sorted(HALF))
def test_half_source_compiles_with_nvrtc(name, dt, arch):
    fn = CASES[name][0]
    src = _C._stax_cuda_source(_graph(fn, *_half_args(name, HALF[dt])))
    assert tp.cuda._nvrtc_compile(src, f"half_{name}", arch)[:4] == b"\x7fELF"


@nvrtc
@pytest.mark.parametrize("dt", [tp.float32, tp.bfloat16, tp.float16])
def test_erf_gelu_and_negation_compile(dt):
    # Regression: the prelude had no tp_neg, so any region with a negation
    # (float32 erf-GELU's decomposition) failed to compile with NVRTC.
    # 16-bit erf-GELU decomposes through float32 (before: an extern no GPU kernel ran).
    g = _graph(lambda x: F.gelu(x) - (-x).exp(), tp.randn(8, 64).to(dt))
    src = _C._stax_cuda_source(g)
    assert "tp_neg(" in src
    assert tp.cuda._nvrtc_compile(src, "erf_gelu", 90)[:4] == b"\x7fELF"


def test_half_erf_gelu_is_generated_not_an_extern():
    g = _graph(lambda x: F.gelu(x), tp.randn(8, 64).bfloat16())
    assert _C._stax_cuda_externs(g) == []


# ---------------------------------------------------------------- with a GPU

def _check(got, ref32, dt, scale=1.0):
    """got: a 16-bit CUDA result; ref32: float32 reference on the CPU from the
    same 16-bit inputs. One rounding of the result plus float-ordering noise."""
    assert got.device.type == "cuda" and got.dtype == dt and tuple(got.shape) == tuple(ref32.shape)
    eps = 2.0 ** -8 if dt == tp.bfloat16 else 2.0 ** -11
    g = got.cpu().float().numpy()
    w = ref32.numpy()
    np.testing.assert_allclose(g, w, rtol=2 * eps, atol=2 * eps * scale * max(1.0, float(np.abs(w).max())))


@gpu
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dt", sorted(HALF))
def test_compiled_half_matches_float_reference(name, dt):
    fn = CASES[name][0]
    args = _half_args(name, HALF[dt])
    ref = fn(*[a.float() for a in args])
    f = tp.compile(fn, strict_native=True)
    cuda_args = [a.cuda() for a in args]
    # Reductions of 16-bit sums: the eager reference rounds partial steps the
    # float one does not; the row lengths here are short, so 4 ulps of the row scale.
    scale = 4.0 if name in ("example_1_1", "column_sum") else 1.0
    _check(f(*cuda_args), ref, HALF[dt], scale)
    _check(f(*cuda_args), ref, HALF[dt], scale)


@gpu
@pytest.mark.parametrize("dt", sorted(HALF))
def test_large_half_rows_and_misaligned_views(dt):
    d = HALF[dt]
    x = tp.randn(257, 4100).to(d)
    w = tp.randn(4100).to(d)
    rms = CASES["rms_norm"][0]
    _check(tp.compile(rms, strict_native=True)(x.cuda(), w.cuda()), rms(x.float(), w.float()), d)
    sm = CASES["softmax"][0]
    _check(tp.compile(sm, strict_native=True)(x.cuda()), sm(x.float()), d)
    base = tp.randn(8, 67).to(d)
    got = tp.compile(lambda v: v * 3 - 1, strict_native=True)(base.cuda()[:, 3:])
    _check(got, base[:, 3:].float() * 3 - 1, d)


@gpu
@pytest.mark.parametrize("dt", sorted(HALF))
def test_eager_half_operators_on_cuda(dt):
    # Before: NotImplementedError for every 16-bit operator without a hand-written kernel.
    d = HALF[dt]
    x = tp.randn(33, 70).to(d)
    w, b = tp.randn(70).to(d), tp.randn(70).to(d)
    xc, wc, bc = x.cuda(), w.cuda(), b.cuda()
    xf, wf, bf = x.float(), w.float(), b.float()
    _check(xc + wc, xf + wf, d)
    _check(xc.exp(), xf.exp(), d)
    _check(F.gelu(xc, approximate="tanh"), F.gelu(xf, approximate="tanh"), d)
    _check(F.gelu(xc), F.gelu(xf), d)
    _check(xc.softmax(-1), xf.softmax(-1), d)
    _check(F.layer_norm(xc, (70,), wc, bc), F.layer_norm(xf, (70,), wf, bf), d, 4.0)
    _check(xc.sum(-1), xf.sum(-1), d, 4.0)
    _check(xc.amax(0), xf.amax(0), d)
    _check(xc.float().to(d), xf, d)
    assert xc.float().dtype == tp.float32
    np.testing.assert_array_equal(xc.float().cpu().numpy(), xf.numpy())  # widening is exact


@gpu
def test_bf16_rounds_to_nearest_even_and_keeps_specials():
    # 1 + 2^-8 is halfway between two bf16 values: ties go to the even one (1.0);
    # 1 + 3*2^-8 goes up to 1 + 2^-6... no: to 1 + 2^-7 * 2 (even); inf and nan survive.
    vals = tp.tensor([1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, float("inf"), -float("inf"), 3.0e38])
    got = (vals.cuda() * 1).to(tp.bfloat16).cpu().float().numpy()
    want = (vals * 1).to(tp.bfloat16).float().numpy()  # the CPU's conversion
    np.testing.assert_array_equal(got, want)
    assert np.isnan((tp.tensor([float("nan")]).cuda().to(tp.bfloat16)).cpu().float().numpy()).all()


# ------------------------------------------- 16-bit kernel forms (issue 12 item 4)

def _softmax5(x):
    m = x.amax(-1, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(-1, keepdim=True)


@pytest.mark.parametrize("dt", sorted(HALF))
def test_half_column_sum_reads_two_lanes_per_thread(dt):
    # A 16-bit column thread read 2 bytes a row (half a float32 thread's bytes
    # in flight): now two neighbouring outputs, one 4-byte access per row.
    g = _graph(lambda x: x.sum(0), tp.randn(64, 8192).to(HALF[dt]))
    (_, form, bx, by, work), = _C._stax_cuda_kernels(g)
    assert (form, bx, by, work) == ("column", 16, 64, 8192 // 32)
    src = _C._stax_cuda_source(g)
    assert ("tp_bf16x2" if dt == "bf16" else "tp_halfx2") + " tp_p" in src
    # An odd number of outputs keeps one output a thread; float32 is unchanged.
    (_, _, bx, _, _), = _C._stax_cuda_kernels(_graph(lambda x: x.sum(0), tp.randn(64, 8193).to(HALF[dt])))
    assert bx == 32
    (_, _, bx, _, _), = _C._stax_cuda_kernels(_graph(lambda x: x.sum(0), tp.randn(64, 8192)))
    assert bx == 32
    # The alignment is tested once per thread (an aligned loop without a branch
    # per row), so the row stride must keep every row like the first: an odd
    # stride keeps one output a thread.
    assert "if (tp_al) {" in src and src.count("tp_al") == 3  # declared, set once, tested once
    (_, _, bx, _, _), = _C._stax_cuda_kernels(_graph(lambda x: x[:, :8192].sum(0), tp.randn(64, 8193).to(HALF[dt])))
    assert bx == 32


@pytest.mark.parametrize("dt", sorted(HALF))
def test_half_nodes_use_the_fast_forms_and_float32_keeps_the_accurate_ones(dt):
    sm16 = _C._stax_cuda_source(_graph(_softmax5, tp.randn(8, 256).to(HALF[dt])))
    assert "tp_exp_h(" in sm16 and "tp_div_h(" in sm16
    sm32 = _C._stax_cuda_source(_graph(_softmax5, tp.randn(8, 256)))
    assert "tp_exp(" in sm32 and "tp_exp_h(" not in sm32.split("extern")[1] and "tp_div_h(" not in sm32.split("extern")[1]
    gelu = lambda x: F.gelu(x, approximate="tanh")  # noqa: E731
    g16 = _C._stax_cuda_source(_graph(gelu, tp.randn(8, 256).to(HALF[dt]))).split("extern")[1]
    assert "tp_tanh_h(" in g16 and "tp_mul(" not in g16  # 16-bit products may contract into FMAs
    g32 = _C._stax_cuda_source(_graph(gelu, tp.randn(8, 256))).split("extern")[1]
    assert "tp_tanh(" in g32 and "tp_mul(" in g32 and "tp_tanh_h(" not in g32


@nvrtc
@pytest.mark.parametrize("dt", sorted(HALF))
def test_half_column_and_fast_forms_compile(dt):
    for fn, shape in [(lambda x: x.sum(0), (64, 512)), (lambda x: (x * x).sum(0), (64, 510)),
                      (lambda x: x.sigmoid() / (x.abs() + 1) + x.tanh(), (8, 256))]:
        src = _C._stax_cuda_source(_graph(fn, tp.randn(*shape).to(HALF[dt])))
        for arch in (80, 90):
            assert tp.cuda._nvrtc_compile(src, "fast_forms", arch)[:4] == b"\x7fELF"


def _ulp16(ref, d):
    """One unit in the last place of a 16-bit value of magnitude |ref|."""
    mant, emin = (7, -126) if d == tp.bfloat16 else (10, -14)
    e = np.floor(np.log2(np.maximum(np.abs(ref), 2.0 ** emin)))
    return 2.0 ** (e - mant)


def _gelu64(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


@gpu
@pytest.mark.parametrize("dt", sorted(HALF))
def test_fast_16bit_forms_stay_within_one_ulp_elementwise(dt):
    # The approximate exp/tanh/sigmoid/division of 16-bit nodes: every element
    # within one 16-bit ulp of the float64 value of the same 16-bit inputs
    # (one rounding is half an ulp; the approximations add ~2^-22), not only
    # within a tolerance scaled by the largest element.
    d = HALF[dt]
    x16 = tp.tensor(np.concatenate([np.linspace(-9, 9, 4093), [1e-4, -1e-4, 3e-3, -0.05, 0.06, 0.07, 0.0]])
                    .astype(np.float32)).reshape(4100 // 41, 41).to(d)
    b16 = (tp.rand(100, 41) * 9.9 + 0.1).to(d)
    x, b = x16.float().numpy().astype(np.float64), b16.float().numpy().astype(np.float64)
    xc, bc = x16.cuda(), b16.cuda()
    cases = [
        ("exp", lambda v: v.exp(), np.exp(x), 0.0),
        ("tanh", lambda v: v.tanh(), np.tanh(x), 0.0),
        ("sigmoid", lambda v: v.sigmoid(), 1 / (1 + np.exp(-x)), 0.0),
        ("div", lambda v: v / bc, x / b, 0.0),
        # 1 + tanh cancels for negative x in float (as in PyTorch's float math):
        # an absolute error of a few float ulps of 1, times |x|.
        ("gelu", lambda v: F.gelu(v, approximate="tanh"), _gelu64(x), 2.0 ** -22 * np.maximum(1, np.abs(x))),
        ("softmax", _softmax5, np.exp(x - x.max(-1, keepdims=True)) / np.exp(x - x.max(-1, keepdims=True)).sum(
            -1, keepdims=True), 0.0),
    ]
    for name, fn, ref, atol in cases:
        got = tp.compile(fn, strict_native=True)(xc).cpu().float().numpy().astype(np.float64)
        err = np.abs(got - ref)
        bad = err > _ulp16(ref, d) + atol
        assert not bad.any(), f"{name}: {int(bad.sum())} elements beyond one ulp, worst at x={x[bad][:3]}: " \
                              f"got {got[bad][:3]} want {ref[bad][:3]}"


@gpu
@pytest.mark.parametrize("dt", sorted(HALF))
@pytest.mark.parametrize("cols", [8192, 4097, 70])
def test_half_column_sums_even_odd_and_misaligned(dt, cols):
    # Even widths take two lanes a thread (aligned: one 4-byte access a row;
    # the view starting one element in: lane by lane), odd ones one lane.
    d = HALF[dt]
    x = tp.randn(1000, cols + 2).to(d)
    xc = x.cuda()
    f = tp.compile(lambda v: v.sum(0), strict_native=True)
    g = tp.compile(lambda v: (v * v).sum(0), strict_native=True)
    for lo in (0, 1):
        w = x[:, lo:lo + cols].float().numpy().astype(np.float64)
        for fn, ref in ((f, w.sum(0)), (g, (w * w).sum(0))):
            got = fn(xc[:, lo:lo + cols]).cpu().float().numpy()
            # float accumulation of 1000 rows, then one 16-bit rounding of the total
            np.testing.assert_allclose(got, ref, rtol=_ulp16(1.0, d), atol=1e-4 * np.abs(ref).max())


@pytest.mark.parametrize("dt", sorted(HALF))
def test_row_invariant_16bit_division_stays_a_plain_division(dt):
    # layer_norm's 1/sqrt(var + eps) and a mean's sum / n are the same for a
    # whole row: a plain `/` is hoisted out of the element loop, the fast
    # form's asm was not (16-bit layer_norm / RMSNorm fell to beta 0.67 / 0.79
    # on the H200). A per-element division (softmax's e / sum) keeps the fast form.
    x, w, b = tp.randn(16, 256).to(HALF[dt]), tp.randn(256).to(HALF[dt]), tp.randn(256).to(HALF[dt])
    ln = _C._stax_cuda_source(_graph(lambda x, w, b: F.layer_norm(x, (256,), w, b), x, w, b))
    rms = _C._stax_cuda_source(_graph(lambda x, w: x * (x * x).mean(-1, keepdim=True).add(1e-6).rsqrt() * w, x, w))
    for src in (ln, rms):
        body = src.split("extern")[1]
        assert "tp_div_h(" not in body and " / " in body

    def softmax(x):
        e = (x - x.amax(-1, keepdim=True)).exp()
        return e / e.sum(-1, keepdim=True)
    assert "tp_div_h(" in _C._stax_cuda_source(_graph(softmax, x)).split("extern")[1]
