"""Module.register_full_backward_hook / register_full_backward_pre_hook.

One module call with such hooks passes its positional tensor inputs and its
tensor outputs through identity autograd Functions: the outputs' Function sees
the gradients with respect to the outputs (grad_output; pre-hooks may replace
them), the inputs' Function the gradients with respect to the inputs
(grad_input; hooks may replace them). Entries for non-tensor arguments, and for
tensors that get no gradient, are None.
"""
from ... import _C
from ...autograd.function import Function

Tensor = _C.Tensor


class _Identity(Function):
    _capture_derives_backward = True  # an identity; the hooks themselves are the capture's concern

    @staticmethod
    def forward(ctx, on_grads, *tensors):
        ctx.on_grads = on_grads
        ctx.set_materialize_grads(False)  # a gradient that does not arrive is None, not zeros
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        return (None,) + tuple(ctx.on_grads(grads))

    @staticmethod
    def jvp(ctx, on_grads_tangent, *tangents):
        return tangents  # an identity: forward-mode tangents pass through unchanged


def _check_replacement(module, what, new, old):
    if not isinstance(new, (tuple, list)) or len(new) != len(old):
        raise RuntimeError(f"backward hook of {type(module).__name__} returned {type(new).__name__} of length "
                           f"{len(new) if isinstance(new, (tuple, list)) else '-'} as the new {what}; expected a "
                           f"tuple of {len(old)} (one per {what} entry) or None")
    return tuple(new)


class BackwardHook:
    """The hooks of one call of one module."""

    def __init__(self, module):
        self.module = module
        self.n_args = 0
        self.input_pos = None  # positions of the hooked inputs; None: no input requires grad
        self.grad_output = None

    def setup_inputs(self, args):
        self.n_args = len(args)
        pos = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        if not pos:
            return args
        self.input_pos = pos
        new = _Identity.apply(self._on_grad_input, *[args[i] for i in pos])
        args = list(args)
        for i, t in zip(pos, new):
            args[i] = t
        return tuple(args)

    def setup_outputs(self, out):
        single = isinstance(out, Tensor)
        items = [out] if single else list(out) if isinstance(out, (tuple, list)) else None
        if items is None:
            return out
        pos = [k for k, o in enumerate(items) if isinstance(o, Tensor) and o.requires_grad]
        if not pos:
            return out
        self.n_outputs = len(items)
        self.output_pos = pos
        new = _Identity.apply(self._on_grad_output, *[items[k] for k in pos])
        for k, t in zip(pos, new):
            items[k] = t
        if single:
            return items[0]
        return type(out)(items) if isinstance(out, list) or type(out) is tuple else type(out)(*items)

    def _on_grad_output(self, grads):
        grad_output = [None] * self.n_outputs
        for k, g in zip(self.output_pos, grads):
            grad_output[k] = g
        grad_output = tuple(grad_output)
        m = self.module
        for hook in list(m._backward_pre_hooks.values()):
            new = hook(m, grad_output)
            if new is not None:
                grad_output = _check_replacement(m, "grad_output", new, grad_output)
        self.grad_output = grad_output
        if self.input_pos is None:  # no input requires grad: the hooks see no grad_input now
            for hook in list(m._backward_hooks.values()):
                if hook(m, (None,) * self.n_args, grad_output) is not None:
                    raise RuntimeError(f"backward hook of {type(m).__name__} returned a new grad_input, but no input "
                                       "of the module requires grad")
        return [grad_output[k] for k in self.output_pos]

    def _on_grad_input(self, grads):
        grad_input = [None] * self.n_args
        for i, g in zip(self.input_pos, grads):
            grad_input[i] = g
        grad_input = tuple(grad_input)
        m = self.module
        for hook in list(m._backward_hooks.values()):
            new = hook(m, grad_input, self.grad_output)
            if new is not None:
                grad_input = _check_replacement(m, "grad_input", new, grad_input)
        return [grad_input[i] for i in self.input_pos]
