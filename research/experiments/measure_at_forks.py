"""Issue 61's check: --batch measured's in-run reading at the fork points whose local B_crit the fork
sweeps measured (docs/results.md, "Which noise scale reads the critical batch size?", (d)).

    python research/experiments/measure_at_forks.py run --trunks DIR [--seeds 0 1 2 3 4] [--window 32]
    python research/experiments/measure_at_forks.py read --trunks DIR

``run`` branches each trunk in DIR (trunk, trunk-s1, si-trunk, si-trunk-s1: made by the trunk
commands of docs/results.md (d)) once per seed with ``rlscale train --init-from TRUNK --batch
measured`` (branches 40-1,280 as the fork sweeps had them, the trunk's learning rate at 160 and
the power rule), one measurement and nothing after it; resumable (a finished run is skipped).
``read`` prints each reading, by the total and the policy loss, against the sweeps' B_crit at
the two goals after the fork, and writes DIR/forks.json.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np

from rlscale import tags
from rlscale.rundir.events import read_scalars

# trunk dir -> (preset, trunk lr, {goal: the fork sweep's local B_crit}) from docs/results.md (the long form)
FORKS = {
    "trunk": ("minatar-breakout", 2.24e-2, {10: 442, 11: 380}),
    "trunk-s1": ("minatar-breakout", 2.24e-2, {10: 1031, 11: 900}),
    "si-trunk": ("minatar-spaceinvaders", 1.12e-2, {35: 113, 40: 184}),
    "si-trunk-s1": ("minatar-spaceinvaders", 1.12e-2, {35: 198, 40: 585}),
}
MULTIPLIERS = ["0.25", "0.5", "1", "2", "4", "8"]  # x 160: the sweeps' batches 40-1,280


def run(trunks: Path, seeds: list[int], window: float) -> None:
    for trunk, (preset, lr, _) in FORKS.items():
        if not (trunks / trunk / "summary.json").is_file():
            print(f"skip {trunk}: no trunk in {trunks}", flush=True)
            continue
        for seed in seeds:
            out = trunks / "measured" / f"{trunk}-w{window:g}-s{seed}"
            if (out / "summary.json").is_file():
                continue
            cmd = [sys.executable, "-m", "rlscale.train", preset, "--init-from", str(trunks / trunk),
                   "--batch", "measured", "--remeasure", "1e9", "--branches", *MULTIPLIERS,
                   "--branch-window", f"{window:g}", "--n-envs", "32", "--vector-size", "8", "--min-envs", "8",
                   "--max-envs", "256", "--lr", f"{lr:g}", "--serial", "--learner-threads", "1",
                   "--learner-precision", "fp32", "--actor-precision", "fp32", "--total-frames", "1",
                   "--seed", str(seed), "--log-interval", "600", "--run-dir", str(out)]
            print(" ".join(cmd[1:]), flush=True)
            done = subprocess.run(cmd, capture_output=True, text=True)
            lines = [line for line in done.stdout.splitlines() if line.startswith("measured at")]
            print(lines[0] if lines else done.stderr[-2000:], flush=True)


def last(scalars: dict, tag: str) -> float:
    return float(scalars[tag][1][-1]) if tag in scalars else math.nan


def read(trunks: Path) -> None:
    rows = []
    for out in sorted((trunks / "measured").glob("*")):
        if not (out / "summary.json").is_file():
            continue
        trunk = out.name.rsplit("-w", 1)[0]
        scalars = read_scalars(out)
        rows.append({"trunk": trunk, "run": out.name,
                     "total": last(scalars, tags.MEASURED_BATCH),
                     "low": last(scalars, tags.MEASURED_LOW), "high": last(scalars, tags.MEASURED_HIGH),
                     "policy": last(scalars, tags.MEASURED_BATCH_BY.format(progress="policy")),
                     "efficient": last(scalars, tags.MEASURED_EFFICIENT),
                     "seconds": last(scalars, tags.MEASURE_SECONDS),
                     "examples": json.loads((out / "summary.json").read_text())["examples"]})
    (trunks / "forks.json").write_text(json.dumps(rows, indent=1))
    print(f"{'fork':<12} {'sweep B_crit':>14} {'by':>7} {'median':>8} {'readings (seeds)':<40} within 2x")
    for trunk, (_, _, truth) in FORKS.items():
        mine = [r for r in rows if r["trunk"] == trunk]
        if not mine:
            continue
        lo, hi = min(truth.values()), max(truth.values())
        for measure in ("total", "policy"):
            values = np.array([r[measure] for r in mine])
            median = float(np.nanmedian(values)) if np.isfinite(values).any() else math.nan
            ok = lo / 2 <= median <= hi * 2 if math.isfinite(median) else False
            shown = " ".join(f"{v:,.0f}" if math.isfinite(v) else "-" for v in values)
            print(f"{trunk:<12} {lo:>6,}-{hi:<7,} {measure:>7} {median:>8,.0f} {shown:<40} {'yes' if ok else 'no'}")
    cost = [r for r in rows if math.isfinite(r["seconds"])]
    if cost:
        print(f"cost per measurement: median {np.median([r['examples'] for r in cost]):,.0f} examples, "
              f"{np.median([r['seconds'] for r in cost]):.0f} s of overhead (branches not continued, held-out batch)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("run", "read"))
    p.add_argument("--trunks", type=Path, required=True)
    p.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2, 3, 4])
    p.add_argument("--window", type=float, default=32)
    args = p.parse_args()
    if args.what == "run":
        run(args.trunks, args.seeds, args.window)
    read(args.trunks)


if __name__ == "__main__":
    main()
