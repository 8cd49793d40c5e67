"""The benchmark cases: each is a function over tensors (kept as source text, so
the very same text runs in this process and in the fresh processes of the
cold-compile measurement), how to make its inputs, its byte model for eager and
compiled execution (Section 1.1 / 13.2), and its tolerance under the summation
error model (Section 13.3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, Tuple

import numpy as np

from .bytemodel import Traffic

U32 = 2.0**-24  # unit roundoff of float32
SUM_K = 4.0  # tolerance multiple of the statistical summation error (Section 13.3)

Shape = Tuple[int, int]


@dataclass(frozen=True)
class FusionCase:
    key: str
    title: str
    # Python source that defines `f` using the name `tp`.
    fn_source: str
    n_inputs: int
    shape: Shape  # benchmark size (large enough that main memory dominates)
    quick_shape: Shape  # --quick size
    eager_traffic: Callable[[int, int, int], Traffic]  # (rows, cols, itemsize)
    compiled_traffic: Callable[[int, int, int], Traffic]
    # (numpy float64 inputs) -> allowed |compiled - eager| per output element
    tolerance: Callable[..., np.ndarray]

    def make_fn(self):
        import tensorplay as tp

        ns: Dict[str, object] = {"tp": tp}
        exec(self.fn_source, ns)
        return ns["f"]

    def inputs_source(self, shape: Shape) -> str:
        r, c = shape
        return "args = (" + ", ".join([f"tp.randn({r}, {c})"] * self.n_inputs) + ",)"

    def make_inputs(self, shape: Shape, seed: int = 0):
        import tensorplay as tp

        if hasattr(tp, "manual_seed"):
            tp.manual_seed(seed)
        return tuple(tp.randn(*shape) for _ in range(self.n_inputs))


# --- Example 1.1: f(x, w) = ((x + w).relu() * 2).sum(-1) -------------------------


def _ex11_eager(rows: int, cols: int, itemsize: int) -> Traffic:
    n = rows * cols
    return (
        Traffic(itemsize)
        .add("add", 2 * n, n)
        .add("relu", n, n)
        .add("mul", n, n)
        .add("sum", n, rows)
    )


def _ex11_compiled(rows: int, cols: int, itemsize: int) -> Traffic:
    n = rows * cols
    return Traffic(itemsize).add("fused add-relu-mul-sum", 2 * n, rows)


def _ex11_tolerance(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    # a_i = 2 relu(x + w) >= 0: the pointwise part is exact or identical in both
    # ways; only the row sum's rounding differs.  |E| <~ K sqrt(n) u sum|a_i|.
    a = 2.0 * np.maximum(x.astype(np.float64) + w.astype(np.float64), 0.0)
    n = a.shape[-1]
    return SUM_K * math.sqrt(n) * U32 * np.abs(a).sum(-1)


EXAMPLE_1_1 = FusionCase(
    key="example_1_1",
    title="Example 1.1  f(x, w) = ((x + w).relu() * 2).sum(-1)",
    fn_source="f = lambda x, w: ((x + w).relu() * 2).sum(-1)\n",
    n_inputs=2,
    shape=(8192, 2048),
    quick_shape=(512, 2048),
    eager_traffic=_ex11_eager,
    compiled_traffic=_ex11_compiled,
    tolerance=_ex11_tolerance,
)

# --- five-operator softmax ------------------------------------------------------

_SOFTMAX_SRC = """\
def f(x):
    m = x.amax(-1, keepdim=True)
    e = (x - m).exp()
    return e / e.sum(-1, keepdim=True)
"""


def _softmax_eager(rows: int, cols: int, itemsize: int) -> Traffic:
    n = rows * cols
    return (
        Traffic(itemsize)
        .add("amax", n, rows)
        .add("sub", n + rows, n)
        .add("exp", n, n)
        .add("sum", n, rows)
        .add("div", n + rows, n)
    )


def _softmax_compiled(rows: int, cols: int, itemsize: int) -> Traffic:
    # A row (4 KB at 1000 columns) stays in L1 across the three passes, so main
    # memory sees one read and one write of x.
    n = rows * cols
    return Traffic(itemsize).add("fused softmax", n, n)


def _softmax_tolerance(x: np.ndarray) -> np.ndarray:
    # y = e / s with e > 0: the row sum has condition 1, its relative error
    # <~ K sqrt(n) u; exp and the division add a few ulps (vector exp may differ
    # from libm by a few ulps), budgeted as 16 u.
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    y = e / e.sum(-1, keepdims=True)
    n = x.shape[-1]
    return y * (SUM_K * math.sqrt(n) * U32 + 16 * U32)


SOFTMAX = FusionCase(
    key="softmax",
    title="five-operator softmax  amax, sub, exp, sum, div",
    fn_source=_SOFTMAX_SRC,
    n_inputs=1,
    shape=(16384, 1000),
    quick_shape=(1024, 1000),
    eager_traffic=_softmax_eager,
    compiled_traffic=_softmax_compiled,
    tolerance=_softmax_tolerance,
)

FUSION_CASES = (EXAMPLE_1_1, SOFTMAX)

# --- call overhead (Section 13.4) ----------------------------------------------

OVERHEAD_SOURCE = "g = lambda x: x * 2 + 1"
OVERHEAD_SIZE = 8
