"""Adam (Kingma & Ba) with bias correction, L2 or decoupled weight decay, AMSGrad and maximize;
the update follows PyTorch's single-tensor formulation step for step."""
import math

import tensorplay as _tp
from .optimizer import Optimizer, _add_scaled, _nonzero

__all__ = ["Adam"]


class Adam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        # fused=True / capturable=True (PyTorch's CUDA kernels, CUDA graphs) name implementations
        # of the same update: accepted, the update is this one (tp.compile(opt.step) is the fused
        # form here). They used to raise, so code written for PyTorch's fused AdamW failed at once.
        if differentiable:
            raise NotImplementedError(f"{type(self).__name__}: differentiable is not supported")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable, differentiable=differentiable,
                        fused=fused, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _init_state(self, p, amsgrad):
        state = self.state[p]
        if not state:
            # The step count is a 0-d float32 tensor, as in PyTorch's state dicts.
            state["step"] = _tp.zeros(1, dtype=_tp.float32).reshape([])
            state["exp_avg"] = _tp.zeros(*p.shape, dtype=p.dtype, device=p.device)
            state["exp_avg_sq"] = _tp.zeros(*p.shape, dtype=p.dtype, device=p.device)
            if amsgrad:
                state["max_exp_avg_sq"] = _tp.zeros(*p.shape, dtype=p.dtype, device=p.device)
        return state

    def _update(self, p, group):
        lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        grad = p.grad
        if grad.dtype != p.dtype:
            raise TypeError(f"{type(self).__name__}: gradient dtype {grad.dtype} differs from parameter dtype {p.dtype}")
        if group["maximize"]:
            grad = -grad
        state = self._init_state(p, group["amsgrad"])
        if state["exp_avg"].dtype != p.dtype:
            # PyTorch raises here too (from lerp_); converting the moments silently would
            # hide that the parameter was swapped under the optimizer.
            raise RuntimeError(
                f"{type(self).__name__}.step: the state of a parameter is {state['exp_avg'].dtype} but the parameter "
                f"is now {p.dtype} (its .data was replaced after an earlier step, e.g. p.data = p.data.double()); "
                "convert the parameter before the first step, or rebuild the optimizer (or its state) after")
        state["step"].add_(1)
        step = state["step"].item()
        if _nonzero(wd):
            if group["decoupled_weight_decay"]:
                p.mul_(1 - lr * wd)
            else:
                grad = _add_scaled(grad, p, wd)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.lerp_(grad, 1 - beta1)
        if isinstance(beta2, float):
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        else:  # lifted (compiled step): the kernel's float rounding of value * grad first, as eager's
            exp_avg_sq.mul_(beta2).addcmul_(grad * (1 - beta2), grad)
        step_size = lr / (1 - beta1 ** step)
        bias_correction2 = 1 - beta2 ** step
        # Under tp.compile(optimizer.step) `step` is a 0-d tensor: a tensor sqrt keeps
        # it in the graph (math.sqrt would read its value, one version per step).
        bias_correction2_sqrt = math.sqrt(bias_correction2) if isinstance(bias_correction2, float) \
            else bias_correction2.sqrt()
        second = exp_avg_sq
        if group["amsgrad"]:
            second = state["max_exp_avg_sq"]
            _tp.maximum(second, exp_avg_sq, out=second)
        denom = (second.sqrt() / bias_correction2_sqrt).add_(eps)
        if isinstance(step_size, float):
            p.addcdiv_(exp_avg, denom, value=-step_size)
        else:  # a 0-d tensor under tp.compile(optimizer.step): kept in the graph, not read as a constant
            p.sub_(exp_avg / denom * step_size)
