"""The noise estimator against problems whose noise scale is known in closed form.

Least squares with Gaussian inputs: loss(w; x, y) = 0.5 (x.w - y)^2 with
x ~ N(0, I_d), y = x.w* + eps, eps ~ N(0, s^2). With r = w - w*, the
per-sample gradient is g = x (x.r - eps), whose mean is G = r and whose
covariance is Sigma = |r|^2 I + r r^T + s^2 I, so

    |G|^2 = |r|^2,   tr(Sigma) = (d + 1)|r|^2 + d s^2.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rlscale.control.noise import (
    NoiseMeter,
    NoiseSample,
    NoiseScaleEMA,
    equilibrium_grad_sq,
    estimate,
    recovered_samples,
    slow_gradient_sq,
)
from tests.floats import largest, sum_tolerance


def true_noise_scale(r: np.ndarray, s: float) -> tuple[float, float]:
    d = r.size
    grad_sq = float(r @ r)
    return grad_sq, (d + 1) * grad_sq + d * s**2


def draws(rng: np.random.Generator, r: np.ndarray, s: float, sizes: list[int], n: int) -> list[NoiseSample]:
    """n independent batches: per-group mean gradients, their weighted mean, eq. A.2."""
    group_sq, big = [], np.zeros((n, r.size))
    for b in sizes:
        x = rng.standard_normal((n, b, r.size))
        eps = s * rng.standard_normal((n, b))
        g = (x * (x @ r - eps)[..., None]).mean(axis=1)  # [n, d]
        group_sq.append((g * g).sum(axis=1))
        big += g * (b / sum(sizes))
    big_sq = (big * big).sum(axis=1)
    return [estimate([float(q[i]) for q in group_sq], sizes, float(big_sq[i])) for i in range(n)]


def problem(d: int, s: float, seed: int = 0) -> np.ndarray:
    r = np.random.default_rng(seed).standard_normal(d)
    return r / np.linalg.norm(r)  # |G|^2 = 1


def test_estimates_are_unbiased_over_many_draws():
    rng = np.random.default_rng(1)
    r, s = problem(d=20, s=3.0), 3.0
    grad_sq, trace = true_noise_scale(r, s)
    samples = draws(rng, r, s, [16, 16, 16, 16], 20_000)
    g = np.array([x.grad_sq for x in samples])
    t = np.array([x.trace_sigma for x in samples])
    assert abs(g.mean() - grad_sq) < 4 * g.std() / math.sqrt(g.size)
    assert abs(t.mean() - trace) < 4 * t.std() / math.sqrt(t.size)
    # A single |G|^2 estimate is often negative at this batch (B=64 vs B_simple ~ 200).
    assert np.mean(g < 0) > 0.05


@pytest.mark.parametrize("clip", [0.0, 10.0])
@pytest.mark.parametrize("sizes", [[20, 20], [10, 10, 10, 10], [5] * 8, [7, 13, 9, 11]])
def test_b_simple_within_5_percent_and_independent_of_k(sizes, clip):
    """B within ~10x of the noise scale: the EMA ratio lands within 5% of the truth, clipped or not."""
    rng = np.random.default_rng(sum(sizes) + len(sizes))
    r, s = problem(d=10, s=3.0), 3.0
    grad_sq, trace = true_noise_scale(r, s)
    truth = trace / grad_sq  # 101; batch = 40
    ema = NoiseScaleEMA(horizon=40 * 40_000)
    for x in draws(rng, r, s, sizes, 40_000):
        ema.update(x, clip=clip)
    assert ema.b_simple == pytest.approx(truth, rel=0.05)
    assert ema.grad_sq == pytest.approx(grad_sq, rel=0.05)
    assert ema.trace_sigma == pytest.approx(trace, rel=0.05)
    assert ema.clipped <= 5  # of 80,000 Gaussian estimates: the bound is for outliers only


def test_a_clipped_average_survives_one_outlying_update_that_swings_the_plain_one():
    """One |G|^2 estimate 10^5x the level (as Breakout runs showed) moves B_simple ~100x unclipped, < 10 % clipped."""
    rng = np.random.default_rng(7)
    r, s = problem(d=10, s=3.0), 3.0
    grad_sq, trace = true_noise_scale(r, s)
    samples = draws(rng, r, s, [10, 10, 10, 10], 3_000)
    outlier = NoiseSample(1e5 * grad_sq, trace, 10, 40)
    plain, clipped = NoiseScaleEMA(horizon=20_000), NoiseScaleEMA(horizon=20_000)
    for i, x in enumerate(samples):
        for ema, clip in ((plain, 0.0), (clipped, 10.0)):
            ema.update(outlier if i == 2_000 else x, clip=clip)
        if i == 2_000:
            before_plain, before_clipped = plain.b_simple, clipped.b_simple
    assert clipped.clipped >= 1
    # Right after it: the plain average reads ~1/20 of the truth or less, the clipped one within 10 %.
    truth = trace / grad_sq
    assert before_plain is None or before_plain < truth / 20
    assert before_clipped == pytest.approx(truth, rel=0.1)


def test_equal_groups_reduce_to_paper_formula():
    """With equal groups B_small = B/k and eq. A.2 holds literally: worked by hand.

    Groups of 10 with |g_j|^2 = 5, 7, 6, 6 and |G_big|^2 = 2: B_small = 10, B_big = 40,
    |G_small|^2 = 6, so |G|^2 = (40*2 - 10*6) / (40 - 10) = 2/3 and
    tr(Sigma) = (6 - 2) / (1/10 - 1/40) = 4 / (3/40) = 160/3.
    """
    s = estimate([5.0, 7.0, 6.0, 6.0], [10, 10, 10, 10], 2.0)
    assert s.b_small == 10.0 and s.b_big == 40.0
    assert s.grad_sq == pytest.approx(2 / 3, rel=1e-12)
    assert s.trace_sigma == pytest.approx(160 / 3, rel=1e-12)


@pytest.mark.parametrize("sizes", [[10, 10, 10, 10], [7, 13, 9, 11], [1, 100]])
def test_expected_norms_give_back_the_true_gradient_and_trace(sizes):
    """Fed the exact expectations E|g_j|^2 = |G|^2 + tr(Sigma)/b_j and E|G_big|^2 = |G|^2 + tr(Sigma)/B
    of a problem with known |G|^2 and tr(Sigma), the estimator returns those two numbers."""
    grad_sq, trace = 0.37, 251.0
    group_sq = [grad_sq + trace / b for b in sizes]
    s = estimate(group_sq, sizes, grad_sq + trace / sum(sizes))
    assert s.b_small == pytest.approx(len(sizes) / sum(1 / b for b in sizes), rel=1e-12)
    assert s.grad_sq == pytest.approx(grad_sq, rel=1e-9)
    assert s.trace_sigma == pytest.approx(trace, rel=1e-12)


def test_negative_grad_sq_average_is_missing_not_huge():
    ema = NoiseScaleEMA(horizon=1000)
    assert ema.b_simple is None and ema.grad_sq is None
    ema.update(NoiseSample(grad_sq=-0.5, trace_sigma=10.0, b_small=10, b_big=40))
    assert ema.grad_sq == pytest.approx(-0.5)
    assert ema.b_simple is None
    for _ in range(5):
        ema.update(NoiseSample(grad_sq=1.0, trace_sigma=10.0, b_small=10, b_big=40))
    assert ema.b_simple is not None and 0 < ema.b_simple < 100
    zero = NoiseScaleEMA(horizon=1000)
    zero.update(NoiseSample(grad_sq=0.0, trace_sigma=10.0, b_small=10, b_big=40))
    assert zero.b_simple is None  # exactly zero: undefined as well


def test_a_missing_noise_scale_says_whether_it_is_none_yet_or_drowned_by_noise():
    """The two causes a user reads apart on the progress line: no sample taken, and a |G|^2 average <= 0."""
    ema = NoiseScaleEMA(horizon=1000)
    assert ema.missing == "none yet"
    ema.update(NoiseSample(grad_sq=-0.5, trace_sigma=10.0, b_small=10, b_big=40))
    assert ema.missing == "|G|^2 average <= 0: the noise drowns the gradient"
    for _ in range(5):
        ema.update(NoiseSample(grad_sq=1.0, trace_sigma=10.0, b_small=10, b_big=40))
    assert ema.b_simple is not None and ema.missing == ""
    traceless = NoiseScaleEMA(horizon=1000)
    traceless.update(NoiseSample(grad_sq=1.0, trace_sigma=-5.0, b_small=10, b_big=40))
    assert traceless.b_simple is None and traceless.missing == "tr(Sigma) average <= 0"
    meter = NoiseMeter(horizon=1000, parts=("total", "hessian"))
    assert meter.missing("total") == "none yet" and meter.missing("policy") == "not measured"
    meter.observe(40)
    meter.record_sample("hessian", NoiseSample(grad_sq=-1.0, trace_sigma=5.0, b_small=10, b_big=40))
    assert meter.missing("hessian") == "G^T M G or tr(M Sigma) average <= 0"  # curvature, not only noise


def test_non_finite_sample_is_ignored():
    ema = NoiseScaleEMA(horizon=1000)
    ema.update(NoiseSample(1.0, 10.0, 10, 40))
    before = ema.state_dict()
    ema.update(NoiseSample(float("nan"), 10.0, 10, 40))
    ema.update(NoiseSample(1.0, float("inf"), 10, 40))
    assert ema.state_dict() == before


def test_bias_correction_gives_the_first_value_exactly():
    ema = NoiseScaleEMA(horizon=10_000)
    ema.update(NoiseSample(2.0, 300.0, 10, 40))
    assert ema.grad_sq == pytest.approx(2.0) and ema.trace_sigma == pytest.approx(300.0)
    assert ema.b_simple == pytest.approx(150.0)


def test_horizon_is_in_observations_whatever_the_batch():
    """Two runs that see the same observations in batches of 40 or 160 age the past alike."""
    small, big = NoiseScaleEMA(horizon=5_000), NoiseScaleEMA(horizon=5_000)
    for _ in range(400):  # 16,000 observations of value 1, then 4,000 of value 3
        small.update(NoiseSample(1.0, 100.0, 10, 40))
    for _ in range(100):
        small.update(NoiseSample(3.0, 100.0, 10, 40))
    for _ in range(100):
        big.update(NoiseSample(1.0, 100.0, 40, 160))
    for _ in range(25):
        big.update(NoiseSample(3.0, 100.0, 40, 160))
    # Weights: 1 - exp(-4000/5000) on the last 4,000 observations, the rest on the
    # 16,000 before; the bias correction divides by the total, 1 - exp(-20000/5000).
    recent = 1 - math.exp(-4000 / 5000)
    older = math.exp(-4000 / 5000) - math.exp(-20000 / 5000)
    expected = (3.0 * recent + 1.0 * older) / (recent + older)
    assert small.grad_sq == pytest.approx(expected, rel=1e-3)
    assert big.grad_sq == pytest.approx(expected, rel=1e-3)


def test_observations_override_for_subsampled_updates():
    """Measuring every 4th update of 40 observations ages the EMA like every update would."""
    every, sub = NoiseScaleEMA(horizon=2_000), NoiseScaleEMA(horizon=2_000)
    for i in range(200):
        every.update(NoiseSample(1.0 + (i >= 100), 50.0, 10, 40))
        if i % 4 == 3:
            sub.update(NoiseSample(1.0 + (i >= 100), 50.0, 10, 40), observations=160)
    assert sub.grad_sq == pytest.approx(every.grad_sq, rel=0.02)


def test_state_round_trip():
    ema = NoiseScaleEMA(horizon=1234)
    ema.update(NoiseSample(1.5, 99.0, 10, 40))
    clone = NoiseScaleEMA.from_state_dict(ema.state_dict())
    assert clone == ema and clone.b_simple == ema.b_simple
    older = {k: v for k, v in ema.state_dict().items() if k != "observations"}  # saved before the count existed
    assert NoiseScaleEMA.from_state_dict(older).observations == 0.0


def test_estimate_rejects_bad_input():
    with pytest.raises(ValueError):
        estimate([1.0], [10], 1.0)
    with pytest.raises(ValueError):
        estimate([1.0, 1.0], [10, 0], 1.0)


def test_meter_weighs_each_part_by_the_fresh_observations_since_its_last_sample():
    """Total measured every step, the parts every 4th: each EMA ages by the observations it spans."""
    meter = NoiseMeter(horizon=2_000)
    total, parts = NoiseScaleEMA(horizon=2_000), NoiseScaleEMA(horizon=2_000)
    norms, sizes, big = [5.0, 7.0, 6.0, 6.0], [10, 10, 10, 10], 2.0
    sample = estimate(norms, sizes, big)
    for i in range(40):
        meter.observe(40)
        raw = meter.record("total", norms, sizes, big)
        total.update(sample, 40)
        if i % 4 == 3:
            meter.record("policy", norms, sizes, big)
            parts.update(sample, 160)
    assert raw == {"noise_raw/grad_sq_total": sample.grad_sq, "noise_raw/trace_sigma_total": sample.trace_sigma}
    assert meter.emas["total"] == total and meter.emas["policy"] == parts
    assert meter.emas["value"].samples == 0 and meter.b_simple("value") is None
    # What the cool-down counts: the observations each average took, those its samples stood for.
    assert meter.taken("total") == meter.taken("policy") == 40 * 40 and meter.taken("value") == 0.0
    assert meter.taken("hessian") == 0.0 and NoiseMeter(horizon=2_000, parts=("total",)).taken("precond") == 0.0
    metrics = meter.metrics()
    assert metrics["noise/b_simple_policy"] == parts.b_simple and "noise/b_simple" not in metrics  # one tag each
    assert "noise/b_simple_value" not in metrics


def test_meter_ignores_a_sample_of_reused_data_and_round_trips():
    meter = NoiseMeter(horizon=1_000, parts=("total",))
    meter.record("total", [5.0, 7.0], [10, 10], 2.0)  # no fresh observations yet: nothing learned
    assert meter.emas["total"].samples == 0
    meter.observe(20)
    meter.record("total", [5.0, 7.0], [10, 10], 2.0)
    clone = NoiseMeter(horizon=1_000, parts=("total",))
    clone.load_state_dict(meter.state_dict())
    assert clone.emas == meter.emas and clone.pending == meter.pending == {"total": 0.0}


@pytest.mark.parametrize("lr, batch", [(0.004, 8), (0.002, 32)])
def test_equilibrium_grad_sq_is_what_preconditioned_sgd_keeps_on_a_quadratic(lr, batch):
    """Appendix C's toy model, simulated: preconditioned SGD settles where E[G^T P G] = lr tr(PHP Sigma) / 2B."""
    rng = np.random.default_rng(0)
    d, chains = 6, 400
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    hessian = q @ np.diag([0.5, 1, 2, 3, 5, 8]) @ q.T  # anisotropic, not diagonal
    a = rng.standard_normal((d, d))
    sigma = a @ a.T + np.eye(d)  # per-observation covariance, not commuting with H
    precond = np.diag(rng.uniform(0.3, 1.5, d))
    noise = np.linalg.cholesky(sigma / batch)
    theta = np.zeros((chains, d))
    samples = []
    for step in range(6000):
        g = theta @ hessian + rng.standard_normal((chains, d)) @ noise.T  # the batch gradient
        theta -= lr * g @ precond
        if step >= 2000:  # past the slowest mode's relaxation: 1 / (lr * smallest eigenvalue of P^½HP^½) <= 1,000 steps
            full = theta @ hessian
            samples.append(np.einsum("ci,ij,cj->c", full, precond, full).mean())
    predicted = equilibrium_grad_sq(lr, batch, float(np.trace(precond @ hessian @ precond @ sigma)))
    assert float(np.mean(samples)) == pytest.approx(predicted, rel=0.05)


def test_equilibrium_grad_sq_rejects_a_rate_or_batch_that_is_not_positive():
    with pytest.raises(ValueError):
        equilibrium_grad_sq(0.0, 32, 1.0)
    with pytest.raises(ValueError):
        equilibrium_grad_sq(0.01, 0, 1.0)


def test_the_samples_behind_logged_averages_are_recovered_exactly():
    """benchmarks/noise_samples.py reads a run's batches from its logged bias-corrected averages."""
    rng = np.random.default_rng(0)
    ema = NoiseScaleEMA(horizon=20_000)
    steps, grad_avgs, trace_avgs, fed = [], [], [], []
    step = 0.0
    for i in range(200):
        sample = NoiseSample(float(rng.standard_normal()), float(rng.exponential(50.0)), 8.0, 640.0)
        batch = float(rng.choice([160, 640, 1_280]))  # batch sizes change, as under a controller
        step += batch
        settling = 50 <= i < 55  # batches that neither add nor age (--noise-settle): the average logged as it was
        if not settling:
            ema.update(sample, batch)
        steps.append(step)
        grad_avgs.append(ema.grad_sq)
        trace_avgs.append(ema.trace_sigma)
        fed.append((math.nan, math.nan) if settling else (sample.grad_sq, sample.trace_sigma))
    # Each sample is a difference of two float64 averages divided by 1 - d, at most 1/(1 - exp(-160/20,000))
    # ~ 125x: the rounding of a two-term sum at the averages' scale, amplified by that.
    amplification = 1.0 / (1.0 - math.exp(-160 / 20_000))
    for averages, truth in ((grad_avgs, [g for g, _ in fed]), (trace_avgs, [t for _, t in fed])):
        np.testing.assert_allclose(recovered_samples(steps, averages, 20_000), truth,
                                   **sum_tolerance(2, largest(averages) * amplification, torch.float64))


@pytest.mark.parametrize("window", [2, 16])
def test_the_slow_gradient_estimate_is_unbiased_where_batches_are_independent(window):
    """The mean of W independent batch gradients' squared norm, less sum tr(Sigma_t)/B_t / W^2, averages to
    |mean G|^2: least squares with |G|^2 = 1 and tr(Sigma) = 41, batches of 40 and 160 (at W = 2 the
    noise term is 0.32, so the test fails without it)."""
    rng = np.random.default_rng(window)
    r, s, d = problem(8, 2.0), 2.0, 8
    trace = true_noise_scale(r, s)[1]
    batches = [40, 160] * (window // 2)
    estimates = []
    for _ in range(4000):
        grads = []
        for b in batches:  # each batch's gradient: the mean of its b per-sample gradients
            x = rng.standard_normal((b, d))
            eps = s * rng.standard_normal(b)
            grads.append((x * (x @ r - eps)[:, None]).mean(axis=0))
        mean = np.mean(grads, axis=0)
        estimates.append(slow_gradient_sq(float(mean @ mean), [trace / b for b in batches]))
    assert np.mean(estimates) == pytest.approx(1.0, rel=0.05)
    with pytest.raises(ValueError):
        slow_gradient_sq(1.0, [])
