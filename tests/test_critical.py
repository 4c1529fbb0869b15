"""The direct read of B_crit from branches, against progress made by eq. 2.11 with a known B_crit.

The branches' progress is generated from the paper's statement, not from the module's
formula: at batch B the steps to a unit of progress are S(B) = S_min(1 + B_crit/B), and a
branch that consumes E examples takes E/B steps, so it makes (E/B)/S(B) units of progress.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlscale.control.critical import (
    Branch,
    Reading,
    bootstrap_interval,
    fit_critical_batch,
    largest_efficient_batch,
    pair_critical_batch,
)

BATCHES = (64.0, 128.0, 256.0, 512.0)
EXAMPLES = 2**16
S_MIN = 40.0  # steps to a unit of progress at an infinite batch


def eq_2_11_progress(batch: float, critical: float, examples: int = EXAMPLES) -> float:
    """Units of progress from `examples` at `batch`: steps taken / steps each unit costs."""
    steps_taken = examples / batch
    steps_per_unit = S_MIN * (1.0 + critical / batch)
    return steps_taken / steps_per_unit


def branches(critical: float, batches=BATCHES, noise: float = 0.0, seed: int = 0,
             read_as=None) -> list[Branch]:
    """Branches at `batches` with multiplicative noise; `read_as` relabels their batches."""
    rng = np.random.default_rng(seed)
    labels = read_as or batches
    return [Branch(label, EXAMPLES, round(EXAMPLES / b),
                   eq_2_11_progress(b, critical) * (1.0 + noise * rng.standard_normal()))
            for b, label in zip(batches, labels, strict=True)]


@pytest.mark.parametrize("critical", [300.0, 40.0, 2000.0])
def test_exact_progress_gives_back_its_critical_batch(critical):
    reading = fit_critical_batch(branches(critical))
    assert reading.critical_batch == pytest.approx(critical, rel=0.01)
    assert reading.bound == ""
    # c = examples / S_min: the progress an infinite batch would make per example, times E.
    assert reading.scale == pytest.approx(EXAMPLES / S_MIN, rel=0.01)
    assert reading.residual < 1e-12 * sum(b.progress**2 for b in branches(critical))


# Measured over seeds 0-199 with 5 % multiplicative noise on each branch's progress (B = 64-512):
#   B_crit   median ratio   median |error|   within 1.5x   within 2x
#     300        1.02            12 %            98.5 %        100 %
#      40        1.03            20 %            89.5 %         97 %
#    2000        0.99            28 %            66.5 %         89 %
# A B_crit inside the branches reads best; one at 4x the largest batch moves per-example progress
# by under 20 % across the branches, so 5 % noise on each is a large part of the signal.
@pytest.mark.parametrize(("critical", "median_error", "within_2x"), [
    (300.0, 0.2, 0.97),
    (40.0, 0.3, 0.9),
    (2000.0, 0.4, 0.8),
])
def test_noisy_progress_reads_critical_batch_within_measured_spread(critical, median_error, within_2x):
    ratios = np.array([fit_critical_batch(branches(critical, noise=0.05, seed=s)).critical_batch
                       for s in range(200)]) / critical
    assert np.all(np.isfinite(ratios))
    assert abs(np.median(ratios) - 1.0) < 0.1  # no bias beyond the noise
    assert np.median(np.abs(ratios - 1.0)) < median_error
    assert np.mean(np.abs(np.log(ratios)) <= math.log(2.0)) >= within_2x


def test_progress_read_at_the_wrong_batches_gives_the_wrong_critical_batch():
    # Made at 64-512 with B_crit 300, read as if at half those batches: every batch and B_crit
    # halve together in eq. 2.11, so the reading is 150, not 300.
    reading = fit_critical_batch(branches(300.0, read_as=(32.0, 64.0, 128.0, 256.0)))
    assert 300.0 / reading.critical_batch >= 1.5
    assert reading.critical_batch == pytest.approx(150.0, rel=0.01)


def test_each_progress_stays_with_its_batch():
    right = branches(300.0)
    swapped = [right[0], Branch(128.0, EXAMPLES, 512, right[2].progress),
               Branch(256.0, EXAMPLES, 256, right[1].progress), right[3]]
    reading = fit_critical_batch(swapped)
    assert not 300.0 / 1.5 < reading.critical_batch < 300.0 * 1.5
    # The order the branches are given in does not matter, only which batch made which progress.
    assert fit_critical_batch(right[::-1]).critical_batch == pytest.approx(300.0, rel=0.01)
    d64, d256 = eq_2_11_progress(64.0, 300.0), eq_2_11_progress(256.0, 300.0)
    assert pair_critical_batch(64.0, d64, 256.0, d256) == pytest.approx(300.0, rel=1e-9)
    assert pair_critical_batch(256.0, d256, 64.0, d64) == pytest.approx(300.0, rel=1e-9)
    assert pair_critical_batch(64.0, d256, 256.0, d64) == math.inf


@pytest.mark.parametrize("critical", [5.0, 40.0, 300.0, 2000.0, 20000.0])
def test_pair_matches_the_fit_and_the_per_step_form(critical):
    b1, b2 = 64.0, 256.0
    d1, d2 = eq_2_11_progress(b1, critical), eq_2_11_progress(b2, critical)
    pair = pair_critical_batch(b1, d1, b2, d2)
    assert pair == pytest.approx(critical, rel=1e-9)
    two = fit_critical_batch([Branch(b1, EXAMPLES, 1024, d1), Branch(b2, EXAMPLES, 256, d2)])
    assert two.critical_batch == pytest.approx(pair, rel=1e-4)
    # Eq. 2.11 in its per-step form (docs/batch-control.md, "Measuring the critical batch"; the derivation in
    # rlscale/control/critical.py): r = p(b2)/p(b1), m = b2/b1, B_crit = m·b1(r − 1)/(m − r).
    m = b2 / b1
    r = (d2 / (EXAMPLES / b2)) / (d1 / (EXAMPLES / b1))
    assert m * b1 * (r - 1.0) / (m - r) == pytest.approx(pair, rel=1e-9)


def test_pair_edges_in_both_directions():
    # Per-example progress unchanged by the batch (progress ∝ 1/B): B_crit ~ 0.
    assert pair_critical_batch(64.0, 1.0 / 64.0, 256.0, 1.0 / 256.0) == 0.0
    assert pair_critical_batch(64.0, 1.0, 256.0, 0.2) == 0.0  # fell faster than 1/B: still 0
    tiny = eq_2_11_progress(64.0, 1e-3), eq_2_11_progress(256.0, 1e-3)
    assert 0.0 < pair_critical_batch(64.0, tiny[0], 256.0, tiny[1]) < 0.01
    # Per-step progress unchanged by the batch (the same progress from fewer steps): B_crit ~ ∞.
    assert pair_critical_batch(64.0, 0.5, 256.0, 0.5) == math.inf
    assert pair_critical_batch(64.0, 0.4, 256.0, 0.5) == math.inf
    huge = eq_2_11_progress(64.0, 1e7), eq_2_11_progress(256.0, 1e7)
    assert 1e6 < pair_critical_batch(64.0, huge[0], 256.0, huge[1]) < math.inf
    # No progress, or no number: nothing to read.
    for d1, d2 in [(0.0, 0.5), (0.5, 0.0), (-0.1, -0.2), (math.nan, 0.5), (0.5, math.inf)]:
        assert math.isnan(pair_critical_batch(64.0, d1, 256.0, d2))
    with pytest.raises(ValueError, match="same batch"):
        pair_critical_batch(64.0, 1.0, 64.0, 0.5)
    with pytest.raises(ValueError, match="positive"):
        pair_critical_batch(0.0, 1.0, 64.0, 0.5)


def test_critical_batch_far_outside_the_branches_is_a_bound():
    below = fit_critical_batch(branches(2.0))
    assert below.bound == "below" and below.critical_batch <= 64.0 / 8
    assert below.describe().startswith("B_crit below 8 (the smallest branch / 8: the branches cannot resolve it; ")
    assert below.shown_batch == 64.0 / 8
    above = fit_critical_batch(branches(100_000.0))
    assert above.bound == "above" and above.critical_batch >= 512.0 * 8
    # Shown as the edge, not as the fit: past the edge the fit can be any number up to a float's limit.
    assert above.shown_batch == 512.0 * 8
    assert above.describe().startswith("B_crit above 4096 (8x the largest branch: the branches cannot resolve it; ")
    # The limits themselves, where no finite B_crit fits exactly, land at the same flags.
    assert fit_critical_batch([Branch(b, EXAMPLES, 1, 1.0 / b) for b in BATCHES]).bound == "below"
    assert fit_critical_batch([Branch(b, EXAMPLES, 1, 0.3) for b in BATCHES]).bound == "above"
    inside = fit_critical_batch(branches(300.0))
    assert inside.bound == "" and inside.shown_batch == inside.critical_batch


@pytest.mark.parametrize("progress", [
    (0.0, -0.1, -0.2, -0.3),  # no branch improved
    (-1.0, -1.0, 0.1, 0.1),  # the small batches lost more than the large ones gained: no c > 0
    (1.0, math.nan, 0.5, 0.2),  # a branch diverged
])
def test_no_positive_progress_is_undefined_not_a_number(progress):
    reading = fit_critical_batch([Branch(b, EXAMPLES, 1, p) for b, p in zip(BATCHES, progress, strict=True)])
    assert math.isnan(reading.critical_batch) and math.isnan(reading.scale)
    assert not reading.defined
    assert reading.bound == ""
    assert "undefined" in reading.describe()


def test_describe_is_one_readable_line():
    line = fit_critical_batch(branches(300.0)).describe()
    assert line == ("B_crit 300 (branches 64-512, progress per example 1.00/0.85/0.65/0.45, "
                    "efficient up to 128)")


def test_unequal_windows_within_a_percent_are_put_on_one_window():
    # The smallest batch ran 0.9 % past E_w (a window ends on a whole rollout): it made more progress.
    extra = (600, 0, 0, 0)
    uneven = [Branch(b, EXAMPLES + x, 1, eq_2_11_progress(b, 300.0, EXAMPLES + x))
              for b, x in zip(BATCHES, extra, strict=True)]
    assert fit_critical_batch(uneven).critical_batch == pytest.approx(300.0, rel=1e-5)
    # Taken at face value that extra progress reads as B_crit 293 (measured): the exact 300 above
    # shows the progress was put per example.
    raw = [Branch(b.batch, EXAMPLES, 1, b.progress) for b in uneven]
    assert abs(fit_critical_batch(raw).critical_batch / 300.0 - 1.0) > 0.015


def test_bad_branches_are_refused_with_one_line():
    with pytest.raises(ValueError, match="at least 2 branches"):
        fit_critical_batch(branches(300.0)[:1])
    with pytest.raises(ValueError, match="same examples"):
        fit_critical_batch([Branch(64.0, EXAMPLES, 1, 1.0), Branch(128.0, int(EXAMPLES * 1.02), 1, 0.8)])
    with pytest.raises(ValueError, match="2 different batches"):
        fit_critical_batch([Branch(64.0, EXAMPLES, 1, 1.0), Branch(64.0, EXAMPLES, 1, 0.8)])
    with pytest.raises(ValueError, match="batch"):
        Branch(0.0, EXAMPLES, 1, 1.0)
    with pytest.raises(ValueError, match="examples"):
        Branch(64.0, 0, 1, 1.0)
    with pytest.raises(ValueError, match="tolerance"):
        largest_efficient_batch(branches(300.0), tolerance=1.0)


def test_largest_efficient_batch_on_the_model():
    # Per-example progress relative to B = 64 with B_crit = 300, worked by hand:
    # the steps a unit costs grow as 1 + 300/B while the steps taken fall as 1/B, so per example
    # B = 64: 1; 128: 364/428 = 0.850; 256: 364/556 = 0.655; 512: 364/812 = 0.448.
    by_hand = [1.0, 0.850, 0.655, 0.448]
    made = [b.progress for b in branches(300.0)]
    assert [p / made[0] for p in made] == pytest.approx(by_hand, abs=1e-3)
    model = branches(300.0)
    assert largest_efficient_batch(model, tolerance=0.1) == 64.0
    assert largest_efficient_batch(model, tolerance=0.2) == 128.0
    assert largest_efficient_batch(model, tolerance=0.4) == 256.0
    assert largest_efficient_batch(model, tolerance=0.6) == 512.0
    assert fit_critical_batch(model).merrill_batch == 128.0  # the reading's default tolerance, 0.2


def test_largest_efficient_batch_compares_with_the_best_smaller_batch():
    # 128 did better per example than 64 (noise); 256 keeps 90 % of 64's but only 69 % of 128's.
    per_example = [1.0, 1.3, 0.9, 0.5]
    noisy = [Branch(b, EXAMPLES, 1, e * EXAMPLES) for b, e in zip(BATCHES, per_example, strict=True)]
    assert largest_efficient_batch(noisy, tolerance=0.2) == 128.0
    assert largest_efficient_batch(noisy, tolerance=0.35) == 256.0
    # A dip at a middle batch does not end the read: 256 kept 85 % of 64's, so it qualifies.
    dip = [Branch(b, EXAMPLES, 1, e * EXAMPLES) for b, e in zip(BATCHES, [1.0, 0.7, 0.85, 0.5], strict=True)]
    assert largest_efficient_batch(dip, tolerance=0.2) == 256.0
    nothing = [Branch(b, EXAMPLES, 1, p) for b, p in zip(BATCHES, (0.0, 0.5, 0.4, 0.3), strict=True)]
    assert math.isnan(largest_efficient_batch(nothing))


def segments(critical: float, n: int, seed: int, spread: float = 0.2, common: float = 0.3) -> np.ndarray:
    """Progress on n held-out slices: a slice's difficulty shared by all branches, plus noise."""
    rng = np.random.default_rng(seed)
    total = np.array([eq_2_11_progress(b, critical) for b in BATCHES])
    shared = rng.standard_normal((n, 1))
    own = rng.standard_normal((n, len(BATCHES)))
    return total / n * (1.0 + common * shared + spread * own)


def test_bootstrap_interval_covers_the_truth_and_narrows_with_more_slices():
    # Measured over seeds 0-49 (16 slices, 20 % noise per slice and branch, 200 resamples): the
    # 90 % interval held B_crit = 300 in 90 % of seeds; with 8 slices 82 %, with 32 84 %.
    # Its median hi/lo: 1.93 with 8 slices, 1.66 with 16, 1.44 with 32 (log width ∝ 1/sqrt(n)).
    examples = [EXAMPLES] * len(BATCHES)
    held, widths = 0, {8: [], 32: []}
    for seed in range(50):
        lo, hi = bootstrap_interval(segments(300.0, 16, seed), BATCHES, examples, n_boot=200, seed=seed)
        held += lo <= 300.0 <= hi
    assert held >= 40
    for seed in range(10):
        for n in widths:
            lo, hi = bootstrap_interval(segments(300.0, n, seed), BATCHES, examples, n_boot=200, seed=seed)
            widths[n].append(math.log(hi / lo))
    assert np.median(widths[32]) < 0.75 * np.median(widths[8])


def test_bootstrap_resamples_slices_whole():
    # Slices differ in difficulty by a factor ~2 that every branch shares, each branch's own noise
    # is 5 %: resampled row by row the shared part cancels in the ratios (hi/lo 1.12-1.21 measured
    # over seeds 0-4); resampling each branch's column on its own would leave it in (hi/lo 2.9 to
    # unbounded).
    total = np.array([eq_2_11_progress(b, 300.0) for b in BATCHES])
    for seed in range(5):
        rng = np.random.default_rng(seed)
        seg = total / 16 * np.exp(0.8 * rng.standard_normal((16, 1))) * (1 + 0.05 * rng.standard_normal((16, 4)))
        lo, hi = bootstrap_interval(seg, BATCHES, [EXAMPLES] * 4, n_boot=200, seed=seed)
        assert lo <= 300.0 <= hi and hi / lo < 1.4


def test_bootstrap_interval_undefined_and_bad_shapes():
    examples = [EXAMPLES] * len(BATCHES)
    lost = -np.abs(segments(300.0, 8, 0))
    assert all(math.isnan(x) for x in bootstrap_interval(lost, BATCHES, examples, n_boot=50))
    with pytest.raises(ValueError, match="one batch"):
        bootstrap_interval(segments(300.0, 8, 0), BATCHES[:3], examples[:3], n_boot=50)
    with pytest.raises(ValueError, match="n_segments"):
        bootstrap_interval(np.ones(4), BATCHES, examples, n_boot=50)


def test_bootstrap_keeps_columns_with_their_batches():
    # Columns given in descending batch order must be read with their own batches.
    examples = [EXAMPLES] * len(BATCHES)
    seg = segments(300.0, 16, 3)
    forward = bootstrap_interval(seg, BATCHES, examples, n_boot=100, seed=1)
    backward = bootstrap_interval(seg[:, ::-1], BATCHES[::-1], examples, n_boot=100, seed=1)
    assert backward == pytest.approx(forward, rel=1e-9)


def test_reading_is_frozen():
    reading = fit_critical_batch(branches(300.0))
    assert isinstance(reading, Reading)
    with pytest.raises(AttributeError):
        reading.critical_batch = 1.0  # type: ignore[misc]
