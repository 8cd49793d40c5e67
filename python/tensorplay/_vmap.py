"""tp.func.vmap: a function over one example made to run over a batch.

How it works (TensorPlay has no Python-level dispatch hook, so batching
happens on a captured graph rather than on wrapper tensors):
1. The batched tensor leaves of the arguments are picked by in_dims and their
   batch dims moved to the front; the batch sizes must agree.
2. The function is captured (tp.compiler.capture, the C++ tracer) on one
   example: batched leaves sliced at index 0, unbatched ones as they are, non
   tensors baked in. A data gate in the capture (bool(x.sum() > 0), item())
   means the control flow depends on values: an error, as in functorch.
3. The graph is interpreted node by node in Python (GraphModule._node_info,
   _C._call_op through the dispatcher, so autograd and forward AD record
   every call: grad of a vmapped function works) applying the batching rules
   of _batch_rules.py; an operator without a rule runs per example and is
   stacked (counted in `fallback_counts`, warned about when `warn_fallbacks`).
4. Functions that are themselves transforms have rules of their own: vmap of
   grad/grad_and_value/jacrev/jacfwd differentiates the vmapped function
   summed over the batch (the examples are independent, so each example's
   gradient is its slice), vmap of vmap merges the two batch dims. A function
   that calls a transform inside (capture runs without autograd) or that the
   capture refuses runs per example as a whole (counted as "<function>").
"""
import warnings
from collections import Counter

from . import _C
from . import _batch_rules as R

Tensor = _C.Tensor

fallback_counts = Counter()  # operator name -> nodes run per example (tp.func.vmap_fallback_counts)
warn_fallbacks = False

_state = {"capturing": 0}


class _PerExample(Exception):
    """The function cannot be captured for batching: run it once per example."""


def capturing():
    return _state["capturing"] > 0


def refuse_in_capture(what):
    """Called by the tp.func transforms: inside a vmap capture they would run
    without autograd (the tracer records no backward), so the vmapped function
    must run per example."""
    if capturing():
        raise _PerExample(what)


# ---- pytrees with non-tensor leaves ----
def _leaves(tree):
    if isinstance(tree, (tuple, list)):
        out = []
        for x in tree:
            out += _leaves(x)
        return out
    if isinstance(tree, dict):
        return _leaves(list(tree.values()))
    return [tree]


def _rebuild(tree, it):
    if isinstance(tree, (tuple, list)):
        vals = [_rebuild(x, it) for x in tree]
        return type(tree)(vals) if not hasattr(tree, "_fields") else type(tree)(*vals)
    if isinstance(tree, dict):
        return type(tree)((k, _rebuild(v, it)) for k, v in tree.items())
    return next(it)


def _broadcast(dims, tree, what):
    """One dim (int or None) per leaf of `tree`: `dims` is a prefix of its structure."""
    if dims is None or isinstance(dims, int):
        if isinstance(dims, bool):
            raise ValueError(f"vmap: {what} must be int, None or a nested tuple/list/dict of them, got bool")
        return [dims] * len(_leaves(tree))
    if isinstance(dims, (tuple, list)):
        if not isinstance(tree, (tuple, list)) or len(tree) != len(dims):
            raise ValueError(f"vmap: {what}={dims!r} does not match the structure of its argument "
                             f"({type(tree).__name__}{'' if not isinstance(tree, (tuple, list)) else f' of {len(tree)}'})")
        out = []
        for d, t in zip(dims, tree):
            out += _broadcast(d, t, what)
        return out
    if isinstance(dims, dict):
        if not isinstance(tree, dict) or set(dims) != set(tree):
            raise ValueError(f"vmap: {what}={dims!r} does not match the keys of its argument")
        out = []
        for k in tree:
            out += _broadcast(dims[k], tree[k], what)
        return out
    raise ValueError(f"vmap: {what} must be int, None or a nested tuple/list/dict of them, got "
                     f"{type(dims).__name__}")


def _prepare(args, in_dims):
    """(flat leaves with batched tensors moved to dim 0, batched flags, batch size)."""
    if isinstance(in_dims, int) or in_dims is None:
        dims = _broadcast(in_dims, args, "in_dims")
    else:
        if not isinstance(in_dims, (tuple, list)):
            raise ValueError(f"vmap: in_dims must be int, None or a tuple matching the arguments, got "
                             f"{type(in_dims).__name__}")
        if len(in_dims) != len(args):
            raise ValueError(f"vmap: in_dims has {len(in_dims)} entries but the function was called with "
                             f"{len(args)} positional arguments")
        dims = _broadcast(tuple(in_dims), tuple(args), "in_dims")
    leaves = _leaves(args)
    out, flags, B = [], [], None
    for i, (x, d) in enumerate(zip(leaves, dims)):
        if d is None:
            out.append(x)
            flags.append(False)
            continue
        if not isinstance(x, Tensor):
            raise ValueError(f"vmap: in_dim {d} was given for argument leaf {i} of type {type(x).__name__}; "
                             "only Tensors can be mapped over (use None for other values)")
        r = x.dim()
        if not -r <= d < r or r == 0:
            raise ValueError(f"vmap: in_dim {d} is out of range for argument leaf {i} with shape "
                             f"{tuple(x.shape)} (a dim in [{-r}, {r - 1}] was expected)")
        x = x.movedim(d, 0)
        if B is None:
            B = x.shape[0]
        elif x.shape[0] != B:
            sizes = [(j, t.shape[0]) for j, (t, f) in enumerate(zip(out + [x], flags + [True])) if f]
            raise ValueError("vmap: the mapped dims of the inputs have different sizes "
                             f"(argument leaf, size): {sizes}; all mapped inputs need the same batch size")
        out.append(x)
        flags.append(True)
    if B == 0:
        raise ValueError("vmap: the mapped dims have size 0; vmap needs at least one example to trace the function")
    if B is None:
        raise ValueError("vmap: at least one input must be a Tensor with a mapped dim (in_dims are all None)")
    return out, flags, B


def _place_outputs(outs, spec, out_dims, B):
    """Move each output's batch dim (front) to its out_dim; an unbatched one is expanded."""
    flat_dims = _broadcast(out_dims, spec, "out_dims") if not (isinstance(out_dims, (tuple, list))
                                                              and not isinstance(spec, (tuple, list))) else None
    if flat_dims is None:
        if len(out_dims) != 1:
            raise ValueError(f"vmap: out_dims={out_dims!r} has {len(out_dims)} entries for a single output")
        flat_dims = _broadcast(out_dims[0], spec, "out_dims")
    res = []
    for (t, batched), d in zip(outs, flat_dims):
        if d is None:
            if batched:
                raise ValueError("vmap: out_dims is None for an output that depends on the mapped inputs")
            res.append(t)
            continue
        if not batched:
            t = t.unsqueeze(0).expand((B,) + tuple(t.shape))
        r = t.dim()
        if not -r <= d < r:
            raise ValueError(f"vmap: out_dim {d} is out of range for an output of per-example shape "
                             f"{tuple(t.shape[1:])}")
        res.append(t.movedim(0, d))
    return _rebuild(spec, iter(res))


def _check_outputs(out, who):
    for x in _leaves(out):
        if not isinstance(x, Tensor):
            raise ValueError(f"vmap: {who} must return Tensors (or tuples/lists/dicts of them), but it returned "
                             f"a {type(x).__name__}")


# ---- running the function ----
# Reads of a tensor's value into Python. The capture would keep item() in the
# graph as a 0-d tensor, but in eager it is a Python number that differs per
# example (functorch refuses it too); bool/int/float become data gates instead.
_VALUE_READS = ("item", "tolist")


_PACKAGE_DIR = __import__("os").path.dirname(__file__)


def _value_read(name):
    def refuse(self, *a, **k):
        import sys
        caller = sys._getframe(1).f_code
        if caller.co_filename.startswith(_PACKAGE_DIR):
            # A read inside one of TensorPlay's own Python functions (take's and
            # put's bounds check, quantile's argument check, matrix_exp's scaling
            # steps): the user wrote no data dependence, and torch.func batches
            # these; running the function per example gives each example's value.
            raise _PerExample(f"Tensor.{name}() inside tensorplay's {caller.co_name}")
        raise RuntimeError(f"vmap: the function calls Tensor.{name}() on a tensor whose value differs per "
                           "example; reading values into Python (item(), tolist(), data-dependent control "
                           "flow) cannot be vmapped. Keep the computation in tensor operators")
    return refuse


def _run_graph(func, args, leaves, flags, B, randomness):
    """Capture func on one example and interpret the graph batched: (outputs as (tensor, batched), spec)."""
    import tensorplay as tp
    tensor_pos = [i for i, x in enumerate(leaves) if isinstance(x, Tensor)]
    examples = [leaves[i][0] if flags[i] else leaves[i] for i in tensor_pos]
    box = {}

    def flat_fn(*ts):
        full = list(leaves)
        for i, t in zip(tensor_pos, ts):
            full[i] = t
        out = func(*_rebuild(args, iter(full)))
        _check_outputs(out, "the function")
        box["spec"] = out
        return tuple(_leaves(out))

    _state["capturing"] += 1
    saved = {m: getattr(Tensor, m) for m in _VALUE_READS}
    for m in _VALUE_READS:
        setattr(Tensor, m, _value_read(m))
    try:
        gm = tp.compiler.capture(flat_fn, *[t.detach() for t in examples])
    except Exception as e:  # noqa: BLE001
        if isinstance(e, _PerExample) or str(e).startswith("vmap:"):
            raise
        # Anything else the capture refuses (a numpy() call, an unsupported
        # construct) runs eagerly per example, where a genuine error surfaces.
        raise _PerExample(f"capture failed: {e}") from e
    finally:
        for m, f in saved.items():
            setattr(Tensor, m, f)
        _state["capturing"] -= 1
    if gm.gates and all(g["kind"] == "index" for g in gm.gates):
        # x[i] with a 0-d index tensor: a select by a value that may differ per
        # example (torch.func batches it); each example runs as written.
        raise _PerExample("x[i] with a 0-d index tensor")
    if gm.gates:
        raise RuntimeError("vmap: the function's Python control flow depends on tensor values ("
                           f"{gm.gates[0]['read']}); it would differ per example and cannot be vmapped. "
                           "Use tp.where (or compute both branches) instead")
    ins, fl = [leaves[i] for i in tensor_pos], [flags[i] for i in tensor_pos]
    outs = _interpret(gm, ins, fl, B, randomness)
    mutated = list(gm.mutated_inputs)
    if mutated:
        # The function wrote these inputs in place: their final values are the
        # graph's last outputs. Write them back (the batched leaves are movedim
        # views of the caller's tensors, so the caller sees the write).
        news, outs = outs[len(outs) - len(mutated):], outs[:len(outs) - len(mutated)]
        for k, (v, batched) in zip(mutated, news):
            if not fl[k] and batched:
                raise RuntimeError("vmap: the function writes in place into an unmapped input a value that "
                                   "differs per example")
            ins[k].copy_(v)
    return outs, box["spec"]


def _interpret(gm, inputs, flags, B, randomness):
    from . import no_grad
    import contextlib
    env, shapes, multi = {}, {}, {}
    outs = None
    for n in gm._node_info:
        op, name = n["op"], n["name"]
        if op == "placeholder":
            k = n["input_index"]
            # past the function's inputs: the generator state a captured random draw reads (philox_random)
            env[name] = (inputs[k], flags[k]) if k < len(inputs) else (None, False)
            shapes[name] = n["shape"]
        elif op == "get_attr":
            env[name] = (n["constant"], False)
            shapes[name] = n["shape"]
        elif op == "output":
            outs = [env[a] if isinstance(a, str) else (a, False) for a in n["args"]]
        else:
            shapes[name] = n["shape"]
            target = n["target"]
            if target == "getitem":
                env[name] = multi[n["args"][0]][n["attrs"]["index"]]
                continue
            vals = [env[a] if isinstance(a, str) else (a, False) for a in n["args"]]
            in_shapes = [shapes[a] if isinstance(a, str) else () for a in n["args"]]
            ctx = no_grad() if not n["grad_enabled"] else contextlib.nullcontext()
            with ctx:
                res, batched = _run_node(n, vals, in_shapes, B, randomness)
            if n["results"]:
                multi[name] = [(r, batched) for r in res]
            else:
                env[name] = (res[0], batched)
    return outs


def _random_draw(n, B, randomness):
    """A captured random draw (philox_random) run as the eager draw from the global
    generator: one draw of the per-example size ('same') or B of them ('different')."""
    if randomness == "error":
        raise RuntimeError("vmap: called a random operation under randomness='error'; pass "
                           "randomness='different' (independent per example) or 'same' (one draw shared)")
    a = n["attrs"]
    dist = a["distribution"]
    eager = {"uniform": "rand", "normal": "randn", "randint": "randint.low"}.get(dist)
    if eager is None:
        raise RuntimeError(f"vmap: random draws of kind '{dist}' are not supported inside vmap")
    attrs = {"dtype": a["dtype"], "size": list(a["size"])}
    if dist == "randint":
        attrs["low"], attrs["high"] = a["low"], a["high"]
    if randomness == "same":
        return _C._call_op(eager, [], attrs), False
    attrs["size"] = [B] + attrs["size"]
    return _C._call_op(eager, [], attrs), True


def _run_node(n, vals, in_shapes, B, randomness):
    target = n["target"]
    if target == "philox_random":
        return _random_draw(n, B, randomness)
    if n["custom"]:
        return _per_example_node(n, vals, B), True
    random = R.is_random(target)
    if random:
        if randomness == "error":
            raise RuntimeError(f"vmap: called random operation {target} under randomness='error'; pass "
                               "randomness='different' (independent per example) or 'same' (one draw shared)")
        if randomness == "same":
            if any(b for _, b in vals):
                raise RuntimeError(f"vmap: randomness='same' for {target} on a batched input is not supported")
            return _C._call_op(target, [v for v, _ in vals], n["attrs"]), False
    if not any(b for _, b in vals):
        if random:  # 'different': one independent draw per example
            if "size" in n["attrs"] and not vals:
                attrs = dict(n["attrs"])
                attrs["size"] = [B] + list(attrs["size"])
                return _C._call_op(target, [], attrs), True
            return _per_example_node(n, vals, B), True
        return _C._call_op(target, [v for v, _ in vals], n["attrs"]), False
    try:
        return R.apply(n, vals, in_shapes, B), True
    except R.NoRule:
        return _per_example_node(n, vals, B), True


def _per_example_node(n, vals, B):
    fallback_counts[n["target"]] += 1
    if warn_fallbacks:
        warnings.warn(f"vmap: no batching rule for {n['target']}; it runs once per example (slower)")
    return R.per_example(n, vals, B)


def _whole_per_example(func, args, leaves, flags, B, reason, randomness):
    """Run func once per example and stack (the transforms-inside / uncapturable fallback)."""
    fallback_counts["<function>"] += 1
    if warn_fallbacks:
        warnings.warn(f"vmap: the function runs once per example ({reason})")
    import tensorplay as tp
    results = []
    spec = None
    # randomness='same': every example starts from the same generator state, so
    # its draws are the ones all examples share (the capture path draws once).
    rng = tp.get_rng_state() if randomness in ("same", "error") else None
    for i in range(B):
        if randomness == "same":
            tp.set_rng_state(rng)
        full = [x[i] if f else x for x, f in zip(leaves, flags)]
        out = func(*_rebuild(args, iter(full)))
        _check_outputs(out, "the function")
        spec = out
        results.append(_leaves(out))
        if randomness == "error" and not bool((tp.get_rng_state() == rng).all()):
            raise RuntimeError("vmap: the function draws random numbers under randomness='error'; pass "
                               "randomness='different' (independent per example) or 'same' (one draw shared)")
    outs = [(R.stack_examples([r[k] for r in results], "the function"), True) for k in range(len(results[0]))]
    return outs, spec


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """func mapped over a batch dim of its inputs: vmap(f)(xs) stacks f(x) for the x along
    dim `in_dims` of xs (per argument/leaf: an int, or None for an argument shared by all
    examples), with the batch placed at `out_dims` of each output."""
    if not callable(func):
        raise TypeError(f"vmap: func must be callable, got {type(func).__name__}")
    if randomness not in ("error", "different", "same"):
        raise ValueError(f"vmap: randomness must be 'error', 'different' or 'same', got {randomness!r}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size must be None or a positive int, got {chunk_size!r}")

    def wrapped(*args, **kwargs):
        if kwargs:
            return vmap(lambda *a: func(*a, **kwargs), in_dims, out_dims, randomness, chunk_size=chunk_size)(*args)
        # Inside an outer vmap's capture this runs as usual: the inner capture
        # nests, and the batched operators it runs are recorded by the outer one.
        leaves, flags, B = _prepare(args, in_dims)
        if chunk_size is not None and chunk_size < B:
            return _chunked(args, leaves, flags, B)
        outs, spec = _batched_call(func, args, leaves, flags, B, randomness)
        return _place_outputs(outs, spec, out_dims, B)

    def _chunked(args, leaves, flags, B):
        import tensorplay as tp
        parts = []
        for s in range(0, B, chunk_size):
            sub = [x[s:s + chunk_size] if f else x for x, f in zip(leaves, flags)]
            outs, spec = _batched_call(func, args, sub, flags, min(chunk_size, B - s), randomness)
            parts.append(outs)
        outs = []
        for k in range(len(parts[0])):
            if all(not p[k][1] for p in parts):
                outs.append(parts[0][k])
            else:
                outs.append((tp.cat([p[k][0] if p[k][1] else p[k][0].unsqueeze(0).expand(
                    (c,) + tuple(p[k][0].shape)) for p, c in zip(parts, _chunk_sizes(B))]), True))
        return _place_outputs(outs, spec, out_dims, B)

    def _chunk_sizes(B):
        return [min(chunk_size, B - s) for s in range(0, B, chunk_size)]

    wrapped._tp_transform = ("vmap", func, in_dims, out_dims, randomness)
    wrapped.__name__ = f"vmap({getattr(func, '__name__', 'f')})"
    wrapped.__doc__ = getattr(func, "__doc__", None)
    return wrapped


def _batched_call(func, args, leaves, flags, B, randomness):
    tag = getattr(func, "_tp_transform", None)
    if tag is not None:
        from . import _vmap_transforms
        r = _vmap_transforms.batch(tag, args, leaves, flags, B, randomness)
        if r is not None:
            return r
    try:
        return _run_graph(func, args, leaves, flags, B, randomness)
    except _PerExample as e:
        return _whole_per_example(func, args, leaves, flags, B, str(e), randomness)
