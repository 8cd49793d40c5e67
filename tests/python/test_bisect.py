"""tp.compiler.bisect (Algorithm 11.1): on planted faults it names the layer, the
pass, the fusion decision and the node, and writes a reproducer that fails the
same way. Faults are planted through tensorplay._C's testing hooks (a broken
graph pass; a lowering, kernel or fusion fault inside Stax)."""

import os
import runpy
import subprocess
import sys
import textwrap

import pytest

import tensorplay as tp
from tensorplay import _C


@pytest.fixture(autouse=True)
def no_faults():
    _C._testing_clear_faults()
    yield
    _C._testing_clear_faults()


def example_1_1(x, w):
    return ((x + w).relu() * 2).sum(-1)


def softmax(x):
    m = x.amax(-1, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(-1, keepdim=True)


def run_reproducer(path):
    """None when the reproducer passes, else the exception it raised."""
    try:
        runpy.run_path(path)
    except Exception as exc:  # noqa: BLE001
        return exc
    return None


def test_every_layer_agrees_on_a_correct_function(tmp_path):
    x, w = tp.randn(4, 16), tp.randn(4, 16)
    r = tp.compiler.bisect(example_1_1, x, w, out_dir=str(tmp_path), progress=False, verbose=False)
    assert r.ok and r.layer is None
    assert r.passing_layers == ["eager", "aot_eager", "stax"]
    assert r.reproducer_path is None


def test_broken_stax_pass_is_named_with_its_node(tmp_path):
    _C._testing_plant_pass("testing_mul_to_add", "mul_to_add", True)
    assert "testing_mul_to_add" in tp.compiler.pass_names()
    x, w = tp.randn(4, 16), tp.randn(4, 16)
    r = tp.compiler.bisect(example_1_1, x, w, out_dir=str(tmp_path), progress=False, verbose=False)
    assert r.layer == "stax"
    assert r.passing_layers == ["eager", "aot_eager"]
    assert r.culprit_pass == "testing_mul_to_add"
    assert r.passes_tried["cse"] == "still fails"
    assert r.fusion is False
    assert r.node == "mul"
    assert "stax" in r.summary() and "testing_mul_to_add" in r.summary()
    # The reproducer is the graph up to the node, fails while the fault is there ...
    assert "def forward" in r.reproducer and "tp.mul(" in r.reproducer and "tp.sum(" not in r.reproducer
    assert isinstance(run_reproducer(r.reproducer_path), AssertionError)
    assert r.reproducer_fails is True  # bisect ran it too
    # ... and passes once it is gone: it fails because of the fault, not by itself.
    _C._testing_clear_faults()
    assert run_reproducer(r.reproducer_path) is None


def test_broken_capture_pass_names_the_first_layer(tmp_path):
    # A pass in the pipeline every backend shares: already the eager layer differs.
    _C._testing_plant_pass("testing_mul_to_add", "mul_to_add", False)
    x, w = tp.randn(4, 16), tp.randn(4, 16)
    r = tp.compiler.bisect(example_1_1, x, w, out_dir=str(tmp_path), progress=False, verbose=False)
    assert r.layer == "eager" and r.passing_layers == []
    assert r.culprit_pass == "testing_mul_to_add"
    assert r.fusion is None  # only asked inside Stax


@pytest.mark.parametrize("kind,op", [("lowering", "exp"), ("kernel", "div")])
def test_broken_lowering_or_kernel_is_named_by_its_node(tmp_path, kind, op):
    # The lowering fault changes one operator's loop-IR body before scheduling (the
    # lowering registry hook is not on this branch); the kernel fault changes the
    # generated kernel's nest after scheduling.
    _C._testing_plant_stax_fault(kind, op)
    x = tp.randn(4, 16)
    r = tp.compiler.bisect(softmax, x, out_dir=str(tmp_path), progress=False, verbose=False)
    assert r.layer == "stax"
    assert r.culprit_pass is None and "fixes" not in r.passes_tried.values()
    assert r.fusion is False
    assert r.node == op
    assert r.kernels == ["fused_amax_sub_exp_sum_div_0: amax; sub, exp, sum; sub, exp, div"]  # softmax is one kernel
    assert "kernel: fused_amax_sub_exp_sum_div_0" in r.summary()
    assert isinstance(run_reproducer(r.reproducer_path), AssertionError)
    _C._testing_clear_faults()
    assert run_reproducer(r.reproducer_path) is None


def test_broken_fusion_is_named(tmp_path):
    _C._testing_plant_stax_fault("fusion", "")
    x = tp.randn(4, 16)
    r = tp.compiler.bisect(softmax, x, out_dir=str(tmp_path), progress=False, verbose=False)
    assert r.layer == "stax"
    assert r.fusion is True
    assert len(r.fused_kernels) == 1 and "exp" in r.fused_kernels[0] and "div" in r.fused_kernels[0]
    assert r.culprit_pass is None
    assert isinstance(run_reproducer(r.reproducer_path), AssertionError)


def test_a_region_stax_refuses_is_a_stax_failure(tmp_path):
    # strict_native: a fallback to eager counts against the stax layer.
    # (nonzero's shape depends on the data; matmul runs as an extern call inside the region)
    a, b = tp.randn(3, 4), tp.randn(4, 5)
    r = tp.compiler.bisect(lambda a, b: (a @ b).relu() + tp.nonzero(a > 0).float().sum(), a, b,
                           out_dir=str(tmp_path), progress=False, verbose=False)
    assert r.layer == "stax"
    assert "BackendError" in r.error and "nonzero" in r.error
    assert r.node.startswith("nonzero")
    assert "BackendError" in repr(run_reproducer(r.reproducer_path))


def test_large_inputs_are_saved_next_to_the_reproducer(tmp_path):
    _C._testing_plant_stax_fault("kernel", "exp")
    x = tp.randn(64, 64)
    r = tp.compiler.bisect(lambda x: x.exp() * 3, x, out_dir=str(tmp_path), progress=False, verbose=False)
    assert r.node == "exp"
    assert os.path.exists(tmp_path / "reproducer_data.pt")
    assert "tp.load(" in r.reproducer
    assert isinstance(run_reproducer(r.reproducer_path), AssertionError)


def test_steps_are_announced_on_stderr(tmp_path, capsys):
    _C._testing_plant_stax_fault("kernel", "relu")
    x = tp.randn(4, 8)
    tp.compiler.bisect(lambda x: x.relu() + 1, x, out_dir=str(tmp_path))
    out = capsys.readouterr()
    assert "[tp.bisect" in out.err and "layer stax" in out.err and "node" in out.err
    assert "first failing layer: stax" in out.out


def test_disable_passes_rejects_unknown_names():
    f = tp.compile(lambda x: x + 1, options={"disable_passes": ["no_such_pass"]})
    with pytest.raises(ValueError, match="no_such_pass.*known: decompose, simplify_algebra, transpose_products, cse, dce"):
        f(tp.randn(3))


def test_disable_passes_turns_a_pass_off():
    # simplify_algebra removes x * 1; with it off the node stays in the graph.
    g = lambda x: (x * 1).exp()
    on = tp.compile(g)
    on(tp.randn(3))
    off = tp.compile(g, options={"disable_passes": ["simplify_algebra"]})
    off(tp.randn(3))
    assert "tp.mul(" not in on.last_graph.code
    assert "tp.mul(" in off.last_graph.code


SCRIPT = """
import tensorplay as tp

def f(x):
    return (x * 3).sum(-1)

def bisect_target():
    return f, (tp.ones(2, 8),)

if __name__ == "__main__":
    raise SystemExit("must not run under the bisect tool")
"""


def _cli(script, out):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "tensorplay.bisect", str(script), "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=300)


def test_command_line_tool(tmp_path):
    script = tmp_path / "target.py"
    script.write_text(textwrap.dedent(SCRIPT))
    p = _cli(script, tmp_path / "out")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "agrees with eager" in p.stdout
    # The same script with a fault planted at import: exit status 1 and a reproducer.
    script.write_text("from tensorplay import _C\n_C._testing_plant_stax_fault('kernel', 'mul')\n"
                      + textwrap.dedent(SCRIPT))
    p = _cli(script, tmp_path / "out")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "first failing layer: stax" in p.stdout and "node: 'mul'" in p.stdout
    assert (tmp_path / "out" / "reproducer.py").exists()


def test_command_line_tool_needs_bisect_target(tmp_path):
    script = tmp_path / "empty.py"
    script.write_text("x = 1\n")
    p = _cli(script, tmp_path / "out")
    assert p.returncode != 0 and "bisect_target" in p.stderr


def test_keyword_and_number_arguments_and_in_place_writes(tmp_path):
    # tp.compile takes positional arguments only: bisect binds the keywords itself.
    def f(x, scale, *, shift=0.0):
        x.mul_(scale)
        return {"a": x.sum(0) + shift, "b": (x,)}

    x = tp.randn(3, 5)
    assert tp.compiler.bisect(f, x, 2.0, shift=1.0, out_dir=str(tmp_path), progress=False, verbose=False).ok
    _C._testing_plant_stax_fault("kernel", "sum")
    r = tp.compiler.bisect(f, x, 2.0, shift=1.0, out_dir=str(tmp_path), progress=False, verbose=False)
    assert r.layer == "stax" and r.node == "sum_1"
    assert r.reproducer_fails is True
