"""tp.utils.checkpoint: activation checkpointing in eager mode, with PyTorch's API.

`checkpoint(fn, *args)` runs `fn` without recording its backward graph and
keeps only its inputs; the backward pass runs `fn` again, with gradients on and
the same random numbers (dropout masks), and backpropagates through that run.
Memory: the activations inside `fn` are not held between forward and backward;
cost: `fn` runs twice.

Inside tp.compile the function is captured inline: which activations a
compiled region keeps and which it recomputes is the partitioner's choice
(`options={"activation_memory_budget": ...}`, Section 5).

Both of PyTorch's variants (`use_reentrant=True/False`) run as described. The
parameters `fn` uses receive their gradients from `loss.backward()`; with
`tp.autograd.grad(...)` or `backward(inputs=...)` only the gradients of the
inputs can be delivered, and asking through them for a parameter used inside
raises (PyTorch's reentrant variant refuses these calls too).
"""
import contextlib
import warnings

from .. import _C
from .._grad_mode import enable_grad
from ..autograd.function import Function

__all__ = ["checkpoint", "checkpoint_sequential"]

Tensor = _C.Tensor


def _autocast_state():
    """The autocast state the forward ran under (None when it was off or suspended)."""
    if not _C._autocast_active():
        return None
    return ([(d, _C._is_autocast_enabled(d), _C._get_autocast_dtype(d)) for d in ("cpu", "cuda")],
            _C._is_autocast_cache_enabled())


@contextlib.contextmanager
def _recompute_autocast(state):
    """The recomputation runs under the forward's autocast state, as PyTorch's
    checkpoint restores it: the engine suspends autocast around a backward node,
    so the rerun computed in float32 the values the forward had computed in
    16 bits (gradients of another function than the one that ran)."""
    if state is None:
        yield
        return
    from ..amp.autocast_mode import autocast
    devices, cache = state
    old = _C._autocast_swap_suspended(0)
    try:
        with contextlib.ExitStack() as stack:
            for d, on, dtype in devices:
                stack.enter_context(autocast(d, dtype=dtype, enabled=on, cache_enabled=cache))
            yield
    finally:
        _C._autocast_swap_suspended(old)


class _CheckpointFunction(Function):
    @staticmethod
    def forward(ctx, run, preserve_rng_state, anchor, *tensors):
        from .. import get_rng_state
        ctx.run = run
        ctx.rng_state = get_rng_state() if preserve_rng_state else None
        ctx.autocast = _autocast_state()
        ctx.input_requires_grad = [t.requires_grad for t in tensors]
        ctx.save_for_backward(*tensors)
        return run(*tensors)

    @staticmethod
    def backward(ctx, *grads):
        from .. import autograd, get_rng_state, set_rng_state
        args, inputs = [], []
        for t, rg in zip(ctx.saved_tensors, ctx.input_requires_grad):
            d = t.detach()
            if rg:
                d.requires_grad_(True)
                inputs.append(d)
            args.append(d)
        now = get_rng_state()
        if ctx.rng_state is not None:
            set_rng_state(ctx.rng_state)
        try:
            with enable_grad(), _recompute_autocast(ctx.autocast):
                out = ctx.run(*args)
        finally:
            if ctx.rng_state is not None:
                set_rng_state(now)
        outs = out if isinstance(out, tuple) else (out,)
        pairs = [(o, g) for o, g in zip(outs, grads) if isinstance(o, Tensor) and o.requires_grad and g is not None]
        roots, root_grads = [o for o, _ in pairs], [g for _, g in pairs]
        if not roots:
            input_grads = [None] * len(inputs)
        elif _C._engine_accumulates():
            # loss.backward(): the parameters fn uses accumulate into their .grad here.
            autograd.backward(roots, root_grads)
            input_grads = [d.grad for d in inputs]
        else:
            from ..autograd.graph import walk
            leaves = sum(1 for r in roots if r.grad_fn is not None
                         for n in walk(r.grad_fn) if n.name() == "AccumulateGrad")
            if leaves > len(inputs):
                raise RuntimeError(
                    "checkpoint: the checkpointed function uses tensors that require grad besides its inputs "
                    "(parameters); tp.autograd.grad() and backward(inputs=...) cannot reach them through a "
                    "checkpoint: call loss.backward() instead")
            input_grads = list(autograd.grad(roots, inputs, root_grads, allow_unused=True)) if inputs else []
        it = iter(input_grads)
        return (None, None, None, *[next(it) if rg else None for rg in ctx.input_requires_grad])


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default", debug=False,
               preserve_rng_state=True, **kwargs):
    """Runs function(*args, **kwargs) keeping only its inputs for the backward
    pass, which recomputes it (module docstring). Returns what function returns
    (a tensor or a tuple). Every tensor in the arguments, keyword arguments
    included and those inside lists, tuples and dicts, is an input: its
    gradient flows back through the checkpoint."""
    if use_reentrant is None:
        warnings.warn("tp.utils.checkpoint: pass use_reentrant explicitly (False is recommended), as PyTorch asks; "
                      "both variants behave the same here", stacklevel=2)
    if context_fn is not None:
        raise NotImplementedError("tp.utils.checkpoint: context_fn (selective checkpointing) is not supported")
    if determinism_check not in ("default", "none"):
        raise ValueError(f"tp.utils.checkpoint: determinism_check must be 'default' or 'none', got "
                         f"{determinism_check!r}")
    if not callable(function):
        raise TypeError(f"tp.utils.checkpoint: function must be callable, got {type(function).__name__}")
    if _C._is_tracing() or not _C.is_grad_enabled():
        return function(*args, **kwargs)  # compiled: the partitioner decides; no_grad: nothing to keep
    from .. import empty
    from ._pytree import tree_flatten, tree_unflatten
    # The tensors anywhere in the arguments are the Function's inputs. One kept
    # as a plain object (in a list, or a keyword argument) was rerun with its
    # history: the recomputation's backward went into the graph before the
    # checkpoint, which the outer backward then walked a second time.
    leaves, spec = tree_flatten((args, kwargs))
    tensor_at = [i for i, a in enumerate(leaves) if isinstance(a, Tensor)]

    def run(*tensors):
        full = list(leaves)
        for i, t in zip(tensor_at, tensors):
            full[i] = t
        a, k = tree_unflatten(full, spec)
        return function(*a, **k)

    # Records the call even when no input requires grad: the parameters inside
    # still need their gradients (PyTorch's non-reentrant variant gives them).
    anchor = empty(0, requires_grad=True)
    out = _CheckpointFunction.apply(run, preserve_rng_state, anchor, *[leaves[i] for i in tensor_at])
    if not isinstance(out, (Tensor, tuple)):
        raise TypeError(f"tp.utils.checkpoint: the function must return a tensor or a tuple, got "
                        f"{type(out).__name__}")
    return out


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Runs a sequence of modules/functions (or a Sequential) in `segments`
    checkpointed chunks; the last chunk runs normally, as in PyTorch."""
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    functions = list(functions)
    if segments < 1:
        raise ValueError(f"tp.utils.checkpoint_sequential: segments must be at least 1, got {segments}")
    size = max(1, len(functions) // segments)

    def chunk(lo, hi):
        def run(x):
            for f in functions[lo:hi]:
                x = f(x)
            return x
        return run

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(chunk(start, end + 1), input, use_reentrant=use_reentrant, **kwargs)
    return chunk(end + 1, len(functions))(input)
