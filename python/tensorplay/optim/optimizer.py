"""Optimizer base: parameter groups, per-parameter state, zero_grad, state_dict in PyTorch's format.

State is keyed by the parameter objects themselves (as in PyTorch). Parameters
are compared by identity (id), never with ==, because Tensor.__eq__ is
elementwise.
"""
import functools
from collections import OrderedDict, defaultdict

from .. import _C, _stepwise
from .._grad_mode import no_grad
from ..nn.modules.module import RemovableHandle


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()

_STEP_IN_CAPTURE = ("{}.step() inside a compiled function (tp.compile) is not supported: the optimizer's state "
                    "(momentum buffers and Adam moments, created at the first step and kept in opt.state) and its "
                    "hyperparameters (an lr a scheduler changes) are Python state a capture would bake in. Compile "
                    "the step itself, step = tp.compile(opt.step), and call it outside the compiled function (e.g. "
                    "after a compiled clip_grad_norm_)")


def _add_hook(hooks, hook, prepend=False):
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


# Step hooks of every optimizer (torch.optim.optimizer.register_optimizer_step_pre/post_hook).
_global_step_pre_hooks = OrderedDict()
_global_step_post_hooks = OrderedDict()


def register_optimizer_step_pre_hook(hook):
    """hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs), before every optimizer's step."""
    return _add_hook(_global_step_pre_hooks, hook)


def register_optimizer_step_post_hook(hook):
    """hook(optimizer, args, kwargs) -> None, after every optimizer's step."""
    return _add_hook(_global_step_post_hooks, hook)


def _with_step_hooks(opt, fn, args, kwargs):
    """fn(*args, **kwargs) between the step pre- and post-hooks (global ones first), as PyTorch
    runs them around step(). Once per step: a step reached from inside another (a subclass's step
    calling super().step(), the eager fallback of a compiled step) runs none; nor does a capture,
    since tp.compile(opt.step) runs the hooks around its compiled call, as Python."""
    d = opt.__dict__
    own_pre, own_post = d.get("_optimizer_step_pre_hooks"), d.get("_optimizer_step_post_hooks")
    if d.get("_in_step_hooks") or not (own_pre or own_post or _global_step_pre_hooks or _global_step_post_hooks) \
            or _C._is_tracing():
        return fn(*args, **kwargs)
    d["_in_step_hooks"] = True
    args = (opt,) + tuple(args)  # as PyTorch's hooks see them: the optimizer is args[0]
    try:
        for hook in list(_global_step_pre_hooks.values()) + list((own_pre or {}).values()):
            result = hook(opt, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"{hook} must return None or a tuple of (new_args, new_kwargs), but got "
                                       f"{result}.")
                args, kwargs = result
        out = fn(*args[1:], **kwargs)
        for hook in list(_global_step_post_hooks.values()) + list((own_post or {}).values()):
            hook(opt, args, kwargs)
        return out
    finally:
        d["_in_step_hooks"] = False


class Optimizer:
    def __init_subclass__(cls, **kwargs):
        # A subclass's own step() (a user's optimizer that never calls
        # super().step()) is refused inside other captures too: the capture would
        # run its Python once, so state it creates (momentum after
        # opt.state.clear()) would never be created again by the cached version.
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is None or getattr(step, "_tp_refuses_capture", False):
            return

        def run(self, *args, **kwargs):
            if _stepwise.ACTIVE:  # inside a step-wise compiled training step: tp.compile(opt.step)
                return _stepwise.optimizer_step(self, step, args, kwargs)
            self._refuse_step_in_capture()
            return step(self, *args, **kwargs)

        @functools.wraps(step)
        def refusing_step(self, *args, **kwargs):
            return _with_step_hooks(self, functools.partial(run, self), args, kwargs)

        refusing_step._tp_refuses_capture = True
        cls.step = refusing_step

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        if isinstance(params, _C.Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {type(params).__name__}")
        if isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering of "
                            "tensors in sets will change between runs. Please use a list instead.")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(k for k in group if k != "params"):
                lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)

    def add_param_group(self, param_group):
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, _C.Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering of "
                            "tensors in sets will change between runs. Please use a list instead.")
        else:
            params = list(params)
        for p in params:
            if not isinstance(p, _C.Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        group = dict(param_group, params=params)
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            group.setdefault(name, default)
        if len({id(p) for p in params}) != len(params):
            raise ValueError("optimizer contains a parameter group with duplicate parameters")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        if _C._is_tracing():
            # Which gradients exist is Python state: a capture would clear them
            # once, and later calls of the compiled function would accumulate.
            _C._note_step_refusal()  # (the compiled training step then runs step-wise)
            raise _C.CaptureError("optimizer.zero_grad() inside a compiled function (tp.compile) is not supported: "
                                  "it would run only once, at capture; call it outside the compiled function")
        for group in self.param_groups:
            for p in group["params"]:
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

    def step(self, closure=None):
        """One update of every parameter that has a gradient, through the subclass's
        `_update(p, group)`; the closure (if any) is evaluated first, with grad on."""
        return _with_step_hooks(self, self._step, () if closure is None else (closure,), {})

    def _step(self, closure=None):
        if _stepwise.ACTIVE:  # inside a step-wise compiled training step: tp.compile(opt.step)
            return _stepwise.optimizer_step(self, Optimizer._step_updates, (),
                                            {} if closure is None else {"closure": closure})
        return self._step_updates(closure)

    def _step_updates(self, closure=None):
        self._refuse_step_in_capture()
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        self._update(p, group)
        return loss

    def _refuse_step_in_capture(self):
        # Only tp.compile(opt.step) (compiler._CompiledOptimizerStep) captures a step:
        # its key follows the state layout and parameters, its hyperparameters are
        # inputs, and a call whose capture created state is not replayed. A step
        # reached from another compiled function would run its Python once, at capture.
        if _C._is_tracing() and not getattr(self, "_capturing_own_step", False):
            _C._note_step_refusal()
            raise _C.CaptureError(_STEP_IN_CAPTURE.format(type(self).__name__))

    def _update(self, p, group):
        raise NotImplementedError(f"{type(self).__name__} does not define an update")

    def _closure_loss(self, closure):
        if closure is None:
            return None
        from .._grad_mode import enable_grad
        with enable_grad():
            return closure()

    # ------------------------------------------------------------ hooks (PyTorch's API)
    def _hooks(self, name):
        hooks = self.__dict__.get(name)
        if hooks is None:
            hooks = self.__dict__[name] = OrderedDict()
        return hooks

    def register_step_pre_hook(self, hook):
        """hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs), before each step()."""
        return _add_hook(self._hooks("_optimizer_step_pre_hooks"), hook)

    def register_step_post_hook(self, hook):
        """hook(optimizer, args, kwargs) -> None, after each step()."""
        return _add_hook(self._hooks("_optimizer_step_post_hooks"), hook)

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer) -> None, before state_dict() builds the dict."""
        return _add_hook(self._hooks("_optimizer_state_dict_pre_hooks"), hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) -> None or a new state dict, after state_dict()."""
        return _add_hook(self._hooks("_optimizer_state_dict_post_hooks"), hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) -> None or a state dict to load instead."""
        return _add_hook(self._hooks("_optimizer_load_state_dict_pre_hooks"), hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer) -> None, after load_state_dict()."""
        return _add_hook(self._hooks("_optimizer_load_state_dict_post_hooks"), hook, prepend)

    # ------------------------------------------------------------ state dict
    def state_dict(self):
        for hook in list((self.__dict__.get("_optimizer_state_dict_pre_hooks") or {}).values()):
            hook(self)
        sd = self._state_dict()
        for hook in list((self.__dict__.get("_optimizer_state_dict_post_hooks") or {}).values()):
            result = hook(self, sd)
            if result is not None:
                sd = result
        return sd

    def load_state_dict(self, state_dict):
        for hook in list((self.__dict__.get("_optimizer_load_state_dict_pre_hooks") or {}).values()):
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        self._load_state_dict(state_dict)
        for hook in list((self.__dict__.get("_optimizer_load_state_dict_post_hooks") or {}).values()):
            hook(self)

    def _state_dict(self):
        """{'state': {index: {...}}, 'param_groups': [{..., 'params': [indices]}]}; indices count
        parameters across groups in order, as in PyTorch."""
        index_of = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index_of.setdefault(id(p), len(index_of))
            packed["params"] = [index_of[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {}
        for p, s in self.state.items():
            key = index_of[id(p)] if isinstance(p, _C.Tensor) else p
            state[key] = dict(s)
        return {"state": state, "param_groups": groups}

    def _load_state_dict(self, state_dict):
        groups, saved_groups = self.param_groups, state_dict["param_groups"]
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for g, sg in zip(groups, saved_groups):
            if len(g["params"]) != len(sg["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                                 "optimizer's group")
        param_of = {}
        for g, sg in zip(groups, saved_groups):
            for idx, p in zip(sg["params"], g["params"]):
                param_of[idx] = p
        self.state = defaultdict(dict)
        for key, s in state_dict["state"].items():
            if key in param_of:
                p = param_of[key]
                self.state[p] = {k: self._cast_state(p, k, v) for k, v in s.items()}
            else:
                self.state[key] = dict(s)
        self.param_groups = [dict(sg, params=g["params"]) for g, sg in zip(groups, saved_groups)]

    @staticmethod
    def _cast_state(param, key, value):
        # Copies, so the loaded optimizer never aliases the checkpoint; floating state
        # follows the parameter's dtype, except the step counter (kept as saved).
        # Containers (LBFGS's history lists) are copied element by element: a shared list
        # would let one optimizer's steps rewrite the other's history.
        if isinstance(value, (list, tuple)):
            return type(value)(Optimizer._cast_state(param, key, v) for v in value)
        if isinstance(value, dict):
            return {k: Optimizer._cast_state(param, key, v) for k, v in value.items()}
        if not isinstance(value, _C.Tensor):
            return value
        with no_grad():
            v = value.detach().clone()
            if key != "step" and "float" in str(v.dtype) and v.dtype != param.dtype:
                v = v.to(param.dtype)
        return v


# A compiled optimizer step (tp.compile(optimizer.step)) puts its float
# hyperparameters into the param groups as 0-d float64 tensors (graph inputs: a
# learning-rate schedule does not recompile). The updates use these helpers
# where an operator takes a hyperparameter as a Python number.

def _nonzero(v):
    """`v != 0` for a hyperparameter; a lifted one is never zero (zeros stay numbers)."""
    return True if isinstance(v, _C.Tensor) else v != 0


def _add_scaled(t, other, alpha, inplace=False):
    """t.add(other, alpha=alpha) (or add_) with the same bits for a lifted alpha:
    the eager kernel rounds alpha to t's dtype and forms t + alpha * other in double."""
    if not isinstance(alpha, _C.Tensor):
        return t.add_(other, alpha=alpha) if inplace else t.add(other, alpha=alpha)
    a = alpha.to(t.dtype).double()
    r = (t.double() + other.double() * a).to(t.dtype)
    return t.copy_(r) if inplace else r
