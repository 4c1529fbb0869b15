"""Each arm's median time (or agent steps, ``--by agent_steps``) to a goal over its seeds, divided by a reference arm's, with a percentile-bootstrap
interval of that ratio (each arm resampled on its own; a run that missed the goal counts as slower than all).

An arm is a run directory's name without its seed (`auto-b2560-lr0.0634-s10` -> `auto-b2560-lr0.0634`); the same
arm found under several roots is pooled, so seeds run at different times add up. `ROOT::PATTERN` reads only the
run directories under ROOT whose names match the glob PATTERN. Reads each run's summary.json.

    .venv/bin/python research/experiments/cell_ratios.py ROOT [ROOT ...] --goal 14 --reference b80-lr0.0112
    .venv/bin/python research/experiments/cell_ratios.py OLD::'b*' NEW --goal 14 --reference b80-lr0.0112
    # only some arms, or only the first seeds' goal-5 times:
    .venv/bin/python research/experiments/cell_ratios.py ROOT --goal 5 --reference b80-lr0.0112 --arms auto-b40-lr0.00792
    # agent steps to the goal instead of seconds:
    .venv/bin/python research/experiments/cell_ratios.py ROOT --goal 14 --reference b80-lr0.0112 --by agent_steps
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np


def arm_times(roots: list[str], goal: str, seeds: set[int] | None, by: str = "wall_seconds") -> dict[str, list[float]]:
    """Seconds (or ``by``, another field of summary.json's goal record) to ``goal`` per arm (inf where the run ended
    without it), pooled over the roots."""
    arms: dict[str, list[float]] = {}
    seen: set[tuple[str, int]] = set()
    for spec in roots:
        root, _, pattern = spec.partition("::")
        for summary in sorted(Path(root).glob(f"{pattern or '*'}/summary.json")):
            match = re.fullmatch(r"(.+)-s(\d+)", summary.parent.name)
            if match is None or (seeds is not None and int(match[2]) not in seeds):
                continue
            if (match[1], int(match[2])) in seen:  # one seed of one arm under two roots: counted once, or refused
                raise SystemExit(f"{match[1]} seed {match[2]} is under more than one root: select with ROOT::PATTERN")
            seen.add((match[1], int(match[2])))
            data = json.loads(summary.read_text())
            if not data.get("finished", True):
                continue  # still running or cut off: its time to the goal is not known
            reached = data.get("goals", {}).get(goal)
            arms.setdefault(match[1], []).append(float(reached[by]) if reached else float("inf"))
    return arms


def ratio_interval(times: list[float], reference: list[float], draws: int, rng: np.random.Generator
                   ) -> tuple[float, float, float]:
    """Median of ``times`` over the median of ``reference``, and its 95 % percentile-bootstrap interval."""
    a, b = np.asarray(times), np.asarray(reference)
    ratios = np.median(rng.choice(a, (draws, a.size)), axis=1) / np.median(rng.choice(b, (draws, b.size)), axis=1)
    ratios[np.isnan(ratios)] = np.inf  # both medians missed (inf / inf): no ratio is known, so none is claimed
    low, high = np.percentile(ratios, [2.5, 97.5], method="nearest")  # no interpolation between missed runs' inf
    ratio = np.median(a) / np.median(b)
    return float(np.inf if np.isnan(ratio) else ratio), float(low), float(high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("roots", nargs="+", help="folders of run directories (a study's two-core/), each "
                        "optionally ROOT::PATTERN to read only the runs matching PATTERN")
    parser.add_argument("--goal", required=True, help="the goal, as summary.json names it (e.g. 14)")
    parser.add_argument("--reference", required=True, help="the arm every median is divided by (e.g. b80-lr0.0112)")
    parser.add_argument("--arms", nargs="*", help="only these arms (default: all)")
    parser.add_argument("--seeds", nargs="*", type=int, help="only these seeds (default: all)")
    parser.add_argument("--by", choices=("wall_seconds", "agent_steps"), default="wall_seconds",
                        help="what is counted to the goal (default: wall seconds)")
    parser.add_argument("--draws", type=int, default=10_000)
    args = parser.parse_args()
    arms = arm_times(args.roots, args.goal, set(args.seeds) if args.seeds else None, args.by)
    seconds = args.by == "wall_seconds"
    unit, what = ("s", "seconds") if seconds else ("agent steps", "agent steps")

    def shown(value: float, seconds_digits: int = 1) -> str:
        return f"{value:.{seconds_digits}f}" if seconds else f"{value:,.0f}"

    if args.reference not in arms:
        raise SystemExit(f"no finished runs of {args.reference} under {', '.join(args.roots)}")
    reference = arms[args.reference]
    rng = np.random.default_rng(0)
    print(f"goal {args.goal}: median {what} over seeds, ÷ {args.reference}'s {shown(np.median(reference))} {unit} "
          f"({len(reference)} seeds), 95 % bootstrap interval of the ratio")
    for arm in sorted(arms if not args.arms else [a for a in args.arms if a in arms]):
        times = arms[arm]
        ratio, low, high = ratio_interval(times, reference, args.draws, rng)
        missed = sum(t == float("inf") for t in times)
        print(f"  {arm:24s} {len(times):2d} seeds  median {shown(np.median(times)):>9s} {unit}  {ratio:5.2f}x "
              f"[{low:.2f}, {high:.2f}]{f'  ({missed} missed)' if missed else ''}  "
              f"runs {' '.join(shown(t, 0) for t in sorted(times))}")


if __name__ == "__main__":
    main()
