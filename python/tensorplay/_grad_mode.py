"""Switches for gradient recording: no_grad, enable_grad, set_grad_enabled and
inference_mode. Each works as a context manager and as a decorator."""
import functools
import inspect

from . import _C


class _Mode:
    """Base: subclasses say which state they enter (`_enter`) and how to restore it."""

    def __enter__(self):
        self._prev = self._save()
        self._enter()
        return self

    def __exit__(self, *exc):
        self._restore(self._prev)
        return False

    def _save(self):
        return _C.is_grad_enabled()

    def _restore(self, prev):
        _C._set_grad_enabled(prev)

    def clone(self):
        return self.__class__()

    def __call__(self, fn):
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def gen_wrapper(*args, **kwargs):
                # Each step of the generator runs under the mode, not the code between steps.
                gen = fn(*args, **kwargs)
                value = None
                while True:
                    try:
                        with self.clone():
                            item = gen.send(value)
                    except StopIteration as stop:
                        return stop.value
                    value = yield item
            return gen_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper


class _NoArgMode(_Mode):
    """A mode that also decorates without parentheses: `@no_grad` as well as `@no_grad()`."""

    def __new__(cls, fn=None):
        self = super().__new__(cls)
        return self(fn) if callable(fn) else self

    def __init__(self, fn=None):
        pass


class no_grad(_NoArgMode):
    """Operations inside do not record autograd history."""

    def _enter(self):
        _C._set_grad_enabled(False)


class enable_grad(_NoArgMode):
    """Turns recording back on (inside no_grad)."""

    def _enter(self):
        _C._set_grad_enabled(True)


class _GradState(_Mode):
    """Enters a fixed grad mode (what set_grad_enabled's decorator uses per call)."""

    def __init__(self, mode):
        self.mode = mode

    def clone(self):
        return _GradState(self.mode)

    def _enter(self):
        _C._set_grad_enabled(self.mode)


class set_grad_enabled(_Mode):
    """set_grad_enabled(mode): takes effect at once when called as a function,
    and is undone at the end of a `with` block or of each decorated call."""

    def __init__(self, mode):
        self.mode = bool(mode)
        self._prev = _C.is_grad_enabled()
        _C._set_grad_enabled(self.mode)

    def __enter__(self):  # the constructor already switched
        return self

    def clone(self):
        return _GradState(self.mode)

    def __call__(self, fn):
        _C._set_grad_enabled(self._prev)  # used as a decorator: undo the constructor's switch
        return super().__call__(fn)


class inference_mode(_Mode):
    """Like no_grad, and tensors created inside are inference tensors
    (`t.is_inference()`): faster to make, but they can never take part in
    autograd afterwards. inference_mode(False) switches it off inside."""

    def __new__(cls, mode=True):
        self = super().__new__(cls)
        if callable(mode):  # @inference_mode without parentheses
            self.mode = True
            return self(mode)
        return self

    def __init__(self, mode=True):
        self.mode = True if callable(mode) else bool(mode)

    def clone(self):
        return self.__class__(self.mode)

    def _save(self):
        return (_C.is_grad_enabled(), _C.is_inference_mode_enabled())

    def _restore(self, prev):
        _C._set_grad_enabled(prev[0])
        _C._set_inference_mode(prev[1])

    def _enter(self):
        if self.mode:
            _C._set_grad_enabled(False)
            _C._set_inference_mode(True)
        else:
            _C._set_inference_mode(False)



def is_inference_mode_enabled():
    return _C.is_inference_mode_enabled()
