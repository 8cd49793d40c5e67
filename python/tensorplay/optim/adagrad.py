"""Adagrad (Duchi et al., 2011): per-coordinate step sizes lr / sqrt(sum of squared
gradients), with learning-rate decay, L2 weight decay and maximize; PyTorch's update rule
and state (step, sum), created at construction as PyTorch does, so a state_dict taken
before the first step already lists every parameter."""
import tensorplay as _tp
from .optimizer import Optimizer, _add_scaled

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if differentiable:  # (fused=True: the same update, as for Adam)
            raise NotImplementedError("Adagrad: differentiable is not supported")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    def add_param_group(self, param_group):
        # Also called by the base constructor, once per group.
        super().add_param_group(param_group)
        for p in self.param_groups[-1]["params"]:
            self._init_state(p, self.param_groups[-1])

    def _init_state(self, p, group):
        state = self.state[p]
        if not state:
            state["step"] = _tp.zeros(1, dtype=_tp.float32).reshape([])
            state["sum"] = _tp.full(tuple(p.shape), float(group["initial_accumulator_value"]), dtype=p.dtype,
                                       device=p.device)

    def _update(self, p, group):
        grad = p.grad
        if grad.dtype != p.dtype:
            raise TypeError(f"Adagrad: gradient dtype {grad.dtype} differs from parameter dtype {p.dtype}")
        if group["maximize"]:
            grad = -grad
        state = self.state[p]
        self._init_state(p, group)  # a state_dict loaded without this parameter's entry
        state["step"].add_(1)
        step = state["step"].item()
        if group["weight_decay"] != 0:
            grad = _add_scaled(grad, p, group["weight_decay"])
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        state["sum"].addcmul_(grad, grad, value=1)
        std = state["sum"].sqrt().add_(group["eps"])
        if isinstance(clr, float):
            p.addcdiv_(grad, std, value=-clr)
        else:  # a 0-d tensor under tp.compile(optimizer.step) (as in adam.py): kept in the graph
            p.sub_(grad / std * clr)
