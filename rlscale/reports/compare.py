"""``rlscale compare <run dirs…>``: one table and one plot for several runs.

For each run: the final return (mean of its last 20 episodes), the best mean
of 20, and for each goal the agent steps, optimizer steps, examples and wall
time at which the mean return of the last 20 episodes first reached it; the
average of the controller's noise-scale signal; the total wall time. The PNG
overlays the smoothed return curves against agent steps and against wall time.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

from rlscale.cli import Parser, writable_file
from rlscale.errors import UserError, exits_cleanly
from rlscale.goals import GOAL_WINDOW, smoothed_returns
from rlscale.reports.plot import save_figure
from rlscale.reports.runs import RunRecord, format_number, goals_of, load_runs


def _minutes(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:,.1f} min"


def comparison_rows(runs: list[RunRecord], goals: list[float]) -> list[dict[str, str]]:
    rows = []
    for run in runs:
        row = {
            "run": run.name,
            "env": run.cfg.env.env_id,
            "agent": run.cfg.agent.algo,
            "batch": run.cfg.control.batch,
            "agent steps": format_number(run.agent_steps()),
            "final return": format_number(run.final_return(), ".1f"),
            "best mean of 20": format_number(run.best_return(), ".1f"),
        }
        for goal in goals:
            hit = run.goal(goal)
            row[f"goal {goal:g}: agent steps"] = format_number(hit and hit.agent_steps)
            row[f"goal {goal:g}: optimizer steps"] = format_number(hit and hit.updates)
            row[f"goal {goal:g}: examples"] = format_number(hit and hit.examples)
            row[f"goal {goal:g}: wall"] = _minutes(hit.wall_seconds) if hit else "-"
        signal_mean = run.mean_noise_scale()
        row["mean B_simple (signal)"] = "-" if signal_mean is None else f"{signal_mean:,.0f} ({run.cfg.control.signal})"
        row["wall"] = _minutes(run.wall_seconds())
        rows.append(row)
    return rows


def plot_returns(runs: list[RunRecord], goals: list[float], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    walls = [run.wall_curve() for run in runs]  # by position: two runs may share a name
    with_wall = any(wall is not None for wall in walls)
    fig, axes = plt.subplots(1, 2 if with_wall else 1, figsize=(13 if with_wall else 7, 4.8),
                             sharey=True, squeeze=False)
    for run, wall in zip(runs, walls, strict=True):
        steps, values = run.returns()
        if not values.size:
            continue
        smooth = smoothed_returns(values)
        (line,) = axes[0, 0].plot(steps, smooth, label=run.name)
        if wall is not None:
            axes[0, 1].plot(np.interp(steps, *wall) / 60, smooth,
                            color=line.get_color(), label=run.name)
    axes[0, 0].set_xlabel("agent steps")
    axes[0, 0].set_ylabel(f"mean return of the last {GOAL_WINDOW} episodes")
    if with_wall:
        axes[0, 1].set_xlabel("wall time (minutes of training)")
    for ax in axes[0]:
        for goal in goals:
            ax.axhline(goal, color="gray", ls=":", lw=1)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8, loc="best")
    fig.tight_layout()
    save_figure(fig, out)


def print_table(rows: list[dict[str, str]]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    # One row per quantity and one column per run: runs are few, quantities many.
    table = Table(show_header=True, header_style="bold")
    table.add_column("")
    for row in rows:
        table.add_column(escape(row["run"]), justify="right")
    for key in list(rows[0])[1:]:
        table.add_row(escape(key), *(escape(row[key]) for row in rows))
    Console(width=max(100, 26 + 22 * len(rows))).print(table)


def write_csv(rows: list[dict[str, str]], path: Path) -> None:
    try:
        with open(path, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    except OSError as err:
        raise UserError(f"cannot write {path} ({err.strerror}); choose another --csv") from None


@exits_cleanly
def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="rlscale compare", description=__doc__.splitlines()[0])
    p.add_argument("runs", type=Path, nargs="+", help="run directories (or folders holding them)")
    p.add_argument("--goals", type=float, nargs="+", help="score goals (default: the runs' presets)")
    p.add_argument("--out", type=Path, default=Path("compare.png"), help="PNG of the return curves")
    p.add_argument("--csv", type=Path, help="also write the table as CSV")
    args = p.parse_args(argv)
    writable_file(args.out, ".png")
    runs = load_runs(args.runs)
    envs = {r.cfg.env.env_id for r in runs}
    if len(envs) > 1:
        print(f"note: the runs train different environments ({', '.join(sorted(envs))})", file=sys.stderr)
    goals = goals_of(runs, args.goals)
    rows = comparison_rows(runs, goals)
    print_table(rows)
    plot_returns(runs, goals, args.out)
    print(f"plot: {args.out}")
    if args.csv:
        write_csv(rows, args.csv)
        print(f"table: {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
