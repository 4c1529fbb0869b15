"""Branching (``--init-from``): a run that starts from another run's checkpoint, and the local Pareto fit over branches.

Serial CartPole runs in this process (no Ray): a trunk, then branches of its last checkpoint.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from rlscale import tags
from rlscale.config import build_config, load_saved
from rlscale.reports.runs import WINDOW_SAMPLES
from rlscale.rundir import checkpoint
from rlscale.rundir.branch import load_branch_point
from rlscale.rundir.events import read_scalars
from rlscale.training import trainer
from tests.conftest import run_in_process
from tests.test_cli import assert_one_line_error

SERIAL = ["--pool", "serial", "--learner-threads", "1", "--learner-precision", "fp32", "--actor-precision", "fp32",
          "--log-interval", "600"]


def train(*args: str) -> None:
    result = run_in_process(["rlscale.train", "cartpole", *SERIAL, *args])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def trunk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CartPole run of 12,000 agent steps at 8 environments, lr 1e-3: the branches' trunk."""
    run_dir = tmp_path_factory.mktemp("trunk") / "trunk"
    train("--total-frames", "12000", "--lr", "1e-3", "--run-dir", str(run_dir))
    return run_dir


def test_a_branch_starts_from_the_trunks_network_and_optimizer_state_with_its_counters_at_zero(trunk, tmp_path):
    saved = checkpoint.load(checkpoint.latest(trunk))["engine"]["learner"]
    cfg = build_config("cartpole", None, {"init_from": str(trunk), "n_envs": 16, "lr": 3e-3, "seed": 5,
                                          "pool": "serial", "learner_threads": 1, "learner_precision": "fp32",
                                          "actor_precision": "fp32"})
    branch = load_branch_point(cfg)
    assert branch.agent_steps == checkpoint.step_of(checkpoint.latest(trunk)) >= 12_000
    run = trainer.build(cfg, tmp_path / "branch", branch=branch)
    try:
        learner = run.engine.learner
        for name, value in learner.model.state_dict().items():
            assert torch.equal(value, saved["model"][name]), name
        theirs, ours = saved["optimizer"]["state"], learner.optimizer.state_dict()["state"]
        assert theirs.keys() == ours.keys() and theirs
        for key in theirs:  # RMSprop's running mean square, per parameter
            assert torch.equal(ours[key]["square_avg"], theirs[key]["square_avg"])
        assert (learner.updates, run.state.agent_steps, run.state.examples, run.state.goals) == (0, 0, 0, {})
        assert run.engine.noise.b_simple("total") is None  # the trunk's noise averages stay behind
        assert (run.state.n_envs, run.state.base_lr) == (16, 3e-3)
    finally:
        run.engine.close()
        run.logger.close()


def test_a_branch_run_counts_from_the_branch_point_and_names_its_trunk(trunk, tmp_path):
    result = run_in_process(["rlscale.train", "cartpole", *SERIAL, "--init-from", str(trunk), "--total-frames",
                             "2000", "--n-envs", "4", "--run-dir", str(tmp_path / "b")])
    assert result.returncode == 0, result.stderr
    latest = checkpoint.latest(trunk)
    assert f"branched from {latest} ({checkpoint.step_of(latest):,} agent steps" in result.stdout
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert 2000 <= summary["agent_steps"] < 2000 + 4 * 5  # its own budget from zero, not the trunk's 12,000 on
    assert summary["updates"] == summary["agent_steps"] // 20
    # The very checkpoint, so a trunk that trains on does not move the branch point of later branches.
    assert Path(load_saved(tmp_path / "b" / "config.toml").run.init_from) == latest.resolve()


def test_a_resumed_branch_continues_from_its_own_checkpoint(trunk, tmp_path):
    branch = tmp_path / "b"
    train("--init-from", str(trunk), "--total-frames", "2000", "--n-envs", "4", "--run-dir", str(branch))
    first = checkpoint.load(checkpoint.latest(branch))["engine"]["learner"]["model"]
    result = run_in_process(["rlscale.train", "--resume", str(branch), "--total-frames", "4000"])
    assert result.returncode == 0, result.stderr
    assert "branched from" not in result.stdout and "resuming from 2,000 agent steps" in result.stdout
    scalars = read_scalars(branch)
    steps = scalars[tags.UPDATES][0]
    assert steps.min() < 2000 < steps.max() <= 4000 + 20  # one run, continued, from its own steps
    assert not all(torch.equal(v, first[k]) for k, v in
                   checkpoint.load(checkpoint.latest(branch))["engine"]["learner"]["model"].items())


@pytest.mark.parametrize("args, fragments", [
    (["--init-from", "/nonexistent/run"], ["--init-from /nonexistent/run does not exist"]),
    (["--init-from", "{empty}"], ["no checkpoint in"]),
    (["--init-from", "{trunk}", "--agent", "ppo"], ["was trained with algo a2c", "a branch must share them"]),
    (["--init-from", "{trunk}", "--backend", "rllib"], ["--init-from starts the native engine's one learner"]),
])
def test_bad_init_from_is_one_line_and_writes_nothing(args, fragments, trunk, tmp_path):
    (tmp_path / "empty").mkdir()
    args = [a.format(trunk=trunk, empty=tmp_path / "empty") for a in args]
    result = run_in_process(["rlscale.train", "cartpole", *SERIAL, *args, "--run-dir", str(tmp_path / "run")])
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("args, fragments", [
    (["--init-from", "/nonexistent/run"], ["--init-from /nonexistent/run does not exist"]),
    (["--init-from", "{trunk}", "--agent", "ppo"], ["was trained with algo a2c"]),
])
def test_a_sweep_refuses_a_bad_trunk_before_any_trial(args, fragments, trunk, tmp_path):
    args = [a.format(trunk=trunk) for a in args]
    result = run_in_process(["rlscale.sweep", "cartpole", "--batch-sizes", "20", "40", *args,
                             "--sweep-dir", str(tmp_path / "sweep")])
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "sweep").exists()


def test_pareto_over_branches_reads_the_trunks_noise_scales_at_the_branch_point(trunk, tmp_path):
    sweep = tmp_path / "branches"
    for n_envs in (4, 8, 16):  # batches of 20, 40, 80 observations
        for seed in (0, 1):
            train("--init-from", str(trunk), "--n-envs", str(n_envs), "--seed", str(seed), "--total-frames", "40000",
                  "--stop-return", "60", "--goals", "60", "--run-dir", str(sweep / f"b{n_envs * 5}-s{seed}"))
    result = run_in_process(["rlscale", "pareto", str(sweep), "--goals", "60"])
    assert result.returncode == 0, result.stderr
    ckpt, step = checkpoint.latest(trunk), checkpoint.step_of(checkpoint.latest(trunk))
    head = re.search(rf"branched from {re.escape(str(ckpt))} at {step:,} agent steps.*last stretch, "
                     rf"([\d,]+)-{step:,} agent steps", result.stdout)
    assert head, result.stdout
    since = float(head.group(1).replace(",", ""))
    b_crit = float(next(row for row in _csv(sweep / "pareto.csv") if float(row["goal"]) == 60)["B_crit"])
    assert np.isfinite(b_crit)
    # Read back independently: the last running average logged by the fork, and appendix D's average over
    # the stretch (each update weighted by 1/(1 + B/batch), the full-batch steps it made).
    steps, values = read_scalars(trunk)[tags.signal_tag("total")]
    reading = values[steps <= step][-1]
    stretch = appendix_d_average(trunk, since, step)
    line = next(line for line in result.stdout.splitlines() if line.strip().startswith("B_simple total"))
    assert line.strip() == (f"B_simple total {reading:,.0f} (goal 60: {reading / b_crit:.2f}) | "
                            f"{stretch:,.0f} (goal 60: {stretch / b_crit:.2f})"), line
    assert (sweep / "bcrit_vs_bsimple.png").stat().st_size > 0
    # Any CartPole policy scores 10: every branch meets it with its first 20 episodes, and pareto says so.
    result = run_in_process(["rlscale", "pareto", str(sweep), "--goals", "10"])
    assert result.returncode == 0, result.stderr
    flagged = [line.strip() for line in result.stdout.splitlines() if "met it with its first 20 episodes" in line]
    assert [line.split(" (lr")[0] for line in flagged] == ["goal 10: batch 20", "goal 10: batch 40", "goal 10: batch 80"]
    assert all(line.endswith("in 2 of 2 seeds") for line in flagged), flagged


def test_pareto_cells_prints_each_cells_noise_scales_up_to_the_goal(trunk, tmp_path):
    sweep = tmp_path / "branches"
    for n_envs, lr in ((4, 1e-3), (4, 3e-3), (8, 1e-3)):
        for seed in (0, 1, 2):
            train("--init-from", str(trunk), "--n-envs", str(n_envs), "--lr", str(lr), "--seed", str(seed),
                  "--total-frames", "3000", "--goals", "60", "--set", "curvature_every=10",
                  "--run-dir", str(sweep / f"b{n_envs}-{lr}-s{seed}"))
    result = run_in_process(["rlscale", "pareto", str(sweep), "--goals", "1e9", "--cells"])
    assert result.returncode == 2  # no run reaches 1e9: the fit has nothing, but the cells print first
    lines = result.stdout.splitlines()
    first = lines.index("noise scales averaged up to goal 1e+09 (median over seeds; * a seed fell short, read to "
                        "its end):")
    cells = {tuple(line.split()[:2]): line.split() for line in lines[first + 2:first + 5]}
    assert set(cells) == {("20", "0.001"), ("20", "0.003"), ("40", "0.001")}
    runs = [sweep / f"b4-0.003-s{seed}" for seed in (0, 1, 2)]
    expected = np.median([appendix_d_average(run, -np.inf, np.inf) for run in runs])
    assert cells[("20", "0.003")][2:4] == ["1.50e-04*", f"{expected:,.0f}"]  # every seed fell short of 1e9
    # The last column: appendix C's equilibrium G^T P G, lr tr(PHP Sigma) / 2B, over the measured G^T P G.
    assert lines[first + 1].endswith("equilibrium share")
    shares = [share for run in runs if (share := equilibrium_share(run)) is not None]
    assert shares and cells[("20", "0.003")][-1] == f"{np.median(shares):.2f}"


def equilibrium_share(run_dir: Path) -> float | None:
    """Mean over the measured updates of lr tr(PHP Sigma) / 2B, over the mean G^T P G (None unless both > 0),
    lr scaled by min(1, 0.5 / |g|): CartPole's gradient clipping at norm 0.5."""
    scalars = read_scalars(run_dir)
    steps, gpg = scalars["noise/gpg"]
    rate = np.interp(steps, *scalars[tags.LR]) * np.minimum(1, 0.5 / np.interp(steps, *scalars[tags.GRAD_NORM]))
    held = (rate * np.interp(steps, *scalars["noise/trace_php_sigma"])
            / (2 * np.interp(steps, *scalars[tags.OPTIMIZER_BATCH])))
    return float(held.mean() / gpg.mean()) if held.mean() > 0 and gpg.mean() > 0 else None


def appendix_d_average(run_dir: Path, since: float, until: float) -> float:
    """B_simple of the total loss averaged over (since, until]: windows of WINDOW_SAMPLES measurements (a
    new logged |G|^2 average each), each reading mean tr(Sigma) / mean |G|^2 over its updates and weighted
    by its updates' 1/(1 + B/batch)."""
    scalars = read_scalars(run_dir)
    steps, grad = scalars[tags.noise("grad_sq", "total")]
    keep = (steps > since) & (steps <= until)
    steps, grad = steps[keep], grad[keep]
    trace = np.interp(steps, *scalars[tags.noise("trace_sigma", "total")])
    batch = np.interp(steps, *scalars[tags.OPTIMIZER_BATCH])
    new = np.flatnonzero(np.r_[True, np.diff(grad) != 0])  # where each measurement's update begins
    count = len(new) // WINDOW_SAMPLES or 1
    bounds = [new[-(-len(new) * w // count)] for w in range(count)] + [len(steps)]  # sample i: window i*count//n
    total = weight = 0.0
    for start, end in itertools.pairwise(bounds):
        if grad[start:end].mean() <= 0 or trace[start:end].mean() <= 0:
            continue  # no noise scale in this window
        reading = trace[start:end].mean() / grad[start:end].mean()
        progress = np.sum(1 / (1 + reading / batch[start:end]))
        total, weight = total + progress * reading, weight + progress
    return total / weight


def _csv(path: Path) -> list[dict[str, str]]:
    import csv

    with path.open() as fh:
        return list(csv.DictReader(fh))
