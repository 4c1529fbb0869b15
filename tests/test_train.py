"""Training end to end: learning, TensorBoard files, checkpoints, resume, faults."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlscale import tags
from rlscale.config import build_config
from rlscale.goals import GoalWindow
from rlscale.rundir import checkpoint
from rlscale.train import main
from rlscale.training.logger import NOISE_CHART, RunLogger, StepRate
from rlscale.training.trainer import (
    TrainState,
    build,
    cluster_metrics,
    save_checkpoint,
    train_loop,
    write_summary,
)
from tests.conftest import interrupt_when, train_subprocess

# In-process runs share the module's embedded Ray (conftest.ray_instance) instead of starting their own.
pytestmark = pytest.mark.usefixtures("ray_instance")

REQUIRED_TAGS = {
    "rollout/episode_return", "rollout/episode_length", "train/policy_loss", "train/value_loss",
    "train/entropy", "train/grad_norm", "train/lr", "batch/n_envs", "batch/size", "perf/steps_per_s",
    "noise/b_simple_total", "noise/grad_sq_total", "noise/trace_sigma_total",
    "noise_raw/grad_sq_total", "noise_raw/trace_sigma_total",
}


def scalars(run_dir: Path) -> EventAccumulator:
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return events


def steps_of(run_dir: Path, tag: str) -> list[int]:
    return [e.step for e in scalars(run_dir).Scalars(tag)]


def custom_scalars_charts(run_dir: Path) -> dict[str, list[str]]:
    """{chart title: its tag patterns} of the custom-scalars layout in the run's events."""
    from tensorboard.plugins.custom_scalar import layout_pb2, metadata

    events = EventAccumulator(str(run_dir), size_guidance={"tensors": 0})
    events.Reload()
    layout = layout_pb2.Layout.FromString(events.Tensors(metadata.CONFIG_SUMMARY_TAG)[-1].tensor_proto.string_val[0])
    return {chart.title: list(chart.multiline.tag) for category in layout.category for chart in category.chart}


def charted(patterns: list[str], logged: set[str]) -> set[str]:
    return {tag for tag in logged if any(re.fullmatch(p, tag) for p in patterns)}


def duplicated_series(events: EventAccumulator) -> list[tuple[str, str]]:
    """Pairs of tags whose series are the same points (a quantity logged twice)."""
    series = {tag: tuple((e.step, e.value) for e in events.Scalars(tag)) for tag in events.Tags()["scalars"]}
    seen: dict[tuple, str] = {}
    pairs = []
    for tag, points in sorted(series.items()):
        if len(points) >= 3 and len({v for _, v in points}) > 1:  # a constant can match by coincidence
            if points in seen:
                pairs.append((seen[points], tag))
            seen.setdefault(points, tag)
    return pairs


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a2c_learns_cartpole_on_ray_actors(tmp_path):
    """Mean return >= 400 over the last 20 episodes within 500k agent steps, 2 Ray actors.

    At CartPole's fastest measured settings (a batch of 80 at lr 2e-3, docs/notebook/results.md):
    16-61k agent steps over seeds 0-3; rl-zoo's lr 7e-4, the preset's until 2026-12-06, took ~10x longer."""
    run_dir = tmp_path / "cartpole"
    code = main(["cartpole", "--n-actors", "2", "--stop-return", "400", "--log-interval", "30",
                 "--lr", "2e-3", "--n-envs", "16", "--run-dir", str(run_dir)])
    assert code == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["mean_return"] >= 400
    assert summary["agent_steps"] <= 500_000
    assert "400" in summary["goals"]


def test_short_pong_run_through_actors_writes_tensorboard(tmp_path, capsys):
    run_dir = tmp_path / "pong"
    # No warm-up, so every env's first episode counts; a Pong episode lasts ~800+ agent steps,
    # so 4 envs x 1,100 steps each; 25 steps per update keeps the updates few (44).
    code = main(["pong", "--agent", "a2c", "--n-actors", "2", "--n-envs", "4", "--set", "vector_size=2",
                 "--n-steps", "25", "--total-frames", "17600", "--set", "warmup_max_steps=0",
                 "--set", "noise_parts_every=2", "--checkpoint-every", "10", "--run-dir", str(run_dir)])
    assert code == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"run directory: {run_dir}"
    assert f"tensorboard --logdir {run_dir}\n" in out and "steps " in out  # the named run, not its parent
    # The header says which control the run takes and, for the presets' fixed batch, why (issue 61's item 4).
    assert "\n  batch control: fixed (why: docs/batch-control.md)\n" in out
    events = scalars(run_dir)
    tags = set(events.Tags()["scalars"])
    missing = REQUIRED_TAGS - tags
    assert not missing, missing
    returns = [e.value for e in events.Scalars("rollout/episode_return")]
    assert returns and all(-21 <= r <= 21 and r == int(r) for r in returns)  # game scores: -21..21
    assert {"noise/b_simple_policy", "noise_raw/grad_sq_policy", "noise_raw/grad_sq_value"} <= tags
    sizes = [e.value for e in events.Scalars("batch/size")]
    assert set(sizes) == {100.0}  # 4 envs x 25 steps
    assert steps_of(run_dir, "batch/size") == list(range(100, 4401, 100))  # x-axis: agent steps
    assert (run_dir / "config.toml").is_file()
    assert checkpoint.list_checkpoints(run_dir)
    assert duplicated_series(events) == []  # one tag per quantity
    # The actors' own time is part of the rollout's, the rest the trip through Ray.
    rollout = [e.value for e in events.Scalars("perf/rollout_seconds")]
    acting = [e.value for e in events.Scalars("perf/acting_seconds")]
    assert len(acting) == len(rollout) and all(0 < a <= r for a, r in zip(acting, rollout, strict=True))
    # The custom-scalars layout: the score, and the signal beside the batch, on charts of logged tags.
    charts = custom_scalars_charts(run_dir)
    assert charted(charts["score: episode return"], tags) == {"rollout/episode_return"}
    noise_chart = charted(charts[NOISE_CHART], tags)
    assert {"noise/b_simple_total", "batch/optimizer_batch"} <= noise_chart
    assert "batch/starting_envs" not in tags  # a fixed batch starts no environments mid-run: no line at 0
    assert "batch/exchange_rate" not in tags  # the cost model's quantities are --batch auto's


def read_counters(run_dir: Path) -> dict:
    return checkpoint.load(checkpoint.latest(run_dir))["trainer"]


def wait_for_checkpoints(run_dir: Path, count: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while len(checkpoint.list_checkpoints(run_dir)) < count:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no checkpoint in time"
        time.sleep(0.2)


def test_sigkill_then_resume_continues_without_gaps_or_duplicates(tmp_path, capsys):
    run_dir = tmp_path / "run"
    args = ["cartpole", "--pool", "serial", "--n-envs", "4", "--set", "vector_size=2", "--checkpoint-every", "25",
            "--keep-checkpoints", "2", "--total-frames", "12000", "--run-dir", str(run_dir)]
    proc = train_subprocess(args)
    try:
        wait_for_checkpoints(run_dir, 2, proc)
        time.sleep(1.0)  # let it write events past the last checkpoint
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    before = read_counters(run_dir)
    window = checkpoint.load(checkpoint.latest(run_dir))["goal_window"]
    assert 0 < before["agent_steps"] < 12_000
    assert 0 < len(window) <= 20 and all(r > 0 for r in window)
    assert len(checkpoint.list_checkpoints(run_dir)) <= 2  # older ones pruned
    assert main(["--resume", str(run_dir)]) == 0
    first_line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("["))
    shown = int(first_line.split("(last ")[1].split(")")[0])
    assert shown >= len(window)  # the goal window survived the kill
    after = read_counters(run_dir)
    assert after["agent_steps"] == 12_000
    assert after["episodes"] > before["episodes"]
    steps = steps_of(run_dir, "batch/size")
    assert steps == list(range(20, 12_001, 20))  # every update once: no gap, no duplicate


@pytest.mark.parametrize(("sig", "where"), [(signal.SIGINT, ["--pool", "serial"]), (signal.SIGTERM, ["--pool", "actors", "--n-actors", "2"])],
                         ids=["sigint-serial", "sigterm-ray-actors"])
def test_sigint_or_sigterm_leaves_a_checkpoint_and_a_resume_hint(tmp_path, sig, where):
    # SIGTERM with Ray actors: ray.init sets a SIGTERM handler of its own that exits at once;
    # the run's must be the one that answers (a scheduler's or a container's stop).
    run_dir = tmp_path / "run"
    out = tmp_path / "stdout.txt"
    proc = train_subprocess(["cartpole", *where, "--checkpoint-every", "100000",
                             "--run-dir", str(run_dir)], stdout=out)
    # Interrupted once it has trained (its first progress line), however loaded the machine is.
    err = interrupt_when(proc, lambda: "\n[" in out.read_text(), timeout=120, sig=sig)
    assert proc.returncode == 130, err
    assert "resume with: python -m rlscale.train --resume" in err
    assert "Traceback" not in err and "SIGTERM received" not in err
    assert read_counters(run_dir)["agent_steps"] > 0


def test_a_finished_run_extends_to_a_larger_budget_on_the_new_schedule(tmp_path, capsys):
    run_dir = tmp_path / "run"
    # PPO anneals the learning rate over the budget; 4 envs x 128 steps = 512 agent steps a batch.
    assert main(["cartpole", "--agent", "ppo", "--pool", "serial", "--n-envs", "4", "--set", "vector_size=2",
                 "--total-frames", "2048", "--run-dir", str(run_dir)]) == 0
    extended = tmp_path / "extended"  # extend a copy: the finished run stays as it was
    shutil.copytree(run_dir, extended)
    assert main(["--resume", str(extended), "--total-frames", "4096", "--stop-return", "1000"]) == 0
    assert read_counters(run_dir)["agent_steps"] == 2048
    assert read_counters(extended)["agent_steps"] == 4096
    saved = (extended / "config.toml").read_text()
    # A later resume keeps the new budget and stopping score, and the copy names its own directory.
    assert "total_frames = 4096" in saved and "stop_return = 1000" in saved
    assert f'run_dir = "{extended}"' in saved
    lr0 = build_config("cartpole", "ppo", {}).agent.lr
    lrs = {e.step: e.value for e in scalars(extended).Scalars("train/lr")}
    assert sorted(lrs) == list(range(512, 4097, 512))  # every batch once
    # A batch logged at step s started at s - 512 and was trained at lr0 * (1 - (s - 512) / budget).
    for step, lr in lrs.items():
        budget = 2048 if step <= 2048 else 4096
        assert lr == pytest.approx(lr0 * (1 - (step - 512) / budget), rel=1e-5), step
    # The closing progress line shows the learning rate of the last step, not the base one.
    last_line = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[100.0%]")][-1]
    assert float(last_line.rsplit("lr ", 1)[1]) == pytest.approx(lrs[4096], rel=1e-2)


def test_killed_actor_is_replaced_and_the_run_finishes(tmp_path, capsys):
    cfg = build_config("cartpole", None, {"n_actors": 2, "total_frames": 8_000,
                                          "run_dir": str(tmp_path / "run")})
    run_dir = Path(cfg.run.run_dir)
    run_dir.mkdir(parents=True)
    run = build(cfg, run_dir)
    pool = run.engine.pool
    collect, calls = pool.collect, []

    def collect_after_killing_an_actor_at_the_tenth_update():
        # Killed while its rollout is in flight (started, not collected), whatever this machine's speed.
        calls.append(1)
        if len(calls) == 10:
            os.kill(victim, signal.SIGKILL)
        return collect()

    try:
        victim = pool.worker_pids()[0]
        pool.collect = collect_after_killing_an_actor_at_the_tenth_update
        train_loop(run)
        assert len(calls) > 10
        assert pool.failures >= 1
        assert pool.worker_pids()[0] != victim
        assert run.state.agent_steps >= 8_000
        assert pool.n_envs == 8
        save_checkpoint(run)
    finally:
        run.engine.close()
        run.logger.close()
    assert "rollout actor 0 died (its process or node was lost); replacing it" in capsys.readouterr().out


def test_cartpole_episode_tags_and_goal_summary(tmp_path):
    run_dir = tmp_path / "run"
    assert main(["cartpole", "--pool", "serial", "--total-frames", "4000", "--run-dir", str(run_dir)]) == 0
    tags = set(scalars(run_dir).Tags()["scalars"])
    assert {"rollout/episode_return", "rollout/episode_length"} <= tags
    returns = [e.value for e in scalars(run_dir).Scalars("rollout/episode_return")]
    lengths = [e.value for e in scalars(run_dir).Scalars("rollout/episode_length")]
    np.testing.assert_array_equal(returns, lengths)  # CartPole pays 1 per step: returns are unclipped
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["agent_steps"] == 4000 and summary["updates"] == 100


def test_closed_loop_cartpole_resizes_toward_the_noise_scale(tmp_path, capsys):
    """--batch critical on real Ray: every resize moves the batch toward the target logged with it, and with
    --set cooldown_measured=true waits for a cool-down of observations the noise average took."""
    run_dir = tmp_path / "adaptive"
    code = main(["cartpole", "--n-actors", "2", "--batch", "critical", "--n-envs", "8",
                 "--min-envs", "4", "--max-envs", "64", "--set", "cooldown=2000", "--set", "cooldown_measured=true",
                 "--set", "noise_parts_every=1",
                 "--set", "curvature_every=16", "--set", "noise_clip=10", "--total-frames", "16000",
                 "--run-dir", str(run_dir)])
    assert code == 0
    events = scalars(run_dir)
    # Every estimator's tags: B_simple per part, B_P, B_noise and B_PH with their quadratics, eps_max, their cost;
    # and the count of estimates the clip bounded.
    assert {"noise/clipped_total", "noise/b_simple_total", "noise/b_simple_policy", "noise/b_simple_value", "noise/b_precond",
            "noise/gpg", "noise/trace_p_sigma", "noise/b_noise", "noise/ghg", "noise/trace_h_sigma",
            "noise/b_precond_hessian", "noise/gphpg", "noise/trace_php_sigma",
            "noise/eps_max", "perf/curvature_seconds"} <= set(events.Tags()["scalars"])
    n_envs = [e.value for e in events.Scalars("batch/n_envs")]
    targets = [e.value for e in events.Scalars("batch/target")]
    assert len(set(n_envs)) > 1, "the controller never resized"
    assert "batch/resize_seconds" in events.Tags()["scalars"]
    assert all(4 <= n <= 64 and n % 2 == 0 for n in n_envs)
    assert len(targets) > 10
    # n_envs and target are logged after the update's decision: a change between two logged updates
    # is a resize taken at the second, toward the target logged there (B_simple, in observations).
    per_env = build_config("cartpole", None, {}).observations_per_env
    target_at = {e.step: e.value for e in events.Scalars("batch/target")}
    steps = [e.step for e in events.Scalars("batch/n_envs")]
    resizes = [(old, new, target_at[step]) for old, new, step in zip(n_envs, n_envs[1:], steps[1:], strict=False)
               if new != old]
    assert resizes
    for old, new, target in resizes:
        assert (new - old) * (target - old * per_env) > 0, (old, new, target)
    # With cooldown_measured each resize waited for 2,000 observations that the noise average took (updates with a
    # raw sample logged), not counting the batches while new environments settled (noise_settle), which take none.
    measured_steps = set(steps_of(run_dir, "noise_raw/grad_sq_total"))
    taken, settled, settled_before_a_checked_resize, grown = 0, 0, 0, False
    for before, step, old, new in zip(steps, steps[1:], n_envs, n_envs[1:], strict=False):
        taken += step - before if step in measured_steps else 0
        settled += step - before if step not in measured_steps else 0
        if new != old:
            assert taken >= 2000, (step, taken)
            settled_before_a_checked_resize += settled if grown else 0
            taken, settled, grown = 0, 0, new > old
    assert settled_before_a_checked_resize > 0, "no resize followed a settle after a grow: the check tells nothing"
    out = capsys.readouterr().out
    assert "resize 8 -> " in out and "target batch" in out
    assert "\n  batch control: critical\n" in out  # a controller the user chose: no word on the presets' fixed batch


def test_auto_batch_control_times_probes_and_resizes_on_ray(tmp_path, capsys):
    """--batch auto on a real Ray instance: a probe resize (down while nothing is learned: it does not grow
    before the return rises), then B* from the measured cost model; the logged predicted speed-up is
    against the B* the controller aims at (B_simple / crit_ratio)."""
    run_dir = tmp_path / "auto"
    code = main(["cartpole", "--n-actors", "2", "--batch", "auto", "--n-envs", "8", "--min-envs", "2",
                 "--max-envs", "64", "--set", "cooldown=1000", "--set", "crit_ratio=2", "--set", "noise_groups=2",
                 "--total-frames", "30000",
                 "--run-dir", str(run_dir)])
    assert code == 0
    out = capsys.readouterr().out
    probe = out.index("probe: timing a second batch size for the cost model")
    learned = out.find("auto may now grow the batch")
    assert learned > 0  # CartPole's return rises within the run
    direction = "resize 8 -> 4 envs (shrink: " if probe < learned else "resize 8 -> 16 envs (grow: "
    assert out.rfind("\n", 0, probe) == out.rfind(direction, 0, probe) - 1
    # Then a move the cost model chose: toward B*, or, where the time did not grow with the batch (on some
    # machines Ray's round trip hides CartPole's per-observation cost at 40-80 observations), one size up,
    # or where it grew faster than the batch, one size down.
    assert (("B* = sqrt(r " in out and " / 2) = " in out) or "the time did not grow with the batch; timing a larger" in out
            or "the time grew faster than the batch; timing a smaller" in out)
    # The progress line says why auto holds; the summary, after how many agent steps it did what.
    notes = re.findall(r"lr \S+  \[auto: ([^\]]+)\]", out)
    assert len(notes) >= 2  # the first line's, and the last line's after the run
    assert "no noise-scale estimate (none yet)" in notes  # the first update's: noise_settle waits 50 steps
    summary = json.loads((run_dir / "summary.json").read_text())
    decided = summary["batch_decisions"]
    assert sum(decided.values()) == summary["agent_steps"]
    assert f"at {summary['learned_at']:,} agent steps; auto may now grow" in out
    assert decided["resize"] > 0 and decided["timing"] > 0 and set(decided) <= {
        "no estimate", "resize", "timing", "nothing learned", "cooling down", "small gain", "within hysteresis",
        "at learning floor", "at bound"}
    events = scalars(run_dir)
    tags = set(events.Tags()["scalars"])
    assert {"perf/overhead_seconds", "perf/seconds_per_observation", "batch/exchange_rate",
            "batch/predicted_speedup", "perf/update_seconds"} <= tags
    # the probe, then at least one resize by the model (back to 8 is one too: it may find 8 the better)
    n_envs = [e.value for e in events.Scalars("batch/n_envs")]
    assert sum(a != b for a, b in zip(n_envs[:-1], n_envs[1:], strict=True)) >= 2
    assert all(e.value > 0 for e in events.Scalars("perf/seconds_per_observation"))
    logged = {tag: {e.step: e.value for e in events.Scalars(tag)} for tag in
              ("perf/overhead_seconds", "perf/seconds_per_observation", "batch/optimizer_batch", "noise/b_simple_total")}
    checked = 0
    for e in events.Scalars("batch/predicted_speedup"):
        # Recomputed from the logged a, b, batch and B_simple with the closed form (docs/batch-control.md),
        # not with rlscale.control.cost: tau(B) = (a + b B)(1 + B_n / B), least at B* = sqrt(a B_n / b), where
        # it is (sqrt(a) + sqrt(b B_n))^2 (finite also where a noisy fit reads a = 0), B_n = B_simple / 2.
        a, b = logged["perf/overhead_seconds"][e.step], logged["perf/seconds_per_observation"][e.step]
        batch, b_noise = logged["batch/optimizer_batch"][e.step], logged["noise/b_simple_total"][e.step] / 2
        least = (math.sqrt(a) + math.sqrt(b * b_noise)) ** 2
        assert e.value == pytest.approx((a + b * batch) * (1 + b_noise / batch) / least, rel=1e-3)
        checked += 1
    assert checked > 10


def test_the_cluster_clock_keeps_its_last_resolved_fit_when_a_refit_loses_its_overhead(tmp_path):
    """A refit on noisy timings whose overhead falls to zero is not a T(B) to price with: the clock goes on pricing
    every update, later ones too, with the last resolved fit, and the summary's cluster block names that fit."""
    cfg = build_config("cartpole", None, {"n_actors": 1, "batch": "auto", "cluster_nodes": 16,
                                          "run_dir": str(tmp_path / "run")})
    run = build(cfg, Path(cfg.run.run_dir))
    try:
        cost = run.controller.cost
        for batch in (80, 160):
            for _ in range(5):
                cost.add(batch, 0.05 + 0.001 * batch)
                run.clock.tick(batch)
        resolved = cost.fit
        assert not resolved.unresolved
        priced = cluster_metrics(run, run.cluster_fit())
        assert priced[tags.CLUSTER_WALL_SECONDS] == pytest.approx(run.clock.wall_seconds(resolved))
        for _ in range(5):  # a larger batch timed far slower than the line: the refit's overhead is below zero
            cost.add(1280, 2.0)
            run.clock.tick(1280)
        assert cost.fit.unresolved == "no overhead"
        later = cluster_metrics(run, run.cluster_fit())
        assert later[tags.CLUSTER_WALL_SECONDS] == pytest.approx(run.clock.wall_seconds(resolved))
        assert later[tags.CLUSTER_WALL_SECONDS] > priced[tags.CLUSTER_WALL_SECONDS]
        write_summary(run)
        cluster = json.loads((run.run_dir / "summary.json").read_text())["cluster"]
        assert cluster["fit"] == {"overhead_seconds": resolved.overhead,
                                  "seconds_per_optimizer_observation": resolved.per_observation}
        assert cluster["node_hours"] == pytest.approx(later[tags.CLUSTER_NODE_HOURS])
    finally:
        run.engine.close()
        run.logger.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_auto_from_an_eighth_grows_and_logs_the_cluster_clock_on_ray(tmp_path, capsys):
    """--batch auto from 1/8 of CartPole's best fixed batch (2 envs of 16) with --cluster-nodes 16, on Ray
    actors: it grows only once the return rises, and the clock's time and node-hours are those of its updates."""
    run_dir = tmp_path / "auto"
    code = main(["cartpole", "--n-actors", "2", "--batch", "auto", "--n-envs", "2", "--min-envs", "2",
                 "--max-envs", "64", "--cluster-nodes", "16", "--set", "cooldown=1000", "--set", "noise_groups=2",
                 "--total-frames", "30000",
                 "--run-dir", str(run_dir)])
    assert code == 0
    out = capsys.readouterr().out
    assert "cluster clock: up to 16 nodes of 16 envs (80 observations), 30 ms round trip past one node" in out
    assert "auto may now grow the batch" in out
    events = scalars(run_dir)
    n_envs = [e.value for e in events.Scalars("batch/n_envs")]
    assert n_envs[0] == 2 and max(n_envs) > 2
    learned_at = json.loads((run_dir / "summary.json").read_text())["learned_at"]
    assert max(e.value for e in events.Scalars("batch/n_envs") if e.step < learned_at) <= 2  # no growth before
    batches = [e.value for e in events.Scalars("batch/optimizer_batch")]
    wall = events.Scalars("cluster/wall_seconds")
    assert wall and all(e.value > 0 for e in wall)  # repriced with every new fit: it need not only rise
    # The last reading by hand from every update's batch and the fit the summary names (the latest resolved one: a
    # last refit with no overhead does not price it): up to 16 nodes of 80 observations, T_N(B) = a + b*B/n + 0.03 s
    # past one node, node-seconds n T_N.
    summary = json.loads((run_dir / "summary.json").read_text())
    a, b = summary["cluster"]["fit"]["overhead_seconds"], summary["cluster"]["fit"]["seconds_per_optimizer_observation"]
    # ... a fit the cost model logged at some update (a and b per observation: CartPole's A2C trains on all it collects).
    overheads, slopes = events.Scalars("perf/overhead_seconds"), events.Scalars("perf/seconds_per_observation")
    assert any(o.value == pytest.approx(a, rel=1e-5) and s.value == pytest.approx(b, rel=1e-5)
               for o, s in zip(overheads, slopes, strict=True))
    nodes = [max(1, min(16, math.ceil(batch / 80 - 1e-9))) for batch in batches]
    seconds = [a + b * batch / n + (0.03 if n > 1 else 0.0) for batch, n in zip(batches, nodes, strict=True)]
    assert wall[-1].value == pytest.approx(sum(seconds), rel=1e-4)
    node_hours = events.Scalars("cluster/node_hours")[-1].value
    assert node_hours == pytest.approx(sum(n * t for n, t in zip(nodes, seconds, strict=True)) / 3600, rel=1e-4)
    assert summary["cluster"]["nodes"] == 16 and summary["cluster"]["node_hours"] == pytest.approx(node_hours)


def test_overlapped_collection_trains_with_a_one_update_policy_lag(tmp_path, capsys):
    """--overlap: the actors collect the next batch while the learner trains; the run counts every step."""
    run_dir = tmp_path / "overlap"
    assert main(["cartpole", "--n-actors", "2", "--overlap", "--total-frames", "6000",
                 "--run-dir", str(run_dir)]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["agent_steps"] >= 6_000
    assert [e.value for e in scalars(run_dir).Scalars("rollout/episode_return")]
    assert main(["cartpole", "--backend", "rllib", "--overlap", "--run-dir", str(tmp_path / "bad")]) == 2
    assert "--overlap is an option of the native engine" in capsys.readouterr().err


def test_a_minatar_game_by_id_trains_with_its_network_and_logs_returns(tmp_path, capsys):
    run_dir = tmp_path / "minatar"
    assert main(["MinAtar/SpaceInvaders-v1", "--pool", "serial", "--total-frames", "6000", "--run-dir", str(run_dir)]) == 0
    returns = [e.value for e in scalars(run_dir).Scalars("rollout/episode_return")]
    assert returns and all(r >= 0 for r in returns)
    saved = checkpoint.load(checkpoint.latest(run_dir))["engine"]["learner"]["model"]
    assert saved["trunk.1.weight"].shape[:2] == (16, 6)  # one 3x3 convolution, 16 channels, 6 object kinds


def test_progress_lines_say_how_long_the_rest_of_the_budget_takes(tmp_path, capsys):
    import re

    assert main(["cartpole", "--pool", "serial", "--total-frames", "20000", "--log-interval", "0.2",
                 "--run-dir", str(tmp_path / "run")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    timed = [line for line in lines if " ETA " in line]
    assert timed, lines
    for line in timed:
        assert re.search(r" budget ETA (\d+h\d\dm|\d+m\d\ds|\d+s|~(\d+h\d\dm|\d+m\d\ds|\d+s) \(rate settling\))"
                         r"( \(goal \d+( at ~[\d,]+ steps, \S+|: the return's trend is not clear yet)\))?$", line), line


def test_a_settled_progress_line_labels_its_eta_as_the_budgets(tmp_path, capsys):
    """The short run above only prints lines while the rate settles; this one is settled."""
    logger = RunLogger(str(tmp_path / "run"))
    try:
        assert logger.progress(1_000, 11_000, 100.0, GoalWindow([1.0]), 8, None, "total", 1e-3, settling=False)
    finally:
        logger.close()
    line = capsys.readouterr().out.strip()
    assert line.endswith("  budget ETA 1m40s"), line


def test_the_eta_rate_rides_out_a_pause_and_says_when_it_is_still_settling():
    """A 10 s pause (actors replaced after a lost node) at 100 steps/s: the 2 s rate falls to
    ~0 and recovers; the ETA's rate moves by less than a sixth (the issue saw 10m55s -> 49m39s)."""
    rate = StepRate(0, window=2.0, horizon=60.0)
    steps, start = 0, rate.since
    now = start
    while now < start + 120:  # two minutes at 100/s
        now, steps = now + 2, steps + 200
        rate.update(steps, now)
    assert rate.settled and rate.smoothed == pytest.approx(100)
    rate.update(steps, now + 10)  # ten seconds without a step
    assert rate.per_second == 0 and rate.smoothed == pytest.approx(100 * math.exp(-10 / 60))
    assert rate.smoothed > 100 * 5 / 6
    early = StepRate(0, horizon=60.0)
    early.update(500, 5.0 + early.since)
    assert not early.settled and early.smoothed == pytest.approx(100)  # the first window, as it is


def test_the_runs_last_progress_line_is_not_printed_twice_at_one_step(tmp_path, capsys):
    """The loop's last update may print a line at the budget's end; the line the run forces when it ends is then
    the same step again (it read twice in the README's example) and is left out."""
    logger = RunLogger(str(tmp_path))
    try:
        line = dict(total=1000, steps_per_s=100.0, window=GoalWindow(), n_envs=8, signal=None, signal_name="total",
                    lr=1e-3)
        assert logger.progress(1000, interval=0.0, **line)
        assert not logger.progress(1000, force=True, **line)
        assert logger.progress(1040, force=True, **line)  # another step: printed
    finally:
        logger.close()
    assert len([text for text in capsys.readouterr().out.splitlines() if text.startswith("[100.0%]")]) == 2


def test_critical_control_can_follow_the_hessian_noise_scale(tmp_path, capsys):
    """--signal hessian: the controller's target is B_noise (eq. 2.8), and the progress line names it."""
    run_dir = tmp_path / "hessian"
    assert main(["cartpole", "--pool", "serial", "--signal", "hessian", "--batch", "critical", "--set", "curvature_every=2",
                 "--set", "cooldown=2000", "--total-frames", "8000", "--log-interval", "0.5",
                 "--run-dir", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "B_noise " in out and "resize 8 -> " in out
    events = scalars(run_dir)
    b_noise = {e.step: e.value for e in events.Scalars("noise/b_noise")}
    targets = events.Scalars("batch/target")
    assert targets and all(e.value == pytest.approx(b_noise[e.step], rel=1e-6) for e in targets)


def test_replay_follows_a_recorded_auto_run_open_loop(tmp_path, capsys):
    """--batch replay on another seed takes, after every update, the environments and learning rate the
    recorded run had taken at that agent step (docs/studies.md rule 4)."""
    recorded, replay = tmp_path / "auto", tmp_path / "replay"
    # lr_alpha 0.5: the preset keeps A2C's rate on resizes, and a replayed rate should move
    common = ["cartpole", "--pool", "serial", "--learner-threads", "1", "--n-envs", "8", "--min-envs", "4",
              "--max-envs", "64", "--total-frames", "12000", "--lr-rule", "power", "--set", "lr_alpha=0.5"]
    assert main([*common, "--batch", "auto", "--set", "cooldown=1000", "--run-dir", str(recorded)]) == 0
    capsys.readouterr()
    assert main([*common, "--set", "batch=replay", "--set", f"replay_from={recorded}", "--seed", "1",
                 "--run-dir", str(replay)]) == 0
    out = capsys.readouterr().out
    assert f"replaying {recorded}: " in out
    # The recorded run's probe: down while nothing was learned, up after (its own output is not kept here).
    assert ("resize 8 -> 4 envs (shrink: replay: the recorded run took 4" in out
            or "resize 8 -> 16 envs (grow: replay: the recorded run took 16" in out)

    def path(run_dir: Path) -> tuple[list[int], list[float], list[float]]:
        events = scalars(run_dir)
        return (steps_of(run_dir, "batch/n_envs"), [e.value for e in events.Scalars("batch/n_envs")],
                [e.value for e in events.Scalars("train/lr")])

    steps, n_envs, lrs = path(recorded)
    # A path worth replaying: the count and, by the power rule, the rate moved. The cost model's probe
    # (8 -> 4 or 16) always moves them; what auto does after it rests on timings and differs between machines.
    assert len(set(n_envs)) >= 2 and len(set(lrs)) >= 2

    def recorded_at(step: int) -> tuple[float, float]:  # what the recorded run took after training `step`
        i = max(i for i, s in enumerate(steps) if s <= step)
        return n_envs[i], lrs[min(i + 1, len(lrs) - 1)]

    r_steps, r_envs, r_lrs = path(replay)
    for i, step in enumerate(r_steps):
        assert r_envs[i] == recorded_at(step)[0], step
        if i + 1 < len(r_steps):
            assert r_lrs[i + 1] == pytest.approx(recorded_at(step)[1], rel=1e-6), step
    assert "noise/b_simple_total" in scalars(replay).Tags()["scalars"]  # measured, not followed
    # A replay must start where the recorded run started.
    assert main([*common, "--n-envs", "16", "--set", "batch=replay", "--set", f"replay_from={recorded}",
                 "--run-dir", str(tmp_path / "other")]) == 2
    assert "started with --n-envs 8; give this run the same" in capsys.readouterr().err


def test_a_checkpoint_from_before_the_decision_counts_resumes_with_its_steps_unrecorded():
    """A run saved before summary.json counted the controller's decisions resumes with its earlier agent steps
    under "unrecorded", so that the counts still add up to its agent steps."""
    old = TrainState.from_saved({"agent_steps": 5000, "examples": 5000, "n_envs": 8, "learned": True})
    assert old.batch_decisions == {"unrecorded": 5000} and old.learned_at is None
    new = TrainState.from_saved({"agent_steps": 5000, "batch_decisions": {"resize": 40, "cooling down": 4960}})
    assert new.batch_decisions == {"resize": 40, "cooling down": 4960}
