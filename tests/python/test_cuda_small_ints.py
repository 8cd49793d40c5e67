"""uint8, int8 and int16 on CUDA (issue 12): generated kernels (tp.compile
regions and the eager CUDA operators Stax generates) keep each narrow integer
in a register of its own width (u8 / i8 / i16 in the prelude), so arithmetic,
negation and abs wrap as in PyTorch; operands meet in PyTorch's promoted type
(uint8 + int8 -> int16, uint8 + 1 stays uint8, uint8 / 2 -> float32), sums and
products accumulate in int64, max/min/argmax start from the type's own
limits, shifts follow eager's rules for amounts outside the width, and a
float converts to a narrow integer through int64 (so -1.5 -> uint8 is 255, as
in PyTorch). Floating div(rounding_mode="floor" | "trunc") and // are lowered
natively too (eager's fmod-based algorithm; 16-bit floats round every step as
PyTorch's 16-bit arithmetic does), in CUDA and CPU regions.

Without a GPU every case is lowered without an extern call and its CUDA
source is compiled with NVRTC; the CPU-region float division is checked bit
for bit against eager and PyTorch. On a GPU the results equal PyTorch on the
CPU (the oracle), bit for bit, both eagerly and in tp.compile(strict_native)."""
import re

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import _C

torch = pytest.importorskip("torch")

nvrtc = pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed")
gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")

NP = {"uint8": np.uint8, "int8": np.int8, "int16": np.int16}
EDGES = {"uint8": [0, 1, 127, 128, 254, 255], "int8": [-128, -127, -1, 0, 1, 126, 127],
         "int16": [-32768, -32767, -256, -1, 0, 1, 255, 256, 32766, 32767]}


def _ints(shape, dt, seed=0, lo=None, hi=None):
    """Random values over the dtype's whole range (or [lo, hi)), the edge
    values first."""
    info = np.iinfo(NP[dt])
    lo = info.min if lo is None else lo
    hi = info.max + 1 if hi is None else hi
    a = np.asarray(np.random.default_rng(seed).integers(lo, hi, size=shape)).astype(NP[dt])
    flat = a.reshape(-1)
    edges = [e for e in EDGES[dt] if lo <= e < hi]
    flat[: min(flat.size, len(edges))] = edges[: flat.size]
    return a


def _nonzero(shape, dt, seed=1):
    a = _ints(shape, dt, seed)
    a[a == 0] = 1
    return a


def _floats(shape, seed=2, scale=100.0):
    return np.asarray(np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def _where(m, c, a, b):
    return m.where(c, a, b)


# name: (fn(m, *args) with m = tensorplay or torch, make() -> numpy arrays)
S = (4, 17)
CASES = {
    "u8_to_float_div_255": (lambda m, a: a.float() / 255, lambda: (_ints(S, "uint8"),)),
    "u8_mask_gt0": (lambda m, a: a > 0, lambda: (_ints(S, "uint8"),)),
    "u8_compare_scalars": (lambda m, a: (a >= 128) ^ (a == 255) | (a < 3), lambda: (_ints(S, "uint8"),)),
    "u8_eq_minus_one_wraps": (lambda m, a: a == -1, lambda: (_ints(S, "uint8"),)),
    "i16_compare_tensors": (lambda m, a, b: (a <= b) & (a != b), lambda: (_ints(S, "int16"), _ints(S, "int16", 3))),
    "float_to_i8": (lambda m, x: x.to(m.int8), lambda: (_floats(S, scale=60.0),)),
    "float_to_u8_through_int64": (lambda m, x: x.to(m.uint8), lambda: (_floats(S, scale=120.0),)),
    "float_to_i16": (lambda m, x: (x * 200).to(m.int16), lambda: (_floats(S),)),
    "u8_to_i8_to_i16": (lambda m, a: a.to(m.int8).to(m.int16) * 3, lambda: (_ints(S, "uint8"),)),
    "i16_arith_wraps": (lambda m, a, b: a * b + a - b * 7, lambda: (_ints(S, "int16"), _ints(S, "int16", 4))),
    "i8_arith_wraps": (lambda m, a, b: a * b - a + 100, lambda: (_ints(S, "int8"), _ints(S, "int8", 4))),
    "u8_plus_one_stays_u8": (lambda m, a: a + 1, lambda: (_ints(S, "uint8"),)),
    "u8_plus_i8_is_i16": (lambda m, a, b: a + b, lambda: (_ints(S, "uint8"), _ints(S, "int8", 5))),
    "u8_times_float_number": (lambda m, a: a * 1.5, lambda: (_ints(S, "uint8"),)),
    "u8_div_2_is_float": (lambda m, a: a / 2, lambda: (_ints(S, "uint8"),)),
    "u8_plus_int64": (lambda m, a, b: a + b, lambda: (_ints(S, "uint8"), np.arange(17, dtype=np.int64) - 9)),
    "bool_plus_u8": (lambda m, a, b: (a > 5) + b, lambda: (_ints(S, "uint8"), _ints(S, "uint8", 6))),
    "i8_plus_i16": (lambda m, a, b: a - b, lambda: (_ints(S, "int8"), _ints(S, "int16", 6))),
    "where_i8": (lambda m, a, b: _where(m, a > b, a, b), lambda: (_ints(S, "int8"), _ints(S, "int8", 7))),
    "where_i8_number": (lambda m, a: _where(m, a > 0, a, 0), lambda: (_ints(S, "int8"),)),
    "abs_neg_i8_wrap": (lambda m, a: a.abs() * 2 + (-a), lambda: (_ints(S, "int8"),)),
    "neg_u8_wraps": (lambda m, a: -a, lambda: (_ints(S, "uint8"),)),
    "abs_i16": (lambda m, a: a.abs(), lambda: (_ints(S, "int16"),)),
    "clamp_u8": (lambda m, a: a.clamp(10, 200), lambda: (_ints(S, "uint8"),)),
    "clamp_i8": (lambda m, a: m.clamp(a, -5, 100), lambda: (_ints(S, "int8"),)),
    "clamp_i16_tensors": (lambda m, a, lo, hi: m.clamp(a, lo, hi),
                          lambda: (_ints(S, "int16"), _ints(S, "int16", 8, -1000, 0), _ints(S, "int16", 9, 0, 1000))),
    "bitwise_u8": (lambda m, a, b: (a & b) | (a ^ 0x5A), lambda: (_ints(S, "uint8"), _ints(S, "uint8", 10))),
    "bitwise_not_i8": (lambda m, a: ~a, lambda: (_ints(S, "int8"),)),
    "bitwise_i16": (lambda m, a, b: (a | b) ^ ~(a & b), lambda: (_ints(S, "int16"), _ints(S, "int16", 11))),
    "shifts_u8": (lambda m, a, b: (a << b) + (a >> b), lambda: (_ints(S, "uint8"), _ints(S, "uint8", 12, 0, 12))),
    "shifts_i8_any_amount": (lambda m, a, b: (a << b) ^ (a >> b), lambda: (_ints(S, "int8"), _ints(S, "int8", 13, -3, 12))),
    "shifts_i16_number": (lambda m, a: (a << 3) + (a >> 2), lambda: (_ints(S, "int16"),)),
    "floor_divide_i8": (lambda m, a, b: a // b, lambda: (_ints(S, "int8"), _nonzero(S, "int8"))),
    "div_trunc_floor_u8": (lambda m, a, b: m.div(a, b, rounding_mode="trunc") + m.div(a, b, rounding_mode="floor"),
                           lambda: (_ints(S, "uint8"), _nonzero(S, "uint8"))),
    "remainder_fmod_i16": (lambda m, a, b: (a % b) * 3 + m.fmod(a, b), lambda: (_ints(S, "int16"), _nonzero(S, "int16"))),
    "remainder_i8_number": (lambda m, a: a % -3 + a % 5, lambda: (_ints(S, "int8"),)),
    "i8_min_div_minus_one_wraps": (lambda m, a, b: a // b + m.fmod(a, b),
                                   lambda: (np.full(S, -128, np.int8), np.full(S, -1, np.int8))),
    "sum_u8_is_int64": (lambda m, a: a.sum(), lambda: (_ints((37, 29), "uint8"),)),
    "sum_u8_dim": (lambda m, a: a.sum(1), lambda: (_ints(S, "uint8"),)),
    "sum_i8_columns": (lambda m, a: a.sum(0), lambda: (_ints((300, 7), "int8"),)),
    "prod_i16_dim": (lambda m, a: a.prod(1), lambda: (_ints(S, "int16", 0, -3, 4),)),
    "max_min_u8": (lambda m, a: a.max().to(m.int16) - a.min(), lambda: (_ints((37, 29), "uint8", 0, 3, 250),)),
    "amax_amin_i8": (lambda m, a: a.amax(1).to(m.int16) * 1000 + a.amin(1), lambda: (_ints(S, "int8", 0, -100, 100),)),
    "max_u8_split": (lambda m, a: a.max(), lambda: (_ints((1 << 20,), "uint8", 0, 0, 255),)),
    "sum_u8_split_int64": (lambda m, a: a.sum(), lambda: (_ints((1 << 20,), "uint8"),)),
    "min_i8_split": (lambda m, a: a.min(), lambda: (_ints((1 << 20,), "int8", 0, -127, 128),)),
    "argmax_u8": (lambda m, a: a.argmax(), lambda: (_ints((37, 29), "uint8"),)),
    "argmax_argmin_dim_i16": (lambda m, a: a.argmax(1) * 100 + a.argmin(1), lambda: (_ints(S, "int16"),)),
    "float_floor_div": (lambda m, x, y: m.div(x, y, rounding_mode="floor"), lambda: (_floats(S), _floats(S, 3, 1.0))),
    "float_trunc_div": (lambda m, x, y: m.div(x, y, rounding_mode="trunc"), lambda: (_floats(S), _floats(S, 3, 1.0))),
    "float_floordiv_op": (lambda m, x, y: x // y + x % y - m.fmod(x, y), lambda: (_floats(S), _floats(S, 3, 1.0))),
}


def _tp(arrays):  # np.array keeps a 0-d array 0-d (ascontiguousarray makes it 1-d)
    return [tp.from_numpy(np.array(a, order="C")) for a in arrays]


def _torch(arrays):
    return [torch.from_numpy(np.array(a, order="C")) for a in arrays]


def _graph(name):
    fn, make = CASES[name]
    return _C._capture(lambda *a: fn(tp, *a), *_tp(make()))


def _kernel_names(src):
    return re.findall(r"__global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(", src)


def _bits(a):
    a = np.ascontiguousarray(a)
    if a.dtype.kind == "f":
        return a.view({2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize])
    return a


def _same(got, want, msg=""):
    """got (a tensorplay tensor) equals want (a torch tensor) in dtype, shape
    and bits (NaNs anywhere NaN is)."""
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], msg
    if want.dtype in (torch.float16, torch.bfloat16):  # compared as their exact float32 values
        got, want = got.float(), want.float()
    g = got.cpu().numpy() if got.device.type == "cuda" else got.numpy()
    w = want.numpy()
    assert g.shape == w.shape, msg
    if w.dtype.kind == "f":
        nan = np.isnan(w)
        np.testing.assert_array_equal(np.isnan(g), nan, err_msg=msg)
        np.testing.assert_array_equal(_bits(g)[~nan], _bits(w)[~nan], err_msg=msg)
    else:
        np.testing.assert_array_equal(g, w, err_msg=msg)


# ---- without a GPU: lowered natively, compiled by NVRTC ----

@pytest.mark.parametrize("name", sorted(CASES))
def test_small_int_regions_lower_without_extern_calls(name):
    g = _graph(name)
    assert _C._stax_cuda_externs(g) == []  # before: "dtype uint8 is not supported by generated kernels yet"
    assert len(_kernel_names(_C._stax_cuda_source(g))) >= 1


def test_registers_of_the_narrow_widths_and_their_reduction_limits():
    src = _C._stax_cuda_source(_graph("u8_plus_i8_is_i16"))
    assert "const u8* __restrict__ in0" in src and "const i8* __restrict__ in1" in src
    assert "i16* __restrict__ out0" in src
    src = _C._stax_cuda_source(_graph("amax_amin_i8"))
    assert re.search(r"i8 tp_acc\d+ = \(-127 - 1\)", src) and re.search(r"i8 tp_acc\d+ = 127;", src)
    src = _C._stax_cuda_source(_graph("max_min_u8"))
    assert re.search(r"u8 tp_acc\d+ = 0;", src) and re.search(r"u8 tp_acc\d+ = 255;", src)
    src = _C._stax_cuda_source(_graph("sum_u8_is_int64"))
    assert re.search(r"i64 tp_acc\d+ = 0LL", src) and "i64* __restrict__ out0" in src
    src = _C._stax_cuda_source(_graph("float_to_u8_through_int64"))
    assert "(u8)(i64)(" in src


def test_cpu_regions_take_narrow_integers_too():
    # (before: refused, naming the dtype; test_stax_cpu_small_dtypes.py covers the forms)
    f = tp.compile(lambda x: x + 1, strict_native=True)
    x = tp.full((4, 4), 255, dtype=tp.uint8)
    assert f(x).dtype == tp.uint8 and f(x).tolist() == [[0] * 4] * 4


@nvrtc
@pytest.mark.parametrize("arch", [80, 90])
@pytest.mark.parametrize("name", sorted(CASES))
def test_small_int_source_compiles_with_nvrtc(name, arch):
    src = _C._stax_cuda_source(_graph(name))
    for k in _kernel_names(src):
        assert len(tp.cuda._nvrtc_compile(src, k, arch)) > 0


SYMBOLIC = {
    "add_mul": lambda x, y: (x + y) * 3,
    "sums_and_max": lambda x, y: x.sum(-1) + y.amax(-1),
    "image_scale_and_count": lambda x, y: ((x.float() / 255) * y, ((x > 128) & (y < 0)).sum(0)),
    "shift_xor": lambda x, y: (x << (y.abs() % 9)) ^ y,
}
_A, _B = 37, 53  # distinctive hints


def _symbolic_args(a=_A, b=_B, seed=0):
    return [tp.from_numpy(_ints((a, b), "uint8", seed)), tp.from_numpy(_ints((a, b), "int8", seed + 1))]


@nvrtc
@pytest.mark.parametrize("name", sorted(SYMBOLIC))
def test_symbolic_small_int_source_compiles_with_nvrtc(name):
    # dynamic shapes: every size an argument of the kernel
    src, _, _, _ = _C._testing_stax_cuda_symbolic(SYMBOLIC[name], _symbolic_args(), [_A, _B])
    assert "tp_size0" in src
    for k in _kernel_names(src):
        assert len(tp.cuda._nvrtc_compile(src, k, 90)) > 0


@gpu
@pytest.mark.parametrize("name", sorted(SYMBOLIC))
def test_dynamic_small_int_region_on_cuda_equals_torch(name):
    fn = SYMBOLIC[name]
    f = tp.compile(fn, dynamic=True, strict_native=True)
    for (a, b) in [(_A, _B), (3, 1023), (1, 17)]:
        args = _symbolic_args(a, b, a)
        want = fn(*[torch.from_numpy(t.numpy()) for t in args])
        got = f(*[t.cuda() for t in args])
        for g, w in zip(got, want) if isinstance(want, tuple) else [(got, want)]:
            _same(g, w, str((a, b)))


# ---- float division rounded to an integer: specials ----

_SPECIALS = [0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 3.0, -3.0, 7.0, 0.1, -0.1, 1e-30, -1e-30, 1e30, -1e30,
             3e38, -3e38, 1e-45, np.inf, -np.inf, np.nan]


def _division_operands(np_dtype):
    x = np.array([a for a in _SPECIALS for _ in _SPECIALS], dtype=np.float64)
    y = np.array([b for _ in _SPECIALS for b in _SPECIALS], dtype=np.float64)
    rng = np.random.default_rng(0)
    x = np.concatenate([x, rng.standard_normal(600) * 100, rng.standard_normal(300) * 1e20, [1.0, 6.0, -6.0, 0.3]])
    y = np.concatenate([y, rng.standard_normal(600), rng.standard_normal(300) * 1e-10, [0.1, 3.0, 3.0, 0.1]])
    return x.astype(np_dtype), y.astype(np_dtype)


DIVISIONS = {
    "floor": lambda m, x, y: m.div(x, y, rounding_mode="floor"),
    "trunc": lambda m, x, y: m.div(x, y, rounding_mode="trunc"),
    "floordiv_op": lambda m, x, y: x // y,
}


@pytest.mark.parametrize("mode", sorted(DIVISIONS))
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_cpu_region_float_division_is_native_and_bitwise_eager(mode, dt):
    fn = DIVISIONS[mode]
    x, y = _division_operands(np.dtype(dt))
    want = fn(torch, *_torch([x, y]))
    _same(fn(tp, *_tp([x, y])), want, "eager")
    f = tp.compile(lambda a, b: fn(tp, a, b), strict_native=True)
    _same(f(*_tp([x, y])), want, "compiled")
    assert "tp_fmod" in f.last_source or mode == "trunc"
    assert not re.search(r"^  // extern \d+:", f.last_source, re.M)  # before: div ran as an extern call


@nvrtc
@pytest.mark.parametrize("dt", [tp.float32, tp.float64, tp.float16, tp.bfloat16])
def test_cuda_float_division_source_compiles(dt):
    for fn in DIVISIONS.values():
        g = _C._capture(lambda a, b: fn(tp, a, b), tp.randn(5, 9).to(dt), tp.randn(5, 9).to(dt))
        assert _C._stax_cuda_externs(g) == []
        src = _C._stax_cuda_source(g)
        assert "tp_div_h(" not in src[src.index('extern "C"'):]  # it could step an exact quotient down
        for k in _kernel_names(src):
            assert len(tp.cuda._nvrtc_compile(src, k, 90)) > 0


# ---- on a GPU: PyTorch on the CPU is the oracle, bit for bit ----

@gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_small_int_region_on_cuda_equals_torch(name):
    fn, make = CASES[name]
    args = make()
    want = fn(torch, *_torch(args))
    f = tp.compile(lambda *a: fn(tp, *a), strict_native=True)
    got = f(*[t.cuda() for t in _tp(args)])
    assert got.device.type == "cuda"
    _same(got, want)


@gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_eager_small_int_operators_on_cuda_equal_torch(name):
    fn, make = CASES[name]
    args = make()
    _same(fn(tp, *[t.cuda() for t in _tp(args)]), fn(torch, *_torch(args)))


SHAPED = ["u8_to_float_div_255", "u8_plus_i8_is_i16", "bitwise_u8", "shifts_i8_any_amount", "where_i8",
          "sum_u8_dim", "remainder_fmod_i16", "i16_arith_wraps", "float_to_u8_through_int64"]


def _shaped(name, shape, seed):
    _, make = CASES[name]
    out = []
    for i, a in enumerate(make()):
        if a.ndim == 2:
            if a.dtype.kind == "f":
                a = _floats(shape, seed + i, 120.0)
            elif name in ("remainder_fmod_i16",) and i == 1:
                a = _nonzero(shape, str(a.dtype), seed + i)
            else:
                a = _ints(shape, str(a.dtype), seed + i)
        out.append(a)
    return out


@gpu
@pytest.mark.parametrize("shape", [(), (1,), (3,), (17,), (1023,), (0,), (3, 0), (5, 17)])
@pytest.mark.parametrize("name", SHAPED)
def test_odd_sizes_0d_and_empty(name, shape):
    fn, _ = CASES[name]
    args = _shaped(name, shape, 20)
    if "sum" in name:  # sums over dim 1: a row of the elements
        args = [a.reshape(1, -1) if a.ndim < 2 else a for a in args]
    want = fn(torch, *_torch(args))
    _same(fn(tp, *[t.cuda() for t in _tp(args)]), want, "eager")
    f = tp.compile(lambda *a: fn(tp, *a), strict_native=True)
    _same(f(*[t.cuda() for t in _tp(args)]), want, "compiled")


@gpu
@pytest.mark.parametrize("name", SHAPED)
def test_non_contiguous_inputs(name):
    fn, _ = CASES[name]
    args = _shaped(name, (9, 34), 30)
    want = fn(torch, *[t.t()[::2] for t in _torch(args)])
    views = [t.cuda().t()[::2] for t in _tp(args)]
    assert not views[0].is_contiguous()
    _same(fn(tp, *views), want, "eager")
    f = tp.compile(lambda *a: fn(tp, *a), strict_native=True)
    _same(f(*views), want, "compiled")


@gpu
def test_uint8_image_pipeline_and_grads_reach_only_floats():
    img = _ints((3, 31, 33), "uint8")
    w = np.random.default_rng(1).standard_normal((3, 1, 1)).astype(np.float32)

    def fn(m, im, wt):
        x = im.float() / 255
        mask = im > 0
        return ((x * wt) * mask).sum()

    wt_tp = tp.from_numpy(w).cuda().requires_grad_()
    wt_torch = torch.from_numpy(w).requires_grad_()
    f = tp.compile(lambda a, b: fn(tp, a, b), strict_native=True)
    got = f(tp.from_numpy(img).cuda(), wt_tp)
    want = fn(torch, torch.from_numpy(img), wt_torch)
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    got.backward()
    want.backward()
    np.testing.assert_allclose(wt_tp.grad.cpu().numpy(), wt_torch.grad.numpy(), rtol=1e-5)


@gpu
@pytest.mark.parametrize("mode", sorted(DIVISIONS))
@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16"])
def test_cuda_float_division_specials_equal_torch(mode, dt):
    fn = DIVISIONS[mode]
    x, y = _division_operands(np.float32 if dt in ("float16", "bfloat16") else np.dtype(dt))
    tx, ty = _torch([x, y])
    if dt in ("float16", "bfloat16"):
        tx, ty = tx.to(getattr(torch, dt)), ty.to(getattr(torch, dt))
    want = fn(torch, tx, ty)
    a = tp.from_numpy(tx.float().numpy()).to(getattr(tp, dt)) if dt in ("float16", "bfloat16") else _tp([x])[0]
    b = tp.from_numpy(ty.float().numpy()).to(getattr(tp, dt)) if dt in ("float16", "bfloat16") else _tp([y])[0]
    _same(fn(tp, a.cuda(), b.cuda()), want, "eager")
    f = tp.compile(lambda p, q: fn(tp, p, q), strict_native=True)
    _same(f(a.cuda(), b.cuda()), want, "compiled")
