"""--batch measured on Ray actors: what CI checks of the in-run measurement with a real Ray."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from rlscale import tags
from rlscale.reports.events import read_scalars
from rlscale.training import checkpoint
from tests.conftest import run_in_process

pytestmark = pytest.mark.usefixtures("ray_instance")
SMALL = ["--n-envs", "8", "--branch-window", "400", "--log-interval", "600"]


@pytest.mark.timeout(300)
def test_a_ray_run_measures_twice_logs_the_reading_and_its_cost_and_resizes(tmp_path):
    run_dir = tmp_path / "run"
    # Racing to goals (--progress reach): every branch restarts the actors' environments with one seed.
    result = run_in_process(["rlscale.train", "cartpole", "--batch", "measured", "--progress", "reach", "--goals",
                             "30", "45", "60", "--total-frames", "16000", *SMALL, "--run-dir", str(run_dir)])
    assert result.returncode == 0, result.stderr
    assert "2 Ray actors" in result.stdout or "Ray actor" in result.stdout  # the pool is Ray's, not serial
    lines = [line for line in result.stdout.splitlines() if line.startswith("measured at")]
    assert len(lines) >= 2, result.stdout
    scalars = read_scalars(run_dir)
    steps, counts = scalars[tags.MEASUREMENTS]
    assert list(counts) == list(range(1, len(lines) + 1))
    assert np.all(scalars[tags.MEASURE_SECONDS][1] > 0) and np.all(np.diff(scalars[tags.MEASURE_EXAMPLES][1]) > 0)
    assert tags.MEASURED_BATCH in scalars and np.all(scalars[tags.MEASURED_BATCH][1] > 0)
    for multiplier in (0.5, 1, 2, 4):
        assert tags.BRANCH_PROGRESS.format(multiplier=multiplier) in scalars
    # The first measurement comes before any update is logged: a batch other than the start's 8 is a resize.
    assert set(scalars[tags.N_ENVS][1]) != {8.0}, "the run never left its first batch"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["measurements"] == len(lines) and summary["branch_optimizer_steps"] > 0




def measured_lines(stdout: str) -> list[str]:
    """The measurement lines without their wall times (``... agent steps); 3.2 s, ...``)."""
    parts = [line.split("); ", 1) for line in stdout.splitlines() if line.startswith("measured at")]
    return [reading + after.split(";", 1)[0] for reading, after in parts]


@pytest.mark.timeout(300)
def test_races_side_by_side_read_what_the_races_one_after_the_other_read(tmp_path):
    """--branches-at-once: each race in a Ray task of its own, built from the trunk's state, steps as it would in
    the run's process: a serial run's measurement, and the run after it, are the same (its counters, network and
    noise averages at the end, up to float rounding: a learner picks its gradient route by timing it, and the
    noise meter lets the restarted environments settle alike in both)."""
    runs = {}
    for at_once in (0, 2):
        run_dir = tmp_path / f"at-once-{at_once}"
        result = run_in_process(["rlscale.train", "cartpole", "--serial", "--batch", "measured", "--progress", "reach",
                                 "--goals", "30", "45", "--total-frames", "9000", *SMALL,
                                 "--branches-at-once", str(at_once), "--run-dir", str(run_dir)])
        assert result.returncode == 0, result.stderr
        runs[at_once] = result.stdout, checkpoint.load(checkpoint.latest(run_dir))
    (one_by_one, saved), (side_by_side, saved_at_once) = runs[0], runs[2]
    assert "measurement races 2 at once (Ray tasks on 1 node" in side_by_side and "(2 races at once on 1 node)" in side_by_side
    assert len(measured_lines(side_by_side)) == 1 and measured_lines(side_by_side) == measured_lines(one_by_one)
    def untimed(state: dict) -> dict:  # the trainer's counters without the seconds (the goals' included)
        goals = {g: {k: v for k, v in at.items() if k != "wall_seconds"} for g, at in state["goals"].items()}
        return {k: v for k, v in state.items() if k not in {"wall_seconds", "measure_seconds"}} | {"goals": goals}

    assert untimed(saved_at_once["trainer"]) == untimed(saved["trainer"]) and saved["trainer"]["goals"]
    learner, learner_at_once = saved["engine"]["learner"], saved_at_once["engine"]["learner"]
    assert learner_at_once["updates"] == learner["updates"]
    for part, ema in learner["noise"]["emas"].items():
        assert learner_at_once["noise"]["emas"][part] == pytest.approx(ema, rel=1e-5), part
    for name, tensor in learner["model"].items():
        torch.testing.assert_close(learner_at_once["model"][name], tensor, rtol=1e-5, atol=1e-6)


@pytest.mark.timeout(120)
def test_a_race_that_fails_in_its_process_is_returned_as_its_error_and_the_others_are_read():
    from rlscale.config import build_config
    from rlscale.distributed.ray_branches import RemoteRaces, race_config
    from rlscale.training.engine import NativeEngine
    from rlscale.training.measure import BranchRun

    cfg = build_config("cartpole", None, {"serial": True, "n_envs": 8})
    engine = NativeEngine(cfg, 8)
    try:
        races = RemoteRaces(race_config(engine), at_once=2)
        branches = [BranchRun(1.0, 8, 40.0, 1e-3), BranchRun(0.5, 3, 15.0, 1e-3), BranchRun(2.0, 16, 80.0, 1e-3)]
        outcomes = races.race(engine.snapshot(), branches, 1.0, 400, 20.0, [7, 7, 7])
        races.close()
    finally:
        engine.close()
    assert isinstance(outcomes[1], ValueError) and "n_envs 3" in str(outcomes[1])
    for outcome in (outcomes[0], outcomes[2]):
        assert isinstance(outcome, BranchRun) and outcome.agent_steps > 0 and outcome.end is not None
