"""``rlscale oracle SWEEP_DIR --round-trip S``: the most any batch control could gain on a task.

A fixed-batch sweep's runs split at the goal crossings into stages: stage k of a run goes from the
first time its 20-episode mean return reached goal k-1 (the start, for the first) to the first time
it reached goal k. Each cell of the sweep (an optimizer batch B with its learning rate) then has,
per seed, the optimizer steps and the seconds each stage took. A schedule picks one cell per stage
and costs the sum of its stages' medians over seeds. The oracle is the cheapest schedule: each
stage's cheapest cell. Against the best fixed cell (the cheapest single cell for every stage) it
bounds what any controller could gain, under one approximation that this report cannot check
itself: a stage's cost at a cell does not depend on the cells that brought the run to the stage's
start (the learner arrives at goal k-1 in about the same state whatever batch got it there). A run
that follows the schedule (``batch replay`` of it) checks that.

Three costs, each its own oracle:

* **two-core wall time**: each stage's measured seconds on the sweep's machine;
* **cluster wall time**: the stage's updates at T_N(B) on an elastic cluster of up to ``--nodes``
  nodes (rlscale/control/cluster_clock.py), with T(B) = a + b*B fitted to the sweep's own update
  times;
* **node-hours** on that cluster: the updates at n(B) * T_N(B).

And one that weighs the last two together, as a user of an elastic cluster does: the fewest node-hours
of any schedule whose cluster time is within ``--slack`` of the fastest fixed cell's, against that
cell's node-hours (the saving at about equal speed; ``cheapest_within``).

The minimum of noisy medians is biased low: with few seeds the oracle picks, in each stage, the
cell that was luckiest there. So the gain is also given held out: the schedule and the best fixed
cell are chosen on half of each cell's seeds (even positions) and costed on the other half, then
the other way round (the geometric mean of the two ratios).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np

from rlscale.cli import Parser
from rlscale.control.cluster_clock import ElasticCluster
from rlscale.control.cost import Fit
from rlscale.errors import UserError, exits_cleanly
from rlscale.reports.plan import steps_per_update
from rlscale.reports.runs import RunRecord, add_run_arguments, goals_of, load_runs, optimizer_batch
from rlscale.reports.study import fixed_runs_cost


@dataclass(frozen=True)
class CellStages:
    """One sweep cell's stages, per seed: updates and two-core seconds (inf: the stage was not finished)."""

    batch: float  # optimizer batch
    lr: float
    updates: np.ndarray  # [seeds, stages]
    seconds: np.ndarray  # [seeds, stages]

    @property
    def label(self) -> str:
        return f"{self.batch:g} lr {self.lr:g}"


@dataclass(frozen=True)
class Schedule:
    cells: tuple[int, ...]  # the cell of each stage (indices into the costs' rows)
    cost: float


def stage_medians(per_seed: np.ndarray) -> np.ndarray:
    """Each stage's median over seeds (axis 0); inf where most seeds did not finish it."""
    return np.median(per_seed, axis=0)


def schedule_cost(costs: np.ndarray, cells: tuple[int, ...]) -> float:
    """The sum over stages of ``costs[cell of stage k, k]``."""
    return float(sum(costs[cell, k] for k, cell in enumerate(cells)))


def oracle_schedule(costs: np.ndarray) -> Schedule:
    """The cheapest cell of every stage (costs: [cells, stages])."""
    cells = tuple(int(i) for i in np.argmin(costs, axis=0))
    return Schedule(cells, schedule_cost(costs, cells))


def best_fixed(costs: np.ndarray) -> Schedule:
    """The cell whose every stage together is cheapest."""
    best = int(np.argmin(costs.sum(axis=1)))
    return Schedule((best,) * costs.shape[1], float(costs[best].sum()))


def half_medians(per_seed: list[np.ndarray], start: int) -> np.ndarray:
    """[cells, stages]: each stage's median over every other seed of each cell, from position ``start`` (0 or 1)."""
    return np.stack([stage_medians(cell[start::2]) for cell in per_seed])


def held_out_gain(per_seed: list[np.ndarray]) -> float | None:
    """Best fixed over oracle, each chosen on one half of every cell's seeds and costed on the other.

    ``per_seed``: one [seeds, stages] cost array per cell. None where a cell has fewer than two
    seeds, or a half's schedule never finishes on the other half (no finite ratio).
    """
    if any(cell.shape[0] < 2 for cell in per_seed):
        return None
    halves = [half_medians(per_seed, start) for start in (0, 1)]
    ratios = []
    for chosen, scored in ((halves[0], halves[1]), (halves[1], halves[0])):
        fixed = schedule_cost(scored, best_fixed(chosen).cells)
        oracle = schedule_cost(scored, oracle_schedule(chosen).cells)
        if not (math.isfinite(fixed) and math.isfinite(oracle)) or oracle <= 0:
            return None
        ratios.append(fixed / oracle)
    return float(math.sqrt(ratios[0] * ratios[1]))


def cheapest_within(costs: np.ndarray, times: np.ndarray, limit: float) -> Schedule | None:
    """The schedule of least total ``costs`` whose total ``times`` is at most ``limit`` (both [cells, stages]);
    None where no schedule is that fast.

    Exact without trying every schedule: stage by stage it keeps the partial schedules that no other beats
    on both time and cost so far (any schedule's best completion from one of them is also theirs)."""
    front: list[tuple[float, float, tuple[int, ...]]] = [(0.0, 0.0, ())]
    for k in range(costs.shape[1]):
        grown = sorted((time + times[c, k], cost + costs[c, k], cells + (c,))
                       for time, cost, cells in front for c in range(costs.shape[0])
                       if time + times[c, k] <= limit * (1 + 1e-12))  # the fastest cell's own sum, rounded
        front, cheapest = [], math.inf
        for entry in grown:  # by time: keep each that is cheaper than every faster one
            if entry[1] < cheapest:
                front.append(entry)
                cheapest = entry[1]
    if not front:
        return None
    _, cost, cells = min(front, key=lambda entry: entry[1])
    return Schedule(cells, float(cost))


@dataclass(frozen=True)
class EqualSpeed:
    """The fewest node-hours within ``slack`` of the fastest fixed cell's cluster time, against that cell.

    Each cost is a sum over stages of medians over seeds, as every bound here is (not a median of runs' totals)."""

    slack: float
    fastest: Schedule  # the fixed cell of least cluster time, its cost in node-hours
    fastest_time: float
    oracle: Schedule | None  # the cheapest schedule within the slack, None where none is finite
    oracle_time: float
    # (node-hours, time) of the oracle over the fastest cell's, held out, and the fastest cell each half chose: where
    # the halves disagree with each other or the whole, the figure mixes baselines and says little.
    held_out: tuple[float, float] | None
    held_out_fastest: tuple[int, ...] = ()

    @property
    def node_hours(self) -> float:
        """The oracle's node-hours over the fastest fixed cell's (in sample): 1 - the saving."""
        return self.oracle.cost / self.fastest.cost if self.oracle is not None else math.nan


def _fastest_and_cheapest(time_medians: np.ndarray, cost_medians: np.ndarray,
                          slack: float) -> tuple[int, Schedule | None]:
    """The fixed cell of least total time, and the cheapest schedule within ``slack`` of its time."""
    fastest = best_fixed(time_medians)
    return fastest.cells[0], cheapest_within(cost_medians, time_medians, (1 + slack) * fastest.cost)


def _held_out_equal_speed(times: list[np.ndarray], node_hours: list[np.ndarray], slack: float
                          ) -> tuple[tuple[float, float] | None, tuple[int, ...]]:
    """Chosen on half of each cell's seeds, costed on the other, both ways: the geometric means of the oracle's
    (node-hours, time) over the fastest cell's, and each half's fastest cell; None where a ratio is not finite."""
    if any(cell.shape[0] < 2 for cell in times):
        return None, ()
    halves = [(half_medians(times, start), half_medians(node_hours, start)) for start in (0, 1)]
    ratios, fastest_cells = [], []
    for (chosen_times, chosen_costs), (scored_times, scored_costs) in ((halves[0], halves[1]), (halves[1], halves[0])):
        fastest, oracle = _fastest_and_cheapest(chosen_times, chosen_costs, slack)
        fastest_cells.append(fastest)
        if oracle is None:
            return None, tuple(fastest_cells)
        pair = []
        for scored in (scored_costs, scored_times):
            baseline = schedule_cost(scored, (fastest,) * scored.shape[1])
            pair.append(schedule_cost(scored, oracle.cells) / baseline if baseline > 0 else math.nan)
        ratios.append(pair)
    if not all(math.isfinite(r) and r > 0 for pair in ratios for r in pair):
        return None, tuple(fastest_cells)
    return (math.sqrt(ratios[0][0] * ratios[1][0]), math.sqrt(ratios[0][1] * ratios[1][1])), tuple(fastest_cells)


def equal_speed(times: list[np.ndarray], node_hours: list[np.ndarray], slack: float) -> EqualSpeed:
    """``times``, ``node_hours``: one [seeds, stages] array per cell, of cluster minutes and node-hours."""
    time_medians = np.stack([stage_medians(cell) for cell in times])
    cost_medians = np.stack([stage_medians(cell) for cell in node_hours])
    fastest, oracle = _fastest_and_cheapest(time_medians, cost_medians, slack)
    fixed_cells = (fastest,) * time_medians.shape[1]
    held_out, held_out_fastest = _held_out_equal_speed(times, node_hours, slack)
    return EqualSpeed(slack, Schedule(fixed_cells, schedule_cost(cost_medians, fixed_cells)),
                      schedule_cost(time_medians, fixed_cells), oracle,
                      schedule_cost(time_medians, oracle.cells) if oracle is not None else math.nan,
                      held_out, held_out_fastest)


@dataclass(frozen=True)
class Bound:
    """One objective's oracle against its best fixed cell."""

    objective: str
    unit: str
    fixed: Schedule
    oracle: Schedule
    held_out: float | None

    @property
    def gain(self) -> float:
        """Best fixed cost over the oracle's: how many times cheaper the oracle is (in sample)."""
        return self.fixed.cost / self.oracle.cost


def bound(objective: str, unit: str, per_seed: list[np.ndarray]) -> Bound:
    costs = np.stack([stage_medians(cell) for cell in per_seed])
    return Bound(objective, unit, best_fixed(costs), oracle_schedule(costs), held_out_gain(per_seed))


def cluster_costs(cells: list[CellStages], fit: Fit, cluster: ElasticCluster
                  ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each cell's per-seed stages on the elastic cluster: (minutes, node-hours), the updates at T_N(B)."""
    return ([c.updates * cluster.update_seconds(fit, c.batch) / 60 for c in cells],
            [c.updates * cluster.node_seconds(fit, c.batch) / 3600 for c in cells])


def bounds(cells: list[CellStages], cluster_minutes: list[np.ndarray], cluster_node_hours: list[np.ndarray],
           max_nodes: int) -> list[Bound]:
    """The three objectives' oracles: two-core seconds, cluster minutes and node-hours (``cluster_costs``)."""
    return [
        bound("two-core wall time", "min", [c.seconds / 60 for c in cells]),
        bound(f"wall time on up to {max_nodes} nodes (modelled)", "min", cluster_minutes),
        bound(f"node-hours on up to {max_nodes} nodes (modelled)", "node-h", cluster_node_hours),
    ]


def run_stages(run: RunRecord, goals: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """A run's updates and seconds per stage; inf from the first goal it did not reach on."""
    updates, seconds = [0.0], [0.0]
    for goal in goals:
        hit = run.goal(goal)
        if hit is None or hit.wall_seconds is None or not math.isfinite(updates[-1]):
            updates.append(math.inf)
            seconds.append(math.inf)
        else:
            updates.append(hit.updates / steps_per_update(run))
            seconds.append(hit.wall_seconds)
    with np.errstate(invalid="ignore"):  # inf - inf: a stage after an unfinished one, unfinished too
        return (np.nan_to_num(np.diff(updates), nan=math.inf, posinf=math.inf),
                np.nan_to_num(np.diff(seconds), nan=math.inf, posinf=math.inf))


def cell_stages(runs: list[RunRecord], goals: list[float]) -> list[CellStages]:
    """The sweep's fixed cells, each with its seeds' stages, smallest batch first."""
    by_cell: dict[tuple[float, float], list[RunRecord]] = {}
    for run in runs:
        if run.cfg.control.batch == "fixed":
            by_cell.setdefault((float(optimizer_batch(run)), run.cfg.agent.lr), []).append(run)
    cells = []
    for (batch, lr), group in sorted(by_cell.items()):
        stages = [run_stages(run, goals) for run in sorted(group, key=lambda r: r.cfg.run.seed)]
        cells.append(CellStages(batch, lr, np.stack([u for u, _ in stages]), np.stack([s for _, s in stages])))
    return cells


def schedule_text(schedule: Schedule, cells: list[CellStages], goals: list[float]) -> str:
    """'80 lr 0.0112 to 5, 320 lr 0.0224 to 14': each run of stages at one cell, with the goal it ends at."""
    parts: list[str] = []
    for k, cell in enumerate(schedule.cells):
        if k + 1 < len(schedule.cells) and schedule.cells[k + 1] == cell:
            continue
        parts.append(f"{cells[cell].label} to {goals[k]:g}")
    return ", ".join(parts)


def equal_speed_text(cells: list[CellStages], goals: list[float], found: EqualSpeed, max_nodes: int) -> list[str]:
    """The fewest node-hours within the slack of the fastest fixed cell's cluster time (``equal_speed``), as
    report lines."""
    head = (f"node-hours on up to {max_nodes} nodes (modelled) within {100 * found.slack:g} % of the fastest fixed "
            "cell's time there:")
    if not math.isfinite(found.fastest_time):
        return [f"{head} no cell's median over seeds reached the top goal; no bound"]
    lines = [head, f"  fastest fixed: {schedule_text(found.fastest, cells, goals)}: {found.fastest_time:.3g} min, "
                   f"{found.fastest.cost:.3g} node-h"]
    if found.oracle is None:  # not expected: the fastest cell itself is within the slack
        return [*lines, "  oracle:        none within the slack"]
    if found.held_out is None:
        held = "none (a cell has one seed, or a half's schedule did not finish on the other half)"
    else:
        held = f"{found.held_out[0]:.2f}x the node-hours at {found.held_out[1]:.2f}x the time"
        if set(found.held_out_fastest) != {found.fastest.cells[0]}:
            held += (" (the halves' fastest cells, " + " and ".join(cells[c].label for c in found.held_out_fastest)
                     + ", are not all the whole sample's: the ratio mixes baselines)")
    return [*lines, f"  oracle:        {schedule_text(found.oracle, cells, goals)}: {found.oracle_time:.3g} min, "
                    f"{found.oracle.cost:.3g} node-h",
            f"  node-hours:    {found.node_hours:.2f}x the fastest fixed cell's in sample (a saving of "
            f"{1 - found.node_hours:.0%}), {held} held out"]


def report(cells: list[CellStages], goals: list[float], fit: Fit, cluster: ElasticCluster,
           slack: float = 0.05) -> list[str]:
    lines = [f"stages end at goals {', '.join(f'{g:g}' for g in goals)}; T(B) = {fit.overhead * 1e3:.1f} ms + "
             f"{fit.per_observation * 1e3:.3f} ms x B (the sweep's update times); a node carries "
             f"{cluster.node_batch:g}, round trip {cluster.round_trip * 1e3:.0f} ms past one node"]
    lines += [f"  cell {c.label} ({c.seconds.shape[0]} seeds): {cluster.nodes_for(c.batch)} node(s), an update "
              f"{cluster.update_seconds(fit, c.batch) * 1e3:.3g} ms there, {fit.seconds(c.batch) * 1e3:.3g} ms on one"
              for c in cells]
    lines.append("")
    minutes, node_hours = cluster_costs(cells, fit, cluster)  # once: the last two bounds and the equal-speed one
    for b in bounds(cells, minutes, node_hours, cluster.max_nodes):
        if not math.isfinite(b.fixed.cost):
            lines.append(f"{b.objective}: no cell reached the top goal on most seeds; no bound")
            continue
        held = (f"{b.held_out:.2f}x" if b.held_out is not None
                else "none (a cell has one seed, or most of a half's seeds did not finish a stage)")
        lines += [f"{b.objective}:",
                  f"  best fixed:  {schedule_text(b.fixed, cells, goals)}: {b.fixed.cost:.3g} {b.unit}",
                  f"  oracle:      {schedule_text(b.oracle, cells, goals)}: {b.oracle.cost:.3g} {b.unit}",
                  f"  gain:        {b.gain:.2f}x in sample, {held} held out"]
    return lines + equal_speed_text(cells, goals, equal_speed(minutes, node_hours, slack), cluster.max_nodes)


@exits_cleanly
def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="rlscale oracle", description=__doc__.split("\n\n")[0])
    add_run_arguments(parser, "a fixed-batch sweep's directory (or run directories)")
    parser.add_argument("--nodes", type=int, default=16, help="the elastic cluster's most nodes (default 16)")
    parser.add_argument("--node-batch", type=float,
                        help="optimizer-batch observations one node carries (default: the sweep's smallest batch)")
    parser.add_argument("--round-trip", type=float, required=True,
                        help="seconds an update spread over several nodes adds (Ray's round trip and the "
                             "all-reduce: measure it with benchmarks/bench_cluster.py)")
    parser.add_argument("--slack", type=float, default=0.05,
                        help="the cluster time, as a fraction above the fastest fixed cell's, within which the "
                             "last bound looks for the fewest node-hours (default 0.05)")
    args = parser.parse_args(argv)
    if not (args.slack >= 0 and math.isfinite(args.slack)):
        raise UserError(f"--slack {args.slack}: a fraction of the fastest cell's time, 0 or more")
    if args.nodes < 1:
        raise UserError(f"--nodes {args.nodes}: an elastic cluster has at least 1 node")
    runs = load_runs(args.paths)
    goals = goals_of(runs, args.goals)
    cells = cell_stages(runs, goals)
    if len(cells) < 2:
        raise UserError(f"{len(cells)} fixed-batch cell(s) in {', '.join(map(str, args.paths))}: "
                        "the oracle needs a sweep of at least two batch sizes")
    fit = fixed_runs_cost(runs)
    if fit is None or fit.unresolved:
        raise UserError("the sweep's update times do not identify T(B) = a + b*B "
                        f"({fit.unresolved if fit else 'fewer than two batch sizes with update times'})")
    try:
        cluster = ElasticCluster(args.nodes, args.node_batch or cells[0].batch, args.round_trip)
    except ValueError as err:
        raise UserError(str(err)) from None
    print("\n".join(report(cells, goals, fit, cluster, args.slack)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
