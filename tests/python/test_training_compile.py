"""Compiling a training step (Section 11.2): the backward region is compiled
ahead, before the forward, and the two C++ builds run at once on the compile
pool; a region waits for its build at its first run, where a failed build
makes it run eagerly (with the usual warning), or raises under strict_native."""

import os
import subprocess
import sys
import textwrap

import numpy as np

import tensorplay as tp
import tensorplay.nn.functional as F


def test_backward_is_compiled_ahead_with_the_forward(tmp_path, monkeypatch):
    monkeypatch.setenv("TP_CACHE_DIR", str(tmp_path))
    tp.compiler.reset()
    x = tp.randn(64, 32)
    w = tp.randn(32, 16, requires_grad=True)
    f = lambda x, w: F.gelu(x @ w).mean()  # noqa: E731
    cf = tp.compile(f)
    loss = cf(x, w)
    m = tp.compiler.metrics
    assert m.compile_count == 2  # forward and backward, before any backward call
    loss.backward()
    assert m.compile_count == 2 and m.fallback_count == 0
    assert m.cache_misses == 2  # both builds ran (on the pool) and were waited for
    g = w.grad.numpy().copy()
    w.grad = None
    f(x, w).backward()
    np.testing.assert_allclose(g, w.grad.numpy(), rtol=1e-5, atol=1e-6)


def _run(code, env_extra, tmp_path):
    env = dict(os.environ, TP_CACHE_DIR=str(tmp_path / "cache"), **env_extra)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                       timeout=300)
    return r


STEP = """
import warnings
import numpy as np
import tensorplay as tp
import tensorplay.nn.functional as F
x = tp.randn(64, 32)
w = tp.randn(32, 16, requires_grad=True)
f = lambda x, w: F.gelu(x @ w).mean()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    cf = tp.compile(f, strict_native=STRICT)
    try:
        loss = cf(x, w)
        loss.backward()
    except tp.compiler.BackendError as e:
        print("BackendError", "compiler" in str(e))
        raise SystemExit(0)
g = w.grad.numpy().copy()
w.grad = None
want = f(x, w)
want.backward()
print("loss", abs(loss.item() - want.item()) < 1e-6, "grad", np.allclose(g, w.grad.numpy(), rtol=1e-5, atol=1e-6))
print("fallbacks", tp.compiler.metrics.fallback_count)
print("warned", sum("running eagerly" in str(c.message) for c in caught))
"""


def _failing_compiler(tmp_path):
    cxx = tmp_path / "broken-cxx"
    cxx.write_text("#!/bin/sh\necho 'planted compiler failure' >&2\nexit 1\n")
    cxx.chmod(0o755)
    return str(cxx)


def test_a_build_that_fails_in_the_background_runs_the_regions_eagerly(tmp_path):
    r = _run(STEP.replace("STRICT", "False"), {"CXX": _failing_compiler(tmp_path)}, tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "loss True grad True" in out
    assert "fallbacks 2" in out  # forward and backward, each at its first run
    assert "warned 2" in out


def test_a_failing_build_raises_at_the_call_under_strict_native(tmp_path):
    r = _run(STEP.replace("STRICT", "True"), {"CXX": _failing_compiler(tmp_path)}, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "BackendError True" in r.stdout


def test_a_forked_child_compiles_with_its_own_workers(tmp_path):
    # The pool's threads do not survive fork(); a child that compiles must not
    # wait for them forever.
    code = """
    import os, tensorplay as tp
    f = tp.compile(lambda x: (x * 2).exp().sum())
    f(tp.randn(8))  # the parent's pool exists now
    pid = os.fork()
    if pid == 0:
        g = tp.compile(lambda x: (x * 3).sin().sum())
        ok = abs(g(tp.ones(8)).item() - 8 * __import__("math").sin(3.0)) < 1e-4
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    print("child", os.WEXITSTATUS(status))
    """
    r = _run(code, {}, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "child 0" in r.stdout
