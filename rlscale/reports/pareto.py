"""``rlscale pareto <sweep dir or run dirs>``: Pareto fronts and the critical batch size.

For each goal score and each batch size, the fixed-batch runs at the best
learning rate give the optimizer steps S and examples E to reach it (the mean
return of the last 20 episodes first at or above the goal). Eq. 2.11 is fitted
per goal (``rlscale.control.pareto_fit``), giving S_min, E_min and B_crit = E_min/S_min.
Next to B_crit stand the noise scales the runs measured (total, policy and
value loss), each averaged over training up to the goal (appendix D), with
their ratio to B_crit.

Each ratio comes with a 95 % bootstrap interval over the seeds (``bootstrap_ratios``).
The readings depend on the batch and rate a run trains at, so each noise scale
also gets its self-consistent batch: where, read at each batch size's best
rate, it equals the batch (``self_consistent_batch``), the batch a `critical`
run with that rate settles at; its ratio to B_crit; and the loop's gain there,
how far an error in the reading moves that batch.

Seeds: a (batch size, learning rate) pair counts for a goal only if every one
of its seeds reached it; its S and E are the geometric means over the seeds.
The best learning rate is the one with the fewest steps. Adaptive runs given
alongside are drawn as points on the same axes and do not enter the fit; per
goal and adaptive variant a table gives their S/S_min and E/E_min (median over
seeds, 95 % bootstrap interval), the batch each trained at, the signal it
followed averaged as the cells' are, the optimizer steps its controller took to
get to that batch (its ramp, over S_min), its swing (largest over smallest
batch), and whether they trained at the front's knee: both at most 2.5 (at
B = B_crit eq. 2.11 gives 2 and 2).

It says where a batch size's best learning rate is the lowest or highest its
grid tried (the front's point may lie outside the grid), and ``--crossings``
prints the agent steps at which each seed of each cell reached each goal.

Runs that branch from one checkpoint (``--init-from``) count S and E from
there, so the fit is the critical batch of that stretch of training; then it
also prints the trunk's noise scales at the branch point and averaged over
its last stretch, against each goal's B_crit.

Writes ``pareto.csv``, ``pareto_fronts.png`` and ``bcrit_vs_bsimple.png``.
"""

from __future__ import annotations

import csv
import math
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rlscale import tags
from rlscale.cli import Parser, writable_dir
from rlscale.control.pareto_fit import MIN_POINTS, ParetoFit, fit_pareto
from rlscale.errors import UserError, exits_cleanly
from rlscale.goals import GOAL_WINDOW
from rlscale.reports.plot import SIGNAL_COLORS, save_figure
from rlscale.reports.runs import (
    GoalHit,
    RunRecord,
    add_run_arguments,
    batch_path,
    format_interval,
    format_number,
    goals_of,
    load_run,
    load_runs,
    median_interval,
    optimizer_batch,
    variant_of,
)
from rlscale.rundir.branch import checkpoint_file
from rlscale.rundir.checkpoint import step_of


@dataclass
class FrontPoint:
    batch: float  # observations per optimizer step
    lr: float
    steps: float  # S, geometric mean over seeds
    examples: float  # E
    runs: list[RunRecord]
    agent_steps: list[float]  # where each seed reached the goal


@dataclass(frozen=True)
class SelfConsistent:
    """Where a noise scale, read at each batch size's best learning rate, equals the batch."""

    batch: float | None  # the crossing; None where it lies outside the grid
    outside: str = ""  # then: "above" (still above the batch at the largest one read) or "below" (at every one)
    # d log(reading) / d log(batch), fitted over the batch sizes read. A controller that follows the reading
    # settles where reading = batch, so an error e in log(reading) moves that point by e / (1 - slope): the
    # closer the slope is to 1, the more the loop magnifies the scatter (and a hysteresis band likewise).
    slope: float | None = None

    @property
    def loop_gain(self) -> float | None:
        """How many times the reading's own (log) error the batch a `critical` run settles at moves by;
        None without a slope or where it is >= 1 (no stable point: the loop runs to a bound)."""
        return None if self.slope is None or self.slope >= 1.0 else 1.0 / (1.0 - self.slope)


@dataclass
class GoalResult:
    goal: float
    points: list[FrontPoint]
    fit: ParetoFit | None
    noise: dict[str, float | None]  # part -> B_simple averaged up to the goal
    message: str = ""
    # signal -> 95 % of its ratio to B_crit ("self <signal>": of its self-consistent batch's)
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    self_consistent: dict[str, SelfConsistent] = field(default_factory=dict)  # signal -> its crossing


def grid_cells(runs: list[RunRecord]) -> dict[tuple[float, float], list[RunRecord]]:
    """The runs of each (batch size, learning rate): the seeds of one cell of the sweep's grid."""
    cells: dict[tuple[float, float], list[RunRecord]] = defaultdict(list)
    for run in runs:
        cells[(optimizer_batch(run), run.cfg.agent.lr)].append(run)
    return cells


def best_points(runs: list[RunRecord], goal: float,
                hits: dict[int, GoalHit | None] | None = None) -> list[FrontPoint]:
    """One point per batch size: the learning rate that reached the goal in the fewest steps.

    ``hits``: each run's ``goal(goal)`` by ``id(run)``, computed once for many calls (the bootstrap).
    """
    best: dict[float, FrontPoint] = {}
    for (batch, lr), group in sorted(grid_cells(runs).items()):
        group_hits = [run.goal(goal) if hits is None else hits[id(run)] for run in group]
        if any(hit is None for hit in group_hits):
            continue  # a seed that never got there: this learning rate does not reach the goal
        point = FrontPoint(batch, lr,
                           float(np.exp(np.mean([math.log(h.updates) for h in group_hits]))),
                           float(np.exp(np.mean([math.log(h.examples) for h in group_hits]))),
                           group, [h.agent_steps for h in group_hits])
        if batch not in best or point.steps < best[batch].steps:
            best[batch] = point
    return [best[b] for b in sorted(best)]


def grid_edges(runs: list[RunRecord], results: list[GoalResult]) -> list[str]:
    """Where a batch size's best learning rate is the lowest or highest its grid tried (docs/studies.md rule 3:
    the front's point may then lie outside what was measured). One line per case."""
    tried: dict[float, list[float]] = defaultdict(list)
    for batch, lr in sorted(grid_cells(runs)):
        tried[batch].append(lr)
    lines = []
    for result in results:
        for point in result.points:
            lrs = tried[point.batch]
            if len(lrs) >= 2 and point.lr in (lrs[0], lrs[-1]):
                side, other = ("lowest", "lower") if point.lr == lrs[0] else ("highest", "higher")
                lines.append(f"goal {result.goal:g}: batch {point.batch:g}'s best learning rate {point.lr:g} is the "
                             f"{side} it tried ({', '.join(f'{lr:g}' for lr in lrs)}); try a {other} one")
    return lines


def first_sight_lines(results: list[GoalResult]) -> list[str]:
    """Front points whose seeds met the goal with their first full window of episodes: met as soon as it
    could be seen, so S and E there measure the wait for episodes to end, not training (a branch that
    starts at or above the goal, or episodes long against the stretch: CartPole's 500 steps x 400 envs)."""
    lines = []
    for result in results:
        for point in result.points:
            first = [run for run, at in zip(point.runs, point.agent_steps, strict=True)
                     if at == run.first_window_step()]
            if first:
                lines.append(f"goal {result.goal:g}: batch {point.batch:g} (lr {point.lr:g}) met it with its first "
                             f"{GOAL_WINDOW} episodes in {len(first)} of {len(point.runs)} seeds")
    return lines


def crossing_lines(runs: list[RunRecord], goals: list[float]) -> list[str]:
    """Per grid cell: the agent steps (thousands) at which each seed reached each goal, '-' where it did not."""
    lines = []
    for (batch, lr), group in sorted(grid_cells(runs).items()):
        group = sorted(group, key=lambda r: r.cfg.run.seed)
        hits = [" ".join("-" if (h := r.goal(g)) is None else f"{h.agent_steps / 1e3:,.0f}" for r in group)
                for g in goals]
        seeds = ",".join(str(r.cfg.run.seed) for r in group)
        lines.append(f"b{batch:g} lr {lr:g} (seeds {seeds}) | "
                     + " | ".join(f"{g:g}: {h}" for g, h in zip(goals, hits, strict=True)))
    return lines


def cell_noise_lines(runs: list[RunRecord], goal: float) -> list[str]:
    """Per grid cell: each noise scale averaged up to ``goal`` (up to the run's end where it fell short),
    the median over the cell's seeds; how a reading depends on the rate a run trains at (appendix C)."""
    signals = [s for s in tags.SIGNALS if any(tags.signal_tag(s) in r.scalars for r in runs)]
    equilibrium = any(r.equilibrium_share() is not None for r in runs)
    lines = [f"noise scales averaged up to goal {goal:g} (median over seeds; * a seed fell short, read to its end):",
             "batch  lr        lr/batch  " + "  ".join(f"{SIGNAL_COLUMNS[s]:>15}" for s in signals)
             + ("  equilibrium share" if equilibrium else "")]
    read: dict[str, list[tuple[float, float, float]]] = {s: [] for s in signals}  # (batch, lr, median)
    for (batch, lr), group in sorted(grid_cells(runs).items()):
        until = [h.agent_steps if (h := r.goal(goal)) else None for r in group]
        medians = []
        for signal in signals:
            values = [r.mean_noise_scale(signal, until=u) for r, u in zip(group, until, strict=True)]
            if present := [v for v in values if v is not None]:
                read[signal].append((batch, lr, float(np.median(present))))
            medians.append(format_number(read[signal][-1][2] if present else None))
        if equilibrium:
            medians.append(_median([r.equilibrium_share(until=u) for r, u in zip(group, until, strict=True)],
                                   ".2f"))
        short = "*" if any(u is None for u in until) else ""
        lines.append(f"{batch:<6g} {lr:<9g} {f'{lr / batch:.2e}{short}':<10}"
                     + "  ".join(f"{m:>15}" for m in medians))
    if equilibrium:
        lines.append("equilibrium share: lr tr(PHP Sigma) / 2B (lr as clipped steps took it) over the measured "
                     "G^T P G: the gradient appendix C's equilibrium holds by noise alone against the one measured "
                     "(~1 there, <1 where a slope adds to it, >1 where the run is not near it)")
    fits = {s: fit for s in signals if (fit := power_law(read[s])) is not None}
    if fits:
        lines.append("how the readings move with the batch and the rate (least squares over the cells' medians in "
                     "log-log; appendix C's temperature law would be batch^+1 lr^-1):")
        lines += [f"  {SIGNAL_COLUMNS[s]} ~ batch^{a:+.2f} lr^{b:+.2f} over {len(read[s])} cells "
                  f"(rms {math.exp(rms):.2f}x)" for s, (a, b, rms) in fits.items()]
    return lines


def power_law(cells: list[tuple[float, float, float]]) -> tuple[float, float, float] | None:
    """(a, b, rms) of reading = c * batch^a * lr^b fitted to (batch, lr, reading) cells by least squares in
    logs, rms the residual's (natural log). None without at least three cells, two batch sizes and two
    rates (fewer cannot separate the two exponents)."""
    if len(cells) < 3 or len({c[0] for c in cells}) < 2 or len({c[1] for c in cells}) < 2:
        return None
    logs = np.log(np.array(cells))
    design = np.column_stack([np.ones(len(cells)), logs[:, 0], logs[:, 1]])
    coef, _, rank, _ = np.linalg.lstsq(design, logs[:, 2], rcond=None)
    if rank < 3:  # every cell at one temperature, say: batch and rate move together
        return None
    rms = float(np.sqrt(np.mean((design @ coef - logs[:, 2]) ** 2)))
    return float(coef[1]), float(coef[2]), rms


def _median(values: list[float | None], spec: str = ",.0f") -> str:
    """The median of the values that exist, formatted as ``format_number`` does ('-' where none does)."""
    present = [v for v in values if v is not None]
    return format_number(float(np.median(present)) if present else None, spec)


def goal_noise(runs: list[RunRecord], hits: dict[int, GoalHit | None]) -> dict[tuple[int, str], float | None]:
    """Each run's noise scales averaged up to where it reached the goal, by (``id(run)``, signal)."""
    return {(id(run), signal): run.mean_noise_scale(signal, until=hits[id(run)].agent_steps)
            for run in runs if hits[id(run)] is not None for signal in tags.SIGNALS}


def averaged_noise(points: list[FrontPoint], part: str, noise: dict[tuple[int, str], float | None]) -> float | None:
    """Mean over the front's runs of each run's noise scale averaged up to where it reached the goal."""
    values = [noise[(id(run), part)] for p in points for run in p.runs]
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def self_consistent_batch(points: list[FrontPoint], signal: str,
                          noise: dict[tuple[int, str], float | None]) -> SelfConsistent | None:
    """The batch B at which ``signal``, averaged up to the goal at each batch size's best learning rate (the
    front's points), equals B: the first crossing from above, interpolated in log-log between batch sizes.

    The readings depend on the batch and rate a run trains at (``--cells``), so a `critical` run settles
    where its reading and its batch agree; with a rate that follows the best one per batch, at this point.
    None with fewer than two batch sizes read."""
    read = [(point.batch, math.log(value / point.batch)) for point in points
            if (value := averaged_noise([point], signal, noise)) is not None]
    if len(read) < 2:
        return None
    batch = first_crossing(read)
    if batch is None:
        return SelfConsistent(None, "above" if read[-1][1] >= 0 else "below")
    logs = np.log([b for b, _ in read])
    # Over every batch read, not the two around the crossing: one cell's seeds move a two-point slope a lot.
    slope = 1.0 + float(np.polyfit(logs, [r for _, r in read], 1)[0])
    return SelfConsistent(batch, slope=slope)


def first_crossing(read: list[tuple[float, float]]) -> float | None:
    """The batch where log(reading / batch), given as (batch, log ratio) in batch order, first falls through 0
    (from a reading at or above its batch to one below), interpolated in log-log; None where it never does."""
    for (b0, r0), (b1, r1) in zip(read, read[1:], strict=False):
        if r0 >= 0 > r1:
            return math.exp(math.log(b0) + r0 / (r0 - r1) * (math.log(b1) - math.log(b0)))
    return None


def bootstrap_ratios(runs: list[RunRecord], goal: float, draws: int = 200, seed: int = 0,
                     hits: dict[int, GoalHit | None] | None = None,
                     noise: dict[tuple[int, str], float | None] | None = None) -> dict[str, tuple[float, float]]:
    """95 % percentile intervals of each signal's ratio to B_crit at a goal (and, keyed 'self <signal>',
    of its self-consistent batch's ratio, over the draws whose crossing lies inside the grid).

    Each draw resamples the seeds of every (batch size, learning rate) cell with
    replacement, then does what ``analyse`` does: the best learning rate per batch,
    the eq. 2.11 fit, each noise scale averaged over the chosen runs. So the interval
    carries the seeds' spread into the choice of learning rate, the fit and the
    average alike. Draws where fewer than ``MIN_POINTS`` batch sizes reach the goal
    are dropped; a signal gets no interval unless most draws give it a ratio.
    ``hits`` and ``noise``: ``analyse``'s (the goal's crossings and ``goal_noise``), when it has them.
    """
    rng = np.random.default_rng(seed)
    hits = hits if hits is not None else {id(run): run.goal(goal) for run in runs}
    noise = noise if noise is not None else goal_noise(runs, hits)
    cells = list(grid_cells(runs).values())
    ratios: dict[str, list[float]] = defaultdict(list)
    for _ in range(draws):
        sample = [group[i] for group in cells for i in rng.integers(len(group), size=len(group))]
        points = best_points(sample, goal, hits)
        if len(points) < MIN_POINTS:
            continue
        fit = fit_pareto(np.array([p.steps for p in points]), np.array([p.examples for p in points]))
        for signal in tags.SIGNALS:
            value = averaged_noise(points, signal, noise)
            if value is not None:
                ratios[signal].append(value / fit.b_crit)
            crossing = self_consistent_batch(points, signal, noise)
            if crossing is not None and crossing.batch is not None:
                ratios[f"self {signal}"].append(crossing.batch / fit.b_crit)
                if crossing.loop_gain is not None:
                    ratios[f"gain {signal}"].append(crossing.loop_gain)
    return {signal: (float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5)))
            for signal, v in ratios.items() if len(v) > draws / 2}


def analyse(runs: list[RunRecord], goals: list[float]) -> list[GoalResult]:
    results = []
    for goal in goals:
        hits = {id(run): run.goal(goal) for run in runs}
        at_goal = goal_noise(runs, hits)
        points = best_points(runs, goal, hits)
        noise = {signal: averaged_noise(points, signal, at_goal) for signal in tags.SIGNALS}
        if len(points) < MIN_POINTS:
            results.append(GoalResult(goal, points, None, noise,
                                      f"reached at {len(points)} batch size(s); {MIN_POINTS} are needed to fit"))
            continue
        fit = fit_pareto(np.array([p.steps for p in points]), np.array([p.examples for p in points]))
        crossings = {signal: c for signal in tags.SIGNALS if (c := self_consistent_batch(points, signal, at_goal))}
        results.append(GoalResult(goal, points, fit, noise, intervals=bootstrap_ratios(runs, goal, hits=hits, noise=at_goal),
                                  self_consistent=crossings))
    return results


def self_consistent_lines(results: list[GoalResult]) -> list[str]:
    """Per fitted goal: each signal's self-consistent batch and its ratio to B_crit [95 %]."""
    lines = []
    for r in results:
        if r.fit is None or not r.self_consistent:
            continue
        parts = []
        largest, smallest = r.points[-1].batch, r.points[0].batch
        for signal, crossing in r.self_consistent.items():
            if crossing.batch is None:
                bound = largest if crossing.outside == "above" else smallest
                sign = ">" if crossing.outside == "above" else "<"
                parts.append(f"{SIGNAL_COLUMNS[signal]} {sign} {bound:,.0f} ({sign} {bound / r.fit.b_crit:.2f})")
                continue
            low, high = r.intervals.get(f"self {signal}", (None, None))
            interval = f" [{low:.2g}, {high:.2g}]" if low is not None else ""
            low, high = r.intervals.get(f"gain {signal}", (None, None))
            gain = ("gain unbounded (slope >= 1)" if crossing.loop_gain is None
                    else f"gain {crossing.loop_gain:.1f}" + (f" [{low:.1f}, {high:.1f}]" if low is not None else ""))
            parts.append(f"{SIGNAL_COLUMNS[signal]} {crossing.batch:,.0f} ({crossing.batch / r.fit.b_crit:.2f}{interval}; "
                         f"{gain})")
        lines.append(f"  goal {r.goal:g}: " + " | ".join(parts))
    if lines:
        lines.insert(0, "self-consistent batch: where each noise scale, read at each batch size's best learning rate, "
                        "equals the batch (where `critical` settles if its rate follows the best one), ÷ B_crit [95 %]; "
                        "gain: 1 / (1 - the reading's slope with the batch there), how many times an error in the "
                        "reading the batch it settles at moves by:")
    return lines


def reading_before(scalars: tuple[np.ndarray, np.ndarray], step: float) -> float | None:
    """The last value logged at or before ``step``: what an online controller read there."""
    steps, values = scalars
    before = values[steps <= step]
    return float(before[-1]) if before.size else None


@dataclass
class BranchReading:
    """The trunk's noise scales where runs branch from it: what an online controller had to go by."""

    checkpoint: Path
    step: int  # the trunk's agent steps at the branch point
    since: float  # the start of the trunk's last stretch (its last goal met before the branch point)
    at: dict[str, float]  # signal -> the running average there
    stretch: dict[str, float | None]  # signal -> averaged over the last stretch (appendix D's weights)


def branch_reading(fixed: list[RunRecord]) -> BranchReading | str | None:
    """Where the runs are branches of one checkpoint (``--init-from``): the trunk's noise scales there;
    a sentence where that cannot be read; None for runs from scratch."""
    if not any(r.cfg.run.init_from for r in fixed):
        return None
    try:
        sources = {checkpoint_file(Path(r.cfg.run.init_from)).resolve() if r.cfg.run.init_from else None
                   for r in fixed}
    except UserError as err:
        return f"a branch point cannot be read: {err}"
    source = sources.pop()
    if sources or source is None:
        return f"the runs start from {len(sources) + 1} different points (--init-from): no one branch point to read"
    step = step_of(source)
    try:
        trunk = load_run(source.parent.parent)
    except UserError as err:
        return f"branched from {source}; its run cannot be read for the noise scales there ({err})"
    # The stretch the trunk trained through just before: since the last of its goals it met before the point.
    met = [hit.agent_steps for g in trunk.cfg.env.goals if (hit := trunk.goal(g)) and hit.agent_steps < step]
    since = max(met, default=0.0)
    at, stretch = {}, {}
    for signal in tags.SIGNALS:
        tag = tags.signal_tag(signal)
        value = reading_before(trunk.scalars[tag], step) if tag in trunk.scalars else None
        if value is not None:
            at[signal] = value
            stretch[signal] = trunk.mean_noise_scale(signal, until=step, since=since)
    return BranchReading(source, step, since, at, stretch)


def branch_point_lines(reading: BranchReading | str | None, results: list[GoalResult]) -> list[str]:
    """The trunk's readings at the branch point, each against every goal's B_crit: the local check of an
    online estimate that branching is for."""
    if reading is None or isinstance(reading, str):
        return [reading] if reading else []
    fitted = [r for r in results if r.fit]
    lines = [f"branched from {reading.checkpoint} at {reading.step:,} agent steps. The trunk's noise scales: its "
             f"running average there (what an online controller reads) | averaged over its last stretch, "
             f"{reading.since:,.0f}-{reading.step:,} agent steps (appendix D's weights); each ÷ every goal's B_crit:"]
    for signal, value in reading.at.items():
        lines.append(f"  {SIGNAL_COLUMNS[signal]} {_against(value, fitted)} | "
                     f"{_against(reading.stretch[signal], fitted)}")
    return lines


def _against(value: float | None, fitted: list[GoalResult]) -> str:
    """'321 (goal 10: 1.05, goal 11: 0.73)': a noise scale and its ratio to each fitted goal's B_crit."""
    if value is None:
        return "-"
    return f"{value:,.0f} (" + ", ".join(f"goal {r.goal:g}: {value / r.fit.b_crit:.2f}" for r in fitted) + ")"


# The table's name for each signal's noise scale.
SIGNAL_COLUMNS = {**{part: f"B_simple {part}" for part in tags.PARTS}, **tags.METRIC_LABELS}


def rows_of(results: list[GoalResult]) -> list[dict[str, float | int | str | None]]:
    """One row per goal, plain numbers (None where there is none)."""
    rows = []
    for r in results:
        fit = r.fit
        row: dict[str, float | int | str | None] = {
            "goal": r.goal, "batch sizes": len(r.points),
            "S_min": fit and fit.s_min, "E_min": fit and fit.e_min,
            "B_crit": fit and fit.b_crit, "B_crit s.e.": fit and fit.b_crit_se}
        for signal in tags.SIGNALS:
            value = r.noise[signal]
            row[SIGNAL_COLUMNS[signal]] = value
            row[f"{signal} / B_crit"] = value / fit.b_crit if (value is not None and fit) else None
            low, high = r.intervals.get(signal, (None, None))
            row[f"{signal} / B_crit 2.5%"], row[f"{signal} / B_crit 97.5%"] = low, high
        row["note"] = r.message
        rows.append(row)
    # A metric no run measured (runs made with measure_curvature false) gets no columns.
    unmeasured = [key for m in tags.METRICS
                  for key in (SIGNAL_COLUMNS[m], f"{m} / B_crit", f"{m} / B_crit 2.5%", f"{m} / B_crit 97.5%")
                  if all(row[key] is None for row in rows)]
    return [{k: v for k, v in row.items() if k not in unmeasured} for row in rows]


def print_table(rows: list[dict]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(header_style="bold")
    # A ratio's interval goes into its cell: "0.77 [0.61, 0.95]" (two digits: a bound can be 1e+10).
    keys = [k for k in rows[0] if (k != "note" or any(r["note"] for r in rows)) and not k.endswith("%")]
    for key in keys:
        table.add_column(escape(key), justify="left" if key == "note" else "right")
    for row in rows:
        cells = []
        for key in keys:
            value = row[key]
            if isinstance(value, str):
                cells.append(value)
            elif key == "goal":
                cells.append(f"{value:g}")
            elif key.endswith("/ B_crit"):
                cell = format_number(value, ".2f")
                low, high = row.get(f"{key} 2.5%"), row.get(f"{key} 97.5%")
                cells.append(cell + (f" [{low:.2g}, {high:.2g}]" if low is not None else ""))
            else:
                cells.append(format_number(value, ",.0f"))
        table.add_row(*(escape(c) for c in cells))
    Console(width=200).print(table)


# Trained "at the knee" of a front: S <= KNEE * S_min and E <= KNEE * E_min. At B = B_crit
# eq. 2.11 gives 2 and 2; a run whose batch moves cannot sit exactly there at every goal.
KNEE = 2.5


def adaptive_rows(results: list[GoalResult], adaptive: list[RunRecord]) -> list[dict[str, str]]:
    """Per fitted goal and adaptive variant, medians over its seeds: S/S_min and E/E_min ([95 %]), the batch
    it trained at up to the goal (each run's median), the noise scale it followed averaged up to the goal
    (the fixed cells' weighting, so the two compare), its ramp, the optimizer steps it took to get there,
    over S_min (a stretch not much longer than the ramp cannot put a run at the knee whatever it follows),
    and its swing, the largest over the smallest batch up to the goal (a run that follows its reading's
    scatter loses steps at the small batches it visits)."""
    by_variant: dict[str, list[RunRecord]] = defaultdict(list)
    for run in adaptive:
        by_variant[variant_of(run)].append(run)
    rows = []
    for r in results:
        if r.fit is None:
            continue
        for variant, group in sorted(by_variant.items()):
            hits = [run.goal(r.goal) for run in group]
            steps = median_interval(np.array([h.updates / r.fit.s_min if h else math.inf for h in hits]))
            examples = median_interval(np.array([h.examples / r.fit.e_min if h else math.inf for h in hits]))
            paths = [p for p in (batch_path(run, r.goal) for run in group) if p is not None]
            batch = float(np.median([p.median for p in paths])) if paths else None
            ramp = float(np.median([p.ramp_updates for p in paths])) / r.fit.s_min if paths else None
            swing = float(np.median([p.high / p.low for p in paths])) if paths else None
            # What it followed, averaged up to the goal as the fixed cells' readings are (eq. D.1 weights).
            readings = [v for run, h in zip(group, hits, strict=True)
                        if (v := run.mean_noise_scale(until=h.agent_steps if h else None)) is not None]
            reading = float(np.median(readings)) if readings else None
            knee = steps[0] <= KNEE and examples[0] <= KNEE
            rows.append({"goal": f"{r.goal:g}", "variant": variant,
                         "reached": f"{sum(h is not None for h in hits)}/{len(hits)}",
                         "S / S_min": format_interval(steps, spec=".2f"),
                         "E / E_min": format_interval(examples, spec=".2f"),
                         "its batch": format_number(batch),
                         "its reading": format_number(reading),
                         "ramp / S_min": format_number(ramp, ".2f"),
                         "swing": format_number(swing, ".1f"),
                         f"at the knee (both <= {KNEE:g})": "yes" if knee else "no"})
    return rows


def print_adaptive(rows: list[dict[str, str]]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(header_style="bold", title="adaptive runs against each goal's fitted front")
    for key in rows[0]:
        table.add_column(escape(key), justify="left" if key == "variant" else "right")
    for row in rows:
        table.add_row(*(escape(v) for v in row.values()))
    Console(width=200).print(table)


def plot_fronts(results: list[GoalResult], adaptive: list[RunRecord], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 6))
    colors = plt.cm.viridis(np.linspace(0.0, 0.85, max(len(results), 1)))
    for r, color in zip(results, colors, strict=True):
        if not r.points:
            continue
        e = np.array([p.examples for p in r.points])
        s = np.array([p.steps for p in r.points])
        label = f"goal {r.goal:g}"
        if r.fit:
            label += f": B_crit {r.fit.b_crit:,.0f}"
            batches = np.geomspace(min(p.batch for p in r.points) / 4, max(p.batch for p in r.points) * 4, 200)
            ax.plot(r.fit.examples(batches), r.fit.steps(batches), color=color, lw=1.5)
        ax.plot(e, s, "o", color=color, label=label)
        for p in r.points:
            ax.annotate(f"{p.batch:g}", (p.examples, p.steps), textcoords="offset points", xytext=(4, 3),
                        fontsize=7, color=color)
        for run in adaptive:
            hit = run.goal(r.goal)
            if hit is not None:
                ax.plot(hit.examples, hit.updates, "*", ms=13, color=color, mec="black", mew=0.6)
    if adaptive:
        ax.plot([], [], "*", ms=11, color="white", mec="black", label="adaptive run(s)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("examples E (observations) to reach the goal")
    ax.set_ylabel("optimizer steps S to reach the goal")
    ax.set_title("Pareto fronts, eq. 2.11 fits (labels: batch size)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, out, "--out-dir")


def plot_bcrit(results: list[GoalResult], out: Path, trunk: BranchReading | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fitted = [r for r in results if r.fit]
    fig, ax = plt.subplots(figsize=(10, 4.8))
    x = np.arange(len(fitted))
    ax.errorbar(x, [r.fit.b_crit for r in fitted], yerr=[r.fit.b_crit_se for r in fitted], fmt="o-",
                color="black", capsize=4, label="B_crit (fit)")
    for signal in tags.SIGNALS:
        values = [r.noise[signal] if r.noise[signal] is not None else np.nan for r in fitted]
        if not np.isfinite(values).any():
            continue
        ax.plot(x, values, "s--", color=SIGNAL_COLORS[signal], label=f"{SIGNAL_COLUMNS[signal]} (averaged up to the goal)")
        before = trunk.stretch.get(signal) if trunk else None
        if before is not None:  # what the trunk read just before the branch point, the same for every goal
            ax.axhline(before, color=SIGNAL_COLORS[signal], linestyle=":", linewidth=1.2)
    if trunk is not None:
        ax.plot([], [], ":", color="grey", label="dotted: the trunk's average over its last stretch before the branch")
    ax.set_xticks(x, [f"{r.goal:g}" for r in fitted])
    ax.set_xlabel("goal (mean return of the last 20 episodes)")
    ax.set_ylabel("observations")
    ax.set_yscale("log")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))  # beside the lines, not on them
    ax.set_title("critical batch size vs. measured noise scales"
                 + (f"\nbranches from {trunk.step:,} agent steps of the trunk" if trunk else ""))
    fig.tight_layout()
    save_figure(fig, out, "--out-dir")


def write_csv(rows: list[dict], path: Path) -> None:
    """Plain numbers, empty where there is none (spreadsheets and pandas read it as is)."""
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if v is None else (f"{v:.6g}" if isinstance(v, float) else v)
                             for k, v in row.items()})


@exits_cleanly
def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="rlscale pareto", description=__doc__.splitlines()[0])
    add_run_arguments(p, "a sweep directory, or run directories")
    p.add_argument("--out-dir", type=Path, help="where the CSV and PNGs go (default: the sweep directory when one is given, else the current directory)")
    p.add_argument("--crossings", action="store_true",
                   help="also print, per batch size and learning rate, the agent steps (thousands) at which each "
                        "seed reached each goal")
    p.add_argument("--cells", action="store_true",
                   help="also print, per batch size and learning rate, each noise scale averaged up to the lowest "
                        "goal (median over seeds): how the readings depend on the learning rate; with the Hessian metrics "
                        "measured, also the share of G^T P G that appendix C's equilibrium holds by noise alone")
    args = p.parse_args(argv)
    runs = load_runs(args.paths)
    fixed = [r for r in runs if r.cfg.control.batch == "fixed"]
    adaptive = [r for r in runs if r.cfg.control.batch != "fixed"]
    if not fixed:
        raise UserError("no fixed-batch runs among the inputs; make some with python -m rlscale.sweep")
    goals = goals_of(fixed, args.goals)
    print(f"{len(fixed)} fixed-batch runs at {len({optimizer_batch(r) for r in fixed})} batch sizes, "
          f"{len(adaptive)} adaptive; goals {', '.join(f'{g:g}' for g in goals)}", flush=True)
    results = analyse(fixed, goals)
    if args.crossings:
        print("agent steps (thousands) to each goal, per cell and seed:")
        print("\n".join(crossing_lines(fixed, goals)), flush=True)
    if args.cells:
        print("\n".join(cell_noise_lines(fixed, goals[0])), flush=True)
    if not any(r.points for r in results):
        best = max((r.best_return() for r in fixed if r.best_return() is not None), default=None)
        raise UserError(f"no run reached any goal (best mean return of 20 episodes: {format_number(best, '.1f')}); "
                        "lower --goals or train longer")
    if not any(r.fit for r in results):
        raise UserError(f"no goal was reached at {MIN_POINTS} or more batch sizes; "
                        "add batch sizes or lower --goals")
    out_dir = args.out_dir or (args.paths[0] if len(args.paths) == 1 and args.paths[0].is_dir() else Path("."))
    writable_dir(out_dir, "--out-dir")
    rows = rows_of(results)
    print_table(rows)
    edges = grid_edges(fixed, results)
    if edges:
        print("at the grid's edge (docs/studies.md rule 3: widen the grid before trusting these goals' fits):")
        print("\n".join(f"  {line}" for line in edges))
    first_sight = first_sight_lines(results)
    if first_sight:
        print("met as soon as it could be seen (S and E there are the wait for episodes to end, not training; "
              "for branches: fork below the goals, or pick goals further above the trunk's score):")
        print("\n".join(f"  {line}" for line in first_sight))
    self_lines = self_consistent_lines(results)
    if self_lines:
        print("\n".join(self_lines))
    reading = branch_reading(fixed)
    branch_lines = branch_point_lines(reading, results)
    if branch_lines:
        print("\n".join(branch_lines))
    knee_rows = adaptive_rows(results, adaptive)
    if knee_rows:
        print_adaptive(knee_rows)
    write_csv(rows, out_dir / "pareto.csv")
    plot_fronts(results, adaptive, out_dir / "pareto_fronts.png")
    plot_bcrit(results, out_dir / "bcrit_vs_bsimple.png", reading if isinstance(reading, BranchReading) else None)
    for name in ("pareto.csv", "pareto_fronts.png", "bcrit_vs_bsimple.png"):
        print(out_dir / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
