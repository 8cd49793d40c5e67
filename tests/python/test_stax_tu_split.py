"""A large Stax region split into several translation units (Section 11.2):
the units are compiled to objects at once on the compile pool, each a
content-addressed cache entry of its own, and linked into one library. The
split never changes results; options={"stax_tu_split": N} controls it; a unit
that does not compile raises an error naming that unit."""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tensorplay as tp


def several_kernels(x):
    # Reductions over different dims and a pointwise result: several kernels.
    a = (x.exp() * 0.5).sum(0)
    b = (x * 2).relu().sum(1)
    c = x.tanh().amax(0)
    d = (x + 1).abs().sqrt().mean(1)
    e = (x.sigmoid() * x).sum()
    return a, b, c, d, e


def entries(cache_dir, artifact):
    return sorted(p for p in cache_dir.glob("??/*") if re.fullmatch(r"[0-9a-f]{64}", p.name)
                  and (p / artifact).exists())


def x_input():
    return tp.tensor(np.random.default_rng(0).standard_normal((48, 80)).astype(np.float32))


def test_a_region_split_into_units_computes_what_one_unit_computes(cache_dir):
    x = x_input()
    one = tp.compile(several_kernels, strict_native=True, options={"stax_tu_split": 1})(x)
    assert entries(cache_dir, "kernel.o") == []  # one unit: the plain one-library entry
    three = tp.compile(several_kernels, strict_native=True, options={"stax_tu_split": 3})(x)
    units = entries(cache_dir, "kernel.o")
    assert len(units) == 3
    texts = [(u / "kernel.cpp").read_text() for u in units]
    assert sorted(t.splitlines()[0] for t in texts) == [f"// Stax translation unit {i} of 3" for i in (1, 2, 3)]
    assert sum("tp_entry" in t for t in texts) == 1  # the entry is in one unit only
    assert len(entries(cache_dir, "kernel.so")) == 2  # one library per region, however built
    for a, b in zip(one, three):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    eager = several_kernels(x)
    for a, b in zip(three, eager):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


def test_more_units_than_kernels_gives_one_unit_per_kernel(cache_dir):
    f = lambda x: (x.exp().sum(0), x.relu().sum(1))  # noqa: E731
    x = x_input()
    got = tp.compile(f, strict_native=True, options={"stax_tu_split": 64})(x)
    n = len(entries(cache_dir, "kernel.o"))
    assert 2 <= n <= 3
    for a, b in zip(got, f(x)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


def test_a_split_symbolic_region_passes_the_sizes_to_every_unit(cache_dir):
    # Kernels of a symbolic region take the sizes: their declarations in the
    # entry's unit must say so.
    f = tp.compile(several_kernels, strict_native=True, dynamic=True, options={"stax_tu_split": 3})
    for rows in (48, 31):
        x = tp.tensor(np.random.default_rng(rows).standard_normal((rows, 80)).astype(np.float32))
        for a, b in zip(f(x), several_kernels(x)):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)
    units = entries(cache_dir, "kernel.o")
    assert len(units) == 3
    assert any("const long long* sizes);" in (u / "kernel.cpp").read_text() for u in units)


def test_the_cache_reuses_the_units(cache_dir):
    x = x_input()
    want = [t.numpy() for t in tp.compile(several_kernels, options={"stax_tu_split": 3})(x)]
    units = entries(cache_dir, "kernel.o")
    stamps = {u: (u / "kernel.o").stat().st_mtime_ns for u in units}
    # A warm process: nothing is compiled.
    tp.compiler.reset()
    again = tp.compile(several_kernels, options={"stax_tu_split": 3})(x)
    assert tp.compiler.metrics.cache_misses == 0 and tp.compiler.metrics.cache_hits >= 1
    # The linked library lost: only the link runs again, every unit's object is reused.
    (library,) = entries(cache_dir, "kernel.so")
    for p in library.iterdir():
        p.unlink()
    library.rmdir()
    tp.compiler.reset()
    relinked = tp.compile(several_kernels, options={"stax_tu_split": 3})(x)
    assert tp.compiler.metrics.cache_misses == 1
    assert entries(cache_dir, "kernel.o") == units
    assert {u: (u / "kernel.o").stat().st_mtime_ns for u in units} == stamps
    for w, a, b in zip(want, again, relinked):
        np.testing.assert_array_equal(w, a.numpy())
        np.testing.assert_array_equal(w, b.numpy())


def test_the_automatic_split_leaves_small_regions_in_one_unit(cache_dir):
    tp.compile(several_kernels, strict_native=True)(x_input())
    assert entries(cache_dir, "kernel.o") == []
    assert len(entries(cache_dir, "kernel.so")) == 1


def test_a_large_training_region_is_split_by_default(cache_dir):
    import tensorplay.nn as tnn
    blk = tnn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, batch_first=True)
    x = tp.tensor(np.random.default_rng(1).standard_normal((2, 16, 64)).astype(np.float32))
    f = lambda x: (blk(x) ** 2).mean()  # noqa: E731
    loss = tp.compile(f, strict_native=True)(x)
    loss.backward()
    got = [p.grad.numpy().copy() for p in blk.parameters()]
    assert len(entries(cache_dir, "kernel.o")) >= 2  # the backward region's kernels span >= 32 KB of C++
    for p in blk.parameters():
        p.grad = None
    f(x).backward()
    for g, p in zip(got, blk.parameters()):
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("bad", ["0", "-2", "many", "1.5", 65])
def test_a_bad_split_option_is_refused(bad):
    with pytest.raises(ValueError, match="stax_tu_split"):
        tp.compile(several_kernels, strict_native=True, options={"stax_tu_split": bad})(x_input())


CHILD = """
import numpy as np
import tensorplay as tp
def f(x):
    return ((x.exp() * 0.5).sum(0), (x * 2).relu().sum(1), x.tanh().amax(0),
            (x + 1).abs().sqrt().mean(1), (x.sigmoid() * x).sum())
x = tp.tensor(np.ones((48, 80), np.float32))
try:
    tp.compile(f, strict_native=True, options={"stax_tu_split": 3})(x)
    print("NO ERROR")
except tp.compiler.BackendError as e:
    print("BackendError")
    print(str(e))
"""


def test_a_unit_that_does_not_compile_raises_naming_it(tmp_path):
    # A compiler that fails on the second unit only (by its header line).
    cxx = tmp_path / "picky-cxx"
    cxx.write_text(textwrap.dedent("""\
        #!/bin/sh
        for a in "$@"; do
          if [ -f "$a" ] && head -n 1 "$a" | grep -q 'translation unit 2 of 3'; then
            echo 'planted failure in this unit' >&2; exit 1
          fi
        done
        exec g++ "$@"
        """))
    cxx.chmod(0o755)
    env = dict(os.environ, TP_CACHE_DIR=str(tmp_path / "cache"), CXX=str(cxx))
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("BackendError"), out
    assert "translation unit 2 of 3" in out
    assert "planted failure in this unit" in out
    assert "source kept at" in out
