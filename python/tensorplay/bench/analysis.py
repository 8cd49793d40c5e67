"""The arithmetic of the Section 13 report, as pure functions over numbers (no
timing, no tensors), so each formula can be checked against hand-computed
values:

* ``decompose``        S = Te/Tc = rho * beta_c/beta_e           (Proposition 13.3)
* ``roofline_point``   a case placed on the roofline min(P, I*B)  (Section 13.1)
* ``break_even_calls`` m* = C / (te - tc)                         (Proposition 13.4)
* ``min_fusion_size``  N* where fusion starts to pay              (Proposition 13.6)
* ``validity``         the internal-validity check of Section 13.5

Seconds, bytes and FLOP are plain SI units throughout.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Optional, Tuple

INF = math.inf


# ----------------------------------------------------------- Proposition 13.3


@dataclass(frozen=True)
class Decomposition:
    S: float  # Te / Tc
    rho: float  # b_e / b_c
    beta_e: float  # bytes/s
    beta_c: float  # bytes/s
    kernel_factor: float  # beta_c / beta_e

    def as_dict(self) -> dict:
        return asdict(self)


def decompose(t_eager: float, t_compiled: float, bytes_eager: float, bytes_compiled: float) -> Decomposition:
    """S = rho * beta_c / beta_e: structure (rho) times kernel quality (beta ratio)."""
    if min(t_eager, t_compiled, bytes_eager, bytes_compiled) <= 0:
        raise ValueError("decompose: durations and byte counts must be positive")
    beta_e = bytes_eager / t_eager
    beta_c = bytes_compiled / t_compiled
    return Decomposition(
        S=t_eager / t_compiled,
        rho=bytes_eager / bytes_compiled,
        beta_e=beta_e,
        beta_c=beta_c,
        kernel_factor=beta_c / beta_e,
    )


# ---------------------------------------------------------------- roofline


@dataclass(frozen=True)
class RooflinePoint:
    intensity: float  # FLOP / byte (model bytes)
    achieved: float  # FLOP / s
    attainable: float  # min(P, I * B)
    fraction: float  # achieved / attainable
    bound: str  # "memory" (I < P/B) or "compute"

    def as_dict(self) -> dict:
        return asdict(self)


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """P / B in FLOP/byte: left of it a kernel is bandwidth bound."""
    return peak_flops / bandwidth


def roofline_point(flops: float, nbytes: float, seconds: float, bandwidth: float, peak_flops: float) -> RooflinePoint:
    """Place one measured kernel (or sequence of kernels) on the roofline."""
    if nbytes <= 0 or seconds <= 0 or bandwidth <= 0 or peak_flops <= 0:
        raise ValueError("roofline_point: bytes, seconds, B and P must be positive")
    intensity = flops / nbytes
    attainable = min(peak_flops, intensity * bandwidth)
    achieved = flops / seconds
    bound = "memory" if intensity < ridge_point(peak_flops, bandwidth) else "compute"
    return RooflinePoint(intensity, achieved, attainable, achieved / attainable if attainable > 0 else INF, bound)


# ----------------------------------------------------------- Proposition 13.4


def break_even_calls(compile_cost: float, t_eager: float, t_compiled: float) -> float:
    """m* = C / (te - tc): calls after which compiling has paid for itself; inf when a
    compiled call is not faster (compiling never pays), 0 when C <= 0."""
    saving = t_eager - t_compiled
    if saving <= 0:
        return INF
    return max(compile_cost, 0.0) / saving


# ----------------------------------------------------------- Proposition 13.6


def min_fusion_size(tau_eager_per_op: float, k_ops: int, tau_compiled: float, bandwidth: float,
                    eager_elems_per_n: float, compiled_elems_per_n: float, itemsize: int = 4) -> float:
    """N* such that the compiled call is faster iff N > N*.

    Eager: k ops, each with fixed cost tau_e, moving eager_elems_per_n * N elements;
    compiled: one call with fixed cost tau_c moving compiled_elems_per_n * N elements;
    both at effective bandwidth beta:

        k tau_e + e N s / beta  >  tau_c + c N s / beta   <=>   N > (tau_c - k tau_e) beta / (s (e - c))

    For a chain of k pointwise ops (e = 2k, c = 2, s = 4) this is the seed's
    (tau_c - k tau_e) beta / (8 (k - 1)).  Returns 0 when the compiled call is cheaper
    even at N = 0, inf when fusion saves no bytes (e <= c) and the call costs more."""
    fixed = tau_compiled - k_ops * tau_eager_per_op
    saved_bytes_per_n = itemsize * (eager_elems_per_n - compiled_elems_per_n)
    if fixed <= 0:
        return 0.0
    if saved_bytes_per_n <= 0:
        return INF
    return fixed * bandwidth / saved_bytes_per_n


# ------------------------------------------------------------- Section 13.5


@dataclass(frozen=True)
class Validity:
    verdict: str  # "speedup", "slowdown", or "not established"
    established: bool
    flags: Tuple[str, ...]
    effect: float  # smallest |log S| of the two rounds, signed by the common direction
    round_difference: float  # |log S_A - log S_B|

    def as_dict(self) -> dict:
        d = asdict(self)
        d["flags"] = list(self.flags)
        return d


def validity(s_a: float, s_b: float, interval_a: Optional[Tuple[float, float]] = None,
             interval_b: Optional[Tuple[float, float]] = None, margin: float = 1.0) -> Validity:
    """Internal validity of a speedup measured in two rounds (Section 13.5).

    Effects are compared on the log scale (a 2x speedup and a 2x slowdown are the
    same size).  An effect is established only if (1) both rounds point the same
    way, (2) the smaller of the two effects exceeds `margin` times the round-to-round
    difference, and (3) when the paired per-round intervals of Te/Tc are given,
    neither contains 1.  Otherwise it is flagged and reported as not established."""
    if s_a <= 0 or s_b <= 0:
        raise ValueError("validity: speedups must be positive")
    la, lb = math.log(s_a), math.log(s_b)
    flags = []
    same_direction = (la > 0 and lb > 0) or (la < 0 and lb < 0)
    if not same_direction:
        flags.append("direction differs between rounds" if la * lb < 0 else "no effect in one round")
    effect = min(abs(la), abs(lb)) * (1.0 if la > 0 else -1.0) if same_direction else 0.0
    diff = abs(la - lb)
    if abs(effect) <= margin * diff:
        flags.append("effect not larger than the round-to-round difference")
    for name, iv in (("A", interval_a), ("B", interval_b)):
        if iv is not None and iv[0] <= 1.0 <= iv[1]:
            flags.append(f"round {name} interval contains 1")
    established = not flags
    verdict = ("speedup" if la > 0 else "slowdown") if established else "not established"
    return Validity(verdict, established, tuple(flags), effect, diff)
