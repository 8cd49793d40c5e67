"""Suites: named lists of measurements.  A suite is a function
(report, options) -> results dict; add one by decorating it with @suite("name").
Each measurement runs on its own: one that fails is reported (and recorded under
"errors") and the others still run."""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import Callable, Dict

import tensorplay as tp

from . import codegen, coldstart, dynamic, eager, fusion, gpu, machine, overhead, stax_core, training
from .cases import FUSION_CASES
from .report import Report

SUITES: Dict[str, Callable[["Report", "Options"], dict]] = {}


@dataclass
class Options:
    quick: bool = False
    keep_cache: bool = False


def suite(name: str):
    def register(fn):
        SUITES[name] = fn
        return fn

    return register


class _Step:
    """Runs one measurement, storing its result (or its error) under `key`."""

    def __init__(self, report: Report, results: dict):
        self.report = report
        self.results = results

    def __call__(self, key: str, fn: Callable[[], dict]):
        t0 = time.perf_counter()
        try:
            value = fn()
        except Exception as exc:  # report it, keep measuring the rest
            self.report.error(key, exc)
            self.results.setdefault("errors", {})[key] = f"{type(exc).__name__}: {exc}"
            self.results.setdefault("tracebacks", {})[key] = traceback.format_exc()
            return None
        finally:
            self.results.setdefault("step_seconds", {})[key] = time.perf_counter() - t0
        _set_path(self.results, key, value)
        return value


def _set_path(d: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for p in parents:
        d = d.setdefault(p, {})
    d[last] = value


@suite("default")
def default_suite(report: Report, opts: Options) -> dict:
    results: dict = {}
    step = _Step(report, results)

    bw = step("bandwidth", lambda: machine.measure_bandwidth(report, opts.quick))
    B = bw["B_GBps"] * 1e9 if bw else 0.0

    for i, case in enumerate(FUSION_CASES):
        number = "2" + "abcdefgh"[i]
        step(f"fusion.{case.key}", lambda case=case, number=number: fusion.run_case(case, report, opts.quick, B, number))

    dirs = coldstart.CacheDirs(keep=opts.keep_cache)
    try:
        step("cold_compile.example_1_1_small", lambda: coldstart.measure_small(report, opts.quick, dirs))
        for i, case in enumerate(FUSION_CASES):
            number = "3" + "bcdefgh"[i]
            step(
                f"cold_compile.{case.key}_full",
                lambda case=case, number=number: coldstart.measure_full(case, report, opts.quick, dirs, number),
            )
    finally:
        dirs.cleanup(report)

    step("call_overhead", lambda: overhead.measure(report, opts.quick))
    return results


@suite("eager")
def eager_suite(report: Report, opts: Options) -> dict:
    """TensorPlay eager against PyTorch eager (issue 3): kernels and per-op overhead."""
    results: dict = {}
    step = _Step(report, results)
    step("eager", lambda: eager.measure(report, opts.quick, tp.get_num_threads()))
    return results


@suite("codegen")
def codegen_suite(report: Report, opts: Options) -> dict:
    """Generated source size and cold compile time where values are used twice."""
    results: dict = {}
    step = _Step(report, results)
    step("codegen", lambda: codegen.measure(report, opts.quick))
    return results


@suite("stax")
def stax_suite(report: Report, opts: Options) -> dict:
    """The Stax core's figures: column-sum accuracy, GEMM regions, int32 and bfloat16 regions, source growth."""
    results: dict = {}
    step = _Step(report, results)
    step("column_sum", lambda: stax_core.column_sum(report, opts.quick))
    step("gemm_regions", lambda: stax_core.gemm_regions(report, opts.quick))
    step("int32_regions", lambda: stax_core.int32_regions(report, opts.quick))
    step("bf16_regions", lambda: stax_core.bf16_regions(report, opts.quick))
    step("growth", lambda: codegen.measure(report, opts.quick))
    return results


@suite("training")
def training_suite(report: Report, opts: Options) -> dict:
    """Training steps (Example 5.1, MLP, transformer block): tp.compile vs torch.compile vs eager."""
    results: dict = {"blas": training.prepare(report)}
    step = _Step(report, results)
    for key, title, factory in training.CASES:
        step(key, lambda key=key, title=title, factory=factory: training.run_case(key, title, factory, report,
                                                                                  opts.quick))
    return results


@suite("gpu")
def gpu_suite(report: Report, options: Options) -> dict:
    """Generated CUDA kernels vs eager PyTorch and torch.compile (bench/gpu.py);
    without a GPU it reports that and measures nothing."""
    results: dict = {}
    gpu.run(report, _Step(report, results), options.quick)
    return results


@suite("dynamic")
def dynamic_suite(report: Report, opts: Options) -> dict:
    """Dynamic shapes: versions per batch-size sweep, symbolic per-call overhead, cold compile (aot_eager
    and Stax), symbolic vs static kernel time, a transformer block over 16 sequence lengths, MLP and
    CNN training steps over 16 batch sizes, a KV-cache decode step with an int position (automatic
    dynamic ints)."""
    results: dict = {}
    step = _Step(report, results)
    step("compilations", lambda: dynamic.compilations(report, opts.quick))
    step("overhead", lambda: dynamic.overhead(report, opts.quick))
    step("cold_compile", lambda: dynamic.cold_compile(report, opts.quick))
    step("kernel_time", lambda: dynamic.kernel_time(report, opts.quick))
    step("cold_compile_stax", lambda: dynamic.cold_compile_stax(report, opts.quick))
    step("transformer_block", lambda: dynamic.transformer_block(report, opts.quick))
    step("training_step", lambda: dynamic.training_step(report, opts.quick))
    step("cnn_training_step", lambda: dynamic.cnn_training_step(report, opts.quick))
    step("decode_step_int_pos", lambda: dynamic.decode_step(report, opts.quick))
    return results
