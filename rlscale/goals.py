"""When a run first reaches a score: the one goal rule, pure numpy, no I/O.

A goal is reached at the first episode where the mean return of the last
``GOAL_WINDOW`` episodes is at least the goal, counting only points where a
full window exists. ``GoalWindow`` applies the rule as episodes arrive (the
training loop); ``first_crossing`` applies it to a logged return series (the
report tools), so tools that read runs back agree with what the run printed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

GOAL_WINDOW = 20  # episodes the return is averaged over before a goal counts
# Standard errors of the difference a window's mean must rise above the first window's before a run counts as
# learning. The check runs after every update, over hundreds of windows before the rise: at 2, the windows of
# MinAtar Breakout runs crossed by chance within 0.5-20k agent steps, where the policy's entropy fell at 20-310k;
# at 4 they crossed near the fall (docs/batch-control.md).
LEARNING_Z = 4.0


class GoalWindow:
    """The returns of the last ``GOAL_WINDOW`` episodes, and the goals they met."""

    def __init__(self, returns: Iterable[float] = ()) -> None:
        self.returns: deque[float] = deque(returns, maxlen=GOAL_WINDOW)

    def add(self, episode_return: float) -> None:
        self.returns.append(episode_return)

    @property
    def mean(self) -> float | None:
        """Mean of the window so far (fewer than GOAL_WINDOW episodes at the start); None before one."""
        return sum(self.returns) / len(self.returns) if self.returns else None

    @property
    def full_mean(self) -> float | None:
        """The mean the goal rule reads: None until the window is full."""
        return self.mean if len(self.returns) == GOAL_WINDOW else None

    def reached(self, goal: float) -> bool:
        mean = self.full_mean
        return mean is not None and mean >= goal


def learning_began(first: tuple[float, float] | None, now: tuple[float, float] | None) -> bool:
    """Whether a run has learned anything: its goal window's mean stands ``LEARNING_Z`` standard errors of
    the difference above its first full window's. ``first`` and ``now`` are (mean, standard deviation) of
    a full window of ``GOAL_WINDOW`` episodes, or None before there is one.

    Both windows' errors count: a first window of zeros has none, and a few lucky episodes in the
    next (a MinAtar Seaquest run's mean 0.0 -> 0.1) are not learning. Before the rise the gradient is
    mostly noise and the noise scale reads high (B_simple 650-1,600 there): a controller that grows
    then buys nodes that buy nothing.
    """
    if first is None or now is None:
        return False
    (first_mean, first_sd), (mean, sd) = first, now
    return mean - first_mean > LEARNING_Z * ((first_sd ** 2 + sd ** 2) / GOAL_WINDOW) ** 0.5


def window_stats(window: GoalWindow) -> tuple[float, float] | None:
    """A full window's mean and standard deviation, None before it is full."""
    if window.full_mean is None:
        return None
    return float(np.mean(window.returns)), float(np.std(window.returns, ddof=1))


@dataclass(frozen=True)
class Forecast:
    at: float  # the agent step at which the trend line reaches the goal
    sure: bool  # the line's slope is known well enough that this step is within 2x either way


@dataclass(frozen=True)
class GoalOutlook:
    """The next goal, and where the run's trend and the preset's reference run put it."""

    goal: float
    forecast: Forecast | None  # from the run's own trend (None: not rising)
    reference: float | None  # the agent step the preset's reference run reached it at (None: none, or passed)


class GoalForecast:
    """When the goal window's mean will reach a goal, from its recent trend (a line through its history).

    Points are taken at most every ``spacing`` agent steps; the forecast uses the last
    ``points`` of them and exists only while the mean is rising. Early in a run the
    trend is mostly noise (a Pong run's first-minute forecast swung 4h08m <-> 108h):
    a forecast is ``sure`` only where the slope two standard errors either side of
    its fit keeps the steps still to go within a factor of ``spread`` of the
    forecast's.
    """

    def __init__(self, spacing: float, points: int = 10, spread: float = 2.0) -> None:
        self.spacing = spacing
        self.spread = spread
        self.history: deque[tuple[float, float]] = deque(maxlen=points)

    def add(self, step: float, mean: float | None) -> None:
        if mean is not None and (not self.history or step - self.history[-1][0] >= self.spacing):
            self.history.append((step, mean))

    def expected_step(self, goal: float, now: float = 0.0) -> Forecast | None:
        """Where the trend line reaches ``goal``; None without a rising trend.

        None also when the line crosses the goal before ``now`` (the current step) or
        its last point: the mean lags its own trend (a dip after a rise), so the trend
        says nothing about when the goal comes; printing "now" there misled (a Pong
        run at 14.1 showed "goal 18 ... 0s").
        """
        if len(self.history) < 4:
            return None
        steps, means = np.array(self.history).T
        # Five points or more leave residuals to estimate the slope's error from: one fit gives both.
        if len(steps) >= 5:
            coefficients, covariance = np.polyfit(steps, means, 1, cov=True)
            error = 2.0 * float(np.sqrt(covariance[0, 0]))
        else:
            coefficients, error = np.polyfit(steps, means, 1), None
        slope = float(coefficients[0])
        if slope <= 0:
            return None
        # Through the points' centroid, where the intercept's error vanishes: only the slope's is left.
        centre_step, centre_mean = steps.mean(), means.mean()
        start = max(float(steps[-1]), now)

        def remaining(m: float) -> float:
            return centre_step + (goal - centre_mean) / m - start

        if remaining(slope) <= 0:
            return None
        sure = error is not None and (
            slope - error > 0 and remaining(slope - error) <= self.spread * remaining(slope)
            and remaining(slope + error) >= remaining(slope) / self.spread)
        at = start + remaining(slope)
        return Forecast(float(at), bool(sure))


def rolling_mean(values: np.ndarray, window: int = GOAL_WINDOW) -> np.ndarray:
    """Mean of the last ``window`` values at each point (fewer at the start)."""
    sums = np.cumsum(np.insert(values.astype(float), 0, 0.0))
    idx = np.arange(1, values.size + 1)
    lo = np.maximum(idx - window, 0)
    return (sums[idx] - sums[lo]) / (idx - lo)


def smoothed_returns(returns: np.ndarray) -> np.ndarray:
    """Rolling mean over full windows only; NaN where fewer than GOAL_WINDOW episodes exist."""
    out = rolling_mean(returns, GOAL_WINDOW)
    out[: GOAL_WINDOW - 1] = np.nan
    return out


def first_crossing(steps: np.ndarray, returns: np.ndarray, goal: float) -> float | None:
    """Agent step at which the smoothed return first reaches ``goal``; None if it never does."""
    if returns.size < GOAL_WINDOW:
        return None
    reached = np.flatnonzero(smoothed_returns(returns) >= goal)
    return float(steps[reached[0]]) if reached.size else None


def value_at(steps: np.ndarray, values: np.ndarray, step: float) -> float:
    """A counter logged against agent steps, read at ``step`` (linear between points)."""
    return float(np.interp(step, steps, values))
