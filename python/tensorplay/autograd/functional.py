"""tp.autograd.functional: derivatives of a whole function, torch.autograd.functional style.

vjp, jvp, jacobian, hessian, vhp and hvp take `inputs` as a Tensor or a tuple
of Tensors and give results with the same structure (a Tensor where the
caller passed a Tensor, a tuple where it passed a tuple; a Jacobian of tuple
outputs w.r.t. tuple inputs is a tuple, per output, of tuples, per input).
Everything runs on the reverse engine (tp.autograd.grad) over fresh leaves:
jvp and hvp use the double-vjp trick (the vjp u -> J^T u is linear in u, so
its own vjp along v is J v), which works for every op with a differentiable
backward and nests under create_graph. Results are detached unless
create_graph=True, where they stay in the graph of the inputs (and of v).
strict=True raises where an output (or a gradient) does not depend on an
input instead of returning zeros. jacobian(vectorize=True) batches the
reverse-mode rows through tp.vmap (one batched call of the function and one
backward instead of one backward per output element), falling back to the
loop if the function cannot be vmapped; strategy="forward-mode" (vectorize
only) takes one forward-AD jvp per input element (tp.func.jacfwd).
hessian(vectorize=True) vmaps tp.func.grad, which tp.vmap batches by its rule.
"""
from .. import _C
from .._grad_mode import enable_grad, set_grad_enabled
from .._vmap import refuse_in_capture as _refuse_in_vmap_capture
from ..func import _stack_jac

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]

Tensor = _C.Tensor


# ---- inputs, outputs and v ----
def _fname(func):
    return getattr(func, "__name__", None) or type(func).__name__


def _as_tuple(x, what, who):
    """(was_tuple, tuple of Tensors) of a Tensor or a tuple/list of Tensors."""
    was_tuple = isinstance(x, (tuple, list))
    xs = tuple(x) if was_tuple else (x,)
    for i, t in enumerate(xs):
        if not isinstance(t, Tensor):
            where = f" but the value at index {i} has" if was_tuple else ", got a value of"
            raise TypeError(f"{who}: {what} must be a Tensor or a tuple of Tensors{where} type {type(t).__name__}")
    return was_tuple, xs


def _outputs(func, inputs, who):
    out = func(*inputs)
    return _as_tuple(out, f"the outputs of the user-provided function {_fname(func)!r}", who)


def _restructure(res, was_tuple):
    """res (a tuple, or for a Jacobian a tuple of tuples) in the caller's structure;
    was_tuple is one flag, or (outputs were a tuple, inputs were a tuple)."""
    if isinstance(was_tuple, tuple):
        outs_tuple, ins_tuple = was_tuple
        if not ins_tuple:
            res = tuple(r[0] for r in res)
        return res if outs_tuple else res[0]
    return res if was_tuple else res[0]


def _prepare(xs, create_graph, need_graph, who=""):
    """Fresh leaves standing for xs; with create_graph, an x already in a graph
    stays connected to it (an alias), so the results can be differentiated
    further with respect to it. Inside a tp.vmap capture (which records no
    backward) the vmapped function runs per example instead."""
    from .. import is_floating_point
    if need_graph:
        _refuse_in_vmap_capture(who)
    out = []
    for x in xs:
        if need_graph and not (is_floating_point(x) or getattr(x.dtype, "is_complex", False)):
            raise RuntimeError(f"{who}: only Tensors of floating point dtype can be differentiated, got an input of "
                               f"dtype {x.dtype}")
        if create_graph and x.requires_grad:
            out.append(x.view_as(x))
        else:
            out.append(x.detach().requires_grad_(need_graph))
    return tuple(out)


def _detach_unless(xs, create_graph):
    return xs if create_graph else tuple(x.detach() for x in xs)


def _check_v(v, refs, refs_tuple, who, what, fname):
    """v (as a tuple) against refs: one tensor of the same shape per ref."""
    if refs_tuple and len(v) != len(refs):
        raise RuntimeError(f"{who}: v has {len(v)} Tensors but the function {fname!r} has {len(refs)} {what}s")
    if not refs_tuple and len(v) != 1:
        raise RuntimeError(f"{who}: v should be a single Tensor (the function {fname!r} has one {what}), got "
                           f"{len(v)} Tensors")
    for i, (t, r) in enumerate(zip(v, refs)):
        if tuple(t.shape) != tuple(r.shape):
            name = f"v[{i}]" if refs_tuple else "v"
            raise RuntimeError(f"{who}: {name} has shape {tuple(t.shape)} but {what} {i} of the function {fname!r} "
                               f"has shape {tuple(r.shape)}")


def _get_v(v, refs, refs_tuple, create_graph, who, what, func):
    """v as a tuple matching refs; None is allowed only for one single-element ref."""
    if v is None:
        if len(refs) != 1 or refs[0].numel() != 1:
            shapes = ", ".join(str(tuple(r.shape)) for r in refs)
            raise RuntimeError(f"{who}: v can be None only when the function {_fname(func)!r} has a single {what} "
                               f"with a single element; its {what}s have shapes {shapes}")
        return None
    _, vs = _as_tuple(v, "v", who)
    _check_v(vs, refs, refs_tuple, who, what, _fname(func))
    return _prepare(vs, create_graph, need_graph=False)


# ---- strictness ----
_INDEPENDENT = "The output of the user-provided function is independent of input {i}."


def _require_graph(ts, strict, message):
    """With strict, every tensor of ts must be in the graph (None: input i was not reached)."""
    if not strict:
        return
    for i, t in enumerate(ts):
        if t is None or not t.requires_grad:
            raise RuntimeError((_INDEPENDENT if t is None else message).format(i=i) + " This is not allowed in "
                               "strict mode.")


_OUTPUT_CONSTANT = ("Output {i} of the user-provided function does not require gradients: it must be computed "
                    "in a differentiable manner from the inputs.")
_GRAD_INDEPENDENT = ("The gradient with respect to input {i} is independent of the inputs of the user-provided "
                     "function.")


def _grad(outputs, inputs, grad_outputs, create_graph):
    """tp.autograd.grad over the outputs that are in the graph; None for an
    input they do not reach (all None when none is in the graph)."""
    from . import grad
    from .. import ones_like
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    pairs = [(o, ones_like(o) if g is None else g) for o, g in zip(outputs, grad_outputs)
             if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    return grad([o for o, _ in pairs], list(inputs), [g for _, g in pairs], retain_graph=True,
                create_graph=create_graph, allow_unused=True)


def _zeros_for_none(grads, refs, strict, create_graph, independent, what="jacobian"):
    """grads with zeros in place of None (or, with strict, an error naming the input);
    with strict and create_graph, the results must depend on the inputs."""
    from .. import zeros_like
    out = []
    for i, (g, r) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(independent.format(i=i) + " This is not allowed in strict mode.")
            g = zeros_like(r)
        elif strict and create_graph and not g.requires_grad:
            raise RuntimeError(f"The {what} of the user-provided function is independent of input {i}. This is not "
                               "allowed in strict mode when create_graph=True.")
        out.append(g)
    return tuple(out)


def _outer_grad_mode(create_graph):
    from .. import is_grad_enabled
    return True if create_graph else is_grad_enabled()


# ---- vector products ----
def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the outputs and the vector-Jacobian product along v
    (v may be None only for a single-element output)."""
    with enable_grad():
        ins_tuple, ins = _as_tuple(inputs, "inputs", "vjp")
        ins = _prepare(ins, create_graph, need_graph=True, who="vjp")
        outs_tuple, outs = _outputs(func, ins, "vjp")
        _require_graph(outs, strict, _OUTPUT_CONSTANT)
        vs = _get_v(v, outs, outs_tuple, create_graph, "vjp", "output", func)
    with set_grad_enabled(_outer_grad_mode(create_graph)):
        res = _zeros_for_none(_grad(outs, ins, vs, create_graph), ins, strict, create_graph, _INDEPENDENT)
    return (_restructure(_detach_unless(outs, create_graph), outs_tuple),
            _restructure(_detach_unless(res, create_graph), ins_tuple))


def _double_vjp(ys, y_refs, xs, vs, create_graph, strict, independent, what="jacobian"):
    """J v for J = dys/dxs, by differentiating u -> J^T u (linear in u) along v:
    reverse mode only, so it nests and works with create_graph. y_refs give the
    shapes of ys (a y may be None: a gradient that did not reach its input)."""
    from .. import zeros_like
    us = tuple(zeros_like(y, requires_grad=True) for y in y_refs)
    jt_u = _grad(ys, xs, us, create_graph=True)
    _require_graph(jt_u, strict, _GRAD_INDEPENDENT)
    with set_grad_enabled(_outer_grad_mode(create_graph)):
        return _zeros_for_none(_grad(jt_u, us, vs, create_graph), y_refs, strict, create_graph, independent, what)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the outputs and the Jacobian-vector product along v
    (v may be None only for a single-element input)."""
    with enable_grad():
        ins_tuple, ins = _as_tuple(inputs, "inputs", "jvp")
        ins = _prepare(ins, create_graph, need_graph=True, who="jvp")
        vs = _get_v(v, ins, ins_tuple, create_graph, "jvp", "input", func)
        outs_tuple, outs = _outputs(func, ins, "jvp")
        _require_graph(outs, strict, _OUTPUT_CONSTANT)
        res = _double_vjp(outs, outs, ins, vs, create_graph, strict, _INDEPENDENT)
    return (_restructure(_detach_unless(outs, create_graph), outs_tuple),
            _restructure(_detach_unless(res, create_graph), outs_tuple))


def _scalar_output(func, ins, who, strict):
    outs_tuple, outs = _outputs(func, ins, who)
    _require_graph(outs, strict, _OUTPUT_CONSTANT)
    if outs_tuple:
        raise RuntimeError(f"{who}: the function {_fname(func)!r} should return a single Tensor, got a "
                           f"{len(outs)}-tuple")
    if outs[0].numel() != 1:
        raise RuntimeError(f"{who}: the Tensor returned by the function {_fname(func)!r} should have a single "
                           f"element, got shape {tuple(outs[0].shape)}")
    return outs


def _second_order(func, inputs, v, create_graph, strict, who):
    with enable_grad():
        ins_tuple, ins = _as_tuple(inputs, "inputs", who)
        ins = _prepare(ins, create_graph, need_graph=True, who=who)
        vs = _get_v(v, ins, ins_tuple, create_graph, who, "input", func)
        outs = _scalar_output(func, ins, who, strict)
        jac = _grad(outs, ins, None, create_graph=True)
        _require_graph(jac, strict, "The jacobian of the user-provided function with respect to input {i} is "
                                    "independent of the input.")
        hess_independent = ("The hessian of the user-provided function with respect to input {i} is independent "
                            "of the input (is the function twice differentiable?).")
        if who == "vhp":
            with set_grad_enabled(_outer_grad_mode(create_graph)):
                res = _zeros_for_none(_grad(jac, ins, vs, create_graph), ins, strict, create_graph,
                                      hess_independent, "hessian")
        else:
            res = _double_vjp(jac, ins, ins, vs, create_graph, strict, hess_independent, "hessian")
    return (_restructure(_detach_unless(outs, create_graph), False),
            _restructure(_detach_unless(res, create_graph), ins_tuple))


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H) for scalar-valued func, H its Hessian."""
    return _second_order(func, inputs, v, create_graph, strict, "vhp")


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v) for scalar-valued func (the double-vjp trick applied
    to its gradient; equal to vhp for twice continuously differentiable func)."""
    return _second_order(func, inputs, v, create_graph, strict, "hvp")


# ---- Jacobians and Hessians ----
def _jacobian_rows(outs, ins, create_graph, strict):
    """[output][input] Jacobian blocks, one backward per output element."""
    blocks = []
    for i, out in enumerate(outs):
        rows = [[] for _ in ins]
        flat = out.reshape(-1)
        independent = f"Output {i} of the user-provided function is independent of input {{i}}."
        for k in range(out.numel()):
            gs = _zeros_for_none(_grad((flat[k],), ins, None, create_graph), ins, strict, create_graph, independent)
            for m, g in enumerate(gs):
                rows[m].append(g)
        blocks.append(tuple(_stack_jac(r, out.shape, x.shape, True, x.dtype) for r, x in zip(rows, ins)))
    return tuple(blocks)


def _jacobian_vmapped(func, ins, outs, create_graph):
    """All Jacobian rows at once: the function runs through tp.vmap on N
    independent copies of the inputs (N = number of output elements), copy k
    keeping only output element k; one backward then gives row k in copy k."""
    from .. import cat, eye as _eye, zeros
    from .._vmap import vmap
    n = sum(o.numel() for o in outs)
    copies = tuple(x.unsqueeze(0).expand((n,) + tuple(x.shape)) * 1 for x in ins)
    res = vmap(func)(*copies)
    _, bouts = _as_tuple(res, "the outputs of the vmapped function", "jacobian")
    if len(bouts) != len(outs) or any(tuple(b.shape) != (n,) + tuple(o.shape) for b, o in zip(bouts, outs)):
        raise RuntimeError("jacobian: the vmapped function's outputs do not match its unbatched outputs")
    picked = cat([b.reshape(n, -1) for b in bouts], 1)  # (n, n): copy k, output element j
    eye = _eye(n, dtype=picked.dtype, device=picked.device)
    with set_grad_enabled(_outer_grad_mode(create_graph)):
        gs = _grad((picked,), copies, (eye,), create_graph)
    gs = [zeros((n,) + tuple(x.shape), dtype=x.dtype, device=x.device) if g is None else g for g, x in zip(gs, ins)]
    blocks, start = [], 0
    for o in outs:
        k = o.numel()
        blocks.append(tuple(g[start:start + k].reshape(tuple(o.shape) + tuple(x.shape)) for g, x in zip(gs, ins)))
        start += k
    return tuple(blocks)


_STRATEGIES = ("forward-mode", "reverse-mode")


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of func at inputs: per output and input, a tensor of shape
    output.shape + input.shape (a tuple over inputs for tuple inputs, a tuple
    over outputs for tuple outputs, a tuple of tuples for both)."""
    if strategy not in _STRATEGIES:
        raise ValueError(f"jacobian: strategy must be 'forward-mode' or 'reverse-mode', got {strategy!r}")
    if strategy == "forward-mode":
        if not vectorize:
            raise NotImplementedError("jacobian: strategy='forward-mode' is only implemented with vectorize=True")
        if create_graph:
            raise NotImplementedError("jacobian: create_graph=True is not supported with strategy='forward-mode'")
    if strict and vectorize:
        raise RuntimeError("jacobian: strict=True and vectorize=True are not supported together; use "
                           "vectorize=False to check which outputs are independent of which inputs")
    with enable_grad():
        ins_tuple, ins = _as_tuple(inputs, "inputs", "jacobian")
        if strategy == "forward-mode":
            return _jacobian_forward(func, ins, ins_tuple)
        ins = _prepare(ins, create_graph, need_graph=True, who="jacobian")
        outs_tuple, outs = _outputs(func, ins, "jacobian")
        _require_graph(outs, strict, _OUTPUT_CONSTANT)
        blocks = None
        if vectorize and sum(o.numel() for o in outs) > 0:
            try:
                blocks = _jacobian_vmapped(func, ins, outs, create_graph)
            except Exception:  # noqa: BLE001 - a function vmap cannot batch gets the per-row loop
                blocks = None
        if blocks is None:
            with set_grad_enabled(_outer_grad_mode(create_graph)):
                blocks = _jacobian_rows(outs, ins, create_graph, strict)
    blocks = tuple(_detach_unless(b, create_graph) for b in blocks)
    return _restructure(blocks, (outs_tuple, ins_tuple))


def _jacobian_forward(func, ins, ins_tuple):
    """Forward mode: one jvp (forward AD) per input element, by tp.func.jacfwd."""
    from ..func import jacfwd
    ins = tuple(x.detach() for x in ins)
    probe = {}

    def f(*xs):
        outs_tuple, outs = _outputs(func, xs, "jacobian")
        probe["outs_tuple"] = outs_tuple
        return outs

    jac = jacfwd(f, argnums=tuple(range(len(ins))))(*ins)  # [output][input]
    blocks = tuple(tuple(b.detach() for b in row) for row in jac)
    return _restructure(blocks, (probe["outs_tuple"], ins_tuple))


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of scalar-valued func: the Jacobian of its gradient (the
    gradient by reverse mode, the outer Jacobian by outer_jacobian_strategy). For
    tuple inputs a tuple of tuples, block [i][j] of shape inputs[i].shape +
    inputs[j].shape."""
    ins_tuple, ins = _as_tuple(inputs, "inputs", "hessian")

    def scalar(*xs):
        return _scalar_output(func, xs, "hessian", strict)[0].reshape(())

    def gradient(*xs):
        if outer_jacobian_strategy == "forward-mode":  # dual inputs: keep their tangents through the inner grad
            xs = tuple(x if x.requires_grad else x.requires_grad_(True) for x in xs)
        g = jacobian(scalar, xs, create_graph=True)
        _require_graph(g, strict, "The hessian of the user-provided function with respect to input {i} is "
                                  "independent of the input (is the function twice differentiable?).")
        return g

    if vectorize and outer_jacobian_strategy == "reverse-mode":  # tp.vmap batches tp.func.grad by its own rule
        from ..func import grad
        gradient = grad(scalar, argnums=tuple(range(len(ins))))
    res = jacobian(gradient, ins, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    return _restructure(res, (ins_tuple, ins_tuple))
