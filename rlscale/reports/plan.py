"""``rlscale plan RUN_DIR``: how much of a cluster a task can use, from one measured run.

Reads the run's noise-scale trajectory and cost model, replays its progress to
the goal at the wall-time-optimal batch of each cluster size (rlscale/scaling.py,
docs/scaling.md), and prints per cluster the batch schedule, the wall time and the
core-hours to the goal, and the size past which more nodes stop paying; a PNG
shows the same. The model's own check comes first: the run replayed on its own
machine at its own batches, next to the wall time it measured.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import numpy as np

from rlscale import tags
from rlscale.cli import Parser, writable_file
from rlscale.errors import UserError, exits_cleanly
from rlscale.reports.plot import save_figure
from rlscale.reports.runs import RunRecord, format_number, load_run
from rlscale.reports.scaling import Cluster, MeasuredCost, Plan, Stretch, last_paying, plan, replay

DEFAULT_NODES = [1, 2, 4, 8, 16, 32, 64]


def steps_per_update(run: RunRecord) -> int:
    """Optimizer steps one update takes: PPO's epochs x minibatches, A2C's one."""
    agent = run.cfg.agent
    return agent.n_epochs * agent.n_minibatches if agent.algo == "ppo" else 1


def series(run: RunRecord, tag: str) -> tuple[np.ndarray, np.ndarray]:
    if tag not in run.scalars:
        raise UserError(f"{run.path}: no '{tag}' scalars; was it written by rlscale.train with the noise scale on?")
    return run.scalars[tag]


def goal_step(run: RunRecord, goal: float | None) -> tuple[float, str]:
    """Agent steps to plan for and what they are: a goal's crossing, or the whole run."""
    if goal is None:
        reached = [g for g in sorted(run.cfg.env.goals) if run.goal(g) is not None]
        if not reached:
            return float(run.agent_steps()), "the whole run (it reached none of its goals)"
        goal = reached[-1]
    hit = run.goal(goal)
    if hit is None:
        raise UserError(f"{run.path} never reached a mean return of {goal:g}; give a --goal it reached "
                        f"(its best was {format_number(run.best_return(), '.1f')}) or none for the whole run")
    return hit.agent_steps, f"mean return {goal:g}"


def checked_crit_ratio(value: float | None) -> float | None:
    """A --crit-ratio flag's value (None: not given), or one line and exit 2."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UserError("--crit-ratio must be a positive number")
    return value


def crit_ratio_of(run: RunRecord, given: float | None) -> float:
    """B_simple / B_crit to read the run's noise scale with: the one given, else the run's own."""
    return run.cfg.control.crit_ratio if given is None else given


def stretches_of(run: RunRecord, until: float, crit_ratio: float | None = None) -> list[Stretch]:
    """One stretch per logged update up to ``until`` agent steps; the noise scale held across undefined ones.

    The stretches' noise scale is B_crit read as B_simple / the crit ratio (``crit_ratio_of``), as the
    controller reads it.
    """
    steps, updates = series(run, tags.UPDATES)
    batch = np.interp(steps, *series(run, tags.OPTIMIZER_BATCH))
    noise_steps, noise = series(run, run.signal_tag)
    # Held flat before the first and after the last value.
    noise_at = np.interp(steps, noise_steps, noise) / crit_ratio_of(run, crit_ratio)
    done = np.diff(updates, prepend=0.0)
    keep = steps <= until
    return [Stretch(float(d), float(b), float(n)) for d, b, n in zip(done[keep], batch[keep], noise_at[keep],
                                                                     strict=True) if d > 0]


def _recent_median(values: np.ndarray, fraction: float = 0.25) -> float:
    """Median of the last ``fraction`` of a series: the model as the run ended, not as it started."""
    return float(np.median(values[-max(1, int(len(values) * fraction)):]))


def measured_cost(run: RunRecord, cost_run: RunRecord, overhead: float | None, reference_cores: int) -> MeasuredCost:
    """a and b from the cost run's fitted model, or from a given overhead and the run's update times."""
    per_update = _recent_median(series(cost_run, tags.SIZE)[1]) / _recent_median(
        series(cost_run, tags.OPTIMIZER_BATCH)[1])
    if overhead is not None:
        seconds = _recent_median(series(run, tags.UPDATE_SECONDS)[1])
        batch = _recent_median(series(run, tags.OPTIMIZER_BATCH)[1])
        per_observation = (seconds - overhead) / batch
        if per_observation <= 0:
            raise UserError(f"--overhead {overhead:g} s is not below the run's median update time "
                            f"({seconds:.3f} s); give a smaller overhead")
    elif tags.OVERHEAD_SECONDS in cost_run.scalars:
        overhead = _recent_median(cost_run.scalars[tags.OVERHEAD_SECONDS][1])
        # Logged per collected observation; the planner works in optimizer-batch observations.
        per_observation = _recent_median(cost_run.scalars[tags.SECONDS_PER_OBSERVATION][1]) * per_update
    else:
        raise UserError(f"{cost_run.path} has no measured cost model (a run at one batch size cannot tell "
                        "the overhead a from the per-observation cost b): give --cost RUN_DIR of a --batch auto "
                        "run of the same task on the same machine, or --overhead SECONDS")
    rollout = _recent_median(series(cost_run, tags.ROLLOUT_SECONDS)[1])
    learner = _recent_median(series(cost_run, tags.LEARNER_SECONDS)[1])
    return MeasuredCost(overhead, per_observation, rollout / (rollout + learner), reference_cores)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def print_table(plans: list[Plan], paying: int, epochs: int) -> None:
    header = (f"{'nodes':>5s} {'cores':>6s} {'learners':>8s} {'batch B* start -> end':>22s} "
              f"{'optimizer steps':>15s} {'agent steps':>12s} {'wall time':>10s} {'speed-up':>8s} "
              f"{'core-hours':>10s}")
    print(header)
    for i, p in enumerate(plans):
        note = "  <- more nodes stop paying past here" if i == paying and i < len(plans) - 1 else ""
        print(f"{p.cluster.nodes:5d} {p.cluster.cores:6d} {p.cluster.learners:8d} "
              f"{p.first_batch:10,.0f} -> {p.last_batch:8,.0f} {p.optimizer_steps:15,.0f} "
              f"{p.examples / epochs:12,.0f} {_hours(p.wall_seconds):>10s} "
              f"{plans[0].wall_seconds / p.wall_seconds:7.1f}x {p.core_hours:10.2f}{note}")


def plot_plans(plans: list[Plan], paying: int, measured: tuple[int, float] | None, title: str, out: Path) -> None:
    """Wall time and core-hours against cores; ``measured``: (cores, seconds) the run took."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cores = np.array([p.cluster.cores for p in plans])
    seconds = np.array([p.wall_seconds for p in plans])
    unit, per = ("h", 3600.0) if seconds.max() >= 7200 else ("min", 60.0)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    ax = axes[0]
    ax.loglog(cores, seconds / per, "o-", color="tab:blue", label="predicted, batch at B*")
    ax.loglog(cores, seconds[0] / per * cores[0] / cores, ":", color="gray", label="ideal (time halves per doubling)")
    if measured is not None:
        ax.loglog([measured[0]], [measured[1] / per], "k*", ms=12, label="the run, measured (its own batch)")
    ax.axvline(cores[paying], color="tab:red", ls="--", lw=1, label="more nodes stop paying past here")
    ax.set_ylabel(f"wall time to the goal ({unit})")
    ax.legend(fontsize=8)
    ax = axes[1]
    ax.semilogx(cores, [p.core_hours for p in plans], "o-", color="tab:green")
    ax.axvline(cores[paying], color="tab:red", ls="--", lw=1)
    ax.set_ylabel("core-hours to the goal")
    for ax in axes:  # one plain label per planned size (log axes label 2, 3, 4, ... 6 otherwise)
        ax.set_xticks(cores, [f"{c:g}" for c in cores])
        ax.minorticks_off()
        ax.set_xlabel("cores")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_figure(fig, out)


def positive_ints(values: list[int], flag: str) -> list[int]:
    if any(v < 1 for v in values):
        raise UserError(f"{flag} must be positive integers")
    return values


@exits_cleanly
def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="rlscale plan", description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path, help="a run directory written by rlscale.train")
    p.add_argument("--nodes", type=int, nargs="+", default=DEFAULT_NODES, help="cluster sizes to plan for")
    p.add_argument("--cpus-per-node", type=int, help="cores per node (default: the run's machine's)")
    p.add_argument("--learners", type=int, default=1,
                   help="data-parallel learners, one per node (clusters with fewer nodes get one per node)")
    p.add_argument("--goal", type=float, help="mean return to plan for (default: the run's highest goal reached)")
    p.add_argument("--cost", type=Path, help="take a and b from this run (a --batch auto run of the same task "
                   "on the same machine; default: the run itself)")
    p.add_argument("--overhead", type=float, help="a in seconds per update, for runs without a cost model")
    p.add_argument("--crit-ratio", type=float,
                   help="read B_crit as B_simple / this (default: the run's crit_ratio; rlscale.reports.pareto "
                   "measures a task's ratio from fixed-batch sweeps)")
    p.add_argument("--reference-cores", type=int, default=os.cpu_count() or 1,
                   help="cores of the machine the run was measured on (default: this machine's)")
    p.add_argument("--out", type=Path, help="PNG to write (default: <run dir>/plan.png)")
    args = p.parse_args(argv)
    nodes = sorted(set(positive_ints(args.nodes, "--nodes")))
    positive_ints([args.learners, args.reference_cores, args.cpus_per_node or 1],
                  "--learners, --reference-cores and --cpus-per-node")
    checked_crit_ratio(args.crit_ratio)
    if args.overhead is not None and not (math.isfinite(args.overhead) and args.overhead >= 0):
        raise UserError("--overhead must be a non-negative number of seconds")
    run = load_run(args.run_dir)
    out = writable_file(args.out or args.run_dir / "plan.png", ".png")
    cost_run = load_run(args.cost) if args.cost is not None else run
    until, what = goal_step(run, args.goal)
    crit_ratio = crit_ratio_of(run, args.crit_ratio)
    stretches = stretches_of(run, until, crit_ratio)
    if not stretches:
        raise UserError(f"{run.path} logged no updates before {what}; nothing to plan")
    cost = measured_cost(run, cost_run, args.overhead, args.reference_cores)
    k = steps_per_update(run)
    cores = args.cpus_per_node or args.reference_cores
    min_batch = run.cfg.control.min_envs * run.cfg.observations_per_env
    plans = [plan(stretches, cost, Cluster(n, cores, min(args.learners, n)), k, min_batch) for n in nodes]
    paying = last_paying(plans)

    fit_r = cost.overhead / cost.per_observation
    measured = run.wall_at(until)
    replayed = replay(stretches, cost, k)
    print(f"{run.path}: {run.cfg.env.env_id}, {run.cfg.agent.algo}; planning to {what} "
          f"at {until:,.0f} agent steps")
    print(f"cost model (from {cost_run.path}): a = {cost.overhead * 1e3:.1f} ms per update, "
          f"b = {cost.per_observation * 1e3:.3f} ms per optimizer-batch observation "
          f"({cost.rollout_share:.0%} rollout, {1 - cost.rollout_share:.0%} learner) on "
          f"{cost.reference_cores} cores; exchange rate a/b = {fit_r:,.0f} observations; "
          f"B_crit read as B_simple / {crit_ratio:g}")
    print(f"check: the model replays the run as it ran in {_hours(replayed)}; it measured "
          f"{_hours(measured) if measured is not None else 'no wall time'}")
    print_table(plans, paying, run.cfg.epochs_per_batch)
    print("assumed: rollout cost falls with cores (rollout and learning take turns), learner cost with "
          "learners; overhead a, all-reduce and stragglers unchanged: a floor on the time, looser as nodes grow")
    plot_plans(plans, paying, None if measured is None else (cost.reference_cores, measured),
               f"{run.cfg.env.env_id} {run.cfg.agent.algo} to {what}: {run.path.name}", out)
    print(f"plot: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
