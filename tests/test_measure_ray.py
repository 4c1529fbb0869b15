"""``rlscale measure --at-once N``: races side by side as Ray tasks, on a real Ray (one after the other in this
process: tests/test_measure.py)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_in_process

pytestmark = pytest.mark.usefixtures("ray_instance")


@pytest.mark.timeout(300)
def test_races_side_by_side_on_ray_read_what_the_races_one_after_the_other_read(tmp_path):
    """Each race a Ray task with an engine of its own, from the checkpoint's state and its own seeds: the same
    examples as the same races in this process, so the same reading, with its interval and its cost."""
    run_dir = tmp_path / "run"
    trained = run_in_process(["rlscale.train", "cartpole", "--pool", "serial", "--goals", "30", "--stop-return", "30",
                              "--n-envs", "8", "--log-interval", "600", "--run-dir", str(run_dir)])
    assert trained.returncode == 0, trained.stderr
    races = ["--goal", "60", "--batches", "0.5", "1", "2", "--races", "2", "--cap-updates", "400"]
    results, saved = {}, {}
    for at_once in (1, 2):
        out = tmp_path / f"at-once-{at_once}.json"
        results[at_once] = run_in_process(["rlscale.measure", str(run_dir), *races, "--at-once", str(at_once),
                                           "--out", str(out)])
        assert results[at_once].returncode == 0, results[at_once].stdout + results[at_once].stderr
        saved[at_once] = json.loads(out.read_text())
    side_by_side = results[2].stdout
    assert "racing 2 races at once (Ray tasks on 1 node" in side_by_side  # Ray ran them, not this process
    assert "racing" not in results[1].stdout
    assert all(r["node"] for r in saved[2]["races"]) and not any(r["node"] for r in saved[1]["races"])

    def by_race(measurement: dict) -> dict:
        return {(r["n_envs"], r["run"]): (r["examples"], r["optimizer_steps"], r["reached"])
                for r in measurement["races"]}

    assert by_race(saved[2]) == by_race(saved[1]) and len(by_race(saved[1])) == 6
    assert saved[2]["reading"] == saved[1]["reading"]
    line = next(line for line in side_by_side.splitlines() if line.startswith("measured at"))
    assert "B_crit" in line and ("90 %" in line or "only a bound" in line)
    assert any(line.startswith("cost: 6 races: ") for line in side_by_side.splitlines())
