"""Issue 61: what one (or k) run(s) per batch can read of a fork sweep's B_crit, by resampling the sweep's
own runs: draw k of each batch's seeds (with replacement), take their geometric means of S and E to the
goal, fit eq. 2.11 as ``rlscale pareto`` does, and count the draws within 2x of a reference B_crit.

    python research/experiments/resample_sweep.py SWEEP_DIR GOAL REFERENCE [--draws 2000]

SWEEP_DIR holds runs named b<batch>-s<seed> (reach_at_forks.py's and measure_on_cartpole.py's sweeps).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from rlscale.control.pareto_fit import fit_pareto


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sweep", type=Path)
    p.add_argument("goal")
    p.add_argument("reference", type=float)
    p.add_argument("--draws", type=int, default=2000)
    args = p.parse_args()
    runs: dict[int, list[tuple[float, float]]] = {}
    for run in sorted(args.sweep.glob("b*-s*")):
        hit = json.loads((run / "summary.json").read_text())["goals"].get(args.goal)
        if hit:
            runs.setdefault(int(run.name.split("-")[0][1:]), []).append((hit["examples"], hit["updates"]))
    batches = sorted(runs)
    rng = np.random.default_rng(0)
    for k in (1, 2, 3):
        readings = []
        for _ in range(args.draws):
            picks = [[runs[b][i] for i in rng.integers(0, len(runs[b]), k)] for b in batches]
            examples = np.array([np.exp(np.mean(np.log([e for e, _ in pick]))) for pick in picks])
            steps = np.array([np.exp(np.mean(np.log([s for _, s in pick]))) for pick in picks])
            readings.append(fit_pareto(steps, examples).b_crit)
        v = np.array(readings)
        within = np.mean((v > args.reference / 2) & (v < args.reference * 2))
        print(f"{args.sweep} goal {args.goal}: {k} run(s) per batch: within 2x of {args.reference:,.0f} in "
              f"{within:.0%} of {args.draws} draws; 5-95 %: {np.percentile(v, 5):,.0f}-{np.percentile(v, 95):,.0f}")


if __name__ == "__main__":
    main()
