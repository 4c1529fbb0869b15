"""--batch measured on Ray actors: what CI checks of the in-run measurement with a real Ray."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlscale import tags
from rlscale.reports.events import read_scalars
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


