"""The sweep and Pareto commands end to end on a tiny real CartPole sweep (Ray Tune, real runs)."""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import pytest

from rlscale.config import build_config, dumps_toml, parse_with_config
from rlscale.errors import UserError
from rlscale.reports.runs import load_run
from rlscale.sweep import Trial, parser, planned_trials, resumed_config, trial_config, trial_state
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


def test_sweep_runs_every_trial_in_its_own_directory(sweep_dir):
    trials = sorted(p.name for p in sweep_dir.iterdir() if (p / "config.toml").is_file())
    assert trials == ["b10-lr0.0028-s0", "b20-lr0.0028-s0", "b40-lr0.0028-s0"]  # the preset's A2C rate
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
    shutil.copytree(sweep_dir / "b40-lr0.0028-s0", copy)
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


def test_auto_trials_start_at_their_batch_with_the_presets_bounds(tmp_path):
    """--auto starts at the preset's batch, --auto-from at the given ones; fixed trials stay fixed."""
    auto = trial_config("minatar-breakout", None, {}, Trial(320, 1e-2, 0, "auto"), tmp_path / "a")
    assert (auto.control.batch, auto.env.n_envs, auto.control.max_envs) == ("auto", 64, 256)
    assert auto.env.vector_size == 4 and auto.pool.in_this_process and auto.pool.actor_precision == "fp32"
    preset = trial_config("minatar-breakout", None, {}, Trial(80, 1e-2, 0, "auto"), tmp_path / "b")
    assert preset.env.n_envs == 16
    fixed = trial_config("minatar-breakout", None, {}, Trial(320, 1e-2, 0), tmp_path / "c")
    assert (fixed.control.batch, fixed.env.n_envs, fixed.control.min_envs) == ("fixed", 64, 64)


def test_a_resumed_trial_keeps_the_settings_it_ran_with_not_todays_defaults(tmp_path):
    """A trial saved before cost_outlier_factor existed ran fitting every size: resumed by a re-run sweep it goes on
    so, with the sweep's new budget (what a resume may change) and where the trial now lies."""
    run_dir = tmp_path / "auto-b320"
    run_dir.mkdir()
    ran = trial_config("minatar-breakout", None, {"total_frames": 100_000}, Trial(320, 1e-2, 0, "auto"), run_dir)
    saved = "\n".join(line for line in dumps_toml(ran).splitlines() if not line.startswith("cost_outlier_factor"))
    (run_dir / "config.toml").write_text(saved)
    rebuilt = trial_config("minatar-breakout", None, {"total_frames": 200_000, "noise_horizon": 5_000},
                           Trial(320, 1e-2, 0, "auto"), run_dir)
    assert rebuilt.control.cost_outlier_factor == 1.5  # today's default
    resumed = resumed_config(rebuilt)
    assert resumed.control.cost_outlier_factor == math.inf and resumed.noise.noise_horizon == ran.noise.noise_horizon
    assert resumed.env.total_frames == 200_000 and resumed.run.run_dir == rebuilt.run.run_dir
    assert resumed_config(trial_config("cartpole", None, {}, Trial(80, 7e-4, 0), tmp_path / "new")).env.env_id \
        == "CartPole-v1"  # a trial with no saved config is the sweep's own


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
