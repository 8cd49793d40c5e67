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


def test_narrow_integers_are_still_refused_naming_the_dtype():
    with pytest.raises(Exception, match="int32"):
        _C._stax_cuda_source(_graph(lambda x: x + 1, tp.ones(4, 4, dtype=tp.int32)))


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
