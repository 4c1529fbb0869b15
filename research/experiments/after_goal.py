"""What each ``auto`` run aimed at after it reached a goal: medians, from the goal's agent step on, of its optimizer
batch, its target (B*), the cost model's a/b, B_simple and the predicted speed-up of B* over its batch, from
TensorBoard's batch/optimizer_batch, batch/target, batch/exchange_rate, noise/b_simple_total and
batch/predicted_speedup. The medians are over the logged updates, not agent steps: a stretch at a small batch
counts more updates per agent step than one at a large batch.

    python research/experiments/after_goal.py GOAL RUN_DIR...
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from run_tables import goals_met, summary  # beside this script: one reader of summary.json's goals

from rlscale.rundir.events import read_scalars

COLUMNS = (("batch", "batch/optimizer_batch", ".0f"), ("target", "batch/target", ".0f"),
           ("a/b", "batch/exchange_rate", ".0f"), ("B_simple", "noise/b_simple_total", ".0f"),
           ("speed-up", "batch/predicted_speedup", ".3f"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("goal", type=float)
    p.add_argument("runs", type=Path, nargs="+")
    args = p.parse_args()
    for run in args.runs:
        saved = summary(run)
        if saved is None:
            raise SystemExit(f"{run}: no summary.json")
        at = next((steps for k, (steps, _) in goals_met(saved).items() if float(k) == args.goal), None)
        if at is None:
            print(f"{run.name} did not reach {args.goal:g}")
            continue
        scalars = read_scalars(run)
        cells = []
        for label, tag, fmt in COLUMNS:
            steps, values = scalars.get(tag, (np.array([]), np.array([])))
            later = values[steps >= at]
            cells.append(f"{label} {np.median(later):{fmt}}" if len(later) else f"{label} -")
        print(f"{run.name} goal {args.goal:g} at {at / 1000:.0f}k  medians after it: {'  '.join(cells)}")


if __name__ == "__main__":
    main()
