"""What `auto` pays beyond its batches: each run's wall time against T(B) = a + b*B summed over its updates.

a and b are the study's cost model (rlscale study prints them: "cost model through their update times"). A fixed
run's wall time is its updates' T(B) plus its logging, checkpoints and start; an adaptive run's adds its resizes and
the random warm-up steps of the environments each growing resize builds (``warmup_steps`` in its summary).

    python research/experiments/auto_overhead.py 0.0059 0.0000481 STUDY/minatar-asterix/two-core ... [--where]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from run_tables import resizes_and_reversals  # beside this script: one count of resizes for both

from rlscale.rundir.events import read_scalars


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a", type=float, help="seconds an update takes at any batch")
    p.add_argument("b", type=float, help="seconds per optimizer-batch observation")
    p.add_argument("sweeps", type=Path, nargs="+", help="sweep directories of finished runs")
    p.add_argument("--where", action="store_true", help="also split each run's time beyond T(B) by update kind "
                   "(from the scalars logged at every update)")
    args = p.parse_args()
    for sweep in args.sweeps:
        for run in sorted(d for d in sweep.iterdir() if (d / "summary.json").exists()):
            scalars = read_scalars(run)
            _, batch = scalars["batch/optimizer_batch"]
            _, updates = scalars["train/updates"]
            between = np.diff(np.concatenate([[0.0], updates]))  # updates since the last logged point
            modelled = float(np.sum(between * (args.a + args.b * batch)))
            summary = json.loads((run / "summary.json").read_text())
            changes = int(np.sum(np.diff(batch) != 0))  # each resize, and each join of environments it started
            # the environments asked for: one move a resize
            resizes, reversals = resizes_and_reversals(scalars["batch/n_envs"][1])
            print(f"{sweep.name:17s} {run.name:26s} wall {summary['wall_seconds']:7.1f} s  T(B) summed "
                  f"{modelled:7.1f} s  ratio {summary['wall_seconds'] / modelled:4.2f}  batch changes {changes:3d}  "
                  f"resizes {resizes:3d} ({reversals:2d} reversing the one before)  "
                  f"warm-up steps {summary['warmup_steps'] / summary['agent_steps']:4.0%} of agent steps"
                  + (f"\n{'':44s}{where_the_excess_is(scalars, args.a, args.b)}" if args.where else ""))


def where_the_excess_is(scalars: dict, a: float, b: float) -> str:
    """Each logged update's time beyond T(B), in three parts: updates while new environments start, the 5
    after each change of the environment count, and the rest (steady updates: their median time / T(B))."""
    _, update = scalars["perf/update_seconds"]
    _, batch = scalars["batch/optimizer_batch"]
    _, n_envs = scalars["batch/n_envs"]
    starting = (scalars["batch/starting_envs"][1] > 0 if "batch/starting_envs" in scalars
                else np.zeros(len(update), bool))
    modelled = a + b * batch
    after = np.zeros(len(update), bool)
    for change in np.flatnonzero(np.diff(n_envs) != 0) + 1:
        after[change:change + 5] = True
    after &= ~starting
    steady = ~starting & ~after
    beyond = update - modelled
    return (f"beyond T(B): starting {beyond[starting].sum():5.1f} s ({starting.sum()} updates), 5 after a change "
            f"{beyond[after].sum():5.1f} s ({after.sum()}), steady {beyond[steady].sum():5.1f} s "
            f"(median {np.median(update[steady] / modelled[steady]):.2f}x T(B))")


if __name__ == "__main__":
    main()
