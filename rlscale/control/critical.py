"""The critical batch size measured directly, from branches of one run (eq. 2.11; docs/batch-control.md).

Pure math: numpy only, no torch, no Ray, no I/O.

A run is branched at one point into batch sizes B_i = m_i·B. Every branch trains on
the same number of examples E_w (so branch i takes E_w/B_i optimizer steps) and its
progress Δ_i is measured the same way for all branches (e.g. the decrease of a
held-out loss over the window). Near that point eq. 2.11 says the steps to a small
fixed improvement are S(B) = S_min(1 + B_crit/B), so the progress per optimizer step
is p(B) = p_∞ / (1 + B_crit/B) and the progress over E_w examples is

    Δ(B) = (E_w/B)·p(B) = c / (B + B_crit),      c = E_w·p_∞ > 0.

Two branches give B_crit in closed form from ρ = Δ(b1)/Δ(b2), b1 < b2:

    ρ = (b2 + B_crit)/(b1 + B_crit)   ⇒   B_crit = (b2 − ρ·b1)/(ρ − 1),   1 < ρ < b2/b1.

ρ → b2/b1 (per-example progress unchanged by the batch, Δ ∝ 1/B) means B_crit → 0;
ρ → 1 (per-step progress unchanged, the same Δ for any batch) means B_crit → ∞.
This is the per-step form of the two-branch reading, B_crit = m·b1(r − 1)/(m − r) with r = p(b2)/p(b1),
since at equal examples r = m/ρ.

Three or more branches are fitted by least squares in Δ (``fit_critical_batch``);
``largest_efficient_batch`` is Merrill et al. 2025's one-sided rule; and
``bootstrap_interval`` puts an error bar on the fit from paired held-out slices.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Examples may differ between branches by this fraction (a window ends on a whole rollout, so
# branches at different batches overshoot E_w by different amounts); progress is then rescaled
# per example. Beyond it the windows are not comparable: progress is not linear in examples
# over a window long enough to see training slow down.
EXAMPLES_TOLERANCE = 0.01

# The fit's profile grid spans B_crit from min(B)/GRID_REACH to max(B)·GRID_REACH: far enough
# outside the branches that a B_crit the data cannot resolve lands at an edge, not at a
# seemingly interior value.
GRID_REACH = 1000.0
GRID_POINTS = 400

# A fitted B_crit below min(B)/RESOLVABLE or above max(B)·RESOLVABLE is a bound, not a value:
# there the progress ratio of two branches a factor 2 apart moves by under 6 % from its limit
# (2 at B_crit = 0, 1 at B_crit = ∞), which a measurement's noise of a few percent swamps.
RESOLVABLE = 8.0


@dataclass(frozen=True)
class Branch:
    """One branch's outcome over the window: its batch, what it consumed, the progress it made."""

    batch: float  # observations per optimizer step
    examples: int  # observations consumed over the window (≈ E_w, common to all branches)
    optimizer_steps: int  # ≈ examples / batch; recorded for the run's totals, not used by the fit
    progress: float  # Δ: the common progress measure over the window (higher is better)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.batch) and self.batch > 0):
            raise ValueError(f"branch batch must be a positive number, got {self.batch}")
        if self.examples <= 0:
            raise ValueError(f"branch examples must be positive, got {self.examples}")
        if self.optimizer_steps < 0:
            raise ValueError(f"branch optimizer_steps must be >= 0, got {self.optimizer_steps}")


@dataclass(frozen=True)
class Reading:
    """A fit of Δ_i = c/(B_i + B_crit) over branches, with the branches it came from."""

    critical_batch: float  # fitted B_crit; nan when undefined (no fit with c > 0)
    bound: str  # "" inside the resolvable range, "below"/"above" when only a bound
    scale: float  # c, in progress units × observations; nan when undefined
    residual: float  # sum of squared residuals of the (example-normalised) progress
    merrill_batch: float  # largest_efficient_batch at its default tolerance
    batches: tuple[float, ...] = ()  # the branches' batches, ascending
    per_example: tuple[float, ...] = ()  # Δ_i/E_i in the same order

    @property
    def defined(self) -> bool:
        """Whether the fit found a B_crit (one that may still be only a bound)."""
        return math.isfinite(self.critical_batch)

    @property
    def shown_batch(self) -> float:
        """B_crit as the console and TensorBoard show it: the fit inside the range, the range's edge
        (min(B)/8 or 8·max(B)) for a bound. A fit past the edge carries no information beyond it, and
        its value can be anything up to a float's limit (1e18 was seen), which flattens a chart."""
        if self.bound == "below":
            return min(self.batches) / RESOLVABLE
        if self.bound == "above":
            return max(self.batches) * RESOLVABLE
        return self.critical_batch

    def describe(self) -> str:
        """One console line, e.g. "B_crit 310 (branches 64-512, progress per example 1.00/0.85/...)"."""
        span = (f"branches {_number(self.batches[0])}-{_number(self.batches[-1])}"
                if self.batches else "no branches")
        first = self.per_example[0] if self.per_example else math.nan
        if first > 0:
            # Relative to the smallest batch: the data efficiency each larger batch kept.
            shown = "/".join(f"{e / first:.2f}" for e in self.per_example)
        else:
            shown = "/".join(f"{e:.2g}" for e in self.per_example)
        detail = f"{span}, progress per example {shown}"
        if not self.defined:
            return f"B_crit undefined: no fit with positive progress ({detail})"
        if math.isfinite(self.merrill_batch):
            detail += f", efficient up to {_number(self.merrill_batch)}"
        if self.bound:
            edge = "the smallest branch / 8" if self.bound == "below" else "8x the largest branch"
            return f"B_crit {self.bound} {_number(self.shown_batch)} ({edge}: the branches cannot resolve it; {detail})"
        return f"B_crit {_number(self.critical_batch)} ({detail})"


def pair_critical_batch(b1: float, d1: float, b2: float, d2: float) -> float:
    """B_crit from two branches that consumed the same examples: batch b_i made progress d_i.

    Returns 0.0 when ρ = d1/d2 ≥ b2/b1 (progress fell at least as 1/B: per-example
    progress did not fall with the batch, B_crit below anything these two resolve),
    inf when ρ ≤ 1 (the larger batch made as much progress from the same examples in
    fewer steps: per-step progress only grew with the batch, B_crit above them), and
    nan when either progress is not positive or not finite (no ratio to read).
    The branches may come in either order; each progress stays with its own batch.
    """
    if not (math.isfinite(b1) and math.isfinite(b2) and b1 > 0 and b2 > 0):
        raise ValueError(f"batches must be positive numbers, got {b1} and {b2}")
    if b1 == b2:
        raise ValueError(f"two branches at the same batch ({b1}) cannot resolve B_crit")
    if b1 > b2:
        b1, d1, b2, d2 = b2, d2, b1, d1
    if not (math.isfinite(d1) and math.isfinite(d2)) or d1 <= 0 or d2 <= 0:
        return math.nan
    rho = d1 / d2
    if rho >= b2 / b1:
        return 0.0
    if rho <= 1.0:
        return math.inf
    return (b2 - rho * b1) / (rho - 1.0)


def fit_critical_batch(branches: Sequence[Branch]) -> Reading:
    """Least-squares fit of Δ_i = c/(B_i + B_crit) over two or more branches.

    Progress is first put on a common window: Δ_i·mean(E)/E_i, so branches whose
    examples differ by rounding (≤ 1 %) compare fairly; more than that raises.
    For a given B_crit the best c is closed-form (c* = Σ Δ_i f_i / Σ f_i², f_i = 1/(B_i + B_crit)),
    so the fit profiles c out and searches B_crit alone: a log grid from min(B)/1000 to
    max(B)·1000, then a bounded scalar search in log B_crit between the best grid point's
    neighbours. c is constrained to c ≥ 0 (progress must be something a batch buys): where
    c* ≤ 0 the best admissible c is 0 and the residual is Σ Δ_i², which keeps the profile
    continuous. If no B_crit admits c > 0 (e.g. every Δ ≤ 0) the reading is undefined (nan).

    A B_crit the branches cannot resolve comes out near a grid edge or just beyond the
    branches; it is reported as fitted with ``bound`` "below" (≤ min(B)/8) or "above"
    (≥ 8·max(B)): read it as "B_crit ≲ that" or "≳ that".
    """
    batches, examples, progress = _validated(branches)
    per_example = progress / examples
    common = per_example * examples.mean()
    merrill = _largest_efficient(batches, per_example, 0.2)
    fitted = _fit(batches, common[None, :])
    bc, scale, residual = (float(v[0]) for v in fitted)
    bound = ""
    if math.isfinite(bc):
        if bc <= batches.min() / RESOLVABLE:
            bound = "below"
        elif bc >= batches.max() * RESOLVABLE:
            bound = "above"
    return Reading(
        critical_batch=bc,
        bound=bound,
        scale=scale,
        residual=residual,
        merrill_batch=merrill,
        batches=tuple(float(b) for b in batches),
        per_example=tuple(float(e) for e in per_example),
    )


def largest_efficient_batch(branches: Sequence[Branch], tolerance: float = 0.2) -> float:
    """Merrill et al. 2025's rule, adapted: the largest batch that lost little data efficiency.

    Sorted by batch, a branch qualifies when its per-example progress Δ_i/E_i is at least
    (1 − tolerance) × the best per-example progress among the branches no larger than it;
    the answer is the largest qualifying batch (the smallest branch always qualifies). A dip
    at a middle batch does not end the read: under noise one low branch should not hide that
    a larger one kept its efficiency.

    What it reads under eq. 2.11: per-example progress relative to the smallest branch B_s is
    (B_s + B_crit)/(B + B_crit), so B qualifies while B ≤ (B_s + tolerance·B_crit)/(1 − tolerance)
    and the answer is that bound rounded down to the tried batches. With B_s ≪ B_crit,
    tolerance 0.2 reads ≈ B_crit/4, and tolerance 0.5 reads B_crit + 2·B_s (B_crit is the batch
    whose per-example efficiency is half the small-batch limit). One-sided: it cannot exceed
    the largest branch, and it needs no model to hold beyond monotone efficiency.

    nan when the smallest branch made no progress (nothing to measure efficiency against).
    """
    if not 0.0 <= tolerance < 1.0:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance}")
    batches, examples, progress = _validated(branches)
    return _largest_efficient(batches, progress / examples, tolerance)


def bootstrap_interval(
    segments: np.ndarray,
    batches: Sequence[float],
    examples: Sequence[int],
    n_boot: int = 1000,
    level: float = 0.9,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the fitted B_crit from paired held-out slices.

    ``segments[j, i]`` is the progress branch i made on independent held-out slice j; the
    slices are common to all branches, so a row is resampled whole (the pairing cancels a
    slice's difficulty, which every branch shares). Each resample sums its rows into Δ_i and
    is refitted as ``fit_critical_batch`` does. Undefined resamples are left out; when more
    than half are undefined the interval is (nan, nan): the data do not pin B_crit down.
    Resamples that only bound B_crit enter at their fitted value, so an end beyond
    min(B)/8 or 8·max(B) means the interval is open on that side.
    """
    seg = np.asarray(segments, dtype=float)
    if seg.ndim != 2 or seg.shape[0] < 2:
        raise ValueError(f"segments must be (n_segments >= 2, n_branches), got shape {seg.shape}")
    if len(batches) != seg.shape[1] or len(examples) != seg.shape[1]:
        raise ValueError(f"need one batch and one example count per branch column ({seg.shape[1]})")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    # The same checks as the fit's (batches, equal windows); the progress comes from the rows.
    shells = [Branch(float(b), int(e), max(1, round(e / b)), 0.0)
              for b, e in zip(batches, examples, strict=True)]
    b, ex, _ = _validated(shells)
    order = np.argsort(np.asarray(batches, dtype=float), kind="stable")
    seg = seg[:, order]  # columns in the batch order _validated returns
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, seg.shape[0], size=(n_boot, seg.shape[0]))
    totals = seg[rows].sum(axis=1) * (ex.mean() / ex)  # (n_boot, n_branches), on a common window
    readings = _fit(b, totals)[0]
    kept = readings[np.isfinite(readings)]
    if kept.size * 2 < n_boot:
        return (math.nan, math.nan)
    lo, hi = np.quantile(kept, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return (float(lo), float(hi))


def _validated(branches: Sequence[Branch]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Batches, examples and progress as arrays sorted by batch, or a one-line ValueError."""
    if len(branches) < 2:
        raise ValueError(f"need at least 2 branches to read B_crit, got {len(branches)}")
    ordered = sorted(branches, key=lambda br: br.batch)
    batches = np.array([br.batch for br in ordered], dtype=float)
    examples = np.array([br.examples for br in ordered], dtype=float)
    progress = np.array([br.progress for br in ordered], dtype=float)
    if np.unique(batches).size < 2:
        raise ValueError("branches must span at least 2 different batches")
    if examples.max() > examples.min() * (1.0 + EXAMPLES_TOLERANCE):
        raise ValueError(
            f"branches must train on the same examples (within {EXAMPLES_TOLERANCE:.0%}), "
            f"got {int(examples.min())}-{int(examples.max())}")
    return batches, examples, progress


def _largest_efficient(batches: np.ndarray, per_example: np.ndarray, tolerance: float) -> float:
    """The rule of ``largest_efficient_batch`` on sorted arrays."""
    if not (math.isfinite(per_example[0]) and per_example[0] > 0):
        return math.nan
    best = -math.inf
    chosen = math.nan
    for batch, efficiency in zip(batches, per_example, strict=True):
        best = max(best, efficiency)  # the best among batches no larger than this one
        if efficiency >= (1.0 - tolerance) * best:
            chosen = float(batch)
    return chosen


def _fit(batches: np.ndarray, progress: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(B_crit, c, residual) per row of ``progress`` (rows × branches): the constrained fit.

    Vectorised over rows so a bootstrap's thousand refits cost one pass. An undefined row
    (non-finite progress, or no B_crit with c* > 0) gets (nan, nan, Σ Δ²).
    """
    rows = np.atleast_2d(np.asarray(progress, dtype=float))
    m = rows.shape[0]
    finite = np.all(np.isfinite(rows), axis=1)
    rows = np.where(finite[:, None], rows, 0.0)
    total = np.einsum("mi,mi->m", rows, rows)
    grid = np.log(np.geomspace(batches.min() / GRID_REACH, batches.max() * GRID_REACH, GRID_POINTS))
    f = 1.0 / (batches[None, :] + np.exp(grid)[:, None])  # (grid, branches)
    num = rows @ f.T  # (rows, grid)
    den = np.einsum("gi,gi->g", f, f)
    scale = np.where(num > 0, num / den, 0.0)
    # Σ (Δ − c f)² expanded; its rounding (~1e-16 of Σ Δ²) only matters where the grid cannot
    # tell neighbours apart anyway, and the refinement below recomputes the residual directly.
    residuals = total[:, None] - 2.0 * scale * num + scale**2 * den
    k = np.argmin(residuals, axis=1)
    defined = finite & (num[np.arange(m), k] > 0)

    # Golden-section search in log B_crit between the best grid point's neighbours, all rows
    # at once: a bounded scalar minimisation, like scipy's minimize_scalar(method="bounded"),
    # without a Python loop over resamples. Each step keeps one probe and shrinks the bracket
    # by 0.618: 25 steps take the grid's 8 % bracket below 1e-6 in log B_crit, far inside any
    # measurement's noise.
    lo = grid[np.maximum(k - 1, 0)]
    hi = grid[np.minimum(k + 1, GRID_POINTS - 1)]
    shrink = (math.sqrt(5.0) - 1.0) / 2.0
    left, right = hi - shrink * (hi - lo), lo + shrink * (hi - lo)
    f_left, f_right = _profile(batches, rows, left)[1], _profile(batches, rows, right)[1]
    for _ in range(25):
        to_left = f_left <= f_right  # the minimum lies in [lo, right]
        hi = np.where(to_left, right, hi)
        lo = np.where(to_left, lo, left)
        probe = np.where(to_left, hi - shrink * (hi - lo), lo + shrink * (hi - lo))
        f_probe = _profile(batches, rows, probe)[1]
        left, right, f_left, f_right = (
            np.where(to_left, probe, right), np.where(to_left, left, probe),
            np.where(to_left, f_probe, f_right), np.where(to_left, f_left, f_probe))
    found = (lo + hi) / 2.0
    c_found, r_found = _profile(batches, rows, found)
    c_grid, r_grid = _profile(batches, rows, grid[k])
    # The grid point stands where the search did no better (at a flat profile's edge it cannot).
    better = r_found <= r_grid
    log_bc = np.where(better, found, grid[k])
    c = np.where(better, c_found, c_grid)
    residual = np.where(better, r_found, r_grid)
    defined &= c > 0
    return (np.where(defined, np.exp(log_bc), np.nan), np.where(defined, c, np.nan),
            np.where(defined, residual, np.where(finite, total, np.nan)))


def _profile(batches: np.ndarray, rows: np.ndarray, log_bc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(c*, residual) per row at that row's log B_crit, c* constrained to ≥ 0."""
    f = 1.0 / (batches + np.exp(log_bc)[:, None])
    c = np.maximum((f * rows).sum(axis=1) / (f * f).sum(axis=1), 0.0)
    resid = rows - c[:, None] * f
    return c, (resid * resid).sum(axis=1)


def _number(x: float) -> str:
    """A batch size for a console line: whole numbers from 10 up, two digits below."""
    return f"{x:.0f}" if abs(x) >= 10 else f"{x:.2g}"
