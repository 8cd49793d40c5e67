"""tp.compiler.explain: kernels with their fused operators, model bytes and flops
checked against hand-computed counts (Example 1.1, softmax), the roofline
prediction, the fallback reason, TP_LOGS=explain, and the progress line of a
slow compile."""

import re
import math
import os
import subprocess
import sys

import pytest

import tensorplay as tp
from tensorplay.bench.cases import EXAMPLE_1_1, SOFTMAX

MACHINE = {"B": 10e9, "P": 50e9}  # fixed, so no test measures the machine


def test_example_1_1_bytes_and_flops():
    rows, cols = 64, 256
    f = EXAMPLE_1_1.make_fn()
    x, w = tp.randn(rows, cols), tp.randn(rows, cols)
    ex = tp.compiler.explain(f, x, w, machine=MACHINE, runs=3, verbose=False)
    (region,) = ex.regions
    assert region.fallback_reason == ""
    (k,) = region.kernels  # add, relu, mul and sum fused into one kernel
    assert [op.strip() for op in k.origin.split(",")] == ["add", "relu", "mul", "sum"]
    # Reads x and w once, writes one float per row (Section 1.1's compiled traffic).
    assert k.bytes_read == 2 * rows * cols * 4
    assert k.bytes_written == rows * 4
    assert k.bytes == EXAMPLE_1_1.compiled_traffic(rows, cols, 4).bytes
    # add, relu, mul per element and one accumulation step per summed element.
    assert k.flops == 4 * rows * cols
    t_mem, t_cmp = k.bytes / MACHINE["B"], k.flops / MACHINE["P"]
    assert k.predicted_s == pytest.approx(max(t_mem, t_cmp))
    assert k.bound == ("memory" if t_mem >= t_cmp else "compute")
    assert region.measured_s > 0
    assert region.beta == pytest.approx(k.bytes / region.measured_s)


def test_softmax_bytes():
    rows, cols = 32, 200
    x = tp.randn(rows, cols)
    ex = tp.compiler.explain(SOFTMAX.make_fn(), x, machine=MACHINE, runs=3, verbose=False)
    (k,) = ex.regions[0].kernels
    for op in ("amax", "exp", "sum", "div"):
        assert op in k.origin
    # x read once, the result written once; the row max and sum stay in registers.
    assert k.bytes_read == rows * cols * 4
    assert k.bytes_written == rows * cols * 4
    assert k.bytes == SOFTMAX.compiled_traffic(rows, cols, 4).bytes


def test_softmax_unfused_counts_every_kernel_and_says_why():
    rows, cols = 32, 200
    x = tp.randn(rows, cols)
    ex = tp.compiler.explain(SOFTMAX.make_fn(), x, machine=MACHINE, runs=2, verbose=False,
                             options={"stax_fusion": False})
    r = ex.regions[0]
    assert [k.origin for k in r.kernels] == ["amax", "sub, exp, sum", "sub, exp, div"]
    n = rows * cols * 4
    assert [(k.bytes_read, k.bytes_written) for k in r.kernels] == [
        (n, rows * 4),            # amax: x -> row max
        (n + rows * 4, rows * 4),  # sum of exp(x - max): x and the max -> row sum
        (n + 2 * rows * 4, n),    # exp(x - max) / sum: x, max and sum -> result
    ]
    assert len(r.not_fused) == 2 and all("stax_fusion" in why for why in r.not_fused)
    assert r.predicted_s == pytest.approx(sum(k.predicted_s for k in r.kernels))


def test_fallback_reason_is_reported():
    a, b = tp.randn(3, 4), tp.randn(4, 5)
    ex = tp.compiler.explain(lambda a, b: (a @ b).relu() + tp.nonzero(a > 0).float().sum(), a, b, machine=MACHINE,
                             runs=2, verbose=False)
    r = ex.regions[0]
    assert r.kernels == []
    assert "nonzero" in r.fallback_reason
    assert "runs eagerly" in ex.text() and "nonzero" in ex.text()


def test_text_lists_kernels_prediction_and_beta(capsys):
    x = tp.randn(16, 64)
    tp.compiler.explain(lambda x: (x * 2).sum(-1), x, machine=MACHINE, runs=2)
    out = capsys.readouterr().out
    assert "fused_mul_sum_0: mul, sum" in out
    assert "reads 4096 B, writes 64 B, 2048 flops" in out
    assert "beta/B" in out and "predicted" in out and "measured" in out


def test_machine_capability_is_measured():
    from tensorplay.explain import machine_capability

    cap = machine_capability(quick=True)
    assert cap["B"] > 1e8 and cap["P"] > 1e8 and math.isfinite(cap["B"])


def test_tp_logs_explain(tmp_path):
    code = ("import tensorplay as tp\n"
            "f = tp.compile(lambda x: (x + 1).sum(-1))\n"
            "f(tp.randn(4, 8))\n"
            "g = tp.compile(lambda a: tp.nonzero(a > 0).float() * 2, options={'warn_fallback': False})\n"
            "g(tp.randn(2, 2))\n")
    env = dict(os.environ, TP_LOGS="explain", TP_CACHE_DIR=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert re.search(r"\[tp.compile\] explain: region '.*' with 1 kernel\(s\)", p.stderr), p.stderr
    assert "fused_add_sum_0: add, sum; reads 128 B, writes 16 B, 64 flops" in p.stderr
    assert re.search(r"\[tp.compile\] explain: region '.*' not compiled: .*nonzero", p.stderr), p.stderr


def test_progress_line_for_a_slow_compile(capfd):
    # progress_after_s=0: every compile counts as slow, so the line must appear.
    f = tp.compile(lambda x: (x * 3).exp().sum(-1), options={"progress_after_s": 0})
    f(tp.randn(4, 8))
    err = capfd.readouterr().err
    assert "tp.compile: compiling region with 1 kernel..." in err
    assert "done in" in err


def test_no_progress_line_below_the_threshold(capfd):
    f = tp.compile(lambda x: x * 3, options={"progress_after_s": 600})
    f(tp.randn(4, 8))
    assert "tp.compile: compiling region" not in capfd.readouterr().err


def test_progress_after_s_must_be_a_number():
    f = tp.compile(lambda x: x * 3, options={"progress_after_s": "soon"})
    with pytest.raises(ValueError, match="progress_after_s"):
        f(tp.randn(4, 8))
