"""tensorplay.nn.utils.skip_init: a module built without running its
initialization (its parameters hold arbitrary values, to be loaded or set
next), as PyTorch's skip_init; the random stream is left as it was."""
import inspect

import tensorplay as _tp

__all__ = ["skip_init"]


def skip_init(module_cls, *args, **kwargs):
    """module_cls(*args, **kwargs) with uninitialized parameters and buffers."""
    if not isinstance(module_cls, type):
        raise TypeError(f"skip_init: expected a module class, got {type(module_cls).__name__}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError(f"skip_init: {module_cls.__name__} must accept a 'device' argument (as PyTorch requires)")
    with _tp.random.fork_rng():
        module = module_cls(*args, **kwargs)
    with _tp.no_grad():
        for p in module.parameters():
            p.data = _tp.empty_like(p)
    return module
