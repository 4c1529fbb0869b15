"""The Pareto fit (eq. 2.11) on data made from the model itself, where the truth is known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlscale.control.pareto_fit import ParetoFit, fit_pareto


def front(s_min: float, e_min: float, batches: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    b_crit = e_min / s_min
    steps = s_min * (1 + b_crit / batches)
    return steps, steps * batches


@pytest.mark.parametrize("s_min, e_min", [(1_000.0, 400_000.0), (20_000.0, 1e6), (50.0, 5e5)])
def test_exact_front_is_recovered(s_min, e_min):
    batches = np.array([16, 32, 64, 128, 256, 512, 1024, 2048], dtype=float)
    steps, examples = front(s_min, e_min, batches)
    # The points satisfy eq. 2.11 as written in the paper.
    np.testing.assert_allclose((steps / s_min - 1) * (examples / e_min - 1), 1.0)
    fit = fit_pareto(steps, examples)
    assert fit.s_min == pytest.approx(s_min, rel=1e-6)
    assert fit.e_min == pytest.approx(e_min, rel=1e-6)
    assert fit.b_crit == pytest.approx(e_min / s_min, rel=1e-6)


def test_noisy_front_within_two_percent():
    rng = np.random.default_rng(0)
    s_min, e_min = 2_000.0, 800_000.0  # B_crit = 400
    batches = np.geomspace(25, 6_400, 9)
    errors = []
    for _ in range(50):
        steps, _ = front(s_min, e_min, batches)
        steps = steps * np.exp(rng.normal(0.0, 0.005, size=batches.size))  # 0.5% noise on S
        fit = fit_pareto(steps, steps * batches)
        errors.append((fit.s_min / s_min - 1, fit.e_min / e_min - 1, fit.b_crit / 400 - 1))
        # The reported standard error is of the size of the actual scatter.
        assert 0 < fit.b_crit_se < 0.1 * fit.b_crit
    errors = np.abs(np.array(errors))
    # S_min, E_min and B_crit within 2% in every one of the 50 draws.
    assert errors.max() < 0.02, errors.max(axis=0)
    assert (np.median(errors, axis=0) < 0.005).all()


def test_standard_error_matches_the_scatter_over_repeats():
    rng = np.random.default_rng(1)
    batches = np.geomspace(20, 2_000, 6)
    fits = []
    for _ in range(400):
        steps, _ = front(1_000.0, 200_000.0, batches)
        steps = steps * np.exp(rng.normal(0.0, 0.05, size=batches.size))
        fits.append(fit_pareto(steps, steps * batches))
    b = np.array([f.b_crit for f in fits])
    se = np.median([f.b_crit_se for f in fits])
    assert 0.6 < se / b.std() < 1.6


def test_too_few_points_and_bad_values():
    with pytest.raises(ValueError, match="at least 3"):
        fit_pareto(np.array([10.0, 5.0]), np.array([100.0, 200.0]))
    with pytest.raises(ValueError, match="positive"):
        fit_pareto(np.array([10.0, 5.0, 0.0]), np.array([100.0, 200.0, 300.0]))
    # Three points leave one degree of freedom: a standard error exists.
    steps, examples = front(100.0, 10_000.0, np.array([10.0, 100.0, 1000.0]))
    assert np.isfinite(fit_pareto(steps * [1.01, 0.99, 1.0], examples * [1.01, 0.99, 1.0]).b_crit_se)


def test_power_law_recovers_how_a_reading_moves_with_the_batch_and_the_rate():
    """Readings 5 * batch^0.7 * lr^-1.2 on four cells (two off one rate) give back 0.7 and -1.2 exactly;
    one rate only, or every cell at one temperature (lr / batch), cannot separate the two: None."""
    from rlscale.reports.pareto import power_law

    cells = [(b, lr, 5 * b**0.7 * lr**-1.2) for b, lr in ((160, 1e-2), (640, 1e-2), (640, 4e-2), (1280, 2e-2))]
    a, b, rms = power_law(cells)
    assert (a, b) == (pytest.approx(0.7), pytest.approx(-1.2)) and rms == pytest.approx(0, abs=1e-12)
    assert power_law([(160, 1e-2, 1.0), (640, 1e-2, 2.0), (1280, 1e-2, 3.0)]) is None
    assert power_law([(160, 1e-2, 1.0), (320, 2e-2, 2.0), (640, 4e-2, 3.0)]) is None



def test_the_interval_is_the_standard_error_of_log_bcrit_and_undefined_where_too_wide_for_floats():
    fit = ParetoFit(s_min=100.0, e_min=50_000.0, b_crit=500.0, b_crit_se=100.0, n_points=4, rms_log_residual=0.1)
    low, high = fit.interval()
    assert low == pytest.approx(500 * math.exp(-1.645 * 0.2)) and high == pytest.approx(500 * math.exp(1.645 * 0.2))
    # A fit that pins nothing down (s.e. of log B_crit ~600: e**±1000 is past the floats) reads no interval
    # instead of stopping the run with an OverflowError, as a measurement on CartPole did.
    wide = ParetoFit(s_min=100.0, e_min=50_000.0, b_crit=500.0, b_crit_se=3e5, n_points=4, rms_log_residual=1.0)
    assert all(math.isnan(x) for x in wide.interval())
    assert all(math.isnan(x) for x in ParetoFit(1.0, 500.0, 500.0, math.nan, 3, 0.0).interval())
