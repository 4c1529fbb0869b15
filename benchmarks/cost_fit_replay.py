"""How much the cost model's fitted exchange rate r = a/b swings within a run, for several fit widths.

    python benchmarks/cost_fit_replay.py "runs/rep/*/*" [--sizes-kept 4 8 16 0]

Replays each recorded `--batch auto` run's update times (the `perf/update_seconds`
and `batch/size` scalars, in order) through ``CostModel`` keeping the last N batch
sizes seen (0: every size), the update right after each resize left out as the
trainer leaves it out, and reads the fit after every update. The run's path stays
the one its own fit chose: this measures the fit's noise on real timings, not what
`auto` would have done with it. Prints, per width, the median (and 75th percentile)
over runs of r's 10th-90th percentile spread within a run, how many runs had
>= 10 % of their fits unresolved (no overhead or no slope), and the range of the
runs' median r. Runs with fixed batches or fewer than 100 updates are skipped.
"""

from __future__ import annotations

import argparse
import glob
from pathlib import Path

import numpy as np

from rlscale.control.cost import CostModel
from rlscale.reports.events import read_scalars


def replay(batches: np.ndarray, seconds: np.ndarray, sizes_kept: int) -> tuple[np.ndarray, float]:
    """The fitted r after each update (resolved fits only), and the share of fits left unresolved."""
    model = CostModel(sizes_kept=sizes_kept or 10**9)
    rates, unresolved, fitted, previous = [], 0, 0, None
    for batch, time in zip(batches, seconds, strict=True):
        if batch == previous:  # the first update at a new size ran on a pool just resized
            model.add(float(batch), float(time))
        previous = batch
        fit = model.fit
        if fit is None:
            continue
        fitted += 1
        if fit.unresolved:
            unresolved += 1
        else:
            rates.append(fit.exchange_rate)
    return np.array(rates), unresolved / max(fitted, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", help="a glob of run directories (quote it)")
    parser.add_argument("--sizes-kept", type=int, nargs="+", default=[4, 8, 16, 0])
    args = parser.parse_args()
    runs = []
    for run in sorted(glob.glob(args.runs)):
        if "fixed" in Path(run).name or not glob.glob(f"{run}/events*"):
            continue
        scalars = read_scalars(Path(run))
        if "perf/update_seconds" not in scalars or "batch/size" not in scalars:
            continue
        steps_t, seconds = scalars["perf/update_seconds"]
        steps_b, batches = scalars["batch/size"]
        common, it, ib = np.intersect1d(steps_t, steps_b, return_indices=True)
        if len(common) >= 100:
            runs.append((batches[ib], seconds[it]))
    if not runs:
        raise SystemExit(f"error: no auto runs with update times under {args.runs}")
    for kept in args.sizes_kept:
        spreads, shares, medians = [], [], []
        for batches, seconds in runs:
            rates, share = replay(batches, seconds, kept)
            shares.append(share)
            if len(rates) > 10:
                spreads.append(np.percentile(rates, 90) / np.percentile(rates, 10))
                medians.append(np.median(rates))
        print(f"sizes kept {kept or 'all'}: {len(runs)} runs; r's 10th-90th spread within a run, median "
              f"{np.median(spreads):.2f}x (75th pct {np.percentile(spreads, 75):.2f}x); runs with >= 10 % of fits "
              f"unresolved: {sum(s >= 0.1 for s in shares)}; runs' median r {min(medians):.0f}-{max(medians):.0f}")


if __name__ == "__main__":
    main()
