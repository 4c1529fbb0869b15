"""``rlscale measure RUN``: the critical batch at a checkpoint, read by racing branches to a goal, on a real
CartPole run with its races one after the other in this process (side by side on Ray: tests/test_measure_ray.py)."""

from __future__ import annotations

import json
import math
import signal

import pytest

from rlscale.training.races import BranchRun, pooled_races, read_reach
from tests.conftest import interrupt_when, run_in_process, train_subprocess

# 3 batches (4, 8 and 16 environments of 5 steps: 20-80 observations) raced once each to 60 from a checkpoint at 30.
RACES = ["--goal", "60", "--batches", "0.5", "1", "2", "--races", "1", "--cap-updates", "400", "--at-once", "1"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A short CartPole A2C run (8 envs x 5 steps) past a mean return of 30, with its checkpoints; at 7e-4 with
    the square-root rule (the preset keeps its rate on resizes), so that the races' rates differ."""
    run_dir = tmp_path_factory.mktemp("measure") / "run"
    result = run_in_process(["rlscale.train", "cartpole", "--pool", "serial", "--goals", "30", "--stop-return", "30",
                             "--n-envs", "8", "--lr", "7e-4", "--set", "lr_alpha=0.5", "--log-interval", "600",
                             "--run-dir", str(run_dir)])
    assert result.returncode == 0, result.stderr
    return run_dir


def _branch(batch: float, examples: int, reached: bool = True) -> BranchRun:
    return BranchRun(multiplier=batch / 40, n_envs=int(batch // 5), batch=batch, lr=1e-3, agent_steps=examples,
                     examples=examples, optimizer_steps=round(examples / batch), reached=reached)


def test_races_read_bcrit_from_the_examples_each_batch_took_to_the_goal():
    """Examples to a goal on eq. 2.11's front, E = E_min(1 + B/B_crit), B_crit 85: the read-out recovers it, its
    interval holds it and widens when the examples scatter; a batch one of whose races missed the goal is left out
    whatever it spent; fed each batch doubled, it reads 2x; two batches are solved exactly, without an interval."""
    batches = [20.0, 40.0, 80.0, 160.0, 320.0, 640.0]
    on_front = [_branch(b, round(5_000 * (1 + b / 85))) for b in batches]
    reading, (low, high) = read_reach(on_front)
    assert reading.critical_batch == pytest.approx(85, rel=0.01) and reading.bound == ""
    assert low <= 85 <= high and high / low < 1.05
    scatter = (1.3, 0.8, 1.2, 0.7, 1.25, 0.9)
    scattered = [_branch(b.batch, round(b.examples * f)) for b, f in zip(on_front, scatter, strict=True)]
    low_s, high_s = read_reach(scattered)[1]
    assert high_s / low_s > 2 * high / low
    # Two races a batch, 1.2x either side of the front: pooled by geometric means, as a sweep's seeds are.
    raced = [_branch(b.batch, round(b.examples * f)) for b in on_front for f in (1.2, 1 / 1.2)]
    missed_one = [*raced, _branch(1280.0, 9_000), _branch(1280.0, 1_000, reached=False)]
    assert [b for b, _, _ in pooled_races(missed_one)] == batches
    assert read_reach(missed_one)[0].critical_batch == pytest.approx(85, rel=0.02)
    pair, pair_interval = read_reach(on_front[1:3])
    assert pair.critical_batch == pytest.approx(85, rel=0.02) and all(math.isnan(end) for end in pair_interval)
    doubled = [_branch(2 * b.batch, b.examples) for b in on_front]
    assert read_reach(doubled)[0].critical_batch == pytest.approx(170, rel=0.02)


@pytest.mark.timeout(240)
def test_a_measurement_prints_its_reading_interval_and_cost_and_writes_them_without_touching_the_run(trained,
                                                                                                    tmp_path):
    before = sorted(p.name for p in trained.rglob("*"))
    summary_before = (trained / "summary.json").read_text()
    out = tmp_path / "m.json"
    result = run_in_process(["rlscale.measure", str(trained), *RACES, "--out", str(out)])
    assert result.returncode == 0, result.stdout + result.stderr
    saved = json.loads(out.read_text())
    races = saved["races"]
    assert [r["n_envs"] for r in races] == [4, 8, 16] and all(r["reached"] for r in races)
    # Each race at the square-root rule's rate from the run's 7e-4 at 8 envs.
    assert [r["lr"] for r in races] == pytest.approx([7e-4 * 0.5 ** 0.5, 7e-4, 7e-4 * 2 ** 0.5])
    reading = saved["reading"]
    again, (low, high) = read_reach([BranchRun(**r) for r in races])
    assert reading["critical_batch"] == pytest.approx(again.critical_batch)
    line = next(line for line in result.stdout.splitlines() if line.startswith("measured at"))
    assert "to 60: B_crit" in line and ("90 %" in line) == math.isfinite(low)
    cost = next(line for line in result.stdout.splitlines() if line.startswith("cost: 3 races: "))
    assert f"{sum(r['agent_steps'] for r in races):,} agent steps" in cost
    # The run is read, never written: its files and summary as they were.
    assert sorted(p.name for p in trained.rglob("*")) == before
    assert (trained / "summary.json").read_text() == summary_before


@pytest.mark.timeout(240)
def test_ctrl_c_keeps_the_finished_races_and_the_same_command_resumes_after_them(trained, tmp_path):
    out = tmp_path / "m.json"
    args = [str(trained), *RACES, "--out", str(out)]
    proc = train_subprocess(args, module="rlscale.measure")

    def one_race_done() -> bool:
        try:
            return len(json.loads(out.read_text())["races"]) >= 1
        except (OSError, ValueError):
            return False

    stderr = interrupt_when(proc, one_race_done, timeout=180, sig=signal.SIGINT)
    assert proc.returncode == 130, stderr
    assert "finished races are kept in" in stderr and "Traceback" not in stderr
    kept = json.loads(out.read_text())["races"]
    assert 1 <= len(kept) < 3 and kept[0]["n_envs"] == 4
    resumed = run_in_process(["rlscale.measure", *args])
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(kept)} already done" in resumed.stdout
    races = json.loads(out.read_text())["races"]
    assert races[:len(kept)] == kept and [r["n_envs"] for r in races] == [4, 8, 16]


def test_a_race_is_the_same_race_when_run_again(trained, tmp_path):
    """Seeded environments, action draws and the checkpoint's state: a race run twice takes the same examples."""
    one = ["--goal", "40", "--batches", "1", "2", "--races", "1", "--cap-updates", "200", "--at-once", "1"]
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    for out in (first, second):
        assert run_in_process(["rlscale.measure", str(trained), *one, "--out", str(out)]).returncode == 0
    examples = [[r["examples"] for r in json.loads(out.read_text())["races"]] for out in (first, second)]
    assert examples[0] == examples[1]


@pytest.mark.parametrize("args, message", [
    (["{missing}"], "is not a run directory"),
    (["{empty}"], "RUN {empty}: no checkpoint in"),
    (["{run}", "--checkpoint", "{garbage}"], "not a readable rlscale checkpoint"),
    (["{run}", "--goal", "60", "--batches", "1"], "give one batch at 8 envs"),
    (["{run}", "--goal", "60", "--batches", "0", "1"], "--batches takes positive multiples"),
    (["{run}", "--goal", "60", "--races", "0"], "--races and --cap-updates take at least 1"),
    (["{run}", "--goal", "x"], "argument --goal: invalid float value"),
])
def test_bad_input_is_one_line_and_exit_2(trained, tmp_path, args, message):
    (tmp_path / "empty").mkdir()
    (tmp_path / "garbage.pt").write_text("not a checkpoint")
    names = {"missing": tmp_path / "nope", "empty": tmp_path / "empty", "run": trained,
             "garbage": tmp_path / "garbage.pt"}
    argv = [a.format(**names) for a in args]
    result = run_in_process(["rlscale.measure", *argv, "--out", str(tmp_path / "m.json")])
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert message.format(**names) in result.stderr and not (tmp_path / "m.json").exists()


def test_a_run_whose_score_is_past_every_goal_asks_for_one(trained, tmp_path):
    result = run_in_process(["rlscale.measure", str(trained), "--out", str(tmp_path / "m.json")])
    assert result.returncode == 2
    assert "no goal of the run lies above its score there" in result.stderr and "give --goal" in result.stderr


def test_only_the_training_loop_resizes_an_engine():
    """One resize site: the trainer's. A race restarts environments of an engine of its own; the pools resize
    themselves inside their own classes. Any other ``.resize(`` call in the package fails this."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    allowed = {("rlscale/training/trainer.py", "engine"), ("rlscale/engine/native.py", "self.pool"),
               ("rlscale/rollout/worker.py", "self"), ("rlscale/rollout/worker.py", "self.worker"),
               ("rlscale/distributed/ray_pool.py", "self")}
    calls = set()
    for path in (root / "rlscale").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "resize":
                calls.add((str(path.relative_to(root)), ast.unparse(node.func.value)))
    assert ("rlscale/training/trainer.py", "engine") in calls
    assert calls <= allowed, sorted(calls - allowed)


def test_a_saved_config_of_the_retired_in_run_measurement_loads_without_its_settings():
    from rlscale.config import Config, dumps_toml, loads_saved
    from rlscale.errors import UserError

    text = dumps_toml(Config()).replace("[control]\n", "[control]\nbranch_runs = 3\nremeasure = 2.0\n")
    assert loads_saved(text, "old.toml").control.batch == "fixed"
    with pytest.raises(UserError, match="became the command rlscale measure"):
        loads_saved(text.replace('batch = "fixed"', 'batch = "measured"'), "old.toml")
