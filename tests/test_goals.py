"""Goals as a run meets them: the crossing rule, the trend's forecast, the preset's reference run and when
`auto` counts a run as learning (pure)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from rlscale.config import build_config
from rlscale.errors import UserError
from rlscale.goals import (
    Forecast,
    GoalForecast,
    GoalOutlook,
    GoalWindow,
    first_crossing,
    learning_began,
    smoothed_returns,
    window_stats,
)
from rlscale.training.logger import goal_eta
from rlscale.training.trainer import TrainState, note_learning, reference_step, stop_clause


def test_goal_crossing_on_hand_made_curves():
    """Means over full windows of 20: twenty 0s, then 40s raise the mean by 2 per episode."""
    returns = np.array([0.0] * 20 + [40.0] * 20)
    steps = np.arange(40) * 100
    assert np.isnan(smoothed_returns(returns)[:19]).all() and smoothed_returns(returns)[19] == 0
    assert first_crossing(steps, returns, 20) == 29 * 100  # ten 40s: mean (10 * 40) / 20 = 20
    assert first_crossing(steps, returns, 40) == 39 * 100
    assert first_crossing(steps, returns, 41) is None
    # A lucky start does not count before a full window exists.
    assert first_crossing(steps[:19], np.full(19, 100.0), 50) is None


def test_training_loop_and_reports_apply_the_same_goal_rule():
    """GoalWindow (episode by episode, as training runs) and first_crossing (on the log) agree."""
    rng = np.random.default_rng(0)
    returns = np.cumsum(rng.normal(0.5, 5.0, size=300))
    steps = np.arange(300) * 10
    for goal in np.percentile(returns, [10, 50, 90, 100]):
        window, streamed = GoalWindow(), None
        for step, value in zip(steps, returns, strict=True):
            window.add(value)
            if streamed is None and window.reached(goal):
                streamed = float(step)
        assert streamed == first_crossing(steps, returns, goal)


def test_goal_forecast_follows_a_rising_trend_only():
    forecast = GoalForecast(spacing=100)
    for step in range(0, 1000, 50):  # a point every 100 steps: 0, 100, ..., 900
        forecast.add(step, 0.01 * step - 20)  # the mean rises 1 per 100 steps
    assert len(forecast.history) == 10
    assert forecast.expected_step(-5) == Forecast(pytest.approx(1_500), True)  # -20 + 0.01 * 1500 = -5
    assert forecast.expected_step(-15) is None  # the line passed it before the last point: no forecast
    assert forecast.expected_step(-10.4, now=970) is None  # nor one before the current step (it crosses at 960)
    assert forecast.expected_step(-10.4, now=900).at == pytest.approx(960)
    falling = GoalForecast(spacing=1)
    for step in range(10):
        falling.add(step, -step)
    assert falling.expected_step(0) is None


def test_a_noisy_trend_is_not_a_sure_forecast_and_the_line_says_so():
    """The first minute of a run: the mean barely rises through its noise (it swung 4h08m <-> 108h)."""
    rng = np.random.default_rng(0)
    noisy = GoalForecast(spacing=1)
    for step in range(10):
        noisy.add(step * 1000, -20.5 + 0.0001 * step * 1000 + rng.normal(0, 0.3))
    unsure = noisy.expected_step(18)
    assert unsure is not None and not unsure.sure
    clear = GoalForecast(spacing=1)
    for step in range(10):
        clear.add(step * 1000, -20 + 0.001 * step * 1000 + rng.normal(0, 0.05))
    assert clear.expected_step(-5).sure
    # What the progress line says in each case: the trend, the reference at this rate, or that it is not known.
    assert goal_eta(GoalOutlook(18, Forecast(2000.0, True), 5000.0), 1000, 100) == "(goal 18 at ~2,000 steps, 10s)"
    assert goal_eta(GoalOutlook(18, unsure, 7000.0), 1000, 100) == (
        "(goal 18: the reference run got there at 7,000 steps, ~1m00s at this rate: an estimate)")
    assert goal_eta(GoalOutlook(18, unsure, None), 1000, 100) == "(goal 18: the return's trend is not clear yet)"
    assert goal_eta(GoalOutlook(18, None, None), 1000, 100) == "(goal 18: the return's trend is not clear yet)"


def test_the_pong_preset_carries_its_reference_run_into_the_header():
    cfg = build_config("pong", None, {})
    assert cfg.agent.reference_steps == [2_006_016, 2_331_648, 2_677_760]
    assert stop_clause(cfg) == (", stops at a mean return of 18 over 20 episodes "
                                "(the preset's reference run: at 2,677,760 agent steps)")
    assert reference_step(cfg, 15.0, 2_000_000) == 2_331_648 and reference_step(cfg, 15.0, 2_340_000) is None
    assert build_config("pong", "a2c", {}).agent.reference_steps == []  # PPO's run says nothing of A2C's
    other = build_config("pong", None, {"goals": [10.0, 18.0]})  # not one per goal: not used
    assert reference_step(other, 18.0, 0) is None
    # The reference ran at the preset's batch and rate: another batch, rate or mode gets no estimate from it.
    for changed in ({"n_envs": 64}, {"lr": 7.07e-4}, {"batch": "auto"}):
        assert reference_step(build_config("pong", None, changed), 18.0, 0) is None
    assert build_config("pong", None, {"n_envs": 8, "seed": 3}).agent.reference_steps == [2_006_016, 2_331_648, 2_677_760]
    with pytest.raises(UserError, match="positive and rising"):
        build_config("pong", None, {"reference_steps": [3.0, 2.0, 1.0]})


def test_learning_began_four_standard_errors_of_the_difference_above_the_first_window():
    first = (10.0, 4.0)  # mean 10, sd 4 over 20 episodes
    edge = 4 * math.sqrt((4.0 ** 2 + 3.0 ** 2) / 20)  # sd 3 now: the difference's standard error is 5 / sqrt(20)
    assert not learning_began(first, (10.0 + edge, 3.0))
    assert learning_began(first, (10.0 + edge + 1e-6, 3.0))
    # A first window of zeros, then windows with a few lucky episodes of 2 (MinAtar Seaquest): five 2s give
    # mean 0.5, sd 0.889, standard error 0.199, so 4 of them (0.795) are not learning; ten 2s (mean 1.0) are.
    assert not learning_began((0.0, 0.0), window_stats(GoalWindow([0.0] * 19 + [2.0])))
    assert not learning_began((0.0, 0.0), window_stats(GoalWindow([0.0] * 15 + [2.0] * 5)))
    assert learning_began((0.0, 0.0), window_stats(GoalWindow([0.0] * 10 + [2.0] * 10)))
    assert not learning_began(None, (100.0, 1.0)) and not learning_began(first, None)


def test_the_first_window_waits_for_two_episodes_per_environment():
    """All environments start together, so the first episodes to end are the shortest (MinAtar Breakout's
    scored 0): the baseline is read once every environment has had two episodes."""
    run = SimpleNamespace(state=TrainState(n_envs=16, episodes=31), window=GoalWindow([0.0] * 20), cfg=None)
    note_learning(run)
    assert run.state.first_window is None  # 31 episodes over 16 environments: too early
    run.state.episodes, run.window = 32, GoalWindow([0.0, 1.0] * 10)
    note_learning(run)
    assert run.state.first_window == pytest.approx([0.5, np.std([0.0, 1.0] * 10, ddof=1)])
    assert not run.state.learned
    # Shrunk from 16 to 4 environments before the first window: it still waits for two episodes of each of 16.
    shrunk = SimpleNamespace(state=TrainState(n_envs=16, episodes=20), window=GoalWindow([0.0] * 20), cfg=None)
    note_learning(shrunk)
    shrunk.state.n_envs, shrunk.state.episodes = 4, 31
    note_learning(shrunk)
    assert shrunk.state.first_window is None
    shrunk.state.episodes = 32
    note_learning(shrunk)
    assert shrunk.state.first_window is not None
    window = GoalWindow([1.0, 3.0] * 10)
    assert window_stats(window) == pytest.approx((2.0, np.std([1.0, 3.0] * 10, ddof=1)))
    assert window_stats(GoalWindow([1.0] * 19)) is None
