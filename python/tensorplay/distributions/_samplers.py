"""Gamma sampling in tensor ops (TensorPlay has no native gamma sampler).

Marsaglia & Tsang (2000): for alpha >= 1 draw x ~ N(0,1), v = (1 + c x)^3
with d = alpha - 1/3, c = 1/sqrt(9d), and accept d*v when
log(u) < x^2/2 + d - d v + d log v.  Acceptance is above 95% for every
alpha, so the rejection runs as a few whole-tensor rounds that only fill the
still-pending entries.  alpha < 1 uses Gamma(alpha + 1) * U^(1/alpha).
The draws run in float64 and are returned in the input dtype.
"""
import tensorplay as tp

from ._igamma import standard_gamma_grad


def standard_gamma(alpha):
    with tp.no_grad():
        a = alpha.detach().to(tp.float64)
        boosted = a < 1
        d = tp.where(boosted, a + 1, a) - 1.0 / 3.0
        c = 1.0 / tp.sqrt(9.0 * d)
        out = tp.zeros_like(a)
        done = tp.zeros(a.shape, dtype=tp.bool, device=a.device)
        for _ in range(1000):
            x = tp.randn(a.shape, dtype=tp.float64, device=a.device)
            v = (1 + c * x) ** 3
            u = tp.rand(a.shape, dtype=tp.float64, device=a.device)
            safe_v = tp.where(v > 0, v, tp.ones_like(v))
            accept = (v > 0) & (tp.log(u) < 0.5 * x * x + d - d * safe_v + d * tp.log(safe_v))
            take = accept & ~done
            out = tp.where(take, d * safe_v, out)
            done = done | take
            if bool(done.all()):
                break
        u = tp.rand(a.shape, dtype=tp.float64, device=a.device)
        out = tp.where(boosted, out * u ** (1.0 / a), out)
        tiny = tp.finfo(alpha.dtype).tiny
        return out.to(alpha.dtype).clamp(min=tiny)


class _ReparamStandardGamma(tp.autograd.Function):
    """A Gamma(alpha, 1) draw whose gradient w.r.t. alpha is the implicit one:
    the sample moves with alpha at a fixed quantile of its distribution."""

    @staticmethod
    def forward(ctx, alpha):
        x = standard_gamma(alpha)
        ctx.save_for_backward(alpha, x)
        return x

    @staticmethod
    def backward(ctx, grad):
        alpha, x = ctx.saved_tensors
        return grad * standard_gamma_grad(alpha.detach(), x.detach()).to(grad.dtype)


def rsample_standard_gamma(alpha):
    if alpha.requires_grad and tp.is_grad_enabled():
        return _ReparamStandardGamma.apply(alpha)
    return standard_gamma(alpha)
