"""Population Based Training over batch and rate (rlscale.pbt) on real Ray Tune and real CartPole runs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from rlscale.pbt import PBT_FILE, Segment, population_totals, read_segments, segment_seed
from tests.conftest import run_command, run_in_process
from tests.test_cli import assert_one_line_error

# slow: Population Based Training through Ray Tune (CI runs it: .ci/run).
pytestmark = pytest.mark.slow


def segment(member: int, index: int, steps: int, cpu: float = 1.0) -> Segment:
    return Segment(member, index, 50, 1e-3, segment_seed(0, member, index), "", steps, steps, steps // 50,
                   cpu, cpu, None, steps, False)


def test_the_populations_cost_is_every_segment_of_every_member():
    cut = replace(segment(1, 1, 300, 0.1), cut_short=True)  # stopped mid-way: counted to its last checkpoint
    totals = population_totals([segment(0, 0, 1000, 0.5), segment(0, 1, 2000, 1.0), segment(1, 0, 500, 0.25), cut],
                               gap_steps=250)
    assert totals == {"segments": 4, "cut_short": 1, "agent_steps": 3800, "examples": 3800, "updates": 76,
                      "cpu_seconds": 1.9, "agent_steps_at_most": 4050}


def test_every_segment_of_a_population_has_a_seed_of_its_own():
    seeds = {segment_seed(seed, member, index) for seed in range(3) for member in range(8) for index in range(50)}
    assert len(seeds) == 3 * 8 * 50


@pytest.fixture(scope="module")
def population(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("pbt") / "cartpole"
    result = run_command(["rlscale.pbt", "cartpole", "--members", "2", "--interval", "3000", "--batch-sizes", "20",
                          "40", "80", "--stop-return", "475", "--total-frames", "9000", "--seed", "3",
                          "--pbt-dir", str(folder)], timeout=200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "goal 475 not reached; the population ran" in result.stdout, result.stdout
    return folder


def test_pbt_members_train_in_segments_and_the_worse_takes_the_betters_checkpoint(population):
    segments = read_segments(population)
    by_name = {f"m{s.member}s{s.index}": s for s in segments}
    assert {s.member for s in segments} == {0, 1}
    exploits = 0
    for s in segments:
        if s.index == 0:
            assert s.started_from == "" and s.lineage_steps == s.agent_steps
            continue
        source = Path(s.started_from).name.removeprefix("from-").removesuffix(".pt")
        # A segment continues from the end of one segment before it: its own member's last, or (exploit) the
        # better member's; the lineage's steps run on through the checkpoint it took.
        assert s.lineage_steps == by_name[source].lineage_steps + s.agent_steps, s
        exploits += not source.startswith(f"m{s.member}s")
    assert exploits >= 1, [(s.member, s.index, s.started_from) for s in segments]
    assert all(s.lineage_steps <= 9000 + 3000 for s in segments)  # the budget stops a lineage


def test_pbt_counts_what_every_member_ran_from_the_segments_own_runs(population):
    report = json.loads((population / PBT_FILE).read_text())
    runs = [json.loads(p.read_text()) for p in population.glob("member*/segment*/summary.json")]
    assert report["cost"]["agent_steps"] == sum(r["agent_steps"] for r in runs) > 0
    assert report["cost"]["examples"] == sum(r["examples"] for r in runs)
    assert report["cost"]["segments"] == len(runs) == len(report["segments"]) >= 4
    assert report["reached"] is False and report["winner"] is None


def test_a_population_does_not_start_over_one_that_ran(population):
    before = sorted(str(path) for path in population.rglob("*"))
    result = run_in_process(["rlscale.pbt", "cartpole", "--members", "2", "--interval", "3000", "--batch-sizes",
                             "20", "40", "--stop-return", "475", "--pbt-dir", str(population)])
    assert_one_line_error(result, "already holds a population's segments", "give another --pbt-dir")
    assert result.stdout == ""  # refused before the population's first line
    assert sorted(str(path) for path in population.rglob("*")) == before  # nothing of the first one touched


@pytest.mark.parametrize("args, fragments", [
    (["--members", "1", "--interval", "5000", "--batch-sizes", "40", "--stop-return", "475"], ["at least 2 members"]),
    (["--interval", "5000", "--batch-sizes", "40"], ["--stop-return"]),
    (["--interval", "100", "--batch-sizes", "40", "400", "--stop-return", "475"], ["shorter than one update"]),
    (["--interval", "5000", "--batch-sizes", "7", "--stop-return", "475"], ["not a whole number"]),
    (["--interval", "5000", "--batch-sizes", "40", "--stop-return", "475", "--n-envs", "8"], ["set per member"]),
    (["--interval", "5000", "--batch-sizes", "40", "--stop-return", "475", "--lr-range", "1e-2", "1e-3"],
     ["0 < LOW < HIGH"]),
    (["--interval", "5000", "--batch-sizes", "40", "--stop-return", "475", "--backend", "rllib"], ["native engine"]),
    (["--interval", "5000", "--batch-sizes", "40", "--stop-return", "475", "--init-from", "/nonexistent/trunk"],
     ["does not exist"]),
])
def test_pbt_bad_input_is_one_line(args, fragments, tmp_path):
    assert_one_line_error(run_in_process(["rlscale.pbt", "cartpole", *args, "--pbt-dir", str(tmp_path / "p")]),
                          *fragments)
    assert not (tmp_path / "p").exists()  # refused before anything was written


def test_a_population_stops_when_a_member_meets_a_goal_the_preset_does_not_list(tmp_path):
    folder = tmp_path / "pbt"
    # Segments long enough to end 20 episodes at 150 (a segment's window counts only its own episodes).
    result = run_command(["rlscale.pbt", "cartpole", "--members", "2", "--interval", "10000", "--batch-sizes", "20",
                          "40", "--stop-return", "150", "--total-frames", "60000", "--seed", "1",
                          "--pbt-dir", str(folder)], timeout=200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # CartPole's goals are 100, 200, 400 and 475: a segment stopped at 150 has only met 100 of them.
    assert "goal 150 reached by member" in result.stdout, result.stdout
    report = json.loads((folder / PBT_FILE).read_text())
    # What the other member ran until the stop counts too: its cut segment to its last checkpoint.
    runs = [json.loads(p.read_text()) for p in folder.glob("member*/segment*/summary.json")]
    assert report["cost"]["agent_steps"] == sum(r["agent_steps"] for r in runs)
    winner = report["winner"]
    assert report["reached"] and winner["reached"] and winner["mean_return"] >= 150
    assert report["cost"]["agent_steps"] < 2 * 60000  # it stopped at the goal, not at the budgets
