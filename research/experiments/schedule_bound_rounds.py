"""The default Pong PPO and A2C runs against their schedule's bound (benchmarks/bench.py's ``Bound``), a few
rounds, rows alternating: the spread of "x bound" from reading to reading, which one bench.py run cannot give.

    python research/experiments/schedule_bound_rounds.py [--rounds 3] [--seconds 40]

Each round: a PPO row (8 envs) and an A2C row (16 envs) of ``--seconds``, each followed by its bound (8 PPO
updates, 100 A2C ones). Prints each reading as it finishes, then each algorithm's readings of x bound.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench import cpu_kind, rlscale_default  # noqa: E402

ROWS = (("ppo", 8, 8), ("a2c", 16, 100))  # algorithm, environments, the bound's repeats

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=40.0)
    args = p.parse_args()
    print(f"CPU: {cpu_kind()}", flush=True)
    ratios: dict[str, list[float]] = {algo: [] for algo, _, _ in ROWS}
    for round_ in range(1, args.rounds + 1):
        for algo, envs, repeats in ROWS:
            rate, precision, _, _, bound = rlscale_default(algo, args.seconds, envs, {"pool": "actors"}, repeats)
            ratio = rate.steps_per_s / bound.steps_per_s
            ratios[algo].append(ratio)
            print(f"round {round_} {algo} ({precision} learner): the row {rate.steps_per_s:,.0f} agent steps/s "
                  f"(phases, means: rollout {bound.row_rollout:.3f} + learner {bound.row_learner:.3f} s); bound "
                  f"{bound.steps_per_s:,.0f} (rollout share {bound.rollout:.3f} + learner {bound.learner:.3f} s); "
                  f"{ratio:.2f}x its bound", flush=True)
    for algo, values in ratios.items():
        print(f"{algo}: x bound {', '.join(f'{v:.2f}' for v in values)}; "
              f"range {min(values):.2f}-{max(values):.2f}", flush=True)
