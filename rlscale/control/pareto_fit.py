"""The steps/examples trade-off and the critical batch size (paper eq. 2.11, appendix A.3).

Pure math on numbers: no I/O, no Ray.

Training to a fixed goal with batch B takes S optimizer steps and E = B·S
examples. The paper's model of the Pareto front is

    S/S_min − 1 = (E/E_min − 1)^(−1),

equivalently, for each batch size,  S(B) = S_min·(1 + B_crit/B)  and
E(B) = E_min·(1 + B/B_crit)  with  B_crit = E_min/S_min. Since E = B·S for each
run, the log-space residuals of S and of E are the same number; the fit
minimises their squares over (log S_min, log B_crit) with scipy, so the
standard error of log B_crit comes straight from the fit's covariance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_POINTS = 3  # two points fit exactly and say nothing of the error
# The widest interval written as numbers: e**700 is near the largest float (a fit whose standard error of
# log B_crit reaches this has not pinned B_crit down at all).
MAX_LOG_SPREAD = 700.0
LOG_FLOAT_MAX = math.log(np.finfo(float).max)  # past this, exp() overflows


@dataclass(frozen=True)
class ParetoFit:
    s_min: float
    e_min: float
    b_crit: float
    b_crit_se: float  # standard error of B_crit (delta method on log B_crit); nan with no residual dof
    n_points: int
    rms_log_residual: float

    def steps(self, batch: np.ndarray | float) -> np.ndarray:
        """S on the fitted front at batch size B."""
        return self.s_min * (1.0 + self.b_crit / np.asarray(batch, dtype=float))

    def examples(self, batch: np.ndarray | float) -> np.ndarray:
        return self.e_min * (1.0 + np.asarray(batch, dtype=float) / self.b_crit)

    def interval(self, z: float = 1.645) -> tuple[float, float]:
        """B_crit's interval at ``z`` standard errors of log B_crit (1.645: 90 %); NaN where the standard
        error is undefined or the interval too wide for floats (before, math.exp overflowed and a
        measurement stopped with a traceback, 2026-11-29)."""
        spread = z * self.b_crit_se / self.b_crit
        if not (math.isfinite(spread) and spread <= MAX_LOG_SPREAD):
            return math.nan, math.nan
        return self.b_crit * math.exp(-spread), self.b_crit * math.exp(spread)


def fit_pareto(steps: np.ndarray, examples: np.ndarray) -> ParetoFit:
    """Fit eq. 2.11 to (S, E) pairs, one per batch size (B = E/S)."""
    from scipy.optimize import least_squares

    s = np.asarray(steps, dtype=float)
    e = np.asarray(examples, dtype=float)
    if s.shape != e.shape or s.ndim != 1:
        raise ValueError("steps and examples must be 1-d arrays of the same length")
    if s.size < MIN_POINTS:
        raise ValueError(f"need at least {MIN_POINTS} batch sizes to fit, got {s.size}")
    if np.any(s <= 0) or np.any(e <= 0):
        raise ValueError("steps and examples must be positive")
    batch = e / s
    log_s = np.log(s)

    def residuals(theta: np.ndarray) -> np.ndarray:
        log_s_min, log_b_crit = theta
        return log_s - log_s_min - np.log1p(np.exp(log_b_crit) / batch)

    # Start from the middle: B_crit at the geometric mean of the batches, S_min
    # such that the model goes through the points on average.
    b0 = float(np.exp(np.mean(np.log(batch))))
    s0 = float(np.exp(np.mean(log_s - np.log1p(b0 / batch))))
    result = least_squares(residuals, x0=[math.log(s0), math.log(b0)], method="lm")
    log_s_min, log_b_crit = result.x
    dof = s.size - 2
    rss = float(np.sum(result.fun**2))
    se_log_b = math.nan
    if dof > 0:
        jac = result.jac
        try:
            cov = np.linalg.inv(jac.T @ jac) * (rss / dof)
            se_log_b = math.sqrt(max(cov[1, 1], 0.0))
        except np.linalg.LinAlgError:
            pass
    # A front with no bend in range can send log B_crit past what a float holds: B_crit is then infinite.
    s_min, b_crit = (math.exp(x) if x <= LOG_FLOAT_MAX else math.inf for x in (log_s_min, log_b_crit))
    return ParetoFit(s_min=s_min, e_min=s_min * b_crit, b_crit=b_crit, b_crit_se=b_crit * se_log_b,
                     n_points=int(s.size), rms_log_residual=math.sqrt(rss / s.size))
