"""Randomly composed programs compiled by Stax (strict_native) and compared with
eager TensorPlay and with PyTorch.

A program is a list of steps over a growing list of values: pointwise math,
comparisons, logical ops, where, Python-number operands (bool/int/float,
either side), reductions (sum/mean/amax/amin/any/all/softmax/log_softmax over
random dims, keepdim both ways), views (view/reshape/permute/transpose/expand/
slice/select/unsqueeze/flatten), element moves and gathers (flip, roll, repeat,
tril/triu, cat, index_select, x[idx]), scans and products, and dtype casts, on bool/int64/float32/float64
inputs that may be 0-d, zero-size, broadcast against each other, non-contiguous
(transposed or strided views) and hold IEEE special values (+-0, +-inf, NaN).

Each program is generated against eager execution (a step eager refuses is
dropped, or kept as the program's last step: then the compiled function must
raise the same exception type). Checks, per output: shape, dtype, NaN
positions, and values -- bitwise where the value only went through correctly
rounded operations (IEEE + - * / sqrt, comparisons, casts, views), bitwise up
to the sign of zero after a min/max (amax/amin/maximum/minimum/clamp may pick
either of +0 and -0: eager's own choice depends on the position), and to a
tolerance scaled by the program's magnitudes where it went through a reordered
sum or a vector exp/log/tanh/sigmoid. A second call must return
bitwise the same as the first.

Seeded, so a failure reproduces: `python test_stax_random_programs.py --seed N`
prints the program. CI runs a modest count; `pytest --long` (or
TP_RANDOM_PROGRAMS=N) runs 10^4 (N). `python test_stax_random_programs.py
--count 2100` runs programs in worker processes and reports crashes (a signal
kills only the worker), mismatches and compile errors as counts."""
import json
import math
import os
import random
import subprocess
import sys

import numpy as np
import pytest

import tensorplay as tp

try:
    import torch
except ImportError:  # pragma: no cover - the oracle is optional
    torch = None

CI_COUNT = 200
LONG_COUNT = 10_000

DTYPES = ["float32", "float64", "int64", "bool"]
SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan]
SCALARS = [0, 1, 2, -1, 3, 0.5, -2.0, 1.5, -0.0, math.inf, -math.inf, math.nan, True, False]


class Step:
    """One operation: fn(M, *operands) with M the module (tensorplay or torch)."""

    def __init__(self, text, fn, args, exact):
        self.text, self.fn, self.args, self.exact = text, fn, args, exact

    def __repr__(self):
        return self.text


# ---------------------------------------------------------------------------
# Inputs


def _make_input(rng, np_rng):
    """(numpy array, layout) -- layout: 'contig', 'transposed' or 'strided'."""
    rank = rng.choice([0, 1, 1, 2, 2, 2, 3, 3])
    zero_ok = rng.random() < 0.15
    sizes = [rng.choice([1, 2, 3, 5, 8, 17] + ([0] if zero_ok else [])) for _ in range(rank)]
    dtype = rng.choice(DTYPES)
    if dtype == "bool":
        a = np_rng.random(sizes) < 0.5
    elif dtype == "int64":
        a = np_rng.integers(-5, 6, sizes).astype(np.int64)
    else:
        a = np_rng.standard_normal(sizes).astype(dtype)
        if a.size and rng.random() < 0.35:  # IEEE special values
            flat = a.reshape(-1)
            for _ in range(rng.randint(1, max(1, flat.size // 3))):
                flat[rng.randrange(flat.size)] = rng.choice(SPECIALS)
    a = np.asarray(a)
    layout = "contig"
    if rank >= 2 and rng.random() < 0.25:
        layout = "transposed"
    elif rank >= 1 and rng.random() < 0.2:
        layout = "strided"
    return a, layout


def _to_module(M, a, layout):
    """The same values as a tensor of module M with the given memory layout."""
    if layout == "transposed":  # a contiguous tensor of the transposed shape, viewed back
        t = M.tensor(np.ascontiguousarray(np.swapaxes(a, 0, -1)))
        return t.transpose(0, t.dim() - 1)
    if layout == "strided":  # every other element of a twice-as-long last dim
        big = np.repeat(a, 2, axis=-1)
        return M.tensor(np.ascontiguousarray(big))[..., ::2]
    return M.tensor(np.ascontiguousarray(a))


# ---------------------------------------------------------------------------
# Step generators: each returns a Step (or None when it does not apply).


def _dt(M, name):
    return getattr(M, name)


UNARY = {
    "exp": (lambda M, x: x.exp(), 0),
    "tanh": (lambda M, x: x.tanh(), 0),
    "sigmoid": (lambda M, x: x.sigmoid(), 0),
    "log": (lambda M, x: x.log(), 0),
    "relu": (lambda M, x: x.relu(), 2),
    "abs": (lambda M, x: x.abs(), 2),
    "neg": (lambda M, x: -x, 2),
    "sqrt": (lambda M, x: x.sqrt(), 2),
    "logical_not": (lambda M, x: M.logical_not(x), 2),
    "clamp": (lambda M, x: x.clamp(-1, 1), 1),
}
# Exactness levels of a value: 2 = only correctly rounded operations (compared
# bitwise), 1 = also a min/max that may pick either of +0 and -0 (eager's own
# reductions pick by position, so compared modulo the sign of zero), 0 = went
# through an approximation (vector exp/log/tanh/sigmoid) or a reordered sum
# (compared to tolerance).
BINARY = {
    "add": lambda M, a, b: a + b,
    "sub": lambda M, a, b: a - b,
    "mul": lambda M, a, b: a * b,
    "div": lambda M, a, b: a / b,
    "maximum": lambda M, a, b: M.maximum(a, b),
    "minimum": lambda M, a, b: M.minimum(a, b),
    "eq": lambda M, a, b: a == b,
    "ne": lambda M, a, b: a != b,
    "lt": lambda M, a, b: a < b,
    "le": lambda M, a, b: a <= b,
    "gt": lambda M, a, b: a > b,
    "ge": lambda M, a, b: a >= b,
    "logical_and": lambda M, a, b: M.logical_and(a, b),
    "logical_or": lambda M, a, b: M.logical_or(a, b),
    "logical_xor": lambda M, a, b: M.logical_xor(a, b),
}
# Operations whose result is discrete (bool/int) and therefore must be computed
# from exactly-rounded operands, or compiled and eager could differ by a flip.
DISCRETE_INPUT = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not"}
# Sensitive to tiny differences in their operands (poles, branch points, the
# sign of a zero divisor).
SENSITIVE = {"div", "log", "sqrt"}
MIN_MAX = {"maximum", "minimum"}


def _need(name):
    return 2 if name in SENSITIVE else 1 if name in DISCRETE_INPUT else 0


def _pick(rng, env, min_level=0):
    choices = [i for i, (_, ex) in enumerate(env) if ex >= min_level]
    if not choices:
        return None
    if rng.random() < 0.6:  # mostly extend recent values: longer dependence chains
        return rng.choice(choices[-3:])
    return rng.choice(choices)


def gen_unary(rng, env):
    name = rng.choice(sorted(UNARY))
    fn, cap = UNARY[name]
    i = _pick(rng, env, _need(name))
    if i is None:
        return None
    return Step(f"v{i}.{name}()", fn, [i], 2 if name in DISCRETE_INPUT else min(cap, env[i][1]))


def gen_binary(rng, env):
    name = rng.choice(sorted(BINARY))
    need = _need(name)
    cap = 2 if name in DISCRETE_INPUT else 1 if name in MIN_MAX else 2
    level = (lambda *ls: 2) if name in DISCRETE_INPUT else (lambda *ls: min(cap, *ls))  # noqa: E731
    i = _pick(rng, env, need)
    if i is None:
        return None
    op = BINARY[name]
    r = rng.random()
    tensor_only = name in ("logical_and", "logical_or", "logical_xor", "maximum", "minimum")  # PyTorch's signatures
    if r < 0.35 and not tensor_only:  # a Python number on either side
        s = rng.choice(SCALARS)
        if rng.random() < 0.5:
            return Step(f"{name}(v{i}, {s!r})", lambda M, a, op=op, s=s: op(M, a, s), [i], level(env[i][1]))
        return Step(f"{name}({s!r}, v{i})", lambda M, a, op=op, s=s: op(M, s, a), [i], level(env[i][1]))
    j = _pick(rng, env, need)
    return Step(f"{name}(v{i}, v{j})", op, [i, j], level(env[i][1], env[j][1]))


def gen_where(rng, env):
    c = _pick(rng, env, 1)
    if c is None:
        return None
    a, b = _pick(rng, env), _pick(rng, env)
    cond = lambda M, x: x if x.dtype == _dt(M, "bool") else x != 0  # noqa: E731
    if rng.random() < 0.3:
        s = rng.choice(SCALARS[:8])
        return Step(f"where(v{c}, v{a}, {s!r})", lambda M, x, y, s=s: M.where(cond(M, x), y, s), [c, a], env[a][1])
    return Step(f"where(v{c}, v{a}, v{b})", lambda M, x, y, z: M.where(cond(M, x), y, z), [c, a, b],
                min(env[a][1], env[b][1]))


def _dim_arg(rng, nd):
    if nd == 0:
        return rng.choice([-1, 0])
    return rng.randrange(-nd, nd)


def gen_reduction(rng, env):
    name = rng.choice(["sum", "mean", "amax", "amin", "any", "all", "softmax", "log_softmax"])
    i = _pick(rng, env, 1 if name in ("any", "all") else 0)
    if i is None:
        return None
    x, exact = env[i]
    nd = x.dim()
    if name in ("softmax", "log_softmax"):
        d = _dim_arg(rng, nd)
        return Step(f"v{i}.{name}({d})", lambda M, v, d=d, n=name: getattr(v, n)(d), [i], False)
    keepdim = rng.random() < 0.5
    r = rng.random()
    if r < 0.25:
        kw = {}
    elif r < 0.4 and nd >= 2 and name in ("sum", "mean", "amax", "amin"):
        d0, d1 = rng.sample(range(nd), 2)
        kw = {"dim": (d0, d1 - nd if rng.random() < 0.5 else d1), "keepdim": keepdim}
    else:
        kw = {"dim": _dim_arg(rng, nd), "keepdim": keepdim}
    if name in ("any", "all") or (name == "sum" and x.dtype in (tp.int64, tp.bool)):
        ex = exact and 2
    elif name in ("amax", "amin"):
        ex = min(exact, 1)
    else:
        ex = 0
    return Step(f"v{i}.{name}(**{kw})", lambda M, v, n=name, kw=kw: getattr(v, n)(**kw), [i], ex)


def gen_view(rng, env):
    i = _pick(rng, env)
    x, exact = env[i]
    nd, shape = x.dim(), list(x.shape)
    kind = rng.choice(["view", "reshape", "permute", "transpose", "expand", "slice", "select", "unsqueeze",
                       "flatten"])
    if kind in ("view", "reshape"):
        n = x.numel()
        if rng.random() < 0.3 or nd == 0:
            new = [-1]
        elif nd >= 2 and rng.random() < 0.5:  # merge two neighbouring dims
            d = rng.randrange(nd - 1)
            new = shape[:d] + [shape[d] * shape[d + 1]] + shape[d + 2:]
        else:  # split a dim into (1, size) or (size, 1) or a factor pair
            d = rng.randrange(nd)
            s = shape[d]
            f = next((k for k in (2, 3, 5) if s % k == 0 and s > k), 1)
            new = shape[:d] + rng.choice([[1, s], [s, 1], [f, s // f if f else 0]]) + shape[d + 1:]
        if n == 0 and -1 in new:
            new = shape[::-1] if nd else [0]
        return Step(f"v{i}.{kind}({new})", lambda M, v, k=kind, s=new: getattr(v, k)(*s), [i], exact)
    if kind == "permute" and nd >= 2:
        perm = list(range(nd))
        rng.shuffle(perm)
        return Step(f"v{i}.permute({perm})", lambda M, v, p=perm: v.permute(*p), [i], exact)
    if kind == "transpose" and nd >= 1:
        a, b = _dim_arg(rng, nd), _dim_arg(rng, nd)
        return Step(f"v{i}.transpose({a}, {b})", lambda M, v, a=a, b=b: v.transpose(a, b), [i], exact)
    if kind == "expand":
        new = [rng.choice([2, 3]) if s == 1 else s for s in shape]
        if rng.random() < 0.5:
            new = [rng.choice([1, 2, 4])] + new
        return Step(f"v{i}.expand({new})", lambda M, v, s=new: v.expand(*s), [i], exact)
    if kind == "slice" and nd >= 1:
        d = rng.randrange(nd)
        start, stop, step = rng.choice([None, 0, 1, -2]), rng.choice([None, -1, 2, 100]), rng.choice([1, 1, 2, 3])
        idx = (slice(None),) * d + (slice(start, stop, step),)
        return Step(f"v{i}[{idx}]", lambda M, v, idx=idx: v[idx], [i], exact)
    if kind == "select" and nd >= 1 and shape[0] > 0:
        d = rng.randrange(nd)
        if shape[d] == 0:
            return None
        k = rng.randrange(-shape[d], shape[d])
        return Step(f"v{i}.select({d}, {k})", lambda M, v, d=d, k=k: v.select(d, k), [i], exact)
    if kind == "unsqueeze":
        d = rng.randrange(-nd - 1, nd + 1)
        return Step(f"v{i}.unsqueeze({d})", lambda M, v, d=d: v.unsqueeze(d), [i], exact)
    if kind == "flatten":
        return Step(f"v{i}.flatten()", lambda M, v: v.flatten(), [i], exact)
    return None


def gen_cast(rng, env):
    i = _pick(rng, env)
    x, exact = env[i]
    to = rng.choice(DTYPES)
    if to in ("int64", "bool") and not exact:
        return None  # truncating an approximately computed value could flip
    if to in ("int64", "bool"):
        exact = 2  # the sign of a zero does not survive
    if to == "int64" and x.dtype in (tp.float32, tp.float64):
        # Casting inf/NaN/out-of-range floats to int64 is undefined behaviour in
        # C++ and differs between eager and compiled by design; cast finite,
        # small values only.
        return Step(f"v{i}.nan_to_num().clamp(-1e6, 1e6).to(int64)",
                    lambda M, v: M.where(v == v, v, 0).clamp(-1e6, 1e6).to(_dt(M, "int64")), [i], exact)
    return Step(f"v{i}.to({to})", lambda M, v, to=to: v.to(_dt(M, to)), [i], exact)


def gen_movement(rng, env):
    """Element moves and gathers (flip, roll, repeat, tril/triu, cat, index_select,
    x[idx]) keep exactness; scans and products keep it only for integers."""
    i = _pick(rng, env)
    x, exact = env[i]
    nd, shape = x.dim(), list(x.shape)
    if nd == 0:
        return None
    kind = rng.choice(["flip", "roll", "repeat", "tri", "cat", "index_select", "index", "cumsum", "prod"])
    d = rng.randrange(-nd, nd)
    discrete = x.dtype in (tp.int64, tp.bool)
    if kind == "flip":
        return Step(f"v{i}.flip({d})", lambda M, v, d=d: v.flip(d), [i], exact)
    if kind == "roll":
        k = rng.choice([1, -1, 2, 7])
        if rng.random() < 0.3:
            return Step(f"v{i}.roll({k})", lambda M, v, k=k: v.roll(k), [i], exact)
        return Step(f"v{i}.roll({k}, {d})", lambda M, v, k=k, d=d: v.roll(k, d), [i], exact)
    if kind == "repeat":
        reps = [rng.choice([1, 2]) for _ in range(nd + rng.choice([0, 1]))]
        return Step(f"v{i}.repeat({reps})", lambda M, v, r=reps: v.repeat(*r), [i], exact)
    if kind == "tri" and nd >= 2:
        which, k = rng.choice(["tril", "triu"]), rng.choice([0, 1, -1, 3])
        return Step(f"v{i}.{which}({k})", lambda M, v, w=which, k=k: getattr(v, w)(k), [i], exact)
    if kind == "cat":
        others = [j for j, (y, _) in enumerate(env) if y.dtype == x.dtype and y.dim() == nd and
                  all(a == b for t, (a, b) in enumerate(zip(y.shape, shape)) if t != d % nd)]
        j = rng.choice(others)
        return Step(f"cat([v{i}, v{j}], {d})", lambda M, a, b, d=d: M.cat([a, b], d), [i, j], min(exact, env[j][1]))
    if kind in ("index_select", "index") and shape[d] > 0:
        n = shape[d]
        idx = [rng.randrange(-n if kind == "index" else 0, n) for _ in range(rng.choice([1, 3, 5]))]
        if kind == "index":
            return Step(f"v{i}[tensor({idx})]", lambda M, v, idx=idx: v[M.tensor(idx)], [i], exact)
        return Step(f"v{i}.index_select({d}, {idx})", lambda M, v, d=d, idx=idx: v.index_select(d, M.tensor(idx)),
                    [i], exact)
    if kind == "cumsum":
        return Step(f"v{i}.cumsum({d})", lambda M, v, d=d: v.cumsum(d), [i], exact if discrete else 0)
    if kind == "prod" and x.numel() < 64:
        return Step(f"v{i}.prod({d})", lambda M, v, d=d: v.prod(d), [i], exact if discrete else 0)
    return None


GENERATORS = [(gen_unary, 0.2), (gen_binary, 0.27), (gen_where, 0.07), (gen_reduction, 0.14),
              (gen_view, 0.14), (gen_cast, 0.09), (gen_movement, 0.09)]


# ---------------------------------------------------------------------------
# Programs


class Program:
    def __init__(self, seed):
        rng = random.Random(seed)
        np_rng = np.random.default_rng(seed)
        self.seed = seed
        self.inputs = [_make_input(rng, np_rng) for _ in range(rng.choice([1, 2, 2, 3]))]
        env = [(_to_module(tp, a, lay), 2) for a, lay in self.inputs]
        self.steps = []
        self.expect_error = None
        target = rng.randint(2, 9)
        attempts = 0
        while len(self.steps) < target and attempts < 60:
            attempts += 1
            gen = rng.choices([g for g, _ in GENERATORS], [w for _, w in GENERATORS])[0]
            step = gen(rng, env)
            if step is None:
                continue
            try:
                out = step.fn(tp, *[env[i][0] for i in step.args])
            except Exception as e:  # eager refuses: drop it, or end the program with it
                if rng.random() < 0.08:
                    self.steps.append(step)
                    self.expect_error = type(e)
                    break
                continue
            if not isinstance(out, tp.Tensor):
                continue
            self.steps.append(step)
            env.append((out, step.exact))
        n_in = len(self.inputs)
        produced = list(range(n_in, n_in + len(self.steps)))
        if self.expect_error is None:
            last = produced[-1:] if produced else [0]
            extra = rng.sample(produced[:-1], min(len(produced) - 1, rng.choice([0, 1, 2, 3]))) if produced else []
            self.outputs = last + extra
            self.exact = [env[i][1] for i in self.outputs]
        else:
            self.outputs, self.exact = [], []

    def describe(self):
        ins = ", ".join(f"v{k}: {a.dtype}{list(a.shape)} {lay}" for k, (a, lay) in enumerate(self.inputs))
        n_in = len(self.inputs)
        body = "; ".join(f"v{n_in + k} = {s.text}" for k, s in enumerate(self.steps))
        tail = f" -> raises {self.expect_error.__name__}" if self.expect_error else f" -> {self.outputs}"
        return f"seed {self.seed}: inputs {ins}; {body}{tail}"

    def function(self, M):
        steps, outputs = self.steps, self.outputs

        def fn(*args):
            env = list(args)
            for s in steps:
                env.append(s.fn(M, *[env[i] for i in s.args]))
            return tuple(env[i] for i in outputs)

        return fn

    def args(self, M):
        return [_to_module(M, a, lay) for a, lay in self.inputs]


def _dtype_name(t):
    return str(t.dtype).rsplit(".", 1)[-1]


def _bits_equal(g, r):
    """Bitwise equality that treats every NaN alike."""
    if g.dtype.kind != "f":
        return np.array_equal(g, r)
    gn, rn = np.isnan(g), np.isnan(r)
    if not np.array_equal(gn, rn):
        return False
    return np.array_equal(np.where(gn, 0, g).tobytes(), np.where(rn, 0, r).tobytes()) if g.size else True


def compare(got, ref, exact, scale, what, rtol32=False):
    """None when `got` matches `ref` (tensors of tensorplay or torch), else a message.
    `rtol32`: an approximate value went through float32 somewhere (its error is
    float32's even if the output is float64)."""
    if tuple(got.shape) != tuple(ref.shape):
        return f"{what}: shape {tuple(got.shape)} != {tuple(ref.shape)}"
    if _dtype_name(got) != _dtype_name(ref):
        return f"{what}: dtype {_dtype_name(got)} != {_dtype_name(ref)}"
    g = got.detach().numpy() if hasattr(got, "detach") else got.numpy()
    r = ref.detach().numpy() if hasattr(ref, "detach") else ref.numpy()
    g, r = np.asarray(g), np.asarray(r)
    if g.dtype.kind != "f":
        return None if np.array_equal(g, r) else f"{what}: values differ\n got {g}\n ref {r}"
    if not np.array_equal(np.isnan(g), np.isnan(r)):
        return f"{what}: NaN positions differ\n got {g}\n ref {r}"
    if exact:
        if _bits_equal(g, r):
            return None
        if np.array_equal(np.where(np.isnan(g), 0, g), np.where(np.isnan(r), 0, r)):
            return None if exact == 1 else f"{what}: sign of zero differs\n got {g}\n ref {r}"
        return f"{what}: values differ (exact)\n got {g}\n ref {r}"
    inf_g, inf_r = np.where(np.isinf(g), np.sign(g), 0), np.where(np.isinf(r), np.sign(r), 0)
    fin = np.isfinite(r) & np.isfinite(g)
    rtol = 2e-4 if (g.dtype == np.float32 or rtol32) else 1e-9
    if np.array_equal(inf_g, inf_r) and np.allclose(g[fin], r[fin], rtol=rtol, atol=rtol * scale):
        return None
    return f"{what}: values differ (tolerance {rtol})\n got {g}\n ref {r}"


def _scale(values):
    m = 1.0
    for v in values:
        a = v.numpy()
        if a.dtype.kind == "f" and a.size:
            fin = np.abs(a[np.isfinite(a)])
            if fin.size:
                m = max(m, float(fin.max()))
    return m


def run_program(seed, with_torch=True):
    """Runs one program; returns (category, message). Categories: ok, mismatch,
    compile_error, error_parity, nondeterministic, torch_mismatch."""
    p = Program(seed)
    desc = p.describe()
    args = p.args(tp)
    fn = p.function(tp)
    cf = tp.compile(fn, strict_native=True)
    if p.expect_error is not None:
        try:
            cf(*args)
        except Exception as e:  # noqa: BLE001
            if type(e) is p.expect_error:
                return "ok", desc
            return "error_parity", f"{desc}\n compiled raised {type(e).__name__}: {e}"
        return "error_parity", f"{desc}\n compiled did not raise"
    ref = fn(*args)
    try:
        got = cf(*args)
    except tp.compiler.BackendError as e:
        return "compile_error", f"{desc}\n {e}"
    except Exception as e:  # noqa: BLE001
        return "compile_error", f"{desc}\n {type(e).__name__}: {e}"
    # tp.compile returns a bare tensor for a function returning a 1-tuple (a
    # csrc/compile finding, reported separately); compare the values anyway.
    if isinstance(got, tp.Tensor):
        got = (got,)
    # Magnitudes the program went through bound the tolerance of approximate values.
    env = list(args)
    for s in p.steps:
        env.append(s.fn(tp, *[env[i] for i in s.args]))
    scale = _scale(env)
    f32 = any(v.dtype == tp.float32 for v in env)
    for k, (g, r, ex) in enumerate(zip(got, ref, p.exact)):
        msg = compare(g, r, ex, scale, f"output {k} (v{p.outputs[k]})", f32)
        if msg:
            return "mismatch", f"{desc}\n {msg}"
    again = cf(*args)
    if isinstance(again, tp.Tensor):
        again = (again,)
    for k, (g, h) in enumerate(zip(got, again)):
        if not _bits_equal(g.numpy(), h.numpy()):
            return "nondeterministic", f"{desc}\n output {k} differs between two calls"
    if with_torch and torch is not None:
        try:
            tref = p.function(torch)(*p.args(torch))
        except Exception as e:  # noqa: BLE001
            # TensorPlay accepts more than PyTorch (e.g. view of a layout PyTorch
            # cannot view): an API difference of eager, not a wrong value.
            return "api_difference", f"{desc}\n PyTorch raised {type(e).__name__}: {e}"
        for k, (g, t, ex) in enumerate(zip(got, tref, p.exact)):
            # PyTorch's own float math is not always correctly rounded (its
            # float64 sqrt can be 1 ulp off) and its min/max of +-0 may pick
            # either zero: floats are compared to tolerance against it.
            msg = compare(g, t, 2 if ex and g.dtype in (tp.int64, tp.bool) else 0, scale,
                          f"output {k} (v{p.outputs[k]}) vs PyTorch", f32)
            if msg:
                return "torch_mismatch", f"{desc}\n {msg}"
    return "ok", desc


# Programs whose eager TensorPlay result differs from PyTorch's (not Stax's
# doing: compiled equals eager there). Filled in from the long runs' findings.
KNOWN_EAGER_VS_TORCH = set()


def pytest_generate_tests(metafunc):
    if "seed" in metafunc.fixturenames:
        n = int(os.environ.get("TP_RANDOM_PROGRAMS", "0") or 0)
        if not n:
            n = LONG_COUNT if metafunc.config.getoption("--long", default=False) else CI_COUNT
        metafunc.parametrize("seed", range(n))


def test_random_program_compiled_matches_eager(seed):
    category, msg = run_program(seed, with_torch=seed not in KNOWN_EAGER_VS_TORCH)
    if category == "api_difference":
        pytest.skip(msg)
    assert category == "ok", f"{category}: {msg}"


# ---------------------------------------------------------------------------
# Command line: many programs in worker processes (a crash is a finding).


def _worker(start, stop):
    import faulthandler

    faulthandler.enable()
    for seed in range(start, stop):
        print(f"BEGIN {seed}", flush=True)
        tp.compiler.reset()
        try:
            cat, msg = run_program(seed)
        except Exception as e:  # noqa: BLE001
            cat, msg = "harness_error", f"seed {seed}: {type(e).__name__}: {e}"
        print("RESULT " + json.dumps({"seed": seed, "category": cat, "message": msg}), flush=True)


def _drive(start, count, log):
    counts, findings = {}, []
    seed, stop = start, start + count
    while seed < stop:
        proc = subprocess.Popen([sys.executable, __file__, "--worker", str(seed), str(stop)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        current = None
        for line in proc.stdout:
            if line.startswith("BEGIN "):
                current = int(line.split()[1])
            elif line.startswith("RESULT "):
                r = json.loads(line[7:])
                counts[r["category"]] = counts.get(r["category"], 0) + 1
                if r["category"] != "ok":
                    findings.append(r)
                    log.write(json.dumps(r) + "\n")
                    log.flush()
                seed = r["seed"] + 1
                current = None
        proc.wait()
        err = proc.stderr.read()
        if current is not None:  # the worker died inside a program
            counts["crash"] = counts.get("crash", 0) + 1
            r = {"seed": current, "category": "crash",
                 "message": f"seed {current}: worker exited with {proc.returncode}\n{err[-3000:]}"}
            findings.append(r)
            log.write(json.dumps(r) + "\n")
            log.flush()
            seed = current + 1
        elif proc.returncode != 0 and seed < stop:
            raise RuntimeError(f"worker failed outside a program:\n{err}")
    return counts, findings


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        _worker(int(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1:2] == ["--seed"]:
        seed = int(sys.argv[2])
        print(Program(seed).describe())
        print(*run_program(seed), sep="\n")
    else:
        import argparse

        ap = argparse.ArgumentParser()
        ap.add_argument("--count", type=int, default=2100)
        ap.add_argument("--start", type=int, default=0)
        ap.add_argument("--log", default="random_programs_findings.jsonl")
        a = ap.parse_args()
        with open(a.log, "w") as log:
            counts, findings = _drive(a.start, a.count, log)
        print(json.dumps(counts, sort_keys=True))
        for f in findings[:40]:
            print(f["category"], f["message"][:600], sep=": ")
