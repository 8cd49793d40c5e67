"""Adafactor (Shazeer & Stern, 2018) in PyTorch's formulation (torch.optim.Adafactor):
for a matrix-shaped parameter the second moment is kept factored, one running
mean of squared gradients per row and one per column (O(m + n) memory instead
of O(m n)), and the step is relative to the parameter's RMS. Constructor
arguments and state names (step, row_var, col_var, variance) are PyTorch's, so
state dicts move between the two. The scalars PyTorch reads with .item() (the
parameter's and the update's norms) stay 0-d tensors here, so tp.compile(opt.step)
captures one graph for every step."""
import math

import tensorplay as _tp
from ._more_adaptive import _Simple, _step_tensor

__all__ = ["Adafactor"]


class Adafactor(_Simple):
    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *,
                 foreach=None, maximize=False):
        if isinstance(lr, _tp.Tensor) and lr.numel() != 1:
            raise ValueError("Adafactor: a Tensor lr must have one element")
        if not 0.0 <= float(lr):
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=tuple(eps), d=d, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize))

    def _init_state(self, p, state):
        state["step"] = _step_tensor()
        if p.dim() > 1:
            row, col = list(p.shape), list(p.shape)
            row[-1], col[-2] = 1, 1
            state["row_var"] = _tp.zeros(row, dtype=p.dtype, device=p.device)
            state["col_var"] = _tp.zeros(col, dtype=p.dtype, device=p.device)
        else:
            state["variance"] = _tp.zeros_like(p)

    def _update(self, p, grad, state, group, step):
        lr, d, wd = group["lr"], group["d"], group["weight_decay"]
        if not isinstance(step, _tp.Tensor):
            lr = float(lr)
        # (inside tp.compile(optimizer.step) a lifted lr stays a graph value: float() of it
        # was a data gate, a new version for every lr of a schedule and eager after 8)
        eps1, eps2 = group["eps"]
        if eps1 is None:
            eps1 = _tp.finfo(p.dtype).eps
        if isinstance(step, _tp.Tensor):  # inside tp.compile: the count is a graph value
            one_minus_beta2 = step ** group["beta2_decay"]
            rho = _tp.clamp(step ** -0.5, max=lr)
        else:
            one_minus_beta2 = step ** group["beta2_decay"]
            rho = min(lr, 1 / math.sqrt(step))
        # the step size is relative to the parameter's RMS (before weight decay), at least eps2
        alpha = _tp.clamp(p.norm(2) / math.sqrt(p.numel()), min=eps2) * rho
        if wd != 0:
            p.mul_(1 - lr * wd)
        if grad.dim() > 1:
            row_var, col_var = state["row_var"], state["col_var"]
            row_var.lerp_((grad * grad).mean(-1, keepdim=True), one_minus_beta2)
            col_var.lerp_((grad * grad).mean(-2, keepdim=True), one_minus_beta2)
            # the rank-1 estimate of E[g^2]: row x col / mean(row)
            var = (row_var @ col_var) / _tp.clamp(row_var.mean(-2, keepdim=True), min=eps1)
        else:
            variance = state["variance"]
            variance.lerp_(grad * grad, one_minus_beta2)
            var = variance.clone()
        update = _tp.rsqrt(_tp.clamp(var, min=eps1 * eps1)) * grad
        # the update's RMS is clipped to d
        denom = _tp.clamp(update.norm(2) / (math.sqrt(update.numel()) * d), min=1.0)
        p.sub_(update * (alpha / denom))
