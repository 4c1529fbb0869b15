"""The cost model T(B) = a + b*B and the wall-time-optimal batch (docs/batch-control.md) against known answers."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rlscale.config import ControlConfig, build_config
from rlscale.control.cluster_clock import cluster_batch
from rlscale.control.controller import (
    AT_FLOOR,
    KIND_NOTHING_LEARNED,
    NOTHING_LEARNED,
    ONE_NODE_HELD,
    READING_BAND,
    TIMING,
    BatchController,
    Decision,
)
from rlscale.control.cost import (
    CostModel,
    Fit,
    least_time_per_progress,
    optimal_batch,
    predicted_speedup,
    time_per_progress,
)
from rlscale.errors import UserError
from rlscale.training.trainer import learning_hold


@pytest.mark.parametrize("sizes", [(80, 320), (80, 160, 320), (40, 640)])
def test_cost_model_recovers_a_and_b_from_noisy_timings(sizes):
    """a = 52 ms, b = 0.47 ms per observation; 10 % multiplicative noise and a few 5x stalls."""
    rng = np.random.default_rng(len(sizes))
    model = CostModel()
    for _ in range(64):
        for batch in sizes:
            seconds = (0.052 + 0.00047 * batch) * rng.lognormal(0.0, 0.1)
            if rng.random() < 0.05:
                seconds *= 5  # a stall: the median ignores it
            model.add(batch, seconds)
    fit = model.fit
    assert fit.overhead == pytest.approx(0.052, rel=0.10)
    assert fit.per_observation == pytest.approx(0.00047, rel=0.10)


def test_one_batch_size_does_not_identify_the_model():
    model = CostModel()
    for _ in range(50):
        model.add(80, 0.09)
    assert model.fit is None
    for _ in range(4):  # fewer timings than min_samples at the second size
        model.add(160, 0.13)
    assert model.fit is None
    model.add(160, 0.13)
    assert model.fit is not None


def test_the_fit_rests_on_the_range_a_run_visited_not_on_its_last_resizes():
    """Runs that probed 80 and 640, then settled near 300 with small resizes: the line keeps the far
    sizes, so ~10 % noise on the nearby ones does not swing r = a/b (it did with four sizes kept)."""
    a, b = 0.010, 0.0001  # r = 100

    def swing(model: CostModel, seed: int) -> tuple[float, float]:
        """max/min of the fitted r over the settled part of one run, and its last value."""
        rng = np.random.default_rng(seed)
        rates = []
        for batch in (80, 640, 260, 290, 320, 350, 290, 260, 320, 350, 290, 320):
            for _ in range(10):
                model.add(batch, (a + b * batch) * rng.lognormal(0.0, 0.1))
            if batch not in (80, 640):
                fit = model.fit
                rates.append(fit.exchange_rate if fit and not fit.unresolved else math.nan)
        if not all(r > 0 for r in rates):  # unidentified or unresolved on the way
            return math.inf, math.nan
        return max(rates) / min(rates), rates[-1]

    kept, last = zip(*(swing(CostModel(), seed) for seed in range(10)), strict=True)
    assert max(kept) < 1.3, kept
    assert all(50 < r < 200 for r in last), last  # and near the machine's r = 100
    narrow = [swing(CostModel(sizes_kept=4), seed)[0] for seed in range(10)]
    assert np.median(narrow) > 2 * np.median(kept), narrow


def test_the_model_follows_a_machine_that_changes():
    """Only the most recently seen sizes are fitted: a cluster that gained nodes replaces old timings."""
    model = CostModel(sizes_kept=2)
    for batch in (80, 160):
        for _ in range(10):
            model.add(batch, 0.05 + 0.001 * batch)
    for batch in (320, 640):  # faster per observation now
        for _ in range(10):
            model.add(batch, 0.05 + 0.0001 * batch)
    assert model.fit.per_observation == pytest.approx(0.0001, rel=1e-6)


# A MinAtar Breakout run's machine: T(B) = 10 ms + 0.044 ms x B, the line through the quiet sizes of two runs whose
# first size was timed under load (research/notebook/results.md, 2026-12-07).
A_BREAKOUT, B_BREAKOUT = 0.010, 0.000044


def test_a_size_timed_under_passing_load_is_left_out_of_the_fit():
    """2,560 timed while other programs ran (2.2x slow), then 1,280 and 640 on a quiet machine: the line through
    all three has no intercept; the one through the quiet sizes is the machine's."""
    def timed(outlier_factor: float) -> CostModel:
        model = CostModel(outlier_factor=outlier_factor)
        for batch, n, load in ((2560, 10, 2.2), (1280, 7, 1.0), (640, 15, 1.0)):
            for _ in range(n):
                model.add(batch, (A_BREAKOUT + B_BREAKOUT * batch) * load)
        return model

    fit = timed(1.5).fit
    assert fit.left_out == 2560 and fit.unresolved == ""
    assert fit.overhead == pytest.approx(A_BREAKOUT) and fit.per_observation == pytest.approx(B_BREAKOUT)
    every_size = timed(math.inf).fit
    assert every_size.left_out == 0 and every_size.unresolved == "no overhead"
    # The size the run is at now is never left out: its timings are the machine's as it is.
    at_2560 = CostModel(outlier_factor=1.5)
    for batch, n, load in ((1280, 7, 1.0), (640, 15, 1.0), (2560, 10, 2.2)):
        for _ in range(n):
            at_2560.add(batch, (A_BREAKOUT + B_BREAKOUT * batch) * load)
    assert at_2560.fit.left_out == 0 and at_2560.fit.unresolved == "no overhead"


def test_only_the_largest_size_and_only_above_the_line_is_left_out():
    """Load on the smallest size raises the line's intercept, which grows the batch: that size is fitted (runs from 80
    whose 40-observation probe sat above the line through 80 and 160 were slower when it was left out)."""
    def fitted(sizes: tuple[tuple[int, float], ...]) -> Fit:
        model = CostModel(outlier_factor=1.5)
        for batch, load in sizes:
            for _ in range(10):
                model.add(batch, (A_BREAKOUT + B_BREAKOUT * batch) * load)
        return model.fit

    assert fitted(((40, 2.2), (80, 1.0), (160, 1.0), (320, 1.0))).left_out == 0  # the smallest, above the line
    assert fitted(((1280, 0.5), (640, 1.0), (320, 1.0), (160, 1.0))).left_out == 0  # the largest, below it
    assert fitted(((1280, 2.2), (640, 1.0), (320, 1.0), (160, 1.0))).left_out == 1280
    assert fitted(((1280, 1.4), (640, 1.0), (320, 1.0), (160, 1.0))).left_out == 0  # within the factor


def test_a_left_out_size_is_timed_afresh_on_return_and_kept_if_still_off_the_line():
    def machine(batch: float) -> float:
        return A_BREAKOUT + B_BREAKOUT * batch

    model = CostModel(outlier_factor=1.5)
    for batch, n, load in ((2560, 10, 2.2), (1280, 7, 1.0), (640, 15, 1.0)):
        for _ in range(n):
            model.add(batch, machine(batch) * load)
    assert model.fit.left_out == 2560
    model.add(2560, machine(2560))  # back at 2,560, the load gone: the old timings go
    assert len(model.timings[2560]) == 1 and model.retimed == {2560}
    for _ in range(4):
        model.add(2560, machine(2560))
    assert model.fit.left_out == 0 and model.fit.overhead == pytest.approx(A_BREAKOUT)
    # Re-timed and still off the line (the machine is like that): not left out again, once it is left behind too.
    slow = CostModel(outlier_factor=1.5)
    for batch, n, load in ((2560, 10, 2.2), (1280, 7, 1.0), (640, 15, 1.0), (2560, 5, 2.2), (640, 5, 1.0)):
        for _ in range(n):
            slow.add(batch, machine(batch) * load)
    assert slow.retimed == {2560} and slow.fit.left_out == 0 and slow.fit.unresolved == "no overhead"
    resumed = CostModel(outlier_factor=1.5)
    resumed.load_state_dict(slow.state_dict())
    assert resumed.retimed == {2560} and resumed.fit == slow.fit
    saved_before = slow.state_dict()
    del saved_before["retimed"]  # a checkpoint from before the set existed
    resumed.load_state_dict(saved_before)
    assert resumed.retimed == set() and resumed.fit.left_out == 2560
    # A retimed size that drops out of the sizes kept is a new size when it is timed again.
    narrow = CostModel(sizes_kept=3, outlier_factor=1.5)
    narrow.load_state_dict(slow.state_dict())
    for batch in (320, 160):
        for _ in range(5):
            narrow.add(batch, machine(batch))
    assert 2560 not in narrow.timings and narrow.retimed == set()


def test_the_latest_resolved_fit_outlives_an_unresolved_refit_and_a_checkpoint():
    """resolved_fit: the fit where it resolves, else the latest that did, kept through a JSON checkpoint (a resumed
    run's cluster clock would otherwise go unpriced until a refit resolves); None before any fit resolves."""
    model = CostModel()
    assert model.resolved_fit is None
    for batch in (80, 160):
        for _ in range(5):
            model.add(batch, 0.05 + 0.001 * batch)
    resolved = model.fit
    assert model.resolved_fit == resolved and not resolved.unresolved
    for _ in range(5):
        model.add(1280, 2.0)  # far above the line: the refit's intercept falls below zero
    assert model.fit.unresolved == "no overhead" and model.resolved_fit == resolved
    resumed = CostModel()
    resumed.load_state_dict(json.loads(json.dumps(model.state_dict())))
    assert resumed.fit.unresolved == "no overhead" and resumed.resolved_fit == resolved
    saved_before = model.state_dict()
    del saved_before["last_resolved"]  # a checkpoint from before it was kept
    resumed.load_state_dict(saved_before)
    assert resumed.resolved_fit is None
    for _ in range(20):  # timings that resolve again replace it
        model.add(1280, 0.05 + 0.001 * 1280)
    assert model.resolved_fit == model.fit and model.fit.overhead != resolved.overhead


def test_the_config_sets_the_cost_models_outlier_factor_and_refuses_one_at_or_below_1():
    c = BatchController(build_config("minatar-breakout", None, {"batch": "auto", "cost_outlier_factor": 2.0}).control,
                        observations_per_env=5, vector_size=4)
    assert c.cost.outlier_factor == 2.0
    assert BatchController(ControlConfig(), observations_per_env=5, vector_size=4).cost.outlier_factor == 1.5
    with pytest.raises(UserError, match="cost_outlier_factor must be > 1"):
        build_config("minatar-breakout", None, {"batch": "auto", "cost_outlier_factor": 1.0})


def test_auto_leaving_out_a_size_timed_under_load_does_not_probe_down_one_factor_a_cooldown():
    """auto from 512 envs (2,560 observations) whose first size ran 2.2x slow: without leaving that size out, its
    line had no intercept after every probe and it fell one factor per cool-down, to 8 envs here."""
    def lowest_envs(outlier_factor: float | None = None) -> int:
        c = auto(min_envs=4, max_envs=512, cooldown=5000, **({} if outlier_factor is None else
                                                             {"cost_outlier_factor": outlier_factor}))
        n_envs, lowest, settled = 512, 512, False
        for _ in range(600):
            batch = n_envs * c.observations_per_env
            if settled:  # the trainer leaves out the first update on a resized pool
                c.cost.add(batch, (A_BREAKOUT + B_BREAKOUT * batch) * (2.2 if n_envs == 512 else 1.0))
            decision = c.step(n_envs, 2000.0, batch, 7e-4)
            settled = decision.n_envs == n_envs
            n_envs = decision.n_envs
            lowest = min(lowest, n_envs)
        return lowest

    # B* = sqrt(227 x 2,000) = 674 observations, 135 envs: it probes 128 (640 observations) and stays.
    assert lowest_envs() == 128  # the default, 1.5
    assert lowest_envs(math.inf) <= 8  # fitting every size


def test_optimal_batch_and_speedup_by_hand():
    """The issue's worked example: a = 52 ms, b = 0.47 ms, r ~ 110; Bn = 2,700 at a fixed 80."""
    fit = Fit(0.052, 0.00047)
    assert fit.exchange_rate == pytest.approx(110.6, rel=1e-3)
    b_star = optimal_batch(fit, 2700)
    assert b_star == pytest.approx(math.sqrt(0.052 / 0.00047 * 2700))  # 546.6
    # tau(80) = (0.052 + 0.0376) * (1 + 2700/80) = 0.0896 * 34.75 = 3.1136
    assert time_per_progress(fit, 80, 2700) == pytest.approx(3.1136, rel=1e-4)
    # tau(B*) = a + b*Bn + 2*sqrt(a*b*Bn) = 0.052 + 1.269 + 2*sqrt(0.065988) = 1.83476
    assert time_per_progress(fit, b_star, 2700) == pytest.approx(1.83476, rel=1e-4)
    assert least_time_per_progress(fit, 2700) == pytest.approx(1.83476, rel=1e-4)
    assert predicted_speedup(fit, 80, 2700) == pytest.approx(3.1136 / 1.83476, rel=1e-3)  # 1.70x
    assert predicted_speedup(fit, b_star, 2700) == pytest.approx(1.0)


def test_degenerate_fits_stay_usable():
    flat = CostModel()  # time does not grow with the batch: bigger is free per observation
    for batch in (80, 160):
        for _ in range(5):
            flat.add(batch, 0.1)
    assert flat.fit.per_observation > 0 and flat.fit.exchange_rate > 1e5 and flat.fit.unresolved == "no slope"
    proportional = CostModel()  # no overhead at all: the smallest batch wins
    for batch in (80, 160):
        for _ in range(5):
            proportional.add(batch, 0.001 * batch - 0.005)
    assert proportional.fit.overhead == 0.0 and proportional.fit.unresolved == "no overhead"
    assert optimal_batch(proportional.fit, 500) == 0.0  # the controller's bounds take it from there
    assert predicted_speedup(proportional.fit, 80, 500) == pytest.approx((1 + 500 / 80) / (500 / 80))


def auto(**kw) -> BatchController:
    base = dict(batch="auto", min_envs=4, max_envs=256, hysteresis=1.5, max_resize_factor=2.0,
                cooldown=100, lr_rule="none")
    return BatchController(ControlConfig(**{**base, **kw}), observations_per_env=5, vector_size=4)


def test_auto_holds_without_a_model_or_an_estimate():
    c = auto()
    d = c.step(16, None, 80, 7e-4)
    assert d.n_envs == 16 and "no noise-scale" in d.reason
    d = c.step(16, 500.0, 80, 7e-4)  # an estimate, but the batch is not timed yet
    assert d.n_envs == 16 and d.target_batch is None and "cost model" in d.reason


def test_auto_probes_a_second_size_then_targets_b_star():
    c = auto()
    for _ in range(5):
        c.cost.add(80, 0.052 + 0.00047 * 80)
    d = c.step(16, 500.0, 400, 7e-4)
    assert d.n_envs == 32 and "probe" in d.reason  # the largest allowed factor
    for _ in range(5):
        c.cost.add(160, 0.052 + 0.00047 * 160)
    c.observations_since_resize = 1000
    d = c.step(32, 2700.0, 160, 7e-4)
    b_star = math.sqrt(0.052 / 0.00047 * 2700)  # 547: 109 envs of 5 observations, capped at 2x
    assert d.target_batch == pytest.approx(b_star, rel=1e-6)
    assert d.n_envs == 64 and "B* = sqrt(r 111 x B_simple[total] 2,700) = 547" in d.reason


def test_auto_probes_as_soon_as_its_start_is_timed_without_waiting_the_cooldown():
    """The probe's batch is chosen to time the cost model, not read from the noise scale: it moves after
    min_samples timings, however few observations the run has trained since it started."""
    c = auto(cooldown=10_000)
    for _ in range(4):
        c.cost.add(80, 0.052 + 0.00047 * 80)
    assert c.step(16, 500.0, 80, 7e-4).n_envs == 16  # four timings: still timing
    c.cost.add(80, 0.052 + 0.00047 * 80)
    d = c.step(16, 500.0, 80, 7e-4)  # 160 observations trained, far below the 10,000 cool-down
    assert d.n_envs == 32 and "probe" in d.reason
    before = auto(cooldown=10_000, probe_cooldown=True)  # runs saved before the change: the probe waits it
    for _ in range(5):
        before.cost.add(80, 0.052 + 0.00047 * 80)
    assert before.step(16, 500.0, 80, 7e-4).n_envs == 16


def test_auto_targets_b_star_of_the_signal_divided_by_crit_ratio():
    c = auto(crit_ratio=4.0)
    for batch in (80, 160):
        for _ in range(5):
            c.cost.add(batch, 0.052 + 0.00047 * batch)
    d = c.step(32, 2700.0, 160, 7e-4)
    b_star = math.sqrt(0.052 / 0.00047 * 2700 / 4)  # 273.5 observations
    assert d.target_batch == pytest.approx(b_star, rel=1e-6)
    assert d.n_envs == 56 and "B* = sqrt(r 111 x B_simple[total] 2,700 / 4) = 273" in d.reason


def test_the_resize_line_names_the_signal_the_controller_follows():
    c = auto(signal="precond_hessian")
    for batch in (80, 160):
        for _ in range(5):
            c.cost.add(batch, 0.052 + 0.00047 * batch)
    d = c.step(32, 2700.0, 160, 7e-4)
    assert "B* = sqrt(r 111 x B_PH 2,700) = 547" in d.reason


def test_auto_times_a_smaller_batch_while_the_fitted_overhead_is_zero():
    """A line with no overhead puts B* at 0: auto neither jumps there nor holds (from a large start it
    held at its probe's batch for a whole Pong run), but times one size down, then follows the line."""
    c = auto()
    for batch in (80, 160):
        for _ in range(5):
            c.cost.add(batch, 0.001 * batch - 0.005)
    assert c.cost.fit.overhead == 0.0 and c.cost.fit.unresolved == "no overhead"
    current = 32 * c.observations_per_env  # 160: timed, but not cooled down yet
    d = c.step(32, 2700.0, 10, 7e-4)
    assert d.n_envs == 32 and d.target_batch is None and "faster than the batch; timing this one" in d.reason
    d = c.step(32, 2700.0, c.cfg.cooldown, 7e-4)
    assert d.n_envs == 32 // c.cfg.max_resize_factor and d.reason.startswith(
        "shrink: probe: the time grew faster than the batch; timing a smaller one")
    for batch in (current / 2, 80, current):  # timings with an overhead resolve it: the B* rule again
        for _ in range(64):
            c.cost.add(batch, 0.05 + 0.001 * batch)
    assert c.cost.fit.overhead > 0
    assert c.step(16, 2700.0, 1000, 7e-4).target_batch is not None
    # At --min-envs there is no smaller batch to time: it stays.
    at_min = auto()
    low = at_min.cfg.min_envs * at_min.observations_per_env
    for batch in (low, 2 * low, 4 * low):
        for _ in range(5):
            at_min.cost.add(batch, 0.001 * batch - 0.0001 * low)
    at_min.observations_since_resize = at_min.cfg.cooldown
    d = at_min.step(at_min.cfg.min_envs, 2700.0, 1000, 7e-4)
    assert d.n_envs == at_min.cfg.min_envs and d.reason == "at min_envs"


def test_auto_times_a_larger_batch_while_time_does_not_grow_with_the_batch():
    """A line with no slope puts B* at r = 10^6: auto neither jumps there (a SpaceInvaders run grew to
    its largest batch on one) nor holds, but times one size up, and then follows the resolved line."""
    c = auto()
    for batch in (80, 120):
        for _ in range(5):
            c.cost.add(batch, 0.1 - 0.0001 * batch)  # the larger batch timed faster
    assert c.cost.fit.unresolved == "no slope" and c.cost.fit.exchange_rate > 1e5
    current = 32 * c.observations_per_env  # 160
    d = c.step(32, 2700.0, 1000, 7e-4)  # the current batch has no timings yet: it is timed first
    assert d.n_envs == 32 and "timing this one" in d.reason
    for _ in range(5):
        c.cost.add(current, 0.1 - 0.0001 * current)
    c.observations_since_resize = c.cfg.cooldown
    d = c.step(32, 2700.0, 1000, 7e-4)
    assert d.n_envs == 32 * c.cfg.max_resize_factor and d.reason.startswith(
        "grow: probe: the time did not grow with the batch; timing a larger one")
    for batch in (80, 120, current):  # timings that grow with the batch resolve it: the B* rule again
        for _ in range(64):
            c.cost.add(batch, 0.05 + 0.001 * batch)
    assert c.cost.fit.unresolved == "" and c.step(64, 2700.0, 1000, 7e-4).target_batch is not None
    # At --max-envs there is no larger batch to time: it stays.
    at_max = auto()
    for batch in (80, 160, at_max.cfg.max_envs * at_max.observations_per_env):
        for _ in range(5):
            at_max.cost.add(batch, 0.1)
    at_max.observations_since_resize = at_max.cfg.cooldown
    assert at_max.step(at_max.cfg.max_envs, 2700.0, 1000, 7e-4).n_envs == at_max.cfg.max_envs


def test_auto_state_round_trips_the_cost_model():
    c = auto()
    for batch in (80, 160):
        for _ in range(5):
            c.cost.add(batch, 0.05 + 0.001 * batch)
    clone = auto()
    clone.load_state_dict(c.state_dict())
    assert clone.cost.fit == c.cost.fit


def test_auto_scales_the_learning_rate_by_default_and_other_modes_do_not():
    """lr_rule auto: the power rule (alpha 0.5) with --batch auto, none with the other modes."""
    c = auto(lr_rule="auto")
    for batch in (80, 160):
        for _ in range(5):
            c.cost.add(batch, 0.052 + 0.00047 * batch)
    d = c.step(32, 2700.0, 1000, 7e-4)  # B* 547 vs 160: grow 32 -> 64 envs (160 -> 320 observations)
    assert d.n_envs == 64
    assert d.lr == pytest.approx(7e-4 * (320 / 160) ** 0.5)
    critical = BatchController(ControlConfig(batch="critical", cooldown=0), observations_per_env=5, vector_size=4)
    d = critical.step(32, 2700.0, 1000, 7e-4)
    assert d.n_envs == 64 and d.lr == 7e-4


def test_without_probe_cooldown_auto_moves_to_b_star_once_the_probe_is_timed():
    for wait in (True, False):
        c = auto(cooldown=10_000, probe_cooldown=wait)
        for _ in range(5):
            c.cost.add(80, 0.052 + 0.00047 * 80)
        c.observations_since_resize = 10_000
        assert "probe" in c.step(16, 500.0, 80, 7e-4).reason  # 16 -> 32 envs
        for _ in range(5):
            c.cost.add(160, 0.052 + 0.00047 * 160)
        d = c.step(32, 5000.0, 160, 7e-4)  # 160 observations after the probe; B* = sqrt(110.6 x 5,000) = 744
        if wait:
            assert d.n_envs == 32 and d.reason == "cooling down"
        else:
            assert d.n_envs == 64 and d.reason.startswith("grow: B*")  # capped at 2x
            assert c.step(64, 5000.0, 320, 7e-4).reason == "cooling down"  # later resizes wait again


def test_auto_resizes_only_when_b_star_pays_at_least_min_gain():
    """r = 0.052 / 0.00047 = 110.6, B* = sqrt(110.6 x 100) = 105.2 against 160 observations: outside
    the 1.5x band, but tau(160)/tau(B*) = 270.6 x 1.625 / (210.6 + 2 x 105.2) = 1.045, under 5 %."""
    models = {}
    for min_gain in (0.05, 0.0):
        c = auto(min_gain=min_gain)
        for batch in (80, 160):
            for _ in range(5):
                c.cost.add(batch, 0.052 + 0.00047 * batch)
        models[min_gain] = c.step(32, 100.0, 160, 7e-4)
    held, moved = models[0.05], models[0.0]
    assert predicted_speedup(Fit(0.052, 0.00047), 160, 100) == pytest.approx(1.045, abs=1e-3)
    assert held.n_envs == 32 and "only 4.5% faster" in held.reason
    assert moved.n_envs == 20 and "= 105, 4% faster" in moved.reason  # 105 observations: 21 envs -> 20


@pytest.mark.parametrize("x", [1.05, 1.5, 2.0, 3.0, 0.5])
def test_the_bound_on_a_batch_off_b_star_is_reached_where_r_equals_b_crit(x):
    """By brute force over r/B_crit: tau(x B*)/tau(B*) - 1 peaks at (sqrt(x) - 1/sqrt(x))^2 / 4, at r = B_crit."""
    noise = 400.0
    ratios = np.geomspace(1e-4, 1e4, 8001)  # r / B_crit
    excess = []
    for ratio in ratios:
        fit = Fit(ratio * noise * 1e-3, 1e-3)  # r = a / b = ratio * B_crit
        excess.append(time_per_progress(fit, x * optimal_batch(fit, noise), noise)
                      / least_time_per_progress(fit, noise) - 1)
    best = int(np.argmax(excess))
    assert excess[best] == pytest.approx((math.sqrt(x) - 1 / math.sqrt(x)) ** 2 / 4, rel=1e-6)
    assert ratios[best] == pytest.approx(1.0, rel=0.01)
    if x == 1.05:
        assert excess[best] == pytest.approx(0.000595, rel=1e-3)  # the docs' "5 % off B* costs 0.06 %"


def timed(c: BatchController, batches=(80, 160)) -> BatchController:
    for batch in batches:
        for _ in range(5):
            c.cost.add(batch, 0.052 + 0.00047 * batch)
    return c


def held(grow_to_exchange_rate: bool, batches=(80, 160)) -> BatchController:
    c = timed(auto(), batches)
    c.hold_until_learning, c.grow_to_exchange_rate = True, grow_to_exchange_rate
    return c


def test_auto_on_one_machine_grows_to_the_exchange_rate_before_anything_is_learned():
    """Before learning, on one machine auto may grow past a small start up to the cost model's a/b (110.6
    observations here: 0.052 s / 0.00047 s), no further; B* (547 at B_crit 2,700) waits for learning."""
    c = held(True)
    assert c.step(4, 2700.0, 1000, 7e-4, learned=False).n_envs == 8  # start 20 observations -> 40
    assert c.step(8, 2700.0, 1000, 7e-4, learned=False).n_envs == 16  # -> 80
    # 160 would pass a/b; capped, the step 80 -> 100 is inside the hysteresis band: it holds.
    assert c.step(16, 2700.0, 1000, 7e-4, learned=False).reason == NOTHING_LEARNED
    assert c.step(16, 2700.0, 1000, 7e-4, learned=True).n_envs == 32
    # Capped but past the band: 60 -> 120 would pass a/b, and 100 is 1.67x 60.
    assert held(True).step(12, 2700.0, 1000, 7e-4, learned=False).n_envs == 20
    # Where growing buys machines (the trainer leaves grow_to_exchange_rate off) nothing grows, not even
    # back to the start after a shrink.
    assert held(False).step(4, 2700.0, 1000, 7e-4, learned=False).reason == NOTHING_LEARNED
    cluster = held(False)
    assert cluster.step(64, 20000.0, 1000, 7e-4, learned=False).reason == NOTHING_LEARNED
    assert cluster.step(32, 20000.0, 1000, 7e-4, learned=False).reason == NOTHING_LEARNED
    # A start above a/b is the ceiling on one machine too: back up to it after a shrink, not past it.
    big = held(True)
    assert big.step(64, 20000.0, 1000, 7e-4, learned=False).reason == NOTHING_LEARNED  # 320 -> 640 waits (B* 1,487)
    assert big.step(32, 20000.0, 1000, 7e-4, learned=False).n_envs == 64  # 160 -> 320, its start


def test_each_decision_names_what_it_did_and_the_progress_note_why_it_holds():
    """The kinds the run's summary sums agent steps under, and the note the progress line shows: the reason,
    with the batch aimed at where the reason leaves it out (B* 547 at B_crit 2,700 and r 110.6)."""
    c = held(True)
    kinds = [c.step(envs, 2700.0, 1000, 7e-4, learned=False).kind for envs in (4, 8)]
    capped = c.step(16, 2700.0, 1000, 7e-4, learned=False)
    assert kinds == ["resize", "resize"] and capped.kind == "nothing learned"
    assert capped.note() == f"{NOTHING_LEARNED} (target 547)"
    grown = c.step(16, 2700.0, 1000, 7e-4)
    assert grown.kind == "resize" and grown.note() == "resized"
    cooling = c.step(32, 2700.0, 10, 7e-4)  # 10 observations since the resize, of a 100 cool-down
    assert cooling.kind == "cooling down" and cooling.note() == "cooling down (target 547)"
    near = timed(auto(min_gain=0.0), (80, 160)).step(32, 231.0, 1000, 7e-4)  # B* = sqrt(110.6 x 231) = 160
    assert near.kind == "within hysteresis" and near.note() == "within hysteresis (target 160)"
    small = timed(auto(min_gain=0.05), (80, 160)).step(32, 100.0, 160, 7e-4)  # B* 105, 4.5 % faster
    assert small.kind == "small gain" and small.note() == small.reason  # its reason names B*
    assert timed(auto(), (80, 160)).step(256, 1e9, 1000, 7e-4).note() == "at max_envs (target 332,623)"  # sqrt(110.64 x 1e9)
    assert BatchController(ControlConfig(batch="fixed"), 5, 1).step(16, 100.0, 80, 7e-4).kind == "fixed"
    untimed = auto().step(16, 500.0, 80, 7e-4)  # no cost model yet, and its start not yet timed
    assert untimed.kind == "timing" and untimed.note() == "timing this batch for the cost model"
    assert auto().step(16, None, 80, 7e-4) == Decision(16, 7e-4, None, "no noise-scale estimate", "no estimate")
    drowned = auto().step(16, None, 80, 7e-4, missing="|G|^2 average <= 0: the noise drowns the gradient")
    assert drowned.kind == "no estimate"
    assert drowned.note() == "no noise-scale estimate (|G|^2 average <= 0: the noise drowns the gradient)"


def test_auto_with_a_learning_floor_does_not_shrink_below_the_batch_it_learned_at():
    """learning_floor: after the learning line a shrink stops at the batch of that line (B* 160 at B_crit 231 and r
    110.6); before the line, and without the option, it shrinks; growth and shrinks back to the floor go on; the
    floor survives a checkpoint."""
    def controller(floor: bool, learned_at_envs: int | None) -> BatchController:
        c = timed(auto(learning_floor=floor))
        if learned_at_envs is not None:
            c.step(learned_at_envs, None, 1000, 7e-4, learned=True)  # the learning line, with no estimate yet
        return c
    assert controller(False, 64).step(64, 231.0, 1000, 7e-4).n_envs == 32
    assert controller(True, None).step(64, 231.0, 1000, 7e-4, learned=False).n_envs == 32
    held_at = controller(True, 64).step(64, 231.0, 1000, 7e-4)
    assert held_at.n_envs == 64 and held_at.kind == AT_FLOOR
    assert held_at.note() == "at the learning floor, 320 observations (target 160)"
    assert controller(True, 48).step(64, 231.0, 1000, 7e-4).kind == AT_FLOOR  # 320 is within 1.5x of the floor 240
    back = controller(True, 32).step(128, 231.0, 1000, 7e-4)  # grew to 640 after learning at 160: back to 160,
    assert back.n_envs == 32 and back.kind == "resize"  # the floor, where B* 160 asks
    floored = controller(True, 32).step(128, 120.0, 1000, 7e-4)  # B* 115, below the floor 160: shrinks to it
    assert floored.n_envs == 32 and "floor 160 observations" in floored.reason
    assert controller(True, 8).step(8, 2700.0, 1000, 7e-4).n_envs == 16  # B* 547 from 40 observations: grows
    saved = controller(True, 64)
    resumed = auto(learning_floor=True)
    resumed.load_state_dict(saved.state_dict())
    assert resumed.floor == 320 and resumed.step(64, 231.0, 1000, 7e-4).kind == AT_FLOOR


def test_auto_on_one_machine_times_a_larger_batch_on_a_flat_line_before_learning():
    """A cost line with no slope says a larger batch costs no more time: on one machine its probe may time one,
    one factor above the start at most, before anything is learned; where growing buys machines it waits."""
    for grows, n_envs in ((False, 16), (True, 32)):
        c = held(grows, batches=())
        for batch in (40, 80):
            for _ in range(5):
                c.cost.add(batch, 0.05)
        assert c.cost.fit.unresolved == "no slope"
        assert c.step(16, 2700.0, 1000, 7e-4, learned=False).n_envs == n_envs  # start 80 -> 160
    for _ in range(5):
        c.cost.add(160, 0.049)  # still no slope at 160: 320 would be two factors above the start
    assert c.cost.fit.unresolved == "no slope"
    assert c.step(32, 2700.0, 1000, 7e-4, learned=False).reason == NOTHING_LEARNED


def test_auto_on_one_machine_times_one_size_up_from_min_envs_before_learning():
    """At --min-envs nothing smaller can be timed: on one machine the probe times one factor up, so that a/b is
    known before learning; where growing buys machines it holds, as before."""
    for grows, n_envs in ((True, 8), (False, 4)):
        c = auto()
        c.hold_until_learning, c.grow_to_exchange_rate = True, grows
        for _ in range(5):
            c.step(4, 2700.0, 100, 7e-4, learned=False)  # timing this batch; the cool-down passes
            c.cost.add(20, 0.06)
        d = c.step(4, 2700.0, 100, 7e-4, learned=False)
        assert d.n_envs == n_envs, d.reason
        assert ("probe" in d.reason) if grows else d.reason == NOTHING_LEARNED


def test_the_trainer_lets_only_auto_on_one_machine_grow_before_learning():
    """What build() gives the controller: the hold for auto and wherever growing buys machines; growth to a/b
    only for auto on one machine."""
    def hold(**overrides):
        return learning_hold(build_config("cartpole", None, overrides))
    assert hold(batch="auto") == (True, True)
    assert hold(batch="auto", cluster_nodes=4) == (True, False)
    assert hold(batch="auto", envs_per_actor=4) == (True, False)
    assert hold(batch="critical", cluster_nodes=4) == (True, False)
    assert hold(batch="critical") == (False, False)
    assert hold(batch="fixed") == (False, False)


def test_auto_on_a_cluster_aims_at_the_cluster_batch_not_b_star():
    """--cluster-nodes: the target is cluster_batch over the bounds' batches, not B* of one machine."""
    c = timed(auto(cluster_nodes=4, cluster_node_envs=16, cluster_round_trip=0.0))
    d = c.step(32, 2700.0, 1000, 7e-4)
    fit = c.cost.fit
    # Up to 4 nodes of 80 observations; B_crit 2,700 is above the cluster's 320, so every node is busy and
    # T_N(B) = a + b*B/4: the fastest batch is sqrt(a * B_crit * 4 / b) = 1,093 by hand, and at 4 nodes the
    # node-hours follow the time, so the target is the candidate (multiples of 20 observations) next to it.
    assert d.target_batch == cluster_batch(fit, c.cluster, 2700.0, 0.05, [e * 5.0 for e in range(4, 257, 4)])
    assert 1080 <= d.target_batch <= 1100
    assert d.n_envs == 64 and "on up to 4 nodes" in d.reason  # 160 -> 320 observations: one factor of 2
    # One machine's B* reads sqrt(r 110.6 x 2,700) = 547: the same direction, another target.
    assert timed(auto()).step(32, 2700.0, 1000, 7e-4).target_batch == pytest.approx(546.5, rel=1e-3)


def test_on_a_cluster_the_reading_band_holds_a_batch_that_a_reading_within_it_would_choose():
    """cluster_hysteresis: a cluster move waits while some reading within the band puts the target at this batch."""
    def breakout(**kw) -> BatchController:
        c = auto(cluster_nodes=16, cluster_node_envs=16, cluster_round_trip=0.03, **kw)
        for batch in (80, 160):
            for _ in range(5):
                c.cost.add(batch, 0.0032 + 0.000044 * batch)
        return c
    # By hand, T(B) = 3.2 ms + 0.044 ms x B: one node at 80 takes 6.72 ms an update, 14-16 nodes 36.72 ms (30 ms
    # round trip). At B_crit 500 one node is fastest (6.72 x 7.25 = 48.7 against 1,280's 36.72 x 1.39 = 51.1) and
    # the cheapest; at 600 it is not within 5 % of 1,280 (57.1 > 1.05 x 53.9), and 1,120 on 14 nodes is (56.4): the
    # target jumps. The tie, 6.72 + 0.084 C = 1.05 (36.72 + 0.0287 C), lies at C = 591.
    assert breakout().step(16, 500.0, 1000, 7e-4).target_batch == 80
    grow = breakout().step(16, 600.0, 1000, 7e-4)
    assert grow.target_batch == 1120 and grow.n_envs == 32
    held = breakout(cluster_hysteresis=1.5).step(16, 600.0, 1000, 7e-4)  # 600 / 1.5^(1/4) = 542 puts it at 80
    assert held.n_envs == 16 and held.kind == READING_BAND and "puts the cluster batch at 80" in held.reason
    assert breakout(cluster_hysteresis=1.5).step(16, 1000.0, 1000, 7e-4).n_envs == 32  # 1,000 / 1.5 = 667: above
    # From 256 environments (1,280 observations) the same band holds a shrink: 400 x 1.5 = 600 puts it at 1,120.
    assert breakout().step(256, 400.0, 1000, 7e-4).n_envs == 64
    assert breakout(cluster_hysteresis=1.5).step(256, 400.0, 1000, 7e-4).n_envs == 256
    assert breakout(cluster_hysteresis=1.5).step(256, 300.0, 1000, 7e-4).n_envs == 64  # 450: still one node
    # Two nodes (160) is no reading's cluster batch: the band does not hold a run there.
    assert breakout(cluster_hysteresis=1.5).step(32, 600.0, 1000, 7e-4).n_envs == 64
    assert breakout(cluster_hysteresis=1.5).step(32, 400.0, 1000, 7e-4).n_envs == 16
    # Before learning the hold decides, not the band: a grow is held as nothing learned, a shrink is made (with
    # cluster_one_node_first off; on, the one-node hold decides).
    unlearned = breakout(cluster_hysteresis=1.5, cluster_one_node_first=False)
    unlearned.hold_until_learning = True
    assert unlearned.step(16, 600.0, 1000, 7e-4, learned=False).reason == NOTHING_LEARNED
    assert unlearned.step(256, 400.0, 1000, 7e-4, learned=False).n_envs == 64
    # Only auto weighs the cluster batch: critical's target is its own.
    assert breakout(batch="critical", cluster_hysteresis=1.5).step(16, 600.0, 1000, 7e-4).n_envs == 32


def test_auto_on_a_cluster_chooses_with_cluster_fit_where_one_is_given():
    """cluster_fit, the T(B) the clock prices with, is the model auto's cluster choice uses; else the run's own."""
    own = timed(auto(cluster_nodes=16))  # its own fit: 52 ms + 0.47 ms x B, where one node loses at B_crit 300
    assert own.step(16, 300.0, 1000, 7e-4).n_envs == 32
    # Given 3.2 ms + 0.044 ms x B, B_crit 300 lies under the tie at 591 (the band test's hand-worked case): one node.
    given = timed(auto(cluster_nodes=16, cluster_fit="0.0032,0.000044"))
    decision = given.step(16, 300.0, 1000, 7e-4)
    assert decision.n_envs == 16 and decision.target_batch == 80
    grow = given.step(4, 300.0, 1000, 7e-4)  # from 20 observations toward one node's 80
    assert grow.n_envs == 8 and "T(B) of cluster_fit" in grow.reason
    # The reading band weighs its readings with the given T(B) too: at 600 / 1.5^(1/4) = 542 it puts one node.
    banded = timed(auto(cluster_nodes=16, cluster_fit="0.0032,0.000044", cluster_hysteresis=1.5))
    assert banded.step(16, 600.0, 1000, 7e-4).kind == READING_BAND


def test_auto_on_a_cluster_with_cluster_one_node_first_trains_on_one_node_until_learning():
    """cluster_one_node_first: before the learning line a start on one node (80 observations here) is held, neither
    probed below nor moved by a reading; a larger start shrinks to one node, a step each once its batch is timed."""
    small = timed(auto(cluster_nodes=16, cluster_one_node_first=True), batches=(40,))  # the start timed: a probe is due
    small.hold_until_learning = True
    for reading in (20.0, 2700.0):  # a small target and a large one
        held = small.step(8, reading, 1000, 7e-4, learned=False)
        assert held.n_envs == 8 and held.reason == ONE_NODE_HELD and held.kind == KIND_NOTHING_LEARNED
    assert small.step(8, 2700.0, 1000, 7e-4, learned=True).n_envs == 16  # after it, the probe times one size up
    # From 2,560 observations (512 environments): not until the start is timed, then by max_shrink_factor to 80.
    large = auto(cluster_nodes=16, cluster_one_node_first=True, max_envs=512)
    large.hold_until_learning = True
    assert large.step(512, 2700.0, 1000, 7e-4, learned=False).kind == TIMING
    n_envs = 512
    for batch, after in ((2560, 640), (640, 160), (160, 80)):
        timed(large, batches=(batch,))
        n_envs = large.step(n_envs, 2700.0, 1000, 7e-4, learned=False).n_envs
        assert n_envs * 5 == after
    assert large.step(n_envs, 20.0, 1000, 7e-4, learned=False).reason == ONE_NODE_HELD
    # From 400 (80 environments) a step of 4 ends at 100, two nodes; the next, 100 -> 80, lies inside the hysteresis
    # band but is made: two nodes pay a round trip an update.
    odd = timed(auto(cluster_nodes=16, cluster_one_node_first=True), batches=(400, 100))
    odd.hold_until_learning = True
    assert odd.step(80, 2700.0, 1000, 7e-4, learned=False).n_envs == 20
    assert odd.step(20, 2700.0, 1000, 7e-4, learned=False).n_envs == 16
    # On one machine the setting does nothing: the probe still times a smaller batch.
    one_machine = timed(auto(cluster_one_node_first=True), batches=(160,))
    one_machine.hold_until_learning = True
    assert one_machine.step(32, 2700.0, 1000, 7e-4, learned=False).n_envs == 16
    # Without it (the default before 2026-12-07's ten-seed rule) the same cluster controller probes down from its
    # one-node start before learning; by default the setting is on.
    assert auto(cluster_nodes=16).cfg.cluster_one_node_first
    plain = timed(auto(cluster_nodes=16, cluster_one_node_first=False), batches=(40,))
    plain.hold_until_learning = True
    assert plain.step(8, 2700.0, 1000, 7e-4, learned=False).n_envs == 4


def test_auto_does_not_grow_before_anything_is_learned():
    c = timed(auto(cluster_nodes=4, cluster_one_node_first=False))  # on, it would hold one node's batch instead
    c.hold_until_learning = True
    d = c.step(32, 2700.0, 1000, 7e-4, learned=False)
    assert d.n_envs == 32 and d.reason == NOTHING_LEARNED and d.target_batch == 1280
    assert c.step(32, 2700.0, 1000, 7e-4, learned=True).n_envs == 64
    # Shrinking is allowed: a small target is followed before anything is learned.
    assert c.step(64, 20.0, 1000, 7e-4, learned=False).n_envs < 64
    # Its probe (no cost model yet) times a smaller batch instead of a larger one.
    probe = timed(auto(), batches=(160,))
    probe.hold_until_learning = True
    assert probe.step(32, 2700.0, 1000, 7e-4, learned=False).n_envs == 16
    assert timed(auto(), batches=(160,)).step(32, 2700.0, 1000, 7e-4, learned=False).n_envs == 64  # no guard: grows
    # At the fewest environments the probe cannot shrink: it waits for learning.
    floor = timed(auto(min_envs=32), batches=(160,))
    floor.hold_until_learning = True
    assert floor.step(32, 2700.0, 1000, 7e-4, learned=False).reason == NOTHING_LEARNED
