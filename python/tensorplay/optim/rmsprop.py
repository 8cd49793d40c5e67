"""RMSprop (Hinton's lecture 6e): divides the gradient by a running root mean square of
its recent magnitudes; optional momentum, centering (subtracting the running mean of the
gradient from the second moment), L2 weight decay and maximize, with PyTorch's update rule
and state names (step, square_avg, momentum_buffer, grad_avg)."""
import tensorplay as _tp
from .optimizer import Optimizer, _add_scaled

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        if differentiable:  # (capturable=True: the same update, as for Adam)
            raise NotImplementedError("RMSprop: differentiable is not supported")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered, weight_decay=weight_decay,
                        capturable=capturable, foreach=foreach, maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def _state(self, p, group):
        state = self.state[p]
        if not state:
            state["step"] = _tp.zeros(1, dtype=_tp.float32).reshape([])
            state["square_avg"] = _tp.zeros(*p.shape, dtype=p.dtype, device=p.device)
            if group["momentum"] > 0:
                state["momentum_buffer"] = _tp.zeros(*p.shape, dtype=p.dtype, device=p.device)
            if group["centered"]:
                state["grad_avg"] = _tp.zeros(*p.shape, dtype=p.dtype, device=p.device)
        return state

    def _update(self, p, group):
        grad = p.grad
        if grad.dtype != p.dtype:
            raise TypeError(f"RMSprop: gradient dtype {grad.dtype} differs from parameter dtype {p.dtype}")
        if group["maximize"]:
            grad = -grad
        if group["weight_decay"] != 0:
            grad = _add_scaled(grad, p, group["weight_decay"])
        state = self._state(p, group)
        state["step"].add_(1)
        alpha = group["alpha"]
        square_avg = state["square_avg"]
        square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg.lerp_(grad, 1 - alpha)
            # Variance estimate E[g^2] - E[g]^2 rather than the raw second moment.
            avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_().add_(group["eps"])
        else:
            avg = square_avg.sqrt().add_(group["eps"])
        if group["momentum"] > 0:
            buf = state["momentum_buffer"]
            buf.mul_(group["momentum"]).addcdiv_(grad, avg)
            _add_scaled(p, buf, -group["lr"], inplace=True)
        elif isinstance(group["lr"], float):
            p.addcdiv_(grad, avg, value=-group["lr"])
        else:  # a 0-d tensor under tp.compile(optimizer.step) (as in adam.py): kept in the graph
            p.sub_(grad / avg * group["lr"])
