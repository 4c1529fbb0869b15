"""One figure: each `auto` run's optimizer batch against its training progress, beside the oracle schedule.

Training progress is the run's 20-episode mean return (the goal rule's), so the x axis is the one the
oracle's stages are cut on: stage k runs from goal k-1 to goal k. The oracle (two-core wall time, from the
fixed runs of the same study: ``rlscale oracle``) is drawn as the batch it picks for each stage; every
adaptive start is one colour, each seed one line.

    python research/experiments/auto_against_oracle.py runs/auto-study/cartpole/two-core --out docs/img/x.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from rlscale import tags
from rlscale.goals import smoothed_returns
from rlscale.reports.oracle import bound, cell_stages
from rlscale.reports.runs import goals_of, load_runs, optimizer_batch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("study", type=Path, help="a study's two-core sweep directory (fixed and auto runs)")
    p.add_argument("--goals", type=float, nargs="*")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--title", default="")
    args = p.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = load_runs([args.study])
    goals = goals_of(runs, args.goals)
    cells = cell_stages(runs, goals)
    oracle = bound("two-core wall time", "min", [c.seconds / 60 for c in cells]).oracle
    fig, ax = plt.subplots(figsize=(8, 4.5))
    edges = [min(0.0, goals[0])] + goals
    for k, cell in enumerate(oracle.cells):
        ax.hlines(cells[cell].batch, edges[k], edges[k + 1], colors="black", linewidth=3,
                  label="oracle (best fixed batch per stage)" if k == 0 else None)
    colours = {}
    for run in sorted(runs, key=lambda r: (optimizer_batch(r), r.cfg.run.seed)):
        if run.cfg.control.batch != "auto":
            continue
        start = optimizer_batch(run)
        colour = colours.setdefault(start, f"C{len(colours)}")
        steps, returns = run.returns()
        smooth = smoothed_returns(returns)
        batch_steps, batches = run.scalars[tags.OPTIMIZER_BATCH]
        keep = np.isfinite(smooth)
        progress = np.maximum.accumulate(smooth[keep])  # the best mean so far: the goal rule's progress
        batch_at = np.interp(steps[keep], batch_steps, batches)
        done = progress <= goals[-1]
        ax.plot(progress[done], batch_at[done], color=colour, alpha=0.6, linewidth=1,
                label=f"auto from {start:g}" if run.cfg.run.seed == min(
                    r.cfg.run.seed for r in runs if r.cfg.control.batch == "auto" and optimizer_batch(r) == start)
                else None)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("training progress: best 20-episode mean return so far")
    ax.set_ylabel("optimizer batch (observations)")
    for goal in goals:
        ax.axvline(goal, color="grey", linewidth=0.5, linestyle=":")
    ax.set_title(args.title or f"auto's batch against the oracle schedule: {args.study}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(args.out)


if __name__ == "__main__":
    main()
