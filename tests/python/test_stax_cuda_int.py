"""Integers in generated CUDA kernels (issue 12): CUDA regions lower int32
tensors (as CPU regions now do) — `int` registers, int4 vector
accesses, a sum or prod of int32 accumulates in int64 (PyTorch's result
dtype), max/min start from int32's limits — and integer division in PyTorch's
rounding modes (trunc: C's `/`; floor / floor_divide and remainder: the
quotient stepped down / the rest moved to the divisor's sign when the signs
differ; fmod: the dividend's sign), for int32 and int64. Without a GPU the
printed sources are checked and compiled with NVRTC for sm_80 and sm_90; on a
GPU tp.compile (strict_native) equals eager CPU bit for bit. uint8, int8 and
int16 are covered by test_cuda_small_ints.py; CPU regions take them all
(test_stax_cpu_small_dtypes.py), keeping integer division an eager extern call."""
import re

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import _C

nvrtc = pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed")
gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")


def _ints(shape, lo=-1000, hi=1000, dtype=tp.int32, seed=0):
    tp.manual_seed(seed)
    return tp.randint(lo, hi, shape, dtype=dtype)


def _divisors(shape, dtype=tp.int32, seed=1):
    # both signs, never zero
    d = _ints(shape, 1, 9, dtype, seed)
    s = _ints(shape, 0, 2, dtype, seed + 1) * 2 - 1
    return d * s


def _pair(shape=(8, 37), dtype=tp.int32):
    return lambda: (_ints(shape, dtype=dtype), _ints(shape, seed=5, dtype=dtype))


def _num_den(shape=(8, 37), dtype=tp.int32):
    return lambda: (_ints(shape, dtype=dtype), _divisors(shape, dtype))


# name: (function, inputs)
CASES = {
    "add": (lambda a, b: a + b, _pair()),
    "mul_add_number": (lambda a, b: a * b - 7, _pair()),
    "where_max": (lambda a, b: tp.where(a > b, a, b * 2), _pair()),
    "compare": (lambda a, b: (a < b) | (a == 3), _pair()),
    "to_float": (lambda a, b: a.to(tp.float32) * 0.5 + b, lambda: (_ints((8, 37)), tp.randn(8, 37))),
    "from_float": (lambda x: (x * 300.0).to(tp.int32), lambda: (tp.randn(8, 37),)),
    "mixed": (lambda a, x: a * x, lambda: (_ints((8, 37)), tp.randn(8, 37))),
    "int64_mix": (lambda a, b: a + b, lambda: (_ints((8, 37)), _ints((8, 37), dtype=tp.int64))),
    "row_sum": (lambda a: a.sum(-1), lambda: (_ints((8, 37)),)),
    "sum_overflows_int32": (lambda a: a.sum(-1), lambda: (_ints((4, 64), 2**30, 2**31 - 1),)),
    "total_sum": (lambda a: a.sum(), lambda: (_ints((300, 257)),)),
    "column_sum": (lambda a: a.sum(0), lambda: (_ints((300, 70)),)),
    "amax_amin": (lambda a: a.amax(-1).to(tp.int64) - a.amin(-1), lambda: (_ints((8, 37), -(2**31), 2**31 - 1),)),
    "max_all": (lambda a: a.max(), lambda: (_ints((8, 37), -(2**31), -5),)),
    "bool_sum": (lambda a: (a > 0).sum(-1), lambda: (_ints((8, 37)),)),
    "floor_div": (lambda a, b: tp.div(a, b, rounding_mode="floor"), _num_den()),
    "trunc_div": (lambda a, b: tp.div(a, b, rounding_mode="trunc"), _num_den()),
    "floor_divide": (lambda a, b: a // b, _num_den()),
    "remainder": (lambda a, b: a % b, _num_den()),
    "remainder_number": (lambda a, b: a % -3 + a % 5, _num_den()),
    "fmod": (lambda a, b: tp.fmod(a, b), _num_den()),
    "true_div": (lambda a, b: a / b, _num_den()),
    "int64_floor_div": (lambda a, b: a // b + a % b, _num_den(dtype=tp.int64)),
    "int64_trunc_fmod": (lambda a, b: tp.div(a, b, rounding_mode="trunc") * 3 + tp.fmod(a, b),
                         _num_den(dtype=tp.int64)),
}


def _graph(name):
    fn, make = CASES[name]
    return _C._capture(fn, *make())


def _kernel_names(src):
    return re.findall(r"__global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(", src)


@pytest.mark.parametrize("name", sorted(CASES))
def test_int_regions_print_their_kernels(name):
    kernels = _C._stax_cuda_kernels(_graph(name))  # before, a BackendError naming int32
    src = _C._stax_cuda_source(_graph(name))
    assert len(_kernel_names(src)) == len(kernels) >= 1


def test_int32_buffers_registers_and_vector_accesses():
    src = _C._stax_cuda_source(_graph("add"))
    assert "const int* __restrict__ in0" in src and "int* __restrict__ out0" in src
    assert "int4" in src and "make_int4(" in src  # 16-byte accesses, four lanes


def test_int32_sum_accumulates_in_int64_and_max_starts_at_the_int32_minimum():
    src = _C._stax_cuda_source(_graph("row_sum"))
    assert "i64* __restrict__ out0" in src and re.search(r"i64 tp_acc\d+ = 0LL", src)
    src = _C._stax_cuda_source(_graph("max_all"))
    assert re.search(r"int tp_acc\d+ = \(-2147483647 - 1\)", src)  # not INT64_MIN truncated to 0


def test_integer_division_is_generated_on_cuda_only():
    src = _C._stax_cuda_source(_graph("floor_div"))
    assert " / " in src and "tp_where(" in src
    # the CPU region keeps the eager kernel (a zero divisor must raise there, not trap)
    fn, make = CASES["int64_floor_div"]
    f = tp.compile(fn, strict_native=False)
    a, b = make()
    np.testing.assert_array_equal(f(a, b).numpy(), fn(a, b).numpy())


def test_cpu_regions_take_narrow_integers_too():
    # (before: refused, naming the dtype; test_stax_cpu_small_dtypes.py covers the forms)
    for dt in (tp.uint8, tp.int16, tp.int8, tp.int32):
        f = tp.compile(lambda x: x + 1, strict_native=True)
        assert f(tp.ones(4, 4, dtype=dt)).tolist() == [[2] * 4] * 4


@nvrtc
@pytest.mark.parametrize("arch", [80, 90])
@pytest.mark.parametrize("name", sorted(CASES))
def test_int_source_compiles_with_nvrtc(name, arch):
    src = _C._stax_cuda_source(_graph(name))
    for k in _kernel_names(src):
        assert len(tp.cuda._nvrtc_compile(src, k, arch)) > 0


# ---- on a GPU: bit for bit against eager on the CPU ----

def _check(got, want):
    assert got.device.type == "cuda"
    assert got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())


@gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_int_region_on_cuda_equals_eager_cpu(name):
    fn, make = CASES[name]
    args = make()
    want = fn(*args)
    f = tp.compile(fn, strict_native=True)
    _check(f(*[a.cuda() for a in args]), want)


@gpu
@pytest.mark.parametrize("name", ["add", "floor_div", "remainder", "fmod", "trunc_div", "row_sum", "amax_amin"])
def test_eager_int32_operators_on_cuda_equal_the_cpu(name):
    fn, make = CASES[name]
    args = make()
    _check(fn(*[a.cuda() for a in args]), fn(*args))


@gpu
def test_int32_rows_misaligned_and_long():
    fn = lambda a, b: (a * 3 + b) // 7  # noqa: E731
    for shape in [(3, 5), (2, 4099), (1, 70001)]:
        a, b = _ints(shape), _ints(shape, seed=9)
        f = tp.compile(fn, strict_native=True, dynamic=False)
        _check(f(a.cuda(), b.cuda()), fn(a, b))
        g = tp.compile(fn, strict_native=True, dynamic=False)
        _check(g(a.cuda()[:, 1:], b.cuda()[:, 1:]), fn(a[:, 1:], b[:, 1:]))  # views off the 16-byte grid
