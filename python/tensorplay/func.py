"""tp.func: function transforms in the style of torch.func.

jvp (forward mode, through tp.autograd.forward_ad), vjp and grad (reverse
mode, through tp.autograd.grad), jacrev / jacfwd (one vjp / jvp per basis
vector). They compose: jacfwd(grad(f)) is forward-over-reverse (the
derivative formulas of the backward pass get tangents), vjp of a jvp is
reverse-over-forward (the tangent formulas are recorded by reverse mode);
a jvp inside another (jacfwd(jacfwd(f))) cannot open a second dual level and
computes its tangent by double vjp, which the open level differentiates.
Inputs and outputs are Tensors or (nested) tuples/lists/dicts of Tensors;
functional_call (from tp.nn.utils.stateless) runs a module on a dict of
parameters, so grad / vjp / jvp can differentiate with respect to them.
vmap (in _vmap.py, with its batching rules in _batch_rules.py and the rules
for transforms in _vmap_transforms.py) maps a function over a batch dim; the
transforms here carry a `_tp_transform` tag so that vmap(grad(f)) and
vmap(jacrev(f)) batch through their own rules.
"""
from . import _C
from .autograd import forward_ad as fwAD

from .nn.utils.stateless import functional_call  # noqa: F401
from ._vmap import vmap, refuse_in_capture as _refuse_in_vmap_capture
from ._vmap import fallback_counts as vmap_fallback_counts  # noqa: F401

__all__ = ["jvp", "vjp", "grad", "grad_and_value", "jacrev", "jacfwd", "hessian", "functional_call", "vmap"]

Tensor = _C.Tensor


# ---- small pytree over tuples/lists/dicts of Tensors ----
def _flatten(tree, who, what):
    if isinstance(tree, Tensor):
        return [tree], None
    if isinstance(tree, dict):
        leaves, spec = _flatten(tuple(tree.values()), who, what)
        return leaves, (dict, (tuple(tree.keys()), spec))
    if isinstance(tree, (tuple, list)):
        leaves, specs = [], []
        for x in tree:
            l, s = _flatten(x, who, what)
            leaves += l
            specs.append((len(l), s))
        return leaves, (type(tree), specs)
    raise TypeError(f"{who}: expected {what} to be Tensors or tuples/lists/dicts of Tensors, got "
                    f"{type(tree).__name__}")


def _unflatten(leaves, spec):
    """The tree of `spec` with `leaves` (any objects) in place of its tensors."""
    if spec is None:
        return leaves[0]
    kind, specs = spec
    if kind is dict:
        keys, values_spec = specs
        return dict(zip(keys, _unflatten(leaves, values_spec)))
    out, i = [], 0
    for n, s in specs:
        out.append(_unflatten(leaves[i:i + n], s))
        i += n
    return kind(*out) if hasattr(kind, "_fields") else kind(out)  # a namedtuple takes its fields as arguments


def _same_structure(a, b):
    """Specs equal up to namedtuple vs tuple (a namedtuple output takes a plain tuple of cotangents)."""
    if a is None or b is None:
        return a is b
    (ka, sa), (kb, sb) = a, b
    norm = lambda k: tuple if k is not dict and issubclass(k, tuple) else k  # noqa: E731
    if norm(ka) is not norm(kb):
        return False
    if ka is dict:
        return sa[0] == sb[0] and _same_structure(sa[1], sb[1])
    return len(sa) == len(sb) and all(na == nb and _same_structure(x, y) for (na, x), (nb, y) in zip(sa, sb))


def _map_tensors(tree, fn):
    """tree (tensors, or anything, in tuples/lists/dicts) with fn applied to its tensors."""
    if isinstance(tree, Tensor):
        return fn(tree)
    if isinstance(tree, dict):
        return type(tree)((k, _map_tensors(v, fn)) for k, v in tree.items())
    if isinstance(tree, (tuple, list)):
        vals = [_map_tensors(x, fn) for x in tree]
        return type(tree)(*vals) if hasattr(type(tree), "_fields") else type(tree)(vals)
    return tree


def _tensors_in(tree):
    out = []
    _map_tensors(tree, out.append)
    return out


def _zeros_like(x):
    from . import zeros_like
    return zeros_like(x)


def _detached(t):
    """t.detach(), keeping t's tangent at the open dual level (if any), so that
    a forward transform around a reverse one (jvp of vjp's outputs, of
    grad_and_value's value, of has_aux outputs) still sees it."""
    tangent = fwAD.unpack_dual(t).tangent
    return t.detach() if tangent is None else fwAD.make_dual(t.detach(), tangent.detach())


def _check_pairs(who, primals, tangents, pname="primals", tname="tangents"):
    if len(primals) != len(tangents):
        raise RuntimeError(f"{who}: expected {tname} to have the same structure as {pname}: "
                           f"{len(primals)} {pname} but {len(tangents)} {tname}")
    for i, (p, t) in enumerate(zip(primals, tangents)):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(f"{who}: {tname}[{i}] has shape {tuple(t.shape)} but {pname}[{i}] has shape "
                               f"{tuple(p.shape)}")
        if not t.dtype.is_floating_point:
            raise RuntimeError(f"{who}: {tname}[{i}] must be floating point, got {t.dtype}")


# ---- forward mode ----
def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """(func(*primals), J @ tangents): the output and its directional derivative
    along `tangents`, in one forward pass with dual tensors."""
    _refuse_in_vmap_capture("jvp")
    if not isinstance(primals, tuple):
        raise RuntimeError(f"jvp(f, primals, tangents): expected primals to be a tuple, got {type(primals).__name__}")
    if not isinstance(tangents, tuple):
        raise RuntimeError(f"jvp(f, primals, tangents): expected tangents to be a tuple, got {type(tangents).__name__}")
    flat_p, spec_p = _flatten(primals, "jvp", "primals")
    flat_t, spec_t = _flatten(tangents, "jvp", "tangents")
    if not _same_structure(spec_p, spec_t):
        raise RuntimeError("jvp: expected tangents to have the same structure as primals")
    _check_pairs("jvp", flat_p, flat_t)
    if _C._fwd_current_level() >= 0:  # inside another forward transform: one dual level at a time
        return _jvp_in_open_level(func, primals, flat_t, has_aux)
    with fwAD.dual_level():
        duals = [fwAD.make_dual(p, t) for p, t in zip(flat_p, flat_t)]
        out = func(*_unflatten(duals, spec_p))
        aux = None
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise RuntimeError("jvp(f, ..., has_aux=True): expected f to return a (output, aux) tuple")
            out, aux = out
        flat_o, spec_o = _flatten(out, "jvp", "the outputs of f")
        prim, tang = [], []
        for o in flat_o:
            p, t = fwAD.unpack_dual(o)
            prim.append(p)
            tang.append(_zeros_like(o) if t is None else t)
    res = (_unflatten(prim, spec_o), _unflatten(tang, spec_o))
    return res + (aux,) if has_aux else res


def _jvp_in_open_level(func, primals, flat_t, has_aux):
    """jvp while a dual level is already open (jvp of jvp, jacfwd(jacfwd(f))):
    the tangent J t by the double-vjp trick on the reverse engine (the vjp
    u -> J^T u is linear in u, its own vjp along t is J t), whose operators the
    open level differentiates, as it does a backward pass for jacfwd(grad(f)).
    Results keep the open level's tangents; their reverse graph only when it
    reaches an outer transform's input (as vjp/grad do)."""
    from .autograd.functional import _double_vjp
    from . import enable_grad
    tracked, _, out, aux, nested = _reverse(func, primals, "jvp", has_aux)
    flat_o, spec_o = _flatten(out, "jvp", "the outputs of f")
    with enable_grad():
        tang = _double_vjp(flat_o, flat_o, tracked, tuple(flat_t), nested, False, "")
    keep = (lambda t: t) if nested else _detached  # noqa: E731
    res = (_unflatten([keep(o) for o in flat_o], spec_o), _unflatten([keep(t) for t in tang], spec_o))
    return res + (aux,) if has_aux else res


# ---- reverse mode ----
def _track(p, who):
    """(t, leaf): t stands for input p, its gradient can be asked for: p's own
    alias when an outer transform (or the caller's autograd) already tracks p
    (leaf None), else a fresh leaf (keeping p's tangent when a dual level is
    open)."""
    if not (p.dtype.is_floating_point or getattr(p.dtype, "is_complex", False)):
        raise RuntimeError(f"{who}: only Tensors of floating point dtype can require gradients (an input has dtype "
                           f"{p.dtype}); differentiate with respect to floating point tensors only, e.g. x.float()")
    if p.requires_grad:
        return p.view_as(p), None
    tangent = fwAD.unpack_dual(p).tangent
    leaf = p.detach().requires_grad_(True)
    return (leaf if tangent is None else fwAD.make_dual(leaf, tangent)), leaf


def _reaches_outside(tree, leaves, grad_mode):
    """Whether tensors of `tree` depend on a tensor that requires grad other than
    this transform's own leaves: an outer transform's input (also one f closes
    over) or a tensor the caller's autograd tracks. Then the gradients are
    computed with create_graph, so that the outer derivative sees them, as with
    torch.func's levels."""
    ts = [t for t in _tensors_in(tree) if t.requires_grad]
    return bool(grad_mode and ts and _C._reaches_other_leaves(ts, leaves))


def _reverse(func, primals, who, has_aux):
    from . import enable_grad, is_grad_enabled
    _refuse_in_vmap_capture(who)
    grad_mode = is_grad_enabled()
    flat_p, spec_p = _flatten(primals, who, "primals")
    with enable_grad():
        pairs = [_track(p, who) for p in flat_p]
        tracked = [t for t, _ in pairs]
        out = func(*_unflatten(tracked, spec_p))
    leaves = [leaf for _, leaf in pairs if leaf is not None]
    aux = None
    if has_aux:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise RuntimeError(f"{who}(f, ..., has_aux=True): expected f to return a (output, aux) tuple")
        out, aux = out
        # aux comes back detached (torch.func), unless an outer derivative needs its graph
        if not _reaches_outside(aux, leaves, grad_mode):
            aux = _map_tensors(aux, _detached)
    nested = _reaches_outside(out, leaves, grad_mode)
    return tracked, spec_p, out, aux, nested


def _grads(outs, cots, tracked, nested):
    from .autograd import grad as ag_grad
    pairs = [(o, c) for o, c in zip(outs, cots) if o.requires_grad]
    if not pairs:
        return [_zeros_like(t) for t in tracked]
    want = [t for t in tracked if t.requires_grad]
    got = iter(ag_grad([o for o, _ in pairs], want, [c for _, c in pairs], retain_graph=True,
                       create_graph=nested, allow_unused=True))
    res = []
    for t in tracked:
        g = next(got) if t.requires_grad else None
        res.append(_zeros_like(t) if g is None else g)
    return res


def vjp(func, *primals, has_aux=False):
    """(func(*primals), vjp_fn) where vjp_fn(cotangents) gives the cotangents
    of the inputs, (u^T J) per primal."""
    tracked, spec_p, out, aux, nested = _reverse(func, primals, "vjp", has_aux)
    flat_o, spec_o = _flatten(out, "vjp", "the outputs of f")

    def vjp_fn(*cotangents):
        # one argument with the outputs' structure (a tensor, tuple, dict, ...), or the outputs' tuple spread out
        candidates = ([cotangents[0]] if len(cotangents) == 1 else []) + [cotangents]
        flat_c = None
        for cot in candidates:
            flat, spec_c = _flatten(cot, "vjp_fn", "cotangents")
            if _same_structure(spec_c, spec_o):
                flat_c = flat
                break
        if flat_c is None:
            raise RuntimeError("vjp_fn: expected the cotangents to have the same structure as the outputs of f")
        _check_pairs("vjp_fn", flat_o, flat_c, "outputs", "cotangents")
        return _unflatten(_grads(flat_o, flat_c, tracked, nested), spec_p)

    out_value = _unflatten([o if nested else _detached(o) for o in flat_o], spec_o)
    return (out_value, vjp_fn, aux) if has_aux else (out_value, vjp_fn)


def _argnums(argnums, n, who):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise RuntimeError(f"{who}: argnums must be non-empty")
    for a in nums:
        if not isinstance(a, int) or not -n <= a < n:
            raise RuntimeError(f"{who}: argnums {argnums} out of range for a function called with {n} positional "
                               "arguments")
    return tuple(a % n for a in nums)


def grad_and_value(func, argnums=0, has_aux=False):
    """Like grad, but the wrapped function returns (gradient, value)."""

    def wrapper(*args, **kwargs):
        nums = _argnums(argnums, len(args), "grad")
        chosen = tuple(args[i] for i in nums)

        def f(*xs):
            full = list(args)
            for i, x in zip(nums, xs):
                full[i] = x
            return func(*full, **kwargs)

        tracked, spec_p, out, aux, nested = _reverse(f, chosen, "grad", has_aux)
        if not isinstance(out, Tensor) or out.numel() != 1:
            what = f"shape {tuple(out.shape)}" if isinstance(out, Tensor) else type(out).__name__
            raise RuntimeError(f"grad(f): expected f(*args) to return a scalar Tensor, got {what}")
        from . import ones_like
        gs = _grads([out], [ones_like(out)], tracked, nested)
        g = _unflatten(gs, spec_p)
        g = g[0] if isinstance(argnums, int) else g
        value = out if nested else _detached(out)
        return (g, (value, aux)) if has_aux else (g, value)

    wrapper._tp_transform = ("grad", func, argnums, has_aux, True)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """The function computing the gradient of scalar-valued `func` with respect
    to the positional argument(s) `argnums`."""
    gv = grad_and_value(func, argnums, has_aux)

    def wrapper(*args, **kwargs):
        g, v = gv(*args, **kwargs)
        return (g, v[1]) if has_aux else g

    wrapper._tp_transform = ("grad", func, argnums, has_aux, False)
    return wrapper


# ---- Jacobians (one transform call per basis vector) ----
def _basis(x):
    from . import zeros
    n = x.numel()
    for k in range(n):
        e = zeros((n,), dtype=x.dtype)
        e[k] = 1
        yield e.reshape(tuple(x.shape))


def _stack_jac(cols, out_shape, in_shape, rows_are_outputs, dtype):
    from . import stack, zeros
    if not cols:
        return zeros(tuple(out_shape) + tuple(in_shape), dtype=dtype)
    j = stack([c.reshape(-1) for c in cols])  # (rows, cols)
    if not rows_are_outputs:
        j = j.transpose(0, 1)
    return j.reshape(tuple(out_shape) + tuple(in_shape))


def _with_args(func, args, nums):
    def f(*xs):
        full = list(args)
        for i, x in zip(nums, xs):
            full[i] = x
        return func(*full)
    return f


def _jacobian_tree(per_out_in, flat_o, spec_o, spec_in, argnums):
    """Jacobian blocks [output leaf][input leaf] arranged as torch.func does: the
    outputs' structure outside, the differentiated arguments' inside (one
    argument's tree for an int argnums, a tuple over argnums otherwise)."""
    trees = []
    for blocks in per_out_in:
        t = _unflatten(blocks, spec_in)  # a tuple over the differentiated arguments
        trees.append(t[0] if isinstance(argnums, int) else t)
    return _unflatten(trees, spec_o)


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """The Jacobian of `func` (output shape + input shape per output and input
    tensor) by reverse mode, one vjp per output element. Inputs and outputs may
    be trees of tensors. `chunk_size` (torch.func's: how many vjps one vmap
    batches) changes nothing here, where the vjps run one at a time; it is
    checked as torch.func checks it."""
    if chunk_size is not None and not (isinstance(chunk_size, int) and chunk_size > 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    def wrapper(*args):
        nums = _argnums(argnums, len(args), "jacrev")
        chosen = tuple(args[i] for i in nums)
        flat_in, spec_in = _flatten(chosen, "jacrev", "the differentiated arguments")
        res = vjp(_with_args(func, args, nums), *chosen, has_aux=has_aux)
        out, fn = res[0], res[1]
        flat_o, spec_o = _flatten(out, "jacrev", "the outputs of f")
        per_out = []
        for k, o in enumerate(flat_o):
            rows = []
            for e in _basis(o):
                cots = [e if j == k else _zeros_like(oj) for j, oj in enumerate(flat_o)]
                rows.append(_flatten(fn(_unflatten(cots, spec_o)), "jacrev", "gradients")[0])
            per_out.append([_stack_jac([r[m] for r in rows], o.shape, x.shape, True, x.dtype)
                            for m, x in enumerate(flat_in)])
        j = _jacobian_tree(per_out, flat_o, spec_o, spec_in, argnums)
        return (j, res[2]) if has_aux else j

    wrapper._tp_transform = ("jacrev", func, argnums, has_aux)
    return wrapper


def _rng_states():
    from . import get_rng_state
    return get_rng_state()


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian of `func` (output shape + input shape per output and input
    tensor) by forward mode, one jvp per input element. Inputs and outputs may
    be trees of tensors.

    Each jvp runs `func` again, so a random draw inside it (dropout) would give
    every column of the Jacobian its own draw. As torch.func (whose columns are
    one vmap over the jvps): randomness="error" (the default) raises when func
    draws from the default generator, "same" gives every jvp the same draws
    (the generator state is reset before each), "different" draws anew per jvp."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. "
                           f"Got {randomness}")

    def wrapper(*args):
        from . import equal, set_rng_state
        nums = _argnums(argnums, len(args), "jacfwd")
        chosen = tuple(args[i] for i in nums)
        flat_in, spec_in = _flatten(chosen, "jacfwd", "the differentiated arguments")
        f = _with_args(func, args, nums)
        cols_per_in, aux, flat_o, spec_o = [], None, None, None
        start = _rng_states() if randomness != "different" else None
        for m, x in enumerate(flat_in):
            cols = []
            for e in _basis(x):
                ts = [e if k == m else _zeros_like(xk) for k, xk in enumerate(flat_in)]
                if randomness == "same":
                    set_rng_state(start)
                r = jvp(f, chosen, _unflatten(ts, spec_in), has_aux=has_aux)
                if randomness == "error" and not equal(_rng_states(), start):
                    raise RuntimeError("jacfwd: called a random operation while in randomness error mode "
                                       "(each column of the Jacobian runs func again, so each would see "
                                       "other random numbers). Pass randomness='same' or 'different' to "
                                       "jacfwd, or draw the random numbers outside the function")
                flat_o, spec_o = _flatten(r[0], "jacfwd", "the outputs of f")
                cols.append(_flatten(r[1], "jacfwd", "the outputs of f")[0])
                if has_aux:
                    aux = r[2]
            cols_per_in.append(cols)
        if flat_o is None:  # no input element: the outputs' structure from one call
            out = f(*chosen)
            if has_aux:
                out, aux = out
            flat_o, spec_o = _flatten(out, "jacfwd", "the outputs of f")
        per_out = [[_stack_jac([c[k] for c in cols_per_in[m]], o.shape, x.shape, False, o.dtype)
                    for m, x in enumerate(flat_in)] for k, o in enumerate(flat_o)]
        j = _jacobian_tree(per_out, flat_o, spec_o, spec_in, argnums)
        return (j, aux) if has_aux else j

    wrapper._tp_transform = ("jacfwd", func, argnums, has_aux, randomness)
    return wrapper


def hessian(func, argnums=0):
    """The Hessian of scalar-valued `func`: jacfwd(jacrev(func)) (forward-over-reverse)."""
    return jacfwd(jacrev(func, argnums), argnums)


def _stacked_leaf(tensors, name):
    from . import stack
    grads = {bool(t.requires_grad) for t in tensors}
    if len(grads) > 1:
        raise RuntimeError(f"stack_module_state: expected {name} from each model to have the same .requires_grad")
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) > 1:
        raise RuntimeError(f"stack_module_state: {name} has different shapes across the models: {sorted(shapes)}")
    out = stack([t.detach() for t in tensors])
    return out.requires_grad_() if grads == {True} else out


def stack_module_state(models):
    """(params, buffers): dicts from each parameter / buffer name of the models to the models'
    tensors stacked along a new leading dim, for vmap(functional_call) over an ensemble. The
    stacked parameters are new leaves (requires_grad as the models'), not views of the models'
    tensors. The models must have the same class, parameter names and training/eval mode."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: expected at least one model, got 0")
    if len({bool(m.training) for m in models}) > 1:
        raise RuntimeError("stack_module_state: expected all models to be in the same training/eval mode")
    if len({type(m) for m in models}) > 1:
        raise RuntimeError("stack_module_state: expected all models to be of the same class")
    result = []
    for getter in ("named_parameters", "named_buffers"):
        per_model = [dict(getattr(m, getter)()) for m in models]
        names = list(per_model[0])
        for d in per_model[1:]:
            if set(d) != set(names):
                raise RuntimeError(f"stack_module_state: the models' {getter[6:]} differ in names: "
                                   f"{sorted(set(d) ^ set(names))}")
        result.append({k: _stacked_leaf([d[k] for d in per_model], k) for k in names})
    return tuple(result)


__all__.append("stack_module_state")


def linearize(func, *primals):
    """(func(*primals), jvp_fn): jvp_fn(*tangents) is the Jacobian-vector product of func at
    `primals` (computed by jvp at each call, so it reruns func's forward)."""
    if not primals:
        raise RuntimeError("linearize: expected at least one primal")
    primals = tuple(p.detach() if isinstance(p, Tensor) else p for p in primals)
    out = func(*primals)

    def jvp_fn(*tangents):
        if len(tangents) != len(primals):
            raise RuntimeError(f"linearize: jvp_fn expected {len(primals)} tangents, got {len(tangents)}")
        return jvp(func, primals, tangents)[1]

    return out, jvp_fn


__all__.append("linearize")
