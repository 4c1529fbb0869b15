"""The sweep and Pareto commands end to end on a tiny real CartPole sweep (Ray Tune, real runs)."""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from rlscale.config import build_config, parse_with_config
from rlscale.errors import UserError
from rlscale.goals import (
    Forecast,
    GoalForecast,
    GoalOutlook,
    GoalWindow,
    first_crossing,
    smoothed_returns,
)
from rlscale.reports.runs import load_run
from rlscale.sweep import Trial, parser, planned_trials, trial_config, trial_state
from rlscale.training.logger import goal_eta
from rlscale.training.trainer import reference_step, stop_clause
from tests.conftest import run_command, run_in_process
from tests.test_cli import assert_one_line_error

# slow: sweeps through Ray Tune (CI runs it: .ci/run).
pytestmark = pytest.mark.slow

GOALS = ["25", "40"]


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sweep") / "cartpole"
    result = run_command(["rlscale.sweep", "cartpole", "--batch-sizes", "10", "20", "40",
                          "--total-frames", "12000", "--goals", *GOALS, "--sweep-dir", str(folder)],
                         timeout=280)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return folder


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


def test_sweep_runs_every_trial_in_its_own_directory(sweep_dir):
    trials = sorted(p.name for p in sweep_dir.iterdir() if (p / "config.toml").is_file())
    assert trials == ["b10-lr0.0007-s0", "b20-lr0.0007-s0", "b40-lr0.0007-s0"]
    for name, n_envs in zip(trials, (2, 4, 8), strict=True):
        summary = json.loads((sweep_dir / name / "summary.json").read_text())
        assert summary["finished"] and summary["n_envs"] == n_envs
        assert trial_state(sweep_dir / name) == "finished"
        # The trials' wall times are compared: the same precision for all, not timed per trial.
        assert 'learner_precision = "fp32"' in (sweep_dir / name / "config.toml").read_text()
    assert json.loads((sweep_dir / "sweep.json").read_text())["trials"][0]["batch_size"] == 10


def test_sweep_rerun_skips_finished_trials(sweep_dir):
    # In this process: the sweep's real process run is the fixture's, and a rerun returns before Ray starts.
    result = run_in_process(["rlscale.sweep", "cartpole", "--batch-sizes", "10", "20", "40",
                             "--total-frames", "12000", "--goals", *GOALS, "--sweep-dir", str(sweep_dir)])
    assert result.returncode == 0, result.stderr
    assert "3 finished, 0 to resume, 0 new" in result.stdout and "nothing to do" in result.stdout


def test_pareto_writes_table_csv_and_plots(sweep_dir, tmp_path):
    result = run_in_process(["rlscale", "pareto", str(sweep_dir), "--goals", *GOALS, "--out-dir", str(tmp_path)])
    assert result.returncode == 0, result.stderr
    assert "3 fixed-batch runs at 3 batch sizes" in result.stdout
    rows = {r["goal"]: r for r in csv.DictReader((tmp_path / "pareto.csv").open())}
    assert set(rows) == set(GOALS)
    fitted = [r for r in rows.values() if r["B_crit"] != ""]
    assert fitted, "no goal could be fitted"
    # The fit against the trials' own data, read back without rlscale.pareto: eq. 2.11 fitted by least
    # squares of r_i = log S_i - log S_min - log(1 + B_crit / B_i) has d/d(log S_min) = -sum(r_i) = 0 at its
    # optimum, so the residuals of the written S_min and B_crit must sum to zero on the trials' S and B.
    trials = [load_run(path) for path in sorted(sweep_dir.glob("b*-lr*-s*"))]
    for row in fitted:
        hits = [(run.goal(float(row["goal"])), run) for run in trials]
        s_and_b = [(hit.updates, hit.examples / hit.updates) for hit, run in hits if hit is not None]
        s_min, b_crit = float(row["S_min"]), float(row["B_crit"])
        residuals = [math.log(s) - math.log(s_min) - math.log1p(b_crit / b) for s, b in s_and_b]
        assert abs(sum(residuals)) < 1e-3 * len(residuals), residuals
        assert float(row["B_crit s.e."]) >= 0
    for name in ("pareto_fronts.png", "bcrit_vs_bsimple.png"):
        assert (tmp_path / name).stat().st_size > 10_000


def test_trial_state_tells_resumable_from_finished(sweep_dir, tmp_path):
    copy = tmp_path / "trial"
    shutil.copytree(sweep_dir / "b40-lr0.0007-s0", copy)
    summary = json.loads((copy / "summary.json").read_text())
    (copy / "summary.json").write_text(json.dumps({**summary, "finished": False}))
    assert trial_state(copy) == "resumable"
    shutil.rmtree(copy / "checkpoints")
    assert trial_state(copy) == "new"


def test_sweep_and_pareto_bad_input(sweep_dir, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [
        (["rlscale", "pareto", str(empty)], ["no run directories"]),
        (["rlscale", "pareto", str(sweep_dir), "--goals", "100000"], ["no run reached any goal"]),
        (["rlscale.sweep", "cartpole", "--batch-sizes", "7"], ["batch size 7 is not a whole number"]),
        (["rlscale.sweep", "cartpole", "--auto-from", "7"], ["batch size 7 is not a whole number"]),
        (["rlscale.sweep", "cartpole", "--auto-from", "0"], ["must be positive"]),
        (["rlscale.sweep", "cartpole", "--critical-from", "0"], ["must be positive"]),
        (["rlscale.sweep", "cartpole", "--batch-sizes", "10", "--lr", "0.1"], ["set per trial"]),
        (["rlscale.sweep", "cartpole"], ["--batch-sizes"]),
        (["rlscale.sweep", "nonesuch", "--batch-sizes", "10"], ["unknown environment"]),
    ]
    (first_args, first_fragments), *rest = cases
    assert_one_line_error(run_command(first_args, timeout=60), *first_fragments)  # a real python -m
    for args, fragments in rest:
        assert_one_line_error(run_in_process(args), *fragments)


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
    with pytest.raises(UserError, match="positive and rising"):
        build_config("pong", None, {"reference_steps": [3.0, 2.0, 1.0]})


def test_auto_trials_start_at_their_batch_with_the_presets_bounds(tmp_path):
    """--auto starts at the preset's batch, --auto-from at the given ones; fixed trials stay fixed."""
    auto = trial_config("minatar-breakout", None, {}, Trial(320, 1e-2, 0, "auto"), tmp_path / "a")
    assert (auto.control.batch, auto.env.n_envs, auto.control.max_envs) == ("auto", 64, 256)
    assert auto.env.vector_size == 4 and auto.pool.in_this_process and auto.pool.actor_precision == "fp32"
    preset = trial_config("minatar-breakout", None, {}, Trial(80, 1e-2, 0, "auto"), tmp_path / "b")
    assert preset.env.n_envs == 16
    fixed = trial_config("minatar-breakout", None, {}, Trial(320, 1e-2, 0), tmp_path / "c")
    assert (fixed.control.batch, fixed.env.n_envs, fixed.control.min_envs) == ("fixed", 64, 64)


def test_a_cluster_clock_sweep_runs_auto_trials_and_refuses_fixed_ones_without_a_fit(tmp_path):
    """--cluster-nodes reaches every trial: auto trials fit their own T(B); a fixed trial needs cluster_fit."""
    overrides = {"cluster_nodes": 16}
    auto = trial_config("cartpole", None, overrides, Trial(80, 7e-4, 0, "auto"), tmp_path / "a")
    assert (auto.control.batch, auto.control.cluster_nodes) == ("auto", 16)
    with pytest.raises(UserError, match="--cluster-nodes with a fixed batch"):
        trial_config("cartpole", None, overrides, Trial(80, 7e-4, 0), tmp_path / "b")
    fitted = trial_config("cartpole", None, {**overrides, "cluster_fit": "0.007,0.00002"}, Trial(80, 7e-4, 0),
                          tmp_path / "c")
    assert fitted.control.cluster_cost() == (0.007, 0.00002)


def test_the_grid_holds_fixed_auto_and_critical_trials_at_every_rate_and_seed():
    argv = ["minatar-breakout", "--batch-sizes", "320", "80", "--lrs", "0.02", "0.01", "--seeds", "1", "0",
            "--auto", "--auto-from", "80", "1280", "--critical-from", "160"]
    args, overrides = parse_with_config(parser(), argv)
    grid = planned_trials(args, build_config("minatar-breakout", None, overrides))
    names = [t.name for t in grid]
    assert len(names) == len(set(names)) == (2 + 2 + 1) * 2 * 2  # fixed 80, 320; auto 80, 1280; critical 160
    assert names[:4] == ["b80-lr0.01-s0", "b80-lr0.01-s1", "b80-lr0.02-s0", "b80-lr0.02-s1"]
    assert {t.batch_size for t in grid if t.mode == "auto"} == {80, 1280}  # --auto's preset 80 named once
    critical = [t for t in grid if t.mode == "critical"]
    assert [t.name for t in critical][0] == "critical-b160-lr0.01-s0" and len(critical) == 4
    cfg = trial_config("minatar-breakout", None, overrides, critical[0], Path("/tmp/unused"))
    assert (cfg.control.batch, cfg.env.n_envs, cfg.control.max_envs) == ("critical", 32, 256)
