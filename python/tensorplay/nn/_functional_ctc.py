"""Connectionist temporal classification loss for tensorplay.nn.functional (ctc_loss).

The forward variable alpha of the blank-extended label sequence is computed in log space with tensor
operators, one step per time frame, so autograd differentiates the recursion itself (the reverse sweep
is the beta recursion). PyTorch's gradient with respect to log_probs is not the plain derivative: it
adds exp(log_probs) at every frame inside the input length (the gradient as if log_probs were the
logits of a log_softmax; through a log_softmax both give the same logits gradient). A term whose value
is 0 and whose gradient is exactly that is added per sample, so the gradients equal PyTorch's.
Re-exported by functional.py."""
import tensorplay as _tp
from ..amp.autocast_mode import _autocast_composite
from .functional import _check_reduction, _names_errors

__all__ = ["ctc_loss"]

_NEG_INF = float("-inf")


def _lengths(fn, name, x, n):
    if isinstance(x, _tp.Tensor):
        if x.is_floating_point() or x.dtype == _tp.bool:
            raise RuntimeError(f"{fn}: {name} must be integers, got {x.dtype}")
        flat = x.reshape(-1)  # int() per element: under tp.compile each becomes a data gate
        vals = [int(flat[i]) for i in range(flat.shape[0])]
    elif isinstance(x, int):
        vals = [x]
    else:
        vals = [int(v) for v in x]
    if len(vals) != n:
        raise RuntimeError(f"{fn}: {name} must have one entry per batch element ({n}), got {len(vals)}")
    for v in vals:
        if v < 0:
            raise RuntimeError(f"{fn}: {name} must be non-negative, got {v}")
    return vals


def _logsumexp(*xs):
    """log(sum(exp(x))) of equally shaped tensors; -inf (gradient 0, never NaN) where all are -inf."""
    m = xs[0].detach()
    for x in xs[1:]:
        m = _tp.maximum(m, x.detach())
    m = _tp.where(_tp.isfinite(m), m, _tp.zeros_like(m))
    s = None
    for x in xs:
        e = _tp.exp(x - m)
        s = e if s is None else s + e
    pos = s > 0
    return _tp.where(pos, m + _tp.log(_tp.where(pos, s, _tp.ones_like(s))), _tp.full_like(s, _NEG_INF))


@_names_errors
@_autocast_composite("ctc_loss")
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """CTC loss of log_probs (T, N, C) (or (T, C)) against targets (N, S) padded, or all targets
    concatenated (sum(target_lengths),); mean: each loss divided by its target length, then averaged."""
    fn = "ctc_loss"
    _check_reduction(fn, reduction)
    for name, t in (("log_probs", log_probs), ("targets", targets)):
        if not isinstance(t, _tp.Tensor):
            raise TypeError(f"{fn}: {name} must be a Tensor, got {type(t).__name__}")
    if not log_probs.is_floating_point():
        raise RuntimeError(f"{fn}: log_probs must be a floating point tensor, got {log_probs.dtype}")
    if targets.is_floating_point() or targets.dtype == _tp.bool:
        raise RuntimeError(f"{fn}: targets must be an integer tensor, got {targets.dtype}")
    unbatched = log_probs.dim() == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        if targets.dim() == 1:
            targets = targets.unsqueeze(0)
    if log_probs.dim() != 3:
        raise RuntimeError(f"{fn}: log_probs must be (T, N, C) or (T, C), got shape {list(log_probs.shape)}")
    T, N, C = log_probs.shape
    if not 0 <= blank < C:
        raise RuntimeError(f"{fn}: blank must be in label range [0, {C}), got {blank}")
    il = _lengths(fn, "input_lengths", input_lengths, N)
    tl = _lengths(fn, "target_lengths", target_lengths, N)
    for v in il:
        if v > T:
            raise RuntimeError(f"{fn}: Expected input_lengths to have value at most {T}, but got value {v}")
    dev = log_probs.device
    smax = max(tl) if tl else 0
    tg = targets.to(_tp.int64)
    if tg.dim() == 2:
        if tg.shape[0] != N:
            raise RuntimeError(f"{fn}: targets has batch size {tg.shape[0]}, log_probs {N}")
        if smax > tg.shape[1]:
            raise RuntimeError(f"{fn}: Expected tensor to have size at least {smax} at dimension 1, "
                               f"but got size {tg.shape[1]} for targets")
        tg = tg[:, :smax]
    elif tg.dim() == 1:  # concatenated targets: sample n's are tg[offset_n : offset_n + tl[n]]
        if tg.shape[0] < sum(tl):
            raise RuntimeError(f"{fn}: targets has {tg.shape[0]} elements, target_lengths sum to {sum(tl)}")
        pos, off = [], 0
        for n in range(N):
            pos.append([min(off + min(k, max(tl[n] - 1, 0)), max(tg.shape[0] - 1, 0)) for k in range(smax)])
            off += tl[n]
        tg = tg.index_select(0, _tp.tensor(pos, dtype=_tp.int64, device=dev).reshape(-1)).reshape(N, smax) \
            if smax and tg.shape[0] else _tp.zeros(N, smax, dtype=_tp.int64, device=dev)
    else:
        raise RuntimeError(f"{fn}: targets must be 1-D (concatenated) or 2-D (padded), got shape {list(targets.shape)}")
    if smax and tg.numel():
        # entries past a sample's target length are padding (any value): the blank there
        tg = _tp.where(_tp.arange(smax, device=dev).reshape(1, smax) < _tp.tensor(tl, dtype=_tp.int64,
                                                                               device=dev).reshape(N, 1),
                       tg, _tp.full_like(tg, blank))
        lo, hi = int(tg.min().item()), int(tg.max().item())
        if lo < 0 or hi >= C:
            raise RuntimeError(f"{fn}: target labels must be in [0, {C}), got {lo if lo < 0 else hi}")
    L = 2 * smax + 1
    # blank-extended labels: blank, l1, blank, l2, ..., blank
    blanks = _tp.full([N, smax], blank, dtype=_tp.int64, device=dev)
    ext = _tp.cat([_tp.stack([blanks, tg], -1).reshape(N, 2 * smax),
                   _tp.full([N, 1], blank, dtype=_tp.int64, device=dev)], 1)
    s_idx = _tp.arange(L, device=dev).reshape(1, L)
    tl_t = _tp.tensor(tl, dtype=_tp.int64, device=dev).reshape(N, 1)
    valid = s_idx < 2 * tl_t + 1  # (N, L): positions of each sample's own extended sequence
    prev2 = _tp.cat([_tp.full([N, 2], blank, dtype=_tp.int64, device=dev), ext[:, :-2]], 1) if L > 2 else ext
    skip = (s_idx >= 2) & (ext != blank) & (ext != prev2)  # a step over the blank between two labels
    lpe = log_probs.gather(2, ext.unsqueeze(0).expand(T, N, L))  # (T, N, L)
    ninf = _tp.full([N, L], _NEG_INF, dtype=log_probs.dtype, device=dev)
    alpha = _tp.where(valid & (s_idx < 2), lpe[0], ninf) if T else ninf
    il_t = _tp.tensor(il, dtype=_tp.int64, device=dev).reshape(N, 1)
    col = ninf[:, :1]
    for t in range(1, max(il) if il else 0):
        a2 = _tp.cat([col, alpha[:, :-1]], 1)
        a3 = _tp.cat([col, col, alpha[:, :-2]], 1) if L > 2 else ninf
        a3 = _tp.where(skip, a3, ninf)
        new = _tp.where(valid, _logsumexp(alpha, a2, a3) + lpe[t], ninf)
        alpha = _tp.where(il_t > t, new, alpha)
    end = alpha.gather(1, 2 * tl_t)
    before = _tp.where(tl_t > 0, alpha.gather(1, (2 * tl_t - 1).clamp(min=0)), ninf[:, :1])
    ll = _logsumexp(end, before).reshape(N)
    empty = il_t.reshape(N) == 0  # no frames: only the empty target has an alignment
    ll = _tp.where(empty, _tp.where(tl_t.reshape(N) == 0, _tp.zeros_like(ll), ninf[:, 0]), ll)
    nll = -ll
    frames = (_tp.arange(T, device=dev).reshape(T, 1) < il_t.reshape(1, N)).to(log_probs.dtype).unsqueeze(2)
    lpd = log_probs.detach()
    extra = ((log_probs - lpd) * lpd.exp() * frames).sum(2).sum(0)  # 0, with gradient exp(log_probs)
    loss = nll + extra
    if zero_infinity:
        loss = _tp.where(_tp.isinf(nll), _tp.zeros_like(loss), loss)
    if reduction == "mean":
        return (loss / tl_t.reshape(N).clamp(min=1).to(loss.dtype)).mean()
    if reduction == "sum":
        return loss.sum()
    return loss[0] if unbatched else loss
