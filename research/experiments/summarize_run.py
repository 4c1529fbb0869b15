"""Print a run's noise scales and returns over training, for docs/results.md.

    python benchmarks/summarize_run.py RUN_DIR [--bins 8]

For each of B_simple total / policy / value: the first defined value, the
value after the first 10k agent steps, the average and median over the run,
the fraction of updates where it was undefined, and its mean in equal bins of agent
steps; then the mean return of the last 20 episodes at the same bin edges.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from rlscale.goals import rolling_mean
from rlscale.rundir.events import read_scalars


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--bins", type=int, default=8)
    p.add_argument("--stall-seconds", type=float, default=20.0, help="an update longer than this is a stall")
    args = p.parse_args()
    data = read_scalars(args.run_dir)
    updates = data["batch/size"][0]
    edges = np.linspace(0, updates.max(), args.bins + 1)
    print(f"run: {args.run_dir}  ({updates.size:,} updates, {updates.max():,} agent steps)")
    print("bins of agent steps: " + " | ".join(f"{a / 1e3:.0f}k-{b / 1e3:.0f}k" for a, b in zip(edges[:-1], edges[1:], strict=True)))
    for part in ("total", "policy", "value"):
        tag = f"noise/b_simple_{part}"
        if tag not in data:
            continue
        steps, values = data[tag]
        after = values[steps >= 10_000]
        means = [values[(steps >= a) & (steps <= b)].mean() if ((steps >= a) & (steps <= b)).any() else np.nan
                 for a, b in zip(edges[:-1], edges[1:], strict=True)]
        print(f"B_simple {part:6s} first {values[0]:8,.0f}  at 10k {after[0] if after.size else np.nan:8,.0f}  "
              f"average {values.mean():9,.0f}  median {np.median(values):8,.0f}  "
              f"undefined in {1 - values.size / updates.size:5.1%} of updates")
        print("    by bin: " + " | ".join(f"{m:,.0f}" for m in means))
    if "rollout/episode_return" in data:
        steps, returns = data["rollout/episode_return"]
        smooth = rolling_mean(returns, 20)
        at = [smooth[steps <= b][-1] if (steps <= b).any() else np.nan for b in edges[1:]]
        print("mean return (last 20) at bin ends: " + " | ".join(f"{r:.1f}" for r in at))
        print(f"best mean return (last 20): {smooth[19:].max() if smooth.size >= 20 else np.nan:.1f}")
    stall_steps, stall_seconds = np.zeros(0), np.zeros(0)
    if "perf/wall_seconds" in data:
        # An update that took minutes means the process was paused (kill -STOP) or stalled;
        # the wall time without them is what the run needed.
        steps, wall = data["perf/wall_seconds"]
        took = np.diff(wall)
        stalls = np.flatnonzero(took > args.stall_seconds)
        stall_steps, stall_seconds = steps[stalls + 1], took[stalls]
        print(f"updates longer than {args.stall_seconds:g} s: {stalls.size} "
              f"({', '.join(f'{took[i]:.0f} s at {steps[i + 1]:,}' for i in stalls) or 'none'}); "
              f"wall {wall[-1] / 60:.1f} min, without them {(wall[-1] - took[stalls].sum()) / 60:.1f} min")
    summary = args.run_dir / "summary.json"
    if summary.exists():
        s = json.loads(summary.read_text())
        print(f"summary: {s['agent_steps']:,} agent steps, {s['updates']:,} updates, "
              f"{s['wall_seconds'] / 60:.1f} min, goals {s['goals']}")
        for goal, at in s["goals"].items():
            before = stall_seconds[stall_steps <= at["agent_steps"]].sum()
            print(f"goal {goal}: {at['agent_steps']:,} agent steps, {at['wall_seconds'] / 60:.1f} min "
                  f"({(at['wall_seconds'] - before) / 60:.1f} min without the stalls before it)")


if __name__ == "__main__":
    main()
