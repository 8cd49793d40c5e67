"""Inspecting the backward graph: `t.grad_fn` is a Node with `.name()` and
`.next_functions` ((node or None, input_nr) per input)."""
from .. import _C

Node = _C._Node


def walk(fn):
    """Every node reachable from `fn` (a grad_fn), each once, parents first."""
    seen, order, stack = set(), [], [fn]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        order.append(n)
        stack.extend(child for child, _ in reversed(n.next_functions))
    return order


# -- saved-tensor hooks --------------------------------------------------------------------------
import threading as _threading

_disabled = _threading.local()  # the innermost disable_saved_tensors_hooks message, per thread


class saved_tensors_hooks:
    """Inside this context every tensor autograd saves for a backward is passed
    to pack_hook(tensor) and only what it returns is kept; the backward calls
    unpack_hook(packed) and uses the tensor it returns (same shape, dtype and
    device). Applies to operators' saved values, custom Functions'
    ctx.save_for_backward and the activations a compiled training region
    saves. Hooks nest (the innermost applies) and are per thread. A packed
    value is not checked for later in-place writes to the original tensor."""

    def __init__(self, pack_hook, unpack_hook):
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("saved_tensors_hooks: pack_hook and unpack_hook must be callable")
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        message = getattr(_disabled, "message", None)
        if message is not None:
            raise RuntimeError(message)
        _C._push_saved_tensors_hooks(self.pack_hook, self.unpack_hook)
        _stack().append((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc):
        _stack().pop()
        _C._pop_saved_tensors_hooks()
        return False


def _stack():
    s = getattr(_disabled, "stack", None)
    if s is None:
        s = _disabled.stack = []
    return s


def current_hooks():
    """(pack, unpack) of the innermost saved_tensors_hooks on this thread, or None
    (custom Functions apply them to ctx.save_for_backward)."""
    s = _stack()
    return s[-1] if s else None


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors live in host memory until the backward needs them (moved back
    to their device then): device memory for activations traded for copies.
    pin_memory is accepted (host memory is not pinned here)."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack(t):
            return (t.device, t.cpu() if t.is_cuda else t)

        def unpack(packed):
            device, t = packed
            return t.to(device) if str(device) != "cpu" else t
        super().__init__(pack, unpack)


class disable_saved_tensors_hooks:
    """Within it, entering saved_tensors_hooks raises RuntimeError(error_message)
    (code that must not have its saved tensors moved or transformed)."""

    def __init__(self, error_message):
        self.error_message = error_message

    def __enter__(self):
        self._prev = getattr(_disabled, "message", None)
        _disabled.message = self.error_message
        return self

    def __exit__(self, *exc):
        _disabled.message = self._prev
        return False
