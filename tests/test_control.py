"""The batch-size controller against hand-computed decisions."""

from __future__ import annotations

import math

import pytest

from rlscale.config import ControlConfig
from rlscale.control.controller import BatchController, scaled_lr, target_batch
from rlscale.control.schedule import Schedule


def controller(**kw) -> BatchController:
    base = dict(batch="critical", min_envs=4, max_envs=256, hysteresis=1.5,
                max_resize_factor=2.0, max_shrink_factor=2.0, cooldown=1000, lr_rule="none")
    base.update(kw)
    return BatchController(ControlConfig(**base), observations_per_env=5, vector_size=4)


def test_fixed_never_resizes():
    c = controller(batch="fixed")
    d = c.step(16, 10_000.0, 80, 7e-4)
    assert d.n_envs == 16 and d.lr == 7e-4 and d.target_batch is None


@pytest.mark.parametrize("estimate", [None, float("nan"), float("inf"), -5.0, 0.0])
def test_missing_or_bad_estimate_holds(estimate):
    c = controller(cooldown=0)
    d = c.step(16, estimate, 80, 7e-4)
    assert d.n_envs == 16 and d.target_batch is None and "no noise-scale" in d.reason


def test_cooldown_counts_observations():
    c = controller(cooldown=1000)
    for _ in range(12):  # 12 x 80 = 960 < 1000 observations
        assert c.step(16, 1000.0, 80, 7e-4).reason == "cooling down"
    d = c.step(16, 1000.0, 80, 7e-4)  # 1,040 observations: may act
    assert d.n_envs == 32
    assert c.step(32, 1000.0, 160, 7e-4).reason == "cooling down"  # the count restarted


def test_cooldown_measured_counts_only_observations_the_noise_average_took():
    """While new environments settle the average takes nothing: at 512 envs a 10,000-observation cool-down
    passed in 4 updates, before the first of them was measured, and the controller moved on the reading
    of the batch before."""
    c = controller(cooldown=1000, cooldown_measured=True)
    for _ in range(20):  # 1,600 observations trained, none measured
        assert c.step(16, 1000.0, 80, 7e-4, measured=0.0).reason == "cooling down"
    for _ in range(12):  # 960 measured
        assert c.step(16, 1000.0, 80, 7e-4, measured=80.0).reason == "cooling down"
    assert c.step(16, 1000.0, 80, 7e-4, measured=80.0).n_envs == 32  # 1,040 measured: may act
    # A sample that stands for observations trained before the resize (PPO's unmeasured minibatches) counts only
    # those trained since: after the resize above, 1,000 observations of the old batch do not end the cool-down.
    c.step(32, 1000.0, 160, 7e-4, measured=1000.0)
    assert c.observations_since_resize == 160 and c.step(32, 1000.0, 160, 7e-4, measured=160).reason == "cooling down"
    every = controller(cooldown=1000)  # the default: every observation trained
    for _ in range(12):
        assert every.step(16, 1000.0, 80, 7e-4, measured=0.0).reason == "cooling down"
    assert every.step(16, 1000.0, 80, 7e-4, measured=0.0).n_envs == 32


def test_hysteresis_band():
    c = controller(cooldown=0)
    assert c.step(16, 80 * 1.49, 80, 1e-3).n_envs == 16  # inside [1/1.5, 1.5] of 80
    assert c.step(16, 80 / 1.49, 80, 1e-3).n_envs == 16
    assert c.step(16, 80 * 1.6, 80, 1e-3).n_envs == 24  # 128 obs -> 25.6 envs -> 24 (multiple of 4)


def test_step_limit_and_bounds():
    c = controller(cooldown=0)
    assert c.step(16, 100_000.0, 80, 1e-3).n_envs == 32  # at most x2 per resize
    assert c.step(16, 1.0, 80, 1e-3).n_envs == 8  # at most /2 here
    # ControlConfig's default lets a shrink go further than a growth: a smaller batch costs no examples.
    assert controller(cooldown=0, max_shrink_factor=ControlConfig.max_shrink_factor).step(
        32, 1.0, 160, 1e-3).n_envs == 8  # /4
    assert c.step(256, 1e9, 1280, 1e-3).reason == "at max_envs"
    assert c.step(4, 1.0, 20, 1e-3).reason == "at min_envs"
    assert controller(cooldown=0, max_envs=20).step(16, 1e6, 80, 1e-3).n_envs == 20


def test_rounding_still_moves_one_vector():
    # target 1.55x of 4 envs -> 6.2 envs -> rounds to 8: one vector env more
    assert controller(cooldown=0).step(4, 20 * 1.55, 20, 1e-3).n_envs == 8
    # 1.6 x 8 envs = 12.8 -> 12
    assert controller(cooldown=0).step(8, 40 * 1.6, 40, 1e-3).n_envs == 12


def test_critical_and_sqrt_targets():
    assert target_batch("critical", 640.0, 1000.0) == 640.0
    assert target_batch("sqrt", 640.0, 1000.0) == pytest.approx(800.0)  # sqrt(640,000)
    c = controller(batch="sqrt", r=1000.0, cooldown=0)
    d = c.step(16, 640.0, 80, 1e-3)
    assert d.target_batch == pytest.approx(800.0) and d.n_envs == 32  # capped at x2


def test_lr_rule_by_hand():
    # Bn = 400, B0 = 80, B1 = 160, alpha = 0.5: lr1 = lr0 * ((1+5)/(1+2.5))^0.5
    assert scaled_lr(1e-3, 400.0, 80.0, 160.0, 0.5) == pytest.approx(1e-3 * math.sqrt(6 / 3.5))
    assert scaled_lr(1e-3, 400.0, 80.0, 160.0, 1.0) == pytest.approx(1e-3 * 6 / 3.5)
    c = controller(cooldown=0, lr_rule="noise", lr_alpha=1.0)
    d = c.step(16, 400.0, 80, 1e-3)  # target 400 / 80 = 5x -> capped at 160 obs = 32 envs
    assert d.n_envs == 32 and d.lr == pytest.approx(1e-3 * 6 / 3.5)
    shrink = controller(cooldown=0, lr_rule="noise", lr_alpha=1.0).step(32, 40.0, 160, 1e-3)
    assert shrink.n_envs == 16 and shrink.lr == pytest.approx(1e-3 * (1 + 40 / 160) / (1 + 40 / 80))


def test_lr_rule_is_anchored_at_the_runs_first_batch_and_rate():
    """A grow at one noise scale and a shrink back at another return to the starting lr: the rule sets
    lr(B) from the first (batch, lr), so the factors of successive resizes cannot ratchet it."""
    c = controller(cooldown=0, lr_rule="noise", lr_alpha=0.75)
    grown = c.step(16, 1_100.0, 80, 1e-3)  # 80 -> 160 observations at B_simple 1,100
    assert grown.n_envs == 32 and grown.lr == pytest.approx(1e-3 * ((1 + 1100 / 80) / (1 + 1100 / 160)) ** 0.75)
    back = c.step(32, 40.0, 160, grown.lr)  # back to 80 at B_simple 40
    assert back.n_envs == 16 and back.lr == pytest.approx(1e-3)
    shrunk = c.step(16, 10.0, 80, back.lr)  # below the start: lr(40) from the anchor, at this B_simple
    assert shrunk.n_envs == 8 and shrunk.lr == pytest.approx(1e-3 * ((1 + 10 / 80) / (1 + 10 / 40)) ** 0.75)
    clone = controller(cooldown=0, lr_rule="noise", lr_alpha=0.75)
    clone.load_state_dict(c.state_dict())
    assert clone.reference == (80.0, 1e-3)


def test_power_rule_sets_lr_from_the_batch_alone():
    c = controller(cooldown=0, lr_rule="power", lr_alpha=0.5)
    grown = c.step(16, 1_100.0, 80, 1e-3)  # 80 -> 160 observations: sqrt(2) x, whatever the noise scale
    assert grown.n_envs == 32 and grown.lr == pytest.approx(1e-3 * math.sqrt(2))
    shrunk = c.step(32, 5.0, 160, grown.lr)  # 160 -> 80, back to the first rate
    assert shrunk.n_envs == 16 and shrunk.lr == pytest.approx(1e-3)
    assert controller(lr_rule="power").cfg.scales_lr and not controller(lr_rule="none").cfg.scales_lr


def test_lr_unchanged_without_rule_and_state_round_trip():
    c = controller(cooldown=0)
    d = c.step(16, 400.0, 80, 1e-3)
    assert d.n_envs == 32 and d.lr == 1e-3
    waiting = controller(cooldown=10_000)
    waiting.step(16, 400.0, 80, 1e-3)
    waiting.step(16, 400.0, 80, 1e-3)
    clone = controller(cooldown=10_000)
    clone.load_state_dict(waiting.state_dict())
    assert clone.observations_since_resize == waiting.observations_since_resize == 160
    assert clone.trained_since_resize == 160
    older = {k: v for k, v in waiting.state_dict().items() if k != "trained_since_resize"}  # saved before the cap
    clone.load_state_dict(older)
    assert clone.trained_since_resize == 160


def test_crit_ratio_divides_the_signal_for_the_target_but_not_for_the_lr_rule():
    # B_simple 2,560 read as B_crit 2,560 / 4 = 640: sqrt(1000 x 640) = 800, not sqrt(1000 x 2,560) = 1,600.
    d = controller(batch="sqrt", r=1000.0, cooldown=0, crit_ratio=4.0).step(16, 2560.0, 80, 1e-3)
    assert d.target_batch == pytest.approx(800.0)
    assert controller(batch="critical", cooldown=0, crit_ratio=4.0).step(16, 2560.0, 80, 1e-3).target_batch == 640.0
    # The lr rule scales with the measured B_simple: 80 -> 160 observations at Bn = 2,560, alpha 1.
    ruled = controller(batch="critical", cooldown=0, crit_ratio=4.0, lr_rule="noise", lr_alpha=1.0)
    d = ruled.step(16, 2560.0, 80, 1e-3)
    assert d.n_envs == 32 and d.lr == pytest.approx(1e-3 * (1 + 2560 / 80) / (1 + 2560 / 160))
    assert "B_simple 2,560 / 4" not in d.reason  # critical mode names its target only


def test_a_logged_path_becomes_the_schedule_of_the_updates_that_follow():
    # batch/n_envs is logged after the update's decision (the next update's count), train/lr with the
    # rate the update used: the rate that follows step 200 is the one logged at 300.
    schedule = Schedule.from_logged([100, 200, 300, 400], [8, 16, 16, 8], [100, 200, 300, 400],
                                    [1e-3, 1e-3, 2e-3, 2e-3])
    assert schedule.at(99) is None  # before the first update ended: the run's own start
    assert schedule.at(100) == (8, 1e-3)
    assert schedule.at(250) == (16, 2e-3)
    assert schedule.at(400) == schedule.at(10_000) == (8, 2e-3)  # the last holds
    with pytest.raises(ValueError, match="same updates"):
        Schedule.from_logged([100, 200], [8, 16], [100, 300], [1e-3, 1e-3])
    with pytest.raises(ValueError, match="rise"):
        Schedule((100, 100), (8, 8), (1e-3, 1e-3))


def test_replay_follows_the_schedule_by_agent_steps_and_ignores_the_noise_scale():
    c = controller(batch="replay", cooldown=10_000)
    c.schedule = Schedule((80, 160, 320), (16, 32, 32), (1e-3, 2e-3, 4e-3))
    held = c.step(16, None, 40, 1e-3)  # 40 steps: before the recorded first update ended
    assert held.n_envs == 16 and held.lr == 1e-3 and held.target_batch is None
    grown = c.step(16, 5.0, 40, 1e-3)  # 80: the recorded 16 envs at 1e-3: as it is
    assert (grown.n_envs, grown.lr) == (16, 1e-3)
    grown = c.step(16, 5.0, 80, 1e-3)  # 160: 32 envs at 2e-3, though the cool-down has not passed
    assert (grown.n_envs, grown.lr) == (32, 2e-3) and grown.reason.startswith("grow: replay")
    rate_only = c.step(32, 1e6, 160, 2e-3)  # 320: same count, the rate it recorded
    assert (rate_only.n_envs, rate_only.lr) == (32, 4e-3)
    clone = controller(batch="replay")
    clone.load_state_dict(c.state_dict())
    assert clone.agent_steps == c.agent_steps == 320

