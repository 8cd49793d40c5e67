"""Loop-IR nodes are interned process-wide (stax/ir/loop_ir.cpp), and index
expressions compare variables by id only. Two live programs can use the same
id under different names (r0 in a reduction's lowering, i0 in a pointwise
one): the table handed one program's load to the other, which then printed a
variable it never declared (issue 12/11: after symbolic CUDA training, an
eager CUDA `sum` failed NVRTC with `identifier "i0" is undefined`, since the
compiled region kept its lowered program alive). The table now compares the
spelling too.

Without a GPU: a graph printed while another graph's lowering is alive prints
exactly as it does alone, and its source compiles with NVRTC. With a GPU: the
training loop of the report, eager reference steps included."""
import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
from tensorplay import _C

nvrtc = pytest.mark.skipif(not tp.cuda.is_nvrtc_available(), reason="NVRTC not installed (pip install nvidia-cuda-nvrtc)")
gpu = pytest.mark.skipif(not tp.cuda.is_available(), reason="no CUDA GPU")

# (held, printed): the held graph's lowering is alive while the other prints.
PAIRS = {
    "pointwise_then_sum0": (lambda t: t * 2, lambda t: t.sum(0)),
    "pointwise_then_sum0_keepdim": (lambda t: t.exp(), lambda t: t.sum(0, keepdim=True)),
    "pointwise_then_mean0": (lambda t: t + 1, lambda t: t.mean(0)),
    "pointwise_then_amax0": (lambda t: t.abs(), lambda t: t.amax(0)),
    "sum0_then_pointwise": (lambda t: t.sum(0), lambda t: t * 2),
    "sum1_then_sum0": (lambda t: t.sum(1), lambda t: t.sum(0)),
    "sum0_then_sum1": (lambda t: t.sum(0), lambda t: t.sum(1)),
}


def _sources(name, shape=(3, 10)):
    held_fn, fn = PAIRS[name]
    x = tp.randn(*shape)
    g = _C._capture(fn, x)
    alone = _C._stax_cuda_source(g)
    beside = _C._stax_cuda_source_beside(_C._capture(held_fn, x), g)
    return alone, beside


@pytest.mark.parametrize("name", sorted(PAIRS))
@pytest.mark.parametrize("shape", [(3, 10), (8, 10), (31, 6)])
def test_print_does_not_depend_on_another_live_lowering(name, shape):
    alone, beside = _sources(name, shape)
    assert beside == alone


@nvrtc
@pytest.mark.parametrize("name", sorted(PAIRS))
def test_print_beside_a_live_lowering_compiles_with_nvrtc(name):
    _, beside = _sources(name)
    assert tp.cuda._nvrtc_compile(beside, "beside_" + name, 90)[:4] == b"\x7fELF"


@gpu
def test_eager_cuda_steps_after_symbolic_training_match_compiled():
    # The report's case: eager reference steps (their backward's sum over the
    # batch) between compiled dynamic-shape steps.
    tp.compiler.reset()
    tp.manual_seed(2)
    m = nn.Sequential(nn.Linear(6, 10), nn.Tanh()).to("cuda")
    params = list(m.parameters())
    step = lambda x: m(x).pow(2).mean()
    cf = tp.compile(step, dynamic=True, strict_native=True)
    for i, n in enumerate([8, 3, 31]):
        tp.manual_seed(100 + i)
        x = tp.randn(n, 6).to("cuda")
        for p in params:
            p.grad = None
        cf(x).backward()
        got = [p.grad.cpu().numpy() for p in params]
        for p in params:
            p.grad = None
        step(x).backward()
        for a, p in zip(got, params):
            np.testing.assert_allclose(a, p.grad.cpu().numpy(), rtol=1e-4, atol=1e-6)
