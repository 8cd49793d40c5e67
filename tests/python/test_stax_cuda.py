"""Stax on CUDA (issue 12): the CUDA printer follows the scheduler's plans
(fused multi-node kernels, row / column / flat thread mappings, 128-bit vector
accesses with a scalar fallback), the printed source compiles with NVRTC where
NVRTC is installed (no GPU needed), and on a GPU tp.compile of CUDA tensors
runs the generated kernels with results equal to eager's within the error
model. Everything that needs a GPU is skipped without one."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import _C

nvrtc = pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed (pip install nvidia-cuda-nvrtc)")
gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")


def _example_1_1(x, w):
    return ((x + w).relu() * 2).sum(-1)


def _softmax(x):
    m = x.amax(-1, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(-1, keepdim=True)


def _chain(x, y):
    return ((x * y + 1.5).tanh() - y.sigmoid()).abs().sqrt()


def _layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b)


def _rms(x, w):
    return x * (x * x).mean(-1, keepdim=True).add(1e-6).rsqrt() * w


def _gelu(x, b):
    return F.gelu(x + b, approximate="tanh")


def _colsum(x):
    return x.sum(0)


def _libm(x):
    return x.sin() * x.cos() + x.abs().log1p()


# name: (function, inputs, expected kernel forms)
CASES = {
    "example_1_1": (_example_1_1, lambda: (tp.randn(64, 128), tp.randn(128)), ["row"]),
    "softmax": (_softmax, lambda: (tp.randn(32, 100),), ["row"]),
    "layer_norm": (_layer_norm, lambda: (tp.randn(16, 96), tp.randn(96), tp.randn(96)), ["row"]),
    "rms_norm": (_rms, lambda: (tp.randn(16, 96), tp.randn(96)), ["row"]),
    "gelu": (_gelu, lambda: (tp.randn(16, 96), tp.randn(96)), ["flat"]),
    "column_sum": (_colsum, lambda: (tp.randn(300, 70),), ["column"]),
    "chain": (_chain, lambda: (tp.randn(7, 33), tp.randn(7, 33)), ["flat"]),
    "chain_f64": (_chain, lambda: (tp.randn(5, 9, dtype=tp.float64), tp.randn(5, 9, dtype=tp.float64)), ["flat"]),
    "libm": (_libm, lambda: (tp.randn(6, 40),), ["flat"]),
}


def _graph(fn, *args):
    return _C._capture(fn, *args)


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_fused_kernel_per_plan(name):
    fn, make, forms = CASES[name]
    kernels = _C._stax_cuda_kernels(_graph(fn, *make()))
    assert [k[1] for k in kernels] == forms


def test_row_kernel_uses_block_reduction_and_vector_loads():
    src = _C._stax_cuda_source(_graph(_softmax, tp.randn(32, 128)))
    assert src.count('extern "C" __global__') == 1
    assert "tp_block_reduce" in src and "__shfl_xor_sync" in src
    # 128-bit loads with an alignment check and a lane-by-lane fallback.
    assert "reinterpret_cast<const float4*>" in src and "& 15) == 0" in src
    # A float32 sum accumulates in double.
    assert "double tp_acc" in src


def test_softmax_row_stays_in_registers():
    # 128 columns: 32 vector groups; x is read once per row into registers,
    # exp is kept there for the division (its side store to memory is dead).
    src = _C._stax_cuda_source(_graph(_softmax, tp.randn(32, 128)))
    assert "float4 tp_c" in src and "tp_c0[tp_kk]" in src
    # Only the final store: one vector store and its lane-by-lane fallback.
    assert src.count("reinterpret_cast<float4*>(out0") == 1 and src.count("out0[") == 4


@nvrtc
def test_autotuner_candidates_change_the_block_and_compile():
    g = _graph(_softmax, tp.randn(8, 2048))  # 512 vector groups: 128 threads by default
    assert [k[2] for k in _C._stax_cuda_kernels(g)] == [128]
    for block in (64, 256, 512):
        assert [k[2] for k in _C._stax_cuda_kernels(g, block)] == [block]
        src = _C._stax_cuda_source(g, block)
        assert f"__launch_bounds__({block})" in src
        assert tp.cuda._nvrtc_compile(src, "tuned", 90)[:4] == b"\x7fELF"
    # 32 threads would need 16 groups per thread: no register rows then.
    assert "tp_c0[tp_kk]" not in _C._stax_cuda_source(g, 32)


def test_flat_kernel_stores_vectors_and_has_a_scalar_tail():
    src = _C._stax_cuda_source(_graph(_chain, tp.randn(7, 33), tp.randn(7, 33)))
    assert "reinterpret_cast<float4*>" in src  # vector store
    # 33 columns: 8 groups of 4 and one scalar element per row.
    (name, form, bx, by, work), = _C._stax_cuda_kernels(_graph(_chain, tp.randn(7, 33), tp.randn(7, 33)))
    assert form == "flat" and work == 7 * (8 + 1)


def test_float64_uses_two_lane_vectors():
    src = _C._stax_cuda_source(_graph(_chain, tp.randn(4, 8, dtype=tp.float64), tp.randn(4, 8, dtype=tp.float64)))
    assert "double2" in src


def test_column_sum_is_coalesced_across_outputs():
    # Few outputs: 8 per block row (whole 32-byte sectors), 128 block rows.
    (name, form, bx, by, work), = _C._stax_cuda_kernels(_graph(_colsum, tp.randn(300, 70)))
    assert (form, bx, by, work) == ("column", 8, 128, 9)
    (name, form, bx, by, work), = _C._stax_cuda_kernels(_graph(_colsum, tp.randn(3, 8200)))
    assert (form, bx, by, work) == ("column", 32, 32, 257)


def test_row_invariant_operands_are_not_kept_in_registers():
    src = _C._stax_cuda_source(_graph(_layer_norm, tp.randn(16, 96), tp.randn(96), tp.randn(96)))
    assert src.count("float4 tp_c") == 1  # x only; the weight and bias are read where used


@nvrtc
@pytest.mark.parametrize("arch", [80, 90])
@pytest.mark.parametrize("name", sorted(CASES))
def test_printed_source_compiles_with_nvrtc(name, arch):
    fn, make, _ = CASES[name]
    src = _C._stax_cuda_source(_graph(fn, *make()))
    cubin = tp.cuda._nvrtc_compile(src, "stax_" + name, arch)
    assert len(cubin) > 0 and cubin[:4] == b"\x7fELF"


def test_scan_is_an_extern_call_of_the_eager_kernel():
    # The CUDA printer has no scan: cumsum runs its eager CUDA kernel
    # (cuda/scan_sort.cpp) between the generated kernels.
    g = _graph(lambda x: x.cumsum(-1) + 1, tp.randn(4, 4))
    assert _C._stax_cuda_externs(g) == ["cumsum"]
    assert "scan" not in _C._stax_cuda_source(g)


# ---------------------------------------------------------------- with a GPU


def _close(got, want, rtol=1e-5, atol=1e-5):
    got = got if isinstance(got, (tuple, list)) else [got]
    want = want if isinstance(want, (tuple, list)) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.device.type == "cuda" and tuple(g.shape) == tuple(w.shape) and g.dtype == w.dtype
        np.testing.assert_allclose(g.cpu().numpy(), w.numpy(), rtol=rtol, atol=atol)


@gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_compile_on_cuda_matches_eager(name):
    fn, make, _ = CASES[name]
    cpu = make()
    args = [a.to("cuda") for a in cpu]
    f = tp.compile(fn, strict_native=True)
    _close(f(*args), fn(*cpu))
    _close(f(*args), fn(*cpu))  # the compiled artifact, not the capture


@gpu
def test_large_rows_and_columns_match_eager():
    x = tp.randn(513, 2051)
    w = tp.randn(2051)
    f = tp.compile(_example_1_1, strict_native=True)
    _close(f(x.cuda(), w.cuda()), _example_1_1(x, w), rtol=1e-4, atol=1e-3)
    g = tp.compile(_colsum, strict_native=True)
    _close(g(x.cuda()), _colsum(x), rtol=1e-4, atol=1e-3)
    h = tp.compile(_softmax, strict_native=True)
    _close(h(x.cuda()), _softmax(x))


@gpu
@pytest.mark.parametrize("shape", [(40, 8200), (1000, 4100), (7, 3)])
def test_column_sums_of_every_block_width(shape):
    x = tp.randn(*shape)
    _close(tp.compile(_colsum, strict_native=True)(x.cuda()), _colsum(x), rtol=1e-5, atol=1e-4)


_TUNE_SCRIPT = r"""
import os, sys, numpy as np, tensorplay as tp, tensorplay.nn.functional as F
def ln(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b)
x, w, b = tp.randn(64, 1024), tp.randn(1024), tp.randn(1024)
want = ln(x, w, b).numpy()
for _ in range(2):  # the second compile reads the stored choice
    got = tp.compile(ln, strict_native=True)(x.cuda(), w.cuda(), b.cuda()).cpu().numpy()
    assert np.allclose(got, want, rtol=1e-5, atol=1e-4)
d = os.path.join(os.environ["TP_CACHE_DIR"], "cuda")
print(len([f for f in os.listdir(d) if f.endswith(".tune")]))
"""


@gpu
def test_autotuned_block_is_kept_on_disk(tmp_path):
    # A new process: the CUDA cache directory is opened once per process.
    import os
    import subprocess
    import sys
    env = dict(os.environ, TP_CACHE_DIR=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, "-c", _TUNE_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[-1] == "1"


@gpu
def test_misaligned_view_takes_the_scalar_path():
    # A view starting one float in: no 16-byte access is aligned.
    base = tp.randn(8, 65)
    x = base[:, 1:]
    f = tp.compile(lambda x: x * 3 - 1, strict_native=True)
    _close(f(base.cuda()[:, 1:]), x * 3 - 1)


@gpu
def test_same_function_on_cpu_and_cuda_keeps_two_artifacts():
    f = tp.compile(lambda x: (x * 2).sum(-1), strict_native=True)
    x = tp.randn(4, 16)
    np.testing.assert_allclose(f(x).numpy(), (x * 2).sum(-1).numpy(), rtol=1e-6)
    _close(f(x.cuda()), (x * 2).sum(-1))
    np.testing.assert_allclose(f(x).numpy(), (x * 2).sum(-1).numpy(), rtol=1e-6)


@gpu
def test_eager_cuda_operators_generated_by_stax():
    x = tp.randn(6, 50)
    _close(F.softmax(x.cuda(), -1), F.softmax(x, -1))
    _close(x.cuda().amax(0), x.amax(0))
    _close(F.layer_norm(x.cuda(), (50,)), F.layer_norm(x, (50,)), atol=1e-4)
    assert _C._cuda.generated_op_count() >= 3


@gpu
def test_operator_without_cuda_path_is_named():
    f = tp.compile(lambda a, b: a @ b, strict_native=True)
    with pytest.raises(NotImplementedError, match="matmul"):
        f(tp.ones(4, 4, dtype=tp.int64).cuda(), tp.ones(4, 4, dtype=tp.int64).cuda())  # float: cuBLASLt


@gpu
def test_scan_in_a_region_runs_the_cuda_scan_kernel():
    # cumsum inside a compiled CUDA region is an extern call of the eager CUDA
    # scan, the rest of the region generated (strict_native: no eager fallback).
    x = tp.randn(4, 8)
    got = tp.compile(lambda x: x.cumsum(-1) * 2, strict_native=True)(x.cuda())
    _close(got, x.cumsum(-1) * 2)


@gpu
def test_in_place_write_to_a_cuda_input():
    def f(x):
        x.mul_(2)
        return x + 1

    x = tp.randn(5, 8)
    xc = x.cuda()
    out = tp.compile(f, strict_native=True)(xc)
    _close(out, x * 2 + 1)
    _close(xc, x * 2)  # the side effect happened exactly once
