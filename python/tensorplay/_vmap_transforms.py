"""Batching rules for tp.func transforms under tp.func.vmap.

The capture that vmap interprets runs without autograd, so a transform can
not be batched through the graph. Instead each transform has a rule built on
independence: under vmap, example b's output depends only on example b's
inputs, so
- the gradient of sum_b f(x_b) with respect to the stacked inputs X is the
  stack of the per-example gradients (vmap(grad(f)) = grad(sum . vmap(f)));
- the Jacobian of sum_b f(x_b) (shape out + (B,) + in) holds example b's
  Jacobian at batch index b (jacrev/jacfwd);
- vmap of vmap maps over the product of the two batch sizes at once.
Arguments of the transform that are not mapped (the parameters, for
per-sample gradients) are expanded to one independent copy per example first,
so each example gets its own gradient. A rule returns None where it does not
apply; vmap then runs the function per example.
"""
from . import _C
from . import _vmap as V

Tensor = _C.Tensor


def batch(tag, args, leaves, flags, B, randomness):
    kind = tag[0]
    if kind in ("grad", "grad_and_value"):
        return _grad(tag, args, leaves, flags, B, randomness)
    if kind in ("jacrev", "jacfwd"):
        return _jac(tag, args, leaves, flags, B, randomness)
    if kind == "vmap":
        return _vmap_vmap(tag, args, leaves, flags, B, randomness)
    return None


def _positional(args, leaves, flags):
    """Per positional argument: (its value with batched leaves at dim 0, its in_dims pytree)."""
    it = iter(zip(leaves, flags))
    vals, dims = [], []
    for a in args:
        n = len(V._leaves(a))
        chunk = [next(it) for _ in range(n)]
        vals.append(V._rebuild(a, iter([x for x, _ in chunk])))
        dims.append(V._rebuild(a, iter([0 if f else None for _, f in chunk])))
    return vals, dims


def _expand_tree(tree, dims, B):
    """Every tensor leaf of `tree` batched at 0 (unmapped ones become B independent copies)."""
    ls, ds = V._leaves(tree), V._leaves(dims)
    out = []
    for x, d in zip(ls, ds):
        if d is None:
            if not isinstance(x, Tensor):
                return None
            x = x.unsqueeze(0).expand((B,) + tuple(x.shape)).contiguous()
        out.append(x)
    return V._rebuild(tree, iter(out)), V._rebuild(tree, iter([0] * len(out)))


def _differentiated(f, args, leaves, flags, B, nums, randomness, tensors_only):
    """The positional values with each differentiated one expanded to a per-example
    copy of batch size B (so its gradient is per example), and vmap(f) over them;
    None when an argument cannot be expanded (the caller falls back)."""
    vals, dims = _positional(args, leaves, flags)
    for i in nums:
        if tensors_only and not isinstance(vals[i], Tensor):
            return None
        e = _expand_tree(vals[i], dims[i], B)
        if e is None:
            return None
        vals[i], dims[i] = e
    return vals, V.vmap(f, in_dims=tuple(dims), randomness=randomness)


def _with(vals, nums, xs):
    """vals with the differentiated positions nums replaced by xs."""
    full = list(vals)
    for i, x in zip(nums, xs):
        full[i] = x
    return full


def _grad(tag, args, leaves, flags, B, randomness):
    from . import func as F
    _, f, argnums, has_aux, with_value = tag
    n = len(args)
    nums = F._argnums(argnums, n, "grad")
    prepared = _differentiated(f, args, leaves, flags, B, nums, randomness, tensors_only=False)
    if prepared is None:
        return None
    vals, inner = prepared

    def summed(*xs):
        out = inner(*_with(vals, nums, xs))
        aux = None
        if has_aux:
            out, aux = out
        if not isinstance(out, Tensor) or out.dim() != 1:
            what = f"shape {tuple(out.shape[1:])}" if isinstance(out, Tensor) else type(out).__name__
            raise RuntimeError(f"grad(f): expected f(*args) to return a scalar Tensor, got {what}")
        return out.sum(), (out, aux)

    gs, (value, aux) = F.grad(summed, argnums=tuple(range(len(nums))), has_aux=True)(*(vals[i] for i in nums))
    g = gs[0] if isinstance(argnums, int) else gs
    if with_value:
        res = (g, (value, aux)) if has_aux else (g, value)
    else:
        res = (g, aux) if has_aux else g
    flat = V._leaves(res)
    if not all(isinstance(x, Tensor) for x in flat):
        return None
    return [(x, True) for x in flat], res


def _jac(tag, args, leaves, flags, B, randomness):
    from . import func as F
    kind, f, argnums, has_aux = tag[:4]
    extra = {"randomness": tag[4]} if kind == "jacfwd" else {}
    if has_aux:
        return None
    nums = F._argnums(argnums, len(args), kind)
    prepared = _differentiated(f, args, leaves, flags, B, nums, randomness, tensors_only=True)
    if prepared is None:
        return None
    vals, inner = prepared

    def summed(*xs):
        out = inner(*_with(vals, nums, xs))
        if not isinstance(out, Tensor):
            raise RuntimeError(f"{kind}: expected f to return a single Tensor")
        return out.sum(0)

    transform = F.jacrev if kind == "jacrev" else F.jacfwd
    js = transform(summed, argnums=tuple(range(len(nums))), **extra)(*(vals[i] for i in nums))
    # each: out_shape + (B,) + in_shape -> batch first
    js = tuple(j.movedim(j.dim() - vals[i].dim(), 0) for j, i in zip(js, nums))
    res = js[0] if isinstance(argnums, int) else js
    return [(x, True) for x in V._leaves(res)], res


def _vmap_vmap(tag, args, leaves, flags, B1, randomness):
    """vmap(vmap(f, in2, out2), in1, out1): both batch dims folded into one of size B1*B2."""
    _, f, in2, out2, rnd2 = tag
    vals, dims1 = _positional(args, leaves, flags)
    # per outer example: the inner in_dims apply to the arguments without their outer batch dim
    per_example = [V._rebuild(v, iter([x[0] if d == 0 else x for x, d in zip(V._leaves(v), V._leaves(dd))]))
                   for v, dd in zip(vals, dims1)]
    try:
        inner_leaves, inner_flags, B2 = V._prepare(tuple(per_example), in2)
    except ValueError:
        return None
    if not isinstance(in2, int) and in2 is not None:
        d2 = V._broadcast(tuple(in2), tuple(per_example), "in_dims")
    else:
        d2 = V._broadcast(in2, tuple(per_example), "in_dims")
    merged = []
    for x, f1, d in zip(leaves, flags, d2):
        if not isinstance(x, Tensor):
            merged.append(x)
            continue
        if not f1 and d is None:
            merged.append(x)
            continue
        if not f1:
            x = x.unsqueeze(0).expand((B1,) + tuple(x.shape))
        if d is None:
            x = x.unsqueeze(1).expand((B1, B2) + tuple(x.shape[1:]))
        else:
            x = x.movedim(d % (x.dim() - 1) + 1, 1)
        merged.append(x.reshape((B1 * B2,) + tuple(x.shape[2:])))
    mflags = [isinstance(x, Tensor) and (f1 or d is not None) for x, f1, d in zip(leaves, flags, d2)]
    outs, spec = V._batched_call(f, args, merged, mflags, B1 * B2, rnd2)
    # back to (B1, B2, ...) and the inner out_dims placed within each outer example
    res = []
    for t, batched in outs:
        if not batched:
            t = t.unsqueeze(0).expand((B1 * B2,) + tuple(t.shape))
        res.append((t.reshape((B1, B2) + tuple(t.shape[1:])), True))
    inner_placed = []
    for (t, _), d in zip(res, V._broadcast(out2 if not isinstance(out2, (tuple, list)) or isinstance(
            spec, (tuple, list)) else out2[0], spec, "out_dims")):
        if d is None:
            return None
        r = t.dim() - 1
        inner_placed.append((t.movedim(1, d % r + 1), True))
    return inner_placed, spec
