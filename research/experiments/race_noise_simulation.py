"""How often one in-run measurement (--progress reach) reads within 2x of a fork sweep, if its races are
unbiased and scatter as measured: a simulation of the read-out alone (research/notebook/results.md, issue 61).

    python research/experiments/race_noise_simulation.py [--sd 0.43] [--trials 4000]

The truth is eq. 2.11, E(B) = E_min (1 + B/B_crit), at the MinAtar forks' six batches (40-1,280) with B_crit 600.
A race's examples to the goal are the truth times e^N(0, sd^2) (sd of log examples: 0.43 for eight races at
SpaceInvaders' batch 160, 0.55 for eight runs from its trunk); a batch's races are pooled by geometric mean and
B_crit is read by the mode's own read-out (``rlscale.training.races.read_reach``: ``fit_pareto`` in log space).
The reference is a sweep simulated alike with eight seeds a batch, read by the same fit; a reading is "within
2x" when it lies within a factor 2 of that sweep's reading, as docs/results.md judges them.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from rlscale.control.pareto_fit import fit_pareto

BATCHES = np.array([40.0, 80.0, 160.0, 320.0, 640.0, 1280.0])
B_CRIT, E_MIN = 600.0, 150_000.0


def reading(rng: np.random.Generator, runs: int, sd: float) -> float:
    """B_crit read from ``runs`` races (or sweep seeds) a batch, pooled by geometric mean."""
    truth = E_MIN * (1 + BATCHES / B_CRIT)
    examples = truth * np.exp(rng.normal(0.0, sd, size=(runs, BATCHES.size)).mean(axis=0))
    return fit_pareto(examples / BATCHES, examples).b_crit


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sd", type=float, default=0.43, help="sd of a race's log examples to the goal")
    p.add_argument("--trials", type=int, default=4000)
    p.add_argument("--sweep-seeds", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"truth B_crit {B_CRIT:g}, batches {'/'.join(f'{b:g}' for b in BATCHES)}, sd of log examples {args.sd:g}, "
          f"sweeps of {args.sweep_seeds} seeds a batch, {args.trials:,} trials a row")
    print("races a batch | within 2x of the sweep | within 2x of the truth | median reading / truth | 10th-90th pct")
    for races in (1, 2, 4, 8):
        ratios, against_sweep = [], []
        for _ in range(args.trials):
            mine, sweep = reading(rng, races, args.sd), reading(rng, args.sweep_seeds, args.sd)
            ratios.append(mine / B_CRIT)
            against_sweep.append(abs(math.log(mine / sweep)) <= math.log(2))
        r = np.array(ratios)
        within_truth = np.mean(np.abs(np.log(r)) <= math.log(2))
        print(f"{races:13d} | {np.mean(against_sweep):22.0%} | {within_truth:22.0%} | {np.median(r):22.2f} | "
              f"{np.percentile(r, 10):.2f}-{np.percentile(r, 90):.2f}")


if __name__ == "__main__":
    main()
