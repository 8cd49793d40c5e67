"""Damaged or planted entries in the on-disk kernel cache (outside fault
injection, see csrc/stax/runtime/code_cache.h). A real entry of a compiled
function is damaged between two processes; the next process must get the right
result, one warning naming the entry, a rebuild (cache_misses) and never a
crash, a hang or an eager fallback; the process after it reuses the repaired
entry. Each process runs with a timeout, so a hang (a FIFO) fails the test."""

import json
import os
import re
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tensorplay as tp

CHILD = """
import json, sys, warnings
import numpy as np
import tensorplay as tp

FUNCS = {
    "relu_sum": (lambda x, w: ((x + w).relu() * 2).sum(-1), lambda x, w: (np.maximum(x + w, 0) * 2).sum(-1)),
    "exp_mul": (lambda x, w: (x * w).exp().sum(-1), lambda x, w: np.exp(x * w).sum(-1)),
}
fn, ref = FUNCS[sys.argv[1]]
xn = ((np.arange(64 * 128) % 7 - 3) / 4).astype(np.float32).reshape(64, 128)
wn = ((np.arange(64 * 128) % 5 - 2) / 3).astype(np.float32).reshape(64, 128)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    y = tp.compile(fn)(tp.tensor(xn), tp.tensor(wn))
expected = ref(xn.astype(np.float64), wn.astype(np.float64))
print("RESULT " + json.dumps({
    "rel_err": float(np.abs(y.numpy() - expected).max() / np.abs(expected).max()),
    "metrics": tp.compiler.metrics.as_dict(),
    "warnings": [str(c.message) for c in caught],
}))
"""


def run_child(which, timeout=120):
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD), which],
        env=dict(os.environ), capture_output=True, text=True, timeout=timeout,
    )
    assert proc.returncode == 0, f"child died (status {proc.returncode}):\n{proc.stderr[-3000:]}"
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise AssertionError("child printed no RESULT line:\n" + proc.stdout + proc.stderr[-3000:])


def entries(cache_dir):
    return sorted(p for p in cache_dir.glob("??/*") if re.fullmatch(r"[0-9a-f]{64}", p.name))


def populate(cache_dir, which="relu_sum"):
    before = set(entries(cache_dir))
    r = run_child(which)
    assert r["metrics"]["cache_misses"] == 1 and r["rel_err"] < 1e-5, r
    (entry,) = set(entries(cache_dir)) - before
    return entry


def expect_rebuilt(which, named_path, problem):
    r = run_child(which)
    assert r["rel_err"] < 1e-5, r
    m = r["metrics"]
    assert m["cache_misses"] == 1 and m["fallback_count"] == 0, m
    damage = [w for w in r["warnings"] if "damaged kernel cache entry" in w]
    assert len(damage) == 1, r["warnings"]
    assert f"'{named_path}'" in damage[0] and problem in damage[0], damage[0]
    again = run_child(which)  # the repaired entry is reused, silently
    assert again["rel_err"] < 1e-5
    assert again["metrics"]["cache_hits"] == 1 and again["metrics"]["cache_misses"] == 0, again
    assert not again["warnings"], again["warnings"]


def truncate(size_of):
    def damage(entry):
        so = entry / "kernel.so"
        with open(so, "r+b") as f:
            f.truncate(size_of(so.stat().st_size))
    return damage


def rewrite(edit):
    def damage(entry):
        so = entry / "kernel.so"
        so.write_bytes(edit(so.read_bytes()))
    return damage


def fifo(entry):
    (entry / "kernel.so").unlink()
    os.mkfifo(entry / "kernel.so")


def directory(entry):
    (entry / "kernel.so").unlink()
    (entry / "kernel.so").mkdir()
    (entry / "kernel.so" / "x").write_text("x")


DAMAGES = {
    "truncated_4096": (truncate(lambda n: 4096), "truncated"),
    "truncated_quarter": (truncate(lambda n: n // 4), "truncated"),
    "truncated_half": (truncate(lambda n: n // 2), "truncated"),
    "truncated_three_quarters": (truncate(lambda n: 3 * n // 4), "truncated"),
    "truncated_0": (truncate(lambda n: 0), "truncated"),
    "truncated_16": (truncate(lambda n: 16), "truncated"),
    "truncated_100": (truncate(lambda n: 100), "truncated"),
    "flipped_code": (rewrite(lambda b: b[: len(b) // 3] + bytes(c ^ 0xCC for c in b[len(b) // 3: len(b) // 3 + 64])
                             + b[len(b) // 3 + 64:]), "SHA-256"),
    "zeros": (rewrite(lambda b: bytes(len(b))), "SHA-256"),
    "garbage": (rewrite(lambda b: np.random.default_rng(0).integers(0, 256, len(b), dtype=np.uint8).tobytes()),
                "SHA-256"),
    "fifo": (fifo, "FIFO"),
    "directory": (directory, "directory"),
}


@pytest.mark.parametrize("name", sorted(DAMAGES))
def test_damaged_library_is_rebuilt(cache_dir, name):
    damage, problem = DAMAGES[name]
    entry = populate(cache_dir)
    damage(entry)
    expect_rebuilt("relu_sum", entry, problem)


def test_swapped_libraries_give_right_results(cache_dir):
    a = populate(cache_dir, "relu_sum")
    b = populate(cache_dir, "exp_mul")
    so_a, so_b = a / "kernel.so", b / "kernel.so"
    tmp = a / "swap"
    so_a.rename(tmp)
    so_b.rename(so_a)
    tmp.rename(so_b)
    expect_rebuilt("relu_sum", a, "SHA-256")
    expect_rebuilt("exp_mul", b, "SHA-256")


def test_lock_that_is_a_directory(cache_dir):
    entry = populate(cache_dir)
    (entry / "kernel.so").unlink()  # an unfinished entry: forces a build, which needs the lock
    (entry / "kernel.manifest").unlink()
    (entry / "kernel.lock").unlink()
    (entry / "kernel.lock").mkdir()
    expect_rebuilt("relu_sum", entry / "kernel.lock", "directory")


def test_key_directory_that_is_a_file(cache_dir):
    entry = populate(cache_dir)
    for p in entry.iterdir():
        p.unlink()
    entry.rmdir()
    entry.write_text("not a directory")
    expect_rebuilt("relu_sum", entry, "not a directory")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown to another uid")
def test_library_owned_by_another_user_is_not_loaded(cache_dir):
    entry = populate(cache_dir)
    os.chown(entry / "kernel.so", 12345, 12345)
    expect_rebuilt("relu_sum", entry, "owned by uid 12345")


def test_group_writable_library_is_not_loaded(cache_dir):
    entry = populate(cache_dir)
    os.chmod(entry / "kernel.so", 0o775)
    expect_rebuilt("relu_sum", entry, "writable by other users")


def test_entries_have_a_manifest(cache_dir):
    entry = populate(cache_dir)
    assert stat.S_ISREG((entry / "kernel.manifest").stat().st_mode)
    text = (entry / "kernel.manifest").read_text()
    assert f"key {entry.name}\n" in text
    assert f"size {(entry / 'kernel.so').stat().st_size}\n" in text


def mapped_kernel_libraries():
    """Distinct kernel libraries mapped in this process (loaded from a private
    memfd copy, or, by older versions, from the cache's kernel.so)."""
    inodes = set()
    with open("/proc/self/maps") as f:
        for line in f:
            if "/memfd:tp-stax-kernel" in line or line.rstrip().endswith("/kernel.so"):
                inodes.add(line.split()[4])
    return len(inodes)


def test_loaded_libraries_are_bounded(monkeypatch):
    monkeypatch.setenv("TP_STAX_MAX_LOADED_LIBRARIES", "4")
    tp.compiler.reset()
    cf = tp.compile(lambda x: (x * 3 + 1).relu().sum(-1))
    inputs = [tp.randn(2, n) for n in range(3, 23)]  # 20 shapes, 20 libraries
    for rnd in range(2):  # the second round reloads evicted ones from disk
        for x in inputs:
            y = cf(x)
            np.testing.assert_allclose(y.numpy(), np.maximum(x.numpy() * 3 + 1, 0).sum(-1), rtol=1e-5, atol=1e-5)
            assert 1 <= mapped_kernel_libraries() <= 4
