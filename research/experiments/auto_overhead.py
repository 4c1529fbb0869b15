"""What `auto` pays beyond its batches: each run's wall time against T(B) = a + b*B summed over its updates.

a and b are the study's cost model (rlscale study prints them: "cost model through their update times"). A fixed
run's wall time is its updates' T(B) plus its logging, checkpoints and start; an adaptive run's adds its resizes and
the random warm-up steps of the environments each growing resize builds (``warmup_steps`` in its summary).

    python research/experiments/auto_overhead.py 0.0059 0.0000481 STUDY/minatar-asterix/two-core ...
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from rlscale.rundir.events import read_scalars


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a", type=float, help="seconds an update takes at any batch")
    p.add_argument("b", type=float, help="seconds per optimizer-batch observation")
    p.add_argument("sweeps", type=Path, nargs="+", help="sweep directories of finished runs")
    args = p.parse_args()
    for sweep in args.sweeps:
        for run in sorted(d for d in sweep.iterdir() if (d / "summary.json").exists()):
            scalars = read_scalars(run)
            _, batch = scalars["batch/optimizer_batch"]
            _, updates = scalars["train/updates"]
            between = np.diff(np.concatenate([[0.0], updates]))  # updates since the last logged point
            modelled = float(np.sum(between * (args.a + args.b * batch)))
            summary = json.loads((run / "summary.json").read_text())
            changes = int(np.sum(np.diff(batch) != 0))
            print(f"{sweep.name:17s} {run.name:26s} wall {summary['wall_seconds']:7.1f} s  T(B) summed "
                  f"{modelled:7.1f} s  ratio {summary['wall_seconds'] / modelled:4.2f}  batch changes {changes:3d}  "
                  f"warm-up steps {summary['warmup_steps'] / summary['agent_steps']:4.0%} of agent steps")


if __name__ == "__main__":
    main()
