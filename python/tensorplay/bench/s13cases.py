"""The cases of Tables 13.1 and 13.2 of the seed.

Table 13.1 (fusion cases, rho from 1 to about 6 on this compiler):
  Example 1.1   ((x + w).relu() * 2).sum(-1)
  Example 7.1   x / x.sum(-1, keepdim=True)            (row normalization)
  Example 7.2   x.exp().sum(-1) + x.exp().amax(-1)     (exp computed twice eagerly)
  softmax5      amax, sub, exp, sum, div               (five-operator softmax)
  softmax_lib   x.softmax(-1)                          (library softmax, rho = 1)
  Example 5.1   training step gelu(x @ W).sum().backward() (outside the byte model)
Table 13.2 (single operators, rho = 1): add, mul, exp, sum(-1), amax(-1).

Each case is source text (it runs the same in this process and in the fresh
processes of the compile-cost measurement), its byte model for eager and
compiled execution (elements, Section 13.2), a FLOP count for the roofline and
how its compiled-vs-eager difference relates to the summation error model
(Section 13.3).

The compiled byte models describe what Stax does, not what the seed's
compiler did: a CPU row of 2048 float32 (8 KB) stays in L1, so a fused kernel
that passes over a row several times reads it from main memory once.  For
Example 7.2 Stax recomputes exp inside each fused reduction instead of
materializing it (the seed's CPU choice, 3N), so b_c = N + R here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple

import numpy as np

from .bytemodel import Traffic

Shape = Tuple[int, ...]

# error-model kinds
ROWSUM_ABS = "row sum (absolute)"  # output = sum of the terms
ROWSUM_REL = "row sum (relative)"  # output = something / sum of the terms
EXACT = "exact"  # correctly rounded or exact in both ways: difference 0
POINTWISE = "pointwise"  # elementwise functions: a few ulps, no accumulation
TRAINING = "training"  # gradients through matmul: relative error reported only


@dataclass(frozen=True)
class S13Case:
    key: str
    table: str  # "13.1" or "13.2"
    title: str
    fn_source: str  # defines f using the name tp
    shapes: Tuple[Shape, ...]  # benchmark input shapes
    quick_shapes: Tuple[Shape, ...]
    eager_traffic: Optional[Callable[[int, int], Traffic]]  # (rows, cols) -> Traffic; None: not modelled
    compiled_traffic: Optional[Callable[[int, int], Traffic]]
    flops_per_elem: float  # for the roofline (every elementwise op or reduction step = 1)
    eager_ops: int  # operator calls of eager execution (Proposition 13.6: k)
    error_kind: str
    terms: Optional[Callable[..., np.ndarray]] = None  # float64 inputs -> (rows, n) summed terms
    training: bool = False
    note: str = ""
    # Elementwise steps after the sum may differ by a few ulps between the two
    # implementations (a vector exp is not libm's; a division rounds once):
    # added to the relative prediction as pointwise_ulps * u.
    pointwise_ulps: float = 0.0

    def shape(self, quick: bool) -> Tuple[Shape, ...]:
        return self.quick_shapes if quick else self.shapes

    def rows_cols(self, quick: bool) -> Tuple[int, int]:
        s = self.shape(quick)[0]
        return (s[0], s[1]) if len(s) == 2 else (1, s[0])

    def inputs_source(self, shapes: Tuple[Shape, ...]) -> str:
        parts = []
        for i, s in enumerate(shapes):
            dims = ", ".join(str(d) for d in s)
            if self.training and i == 1:
                parts.append(f"tp.randn({dims}, requires_grad=True)")
            else:
                parts.append(f"tp.randn({dims})")
        return "args = (" + ", ".join(parts) + ",)"

    @property
    def call_source(self) -> str:
        """One call, as the timed statement (a training step includes backward)."""
        return "g(*args).backward()" if self.training else "g(*args)"

    def make_fn(self):
        import tensorplay as tp

        ns: Dict[str, object] = {"tp": tp}
        exec(self.fn_source, ns)
        return ns["f"]

    def make_inputs(self, quick: bool, seed: int = 0):
        import tensorplay as tp

        tp.manual_seed(seed)
        ns: Dict[str, object] = {"tp": tp}
        exec(self.inputs_source(self.shape(quick)), ns)
        return ns["args"]

    def make_call(self, fn, args):
        if self.training:
            w = args[1]

            def step():
                w.grad = None
                fn(*args).backward()

            return step
        return lambda: fn(*args)


def _t(*accesses) -> Traffic:
    t = Traffic(4)
    for op, r, w in accesses:
        t.add(op, r, w)
    return t


def _relu2(x, w):
    return 2.0 * np.maximum(x + w, 0.0)


def _softmax_terms(x):
    return np.exp(x - x.max(-1, keepdims=True))


CASES = (
    S13Case(
        key="example_1_1", table="13.1", title="Example 1.1: ((x + w).relu() * 2).sum(-1)",
        fn_source="f = lambda x, w: ((x + w).relu() * 2).sum(-1)\n",
        shapes=((8192, 2048), (8192, 2048)), quick_shapes=((512, 2048), (512, 2048)),
        eager_traffic=lambda r, c: _t(("add", 2 * r * c, r * c), ("relu", r * c, r * c), ("mul", r * c, r * c),
                                      ("sum", r * c, r)),
        compiled_traffic=lambda r, c: _t(("fused", 2 * r * c, r)),
        flops_per_elem=4, eager_ops=4, error_kind=ROWSUM_ABS, terms=_relu2,
    ),
    S13Case(
        key="example_7_1", table="13.1", title="Example 7.1: x / x.sum(-1, keepdim=True)",
        fn_source="f = lambda x: x / x.sum(-1, keepdim=True)\n",
        shapes=((8192, 2048),), quick_shapes=((512, 2048),),
        eager_traffic=lambda r, c: _t(("sum", r * c, r), ("div", r * c + r, r * c)),
        compiled_traffic=lambda r, c: _t(("fused", r * c, r * c)),
        flops_per_elem=2, eager_ops=2, error_kind=ROWSUM_REL, terms=lambda x: x, pointwise_ulps=1,
    ),
    S13Case(
        key="example_7_2", table="13.1", title="Example 7.2: x.exp().sum(-1) + x.exp().amax(-1)",
        fn_source="f = lambda x: x.exp().sum(-1) + x.exp().amax(-1)\n",
        shapes=((8192, 2048),), quick_shapes=((512, 2048),),
        eager_traffic=lambda r, c: _t(("exp", r * c, r * c), ("sum", r * c, r), ("exp", r * c, r * c),
                                      ("amax", r * c, r), ("add", 2 * r, r)),
        compiled_traffic=lambda r, c: _t(("fused", r * c, r)),
        flops_per_elem=4, eager_ops=5, error_kind=ROWSUM_ABS, terms=np.exp,
        note="Stax recomputes exp in each fused reduction (no buffer): b_c = N + R, not the seed's 3N",
    ),
    S13Case(
        key="softmax5", table="13.1", title="five-operator softmax: amax, sub, exp, sum, div",
        fn_source=("def f(x):\n    m = x.amax(-1, keepdim=True)\n    e = (x - m).exp()\n"
                   "    return e / e.sum(-1, keepdim=True)\n"),
        shapes=((16384, 1000),), quick_shapes=((1024, 1000),),
        eager_traffic=lambda r, c: _t(("amax", r * c, r), ("sub", r * c + r, r * c), ("exp", r * c, r * c),
                                      ("sum", r * c, r), ("div", r * c + r, r * c)),
        compiled_traffic=lambda r, c: _t(("fused", r * c, r * c)),
        flops_per_elem=5, eager_ops=5, error_kind=ROWSUM_REL, terms=_softmax_terms, pointwise_ulps=8,
    ),
    S13Case(
        key="softmax_lib", table="13.1", title="library softmax: x.softmax(-1)",
        fn_source="f = lambda x: x.softmax(-1)\n",
        shapes=((16384, 1000),), quick_shapes=((1024, 1000),),
        eager_traffic=lambda r, c: _t(("softmax", r * c, r * c)),
        compiled_traffic=lambda r, c: _t(("fused", r * c, r * c)),
        flops_per_elem=5, eager_ops=1, error_kind=ROWSUM_REL, terms=_softmax_terms, pointwise_ulps=8,
    ),
    S13Case(
        key="example_5_1", table="13.1", title="Example 5.1 (training): gelu(x @ W).sum().backward()",
        fn_source="f = lambda x, w: (x @ w).gelu().sum()\n",
        shapes=((4096, 1024), (1024, 1024)), quick_shapes=((256, 256), (256, 256)),
        eager_traffic=None, compiled_traffic=None,
        flops_per_elem=0, eager_ops=0, error_kind=TRAINING, training=True,
        note="dominated by matmul and autograd overhead: outside the byte model, no speedup claimed (Section 13.5)",
    ),
    # --- Table 13.2: single operators, rho = 1 --------------------------------
    S13Case(
        key="add", table="13.2", title="x + w", fn_source="f = lambda x, w: x + w\n",
        shapes=((8192, 2048), (8192, 2048)), quick_shapes=((512, 2048), (512, 2048)),
        eager_traffic=lambda r, c: _t(("add", 2 * r * c, r * c)),
        compiled_traffic=lambda r, c: _t(("fused", 2 * r * c, r * c)),
        flops_per_elem=1, eager_ops=1, error_kind=EXACT,
    ),
    S13Case(
        key="mul", table="13.2", title="x * 2", fn_source="f = lambda x: x * 2\n",
        shapes=((8192, 2048),), quick_shapes=((512, 2048),),
        eager_traffic=lambda r, c: _t(("mul", r * c, r * c)),
        compiled_traffic=lambda r, c: _t(("fused", r * c, r * c)),
        flops_per_elem=1, eager_ops=1, error_kind=EXACT,
    ),
    S13Case(
        key="exp", table="13.2", title="x.exp()", fn_source="f = lambda x: x.exp()\n",
        shapes=((8192, 2048),), quick_shapes=((512, 2048),),
        eager_traffic=lambda r, c: _t(("exp", r * c, r * c)),
        compiled_traffic=lambda r, c: _t(("fused", r * c, r * c)),
        flops_per_elem=1, eager_ops=1, error_kind=POINTWISE,
    ),
    S13Case(
        key="sum", table="13.2", title="x.sum(-1)", fn_source="f = lambda x: x.sum(-1)\n",
        shapes=((8192, 2048),), quick_shapes=((512, 2048),),
        eager_traffic=lambda r, c: _t(("sum", r * c, r)),
        compiled_traffic=lambda r, c: _t(("fused", r * c, r)),
        flops_per_elem=1, eager_ops=1, error_kind=ROWSUM_ABS, terms=lambda x: x,
    ),
    S13Case(
        key="amax", table="13.2", title="x.amax(-1)", fn_source="f = lambda x: x.amax(-1)\n",
        shapes=((8192, 2048),), quick_shapes=((512, 2048),),
        eager_traffic=lambda r, c: _t(("amax", r * c, r)),
        compiled_traffic=lambda r, c: _t(("fused", r * c, r)),
        flops_per_elem=1, eager_ops=1, error_kind=EXACT,
    ),
)

TABLE_13_1 = tuple(c for c in CASES if c.table == "13.1")
TABLE_13_2 = tuple(c for c in CASES if c.table == "13.2")
BY_KEY = {c.key: c for c in CASES}

# Inputs of the call-overhead measurement (Proposition 13.6): tiny, so the
# figure is the fixed cost of a call.
TINY_ROWS, TINY_COLS = 2, 8


def tiny_shapes(case: S13Case) -> Tuple[Shape, ...]:
    if case.training:
        return ((TINY_ROWS, TINY_COLS), (TINY_COLS, TINY_COLS))
    return tuple((TINY_ROWS, TINY_COLS) for _ in case.shapes)
