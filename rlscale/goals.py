"""When a run first reaches a score: pure numpy, no I/O.

A goal is reached at the first episode where the mean return of the last
``window`` episodes is at least the goal, counting only points where a full
window exists. This is the rule the training loop uses for its goal messages,
so tools that read runs back agree with what the run printed.
"""

from __future__ import annotations

import numpy as np


def rolling_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last ``window`` values at each point (fewer at the start)."""
    sums = np.cumsum(np.insert(values.astype(float), 0, 0.0))
    idx = np.arange(1, values.size + 1)
    lo = np.maximum(idx - window, 0)
    return (sums[idx] - sums[lo]) / (idx - lo)


def smoothed_returns(returns: np.ndarray, window: int) -> np.ndarray:
    """Rolling mean over full windows only; NaN where fewer than ``window`` episodes exist."""
    out = rolling_mean(returns, window)
    out[: window - 1] = np.nan
    return out


def first_crossing(steps: np.ndarray, returns: np.ndarray, goal: float, window: int = 20) -> float | None:
    """Agent step at which the smoothed return first reaches ``goal``; None if it never does."""
    if returns.size < window:
        return None
    reached = np.flatnonzero(smoothed_returns(returns, window) >= goal)
    return float(steps[reached[0]]) if reached.size else None


def value_at(steps: np.ndarray, values: np.ndarray, step: float) -> float:
    """A counter logged against agent steps, read at ``step`` (linear between points)."""
    return float(np.interp(step, steps, values))
