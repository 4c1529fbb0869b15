"""The fixed-vs-auto study report on hand-made runs with known answers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from rlscale import tags
from rlscale.config import build_config
from rlscale.control.cost import Fit, predicted_speedup
from rlscale.control.noise import NoiseSample, NoiseScaleEMA
from rlscale.reports.runs import WINDOW_SAMPLES, RunRecord
from rlscale.reports.study import cells, fixed_runs_cost, median_interval, run_ceiling, variant_of


def record(name: str, batch: str, n_envs: int, reach_at: float | None, seconds_per_step: float,
           update_seconds: float = 0.01, b_simple: float = 400.0) -> RunRecord:
    """A CartPole run whose 20-episode mean jumps from 0 to 500 at agent step ``reach_at``."""
    # The rate and its rule pinned (not the preset's): the variants' names below spell them out.
    cfg = build_config("cartpole", None, {"n_envs": n_envs, "batch": batch, "min_envs": 4, "lr": 7e-4, "lr_alpha": 0.5})
    steps = np.arange(1, 201) * 100.0
    returns = np.where(steps >= (reach_at or math.inf), 500.0, 0.0)
    scalars = {
        "rollout/episode_return": (steps, returns),
        "train/updates": (steps, steps / 40), "train/examples": (steps, steps),
        "perf/wall_seconds": (steps, steps * seconds_per_step),
        "batch/optimizer_batch": (steps, np.full(steps.size, n_envs * 5.0)),
        "perf/update_seconds": (steps, np.full(steps.size, update_seconds)),
        "noise/b_simple": (steps, np.full(steps.size, b_simple)),
    }
    return RunRecord(Path(name), cfg, scalars, None)


def test_adaptive_runs_that_differ_only_in_their_noise_average_or_cooldown_are_separate_variants():
    preset = record("a", "auto", 8, 4_000, 0.01)
    longer = record("b", "auto", 8, 4_000, 0.01)
    longer.cfg.noise.noise_horizon, longer.cfg.control.cooldown = 200_000.0, 50_000.0
    fixed = record("f", "fixed", 8, 4_000, 0.01)
    assert variant_of(preset).endswith("avg 20000 cooldown 5000")
    assert variant_of(longer).endswith("avg 200000 cooldown 50000")
    assert variant_of(fixed) == "fixed 40 lr 0.0007"  # nothing to follow, nothing named
    assert len({c.variant for c in cells([preset, longer], [475.0])}) == 2
    measured = record("c", "auto", 8, 4_000, 0.01)
    measured.cfg.control.cooldown_measured = True  # the cool-down counts what the noise average took
    assert variant_of(measured) == variant_of(preset) + " measured"
    # The cluster runs of the studies before cluster_one_node_first became the default (their configs load it off).
    on_cluster = record("d", "auto", 8, 4_000, 0.01)
    on_cluster.cfg.control.cluster_nodes, on_cluster.cfg.control.cluster_one_node_first = 16, False
    given = record("e", "auto", 8, 4_000, 0.01)
    given.cfg.control.cluster_nodes, given.cfg.control.cluster_fit = 16, "0.003,0.00004"
    banded = record("g", "auto", 8, 4_000, 0.01)
    banded.cfg.control.cluster_nodes, banded.cfg.control.cluster_hysteresis = 16, 1.5
    given.cfg.control.cluster_one_node_first = banded.cfg.control.cluster_one_node_first = False
    # On a cluster, auto choosing with the given T(B) or with a band on its reading is another controller.
    assert variant_of(given) == variant_of(on_cluster) + " given T(B)"
    assert variant_of(banded) == variant_of(on_cluster) + " reading band 1.5"
    one_node = record("h", "auto", 8, 4_000, 0.01)
    one_node.cfg.control.cluster_nodes, one_node.cfg.control.cluster_one_node_first = 16, True
    assert variant_of(one_node) == variant_of(on_cluster) + " one node first"


def test_runs_that_follow_another_noise_scale_are_another_variant():
    total, hessian = record("a", "critical", 8, 4_000, 0.01), record("b", "critical", 8, 4_000, 0.01)
    hessian.cfg.control.signal = "hessian"
    assert "follows" not in variant_of(total)  # the default signal keeps the names of earlier studies
    assert variant_of(hessian) == variant_of(total).replace(" avg", " follows B_noise avg") + " every 100"
    assert len({c.variant for c in cells([total, hessian], [475.0])}) == 2


def test_a_wider_band_or_another_curvature_cadence_names_its_own_variant():
    """The band and, for a signal read on the curvature cadence, how often it is read change what the
    controller does with the same signal: pooling such runs would mix two controllers."""
    plain, banded = record("a", "critical", 8, 4_000, 0.01), record("b", "critical", 8, 4_000, 0.01)
    banded.cfg.control.hysteresis = 2.0
    assert variant_of(banded) == variant_of(plain) + " band 2"
    every_batch, every_fifth = record("c", "critical", 8, 4_000, 0.01), record("d", "critical", 8, 4_000, 0.01)
    for run, k in ((every_batch, 1), (every_fifth, 5)):
        run.cfg.control.signal, run.cfg.noise.curvature_every = "hessian", k
    assert variant_of(every_batch).endswith("follows B_noise avg 20000 cooldown 5000 every 1")
    assert variant_of(every_fifth).endswith(" every 5")
    plain.cfg.noise.curvature_every = 1  # B_simple is read every batch whatever the cadence
    assert "every" not in variant_of(plain)


def test_runs_whose_noise_averages_took_new_environments_first_batches_are_another_variant():
    """Runs from before --noise-settle load as settle 0 (tests/test_config.py): their averages differ."""
    settled, before = record("a", "critical", 8, 4_000, 0.01), record("b", "critical", 8, 4_000, 0.01)
    before.cfg.noise.noise_settle = 0
    assert "settle" not in variant_of(settled)  # the default unnamed
    assert variant_of(before) == variant_of(settled) + " settle 0"


def test_a_clipped_noise_average_names_its_own_variant():
    plain, clipped = record("a", "auto", 8, 4_000, 0.01), record("b", "auto", 8, 4_000, 0.01)
    clipped.cfg.noise.noise_clip = 10.0
    assert variant_of(clipped) == variant_of(plain) + " clip 10"


def test_the_verdict_compares_with_the_start_only_where_that_fixed_batch_ran(capsys):
    """A study holding only the best fixed batch (40) says nothing of an auto run's start (80), no 'nan x'."""
    from rlscale.reports.study import print_verdict

    runs = [record(f"f{s}", "fixed", 8, 5_000, 0.01) for s in range(3)]
    runs += [record(f"a{s}", "auto", 16, 4_000, 0.01) for s in range(3)]
    runs += [record(f"b{s}", "auto", 8, 4_000, 0.01) for s in range(3)]
    print_verdict(runs, cells(runs, [475.0]))
    out = capsys.readouterr().out
    from_80 = next(line for line in out.splitlines() if "auto from 80" in line)
    from_40 = next(line for line in out.splitlines() if "auto from 40" in line)
    assert "the speed of" not in from_80 and "0.85x the time of the best fixed" in from_80
    assert "1.17x the speed of fixed 40 lr 0.0007" in from_40


def test_median_interval_by_bootstrap():
    median, low, high = median_interval(np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    assert median == 3.0 and low == 1.0 and high == 5.0
    median, _, high = median_interval(np.array([1.0, 2.0, math.inf, math.inf, math.inf]))
    assert median == math.inf and high == math.inf  # most seeds never got there


def test_study_cells_group_variants_and_count_unreached_seeds():
    runs = [record(f"f{s}", "fixed", 8, 5_000 + 1_000 * s, 0.01) for s in range(5)]
    runs += [record(f"a{s}", "auto", 8, 4_000 if s < 3 else None, 0.01) for s in range(5)]
    assert {variant_of(r) for r in runs} == {"fixed 40 lr 0.0007", "auto from 40 lr 0.0007 power a0.5 min-gain 0.05 avg 20000 cooldown 5000"}
    table = {c.variant: c for c in cells(runs, [475.0])}
    fixed, auto = table["fixed 40 lr 0.0007"], table["auto from 40 lr 0.0007 power a0.5 min-gain 0.05 avg 20000 cooldown 5000"]
    # The 20-episode window is full from step 2,000 on; a jump at step s makes the mean
    # reach 475 when 19 of the last 20 episodes are 500: 18 episodes (1,800 steps) later.
    assert fixed.reached == 5 and fixed.wall[0] == pytest.approx((7_000 + 1_800) * 0.01)
    assert auto.reached == 3 and auto.wall[0] == pytest.approx((4_000 + 1_800) * 0.01)
    assert auto.walls.count(math.inf) == 2


def test_variants_keep_forced_bf16_apart():
    """bf16 can change learning: runs with the learner or the actors forced to it are their own variants."""
    plain, learner, actors = (record(f"r{i}", "fixed", 8, 5_000, 0.01) for i in range(3))
    learner.cfg.learner.learner_precision = "bf16"
    actors.cfg.pool.actor_precision = "bf16"
    assert [variant_of(r) for r in (plain, learner, actors)] == [
        "fixed 40 lr 0.0007", "fixed 40 lr 0.0007 bf16", "fixed 40 lr 0.0007 actors bf16"]


def test_a_replay_is_named_by_its_start_and_source_and_prints_no_target(capsys):
    """A replay's rates are the recorded run's: no rule of its own in its name, and no target in its path."""
    from rlscale.reports.study import print_batch_paths

    run = record("r", "fixed", 8, 5_000, 0.01)
    run.cfg.control.batch, run.cfg.control.replay_from = "replay", "runs/auto-320/auto-b320-lr0.01-s5"
    run.cfg.control.lr_rule = "power"
    assert variant_of(run) == "replay from 40 lr 0.0007 of auto-320"
    print_batch_paths([run], 475.0)
    assert "replay from 40 lr 0.0007 of auto-320: batch 40 -> 40-40 (at the goal 40); no target (a replay)" in \
        capsys.readouterr().out


def test_ceiling_of_batch_control_from_the_fixed_runs_cost_and_noise_scale():
    """Fixed runs at 40 and 160 observations timed at a + b*B (a = 10 ms, b = 0.5 ms): the study's
    cost model is that line, and with a constant B_simple of 400 the ceiling over a fixed batch B
    is tau(B)/tau(B*) at B* = sqrt(20 x 400 / c) -- cost.predicted_speedup."""
    a, b = 0.01, 0.0005
    runs = [record(f"f{batch}-{s}", "fixed", batch // 5, 5_000, 0.01, update_seconds=a + b * batch)
            for batch in (40, 160) for s in range(5)]
    fit = fixed_runs_cost(runs)
    assert fit.overhead == pytest.approx(a) and fit.per_observation == pytest.approx(b)
    small, large = runs[0], runs[-1]
    assert run_ceiling(small, 475.0, fit, None) == pytest.approx(predicted_speedup(Fit(a, b), 40, 400))
    assert run_ceiling(large, 475.0, fit, None) == pytest.approx(predicted_speedup(Fit(a, b), 160, 400))
    assert run_ceiling(small, 475.0, fit, 4.0) == pytest.approx(predicted_speedup(Fit(a, b), 40, 100))
    assert run_ceiling(small, 600.0, fit, None) is None  # never reached
    assert fixed_runs_cost(runs[:5]) is None  # one batch size cannot tell a from b


def test_study_refuses_a_bad_crit_ratio_in_one_line(tmp_path, capsys):
    from rlscale.reports.study import main

    assert main([str(tmp_path), "--crit-ratio", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--crit-ratio must be a positive number" in err[0]


def test_mean_noise_scale_weights_each_value_by_its_progress():
    """Appendix D: each logged B_simple weighted by 1/(1 + B_simple/B); by hand for two values."""
    run = record("r", "fixed", 16, None, 0.01)  # optimizer batch 80
    steps = np.array([100.0, 200.0])
    run.scalars["noise/b_simple"] = (steps, np.array([80.0, 720.0]))
    # weights 1/(1 + 1) = 0.5 and 1/(1 + 9) = 0.1: (0.5 * 80 + 0.1 * 720) / 0.6 = 186.667
    assert run.mean_noise_scale() == pytest.approx(112.0 / 0.6)
    assert run.mean_noise_scale(until=150.0) == pytest.approx(80.0)
    assert run.mean_noise_scale(until=50.0) is None


def metric_run(steps: np.ndarray, grad: np.ndarray, trace: np.ndarray, batch: float) -> RunRecord:
    """A run that followed B_noise and logged its two averages, <G,HG> and tr(H Sigma), at ``steps``."""
    cfg = build_config("cartpole", None, {"signal": "hessian"})
    _, grad_tag, trace_tag = tags.METRIC_TAGS["hessian"]
    scalars = {grad_tag: (steps, grad), trace_tag: (steps, trace),
               tags.OPTIMIZER_BATCH: (steps, np.full(steps.size, batch))}
    return RunRecord(Path("m"), cfg, scalars, None)


def test_mean_noise_scale_weighs_windows_of_samples_by_their_progress():
    """Two windows of WINDOW_SAMPLES samples, one logged value per update: each window reads the ratio of
    its averages' means (100 / 1 = 100, 900 / 1 = 900 over the window's updates), weighted by its
    updates' progress 1/(1 + B/batch) at batch 100: (16 * 0.5 * 100 + 16 * 0.1 * 900) / (16 * 0.6)."""
    n = 2 * WINDOW_SAMPLES
    steps = np.arange(1.0, n + 1)
    grad = 1.0 + 1e-3 * np.arange(n)  # a new value each update: one sample each
    trace = np.where(np.arange(n) < WINDOW_SAMPLES, 100.0, 900.0) * grad
    run = metric_run(steps, grad, trace, 100.0)
    assert run.mean_noise_scale() == pytest.approx((0.5 * 100 + 0.1 * 900) / 0.6)
    assert run.mean_noise_scale(until=float(WINDOW_SAMPLES)) == pytest.approx(100.0)
    grad[WINDOW_SAMPLES:] = -1.0 - 1e-3 * np.arange(WINDOW_SAMPLES)  # <G,HG> averaged < 0: no noise scale there
    assert metric_run(steps, grad, trace, 100.0).mean_noise_scale() == pytest.approx(100.0)
    assert run.mean_noise_scale(until=0.5) is None


def test_a_runs_average_noise_scale_does_not_depend_on_how_often_it_was_measured():
    """B_noise = 1,000 at batch 640, its samples as noisy as on MinAtar (<G,HG> negative in a quarter of
    them), fed through the run's own running average (20,000 observations) every batch or every 25th
    batch: averaged over training, both read the truth within 15 %. Weighing each logged value on its
    own (a window of one sample), the every-25th run reads 0.80x the truth here."""
    truth, batch, updates = 1000.0, 640.0, 5000
    readings = {}
    for cadence in (1, 25):
        rng = np.random.default_rng(cadence)
        ema, unseen, grad, trace = NoiseScaleEMA(20_000.0), 0.0, [], []
        for update in range(updates):
            unseen += batch
            if update % cadence == 0:
                g = 1.0 + 1.5 * rng.standard_normal()
                ema.update(NoiseSample(g, truth * (1.0 + 0.5 * rng.standard_normal()), batch, batch), unseen)
                unseen = 0.0
            grad.append(ema.grad_sq)
            trace.append(ema.trace_sigma)
        steps = batch * np.arange(1.0, updates + 1)
        readings[cadence] = metric_run(steps, np.array(grad), np.array(trace), batch).mean_noise_scale()
    assert readings[1] == pytest.approx(truth, rel=0.15)
    assert readings[25] == pytest.approx(truth, rel=0.15)


def test_best_points_take_each_batch_size_at_its_fastest_learning_rate_reached_by_every_seed():
    """Per batch size, the learning rate with the fewest steps among those all of whose seeds got there."""
    from dataclasses import replace

    from rlscale.reports.pareto import best_points

    def at(lr: float, n_envs: int, reach_at: float | None) -> RunRecord:
        run = record(f"b{n_envs}-lr{lr}", "fixed", n_envs, reach_at, 0.01)
        run.cfg = replace(run.cfg, agent=replace(run.cfg.agent, lr=lr))
        return run

    runs = [at(1e-3, 16, 6_000), at(1e-3, 16, 9_000),      # batch 80: both seeds reach the goal
            at(2e-3, 16, 3_000), at(2e-3, 16, None),       # faster, but a seed never got there
            at(4e-3, 16, 8_000), at(4e-3, 16, 8_000),      # all reach, slower than 1e-3's geometric mean
            at(1e-3, 32, 5_000), at(1e-3, 32, 5_000),      # batch 160: only 5e-4 ...
            at(5e-4, 32, 4_000), at(5e-4, 32, 4_000)]      # ... is faster here
    points = best_points(runs, 250.0)
    assert [(p.batch, p.lr) for p in points] == [(80.0, 1e-3), (160.0, 5e-4)]
    hits = [runs[0].goal(250.0), runs[1].goal(250.0)]
    assert points[0].steps == pytest.approx(math.sqrt(hits[0].updates * hits[1].updates))  # geometric mean
    assert points[0].examples == pytest.approx(math.sqrt(hits[0].examples * hits[1].examples))


def test_pareto_names_best_rates_at_the_grid_edge_and_prints_each_seeds_crossings():
    """Rule 3: a batch whose best rate is its grid's lowest or highest is named; crossings per cell and seed."""
    from dataclasses import replace

    from rlscale.reports.pareto import GoalResult, best_points, crossing_lines, grid_edges

    def at(lr: float, n_envs: int, reach_at: float | None, seed: int) -> RunRecord:
        run = record(f"b{n_envs}-lr{lr}-s{seed}", "fixed", n_envs, reach_at, 0.01)
        run.cfg = replace(run.cfg, agent=replace(run.cfg.agent, lr=lr), run=replace(run.cfg.run, seed=seed))
        return run

    runs = [at(1e-3, 16, 6_000, 0), at(2e-3, 16, 3_000, 0), at(4e-3, 16, 8_000, 0),  # batch 80: inside
            at(1e-3, 32, 2_000, 0), at(2e-3, 32, 5_000, 0),                           # batch 160: lowest
            at(4e-3, 8, 3_000, 0)]                                                    # batch 40: one rate only
    result = GoalResult(250.0, best_points(runs, 250.0), None, {})
    assert grid_edges(runs, [result]) == [
        "goal 250: batch 160's best learning rate 0.001 is the lowest it tried (0.001, 0.002); try a lower one"]
    runs.append(at(1e-3, 32, None, 1))  # its second seed never gets there: 0.002 becomes best, the highest
    result = GoalResult(250.0, best_points(runs, 250.0), None, {})
    assert grid_edges(runs, [result]) == [
        "goal 250: batch 160's best learning rate 0.002 is the highest it tried (0.001, 0.002); try a higher one"]
    lines = crossing_lines(runs, [250.0, 600.0])
    first = runs[3].goal(250.0).agent_steps / 1e3  # where the 20-episode mean of seed 0 passed 250
    assert f"b160 lr 0.001 (seeds 0,1) | 250: {first:,.0f} - | 600: - -" in lines
    assert lines[0] == f"b40 lr 0.004 (seeds 0) | 250: {runs[5].goal(250.0).agent_steps / 1e3:,.0f} | 600: -"


def test_bootstrap_interval_of_a_ratio_spans_the_seeds_and_collapses_without_spread():
    """pareto's 95 % interval of B_simple / B_crit: seeds resampled within each (batch, lr) cell."""
    from rlscale.reports.pareto import analyse, bootstrap_ratios

    def runs_with(spread: float) -> list[RunRecord]:
        # Batches 40, 80, 160 reach the goal at agent steps 12k, 8k, 6k (S falls with B as eq. 2.11
        # has it); the two seeds of each cell differ by +-spread in time and in their noise scale.
        out = []
        for n_envs, reach in ((8, 12_000), (16, 8_000), (32, 6_000)):
            for sign in (-1, 1):
                run = record(f"b{n_envs}-s{sign}", "fixed", n_envs, reach * (1 + sign * spread), 0.01,
                             b_simple=100.0 * (1 + sign * spread))
                run.scalars["noise/b_simple_total"] = run.scalars.pop("noise/b_simple")  # as runs log it now
                out.append(run)
        return out

    same = runs_with(0.0)
    (result,) = analyse(same, [250.0])
    point = result.noise["total"] / result.fit.b_crit
    assert bootstrap_ratios(same, 250.0)["total"] == pytest.approx((point, point))
    spread = runs_with(0.2)
    (result,) = analyse(spread, [250.0])
    low, high = result.intervals["total"]
    assert low < result.noise["total"] / result.fit.b_crit < high


def test_adaptive_runs_are_placed_against_the_fitted_front_and_its_knee():
    """pareto's table for adaptive runs: S/S_min and E/E_min of the goal's fit, median over seeds, and
    'at the knee' only when both medians are at most 2.5 (eq. 2.11 gives 2 and 2 at B = B_crit)."""
    from rlscale.control.pareto_fit import ParetoFit
    from rlscale.reports.pareto import GoalResult, adaptive_rows

    # record(): S = agent steps / 40 and E = agent steps; a jump at step s reaches goal 475 at s + 1,800.
    near = [record(f"c{s}", "critical", 16, 3_000 + 100 * s, 0.01) for s in range(5)]  # median at 5,000
    far = [record(f"a{s}", "auto", 16, 15_000 if s < 3 else None, 0.01) for s in range(5)]  # 2 never reach
    fit = ParetoFit(s_min=50.0, e_min=2_000.0, b_crit=40.0, b_crit_se=1.0, n_points=5, rms_log_residual=0.0)
    rows = {row["variant"]: row for row in adaptive_rows([GoalResult(475.0, [], fit, {})], near + far)}
    critical = rows["critical from 80 lr 0.0007 avg 20000 cooldown 5000"]
    assert critical["reached"] == "5/5"
    assert critical["S / S_min"].startswith("2.50 [")  # 5,000 / 40 / 50
    assert critical["E / E_min"].startswith("2.50 [")  # 5,000 / 2,000
    assert critical["at the knee (both <= 2.5)"] == "yes"
    assert (critical["its batch"], critical["ramp / S_min"]) == ("80", "0.00")  # it never moved: no ramp
    assert critical["swing"] == "1.0"
    assert critical["its reading"] == "400"  # record()'s B_simple, the signal it follows
    for run, (low, high) in zip(near, ((20, 320), (40, 160), (80, 320), (10, 1_280), (80, 80)), strict=True):
        steps, batches = run.scalars["batch/optimizer_batch"]
        run.scalars["batch/optimizer_batch"] = (steps, np.where(steps < 1_000, low, np.where(steps < 2_000, high, 80.0)))
    swung = {row["variant"]: row for row in adaptive_rows([GoalResult(475.0, [], fit, {})], near)}
    assert swung["critical from 80 lr 0.0007 avg 20000 cooldown 5000"]["swing"] == "4.0"  # median of 16, 4, 4, 128, 1
    slow = rows["auto from 80 lr 0.0007 power a0.5 min-gain 0.05 avg 20000 cooldown 5000"]
    assert slow["reached"] == "3/5" and slow["S / S_min"].startswith("8.40 [")  # 16,800 / 40 / 50
    assert slow["at the knee (both <= 2.5)"] == "no"
    assert adaptive_rows([GoalResult(475.0, [], None, {})], near) == []  # no fit, no front to place them on


def test_batch_path_follows_the_batch_and_its_target_up_to_the_goal():
    from rlscale.reports.runs import batch_path

    run = record("a", "auto", 8, 10_000, 0.01)  # reaches goal 475 at step 11,800
    steps = run.scalars["batch/optimizer_batch"][0]
    run.scalars["batch/optimizer_batch"] = (steps, np.where(steps < 5_000, 40.0, np.where(steps < 15_000, 160.0, 20.0)))
    run.scalars["batch/target"] = (steps, np.where(steps < 5_000, 100.0, 200.0))
    path = batch_path(run, 475.0)
    assert (path.start, path.low, path.high, path.at_goal) == (40.0, 40.0, 160.0, 160.0)  # the shrink came later
    assert path.target_low == 100.0 and path.target_high == 200.0
    # Up to the goal 49 updates logged at 40 and 69 at 160: it trained at 160, reached at step 5,000 = 125 updates.
    assert (path.median, path.ramp_updates) == (160.0, 125.0)
    never = batch_path(run, 600.0)  # not reached: its whole run
    assert (never.low, never.high, never.at_goal) == (20.0, 160.0, 20.0)
    assert never.median == 100.0  # 51 updates at 20, 49 at 40, 100 at 160; first at or above 100 at step 5,000
    assert never.ramp_updates == 125.0
    shrinking = record("s", "auto", 64, 10_000, 0.01)  # starts at 320, then 80 from step 2,000
    steps = shrinking.scalars["batch/optimizer_batch"][0]
    shrinking.scalars["batch/optimizer_batch"] = (steps, np.where(steps < 2_000, 320.0, 80.0))
    down = batch_path(shrinking, 475.0)
    assert (down.start, down.median, down.ramp_updates) == (320.0, 80.0, 50.0)  # reached 80 going down


def test_model_check_sets_the_cost_models_time_ratios_beside_the_measured_ones(capsys):
    """Rule 1 of docs/studies.md: tau(B) = T(B)(1 + B_crit/B) from the fixed runs' own update times and
    noise scale, against their median wall times to the goal, both relative to the fastest batch."""
    from rlscale.control.cost import time_per_progress
    from rlscale.reports.study import print_model_check

    a, b = 0.01, 0.0005
    runs = [record(f"f40-{s}", "fixed", 8, 5_000, 0.01, update_seconds=a + b * 40) for s in range(3)]
    runs += [record(f"f160-{s}", "fixed", 32, 5_000, 0.03, update_seconds=a + b * 160) for s in range(3)]
    slow = record("f160-slow-lr", "fixed", 32, 5_000, 0.3, update_seconds=a + b * 160)
    slow.cfg.agent.lr = 1e-2  # the same batch at a worse learning rate: not the one the model is checked on
    print_model_check([*runs, slow], cells([*runs, slow], [475.0]), 475.0, None)
    out = capsys.readouterr().out
    assert "lr 0.01" not in out
    predicted = time_per_progress(Fit(a, b), 160, 400) / time_per_progress(Fit(a, b), 40, 400)
    assert "B_crit = 400" in out and "relative to fixed 40 lr 0.0007" in out
    assert f"fixed 160 lr 0.0007: predicted {predicted:.2f}x, measured 3.00x" in out  # walls 0.03 vs 0.01 per step


def test_self_consistent_batch_is_where_the_reading_at_each_best_rate_equals_the_batch():
    """pareto: B_simple read at each batch size's best learning rate, against the batch. A constant reading of
    100 equals the batch at exactly 100 (log-log interpolation between 80 and 160); a slower rate's reading
    at the same batch does not enter; readings above or below every batch tried are named as such."""
    from rlscale.reports.pareto import SelfConsistent, analyse, self_consistent_lines

    def grid(reading: float) -> list[RunRecord]:
        out = []
        for n_envs, reach in ((8, 12_000), (16, 8_000), (32, 6_000)):  # batches 40, 80, 160
            for seed in range(2):
                best = record(f"b{n_envs}-s{seed}", "fixed", n_envs, reach, 0.01, b_simple=reading)
                slow = record(f"b{n_envs}-slow-s{seed}", "fixed", n_envs, 2 * reach, 0.01, b_simple=50 * reading)
                slow.cfg.agent.lr = 1e-4  # a worse rate at the same batch, reading 50x higher
                for run in (best, slow):
                    run.scalars["noise/b_simple_total"] = run.scalars.pop("noise/b_simple")
                out += [best, slow]
        return out

    (result,) = analyse(grid(100.0), [250.0])
    assert result.self_consistent["total"].batch == pytest.approx(100.0)
    assert result.self_consistent["total"].loop_gain == pytest.approx(1.0)  # a flat reading: its error as it is
    assert result.intervals["self total"] == pytest.approx((100.0 / result.fit.b_crit,) * 2)  # no seed spread
    (line,) = [x for x in self_consistent_lines([result]) if "goal 250" in x]
    assert f"B_simple total 100 ({100.0 / result.fit.b_crit:.2f} [" in line
    (above,) = analyse(grid(1_000.0), [250.0])
    assert above.self_consistent["total"] == SelfConsistent(None, "above")
    assert f"B_simple total > 160 (> {160 / above.fit.b_crit:.2f})" in self_consistent_lines([above])[1]
    (below,) = analyse(grid(10.0), [250.0])
    assert below.self_consistent["total"] == SelfConsistent(None, "below")


def test_the_loop_gain_is_how_far_the_settling_batch_moves_per_error_in_the_reading():
    """A reading that grows as 10 sqrt(B) equals the batch at B = 100, with slope 1/2 there: a reading 10 %
    high (11 sqrt(B)) settles at 121, 1.1^2, so the gain 1 / (1 - slope) is 2. A reading that does not move
    with the batch has gain 1: its error passes to the batch as it is."""
    from rlscale.reports.pareto import analyse, self_consistent_lines

    def grid(scale: float) -> list[RunRecord]:
        out = []
        for n_envs, reach in ((8, 12_000), (16, 8_000), (32, 6_000)):  # batches 40, 80, 160
            for seed in range(2):
                run = record(f"b{n_envs}-s{seed}", "fixed", n_envs, reach, 0.01,
                             b_simple=scale * math.sqrt(5.0 * n_envs))
                run.scalars["noise/b_simple_total"] = run.scalars.pop("noise/b_simple")
                out.append(run)
        return out

    (result,) = analyse(grid(10.0), [250.0])
    crossing = result.self_consistent["total"]
    assert crossing.batch == pytest.approx(100.0) and crossing.slope == pytest.approx(0.5)
    assert crossing.loop_gain == pytest.approx(2.0)
    assert result.intervals["gain total"] == pytest.approx((2.0, 2.0))  # no seed spread
    assert "gain 2.0 [2.0, 2.0]" in self_consistent_lines([result])[1]
    (high,) = analyse(grid(11.0), [250.0])
    assert high.self_consistent["total"].batch == pytest.approx(121.0)
    # A crossing from above, but readings that grow faster than the batch over the grid: no stable point.
    runs = grid(10.0)
    for run, reading in zip(runs, [100.0, 100.0, 60.0, 60.0, 2_000.0, 2_000.0], strict=True):
        steps = run.scalars["noise/b_simple_total"][0]
        run.scalars["noise/b_simple_total"] = (steps, np.full(steps.size, reading))
    (steep,) = analyse(runs, [250.0])
    assert steep.self_consistent["total"].slope > 1 and steep.self_consistent["total"].loop_gain is None
    assert "gain unbounded (slope >= 1)" in self_consistent_lines([steep])[1]



def test_the_cluster_clock_prices_each_logged_update_up_to_the_goal(capsys):
    """A run whose return jumps to 500 at agent step 5,000 (one episode and one update a point, every 100 steps)
    meets 475 when 19 of its last 20 episodes are 500: at step 6,800, its 68th update. Fixed at 160
    observations on up to 4 nodes of 80 (2 nodes), a = 10 ms, b = 0.5 ms, c = 30 ms, an update costs
    0.01 + 0.0005 * 160 / 2 + 0.03 = 0.08 s and 2 x 0.08 node-seconds, by hand."""
    from rlscale.control.cluster_clock import ElasticCluster
    from rlscale.reports.study import cluster_cost, print_cluster

    a, b = 0.01, 0.0005
    runs = [record(f"f{batch}-{s}", "fixed", batch // 5, 5_000, 0.01, update_seconds=a + b * batch)
            for batch in (40, 160) for s in range(3)]
    cluster = ElasticCluster(4, 80, 0.03)
    wall, node_seconds = cluster_cost(runs[-1], 475.0, fixed_runs_cost(runs), cluster)
    assert wall == pytest.approx(68 * 0.08) and node_seconds == pytest.approx(68 * 2 * 0.08)
    assert cluster_cost(runs[-1], 600.0, fixed_runs_cost(runs), cluster) == (math.inf, math.inf)
    print_cluster(runs, 475.0, nodes=4, node_envs=16, round_trip=0.03)
    out = capsys.readouterr().out
    # 40 observations: one node, 0.01 + 0.02 = 0.03 s an update, 68 of them: 2.04 s, the fastest and cheapest;
    # 160: 5.44 s (2.67x) and 10.88 node-seconds (5.33x).
    assert "fixed 40 lr 0.0007: 0.034 min, 0.0006 node-h; 1.00x the time and 1.00x the node-hours" in out
    assert "fixed 160 lr 0.0007: 0.091 min, 0.0030 node-h; 2.67x the time and 5.33x the node-hours" in out
