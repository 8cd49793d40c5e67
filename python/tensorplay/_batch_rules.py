"""Batching rules of tp.func.vmap: how one operator node of a captured graph
runs on values carrying a batch dimension.

A value in the interpreter (_vmap.py) is a pair (tensor, batched): when
batched, the tensor's dim 0 is the vmap batch and the rest is the per-example
value whose logical shape the capture recorded (node["shape"]); unbatched
values are the per-example value itself, shared by all examples. A rule gets
the node, the input pairs (numbers and None pass through as (x, False)), the
logical shapes of the inputs and the batch size, and returns the output
tensor(s) with the batch at dim 0 (or unbatched when it says so). An operator
without a rule runs once per example (`per_example`), which is always correct.
"""
from . import _C

_call = _C._call_op


def _ex(v, shape):  # logical rank of an input
    return len(shape) if shape is not None else 0


def _pad(t, batched, rank, out_rank):
    """A batched [B, *s] tensor of logical rank `rank` as [B, 1.., *s] of logical
    rank `out_rank`, so right-aligned broadcasting against the others keeps the
    batch dim in front."""
    if not batched or rank >= out_rank:
        return t
    return t.reshape((t.shape[0],) + (1,) * (out_rank - rank) + tuple(t.shape[1:]))


def _norm(d, rank):
    r = max(rank, 1)
    if not -r <= d < r:
        raise IndexError(f"dim {d} out of range for a tensor of rank {rank}")
    return d % r


def _materialize(t, batched, B):
    return t if batched else t.unsqueeze(0).expand((B,) + tuple(t.shape))


# ---- families ----
POINTWISE = set("""
abs neg exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh
sigmoid relu relu6 gelu silu mish elu selu celu leaky_relu hardtanh hardsigmoid hardswish softplus softsign
erf erfc erfinv sign sgn floor ceil round trunc frac reciprocal square logit nan_to_num clamp clamp_min clamp_max
add sub mul div true_divide floor_divide remainder fmod pow atan2 maximum minimum fmax fmin hypot copysign
eq ne lt le gt ge logical_and logical_or logical_xor logical_not bitwise_and bitwise_or bitwise_xor bitwise_not
where lerp addcmul addcdiv clone contiguous _to_copy to alias detach positive isnan isinf isfinite
xlogy threshold logaddexp logaddexp2 rsub masked_fill signbit heaviside sinc deg2rad rad2deg
""".split())

# Operators whose `dim`-like attributes index the (single or first) input:
# shifted by one past the batch. value: (attribute names, rank source) where
# rank source "in" is the first input's logical rank, "out" the output's.
DIM_ATTRS = {
    "sum": (("dim",), "in"), "mean": (("dim",), "in"), "prod": (("dim",), "in"),
    "amax": (("dim",), "in"), "amin": (("dim",), "in"), "max": (("dim",), "in"), "min": (("dim",), "in"),
    "argmax": (("dim",), "in"), "argmin": (("dim",), "in"), "logsumexp": (("dim",), "in"),
    "softmax": (("dim",), "in"), "log_softmax": (("dim",), "in"), "var": (("dim",), "in"),
    "std": (("dim",), "in"), "var_mean": (("dim",), "in"), "std_mean": (("dim",), "in"),
    "any": (("dim",), "in"), "all": (("dim",), "in"), "norm": (("dim",), "in"),
    "cumsum": (("dim",), "in"), "cumprod": (("dim",), "in"), "cummax": (("dim",), "in"),
    "cummin": (("dim",), "in"), "logcumsumexp": (("dim",), "in"), "flip": (("dims",), "in"),
    "select": (("dim",), "in"), "slice": (("dim",), "in"), "narrow": (("dim",), "in"),
    "squeeze": (("dim",), "in"), "unsqueeze": (("dim",), "out"), "transpose": (("dim0", "dim1"), "in"),
    "movedim": (("source", "destination"), "in"), "split": (("dim",), "in"),
    "split_with_sizes": (("dim",), "in"), "chunk": (("dim",), "in"), "unbind": (("dim",), "in"),
    "sort": (("dim",), "in"), "argsort": (("dim",), "in"), "topk": (("dim",), "in"),
    "kthvalue": (("dim",), "in"), "median": (("dim",), "in"), "mode": (("dim",), "in"),
    "index_select": (("dim",), "in"), "roll": (("dims",), "in"), "diff": (("dim",), "in"),
    "glu": (("dim",), "in"), "count_nonzero": (("dim",), "in"), "nansum": (("dim",), "in"),
    "nanmean": (("dim",), "in"), "diagonal": (("dim1", "dim2"), "in"),
}
# A reduction over all dims when `dim` is None (or [] for these).
ALL_WHEN_EMPTY = {"sum", "mean", "logsumexp", "amax", "amin", "nansum", "nanmean", "prod", "var", "std",
                  "var_mean", "std_mean", "norm", "count_nonzero", "any", "all"}
RANDOM = ("rand", "randn", "randint", "normal", "uniform", "bernoulli", "dropout", "multinomial",
          "exponential", "poisson", "randperm", "rrelu", "geometric", "cauchy", "log_normal")
FACTORIES = {"zeros", "ones", "full", "empty", "arange", "linspace", "logspace", "eye", "scalar_tensor",
             "tensor", "empty_strided"}


def is_random(name):
    return any(r in name for r in RANDOM) and not name.endswith("_loss")  # poisson_nll_loss draws nothing


class NoRule(Exception):
    """This node's inputs are outside what its rule handles: run it per example."""


def _shift_dims(node, vals, shapes):
    name = node["target"].split(".")[0]
    keys, src = DIM_ATTRS[name]
    t, batched = vals[0]
    if not batched:
        raise NoRule
    attrs = dict(node["attrs"])
    rank = len(shapes[0]) if src == "in" else len(node["shape"])
    if name == "roll" and not attrs.get("dims"):
        # roll without dims rolls the flattened example (not the flattened batch)
        if any(b for _, b in vals[1:]):
            raise NoRule
        flat = t.reshape(t.shape[0], -1)
        return [_call(node["target"], [flat], dict(attrs, dims=[1]))[0].reshape(tuple(t.shape))]
    for k in keys:
        if k not in attrs:
            continue
        d = attrs[k]
        if d is None or (isinstance(d, list) and not d and name in ALL_WHEN_EMPTY):
            if name not in ALL_WHEN_EMPTY or rank == 0:
                raise NoRule
            attrs[k] = list(range(1, rank + 1))
        elif isinstance(d, list):
            attrs[k] = [_norm(x, rank) + 1 for x in d]
        else:
            if rank == 0 and name not in ("unsqueeze",):
                raise NoRule
            attrs[k] = _norm(d, rank) + 1
    if "dim" in DIM_ATTRS[name][0] and "dim" not in attrs:
        raise NoRule  # a reduce-all overload (max(x)): per example
    rest = [v for v, _ in vals[1:]]
    if any(b for _, b in vals[1:]):
        raise NoRule
    return _call(node["target"], [t] + rest, attrs)


def _pointwise(node, vals, shapes):
    out_rank = len(node["shape"])
    ins = []
    for (t, b), s in zip(vals, shapes):
        ins.append(_pad(t, b, _ex(t, s), out_rank) if b else t)
    return _call(node["target"], ins, node["attrs"])


def _view(node, vals, shapes):
    t, b = vals[0]
    if not b:
        raise NoRule
    return [t.reshape((t.shape[0],) + tuple(node["shape"]))]  # the per-example result shape, -1 resolved


def _expand(node, vals, shapes):
    t, b = vals[0]
    if not b:
        raise NoRule
    out = tuple(node["shape"])
    t = _pad(t, True, len(shapes[0]), len(out))
    return [t.expand((t.shape[0],) + out)]


def _permute(node, vals, shapes):
    t, b = vals[0]
    if not b:
        raise NoRule
    rank = len(shapes[0])
    return [t.permute([0] + [_norm(d, rank) + 1 for d in node["attrs"]["dims"]])]


def _cat_stack(node, vals, shapes, B):
    attrs = dict(node["attrs"])
    rank = len(shapes[0]) if node["target"] == "cat" else len(node["shape"])
    if node["target"] == "cat" and rank == 0:
        raise NoRule
    attrs["dim"] = _norm(attrs["dim"], rank) + 1
    return _call(node["target"], [_materialize(t, b, B) for t, b in vals], attrs)


def _matmul(node, vals, shapes, B):
    (a, ba), (b, bb) = vals
    ra, rb = len(shapes[0]), len(shapes[1])
    if node["target"] == "dot":
        ra = rb = 1
    a_vec, b_vec = ba and ra == 1, bb and rb == 1
    rb_has_col = rb > 1  # an unbatched vector b contributes no column dim to the result
    if a_vec:  # a batched vector as a row matrix; its row dim is squeezed from the result
        a, ra = a.unsqueeze(1), 2
    if b_vec:  # a batched vector as a column matrix
        b, rb = b.unsqueeze(-1), 2
    # Batched operands get 1s after the batch dim up to the larger rank, so that
    # right-aligned broadcasting of the matrix stacks never meets the batch dim.
    r = max(ra, rb)
    a, b = _pad(a, ba, ra, r), _pad(b, bb, rb, r)
    out = a.matmul(b)
    if b_vec:  # the promoted column
        out = out.squeeze(-1)
    if a_vec:  # the promoted row: before b's columns unless b left no column dim (a vector)
        out = out.squeeze(-2 if rb_has_col else -1)
    return [out]


def _addmm(node, vals, shapes, B):
    c, bc = vals[0]
    mm = _matmul({"target": "mm"}, vals[1:3], shapes[1:3], B)[0]
    beta, alpha = node["attrs"].get("beta", 1), node["attrs"].get("alpha", 1)
    c = _pad(c, bc, len(shapes[0]), 2)
    return [c * beta + mm * alpha if (beta != 1 or alpha != 1) else c + mm]


def _scatter_like(node, vals, shapes, B):
    """select_scatter / slice_scatter (an indexed write, functionalized): every
    tensor input batched, the dim shifted past the batch."""
    attrs = dict(node["attrs"])
    attrs["dim"] = _norm(attrs["dim"], len(shapes[0])) + 1
    return _call(node["target"], [_materialize(t, b, B) if hasattr(t, "shape") else t for t, b in vals], attrs)


def _conv(node, vals, shapes, B):
    (x, bx), (w, bw) = vals[0], vals[1]
    bias, bb = vals[2] if len(vals) > 2 else (None, False)
    n_spatial = len(shapes[1]) - 2
    attrs = node["attrs"]
    if bw:
        return _conv_batched_kernel(node, x, bx, w, bias, bb, shapes, B, n_spatial)
    if not bx or bb:
        raise NoRule
    rest = [v for v, _ in vals[2:]]
    if len(shapes[0]) == n_spatial + 2:  # [B, N, C, ...]: fold B into N
        lead = x.shape[:2]
        y = _call(node["target"], [x.reshape((-1,) + tuple(x.shape[2:])), w] + rest, attrs)[0]
        return [y.reshape(tuple(lead) + tuple(y.shape[1:]))]
    return _call(node["target"], [x, w] + rest, attrs)  # [B, C, ...]: B is the conv batch


def _conv_batched_kernel(node, x, bx, w, bias, bb, shapes, B, n_spatial):
    """One kernel per example (vmap over model copies): the examples become
    groups of one convolution, example b's channels meeting only kernel b."""
    attrs = dict(node["attrs"])
    if "groups" not in attrs:
        raise NoRule
    if len(shapes[0]) != n_spatial + 2:  # an unbatched per-example input [C, ...]: give it N = 1
        x = x.unsqueeze(1) if bx else x.unsqueeze(0)
    x = _materialize(x, bx, B)  # [B, N, C, ...]
    N, C = x.shape[1], x.shape[2]
    x = x.movedim(0, 1).reshape((N, B * C) + tuple(x.shape[3:]))
    O = w.shape[1]
    w = w.reshape((B * O,) + tuple(w.shape[2:]))
    if bias is not None:
        bias = _materialize(bias, bb, B).reshape(B * O)
    attrs["groups"] = attrs["groups"] * B
    y = _call(node["target"], [x, w, bias], attrs)[0]  # [N, B*O, ...]
    y = y.reshape((N, B, O) + tuple(y.shape[2:])).movedim(1, 0)
    return [y if len(shapes[0]) == n_spatial + 2 else y.squeeze(1)]


def _embedding(node, vals, shapes, B):
    (i, bi), (w, bw) = vals[0], vals[1]
    if bw:
        raise NoRule
    return _call(node["target"], [i, w], node["attrs"])  # any index shape: the batch is one more index dim


def _layer_norm(node, vals, shapes, B):
    (x, bx) = vals[0]
    if not bx or any(b for _, b in vals[1:]):
        raise NoRule
    return _call(node["target"], [x] + [v for v, _ in vals[1:]], node["attrs"])


def _nll_loss(node, vals, shapes, B):
    (x, bx), (tgt, bt) = vals[0], vals[1]
    attrs = dict(node["attrs"])
    weight = vals[2][0] if len(vals) > 2 else None
    if len(shapes[0]) not in (1, 2) or weight is not None or (len(vals) > 2 and vals[2][1]):
        raise NoRule
    x, tgt = _materialize(x, bx, B), _materialize(tgt, bt, B)
    if len(shapes[0]) == 1:  # one sample of C classes per example: N = 1
        x, tgt = x.unsqueeze(1), tgt.unsqueeze(1)
    red = attrs["reduction"]
    attrs["reduction"] = "none"
    n, c = x.shape[1], x.shape[2]
    loss = _call("nll_loss", [x.reshape(B * n, c), tgt.reshape(B * n), None], attrs)[0].reshape(B, n)
    if red == "none":
        return [loss]
    if red == "sum":
        return [loss.sum(1)]
    counted = (tgt != attrs["ignore_index"]).to(loss.dtype).sum(1)
    return [loss.sum(1) / counted]


def _index(node, vals, shapes, B):
    """index(self, *indices) picks along self's leading dims: with the batch moved
    right after the indexed dims, the picked (broadcast index) dims come first and
    the batch follows them; moved back to the front."""
    x, bx = vals[0]
    idx = vals[1:]
    if not bx or any(b or t is None or not hasattr(t, "dtype") or t.dtype.is_floating_point or str(t.dtype).endswith("bool") for t, b in idx):
        raise NoRule
    k = len(idx)
    m = len(node["shape"]) - (len(shapes[0]) - k)
    out = _call(node["target"], [x.movedim(0, k)] + [t for t, _ in idx], node["attrs"])[0]
    return [out.movedim(m, 0)]


def _reduce_all(node, vals, shapes, B):
    """max(x) / argmax(x) without a dim: over the flattened example."""
    t, b = vals[0]
    if not b or len(vals) > 1 or node["results"]:
        raise NoRule
    name = node["target"].split(".")[0]
    if name in ("argmax", "argmin") and node["attrs"].get("dim") is not None:
        raise NoRule
    flat = t.reshape(B, -1)
    return [{"max": flat.amax, "min": flat.amin, "argmax": flat.argmax, "argmin": flat.argmin}[name](1)]


def _trailing(node, vals, shapes, B):
    """Operators on the last dims that treat any leading dims as a batch (triu,
    the linalg family): every input batched, the batch one more leading dim."""
    tensors = [(t, b, s) for (t, b), s in zip(vals, shapes) if hasattr(t, "shape")]
    if len({len(s) for _, _, s in tensors}) > 1:
        raise NoRule  # inputs of different ranks would broadcast their leading dims differently
    ins = [_materialize(t, b, B) if hasattr(t, "shape") else t for t, b in vals]
    return _call(node["target"], ins, node["attrs"])


def _gather(node, vals, shapes, B):
    attrs = dict(node["attrs"])
    attrs["dim"] = _norm(attrs["dim"], len(shapes[0])) + 1
    ins = [_materialize(t, b, B) if hasattr(t, "shape") else t for t, b in vals]
    return _call(node["target"], ins, attrs)


def _repeat(node, vals, shapes, B):
    t, b = vals[0]
    reps = list(node["attrs"]["repeats"])
    t = _pad(t, b, len(shapes[0]), len(reps))
    return [t.repeat([1] + reps)]


def _pool(node, vals, shapes, B):
    x, bx = vals[0]
    if not bx or any(b for _, b in vals[1:]):
        raise NoRule
    name = node["target"]
    n_spatial = 3 if "3d" in name else 2 if "2d" in name else 1
    rest = [v for v, _ in vals[1:]]
    if len(shapes[0]) == n_spatial + 1:  # [C, ...] per example: the batch is the pooling's N
        return _call(name, [x] + rest, node["attrs"])
    lead = tuple(x.shape[:2])
    ys = _call(name, [x.reshape((-1,) + tuple(x.shape[2:]))] + rest, node["attrs"])
    return [y.reshape(lead + tuple(y.shape[1:])) for y in ys]


TRAILING = {"triu", "tril", "linalg_solve", "linalg_cholesky", "linalg_slogdet", "linalg_inv", "linalg_det",
            "linalg_qr", "linalg_eigh", "linalg_svd", "linalg_lu_factor", "matrix_exp", "linalg_inv_ex",
            "linalg_cholesky_ex", "cholesky_solve", "triangular_solve", "linalg_solve_triangular"}
POOL = {"avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d", "max_pool2d", "max_pool3d",
        "max_pool2d_with_indices", "max_pool1d_with_indices", "max_pool3d_with_indices",
        "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool2d", "upsample_nearest2d",
        "upsample_bilinear2d"}

SPECIAL = {"cat": _cat_stack, "stack": _cat_stack, "matmul": _matmul, "mm": _matmul, "bmm": _matmul,
           "dot": _matmul, "conv1d": _conv, "conv2d": _conv, "conv3d": _conv, "layer_norm": _layer_norm,
           "nll_loss": _nll_loss, "addmm": _addmm, "select_scatter": _scatter_like,
           "slice_scatter": _scatter_like, "index": _index,
           "embedding": _embedding, "gather": _gather, "repeat": _repeat}
SHAPE = {"view": _view, "reshape": _view, "_unsafe_view": _view, "flatten": _view, "unflatten": _view,
         "expand": _expand, "permute": _permute}


def apply(node, vals, shapes, B):
    """The outputs (list of tensors, batched at 0) of `node` on `vals`, or NoRule."""
    name = node["target"].split(".")[0]  # the overload ("max.dim") shares its base's rule
    if name in SPECIAL:
        return SPECIAL[name](node, vals, shapes, B)
    if name in SHAPE:
        return SHAPE[name](node, vals, shapes)
    if name in TRAILING:
        return _trailing(node, vals, shapes, B)
    if name in POOL:
        return _pool(node, vals, shapes, B)
    if name in ("max", "min", "argmax", "argmin") and node["attrs"].get("dim") is None:
        return _reduce_all(node, vals, shapes, B)
    if name in DIM_ATTRS:
        return _shift_dims(node, vals, shapes)
    if name in POINTWISE and node["results"] == 0:
        return _pointwise(node, vals, shapes)
    raise NoRule


def per_example(node, vals, B):
    """The fallback: run the operator once per example and stack the results."""
    per = []
    for i in range(B):
        per.append(_call(node["target"], [t[i] if b else t for t, b in vals], node["attrs"]))
    return [stack_examples([p[k] for p in per], node["target"]) for k in range(len(per[0]))]


def stack_examples(xs, what):
    import tensorplay as tp
    shapes = {tuple(x.shape) for x in xs}
    if len(shapes) > 1:
        raise RuntimeError(f"vmap: {what} gives results of different shapes for different examples "
                           f"({sorted(shapes)[:3]}...): a data-dependent shape (boolean mask, nonzero) cannot be "
                           "vmapped; use tp.where with a fixed shape instead")
    return tp.stack(xs)
