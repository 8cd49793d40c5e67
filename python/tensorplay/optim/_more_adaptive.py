"""Adamax, NAdam, RAdam, Adadelta and ASGD with PyTorch's constructor arguments, update rules and
state names (so state dicts move between the two), in the single-tensor formulation."""
import math
import struct

import tensorplay as _tp
from .._grad_mode import no_grad
from .optimizer import Optimizer, _add_scaled

__all__ = ["Adamax", "NAdam", "RAdam", "Adadelta", "ASGD", "Rprop"]


def _check(name, lr, eps, weight_decay, betas=None):
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")
    if betas is not None:
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")


def _no_extras(name, capturable=False, differentiable=False, fused=None):
    # (capturable=True names PyTorch's CUDA-graph form of the same update: accepted, as Adam's)
    if differentiable or fused:
        raise NotImplementedError(f"{name}: differentiable and fused are not supported")


def _f32(x):
    """x rounded to float32 (as a Python float)."""
    return struct.unpack("f", struct.pack("f", x))[0]


def _step_tensor():
    # The step count is a 0-d float32 tensor, as in PyTorch's state dicts.
    return _tp.zeros(1, dtype=_tp.float32).reshape([])


class _Simple(Optimizer):
    """step(): each parameter with a gradient, under no_grad, through _update(p, grad, state, group)."""

    def step(self, closure=None):
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad
                    if grad.dtype != p.dtype:
                        raise TypeError(f"{type(self).__name__}: gradient dtype {grad.dtype} differs from parameter "
                                        f"dtype {p.dtype}")
                    if tuple(grad.shape) != tuple(p.shape):
                        raise ValueError(f"{type(self).__name__}: gradient of shape {tuple(grad.shape)} for a "
                                         f"parameter of shape {tuple(p.shape)}")
                    if group.get("maximize"):
                        grad = -grad
                    state = self.state[p]
                    if not state:
                        self._init_state(p, state)
                    state["step"].add_(1)
                    step = state["step"].item()
                    if isinstance(step, _tp.Tensor):
                        # tp.compile(optimizer.step): the count is a 0-d float32 tensor; factors
                        # computed from it (beta ** step, 0.96 ** (step * decay)) need double
                        # precision, as eager's Python float gives them.
                        step = step.double()
                    self._update(p, grad, state, group, step)
        return loss

    @staticmethod
    def _with_weight_decay(p, grad, group):
        """The gradient with L2 weight decay added, or (decoupled_weight_decay, AdamW's form) the
        parameter shrunk in place and the gradient unchanged."""
        wd = group["weight_decay"]
        if wd == 0:
            return grad
        if group.get("decoupled_weight_decay"):
            p.mul_(1 - group["lr"] * wd)
            return grad
        return _add_scaled(grad, p, wd)

    @staticmethod
    def _zeros(p):
        return _tp.zeros_like(p)  # on the parameter's device


class Adamax(_Simple):
    """Adam with the infinity norm: the second moment is an exponentially decayed maximum of |grad|."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        _check("Adamax", lr, eps, weight_decay, betas)
        _no_extras("Adamax", capturable, differentiable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, capturable=capturable))

    def _init_state(self, p, state):
        state["step"] = _step_tensor()
        state["exp_avg"] = self._zeros(p)
        state["exp_inf"] = self._zeros(p)

    def _update(self, p, grad, state, group, step):
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        grad = self._with_weight_decay(p, grad, group)
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_inf.mul_(beta2)
        _tp.maximum(exp_inf, grad.abs().add_(eps), out=exp_inf)
        step_size = lr / (1 - beta1 ** step)
        if isinstance(step_size, float):
            p.addcdiv_(exp_avg, exp_inf, value=-step_size)
        else:
            # Under tp.compile(optimizer.step) the factor is a 0-d tensor of the graph: a
            # tensor product, not addcdiv's number (a data gate: a new version every step).
            p.sub_(exp_avg / exp_inf * step_size)


class NAdam(_Simple):
    """Adam with Nesterov momentum (Dozat) and the momentum-decay schedule
    mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check("NAdam", lr, eps, weight_decay, betas)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        _no_extras("NAdam", capturable, differentiable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      foreach=foreach, maximize=maximize, capturable=capturable,
                                      differentiable=differentiable))

    def _init_state(self, p, state):
        state["step"] = _step_tensor()
        # The running product of the mu_t, a float32 0-d tensor as in PyTorch (its rounding
        # is part of the update, so a float64 product would drift from PyTorch's result).
        state["mu_product"] = _tp.ones(1, dtype=_tp.float32).reshape([])
        state["exp_avg"] = self._zeros(p)
        state["exp_avg_sq"] = self._zeros(p)

    def _update(self, p, grad, state, group, step):
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        grad = self._with_weight_decay(p, grad, group)
        decay = group["momentum_decay"]
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * decay))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * decay))
        if isinstance(mu, _tp.Tensor):
            # Under tp.compile(optimizer.step) the step is a 0-d float64 tensor: round mu to
            # float32 first, as the eager product with a Python float does.
            state["mu_product"].mul_(mu.to(_tp.float32))
        else:
            state["mu_product"].mul_(mu)
        mu_product = state["mu_product"].item()
        if isinstance(mu_product, _tp.Tensor):  # under capture: the float32 value, then float64 arithmetic as eager
            mu_product = mu_product.double()
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = exp_avg_sq.div(1 - beta2 ** step).sqrt().add_(eps)
        grad_factor = lr * (1.0 - mu) / (1.0 - mu_product)
        avg_factor = lr * mu_next / (1.0 - mu_product * mu_next)
        if isinstance(grad_factor, float):
            p.addcdiv_(grad, denom, value=-grad_factor)
            p.addcdiv_(exp_avg, denom, value=-avg_factor)
        else:  # under capture: tensor products, not data gates (Adamax says why)
            p.sub_(grad / denom * grad_factor)
            p.sub_(exp_avg / denom * avg_factor)


class RAdam(_Simple):
    """Rectified Adam (Liu et al.): plain bias-corrected momentum while the variance of the
    adaptive step is not yet tractable (rho_t <= 5), rectified Adam steps afterwards."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False):
        _check("RAdam", lr, eps, weight_decay, betas)
        _no_extras("RAdam", capturable, differentiable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay, foreach=foreach,
                                      maximize=maximize, capturable=capturable, differentiable=differentiable))

    def _init_state(self, p, state):
        state["step"] = _step_tensor()
        state["exp_avg"] = self._zeros(p)
        state["exp_avg_sq"] = self._zeros(p)

    def _update(self, p, grad, state, group, step):
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        grad = self._with_weight_decay(p, grad, group)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        corrected = exp_avg / bias_correction1
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
        # Under tp.compile(optimizer.step) the factors are 0-d tensors: math.sqrt would read
        # each as a float (a data gate: a new version every step); only the branch is a gate.
        sqrt = math.sqrt if isinstance(rho_t, float) else _tp.sqrt
        if rho_t > 5.0:
            rect = sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            adaptive_lr = sqrt(bias_correction2) / exp_avg_sq.sqrt().add_(eps)
            p.add_(corrected * lr * adaptive_lr * rect, alpha=-1.0)
        else:
            p.add_(corrected * lr, alpha=-1.0)


class Adadelta(_Simple):
    """Adadelta (Zeiler): steps scaled by the ratio of running RMS of past updates and of gradients."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        _check("Adadelta", lr, eps, weight_decay)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        _no_extras("Adadelta", capturable, differentiable)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, foreach=foreach,
                                      capturable=capturable, maximize=maximize, differentiable=differentiable))

    def _init_state(self, p, state):
        state["step"] = _step_tensor()
        state["square_avg"] = self._zeros(p)
        state["acc_delta"] = self._zeros(p)

    def _update(self, p, grad, state, group, step):
        lr, rho, eps = group["lr"], group["rho"], group["eps"]
        grad = self._with_weight_decay(p, grad, group)
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
        std = square_avg.add(eps).sqrt_()
        delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
        acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        _add_scaled(p, delta, -lr, inplace=True)


class ASGD(_Simple):
    """Averaged SGD (Polyak & Juditsky): SGD with a decaying step eta_t = lr / (1 + lambd lr t)^alpha
    and, from step t0 on, a running average of the iterates in state['ax']."""

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        _check("ASGD", lr, 0.0, weight_decay)
        _no_extras("ASGD", capturable, differentiable)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _init_state(self, p, state):
        state["step"] = _step_tensor()
        # eta and mu are float32 0-d tensors as in PyTorch: eta's float32 rounding of lr is part
        # of the update PyTorch makes.
        lr = self._group_of(p)["lr"]
        state["eta"] = _tp.full([], float(lr), dtype=_tp.float32)
        state["mu"] = _tp.ones(1, dtype=_tp.float32).reshape([])
        state["ax"] = self._zeros(p)

    def _group_of(self, p):
        for group in self.param_groups:
            if any(q is p for q in group["params"]):
                return group
        raise KeyError("ASGD: parameter not in any group")

    def _update(self, p, grad, state, group, step):
        lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
        if isinstance(step, _tp.Tensor) or isinstance(lr, _tp.Tensor):
            return self._captured_update(p, grad, state, group, step)
        grad = self._with_weight_decay(p, grad, group)
        eta = state["eta"].item()
        p.mul_(1 - lambd * eta)
        p.add_(grad, alpha=-eta)
        mu = state["mu"].item()
        if mu != 1:
            state["ax"].add_(p.sub(state["ax"]).mul_(mu))
        else:
            state["ax"].copy_(p)
        # PyTorch forms the new values as float32 tensors (its default dtype) before copying them
        # into the state, which may be float64 after a load_state_dict: round the same way.
        state["eta"].fill_(_f32(lr / ((1 + lambd * lr * step) ** alpha)))
        state["mu"].fill_(_f32(1 / max(1, step - t0)))

    def _captured_update(self, p, grad, state, group, step):
        """The update under tp.compile(optimizer.step): `step` (and a lifted lr) are 0-d
        tensors of the graph, so eta and mu stay tensors (reading them as numbers would make
        a version per step); the arithmetic is eager's, in double, rounded where eager's is."""
        lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
        step = step if isinstance(step, _tp.Tensor) else _tp.tensor(float(step), dtype=_tp.float64)
        lr = lr if isinstance(lr, _tp.Tensor) else _tp.tensor(float(lr), dtype=_tp.float64)
        grad = self._with_weight_decay(p, grad, group)
        eta = state["eta"].double()
        p.mul_((1 - lambd * eta).to(p.dtype))
        _add_scaled(p, grad, -eta, inplace=True)
        mu = state["mu"]
        if bool(mu != 1):
            state["ax"].add_(p.sub(state["ax"]).mul_(mu.to(p.dtype)))
        else:
            state["ax"].copy_(p)
        state["eta"].copy_(lr / ((1 + lambd * lr * step) ** alpha))
        state["mu"].copy_(1 / _tp.clamp(step - t0, min=1))


class Rprop(_Simple):
    """Resilient backpropagation (Riedmiller & Braun): each coordinate keeps its own step size,
    multiplied by etaplus while the gradient keeps its sign and by etaminus when it flips (the
    step is then skipped and the stored gradient zeroed), clamped to step_sizes; the parameter
    moves by -sign(grad) * step_size. PyTorch's arguments and state names (step, prev, step_size)."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        _no_extras("Rprop", capturable, differentiable)
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes), foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, capturable=capturable))

    def _init_state(self, p, state):
        state["step"] = _step_tensor()
        state["prev"] = self._zeros(p)
        state["step_size"] = _tp.full_like(p, self._group_of(p)["lr"])

    def _group_of(self, p):
        for g in self.param_groups:
            if any(q is p for q in g["params"]):
                return g
        raise KeyError("Rprop: parameter not in any group")

    def _update(self, p, grad, state, group, step):
        etaminus, etaplus = group["etas"]
        lo, hi = group["step_sizes"]
        prev, step_size = state["prev"], state["step_size"]
        s = grad.mul(prev).sign()
        factor = _tp.where(s > 0, _tp.full_like(s, etaplus), _tp.where(s < 0, _tp.full_like(s, etaminus),
                                                                        _tp.ones_like(s)))
        step_size.mul_(factor).clamp_(lo, hi)
        # after a sign flip the step is skipped and the flip is not remembered
        grad = _tp.where(s < 0, _tp.zeros_like(grad), grad)
        p.addcmul_(grad.sign(), step_size, value=-1)
        prev.copy_(grad)
