"""SGD with momentum, dampening, Nesterov momentum, L2 weight decay and maximize (PyTorch's update rule)."""
from .optimizer import Optimizer, _add_scaled, _nonzero

__all__ = ["SGD"]


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        if differentiable:  # (fused=True: the same update, as for Adam)
            raise NotImplementedError("SGD: differentiable is not supported")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable,
                        fused=fused)
        super().__init__(params, defaults)

    def _update(self, p, group):
        lr, momentum, wd = group["lr"], group["momentum"], group["weight_decay"]
        d_p = p.grad
        if group["maximize"]:
            d_p = -d_p
        if _nonzero(wd):
            d_p = _add_scaled(d_p, p, wd)
        if _nonzero(momentum):
            state = self.state[p]
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = d_p.clone()  # the first step takes the gradient as is (no dampening); no_grad: no history
                state["momentum_buffer"] = buf
            else:
                _add_scaled(buf.mul_(momentum), d_p, 1 - group["dampening"], inplace=True)
            d_p = _add_scaled(d_p, buf, momentum) if group["nesterov"] else buf
        _add_scaled(p, d_p, -lr, inplace=True)
