"""TP_LOGS=region_times splits a compiled region's time into its generated
kernels, by name, and its extern calls, by operator (the profiler cannot name
generated kernels: they live in anonymous mappings)."""
import os
import subprocess
import sys
import textwrap

import tensorplay as tp

CHILD = textwrap.dedent("""
    import tensorplay as tp
    a, w = tp.randn(64, 32), tp.randn(32, 16)
    f = tp.compile(lambda a, w: (a @ w).relu().sum(0))
    g = tp.compile(lambda a: (a * 2).exp().sum())
    for _ in range(3):
        f(a, w)
        g(a)
    print(tp.compiler.region_times())
    print("END")
""")


def _run(logs):
    env = dict(os.environ)
    env.pop("TP_LOGS", None)
    if logs:
        env["TP_LOGS"] = logs
    return subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300, env=env)


def test_region_times_names_the_extern_gemm_and_counts_calls():
    out = _run("region_times")
    assert out.returncode == 0, out.stderr
    text = out.stdout.split("END")[0]
    assert "region #1: 3 calls" in text and "region #2: 3 calls" in text, text
    assert "extern 0: matmul" in text or "extern 0: mm" in text, text
    assert "kernel fused_" in text or "kernel " in text, text
    # printed again at exit
    assert "region_times (mean ms per call)" in out.stderr


def test_region_times_is_silent_and_empty_without_the_log():
    out = _run("")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "END"
    assert "region_times" not in out.stderr
    assert tp.compiler.region_times() == "" or "TP_LOGS" in os.environ
