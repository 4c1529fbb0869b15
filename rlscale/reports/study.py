"""``rlscale study SWEEP_DIR``: fixed batches against ``--batch auto``, over seeds.

Reads the runs of a sweep made with ``python -m rlscale.sweep ... --auto``
(or any run directories) and groups them into variants: each fixed optimizer
batch, and each adaptive batch control. For every goal it prints, per
variant, how many seeds reached it and the median wall time, optimizer steps
S and examples E with 95 % bootstrap intervals over the seeds (a seed that
never reached the goal counts as infinitely slow, so a median exists only when
most seeds got there). Then, for the adaptive runs: the speed-up their cost
model predicted (time-weighted mean of ``batch/predicted_speedup``) next to
the one realised against the fixed batch they started from, and how far
each adaptive variant's batch and target moved up to the top goal. Then the
cost model's predicted time ratios between the fixed batches beside the
measured ones (``docs/studies.md`` rule 1: validate before quoting). And for each fixed
batch, the ceiling of batch control: how much sooner its runs would have
reached the top goal at B* at every update, by the cost model T(B) = a + b*B
fitted to the fixed runs' own update times and each run's measured noise scale
(``rlscale.reports.scaling.control_ceiling``) -- the most any controller could have won
there, on this machine. A PNG shows the wall time to each goal per variant, one
dot per seed.

Wall times compare only between runs under the same load: a sweep runs every
trial as one serial process with one torch thread, at most one per CPU.
"""

from __future__ import annotations

import math
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlscale import tags
from rlscale.cli import Parser, writable_dir
from rlscale.control.cluster_clock import ClusterClock, ElasticCluster
from rlscale.control.cost import CostModel, Fit, time_per_progress
from rlscale.errors import UserError, exits_cleanly
from rlscale.reports.plan import checked_crit_ratio, crit_ratio_of, steps_per_update, stretches_of
from rlscale.reports.plot import save_figure
from rlscale.reports.runs import (
    BatchPath,
    RunRecord,
    add_run_arguments,
    batch_path,
    format_interval,
    format_number,
    goals_of,
    load_runs,
    median_interval,
    optimizer_batch,
    variant_of,
)
from rlscale.reports.scaling import control_ceiling


@dataclass
class Cell:
    """One variant at one goal, over its seeds."""

    variant: str
    goal: float
    seeds: int
    reached: int
    wall: tuple[float, float, float]  # median, low, high (seconds; inf: not reached by most)
    updates: tuple[float, float, float]
    examples: tuple[float, float, float]
    walls: list[float]  # per seed (inf where not reached)


def cells(runs: list[RunRecord], goals: list[float]) -> list[Cell]:
    by_variant: dict[str, list[RunRecord]] = {}
    for run in runs:
        by_variant.setdefault(variant_of(run), []).append(run)
    out = []
    for goal in goals:
        for variant, group in sorted(by_variant.items(), key=lambda kv: _order(kv[0])):
            hits = [run.goal(goal) for run in group]
            walls = np.array([h.wall_seconds if h and h.wall_seconds is not None else math.inf for h in hits])
            updates = np.array([h.updates if h else math.inf for h in hits])
            examples = np.array([h.examples if h else math.inf for h in hits])
            out.append(Cell(variant, goal, len(group), sum(h is not None for h in hits),
                            median_interval(walls), median_interval(updates), median_interval(examples),
                            walls.tolist()))
    return out


def _order(variant: str) -> tuple[int, float, str]:
    words = variant.split()
    return (0 if words[0] == "fixed" else 1, float(words[1] if words[0] == "fixed" else words[2]), variant)


def print_table(table: list[Cell]) -> None:
    width = max(len(c.variant) for c in table)
    print(f"{'goal':>6s}  {'variant':{width}s} {'reached':>7s}  {'wall min [95% CI]':26s} "
          f"{'optimizer steps S':26s} {'examples E':28s}")
    for c in table:
        print(f"{c.goal:6g}  {c.variant:{width}s} {c.reached:>3d}/{c.seeds:<3d}  {format_interval(c.wall, 60, ',.2f'):26s} "
              f"{format_interval(c.updates):26s} {format_interval(c.examples):28s}")


def predicted_speedup(run: RunRecord) -> float | None:
    """The cost model's predicted speed-up of B* over the batch in use, averaged over training time."""
    if tags.PREDICTED_SPEEDUP not in run.scalars or tags.UPDATE_SECONDS not in run.scalars:
        return None
    steps, speedup = run.scalars[tags.PREDICTED_SPEEDUP]
    seconds = np.interp(steps, *run.scalars[tags.UPDATE_SECONDS])
    return float(np.sum(speedup * seconds) / np.sum(seconds))


def print_verdict(runs: list[RunRecord], table: list[Cell]) -> None:
    """Per adaptive variant at the top goal: against the fixed batch it started from, and the best fixed one."""
    adaptive = [r for r in runs if r.cfg.control.batch != "fixed"]
    top = max(c.goal for c in table)
    fixed = [c for c in table if c.goal == top and c.variant.startswith("fixed")]
    if not adaptive or not fixed:
        return
    best = min(fixed, key=lambda c: c.wall[0])
    print(f"\nat goal {top:g}: best fixed batch in hindsight {best.variant} "
          f"({format_interval(best.wall, 60, ',.2f')} min)")
    for variant in sorted({variant_of(r) for r in adaptive}):
        own = next(c for c in table if c.variant == variant and c.goal == top)
        words = variant.split()  # auto from 40 lr 0.0007 ...
        start = f"fixed {words[2]} lr {words[4]}"
        base = next((c for c in fixed if c.variant == start), None)
        predicted = [p for p in (predicted_speedup(r) for r in adaptive if variant_of(r) == variant) if p]
        model = (f"; cost model's predicted speed-up {format_number(np.median(predicted), '.2f')}x "
                 f"(time-weighted over each run, median of {len(predicted)})") if predicted else ""
        # Against its own start only where that fixed batch ran: a study may hold only the best one.
        against_start = ""
        if base:
            realised = base.wall[0] / own.wall[0] if math.isfinite(own.wall[0]) else math.nan
            against_start = f"{format_number(realised, '.2f')}x the speed of {start}; "
        print(f"  {variant}: median wall {format_interval(own.wall, 60, ',.2f')} min; {against_start}"
              f"{format_number(own.wall[0] / best.wall[0], '.2f')}x the time of the best fixed" + model)


def print_batch_paths(runs: list[RunRecord], goal: float) -> None:
    """Per adaptive variant: how far its batch and its target moved up to ``goal`` (medians over seeds)."""
    paths: dict[str, list[BatchPath]] = {}
    for run in runs:
        path = batch_path(run, goal) if run.cfg.control.batch != "fixed" else None
        if path is not None:
            paths.setdefault(variant_of(run), []).append(path)
    if not paths:
        return
    print(f"\nhow far the adaptive runs' batch moved up to goal {goal:g} (or their end), medians over seeds:")
    for variant, group in sorted(paths.items()):
        med = {name: format_number(float(np.median([getattr(p, name) for p in group])), ",.0f")
               for name in ("start", "low", "high", "at_goal", "target_low", "target_high")}
        target = np.median([p.target_high / p.target_low for p in group if p.target_low > 0] or [math.nan])
        aimed = (f"its target's 10th-90th percentile {med['target_low']}-{med['target_high']} "
                 f"({format_number(float(target), '.1f')}x)") if math.isfinite(target) else "no target (a replay)"
        print(f"  {variant}: batch {med['start']} -> {med['low']}-{med['high']} (at the goal {med['at_goal']}); "
              + aimed)


def fixed_runs_cost(runs: list[RunRecord]) -> Fit | None:
    """T(B) = a + b*B through the fixed runs' median update times, per optimizer batch (a sweep's
    runs share one load); None with fewer than two batch sizes or without update times."""
    fixed = [r for r in runs if r.cfg.control.batch == "fixed" and tags.UPDATE_SECONDS in r.scalars]
    # Every fixed run counts: they ran side by side, and none is the size a run is at now.
    model = CostModel(window=len(fixed) + 1, min_samples=1, sizes_kept=len(fixed) + 1, outlier_factor=math.inf)
    for run in fixed:
        model.add(float(optimizer_batch(run)), float(np.median(run.scalars[tags.UPDATE_SECONDS][1])))
    return model.fit


def print_model_check(runs: list[RunRecord], table: list[Cell], goal: float, crit_ratio: float | None) -> None:
    """docs/studies.md rule 1: does tau(B) = T(B) (1 + B_crit/B) predict the fixed batches' time ratios?

    T from the fixed runs' update times, B_crit the signal averaged up to the goal (appendix D) over
    all fixed runs that reached it, read as the controller reads it (/ crit ratio). Each batch at
    its fastest learning rate: the model takes the rate as right for every batch."""
    fit = fixed_runs_cost(runs)
    fastest: dict[str, Cell] = {}  # per batch, its fastest learning rate: the model takes each batch well tuned
    for c in table:
        if c.goal == goal and c.variant.startswith("fixed") and math.isfinite(c.wall[0]):
            batch = c.variant.split()[1]
            if batch not in fastest or c.wall[0] < fastest[batch].wall[0]:
                fastest[batch] = c
    fixed = sorted(fastest.values(), key=lambda c: _order(c.variant))
    readings = []
    for run in runs:
        hit = run.goal(goal) if run.cfg.control.batch == "fixed" else None
        reading = run.mean_noise_scale(until=hit.agent_steps) if hit is not None else None
        if reading is not None:
            readings.append(reading / crit_ratio_of(run, crit_ratio))
    if fit is None or len(fixed) < 2 or not readings:
        return
    b_crit = float(np.median(readings))
    best = min(fixed, key=lambda c: c.wall[0])

    def tau(variant: str) -> float:
        return time_per_progress(fit, float(variant.split()[1]), b_crit)

    print(f"\nthe cost model against the fixed runs at goal {goal:g} (docs/studies.md rule 1): "
          f"tau(B) = T(B) (1 + B_crit/B) with B_crit = {b_crit:,.0f} (the signal averaged to the goal, "
          f"median over the fixed runs), time relative to {best.variant}:")
    for c in fixed:
        print(f"  {c.variant}: predicted {tau(c.variant) / tau(best.variant):.2f}x, "
              f"measured {c.wall[0] / best.wall[0]:.2f}x")


def run_ceiling(run: RunRecord, goal: float, fit: Fit, crit_ratio: float | None) -> float | None:
    """How much sooner the run would have reached ``goal`` at B* at every update (None: never reached)."""
    hit = run.goal(goal)
    if hit is None or run.signal_tag not in run.scalars:
        return None
    stretches = stretches_of(run, hit.agent_steps, crit_ratio)
    if not stretches:
        return None
    # Any batch down to one environment's: a fixed run's own env bounds and vector size pin its batch.
    return control_ceiling(stretches, fit, steps_per_update(run), run.cfg.observations_per_env)


def print_ceilings(runs: list[RunRecord], goal: float, crit_ratio: float | None) -> None:
    """Per fixed variant: the most batch control could have gained over it, by the cost model."""
    fit = fixed_runs_cost(runs)
    if fit is None:
        print("\nceiling of batch control: needs fixed runs at two batch sizes or more (the cost model's a and b)")
        return
    ratios = sorted({crit_ratio_of(r, crit_ratio) for r in runs})
    print(f"\nceiling of batch control at goal {goal:g}: the fixed runs' progress remade at B* at every update "
          f"(cost model through their update times: a = {1e3 * fit.overhead:.1f} ms, "
          f"b = {1e3 * fit.per_observation:.4f} ms per observation, r = {fit.exchange_rate:,.0f}; "
          f"B_crit = B_simple / {' or '.join(f'{x:g}' for x in ratios)}; the learning rate taken as right "
          f"for every batch, any batch down to one environment's). "
          f"The most any batch control could have won over each fixed batch:")
    variants: dict[str, list[float]] = {}
    for run in runs:
        if run.cfg.control.batch == "fixed":
            ceiling = run_ceiling(run, goal, fit, crit_ratio)
            if ceiling is not None:
                variants.setdefault(variant_of(run), []).append(ceiling)
    for variant in sorted(variants, key=_order):
        values = np.array(variants[variant])
        print(f"  {variant}: {np.median(values):.2f}x sooner (median of {values.size} seeds that reached it; "
              f"range {values.min():.2f}-{values.max():.2f})")


def cluster_cost(run: RunRecord, goal: float, fit: Fit, cluster: ElasticCluster) -> tuple[float, float]:
    """The run's (wall seconds, node-seconds) to ``goal`` on the elastic cluster: each logged update
    priced at its optimizer batch by T_N(B) (the cluster clock); inf where the run never reached it."""
    hit = run.goal(goal)
    if hit is None:
        return math.inf, math.inf
    steps, batches = run.scalars[tags.OPTIMIZER_BATCH]
    clock = ClusterClock(cluster)
    for batch in batches[steps <= hit.agent_steps]:
        clock.tick(float(batch))
    return clock.wall_seconds(fit), clock.node_seconds(fit)


def print_cluster(runs: list[RunRecord], goal: float, nodes: int, node_envs: int, round_trip: float) -> None:
    """Per variant at ``goal``: the cluster clock's time and node-hours, against the fastest fixed batch there."""
    fit = fixed_runs_cost(runs)
    if fit is None or fit.unresolved:
        print("\ncluster clock: needs fixed runs at two batch sizes or more whose update times fit T(B) = a + b*B")
        return
    cluster = ElasticCluster(nodes, node_envs * runs[0].cfg.observations_per_env, round_trip)
    by_variant: dict[str, list[tuple[float, float]]] = {}
    for run in runs:
        by_variant.setdefault(variant_of(run), []).append(cluster_cost(run, goal, fit, cluster))
    medians = {v: (float(np.median([w for w, _ in c])), float(np.median([n for _, n in c])))
               for v, c in by_variant.items()}
    print(f"\ncluster clock at goal {goal:g}: up to {nodes} nodes of {node_envs} envs ({cluster.node_batch:g} "
          f"observations), round trip {1e3 * round_trip:.0f} ms past one node; T(B) = {1e3 * fit.overhead:.1f} ms + "
          f"{1e3 * fit.per_observation:.4f} ms x B through the fixed runs' update times (medians over seeds)")
    fixed = {v: m for v, m in medians.items() if v.startswith("fixed") and math.isfinite(m[0])}
    fastest = min(fixed, key=lambda v: fixed[v][0]) if fixed else None
    for variant in sorted(medians, key=_order):
        wall, node_seconds = medians[variant]
        line = f"  {variant}: {format_number(wall / 60, ',.3f')} min, {format_number(node_seconds / 3600, ',.4f')} node-h"
        if fastest is not None and math.isfinite(wall):
            line += (f"; {wall / fixed[fastest][0]:.2f}x the time and {node_seconds / fixed[fastest][1]:.2f}x the "
                     f"node-hours of the fastest fixed ({fastest})")
            beaten_by = [v for v, (w, n) in fixed.items() if v != variant and w <= wall and n <= node_seconds]
            if not variant.startswith("fixed"):
                line += f"; dominated by {', '.join(beaten_by)}" if beaten_by else "; on or below the fixed front"
        print(line)


def plot_walls(table: list[Cell], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    goals = sorted({c.goal for c in table})
    cols = min(2, len(goals))
    rows = math.ceil(len(goals) / cols)
    variants = len({c.variant for c in table})
    fig, axes = plt.subplots(rows, cols, figsize=(max(6.0, 1.3 * variants) * cols, 4.5 * rows), squeeze=False)
    for ax in axes.flat[len(goals):]:
        ax.set_visible(False)
    for ax, goal in zip(axes.flat, goals, strict=False):
        row = [c for c in table if c.goal == goal]
        for i, c in enumerate(row):
            finite = [w / 60 for w in c.walls if math.isfinite(w)]
            ax.plot([i] * len(finite), finite, "o", alpha=0.6, color="tab:blue" if "fixed" in c.variant else "tab:red")
            if math.isfinite(c.wall[0]):
                # An interval whose top is "not reached" (inf) is drawn open, with an arrow.
                top = c.wall[2] if math.isfinite(c.wall[2]) else c.wall[0]
                ax.errorbar(i + 0.2, c.wall[0] / 60, yerr=[[(c.wall[0] - c.wall[1]) / 60], [(top - c.wall[0]) / 60]],
                            fmt="s", color="black", capsize=3)
                if not math.isfinite(c.wall[2]):
                    ax.plot(i + 0.2, c.wall[0] / 60 * 1.08, "^", color="black")
        # Long variant names wrapped, not rotated: rotated ones squeezed the plots to a strip.
        ax.set_xticks(range(len(row)), [textwrap.fill(c.variant, 16) for c in row], fontsize=8)
        ax.set_title(f"goal {goal:g}")
        ax.set_ylabel("wall time to goal (min)")
        ax.set_ylim(bottom=0)
    # Wrapped to the figure's width (about 15 characters per inch at this size): one goal's
    # figure is narrower than the sentence.
    title = ("wall time to each goal: dots are seeds; squares the median with its 95 % bootstrap "
             "interval (a triangle: the interval's top was not reached)")
    fig.suptitle(textwrap.fill(title, int(15 * fig.get_figwidth())), fontsize=9)
    fig.tight_layout()
    save_figure(fig, out)


@exits_cleanly
def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="rlscale study", description=__doc__.splitlines()[0])
    add_run_arguments(p, "a sweep directory (made with --auto), or run directories")
    p.add_argument("--out", type=Path, help="the PNG (default: study.png in the sweep directory)")
    p.add_argument("--crit-ratio", type=float, help="read B_crit as B_simple / this for the ceiling "
                   "(default: each run's own crit_ratio)")
    p.add_argument("--cluster-nodes", type=int, default=0,
                   help="also score every variant on the cluster clock: an elastic cluster of up to N nodes")
    p.add_argument("--node-envs", type=int, default=16, help="cluster clock: environments one node steps (16)")
    p.add_argument("--round-trip", type=float, default=0.03,
                   help="cluster clock: seconds an update over more than one node adds (0.03: docs/scaling.md)")
    args = p.parse_args(argv)
    checked_crit_ratio(args.crit_ratio)
    if args.cluster_nodes < 0 or args.node_envs < 1 or not args.round_trip >= 0:
        raise UserError("--cluster-nodes must be 0 (off) or more, --node-envs 1 or more, --round-trip 0 or more")
    runs = load_runs(args.paths)
    goals = goals_of(runs, args.goals)
    table = cells(runs, goals)
    print(f"{len(runs)} runs in {len({c.variant for c in table})} variants; goals {', '.join(f'{g:g}' for g in goals)}")
    print_table(table)
    print_verdict(runs, table)
    print_batch_paths(runs, max(goals))
    print_model_check(runs, table, max(goals), args.crit_ratio)
    print_ceilings(runs, max(goals), args.crit_ratio)
    if args.cluster_nodes:
        print_cluster(runs, max(goals), args.cluster_nodes, args.node_envs, args.round_trip)
    out = args.out or (args.paths[0] / "study.png" if len(args.paths) == 1 and args.paths[0].is_dir()
                       else Path("study.png"))
    writable_dir(out.parent, "--out")
    plot_walls(table, out)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
