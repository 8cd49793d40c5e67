"""L-BFGS with PyTorch's interface: step(closure) runs up to max_iter iterations of the
two-loop recursion over the last history_size curvature pairs, with a fixed step (lr) or
a strong-Wolfe line search (line_search_fn="strong_wolfe": bracketing, then zoom by safeguarded
cubic interpolation, as in Nocedal & Wright, Algorithms 3.5 and 3.6).

All parameters are treated as one flat vector; the state (direction, step, curvature pairs)
lives under the first parameter, so state_dict/load_state_dict carry it.
"""
import math

import tensorplay as _tp
from .._grad_mode import enable_grad, no_grad
from .optimizer import Optimizer

__all__ = ["LBFGS"]


def _cubic_minimum(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimizer of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to bounds
    (default: the interval between x1 and x2); the middle of the bounds when the cubic has no
    minimum there."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2.0
    d2 = math.sqrt(disc)
    if x1 <= x2:
        pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(pos, lo), hi)


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """Finds t satisfying the strong Wolfe conditions along d from the point with loss f,
    gradient g and directional derivative gtd. evaluate(t) -> (loss, flat gradient).
    Returns (loss, gradient, t, evaluations)."""
    d_norm = d.abs().max().item()
    g = g.clone()
    f_new, g_new = evaluate(t)
    evals = 1
    gtd_new = g_new.dot(d).item()
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    ls_iter = 0
    # Bracketing: grow t until the interval [t_prev, t] holds a point satisfying the conditions.
    while ls_iter < max_ls:
        if f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev):
            bracket, bf, bg, bgtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new.clone()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bf, bg, bgtd = [t], [f_new], [g_new], [gtd_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bf, bg, bgtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new.clone()], [gtd_prev, gtd_new]
            break
        # Extrapolate: the cubic minimum, kept within [t + 0.01 (t - t_prev), 10 t].
        nxt = _cubic_minimum(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new.clone(), gtd_new
        t = nxt
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = g_new.dot(d).item()
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bf, bg, bgtd = [0.0, t], [f, f_new], [g, g_new], [gtd, gtd_new]

    # Zoom: shrink the bracket by cubic interpolation until the conditions hold.
    insufficient_progress = False
    low, high = (0, 1) if bf[0] <= bf[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_minimum(bracket[0], bf[0], bgtd[0], bracket[1], bf[1], bgtd[1])
        # Keep t away from the ends of the bracket (10% of its width) when it made no progress.
        top, bottom = max(bracket), min(bracket)
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:
            if insufficient_progress or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = g_new.dot(d).item()
        ls_iter += 1
        if f_new > f + c1 * t * gtd or f_new >= bf[low]:
            bracket[high], bf[high], bg[high], bgtd[high] = t, f_new, g_new.clone(), gtd_new
            low, high = (0, 1) if bf[0] <= bf[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bf[high], bg[high], bgtd[high] = bracket[low], bf[low], bg[low], bgtd[low]
            bracket[low], bf[low], bg[low], bgtd[low] = t, f_new, g_new.clone(), gtd_new
    return bf[low], bg[low], bracket[low], evals


class LBFGS(Optimizer):
    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_iter < 1:
            raise ValueError(f"LBFGS: max_iter must be at least 1, got {max_iter}")
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: only 'strong_wolfe' is supported as line_search_fn, got {line_search_fn!r}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change, history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")

    @property
    def _params(self):
        # Read from the group at every step: parameters replaced through param_groups are used.
        return self.param_groups[0]["params"]

    def _flat_grad(self):
        parts = []
        for p in self._params:
            if p.grad is None:
                parts.append(_tp.zeros(p.numel(), dtype=p.dtype, device=p.device))
            else:
                parts.append(p.grad.reshape([-1]))
        return _tp.cat(parts, 0)

    def _add_direction(self, t, d):
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(d[offset:offset + n].reshape(list(p.shape)), alpha=t)
            offset += n

    def _evaluate(self, closure):
        with enable_grad():
            loss = closure()
        return loss

    def step(self, closure=None):
        if closure is None:
            raise TypeError("LBFGS.step() needs a closure that reevaluates the model and returns the loss")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size, line_search = group["history_size"], group["line_search_fn"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = self._evaluate(closure)
        loss = float(orig_loss)
        evals = 1
        state["func_evals"] += 1
        with no_grad():
            flat_grad = self._flat_grad()
            if flat_grad.abs().max().item() <= tolerance_grad:
                return orig_loss
            d, t = state.get("d"), state.get("t")
            old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
            H_diag, prev_flat_grad, prev_loss = state.get("H_diag"), state.get("prev_flat_grad"), state.get("prev_loss")
            n_iter = 0
            while n_iter < max_iter:
                n_iter += 1
                state["n_iter"] += 1
                if state["n_iter"] == 1:
                    d = -flat_grad
                    old_dirs, old_stps, ro, H_diag = [], [], [], 1.0
                else:
                    # Curvature pair of the last step; skipped unless y.s > 1e-10 (keeps H positive definite).
                    y = flat_grad - prev_flat_grad
                    s = d * t
                    ys = y.dot(s).item()
                    if ys > 1e-10:
                        if len(old_dirs) == history_size:
                            old_dirs.pop(0)
                            old_stps.pop(0)
                            ro.pop(0)
                        old_dirs.append(y)
                        old_stps.append(s)
                        ro.append(1.0 / ys)
                        H_diag = ys / y.dot(y).item()
                    # Two-loop recursion: d = -H grad.
                    al = [0.0] * len(old_dirs)
                    q = -flat_grad
                    for i in range(len(old_dirs) - 1, -1, -1):
                        al[i] = old_stps[i].dot(q).item() * ro[i]
                        q.add_(old_dirs[i], alpha=-al[i])
                    d = r = q * H_diag
                    for i in range(len(old_dirs)):
                        be_i = old_dirs[i].dot(r).item() * ro[i]
                        r.add_(old_stps[i], alpha=al[i] - be_i)
                prev_flat_grad = flat_grad.clone()
                prev_loss = loss
                # The first step is scaled so that it moves no parameter by more than lr.
                t = min(1.0, 1.0 / flat_grad.abs().sum().item()) * lr if state["n_iter"] == 1 else lr
                gtd = flat_grad.dot(d).item()
                if gtd > -tolerance_change:  # not a descent direction
                    break
                ls_evals = 0
                if line_search is not None:
                    start = [p.clone() for p in self._params]

                    def evaluate(step_size):
                        self._add_direction(step_size, d)
                        value = float(self._evaluate(closure))
                        g = self._flat_grad()
                        for p, p0 in zip(self._params, start):
                            p.copy_(p0)
                        return value, g

                    loss, flat_grad, t, ls_evals = _strong_wolfe(evaluate, t, d, loss, flat_grad, gtd,
                                                                 tolerance_change=tolerance_change)
                    self._add_direction(t, d)
                    converged = flat_grad.abs().max().item() <= tolerance_grad
                else:
                    self._add_direction(t, d)
                    converged = False
                    if n_iter != max_iter:
                        loss = float(self._evaluate(closure))
                        flat_grad = self._flat_grad()
                        converged = flat_grad.abs().max().item() <= tolerance_grad
                        ls_evals = 1
                evals += ls_evals
                state["func_evals"] += ls_evals
                if n_iter == max_iter or evals >= max_eval or converged:
                    break
                if (d * t).abs().max().item() <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                    break
            state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                         prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss
