"""Launch-configuration autotuning of CUDA regions (Section 9.6, issue 12
item 5). tp.compile(mode="max-autotune") searches every launch knob the
region's printed kernels have (csrc/stax/backend/cuda_launch_space.h) with
coordinate descent plus random points (launch_search.h, unit-tested in
tests/cpp/stax/test_launch_search.cpp), timing candidates with CUDA events; the
winner is stored by default source + device name + search. Without a GPU:
the mode reaches the CUDA region options, the spaces hold only real knobs,
the default point prints exactly the default path's source, and every variant
the search could print compiles with NVRTC. With a GPU: results equal the
default's, and a warm process reads the stored winner instead of searching."""
import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import _C

sys.path.insert(0, os.path.dirname(__file__))
from test_stax_cuda import CASES  # noqa: E402  (the nine CUDA cases)

nvrtc = pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed (pip install nvidia-cuda-nvrtc)")
gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")


def _two_reductions(x):  # one row, two reductions: a plain (not split, not register) row kernel
    return (x - x.mean()).abs().sum()


# Forms the nine cases lack: split reductions, plain rows, 16-bit columns.
EXTRA = {
    "sum_all": (lambda x: x.sum(), lambda: (tp.randn(1 << 20),)),
    "mean_all": (lambda x: x.mean(), lambda: (tp.randn(1000, 1000),)),
    "two_reductions": (_two_reductions, lambda: (tp.randn(64, 50),)),
    "long_rows": (lambda x: x.sum(-1), lambda: (tp.randn(4, 100000),)),
    "column_sum_bf16": (lambda x: x.sum(0), lambda: (tp.randn(300, 70).to(tp.bfloat16),)),
}
ALL = {**{k: (v[0], v[1]) for k, v in CASES.items()}, **EXTRA}

# The knobs of each form (cuda_launch_space.h).
FORM_KNOBS = {
    "flat": {"flat_block", "flat_blocks_per_sm"},
    "register_row": {"row_block", "rows_per_block"},
    "column": {"column_width", "column_threads"},
    "split": {"split_blocks", "split_threads"},
}
# Knobs chosen on the host: they never change the printed source.
GRID_KNOBS = {"flat_blocks_per_sm", "rows_per_block"}


def _graph(name):
    fn, make = ALL[name]
    return _C._capture(fn, *make())


def _space(g):
    return {name: (values, default) for name, values, default in _C._stax_cuda_search_space(g)}


def _points(space):
    """Every point of the space (they are small: one or two forms a region)."""
    names = sorted(space)
    for values in itertools.product(*(space[n][0] for n in names)):
        yield dict(zip(names, values))


# ---------------------------------------------------------------- without a GPU


@pytest.mark.parametrize("mode,want", [
    (None, "default"), ("default", "default"), ("reduce-overhead", "default"),
    ("max-autotune", "max-autotune"), ("max-autotune-no-cudagraphs", "max-autotune"),
])
def test_modes_reach_the_cuda_region_options(mode, want, monkeypatch):
    monkeypatch.delenv("TP_CUDA_AUTOTUNE", raising=False)
    assert _C._stax_cuda_tuning(mode or "") == want
    monkeypatch.setenv("TP_CUDA_AUTOTUNE", "0")  # the switch still turns every form off
    assert _C._stax_cuda_tuning(mode or "") == "off"


def test_max_autotune_on_cpu_tensors_is_unchanged():
    # The mode only widens CUDA tuning: a CPU region compiles and computes as before.
    x = tp.randn(16, 96)
    f = tp.compile(CASES["softmax"][0], mode="max-autotune", strict_native=True)
    np.testing.assert_allclose(f(x).numpy(), CASES["softmax"][0](x).numpy(), rtol=1e-5, atol=1e-6)


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="unknown mode 'max-autotuned'"):
        tp.compile(lambda x: x + 1, mode="max-autotuned")


@pytest.mark.parametrize("name", sorted(ALL))
def test_space_holds_only_the_knobs_of_the_regions_forms(name):
    g = _graph(name)
    space = _space(g)
    kernels = _C._stax_cuda_variant(g, {})[1]
    want = set()
    for _, form, bx, by, work, scratch in kernels:
        if form == "flat":
            want |= FORM_KNOBS["flat"]
        elif form == "column":
            want |= FORM_KNOBS["column"]
        elif scratch > 0:
            want |= FORM_KNOBS["split"]
        elif "tp_c0[tp_kk]" in _C._stax_cuda_source(g):  # register rows
            want |= FORM_KNOBS["register_row"] if work > 1 else {"row_block"}
        else:
            want |= {"row_threads"} | ({"rows_per_block"} if work > 1 else set())
    assert set(space) == want
    for values, default in space.values():
        assert default in values and len(set(values)) == len(values) >= 3


@pytest.mark.parametrize("name", sorted(ALL))
def test_default_point_prints_the_default_source(name):
    # The default point of the search is the default path's region: the same
    # source byte for byte, the same launches, the host's own grids.
    g = _graph(name)
    src, kernels, grid, point = _C._stax_cuda_variant(g, {})
    assert src == _C._stax_cuda_source(g)
    assert [k[:5] for k in kernels] == [tuple(k) for k in _C._stax_cuda_kernels(g)]
    assert grid == {"flat_blocks_per_sm": 8, "rows_per_block": 1}
    space = _space(g)
    assert point == " ".join(f"{n}={space[n][1]}" for n, _, _ in _C._stax_cuda_search_space(g))
    # Naming each default explicitly changes nothing.
    assert _C._stax_cuda_variant(g, {n: d for n, (_, d) in space.items()})[0] == src


def test_knobs_reach_the_kernels():
    g = _graph("gelu")
    _, kernels, grid, _ = _C._stax_cuda_variant(g, {"flat_block": 512, "flat_blocks_per_sm": 16})
    assert [k[2] for k in kernels] == [512] and grid["flat_blocks_per_sm"] == 16

    g = _graph("column_sum")  # 70 outputs: 8 a block row by default
    _, kernels, _, _ = _C._stax_cuda_variant(g, {"column_width": 32, "column_threads": 256})
    (_, form, bx, by, work, _), = kernels
    assert (form, bx, by, work) == ("column", 32, 8, 3)
    g = _graph("column_sum_bf16")  # two outputs a thread
    (_, form, bx, by, work, _), = _C._stax_cuda_variant(g, {"column_width": 64})[1]
    assert (form, bx, by, work) == ("column", 32, 32, 2)

    g = _graph("sum_all")
    src0, (k0,), _, _ = _C._stax_cuda_variant(g, {})
    src, (k,), _, _ = _C._stax_cuda_variant(g, {"split_blocks": 256})
    assert k[4] == 256 and k[5] == k0[5] + (256 - k0[4]) * 8  # one double partial per block
    assert src == src0  # the split factor is a launch choice: the kernel reads gridDim.x
    src, (k,), _, _ = _C._stax_cuda_variant(g, {"split_threads": 1024})
    assert k[2] == 1024 and "__launch_bounds__(1024)" in src

    g = _C._capture(CASES["softmax"][0], tp.randn(8, 2048))  # 512 groups: 128 threads by default
    src, kernels, grid, _ = _C._stax_cuda_variant(g, {"row_block": 256, "rows_per_block": 4})
    assert [k[2] for k in kernels] == [256] and grid["rows_per_block"] == 4
    assert src == _C._stax_cuda_source(g, 256)  # the first form's candidate, printed alike

    g = _graph("two_reductions")
    (_, form, bx, _, work, scratch), = _C._stax_cuda_variant(g, {"row_threads": 256})[1]
    assert (form, bx, work, scratch) == ("row", 256, 1, 0)


def test_values_outside_the_space_are_refused():
    g = _graph("gelu")
    with pytest.raises(ValueError, match="flat_block = 100 is not one of its candidates"):
        _C._stax_cuda_variant(g, {"flat_block": 100})
    with pytest.raises(ValueError, match="no parameter 'row_block'"):
        _C._stax_cuda_variant(g, {"row_block": 128})


@nvrtc
@pytest.mark.parametrize("name", sorted(ALL))
def test_every_variant_the_search_can_print_compiles_with_nvrtc(name):
    g = _graph(name)
    space = _space(g)
    sources = {}
    for point in _points(space):
        src, kernels, _, _ = _C._stax_cuda_variant(g, point)
        for _, _, bx, by, _, _ in kernels:
            assert f"__launch_bounds__({bx * by})" in src
        sources.setdefault(src, point)
    # Host-side knobs never change the source: the distinct sources are the
    # product of the printer's knobs at most.
    printer = [n for n in space if n not in GRID_KNOBS]
    assert 1 <= len(sources) <= int(np.prod([len(space[n][0]) for n in printer]))
    for src, point in sources.items():
        cubin = tp.cuda._nvrtc_compile(src, "stax_" + name, 90)
        assert cubin[:4] == b"\x7fELF", point


# ---------------------------------------------------------------- with a GPU


def _close(got, want, rtol, atol):
    got = got if isinstance(got, (tuple, list)) else [got]
    want = want if isinstance(want, (tuple, list)) else [want]
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.device.type == "cuda" and tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype
        np.testing.assert_allclose(a.cpu().to(tp.float64).numpy(), b.cpu().to(tp.float64).numpy(), rtol=rtol, atol=atol)


@gpu
@pytest.mark.parametrize("name", sorted(ALL))
def test_max_autotune_results_equal_the_defaults(name):
    fn, make = ALL[name]
    cpu = make()
    args = [a.to("cuda") for a in cpu]
    before = _C._stax_cuda_tuning_stats()
    tuned = tp.compile(fn, mode="max-autotune", strict_native=True)(*args)
    after = _C._stax_cuda_tuning_stats()
    # The region was searched here or built from a winner stored by an earlier run.
    assert after["searches"] + after["cache_loads"] > before["searches"] + before["cache_loads"]
    default = tp.compile(fn, strict_native=True)(*args)
    # Another block size or split factor only reorders sums.
    half = cpu[0].dtype in (tp.bfloat16, tp.float16)
    _close(tuned, default, rtol=2e-2 if half else 1e-5, atol=2e-2 if half else 1e-4)
    _close(tuned, fn(*args), rtol=2e-2 if half else 1e-5, atol=2e-2 if half else 1e-4)


_WARM_SCRIPT = r"""
import json, sys, numpy as np, tensorplay as tp
from tensorplay import _C
def softmax(x):
    m = x.amax(-1, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(-1, keepdim=True)
tp.manual_seed(0)
x = tp.randn(256, 4096).cuda()
y = tp.compile(softmax, mode=sys.argv[1], strict_native=True, options={"progress_after_s": 0})(x)
print(json.dumps({"stats": _C._stax_cuda_tuning_stats(), "y": float(y.to(tp.float64).sum()), "y00": float(y[0, 0])}))
"""


@gpu
def test_a_warm_process_reads_the_stored_winner(tmp_path):
    env = dict(os.environ, TP_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("TP_CUDA_AUTOTUNE", None)

    def run(mode):
        p = subprocess.run([sys.executable, "-c", _WARM_SCRIPT, mode], env=env, capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0, p.stderr
        import json
        return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr

    cold, cold_err = run("max-autotune")
    assert cold["stats"]["searches"] == 1 and cold["stats"]["cache_loads"] == 0
    assert cold["stats"]["evaluations"] >= 2
    # progress_after_s = 0: the progress line is printed at once (normally only after a second).
    assert "tuning the launch configuration of a CUDA region (max-autotune" in cold_err
    tunes = sorted(f for f in os.listdir(tmp_path / "cache" / "cuda") if f.endswith(".tune"))
    assert len(tunes) == 1

    warm, warm_err = run("max-autotune")
    assert warm["stats"]["searches"] == 0 and warm["stats"]["cache_loads"] == 1
    assert "tuning the launch configuration" not in warm_err
    assert warm["y00"] == cold["y00"] and abs(warm["y"] - cold["y"]) <= 1e-9 * abs(cold["y"]) + 1e-9

    # The other max-autotune mode searches the same space: it reads the same entry.
    other, _ = run("max-autotune-no-cudagraphs")
    assert other["stats"]["searches"] == 0 and other["stats"]["cache_loads"] == 1
    # The default mode keeps its own (first form) entry beside it.
    default, _ = run("default")
    assert default["stats"]["searches"] == 0 and default["stats"]["cache_loads"] == 0
    assert len([f for f in os.listdir(tmp_path / "cache" / "cuda") if f.endswith(".tune")]) == 2
