"""Stochastic weight averaging and EMA of model weights (torch.optim.swa_utils):
AveragedModel keeps a running average of another model's parameters (and
optionally buffers), SWALR anneals each group's lr to a constant SWA lr, and
update_bn recomputes BatchNorm statistics for the averaged weights."""
import copy
import itertools
import math

import tensorplay as tp

from ..nn.modules.batchnorm import _BatchNorm
from ..nn.modules.extra_layers import _InstanceNorm
from ..nn.modules.module import Module
from .lr_scheduler import LRScheduler

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn",
           "get_ema_avg_fn", "get_swa_avg_fn"]


def get_ema_multi_avg_fn(decay=0.999):
    """avg <- decay * avg + (1 - decay) * current, for lists of tensors at once."""
    if not 0.0 <= decay <= 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")

    @tp.no_grad()
    def ema_update(averaged_params, current_params, num_averaged):
        for avg, cur in zip(averaged_params, current_params):
            avg.copy_(tp.lerp(avg, cur.to(avg.dtype), 1.0 - decay) if avg.is_floating_point() else cur)
    return ema_update


def get_swa_multi_avg_fn():
    """Equal-weight running mean: avg <- avg + (current - avg) / (n + 1)."""
    @tp.no_grad()
    def swa_update(averaged_params, current_params, num_averaged):
        n = float(num_averaged)
        for avg, cur in zip(averaged_params, current_params):
            if avg.is_floating_point():
                avg.copy_(avg + (cur.to(avg.dtype) - avg) / (n + 1))
            else:
                avg.copy_(cur)
    return swa_update


def get_ema_avg_fn(decay=0.999):
    if not 0.0 <= decay <= 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")

    @tp.no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    @tp.no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    """A deep copy of `model` whose parameters are an average of the values
    passed to update_parameters (SWA by default, or avg_fn / multi_avg_fn)."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise ValueError("Only one of avg_fn and multi_avg_fn should be provided")
        if not isinstance(model, Module):
            raise TypeError(f"AveragedModel expects a tensorplay.nn.Module, got {type(model).__name__}")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tp.tensor(0, dtype=tp.int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _tensors(self, model):
        if self.use_buffers:
            return list(itertools.chain(model.parameters(), model.buffers()))
        return list(model.parameters())

    def update_parameters(self, model):
        mine = self._tensors(self.module)
        theirs = self._tensors(model)
        if len(mine) != len(theirs):
            raise ValueError(f"AveragedModel.update_parameters: the model has {len(theirs)} tensors to average, "
                             f"the averaged copy {len(mine)}; they must have the same structure")
        with tp.no_grad():
            if int(self.n_averaged) == 0:
                # The first update copies: the average of one model is that model.
                for p_avg, p in zip(mine, theirs):
                    p_avg.detach().copy_(p.detach().to(p_avg.device))
            else:
                avg = [p.detach() for p in mine]
                cur = [p.detach().to(a.device) for a, p in zip(avg, theirs)]
                n = self.n_averaged.to(avg[0].device) if avg else self.n_averaged
                if self.multi_avg_fn is not None:
                    self.multi_avg_fn(avg, cur, n)
                elif self.avg_fn is not None:
                    for a, c in zip(avg, cur):
                        a.copy_(self.avg_fn(a, c, n))
                else:
                    get_swa_multi_avg_fn()(avg, cur, n)
            if not self.use_buffers:
                # Buffers (BatchNorm statistics) are not averaged: they follow the model,
                # and update_bn recomputes them for the averaged weights.
                for b_avg, b in zip(self.module.buffers(), model.buffers()):
                    b_avg.detach().copy_(b.detach().to(b_avg.device))
            self.n_averaged.add_(1)


@tp.no_grad()
def update_bn(loader, model, device=None):
    """One pass over `loader` in train mode with cumulative BatchNorm averages
    (momentum=None), so the running statistics match the current weights."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm) and not isinstance(module, _InstanceNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's lr from its current value to swa_lr over
    anneal_epochs steps (cosine or linear), then holds it."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        groups = optimizer.param_groups
        swa_lrs = list(swa_lr) if isinstance(swa_lr, (list, tuple)) else [swa_lr] * len(groups)
        if len(swa_lrs) != len(groups):
            raise ValueError(f"swa_lr must have the same length as optimizer.param_groups: swa_lr has "
                             f"{len(swa_lrs)}, optimizer.param_groups has {len(groups)}")
        for lr, group in zip(swa_lrs, groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must by one of 'cos' or 'linear', instead got {anneal_strategy}")
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _start_lr(lr, swa_lr, alpha):
        # Undo the previous step's interpolation to recover the lr the annealing
        # started from (so a manual change to the lr is honoured, as in PyTorch).
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        span = max(1, self.anneal_epochs)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / span)))
        alpha = self.anneal_func(max(0, min(1, step / span)))
        out = []
        for group in self.optimizer.param_groups:
            start = self._start_lr(group["lr"], group["swa_lr"], prev_alpha)
            out.append(group["swa_lr"] * alpha + start * (1 - alpha))
        return out
