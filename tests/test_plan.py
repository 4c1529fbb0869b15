"""The planner: its math against hand-computed values and integrals, and the command on a real run."""

from __future__ import annotations

import math

import pytest

from rlscale.control.cost import Fit, optimal_batch, predicted_speedup
from rlscale.reports.plan import stretches_of
from rlscale.reports.runs import load_run
from rlscale.reports.scaling import (
    Cluster,
    MeasuredCost,
    Plan,
    Stretch,
    cluster_fit,
    control_ceiling,
    last_paying,
    plan,
    replay,
)
from tests.conftest import run_command, run_in_process
from tests.test_cli import assert_one_line_error

COST = MeasuredCost(overhead=0.05, per_observation=0.001, rollout_share=0.6, reference_cores=2)


def test_cluster_cost_splits_rollout_over_cores_and_learner_over_learners():
    fit = cluster_fit(COST, Cluster(nodes=4, cores_per_node=2, learners=2))
    assert fit.overhead == 0.05
    # rollout 0.001 * 0.6 * 2/8 = 1.5e-4, learner 0.001 * 0.4 / 2 = 2e-4
    assert fit.per_observation == pytest.approx(3.5e-4)
    same = cluster_fit(COST, Cluster(nodes=1, cores_per_node=2))
    assert (same.overhead, same.per_observation) == (0.05, 0.001)  # the run's own machine: the run's model


def test_one_stretch_by_hand():
    # 100 steps at B = 80 with Bn = 320 made 100 / (1 + 4) = 20 full-batch steps of progress.
    stretch = Stretch(optimizer_steps=100, batch=80, noise_scale=320)
    assert stretch.progress == pytest.approx(20.0)
    result = plan([stretch], COST, Cluster(1, 2), steps_per_update=1, min_batch=1)
    # B* = sqrt(50 * 320) = 126.49; steps 20 * (1 + 320/126.49) = 70.596; 0.05 + 0.12649 s each
    assert result.first_batch == pytest.approx(126.4911, rel=1e-6)
    assert result.optimizer_steps == pytest.approx(70.59644, rel=1e-6)
    assert result.wall_seconds == pytest.approx(12.45964, rel=1e-6)
    assert result.examples == pytest.approx(70.59644 * 126.4911, rel=1e-6)
    assert result.core_hours == pytest.approx(12.45964 * 2 / 3600, rel=1e-6)
    # PPO-like: 4 optimizer steps per update divide the time, not the steps.
    assert plan([stretch], COST, Cluster(1, 2), 4, 1).wall_seconds == pytest.approx(12.45964 / 4, rel=1e-6)
    # The run as it ran: 100 updates of 0.05 + 0.08 s.
    assert replay([stretch], COST, 1) == pytest.approx(13.0)


def test_control_ceiling_of_one_stretch_is_the_predicted_speedup():
    """One stretch: the time at its batch over the time at B* is tau(B)/tau(B*), cost.predicted_speedup."""
    fit = Fit(0.05, 0.001)
    stretch = Stretch(100, 80, 320)
    # 13.0 s as it ran (test above) over 12.45964 s at B* = 126.5
    assert control_ceiling([stretch], fit, 1, min_batch=1) == pytest.approx(13.0 / 12.45964, rel=1e-6)
    assert control_ceiling([stretch], fit, 1, min_batch=1) == pytest.approx(predicted_speedup(fit, 80, 320))
    at_optimum = Stretch(100, optimal_batch(fit, 320), 320)
    assert control_ceiling([at_optimum], fit, 1, min_batch=1) == pytest.approx(1.0)
    # Bounds: B* clipped to 100, the gain shrinks; a run already at the bound gains nothing.
    clipped = control_ceiling([stretch], fit, 1, min_batch=1, max_batch=100)
    assert 1.0 < clipped < predicted_speedup(fit, 80, 320)
    assert control_ceiling([Stretch(100, 100, 320)], fit, 1, min_batch=1, max_batch=100) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        control_ceiling([], fit, 1, 1)


def test_control_ceiling_weights_stretches_by_their_time():
    """Two stretches, one at B* and one off it: the ceiling is total time over total time at B*."""
    fit = Fit(0.05, 0.001)
    # By hand: B* = sqrt(0.05 * 320 / 0.001) = 126.491. "on" ran 100 steps at B*: 100 * (0.05 + 0.126491)
    # = 17.6491 s either way. "off" ran 50 steps at 20: 3.5 s, i.e. 50 / (1 + 320/20) = 2.941176 units of
    # progress, which at B* take 2.941176 * (1 + 320/126.491) = 10.38183 steps = 1.832301 s.
    on, off = Stretch(100, 126.49110640673517, 320), Stretch(50, 20, 320)
    assert control_ceiling([on, off], fit, 1, 1) == pytest.approx((17.649111 + 3.5) / (17.649111 + 1.832301),
                                                                  rel=1e-6)  # 1.085605


def test_batch_bounds_hold():
    stretch = Stretch(100, 80, 320)
    assert plan([stretch], COST, Cluster(1, 2), 1, min_batch=200).first_batch == 200
    assert plan([stretch], COST, Cluster(1, 2), 1, min_batch=1, max_batch=100).first_batch == 100


def test_plan_sums_to_the_closed_form_integral():
    """Bn rising linearly with progress, Bn(P) = c*P: the time at B* is
    integral of a + b*Bn + 2*sqrt(a*b*Bn) dP = a*P1 + b*c*P1^2/2 + (4/3)*sqrt(a*b*c)*P1^1.5."""
    a, b, c, p1, n = 0.05, 0.001, 40.0, 500.0, 20_000
    cost = MeasuredCost(a, b, 0.5, 2)
    dp = p1 / n
    stretches = []
    for i in range(n):
        bn = c * (i + 0.5) * dp  # midpoint rule
        batch = 64.0
        stretches.append(Stretch(dp * (1 + bn / batch), batch, bn))  # steps that made dp of progress at 64
    result = plan(stretches, cost, Cluster(1, 2), 1, min_batch=0.0)
    exact = a * p1 + b * c * p1 ** 2 / 2 + 4 / 3 * math.sqrt(a * b * c) * p1 ** 1.5
    assert result.wall_seconds == pytest.approx(exact, rel=1e-6)
    # Steps to the goal at B*: integral of 1 + Bn/B* = 1 + sqrt(Bn * b/a) dP.
    steps = p1 + (2 / 3) * math.sqrt(c * b / a) * p1 ** 1.5
    assert result.optimizer_steps == pytest.approx(steps, rel=1e-6)


def test_more_cores_never_slow_down_and_the_knee_is_where_a_doubling_stops_paying():
    stretches = [Stretch(100, 80, bn) for bn in (100, 1_000, 10_000)]
    plans = [plan(stretches, COST, Cluster(n, 2), 1, 1) for n in (1, 2, 4, 8, 16, 32, 64)]
    walls = [p.wall_seconds for p in plans]
    assert all(x >= y for x, y in zip(walls, walls[1:], strict=False))
    knee = last_paying(plans)
    for i in range(1, knee + 1):
        assert walls[i - 1] / walls[i] >= math.sqrt(2) - 1e-12
    if knee + 1 < len(plans):
        assert walls[knee] / walls[knee + 1] < math.sqrt(2)


def test_last_paying_by_hand():
    def at(cores: int, seconds: float) -> Plan:
        return Plan(Cluster(cores, 1), seconds, 1, 1, 1, 1)

    # 2x cores: 100 -> 50 (pays), -> 30 (1.67x >= 1.41x, pays), -> 25 (1.2x, stops).
    assert last_paying([at(1, 100), at(2, 50), at(4, 30), at(8, 25), at(16, 5)]) == 2
    assert last_paying([at(1, 100)]) == 0


def test_bad_clusters_and_costs_are_refused():
    with pytest.raises(ValueError):
        Cluster(nodes=2, cores_per_node=4, learners=3)  # one learner per node
    with pytest.raises(ValueError):
        MeasuredCost(0.01, 0.0, 0.5, 2)
    with pytest.raises(ValueError):
        plan([], COST, Cluster(1, 2), 1, 1)


@pytest.fixture(scope="module")
def auto_run(tmp_path_factory):
    """A short CartPole run with --batch auto: it measures its own cost model."""
    run_dir = tmp_path_factory.mktemp("plan") / "auto"
    result = run_in_process(["rlscale.train", "cartpole", "--pool", "serial", "--batch", "auto", "--n-envs", "8",
                             "--min-envs", "4", "--max-envs", "64", "--set", "cooldown=1000", "--total-frames", "30000",
                             "--run-dir", str(run_dir)])
    assert result.returncode == 0, result.stderr
    return run_dir


def test_plan_command_on_a_real_run(auto_run, tmp_path):
    png = tmp_path / "plan.png"
    result = run_in_process(["rlscale", "plan", str(auto_run), "--nodes", "1", "2", "4", "--learners", "2",
                             "--cpus-per-node", "2", "--reference-cores", "2", "--out", str(png)])
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "cost model (from" in out and "check: the model replays the run as it ran" in out
    rows = [line.split() for line in out.splitlines() if line.split() and line.split()[0] in {"1", "2", "4"}]
    assert [row[:3] for row in rows] == [["1", "2", "1"], ["2", "4", "2"], ["4", "8", "2"]]  # learners <= nodes
    assert png.stat().st_size > 10_000


def test_plan_reads_b_crit_as_b_simple_over_the_crit_ratio(auto_run):
    """The planner's noise scale is the controller's: B_simple / crit_ratio (the run's unless told)."""
    run = load_run(auto_run)
    until = float(run.agent_steps())
    plain, quarter = stretches_of(run, until), stretches_of(run, until, 4.0)
    assert len(plain) == len(quarter) > 10
    assert all(q.noise_scale == pytest.approx(p.noise_scale / 4) and q.batch == p.batch
               for p, q in zip(plain, quarter, strict=True))
    result = run_in_process(["rlscale", "plan", str(auto_run), "--nodes", "1", "--crit-ratio", "4"])
    assert result.returncode == 0, result.stderr
    assert "B_crit read as B_simple / 4" in result.stdout


def test_plan_bad_input(auto_run, tmp_path):
    fixed = tmp_path / "fixed"
    trained = run_in_process(["rlscale.train", "cartpole", "--pool", "serial", "--n-envs", "4", "--total-frames", "2000",
                              "--run-dir", str(fixed)])
    assert trained.returncode == 0, trained.stderr
    cases = [
        (["rlscale", "plan", str(fixed)], ["has no measured cost model", "--cost RUN_DIR", "--overhead SECONDS"]),
        (["rlscale", "plan", str(tmp_path / "nope")], ["does not exist"]),
        (["rlscale", "plan", str(auto_run), "--nodes", "0"], ["--nodes must be positive"]),
        (["rlscale", "plan", str(auto_run), "--crit-ratio", "0"], ["--crit-ratio must be a positive number"]),
        (["rlscale", "plan", str(auto_run), "--goal", "100000"], ["never reached a mean return of 100000"]),
        (["rlscale", "plan", str(auto_run), "--overhead", "1000"], ["is not below the run's median update time"]),
        (["rlscale", "plan", str(auto_run), "--out", str(tmp_path / "x.jpg")], ["must end in .png"]),
    ]
    (first_args, first_fragments), *rest = cases
    assert_one_line_error(run_command(first_args, timeout=120), *first_fragments)  # a real python -m
    for args, fragments in rest:
        assert_one_line_error(run_in_process(args), *fragments)
