"""The measurement harness: its statistics (pure Python, exact values) and one
end-to-end run of `python -m tensorplay.bench --quick --json`."""

import json
import math
import os
import subprocess
import sys

import pytest

from tensorplay.bench import stats
from tensorplay.bench.cases import EXAMPLE_1_1, SOFTMAX

# ------------------------------------------------------------------ statistics


def test_order_statistics_are_one_based():
    xs = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert [stats.order_statistic(xs, k) for k in range(1, 6)] == [1.0, 2.0, 3.0, 4.0, 5.0]
    with pytest.raises(ValueError):
        stats.order_statistic(xs, 0)
    with pytest.raises(ValueError):
        stats.order_statistic(xs, 6)


def test_median_odd_and_even():
    assert stats.median([3.0, 1.0, 2.0]) == 2.0
    assert stats.median([4.0, 1.0, 3.0, 2.0]) == 2.5


def test_interval_ranks_for_15_readings_are_4_and_12():
    j, k, coverage = stats.median_interval_ranks(15)
    assert (j, k) == (4, 12)
    # sum_{i=4}^{11} C(15, i) / 2^15 = 31616 / 32768
    assert coverage == pytest.approx(31616 / 32768, abs=1e-12)
    assert coverage == pytest.approx(0.965, abs=5e-4)


def test_interval_coverage_formula():
    assert stats.interval_coverage(15, 4, 12) == pytest.approx(sum(math.comb(15, i) for i in range(4, 12)) / 2**15)
    assert stats.interval_coverage(6, 1, 6) == pytest.approx(62 / 64)


def test_small_samples_fall_back_to_full_range_with_honest_coverage():
    j, k, coverage = stats.median_interval_ranks(5)
    assert (j, k) == (1, 5)
    assert coverage == pytest.approx(30 / 32)


def test_timing_median_interval_and_minimum_in_ms():
    readings_ms = [9, 3, 15, 1, 12, 7, 5, 14, 2, 11, 8, 6, 13, 4, 10]
    t = stats.Timing([r / 1e3 for r in readings_ms])
    assert t.n == 15
    assert t.median == pytest.approx(8.0)
    assert t.lo == pytest.approx(4.0)
    assert t.hi == pytest.approx(12.0)
    assert t.min == pytest.approx(1.0)
    assert t.fmt() == "8.00 ms [4.00, 12.00]"
    assert t.fmt("us", 0) == "8000 us [4000, 12000]"


def test_timing_to_dict_keeps_readings_and_ranks():
    t = stats.Timing([0.001 * (i + 1) for i in range(15)])
    d = t.to_dict()
    assert d["median"] == pytest.approx(8.0)
    assert d["interval_ranks"] == [4, 12]
    assert len(d["readings"]) == 15


def test_time_fn_calls_warmup_plus_runs():
    calls = []
    t = stats.time_fn(lambda: calls.append(1), runs=15, warmup=3)
    assert len(calls) == 18
    assert t.n == 15
    assert all(r >= 0 for r in t.readings_s)


def test_alternate_interleaves_a_and_b():
    order = []
    ta, tb = stats.alternate(lambda: order.append("A"), lambda: order.append("B"), runs=15, warmup=3)
    assert order == ["A", "B"] * 18
    assert ta.n == tb.n == 15


def test_time_fn_measures_real_time():
    import time

    t = stats.time_fn(lambda: time.sleep(0.002), runs=5, warmup=1)
    assert t.min >= 2.0  # ms
    assert t.median < 200.0


def test_calls_per_reading_gives_per_call_time():
    n = []
    t = stats.time_fn(lambda: n.append(1), runs=3, warmup=0, calls=100)
    assert len(n) == 300
    assert t.calls_per_reading == 100


def test_paired_ratio_interval():
    a = stats.Timing([0.002 * (i + 1) for i in range(15)])
    b = stats.Timing([0.001 * (i + 1) for i in range(15)])
    med, lo, hi = stats.ratio_interval(a, b)
    assert med == pytest.approx(2.0) and lo == pytest.approx(2.0) and hi == pytest.approx(2.0)


# ------------------------------------------------------------------ byte model


def test_example_1_1_byte_model():
    r, c = 8192, 2048
    n = r * c
    assert EXAMPLE_1_1.eager_traffic(r, c, 4).bytes == 4 * (8 * n + n // 2048)
    assert EXAMPLE_1_1.compiled_traffic(r, c, 4).bytes == 4 * (2 * n + n // 2048)
    rho = EXAMPLE_1_1.eager_traffic(r, c, 4).bytes / EXAMPLE_1_1.compiled_traffic(r, c, 4).bytes
    assert 3.99 < rho < 4.0


def test_softmax_byte_model_counts_row_terms():
    r, c = 16384, 1000
    n = r * c
    # amax r N w R; sub r N+R w N; exp r N w N; sum r N w R; div r N+R w N
    assert SOFTMAX.eager_traffic(r, c, 4).bytes == 4 * (8 * n + 4 * r)
    assert SOFTMAX.compiled_traffic(r, c, 4).bytes == 4 * (2 * n)


# ------------------------------------------------------------------ end to end


@pytest.mark.slow
def test_bench_quick_writes_json(tmp_path):
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [sys.executable, "-m", "tensorplay.bench", "--quick", "--json", str(out)],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["suite"] == "default" and doc["quick"] is True
    assert "errors" not in doc, doc.get("errors")

    assert doc["bandwidth"]["B_GBps"] > 0
    assert doc["bandwidth"]["numpy_GBps"] > 0

    for key, case in (("example_1_1", EXAMPLE_1_1), ("softmax", SOFTMAX)):
        f = doc["fusion"][key]
        r, c = f["shape"]
        assert f["rho"] == pytest.approx(case.eager_traffic(r, c, 4).bytes / case.compiled_traffic(r, c, 4).bytes)
        assert f["S"] == pytest.approx(f["eager"]["median"] / f["compiled"]["median"])
        assert f["S"] == pytest.approx(f["rho"] * f["beta_c_GBps"] / f["beta_e_GBps"], rel=1e-9)
        assert f["eager"]["lo"] <= f["eager"]["median"] <= f["eager"]["hi"]
        assert f["agreement"]["ok"] is True, f["agreement"]

    small = doc["cold_compile"]["example_1_1_small"]
    assert small["cold"]["median_s"] > 0 and small["warm"]["median_s"] > 0
    assert small["warm_metrics"]["cache_hits"] >= 1
    assert small["warm_metrics"]["cache_misses"] == 0
    assert small["cold_metrics"]["cache_misses"] >= 1
    assert doc["cold_compile"]["example_1_1_full"]["cold_s"] > 0
    assert doc["cold_compile"]["softmax_full"]["cold_s"] > 0

    ov = doc["call_overhead"]
    for k in ("eager", "compiled_same_tensor", "compiled_new_tensor"):
        assert ov[k]["unit"] == "us" and ov[k]["median"] > 0

    assert "ms [" in proc.stdout  # the printed report has median [interval] figures


@pytest.mark.slow
def test_bench_eager_suite_quick_covers_every_listed_case(tmp_path):
    out = tmp_path / "eager.json"
    proc = subprocess.run(
        [sys.executable, "-m", "tensorplay.bench", "--suite", "eager", "--quick", "--json", str(out)],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())["eager"]
    from tensorplay.bench.eager import BINARY, UNARY

    kernels = doc["kernels"]
    for name in UNARY + BINARY + ["sum(dim=-1)", "sum(dim=0)", "amax(dim=0)", "mean(dim=-1)", "softmax(dim=-1)",
                                 "layer_norm(last dim)"]:
        assert name in kernels and "error" not in kernels[name], (name, kernels.get(name))
        assert kernels[name]["tensorplay"]["median"] > 0
        if doc["torch_version"]:  # side by side: paired ratio with its interval
            lo, hi = kernels[name]["ratio_interval"]
            assert lo <= kernels[name]["ratio"] <= hi
    assert all("error" not in v for v in doc["overhead"].values()), doc["overhead"]


@pytest.mark.parametrize("case", ["example_5_1", "mlp", "transformer_block"])
def test_training_suite_steps_are_native_and_agree_with_eager(case, monkeypatch):
    # The harness of `--suite training` without torch (torch.compile's first
    # compile takes seconds): the compiled step runs natively, its loss and
    # gradients equal eager's, and the report carries the figures.
    import io

    from tensorplay.bench import training
    from tensorplay.bench.report import Report

    monkeypatch.setattr(training, "_torch", lambda: None)
    key, title, factory = next(c for c in training.CASES if c[0] == case)
    out = io.StringIO()
    r = training.run_case(key, title, factory, Report(out), quick=True)
    assert r["fallback_count"] == 0 and r["generated_kernels"] > 0
    assert r["loss_diff"] < 1e-5 and r["grad_max_rel_diff"] < 1e-4
    assert r["saved_bytes"] > 0
    assert "tp.compile / tp eager" in out.getvalue()
    # The full step with the optimizer's update, compiled natively too.
    assert r["full_step_fallbacks"] == 0
    assert set(r["full_step_times"]) == {"tp eager", "tp.compile", "tp.compile(whole step)"}
    assert "whole step in one tp.compile / tp eager" in out.getvalue()
    assert "full step: tp.compile / tp eager" in out.getvalue()
    # The GEMM floor: the step's GEMMs alone against the eager step.
    assert 0 < r["gemm_share_of_tp_eager"][0] < 5
    assert "GEMM share of the tp eager step" in out.getvalue()


def test_training_suite_reports_the_blas_kernel_set_and_thread_environment(monkeypatch):
    # The GEMM time (most of every training step) depends on the kernel set
    # OpenBLAS runs and on OPENBLAS_CORETYPE, which can pin one: the suite
    # reports both, read from the library tensorplay loaded.
    import io

    from tensorplay.bench import training
    from tensorplay.bench.report import Report

    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")
    env = training.blas_environment()
    assert env["env"]["OMP_WAIT_POLICY"] == "passive"
    pytest.importorskip("scipy_openblas32")
    assert isinstance(env["blas_core"], str) and env["blas_core"]
    out = io.StringIO()
    monkeypatch.setattr(training, "CASES", [])
    from tensorplay.bench.suites import SUITES, Options
    r = SUITES["training"](Report(out), Options(quick=True, keep_cache=False))  # what --suite training runs
    assert r["blas"]["blas_core"] == env["blas_core"]
    assert f"OpenBLAS kernel set                {env['blas_core']}" in out.getvalue()
    # and PyTorch runs on TensorPlay's thread count (--threads governs both)
    torch = pytest.importorskip("torch")
    import tensorplay as tp
    assert torch.get_num_threads() == tp.get_num_threads()
