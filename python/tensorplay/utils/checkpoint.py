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
import warnings

from .. import _C
from .._grad_mode import enable_grad
from ..autograd.function import Function

__all__ = ["checkpoint", "checkpoint_sequential"]

Tensor = _C.Tensor


class _CheckpointFunction(Function):
    @staticmethod
    def forward(ctx, run, preserve_rng_state, anchor, *args):
        from .. import get_rng_state
        ctx.run = run
        ctx.rng_state = get_rng_state() if preserve_rng_state else None
        ctx.tensor_at = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.others = [None if isinstance(a, Tensor) else a for a in args]
        ctx.input_requires_grad = [args[i].requires_grad for i in ctx.tensor_at]
        ctx.save_for_backward(*[args[i] for i in ctx.tensor_at])
        return run(*args)

    @staticmethod
    def backward(ctx, *grads):
        from .. import autograd, get_rng_state, set_rng_state
        args = list(ctx.others)
        inputs = []
        for i, t, rg in zip(ctx.tensor_at, ctx.saved_tensors, ctx.input_requires_grad):
            d = t.detach()
            if rg:
                d.requires_grad_(True)
                inputs.append(d)
            args[i] = d
        now = get_rng_state()
        if ctx.rng_state is not None:
            set_rng_state(ctx.rng_state)
        try:
            with enable_grad():
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
        by_position = [next(it) if rg else None for rg in ctx.input_requires_grad]
        full = [None] * len(args)
        for i, g in zip(ctx.tensor_at, by_position):
            full[i] = g
        return (None, None, None, *full)


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default", debug=False,
               preserve_rng_state=True, **kwargs):
    """Runs function(*args, **kwargs) keeping only its inputs for the backward
    pass, which recomputes it (module docstring). Returns what function returns
    (a tensor or a tuple)."""
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
    run = (lambda *a: function(*a, **kwargs)) if kwargs else function
    if _C._is_tracing() or not _C.is_grad_enabled():
        return run(*args)  # compiled: the partitioner decides; no_grad: nothing to keep
    from .. import empty
    # Records the call even when no input requires grad: the parameters inside
    # still need their gradients (PyTorch's non-reentrant variant gives them).
    anchor = empty(0, requires_grad=True)
    out = _CheckpointFunction.apply(run, preserve_rng_state, anchor, *args)
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
