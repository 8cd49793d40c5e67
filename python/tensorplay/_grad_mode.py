"""Context managers (and decorators) switching gradient recording."""
import functools

from . import _C


class set_grad_enabled:
    def __init__(self, mode):
        self.prev = _C.is_grad_enabled()
        self.mode = bool(mode)
        _C._set_grad_enabled(self.mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)
        return False


class _GradModeContext:
    mode = True

    def __enter__(self):
        self.prev = _C.is_grad_enabled()
        _C._set_grad_enabled(self.mode)
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradModeContext):
    mode = False


class enable_grad(_GradModeContext):
    mode = True
