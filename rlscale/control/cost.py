"""What a batch costs on this machine: T(B) = a + b*B, fitted online (docs/batch-control.md). Pure math.

a: seconds of per-update overhead (weight broadcast, the actors' round trip,
Python, the learner's fixed cost); b: seconds per observation across rollout
and learner. One update over B observations makes 1/(1 + Bn/B) of a
full-batch step of progress (paper eq. D.1), so the wall time per unit of
progress is tau(B) = (a + b*B)(1 + Bn/B), smallest at B* = sqrt((a/b) * Bn):
eq. D.6 with the exchange rate r = a/b measured instead of guessed.

a and b cannot be told apart from updates at one batch size. The model keeps
the median time of the recent updates at each batch size it has seen (a
median, because a few updates stall: garbage collection, a neighbour on the
core) and fits a line through the sixteen most recently seen sizes: wide
enough that the line rests on the whole range a run has visited, not on the
few nearby sizes of its last resizes, and still dropping sizes a run left
long ago, so it follows a machine or cluster whose speed changes. It is
identified once two sizes at least ``min_spread`` apart have enough timings
each.

With ``outlier_factor`` finite (the model's own default, inf, fits every size; the
controller sets ``cost_outlier_factor``, 1.5 by default), the largest size, where its median lies more than it above the line through
the others, is left out of the fit, unless the run is at it (or has just left
it while its new size has too few timings): a few seconds of load while a
size was timed (another program starting, a report script) leave that
size's median twice too high for as long as the model keeps it, and one such
size at the end of the range bends the whole line. On MinAtar Breakout from
2,560 observations, 2,560's median read 277 ms where the line through 1,280
and 640 put it at 127 ms; the line then had no intercept, and ``auto`` probed
one factor down after every cool-down, from 512 environments to 4
(docs/batch-control.md#how-auto-decides). When the run returns to the size
the fit leaves out, its old timings go and it is timed afresh; from then on
it is never left out, off the line or not (the machine may be like that),
until it drops out of the sizes kept (``_fit`` says why only the largest size).
"""

from __future__ import annotations

import math
import statistics
from collections import OrderedDict, deque
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Fit:
    overhead: float  # a, seconds per update
    per_observation: float  # b, seconds per observation
    # Why the line through the timings says nothing about the machine: "" when it does; "no overhead"
    # when its intercept fell at or below 0 (B* = 0); "no slope" when time did not grow with the
    # batch (B* unbounded). Either comes from a few noisy medians, not from a machine.
    unresolved: str = ""
    left_out: float = 0.0  # the batch size whose timings lay above the line through the others (0: none)

    @property
    def exchange_rate(self) -> float:
        """r = a/b in observations: the batch at which the overhead equals the per-observation cost."""
        return self.overhead / self.per_observation

    def seconds(self, batch: float) -> float:
        return self.overhead + self.per_observation * batch


def optimal_batch(fit: Fit, noise_scale: float) -> float:
    """B* = sqrt((a/b) * Bn), the batch with the least wall time per unit of progress."""
    return math.sqrt(fit.exchange_rate * noise_scale)


def time_per_progress(fit: Fit, batch: float, noise_scale: float) -> float:
    """tau(B) = (a + b*B)(1 + Bn/B): seconds per full-batch step of progress at batch B."""
    return fit.seconds(batch) * (1.0 + noise_scale / batch)


def least_time_per_progress(fit: Fit, noise_scale: float) -> float:
    """tau(B*) = a + b*Bn + 2*sqrt(a*b*Bn) (finite also where a = 0 puts B* at 0)."""
    a, b = fit.overhead, fit.per_observation
    return a + b * noise_scale + 2.0 * math.sqrt(a * b * noise_scale)


def predicted_speedup(fit: Fit, batch: float, noise_scale: float) -> float:
    """tau(B)/tau(B*): how much faster training at B* would progress than at ``batch``."""
    return time_per_progress(fit, batch, noise_scale) / least_time_per_progress(fit, noise_scale)


@dataclass
class CostModel:
    """Update times per batch size, and the line T(B) = a + b*B through their medians."""

    window: int = 64  # timings kept per batch size (the median is taken over these)
    min_samples: int = 5  # timings a batch size needs before it enters the fit
    # The most recently seen batch sizes the fit uses. Four made r = a/b swing 4.3x within a run (10th
    # to 90th percentile, median over 60 MinAtar auto runs' update times replayed through the model),
    # sixteen 1.7x, every size seen 1.5x (docs/results.md, 2026-11-26).
    sizes_kept: int = 16
    min_spread: float = 1.25  # identified once the largest fitted size is this factor above the smallest
    # The largest size, where its median is this factor above the line through the others, is left out (inf, the
    # model's own default: none is; the controller sets ControlConfig.cost_outlier_factor, 1.5).
    outlier_factor: float = math.inf
    timings: OrderedDict[float, deque[float]] = field(default_factory=OrderedDict)
    # Sizes left out once and timed afresh on a return: their timings are the machine's, never left out again.
    retimed: set[float] = field(default_factory=set)
    # The latest fit that resolved: a refit on noisy timings may lose its overhead or slope, and a cluster clock
    # keeps pricing with this one meanwhile (saved in checkpoints).
    last_resolved: Fit | None = field(default=None, init=False)
    # The last fit, as (fit,), until the timings change: the training loop reads it several times an
    # update (the controller, the logged a and b, the cluster clock), each a median per batch size.
    _fitted: tuple[Fit | None] | None = field(default=None, init=False, repr=False, compare=False)

    def add(self, batch: float, seconds: float) -> None:
        """One update's time (collection and learning; not logging or checkpoints)."""
        if not (batch > 0 and math.isfinite(seconds) and seconds > 0):
            return
        returning = bool(self.timings) and next(reversed(self.timings)) != batch
        if returning and batch in self.timings and self.fit is not None and self.fit.left_out == batch:
            del self.timings[batch]  # timed under a load that has passed, or the machine is like that: time it again
            self.retimed.add(batch)
        self._fitted = None
        times = self.timings.pop(batch, None) or deque(maxlen=self.window)
        times.append(seconds)
        self.timings[batch] = times  # most recently seen last
        while len(self.timings) > self.sizes_kept:
            self.timings.popitem(last=False)
        self.retimed &= set(self.timings)  # a size timed again after it dropped out is a new size

    def points(self) -> list[tuple[float, float, int]]:
        """(batch, median seconds, timings) of every batch size with enough timings."""
        return [(b, statistics.median(t), len(t)) for b, t in self.timings.items() if len(t) >= self.min_samples]

    @property
    def fit(self) -> Fit | None:
        """The weighted least-squares line through the medians; None until identified.

        A fitted overhead below zero is read as none (a = 0 puts B* at 0); a slope at
        or below zero as one observation costing a millionth of the overhead (r = 10^6).
        Both are marked ``unresolved``: the controller does not move toward a B* the
        timings' noise may have put there (it times one smaller batch on the first,
        one larger on the second). ``left_out`` names the size a fit leaves out.
        """
        if self._fitted is None:
            fitted = self._fit()
            self._fitted = (fitted,)
            if fitted is not None and not fitted.unresolved:
                self.last_resolved = fitted
        return self._fitted[0]

    @property
    def resolved_fit(self) -> Fit | None:
        """The fit where it is resolved, else the latest one that was (None before any)."""
        fit = self.fit
        return fit if fit is not None and not fit.unresolved else self.last_resolved

    def _fit(self) -> Fit | None:
        """The line through every size's median, or through all but the largest where that lies far above the line
        of the others. Only the largest: load there lowers the line's intercept, and a line with none probes down one
        factor per cool-down; load on the smallest raises it, which grows the batch and times new sizes. Leaving out
        any size far off the line left out the 40-observation probe of runs from 80, which is above the line through
        80 and 160 on a 2-core Xeon, and those runs took 1.67x the time, a cost not traced to that
        (docs/batch-control.md#how-auto-decides)."""
        pts = self.points()
        line = self._line(pts)
        if len(pts) < 3 or not math.isfinite(self.outlier_factor):
            return line
        i = max(range(len(pts)), key=lambda j: pts[j][0])
        batch, seconds, _ = pts[i]
        # Not the size the run is at, nor the last one fitted while the run's new size gathers its first timings.
        if batch in (next(reversed(self.timings)), pts[-1][0]) or batch in self.retimed:
            return line
        rest = self._line(pts[:i] + pts[i + 1:])
        if rest is None or rest.unresolved or seconds <= self.outlier_factor * rest.seconds(batch):
            return line
        return Fit(rest.overhead, rest.per_observation, left_out=batch)

    def _line(self, pts: list[tuple[float, float, int]]) -> Fit | None:
        """The weighted least-squares line through ``pts``' medians (weights: the square root of their timings)."""
        if len(pts) < 2 or max(p[0] for p in pts) < self.min_spread * min(p[0] for p in pts):
            return None
        w = [math.sqrt(n) for _, _, n in pts]
        sw = sum(w)
        mx = sum(wi * b for wi, (b, _, _) in zip(w, pts, strict=True)) / sw
        my = sum(wi * t for wi, (_, t, _) in zip(w, pts, strict=True)) / sw
        sxx = sum(wi * (b - mx) ** 2 for wi, (b, _, _) in zip(w, pts, strict=True))
        sxy = sum(wi * (b - mx) * (t - my) for wi, (b, t, _) in zip(w, pts, strict=True))
        slope = sxy / sxx
        overhead = my - slope * mx
        if slope <= 0:
            return Fit(max(overhead, my), max(overhead, my) * 1e-6, unresolved="no slope")
        if overhead <= 0:
            return Fit(0.0, slope, unresolved="no overhead")
        return Fit(overhead, slope)

    def state_dict(self) -> dict[str, Any]:
        return {"timings": [[b, list(t)] for b, t in self.timings.items()], "retimed": sorted(self.retimed),
                "last_resolved": asdict(self.last_resolved) if self.last_resolved is not None else None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.timings = OrderedDict((float(b), deque(t, maxlen=self.window)) for b, t in state["timings"])
        # Absent from checkpoints saved before 2026-12-07: retimed, and last_resolved (since 6bca5a0).
        self.retimed = {float(b) for b in state.get("retimed", [])} & set(self.timings)
        saved = state.get("last_resolved")
        self.last_resolved = Fit(**saved) if saved is not None else None
        self._fitted = None
