"""bf16 against fp32 on Pong to an early goal (issue 78's precision item): steps, speed, and their product.

Reads two output directories of ``benchmarks/learning.py --tasks pong-ppo-early`` (one per ``--precision``,
run side by side so both saw the same load) and prints, per precision, each seed's agent steps to the goal
and agent steps per second of wall time; then bf16 against fp32: the rank test and the median ratio of
steps with its 95 % bootstrap interval (rlscale/reports/regression.py), the ratio of speeds, and their
product, the ratio of wall times to the goal that the start-up choice of precision should weigh.

    python research/experiments/precision_on_pong.py OUT-bf16 OUT-fp32 [--extra fp32:0=570368:2427]

``--extra PRECISION:SEED=STEPS:SECONDS`` adds a seed read elsewhere (say, from an earlier run's events, with
the same code and settings), marked as such in the output.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from rlscale.reports.regression import compare, verdict_line


def seeds(out: Path) -> dict[int, tuple[int | None, float]]:
    """Seed -> (agent steps to the goal or None, wall seconds) of every finished seed."""
    found = {}
    for path in sorted((out / "pong-ppo-early").glob("seed-*.json")):
        if path.name.endswith(".started.json"):
            continue
        result = json.loads(path.read_text())
        found[result["signature"]["seed"]] = (result["steps"], float(result["wall_seconds"]))
    return found


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bf16", type=Path)
    p.add_argument("fp32", type=Path)
    p.add_argument("--extra", nargs="*", default=[], help="PRECISION:SEED=STEPS:SECONDS read elsewhere")
    args = p.parse_args()
    runs = {"bf16": seeds(args.bf16), "fp32": seeds(args.fp32)}
    marked: set[tuple[str, int]] = set()
    for item in args.extra:
        precision, rest = item.split(":", 1)
        seed, values = rest.split("=")
        steps, seconds = values.split(":")
        runs[precision][int(seed)] = (int(steps), float(seconds))
        marked.add((precision, int(seed)))
    speed = {}
    for precision, found in runs.items():
        rates = [s / w for s, w in found.values() if s]
        speed[precision] = statistics.median(rates)
        shown = ", ".join(f"seed {seed}: {s:,} in {w / 60:.1f} min{' (read elsewhere)' if (precision, seed) in marked else ''}"
                          for seed, (s, w) in sorted(found.items()))
        print(f"{precision}: {shown}; median {statistics.median(s for s, _ in found.values()):,.0f} agent steps, "
              f"{speed[precision]:.0f} agent steps/s")
    result = compare([s for s, _ in runs["bf16"].values()], [s for s, _ in runs["fp32"].values()])
    print(verdict_line("bf16 against fp32", result))
    faster = speed["bf16"] / speed["fp32"]
    print(f"speed: bf16 {faster:.2f}x fp32's agent steps per second (side by side, the same load); "
          f"time to the goal: bf16 {result.ratio / faster:.2f}x fp32's "
          f"[{result.ratio_low / faster:.2f}, {result.ratio_high / faster:.2f}] (steps ratio / speed ratio)")


if __name__ == "__main__":
    main()
