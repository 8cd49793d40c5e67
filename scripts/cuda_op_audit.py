#!/usr/bin/env python
"""Lists the registered operators that have no CUDA path.

    python scripts/cuda_op_audit.py --cpu --json plan.json   # which operators run on small CPU inputs
    python scripts/cuda_op_audit.py --json audit.json        # on a GPU: the same calls on CUDA inputs

For every registered operator (tp._C._op_schemas()), arguments are made from
its schema: tensors of small shapes (float32 [4, 4]; an int64 tensor of
in-range values for index-like names, a bool tensor for masks), the
schema's defaults, and small numbers for required int/float/Scalar
arguments; a few operators get hand-picked arguments (OVERRIDES). An
operator whose CPU call fails with these arguments is listed as "untested"
(it needs inputs this script cannot guess). The others are called again with
the tensors on the GPU: a NotImplementedError naming the device is "missing",
another exception "error", else "ok". In-place operators are called on a
clone. Composites run as their parts, so a composite is "missing" when one of
its parts is: what a user of that operator sees."""
from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import time

import tensorplay as tp

INDEX_NAMES = {"index", "indices", "target", "repeats", "boundaries_idx"}
MASK_NAMES = {"mask", "condition"}

# name -> callable(T) returning (args, kwargs), T(shape, kind) making a CPU tensor
OVERRIDES = {
    "searchsorted": lambda T: ((T((4,), "sorted"), T((3,))), {}),
    "bucketize": lambda T: ((T((3,)), T((4,), "sorted")), {}),
    "bincount": lambda T: ((T((6,), "count"),), {}),
    "histc": lambda T: ((T((8,)),), {}),
    "one_hot": lambda T: ((T((5,), "count"),), {}),
    "multinomial": lambda T: ((T((3, 4), "prob"), 2), {}),
    "cross": lambda T: ((T((4, 3)), T((4, 3))), {}),
    "linalg_cross": lambda T: ((T((4, 3)), T((4, 3))), {}),
    "isin": lambda T: ((T((4, 4), "count"), T((3,), "count")), {}),
    "tril_indices": lambda T: ((4, 4), {}),
    "triu_indices": lambda T: ((4, 4), {}),
    "embedding": lambda T: ((T((5,), "count"), T((6, 3))), {}),
    "repeat_interleave.Tensor": lambda T: ((T((4,), "count"),), {}),
    "cross_entropy": lambda T: ((T((4, 5)), T((4,), "count")), {}),
    "nll_loss": lambda T: ((T((4, 5)), T((4,), "count")), {}),
    "bmm": lambda T: ((T((2, 3, 4)), T((2, 4, 5))), {}),
    "baddbmm": lambda T: ((T((2, 3, 5)), T((2, 3, 4)), T((2, 4, 5))), {}),
    "conv2d": lambda T: ((T((1, 2, 5, 5)), T((3, 2, 3, 3))), {}),
    "conv1d": lambda T: ((T((1, 2, 5)), T((3, 2, 3))), {}),
    "max_pool2d": lambda T: ((T((1, 2, 4, 4)), [2]), {}),
    "max_pool2d_with_indices": lambda T: ((T((1, 2, 4, 4)), [2]), {}),
    "avg_pool2d": lambda T: ((T((1, 2, 4, 4)), [2]), {}),
    "adaptive_avg_pool2d": lambda T: ((T((1, 2, 4, 4)), [2, 2]), {}),
    "index_select": lambda T: ((T((4, 4)), 0, T((3,), "index")), {}),
    "index_add": lambda T: ((T((4, 4)), 0, T((3,), "index"), T((3, 4))), {}),
    "index_add_": lambda T: ((T((4, 4)), 0, T((3,), "index"), T((3, 4))), {}),
    "index_copy": lambda T: ((T((4, 4)), 0, T((3,), "index"), T((3, 4))), {}),
    "index_fill": lambda T: ((T((4, 4)), 0, T((3,), "index"), 1.0), {}),
    "dot": lambda T: ((T((4,)), T((4,))), {}),
    "outer": lambda T: ((T((4,)), T((3,))), {}),
    "einsum": lambda T: (("ij,jk->ik", [T((3, 4)), T((4, 5))]), {}),
    "scatter_reduce.two": lambda T: ((T((4, 4)), 0, T((4, 4), "index"), T((4, 4)), "sum"), {}),
    "clamp": lambda T: ((T((4, 4)), 0.7), {}),
    "bernoulli": lambda T: ((T((4, 4), "unit"),), {}),
    "roll": lambda T: ((T((4, 4)), [1], [0]), {}),
    "permute": lambda T: ((T((4, 4)), [1, 0]), {}),
    "movedim": lambda T: ((T((4, 4)), 0, 1), {}),
    "bitwise_and": lambda T: ((T((4, 4), "index"), T((4, 4), "index")), {}),
    "bitwise_or": lambda T: ((T((4, 4), "index"), T((4, 4), "index")), {}),
    "bitwise_xor": lambda T: ((T((4, 4), "index"), T((4, 4), "index")), {}),
    "bitwise_not": lambda T: ((T((4, 4), "index"),), {}),
    "bitwise_left_shift": lambda T: ((T((4, 4), "index"), T((4, 4), "index")), {}),
    "native_layer_norm": lambda T: ((T((3, 4)), [4], T((4,)), T((4,)), 1e-5), {}),
    "batch_norm": lambda T: ((T((3, 4)), T((4,)), T((4,)), T((4,)), T((4,)), True, 0.1, 1e-5, False), {}),
    "masked_scatter": lambda T: ((T((4, 4)), T((4, 4), "mask"), T((16,))), {}),
    "masked_scatter_": lambda T: ((T((4, 4)), T((4, 4), "mask"), T((16,))), {}),
}


def make_tensor(shape, kind="float"):
    if kind in ("index", "count"):
        return (tp.arange(tp.tensor(shape).prod().item() if shape else 1) % 3).reshape(shape).to(tp.int64)
    if kind == "mask":
        return (tp.arange(tp.tensor(shape).prod().item()) % 2 == 0).reshape(shape)
    if kind == "sorted":
        return tp.arange(float(shape[0]))
    if kind == "unit":
        return tp.rand(*shape)
    if kind == "prob":
        return tp.rand(*shape) + 0.1
    return tp.rand(*shape) + 0.5


def parse_schema(text):
    args = text[text.index("(") + 1:text.rindex(") ->")]
    out = []
    for a in args.split(", "):
        if not a or a == "*":
            continue
        typ, rest = a.split(" ", 1)
        name, _, default = rest.partition("=")
        out.append((typ, name, default if _ else None))
    return out


def default_value(typ, name, default):
    """(positional value, keep): None and skip optional arguments without a default."""
    if default is not None:
        return None, False  # the schema's default applies
    base = typ.rstrip("?")
    if typ.endswith("?"):
        return None, False
    if base.startswith("Tensor["):
        return [make_tensor((4,), "index")], True
    if base.startswith("Tensor"):
        if name in INDEX_NAMES:
            return make_tensor((4, 4), "index"), True
        if name in MASK_NAMES:
            return make_tensor((4, 4), "mask"), True
        return make_tensor((4, 4)), True
    if base.startswith("int["):
        return ([0] if "dim" in name else [4, 4]), True
    if base == "int":
        return (0 if "dim" in name else 2), True
    if base == "float":
        return 0.5, True
    if base == "Scalar":
        return 1, True
    if base == "bool":
        return False, True
    raise ValueError(f"no default for {typ} {name}")


def build(name, schema):
    if name in OVERRIDES:
        return OVERRIDES[name](make_tensor)
    args = []
    for typ, arg, default in parse_schema(schema):
        v, keep = default_value(typ, arg, default)
        if not keep:
            break  # positional arguments after the first defaulted one are left to their defaults
        args.append(v)
    return tuple(args), {}


def to_cuda(v):
    if isinstance(v, tp.Tensor):
        return v.cuda()
    if isinstance(v, (list, tuple)):
        return type(v)(to_cuda(x) for x in v)
    return v


def call(name, args, kwargs):
    base = name.split(".")[0]
    fn = tp._C._op_functions.get(name) or tp._C._op_functions.get(base)
    if base.endswith("_") and args and isinstance(args[0], tp.Tensor):
        args = (args[0].clone(),) + tuple(args[1:])
        meth = getattr(args[0], base, None)
        if meth is not None:
            return meth(*args[1:], **kwargs)
    if fn is None:
        raise LookupError("no Python function")
    return fn(*args, **kwargs)


class Timeout(Exception):
    pass


def _alarm(*_):
    raise Timeout()


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true", help="only the CPU calls (no GPU needed)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--budget", type=float, default=90.0, help="seconds for the whole GPU pass")
    ap.add_argument("--only", help="regular expression on operator names")
    a = ap.parse_args(argv)
    signal.signal(signal.SIGALRM, _alarm)
    schemas = tp._C._op_schemas()
    res = {}
    start = time.time()
    for name in sorted(schemas):
        if a.only and not re.fullmatch(a.only, name):
            continue
        try:
            args, kwargs = build(name, schemas[name])
            call(name, args, kwargs)
        except Exception as e:  # noqa: BLE001 (any failure means: inputs not guessed)
            res[name] = {"status": "untested", "why": f"{type(e).__name__}: {str(e)[:160]}"}
            continue
        if a.cpu:
            res[name] = {"status": "cpu-ok"}
            continue
        if time.time() - start > a.budget:
            res[name] = {"status": "not-reached"}
            continue
        signal.alarm(10)
        try:
            call(name, to_cuda(args), to_cuda(kwargs))
            tp.cuda.synchronize()
            res[name] = {"status": "ok"}
        except NotImplementedError as e:
            res[name] = {"status": "missing", "why": str(e)[:200]}
        except Timeout:
            res[name] = {"status": "error", "why": "timeout"}
        except Exception as e:  # noqa: BLE001
            res[name] = {"status": "error", "why": f"{type(e).__name__}: {str(e)[:200]}"}
        finally:
            signal.alarm(0)
    counts = {}
    for r in res.values():
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(json.dumps(counts))
    for status in ("missing", "error"):
        names = sorted(n for n, r in res.items() if r["status"] == status)
        print(f"{status} ({len(names)}): {' '.join(names)}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
