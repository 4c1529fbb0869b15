"""--batch measured: the critical batch measured by branching the run, on real serial runs (no Ray;
the run on Ray actors: tests/test_measure_ray.py)."""

from __future__ import annotations

import json
import math

import pytest

from rlscale import tags
from rlscale.reports.events import read_scalars
from rlscale.reports.runs import load_run
from rlscale.training import checkpoint, measure
from tests.conftest import run_in_process

SMALL = ["--n-envs", "8", "--branch-window", "4", "--log-interval", "600"]
WINDOW = ["--progress", "total"]  # the held-out loss's window (the default races to a goal)


def _summary(run_dir) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def test_every_branchs_examples_and_steps_are_counted_once(tmp_path):
    """One measurement (at the start): 4 branches of 4 updates' worth at 40 observations, 0.5x-4x."""
    run_dir = tmp_path / "run"
    result = run_in_process(["rlscale.train", "cartpole", "--serial", "--batch", "measured", "--remeasure", "1e9",
                             "--heldout-rollouts", "2", "--total-frames", "1000", *SMALL, *WINDOW, "--run-dir", str(run_dir)])
    assert result.returncode == 0, result.stderr
    summary = _summary(run_dir)
    learner_steps = checkpoint.load(checkpoint.latest(run_dir))["engine"]["learner"]["updates"]
    branch_updates = {4: 8, 8: 4, 16: 2, 32: 1}  # envs -> updates of a 160-agent-step window
    # The branches not continued: all but one, and the run's updates are the learner's plus theirs.
    assert summary["branch_optimizer_steps"] in {15 - u for u in branch_updates.values()}
    assert summary["updates"] == learner_steps + summary["branch_optimizer_steps"]
    # Agent steps: the held-out rows (2 rollouts of 8 envs x 5), the four windows (160 each), then training.
    after_measuring = 2 * 40 + 4 * 160
    assert summary["agent_steps"] >= after_measuring
    trained_after = summary["agent_steps"] - after_measuring
    assert trained_after % (5 * summary["n_envs"]) == 0
    assert summary["examples"] == 4 * 160 + trained_after  # A2C: one pass; the held-out rows are not examples
    assert summary["measurements"] == 1 and summary["measure_examples"] == 3 * 160


def test_progress_by_return_plays_the_same_episodes_for_every_branch_and_counts_their_steps(tmp_path, monkeypatch):
    """--progress return: the trunk and each of the 4 branches play 4 episodes on the same seeds (common random
    numbers: the same policy plays them back identically), and their steps count in the run's agent steps."""
    real, calls = measure.play_episodes, []

    def recorded(run, seed):
        returns, steps = real(run, seed)
        if not calls:  # the trunk's: played again by the same weights, the very same episodes
            again, steps_again = real(run, seed)
            assert list(again) == list(returns) and steps_again == steps
        calls.append((seed, steps))
        return returns, steps

    monkeypatch.setattr(measure, "play_episodes", recorded)
    run_dir = tmp_path / "run"
    result = run_in_process(["rlscale.train", "cartpole", "--serial", "--batch", "measured", "--remeasure", "1e9",
                             "--heldout-rollouts", "2", "--progress", "return", "--progress-episodes", "4",
                             "--total-frames", "1000", *SMALL, "--run-dir", str(run_dir)])
    assert result.returncode == 0, result.stderr
    assert len(calls) == 5 and len({seed for seed, _ in calls}) == 1
    assert "by the return:" in result.stdout and "by the total loss" in result.stdout
    summary = _summary(run_dir)
    after_measuring = 2 * 40 + 4 * 160 + sum(steps for _, steps in calls)
    trained_after = summary["agent_steps"] - after_measuring
    assert trained_after >= 0 and trained_after % (5 * summary["n_envs"]) == 0
    assert summary["examples"] == 4 * 160 + trained_after  # episodes played are not examples
    assert tags.MEASURED_BATCH_BY.format(progress="return") in read_scalars(run_dir)


def test_an_interrupt_inside_a_measurement_resumes_before_it_without_gaps_or_duplicates(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    args = ["rlscale.train", "cartpole", "--serial", "--batch", "measured", "--total-frames", "3000", *SMALL, *WINDOW,
            "--run-dir", str(run_dir)]
    calls = {"n": 0}
    real = measure.run_branch

    def interrupted_in_the_second_measurement(*a, **k):
        calls["n"] += 1
        if calls["n"] == 6:  # the first measurement has 4 branches: the 2nd one of the second
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(measure, "run_branch", interrupted_in_the_second_measurement)
    assert run_in_process(args).returncode == 130
    saved = checkpoint.load(checkpoint.latest(run_dir))
    trainer_state, controller = saved["trainer"], saved["controller"]
    # The checkpoint is the trunk's just before the second measurement: one measurement counted, and
    # the agent steps where that one left off measuring plus the updates trained since.
    assert trainer_state["measurements"] == 1
    assert trainer_state["agent_steps"] >= controller["measured_at"][0] * 2  # the 2nd was due: x2 steps
    assert saved["engine"]["learner"]["updates"] + trainer_state["branch_optimizer_steps"] > 0
    monkeypatch.setattr(measure, "run_branch", real)
    resumed = run_in_process(["rlscale.train", "--resume", str(run_dir)])
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.count("measured at") >= 1
    final = _summary(run_dir)
    assert final["measurements"] >= 2 and final["agent_steps"] >= 3000
    # Logged counts run 1, 2, ... with no step written twice (TensorBoard purges past the checkpoint).
    steps, counts = read_scalars(run_dir)[tags.MEASUREMENTS]
    assert list(counts) == list(range(1, len(counts) + 1)) and len(set(steps)) == len(steps)


def test_a_branch_that_crashes_is_one_line_and_the_run_goes_on(tmp_path, monkeypatch):
    real = measure.run_branch

    def third_branch_crashes(run, branch, *a, **k):
        if branch.multiplier == 2:
            raise RuntimeError("actor lost")
        return real(run, branch, *a, **k)

    monkeypatch.setattr(measure, "run_branch", third_branch_crashes)
    result = run_in_process(["rlscale.train", "cartpole", "--serial", "--batch", "measured", "--remeasure", "1e9",
                             "--total-frames", "1000", *SMALL, *WINDOW, "--run-dir", str(tmp_path / "run")])
    assert result.returncode == 0, result.stderr
    failures = [line for line in result.stdout.splitlines() if "branch" in line and "failed" in line]
    assert failures == ["measurement: the 2x branch (16 envs) failed (RuntimeError: actor lost); reading the others"]
    assert "measured at" in result.stdout and "Traceback" not in result.stdout + result.stderr


@pytest.mark.parametrize("flags, message", [
    (["--branches", "2"], "--branches needs at least 2 batch multipliers"),
    (["--branches", "0", "1"], "--branches multipliers must be positive"),
    (["--branches", "-1", "2"], "--branches multipliers must be positive"),
    (["--branch-window", "2"], "--branch-window 2 is under one update for the 4x branch"),
    (["--remeasure", "1"], "--remeasure must be above 1"),
    (["--remeasure-noise", "0.5"], "--remeasure-noise must be above 1 (a factor) or 0 (--remeasure's)"),
    (["--progress", "return", "--progress-episodes", "1"], "--progress-episodes must be at least 2"),
    (["--goals"], "--progress reach (the default) races the branches to the run's next goal"),
    (["--progress", "reach", "--branch-runs", "0"], "--branch-runs must be at least 1"),
    ([*WINDOW, "--branch-runs", "2"], "--branch-runs races each batch more than once: it goes with --progress reach"),
    (["--progress", "reach", "--branches-at-once", "-1"], "--branches-at-once must be 0 (one after the other) or more"),
    ([*WINDOW, "--branches-at-once", "2"], "--branches-at-once races the branches side by side: it goes with --progress reach"),
])
def test_bad_measurement_settings_are_one_line_and_exit_2(flags, message, tmp_path):
    result = run_in_process(["rlscale.train", "cartpole", "--batch", "measured", *flags,
                             "--run-dir", str(tmp_path / "r")])
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"error: {message}") and not (tmp_path / "r").exists()


def test_a_measurement_with_one_branch_left_holds_the_batch_and_counts_what_it_spent(tmp_path, monkeypatch):
    real = measure.run_branch

    def only_the_1x_branch_runs(run, branch, *a, **k):
        if branch.multiplier != 1:
            raise RuntimeError("actor lost")
        return real(run, branch, *a, **k)

    monkeypatch.setattr(measure, "run_branch", only_the_1x_branch_runs)
    run_dir = tmp_path / "run"
    result = run_in_process(["rlscale.train", "cartpole", "--serial", "--batch", "measured", "--remeasure", "1e9",
                             "--heldout-rollouts", "2", "--total-frames", "1000", *SMALL, *WINDOW, "--run-dir", str(run_dir)])
    assert result.returncode == 0, result.stderr
    assert "measurement: 1 of 4 branches finished, too few to read" in result.stdout
    summary = _summary(run_dir)
    # The trunk went on at 8 envs; the held-out rows and the 1x branch's window count, its 4 updates
    # as optimizer steps not continued, and the measurement's time as overhead.
    assert summary["n_envs"] == 8 and summary["measurements"] == 0
    assert summary["branch_optimizer_steps"] == 4 and summary["measure_seconds"] > 0
    assert summary["agent_steps"] >= 2 * 40 + 160


def _reach_branch(batch: float, examples: int, reached: bool = True) -> measure.BranchRun:
    return measure.BranchRun(multiplier=batch / 40, n_envs=int(batch // 5), batch=batch, lr=1e-3,
                             agent_steps=examples, examples=examples, optimizer_steps=round(examples / batch),
                             reached=reached)


def test_a_race_to_the_goal_reads_bcrit_from_the_examples_each_batch_took():
    """Examples to a goal on eq. 2.11's front, E = E_min(1 + B/B_crit), B_crit 85: the read-out recovers it, its
    interval holds it and widens when the examples scatter; a branch that missed the goal is left out whatever it
    spent; fed each branch's batch doubled, it reads 2x; two branches are solved exactly, without an interval."""
    batches = [20.0, 40.0, 80.0, 160.0, 320.0, 640.0]
    on_front = [_reach_branch(b, round(5_000 * (1 + b / 85))) for b in batches]
    reading, (low, high) = measure.read_reach(on_front)
    assert reading.critical_batch == pytest.approx(85, rel=0.01) and reading.bound == ""
    assert low <= 85 <= high and high / low < 1.05
    scatter = (1.3, 0.8, 1.2, 0.7, 1.25, 0.9)
    scattered = [_reach_branch(b.batch, round(b.examples * f)) for b, f in zip(on_front, scatter, strict=True)]
    low_s, high_s = measure.read_reach(scattered)[1]
    assert high_s / low_s > 2 * high / low
    # Two races a batch (--branch-runs 2), 1.2x either side of the front: pooled by geometric means, as the sweep's
    # seeds are, they read it again; a batch one of whose races missed the goal is left out.
    raced = [_reach_branch(b.batch, round(b.examples * f)) for b in on_front for f in (1.2, 1 / 1.2)]
    missed_one = [*raced, _reach_branch(1280.0, 9_000), _reach_branch(1280.0, 1_000, reached=False)]
    assert measure.read_reach(missed_one)[0].critical_batch == pytest.approx(85, rel=0.02)
    pair, pair_interval = measure.read_reach(on_front[1:3])
    assert pair.critical_batch == pytest.approx(85, rel=0.02) and all(math.isnan(end) for end in pair_interval)
    missed = [*on_front, _reach_branch(1280.0, 2_000, reached=False)]
    assert measure.read_reach(missed)[0].critical_batch == pytest.approx(reading.critical_batch)
    doubled = [_reach_branch(2 * b.batch, b.examples) for b in on_front]
    assert measure.read_reach(doubled)[0].critical_batch == pytest.approx(170, rel=0.02)


def test_progress_reach_races_each_branch_to_the_next_goal_and_continues_from_one_that_reached_it(tmp_path):
    """From the start, 4 branches (20-160 observations) each train until their own last 20 episodes' mean return
    reaches 40, the reading is eq. 2.11 over the examples they took, and the run goes on from a branch that met
    the goal: the goal counts at the measurement's end, and the branches not continued are the overhead. The
    goal is --stop-return too, so the run stops there, with budget left."""
    run_dir = tmp_path / "run"
    result = run_in_process(["rlscale.train", "cartpole", "--serial", "--batch", "measured", "--remeasure", "1e9",
                             "--progress", "reach", "--goals", "40", "--stop-return", "40", "--branch-window", "2000",
                             "--total-frames", "200000", "--n-envs", "8", "--log-interval", "600",
                             "--run-dir", str(run_dir)])
    assert result.returncode == 0, result.stderr
    assert "reached --stop-return 40" in result.stdout
    assert "by the examples to the goal: B_crit" in result.stdout and "not reached" not in result.stdout
    # The header says how many races a batch, and what one costs in accuracy.
    assert "batch control: measured, 1 race a batch (one race reads within 2x of a fork sweep about half" in result.stdout
    scalars, summary = read_scalars(run_dir), _summary(run_dir)
    per_example = {m: float(scalars[tags.BRANCH_PROGRESS.format(multiplier=m)][1][-1]) for m in (0.5, 1, 2, 4)}
    examples = {m: round(1e3 / v) for m, v in per_example.items()}  # 1 goal per E_i examples, logged per 1,000
    assert len(set(examples.values())) > 1  # each branch stopped where it met the goal, not at a common window
    again, _ = measure.read_reach([_reach_branch(40 * m, e) for m, e in examples.items()])
    assert float(scalars[tags.MEASURED_BATCH][1][-1]) == pytest.approx(again.critical_batch, rel=1e-3)
    assert float(scalars[tags.MEASURE_TARGET][1][-1]) == 40
    chosen = next(m for m in examples if 5 * 8 * m == summary["n_envs"] * 5)
    assert summary["measure_examples"] == sum(e for m, e in examples.items() if m != chosen)
    assert summary["examples"] == sum(examples.values()) and summary["finished"]  # it stopped there
    assert summary["goals"]["40"]["agent_steps"] == summary["agent_steps"]  # met by the continued branch
    # No update after the measurement: the reports read the run's goal from the counters the measurement logged.
    hit = load_run(run_dir).goal(40)
    assert (hit.agent_steps, hit.updates, hit.examples) == (summary["agent_steps"], summary["updates"],
                                                           summary["examples"])
    assert hit.wall_seconds == pytest.approx(summary["wall_seconds"], abs=0.06)


def test_a_race_to_a_goal_the_policy_already_meets_says_it_reads_the_wait_for_episodes(tmp_path):
    """CartPole's first policy lasts ~20 steps an episode: a race to a mean of 10 is met by the first 20 episodes of
    every branch, whose examples are then the wait for them to end; the run says so."""
    result = run_in_process(["rlscale.train", "cartpole", "--serial", "--batch", "measured", "--remeasure", "1e9",
                             "--progress", "reach", "--goals", "10", "--branch-runs", "2", "--total-frames", "1",
                             "--n-envs", "8",
                             "--log-interval", "600", "--run-dir", str(tmp_path / "run")])
    assert result.returncode == 0, result.stderr
    assert ("measurement: the goal 10 was met with the first 20 episodes of the 20, 40, 80, 160 branch(es)"
            in result.stdout)
    assert _summary(tmp_path / "run")["branch_optimizer_steps"] > 0
    line = next(line for line in result.stdout.splitlines() if line.startswith("measured at"))
    assert line.split("to 10 in ")[1].split(" examples")[0].count("/") == 7  # 2 races x 4 batches, each counted
    assert "batch control: measured, 2 races a batch (one race reads" in result.stdout


def test_an_interrupt_as_a_race_continues_puts_the_trunk_back_and_the_resumed_run_measures_again(tmp_path,
                                                                                               monkeypatch):
    """Ctrl-C while the run restarts its environments for the chosen branch (after all 4 branches raced): the
    checkpoint is the trunk's from before the measurement, nothing of it counted; resumed, it measures again."""
    from rlscale.training.engine import NativeEngine

    real, calls = NativeEngine.restart_envs, {"n": 0}

    def interrupted_as_it_continues(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == 5:  # 4 branches, then the continuation
            raise KeyboardInterrupt
        return real(self, *a, **k)

    monkeypatch.setattr(NativeEngine, "restart_envs", interrupted_as_it_continues)
    run_dir = tmp_path / "run"
    args = ["rlscale.train", "cartpole", "--serial", "--batch", "measured", "--remeasure", "1e9", "--progress",
            "reach", "--goals", "40", "--branch-window", "2000", "--total-frames", "1", "--n-envs", "8",
            "--log-interval", "600", "--run-dir", str(run_dir)]
    assert run_in_process(args).returncode == 130
    saved = checkpoint.load(checkpoint.latest(run_dir))
    trunk = saved["trainer"]
    assert trunk["measurements"] == 0 and trunk["agent_steps"] == 0 and trunk["branch_optimizer_steps"] == 0
    assert saved["engine"]["learner"]["updates"] == 0  # the trunk's network, not the chosen branch's
    monkeypatch.setattr(NativeEngine, "restart_envs", real)
    resumed = run_in_process(["rlscale.train", "--resume", str(run_dir)])
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.count("measured at") == 1 and _summary(run_dir)["measurements"] == 1


def test_a_race_runs_at_the_actors_measured_precision_or_the_runs_setting_while_no_actor_is_up():
    from types import SimpleNamespace

    from rlscale.config import build_config
    from rlscale.distributed.ray_branches import race_config
    from rlscale.models.precision import InferenceChoice

    cfg = build_config("minatar-breakout", None, {"actor_precision": "auto", "learner_threads": 2})
    engine = SimpleNamespace(cfg=cfg, pool=SimpleNamespace(inference=lambda: []))  # an elastic pool, none up
    race = race_config(engine).run
    assert (race.serial, race.learner_threads, race.learner_device) == (True, 1, "cpu")
    assert race.actor_precision == "auto"  # the race's engine times its own
    engine.pool.inference = lambda: [InferenceChoice("bf16", True, {}, {}), InferenceChoice("fp32", False, {}, {})]
    race = race_config(engine).run
    assert (race.actor_precision, race.actor_channels_last) == ("bf16", True)
