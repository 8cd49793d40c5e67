"""Randomly composed programs (pointwise chains, broadcasting, views, reductions
over random dims, softmax) compiled under strict_native and compared with eager
execution. Seeded, so a failure reproduces; each case prints its program."""
import random

import numpy as np
import pytest

import tensorplay as tp

UNARY = [
    ("exp", lambda a: (a * 0.3).exp()),
    ("tanh", lambda a: a.tanh()),
    ("sigmoid", lambda a: a.sigmoid()),
    ("relu", lambda a: a.relu()),
    ("abs", lambda a: a.abs()),
    ("neg", lambda a: -a),
    ("log1", lambda a: (a.abs() + 1).log()),
    ("sqrt1", lambda a: (a * a + 1).sqrt()),
]
BINARY = [
    ("add", lambda a, b: a + b),
    ("sub", lambda a, b: a - b),
    ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / (b.abs() + 1)),
    ("maximum", lambda a, b: tp.maximum(a, b)),
    ("where", lambda a, b: tp.where(a > b, a, b * 2)),
]


def make_program(rng):
    """Returns (description, fn, inputs)."""
    rank = rng.choice([1, 2, 3])
    shape = [rng.choice([1, 3, 8, 17, 33]) for _ in range(rank)]
    inputs = [tp.randn(*shape)]
    # a second input, broadcastable: drop leading dims / set some dims to 1
    other = [s if rng.random() < 0.7 else 1 for s in shape][rng.randint(0, rank - 1):]
    inputs.append(tp.randn(*other))
    steps = []
    for _ in range(rng.randint(2, 6)):
        kind = rng.random()
        if kind < 0.35:
            steps.append(("u",) + rng.choice(UNARY))
        elif kind < 0.7:
            steps.append(("b",) + rng.choice(BINARY))
        elif kind < 0.8 and rank >= 2:
            steps.append(("t", "transpose", None))
        elif kind < 0.9:
            d = rng.randrange(rank)
            steps.append(("r", f"sum(dim={d}, keepdim=True)", d))
        else:
            d = rng.randrange(rank)
            steps.append(("s", f"softmax(dim={d})", d))
    final = rng.choice(["none", "sum_last", "amax_first", "sum_all"])

    def fn(x, y):
        v = x
        for st in steps:
            if st[0] == "u":
                v = st[2](v)
            elif st[0] == "b":
                v = st[2](v, y)
            elif st[0] == "t":
                v = v.transpose(0, v.dim() - 1)
                y = y.reshape(*([1] * (v.dim() - y.dim())), *y.shape) if y.dim() < v.dim() else y
                y = y.transpose(0, y.dim() - 1)
            elif st[0] == "r":
                v = v.sum(st[2], keepdim=True)
            else:
                v = v.softmax(st[2])
        if final == "sum_last":
            v = v.sum(-1)
        elif final == "amax_first":
            v = v.amax(0)
        elif final == "sum_all":
            v = v.sum()
        return v

    desc = f"shape={shape} other={other} steps={[s[1] for s in steps]} final={final}"
    return desc, fn, inputs


@pytest.mark.parametrize("seed", range(60))
def test_random_program_compiled_matches_eager(seed):
    rng = random.Random(seed)
    tp.manual_seed(seed)
    desc, fn, inputs = make_program(rng)
    try:
        ref = fn(*inputs)
    except (ValueError, RuntimeError):
        pytest.skip(f"program is not valid eagerly: {desc}")
    cf = tp.compile(fn, strict_native=True)
    got = cf(*inputs)
    assert got.shape == ref.shape, desc
    g, r = got.numpy().astype(np.float64), ref.numpy().astype(np.float64)
    # Reordered summation (Section 13.3): scale the tolerance by the magnitude summed.
    scale = 1.0 + np.abs(r).max(initial=0.0)
    np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5 * scale, err_msg=desc)
    # And again with fresh inputs of the same layout: the specialization is reused, not the data.
    fresh = [tp.randn(*t.shape) for t in inputs]
    np.testing.assert_allclose(cf(*fresh).numpy(), fn(*fresh).numpy(), rtol=1e-4,
                               atol=1e-5 * (1.0 + np.abs(fn(*fresh).numpy()).max(initial=0.0)), err_msg=desc)
