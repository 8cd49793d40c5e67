"""Module: the base class of every layer; owns parameters, buffers and submodules.

The attribute magic (__setattr__/__getattr__) routes Parameters, Modules and
registered buffers into three ordered dicts, so that traversal
(named_parameters, state_dict, ...) visits them in registration order and
yields the same dotted names PyTorch does: checkpoints map one-to-one.
"""
from collections import OrderedDict, namedtuple
import itertools

from ..._lazy_numpy import is_ndarray, np

from ... import _C, _stepwise
from ..._grad_mode import no_grad
from ..parameter import Parameter

__all__ = ["Module"]


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class RemovableHandle:
    """Returned by register_*_hook; `remove()` unregisters the hook."""

    _ids = itertools.count()

    def __init__(self, hooks_dict):
        self._hooks = hooks_dict
        self.id = next(RemovableHandle._ids)

    def remove(self):
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class _KwargsHook:
    """A forward (pre-)hook registered with with_kwargs=True: it also receives the keyword arguments."""
    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn


def _add_hook(hooks, hook, prepend, with_kwargs):
    handle = RemovableHandle(hooks)
    hooks[handle.id] = _KwargsHook(hook) if with_kwargs else hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


def _run_forward_pre_hooks(module, args, kwargs):
    """(args, kwargs) after the module's forward pre-hooks (also used by compiled modules)."""
    for hook in list(module._forward_pre_hooks.values()):
        if isinstance(hook, _KwargsHook):
            new = hook.fn(module, args, kwargs)
            if new is not None:
                if not (isinstance(new, tuple) and len(new) == 2 and isinstance(new[1], dict)):
                    raise RuntimeError("forward pre-hook registered with with_kwargs=True must return None or a "
                                       f"tuple of (new_args, new_kwargs), but got {type(new).__name__}")
                args, kwargs = new
                args = args if isinstance(args, tuple) else (args,)
        else:
            new = hook(module, args)
            if new is not None:
                args = new if isinstance(new, tuple) else (new,)
    return args, kwargs


def _run_forward_hooks(module, args, kwargs, out):
    """The output after the module's forward hooks (also used by compiled modules)."""
    for hook in list(module._forward_hooks.values()):
        new = hook.fn(module, args, kwargs, out) if isinstance(hook, _KwargsHook) else hook(module, args, out)
        if new is not None:
            out = new
    return out


_WARNED_HOOKS = set()


def _warn_hooks_in_capture(module, backward=False):
    """A forward hook that runs inside tp.compile's capture is traced: its tensor
    operations become part of the compiled program, but its Python side effects
    (appending to a list, counting calls) happen once, at capture, not at every
    call. Say so once per hook rather than drop them silently. Full backward hooks
    cannot be called for a module run inside a capture: the capture refuses
    (tp.compile(module) and module.compile() run such a module eagerly)."""
    import warnings

    if backward:
        # Dropping them would silently change the gradients (a pre-hook that
        # scales grad_output) or skip their side effects at every step.
        raise _C.CaptureError(
            f"tp.compile: a {type(module).__name__} with full backward hooks (register_full_backward_hook / "
            "register_full_backward_pre_hook) runs inside a compiled function, whose backward cannot call them. "
            "Compile the module itself (tp.compile(module) or module.compile(), which run hooked modules "
            "eagerly), call it outside the compiled function, or remove the hooks.")
    hooks = list(module._forward_pre_hooks.values()) + list(module._forward_hooks.values())
    if all(getattr(h, "_capture_safe", False) for h in hooks):
        return  # e.g. pruning's pre-hook: pure tensor work, no Python side effects
    ids = tuple(module._forward_pre_hooks) + tuple(module._forward_hooks)
    key = (id(module), ids)
    if key in _WARNED_HOOKS:
        return
    _WARNED_HOOKS.add(key)
    warnings.warn(
        f"tp.compile: forward hooks of a {type(module).__name__} ran during capture: their tensor operations "
        "are compiled in, but their Python side effects happen only once, at capture. Use module.compile() "
        "(which runs hooks eagerly at every call) if the hooks have side effects.", UserWarning, stacklevel=3)


def _addindent(text, spaces):
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


def _check_attr_name(kind, name):
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain ".", got: {name}')


def _same_memory(a, b):
    return (a.device == b.device and a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
            and a.data_ptr() == b.data_ptr())


class Module:
    """Base class for all neural network modules; subclasses define `forward`."""

    training: bool

    def __init__(self):
        # object.__setattr__: our own __setattr__ needs these dicts to exist.
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_backward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_backward_hooks", OrderedDict())
        for name in ("_state_dict_pre_hooks", "_state_dict_hooks", "_load_state_dict_pre_hooks",
                     "_load_state_dict_post_hooks"):
            object.__setattr__(self, name, OrderedDict())
        object.__setattr__(self, "_compiled_call", None)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ---------------------------------------------------------------- registration
    def register_parameter(self, name, param):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_attr_name("parameter", name)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(tensorplay.nn.Parameter or None required)")
        if not param.is_leaf:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be "
                             "created explicitly; wrap the tensor in nn.Parameter(t.detach()) if it is a fixed value.")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_attr_name("buffer", name)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, _C.Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        _check_attr_name("module", name)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def _drop_name(self, name, keep):
        # The registry the name moves into keeps its slot, so re-assigning
        # (e.g. tying a weight) does not change the traversal order.
        for d in (self.__dict__, self._parameters, self._buffers, self._modules):
            if d is not keep:
                d.pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def __setattr__(self, name, value):
        if isinstance(value, _C.Tensor) and _C._is_tracing():
            self._refuse_rebinding_in_capture(name, value)
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._drop_name(name, params)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(tensorplay.nn.Parameter or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            if "_modules" not in self.__dict__:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._drop_name(name, self._modules)
            self._modules[name] = value
        elif name in self.__dict__.get("_modules", {}):
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                "(tensorplay.nn.Module or None expected)")
            self._modules[name] = None
        elif name in self.__dict__.get("_buffers", {}):
            if value is not None and not isinstance(value, _C.Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(tensorplay.Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _refuse_rebinding_in_capture(self, name, value):
        # `self.ema = 0.9 * self.ema + ...` or `self.hidden = h.detach()` in a
        # compiled forward: the assignment is Python state, done once at capture,
        # so every later call read the tensor bound then (in-place updates are
        # captured: the same object, `self.count += 1`, passes). A name bound for
        # the first time passes: a module built inside the function registers
        # its parameters so.
        d = self.__dict__
        for registry in ("_parameters", "_buffers"):
            if name in d.get(registry, {}):
                old = d[registry][name]
                break
        else:
            if name not in d:
                return
            old = d[name]
        if old is value:
            return
        raise _C.CaptureError(f"assigning a tensor to {type(self).__name__}.{name} inside a compiled function "
                              "(tp.compile) is not supported: it would happen only once, at capture; update it in "
                              f"place (self.{name}.copy_(...) under tp.no_grad()) or assign it outside the compiled "
                              "function")

    def __getattr__(self, name):
        # Only called when normal lookup fails: look in the three registries.
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry in d and name in d[registry]:
                return d[registry][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for registry in (self._parameters, self._buffers, self._modules):
            if name in registry:
                del registry[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = list(super().__dir__()) + list(self._parameters) + list(self._modules) + list(self._buffers)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    # ---------------------------------------------------------------- traversal
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        # Tensors are deduplicated by identity (id), never by __eq__/__hash__:
        # Tensor.__eq__ is elementwise.
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mod_prefix, mod in mods:
            for k, v in get_members(mod):
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(v))
                yield mod_prefix + ("." if mod_prefix else "") + k, v

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def set_submodule(self, target, module, strict=False):
        """Replaces (or, unless strict, adds) the submodule at dotted path `target`, as PyTorch's
        (LoRA/quantization code swaps layers by name with it)."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        atoms = target.split(".")
        parent = self if len(atoms) == 1 else self.get_submodule(".".join(atoms[:-1]))
        if strict and not hasattr(parent, atoms[-1]):
            raise AttributeError(f"{type(parent).__name__} has no attribute `{atoms[-1]}`")
        if hasattr(parent, atoms[-1]) and not isinstance(getattr(parent, atoms[-1]), Module):
            raise AttributeError(f"`{atoms[-1]}` is not an nn.Module")
        setattr(parent, atoms[-1], module)

    def get_submodule(self, target):
        mod = self
        for item in target.split(".") if target else []:
            if item not in mod._modules:
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = mod._modules[item]
        return mod

    def get_parameter(self, target):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters:
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return mod._parameters[name]

    def get_buffer(self, target):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return mod._buffers[name]

    # ---------------------------------------------------------------- modes and bulk edits
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        if _C._is_tracing():
            # As Optimizer.zero_grad: it would run only once, at capture.
            _C._note_step_refusal()  # (the compiled function then runs step-wise)
            raise _C.CaptureError("module.zero_grad() inside a compiled function (tp.compile) is not supported: "
                                  "it would run only once, at capture; call it outside the compiled function")
        for p in self.parameters():
            g = p.grad
            if g is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                # In place, as PyTorch: the same .grad object, history cut (create_graph).
                if g.grad_fn is not None:
                    g.detach_()
                else:
                    g.requires_grad_(False)
                g.zero_()

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply(self, fn):
        """Replace every parameter/buffer's memory with fn(tensor) (dtype/device moves).

        A parameter keeps its identity: its `.data` is swapped (as PyTorch does),
        so an optimizer made before `model.to("cuda")` still updates the moved
        parameters, and so does its gradient.
        """
        for m in self.children():
            m._apply(fn)
        for k, p in self._parameters.items():
            if p is None:
                continue
            new = fn(p.detach())
            if new is not p and not _same_memory(new, p):
                p.data = new
            g = p.grad
            if g is not None:  # the same .grad object too, its memory swapped
                new_g = fn(g.detach())
                if not _same_memory(new_g, g):
                    g.data = new_g
        for k, b in self._buffers.items():
            if b is not None:
                self._buffers[k] = fn(b)
        return self

    def to(self, *args, **kwargs):
        dtype = kwargs.get("dtype")
        memory_format = kwargs.get("memory_format")
        non_blocking = bool(kwargs.get("non_blocking", False))
        device = None
        for a in list(args) + [kwargs.get("device")]:
            if isinstance(a, _C.dtype):
                dtype = a
            elif isinstance(a, bool):  # to(device, dtype, non_blocking)
                non_blocking = a
            elif a is not None and not isinstance(a, _C.Tensor):
                _C._check_target_device(a, "Module.to")
                device = a
            elif a is not None:
                dtype = a.dtype
                device = a.device
        if dtype is None and memory_format is None and device is None:
            return self

        # Like PyTorch, only floating tensors change dtype (integer buffers such as counters stay),
        # and memory_format applies to the 4-d and 5-d ones (conv weights).
        def convert(t):
            if device is not None:
                t = t.to(device, non_blocking=non_blocking)
            if dtype is not None and _is_float(t.dtype):
                t = t.to(dtype)
            if memory_format is not None and t.dim() in (4, 5):
                t = t.to(memory_format=memory_format)
            return t
        return self._apply(convert)

    def float(self):
        return self.to(_C.dtype.float32)

    def double(self):
        return self.to(_C.dtype.float64)

    def half(self):
        return self.to(getattr(_C.dtype, "float16"))

    def bfloat16(self):
        return self.to(getattr(_C.dtype, "bfloat16"))

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        """Moves every parameter and buffer to the GPU (in place of their `.data`)."""
        return self.to("cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))

    # ---------------------------------------------------------------- state dict
    # PyTorch's machinery, hook for hook: pre/post hooks of state_dict and
    # load_state_dict, get_extra_state/set_extra_state, and the per-module
    # metadata (`state_dict()._metadata[prefix] = {"version": cls._version}`)
    # that _load_from_state_dict overrides read to convert old checkpoints.
    _version = 1

    def _hooks(self, name):
        hooks = self.__dict__.get(name)
        if hooks is None:  # a module made before these existed (unpickled) or without __init__
            hooks = OrderedDict()
            object.__setattr__(self, name, hooks)
        return hooks

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        if type(self).get_extra_state is not Module.get_extra_state:
            destination[prefix + "_extra_state"] = self.get_extra_state()

    def get_extra_state(self):
        """State beyond parameters and buffers to keep in the state_dict (under `_extra_state`);
        a module that overrides it also overrides set_extra_state."""
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be called.")

    def set_extra_state(self, state):
        """Restores what get_extra_state returned, from load_state_dict."""
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be called.")

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        if args:  # the old positional form state_dict(destination, prefix, keep_vars)
            destination = args[0]
            prefix = args[1] if len(args) > 1 else prefix
            keep_vars = args[2] if len(args) > 2 else keep_vars
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = dict(version=self._version)
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in list(self._hooks("_state_dict_pre_hooks").values()):
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in list(self._hooks("_state_dict_hooks").values()):
            result = hook(self, destination, prefix, local_metadata)
            if getattr(hook, "_from_public_api", False):
                if result is not None:
                    raise RuntimeError("state_dict post-hook must return None")
            elif result is not None:
                destination = result
        return destination

    def register_state_dict_pre_hook(self, hook):
        """hook(module, prefix, keep_vars), called before the module's state_dict is made."""
        hooks = self._hooks("_state_dict_pre_hooks")
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def register_state_dict_post_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata) -> None; may change state_dict in place."""
        hook._from_public_api = True
        return self._register_state_dict_hook(hook)

    def _register_state_dict_hook(self, hook):
        """The old form: hook(module, state_dict, prefix, local_metadata) may return a new state_dict."""
        hooks = self._hooks("_state_dict_hooks")
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        """hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        (with the module first when with_module=True), called before the module loads its part."""
        hooks = self._hooks("_load_state_dict_pre_hooks")
        handle = RemovableHandle(hooks)
        hooks[handle.id] = (lambda *a: hook(self, *a)) if with_module else hook
        return handle

    def register_load_state_dict_pre_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs), called before the module loads its part (it may rename keys in place)."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook):
        """hook(module, incompatible_keys) -> None, called after the module and its children
        loaded; it may change incompatible_keys.missing_keys/unexpected_keys in place (before
        strict=True raises for them)."""
        hooks = self._hooks("_load_state_dict_post_hooks")
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """PyTorch's signature: modules porting an override (renaming old keys, then calling super())
        work unchanged."""
        for hook in list(self._hooks("_load_state_dict_pre_hooks").values()):
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        assign = bool(local_metadata.get("assign_to_params_buffers", False))
        local = {k: v for k, v in self._parameters.items() if v is not None}
        local.update((k, v) for k, v in self._buffers.items()
                     if v is not None and k not in self._non_persistent_buffers_set)
        for name, current in local.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = _as_tensor(state_dict[key])
            if value is None:
                error_msgs.append(f'While copying the parameter named "{key}", expected a Tensor from the '
                                  f"checkpoint but received {type(state_dict[key]).__name__}")
                continue
            if tuple(value.shape) != tuple(current.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {tuple(value.shape)} "
                                  f"from checkpoint, the shape in current model is {tuple(current.shape)}.")
                continue
            try:
                self._load_one(name, current, value, assign)
            except Exception as e:  # noqa: BLE001  (reported like PyTorch, with the key)
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions in the model are '
                                  f"{tuple(current.shape)} and whose dimensions in the checkpoint are "
                                  f"{tuple(value.shape)}, an exception occurred : {e}.")
        extra_state_key = prefix + "_extra_state"
        if type(self).set_extra_state is not Module.set_extra_state:
            if extra_state_key in state_dict:
                self.set_extra_state(state_dict[extra_state_key])
            elif strict:
                missing_keys.append(extra_state_key)
        elif strict and extra_state_key in state_dict:
            unexpected_keys.append(extra_state_key)
        if strict:
            for key in state_dict:
                if key.startswith(prefix) and key != extra_state_key:
                    first = key[len(prefix):].split(".", 1)
                    if len(first) > 1:
                        if first[0] not in self._modules:
                            unexpected_keys.append(key)
                    elif first[0] not in local:
                        unexpected_keys.append(key)

    def _load_one(self, name, current, value, assign):
        if not assign:
            with no_grad():
                current.copy_(value)
        elif name in self._parameters:
            self._parameters[name] = Parameter(value.detach(), current.requires_grad)
        else:
            self._buffers[name] = value.detach()

    def load_state_dict(self, state_dict, strict=True, assign=False):
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict).__name__}.")
        missing, unexpected, errors = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)  # a copy: load hooks may rename its keys
        if metadata is not None:
            state_dict._metadata = metadata

        def load(module, local_state_dict, prefix):
            local_metadata = {} if metadata is None else dict(metadata.get(prefix[:-1], {}))
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(local_state_dict, prefix, local_metadata, True, missing, unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    load(child, {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)},
                         child_prefix)
            incompatible = _IncompatibleKeys(missing, unexpected)
            for hook in list(module._hooks("_load_state_dict_post_hooks").values()):
                if hook(module, incompatible) is not None:
                    raise RuntimeError("Hooks registered with ``register_load_state_dict_post_hook`` are not "
                                       "expected to return new values, if incompatible_keys need to be modified, "
                                       "it should be done inplace.")

        load(self, state_dict, "")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        return _IncompatibleKeys(missing, unexpected)

    # ---------------------------------------------------------------- calling
    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) -> None or new args (a tuple, or one value); with_kwargs=True:
        hook(module, args, kwargs) -> None or a (new_args, new_kwargs) pair. prepend=True runs
        it before the hooks already registered."""
        return _add_hook(self._forward_pre_hooks, hook, prepend, with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """hook(module, args, output) -> None or a replacement output; with_kwargs=True:
        hook(module, args, kwargs, output). prepend=True runs it before the hooks already registered."""
        if always_call:
            raise NotImplementedError("register_forward_hook: always_call=True is not supported")
        return _add_hook(self._forward_hooks, hook, prepend, with_kwargs)

    def register_full_backward_hook(self, hook):
        """hook(module, grad_input, grad_output) -> None or a new grad_input tuple, called when
        the gradients with respect to the module's positional inputs are computed."""
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        return handle

    def register_full_backward_pre_hook(self, hook):
        """hook(module, grad_output) -> None or a new grad_output tuple, called when the
        gradients with respect to the module's outputs are computed."""
        handle = RemovableHandle(self._backward_pre_hooks)
        self._backward_pre_hooks[handle.id] = hook
        return handle

    def _call_impl(self, *args, **kwargs):
        if (self._forward_pre_hooks or self._forward_hooks) and _C._is_tracing():
            _warn_hooks_in_capture(self)
        if self._forward_pre_hooks:
            args, kwargs = _run_forward_pre_hooks(self, args, kwargs)
        d = self.__dict__
        bw = None
        if (d.get("_backward_hooks") or d.get("_backward_pre_hooks")) and _C.is_grad_enabled():
            if _C._is_tracing():
                _warn_hooks_in_capture(self, backward=True)
            else:
                from ._backward_hooks import BackwardHook
                bw = BackwardHook(self)
                args = bw.setup_inputs(args)
        out = self.forward(*args, **kwargs)
        if self._forward_hooks:
            out = _run_forward_hooks(self, args, kwargs, out)
        if bw is not None:
            out = bw.setup_outputs(out)
        return out

    def __call__(self, *args, **kwargs):
        compiled = self.__dict__.get("_compiled_call")
        if compiled is not None:
            return compiled(*args, **kwargs)
        if _stepwise.ACTIVE:  # a compiled training step running step-wise: this call compiled
            return _stepwise.module_call(self, args, kwargs)
        return self._call_impl(*args, **kwargs)

    def compile(self, *args, **kwargs):
        """Compile this module's forward with tp.compile (in place; like torch's Module.compile).

        Parameters are free tensors of the traced function; the compiler reads them
        as constants by reference, and eager semantics apply when they require grad.
        """
        from ...compiler import _CompiledModule

        object.__setattr__(self, "_compiled_call", _CompiledModule(self, args, kwargs))

    # ---------------------------------------------------------------- printing
    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        for key, module in self._modules.items():
            lines.append("(" + key + "): " + _addindent(repr(module), 2))
        main = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                main += lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


def _as_tensor(value):
    """A checkpoint value as a tp.Tensor: tensors as they are, NumPy arrays and DLPack producers
    (a PyTorch state dict, for instance) converted; None for anything else."""
    if isinstance(value, _C.Tensor):
        return value
    if is_ndarray(value):
        return _C.from_numpy(np.ascontiguousarray(value))
    if hasattr(value, "__dlpack__"):
        if getattr(value, "requires_grad", False):
            value = value.detach()
        return _C.from_dlpack(value)
    return None


def _is_float(dtype):
    return "float" in str(dtype)
