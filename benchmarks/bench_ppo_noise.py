"""What measuring the noise scale costs the default Pong PPO run, end to end.

    python benchmarks/bench_ppo_noise.py [--seconds 40] [--rounds 2]

The default run's engine (``python -m rlscale.train pong``: 2 Ray actors, the
learner's precision and threads as it chooses them), updates back to back,
with the noise scale measured on the first epoch's first minibatch (the
default, ``--noise-minibatches 1``), on all four (``0``), and not at all;
the three interleaved, each row the same wall time, for a few rounds. Run it
on a quiet machine; prefix ``ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2``
to see a CPU without bf16 units.
"""

from __future__ import annotations

import argparse

from bench import rlscale_default

VARIANTS = {"noise on, 1 minibatch (default)": {}, "noise on, all 4 minibatches": {"noise_minibatches": 0},
            "noise off": {"measure_noise": False}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=40.0, help="wall time of each row (default: 40)")
    p.add_argument("--rounds", type=int, default=2, help="rounds of the three rows (default: 2)")
    args = p.parse_args()
    results: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for round_ in range(args.rounds):
        for name, overrides in VARIANTS.items():
            rate, _ = rlscale_default("ppo", args.seconds, 8, overrides)
            results[name].append(rate.steps_per_s)
            print(f"round {round_ + 1}: {name:32s} {rate.steps_per_s:6.0f} agent steps/s", flush=True)
    off = sum(results["noise off"]) / args.rounds
    for name, rates in results.items():
        mean = sum(rates) / args.rounds
        print(f"{name:32s} {mean:6.0f} agent steps/s, {mean / off:.3f}x noise off")


if __name__ == "__main__":
    main()
