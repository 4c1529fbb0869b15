"""Steps to a goal over seeds against a stored reference sample: a rank test, a bootstrap ratio, a verdict.

Pure numpy and scipy, no I/O: ``benchmarks/learning.py`` runs the seeds and reads the reference
file, this module says whether the two samples differ. A seed that never reached the goal within
its budget counts as infinitely slow (``math.inf``): it ranks after every seed that got there, so a
learner that stops reaching the goal reads as "more steps", never as missing data.

The test is the two-sided Mann-Whitney U test (exact where scipy computes it exactly: small samples
without ties). It is unpaired: the same seed on two commits draws a different trajectory as soon as
any float differs, so pairing buys nothing a rank test does not already have. The ratio is the
median of the new sample over the reference's, with a percentile-bootstrap interval (each sample
resampled on its own).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import mannwhitneyu

ALPHA = 0.05  # the verdict's level: below it a difference is called one
RATIO_RESAMPLES = 4_000


@dataclass(frozen=True)
class Comparison:
    """One task's new steps to its goal against the reference's."""

    p_value: float  # two-sided Mann-Whitney U
    ratio: float  # median(new) / median(reference); inf where the new median never reached the goal
    ratio_low: float  # its 95 % bootstrap interval
    ratio_high: float
    new_reached: int  # seeds that reached the goal, of new_seeds
    new_seeds: int
    reference_reached: int
    reference_seeds: int

    @property
    def verdict(self) -> str:
        """'as before', 'more steps' or 'fewer steps' (the new sample's, at level ALPHA)."""
        if self.p_value >= ALPHA:
            return "as before"
        return "more steps" if self.ratio > 1 else "fewer steps"


def as_steps(values: list[float | None]) -> np.ndarray:
    """Steps to the goal per seed, a seed that did not reach it (None) as inf."""
    return np.array([math.inf if v is None else float(v) for v in values], dtype=float)


def rank_test(new: np.ndarray, reference: np.ndarray) -> float:
    """Two-sided Mann-Whitney U p-value; 1.0 where every value on both sides is the same (no evidence)."""
    if new.size == 0 or reference.size == 0:
        raise ValueError("a rank test needs at least one value on each side")
    if np.unique(np.concatenate([new, reference])).size == 1:
        return 1.0
    # inf (not reached) ranks last and ties with inf: the U statistic reads ranks only.
    return float(mannwhitneyu(new, reference, alternative="two-sided").pvalue)


def median_ratio(new: np.ndarray, reference: np.ndarray, seed: int = 0) -> tuple[float, float, float]:
    """median(new) / median(reference) and its 95 % percentile-bootstrap interval (inf where a median is)."""
    rng = np.random.default_rng(seed)
    new_draws = np.median(rng.choice(new, size=(RATIO_RESAMPLES, new.size)), axis=1)
    ref_draws = np.median(rng.choice(reference, size=(RATIO_RESAMPLES, reference.size)), axis=1)
    ratios = np.sort(_ratio(new_draws, ref_draws))
    ratios = ratios[~np.isnan(ratios)]  # both medians infinite: no ratio in that draw
    point = float(_ratio(np.median(new), np.median(reference)))
    if ratios.size == 0:
        return point, math.nan, math.nan
    # Order statistics, not interpolation: an end may be inf.
    return point, float(ratios[int(0.025 * ratios.size)]), float(ratios[int(0.975 * ratios.size) - 1])


def _ratio(top: np.ndarray | float, bottom: np.ndarray | float) -> np.ndarray:
    top, bottom = np.asarray(top, dtype=float), np.asarray(bottom, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = top / bottom
    return np.where(np.isinf(top) & np.isinf(bottom), math.nan, out)


def compare(new: list[float | None], reference: list[float | None]) -> Comparison:
    """The new sample of steps to the goal against the reference's: p, ratio with interval, medians."""
    new_steps, ref_steps = as_steps(new), as_steps(reference)
    ratio, low, high = median_ratio(new_steps, ref_steps)
    return Comparison(rank_test(new_steps, ref_steps), ratio, low, high,
                      int(np.isfinite(new_steps).sum()), new_steps.size,
                      int(np.isfinite(ref_steps).sum()), ref_steps.size)


def detection_power(reference: list[float | None], ratio: float, seeds: int, draws: int = 2_000,
                    seed: int = 0) -> float | None:
    """How often ``seeds`` new seeds that take ``ratio`` times the steps read "more steps" against as many.

    Both samples are drawn log-normal with the reference's own spread (the sd of its log steps): the
    benchmark's sensitivity to a regression of that size at that many seeds. None where fewer than
    three reference seeds reached the goal (no spread to read).
    """
    reached = np.log([v for v in reference if v is not None])
    if reached.size < 3:
        return None
    rng = np.random.default_rng(seed)
    spread = reached.std(ddof=1)
    ref = rng.normal(0.0, spread, size=(draws, seeds))
    new = rng.normal(math.log(ratio), spread, size=(draws, seeds))
    p = mannwhitneyu(new, ref, alternative="two-sided", axis=1).pvalue
    return float(np.mean((p < ALPHA) & (np.median(new, axis=1) > np.median(ref, axis=1))))


def verdict_line(task: str, result: Comparison) -> str:
    """One line a person reads: the verdict, then the numbers behind it."""
    words = result.verdict if result.verdict == "as before" else f"{result.verdict}, p = {result.p_value:.3g}"
    if not math.isfinite(result.ratio):
        ratio = "new median not reached" if math.isinf(result.ratio) else "no median on either side"
    else:
        high = f"{result.ratio_high:.2f}" if math.isfinite(result.ratio_high) else "inf"
        ratio = f"{result.ratio:.2f}x the reference's median [{result.ratio_low:.2f}, {high}]"
    p = f"; p = {result.p_value:.3g}" if result.verdict == "as before" else ""  # else the verdict says it
    return (f"{task}: {words} ({ratio}{p}; reached {result.new_reached}/{result.new_seeds}, "
            f"reference {result.reference_reached}/{result.reference_seeds})")
