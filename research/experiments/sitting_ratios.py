"""Per-seed times to a goal ÷ the reference arm's median time of the same sitting, pooled over sittings.

Machines drift between sittings (1.2-1.4x between groups of seeds an hour apart has been seen), so runs of
different sittings are compared only through their own sitting's reference. A sitting is one source: a folder
of run directories (summary.json each) or a runs.txt table of `run_tables.py runs` (for runs whose directories
are gone). `SOURCE::SEEDS` keeps only the given seeds of an arm from that source (`10-14` or `10,12`); the
reference's median always uses every seed of its sitting. The interval resamples the runs of each arm and of
each sitting's reference within their sitting, then pools the ratios.

    .venv/bin/python research/experiments/sitting_ratios.py --goal 50 --reference b160-lr0.0056 \
        OLD/runs.txt::10-14 /work/runs/si-ten/minatar-spaceinvaders/two-core::15-19
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path

import numpy as np

Sitting = dict[str, dict[int, float]]  # arm -> seed -> seconds to the goal (inf: missed)
RUN = re.compile(r"(?:.*/)?(.+)-s(\d+)$")


def read_sitting(source: Path, goal: str) -> Sitting:
    """Every finished run's seconds to ``goal`` in one sitting, by arm and seed."""
    arms: Sitting = {}
    if source.is_dir():
        for summary in sorted(source.glob("*/summary.json")):
            match = RUN.fullmatch(summary.parent.name)
            data = json.loads(summary.read_text())
            if match is None or not data.get("finished", True):
                continue
            reached = data.get("goals", {}).get(goal)
            arms.setdefault(match[1], {})[int(match[2])] = float(reached["wall_seconds"]) if reached else np.inf
        return arms
    for line in source.read_text().splitlines():  # `name steps envs seconds {goal: (steps, seconds)}`
        if line.startswith("#") or not line.strip() or "(not finished)" in line:
            continue
        name, _, _, _, goals = line.split(maxsplit=4)
        match = RUN.fullmatch(name)
        if match is None:
            raise SystemExit(f"{source}: {name} is not a run's name (ARM-sSEED)")
        reached = ast.literal_eval(goals).get(goal)
        arms.setdefault(match[1], {})[int(match[2])] = float(reached[1]) if reached else np.inf
    return arms


def seed_range(text: str) -> set[int]:
    seeds: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        seeds.update(range(int(low), int(high or low) + 1))
    return seeds


def pooled_ratios(sittings: list[tuple[Sitting, set[int] | None]], arm: str, reference: str,
                  rng: np.random.Generator | None = None) -> np.ndarray:
    """The arm's per-seed ratios over every sitting; with ``rng``, one bootstrap draw of them."""
    ratios = []
    for runs, seeds in sittings:
        if arm not in runs or reference not in runs:
            continue
        ref = np.array(list(runs[reference].values()))
        if not np.isfinite(np.median(ref)):
            raise SystemExit(f"half or more of a sitting's {reference} runs missed the goal: no ratio to it")
        times = np.array([t for s, t in sorted(runs[arm].items()) if seeds is None or s in seeds])
        if rng is not None:
            ref, times = rng.choice(ref, ref.size), rng.choice(times, times.size)
        ratios.extend(times / np.median(ref))
    return np.array(ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="+", help="one a sitting: a folder of runs or a runs.txt, optionally ::SEEDS")
    parser.add_argument("--goal", required=True)
    parser.add_argument("--reference", required=True, help="the arm each sitting's runs are divided by")
    parser.add_argument("--draws", type=int, default=10_000)
    args = parser.parse_args()
    goal = f"{float(args.goal):g}"  # summary.json names goals as 50, not 50.0
    sittings = []
    for spec in args.sources:
        path, _, seeds = spec.partition("::")
        runs = read_sitting(Path(path), goal)
        if args.reference not in runs:
            raise SystemExit(f"{path} holds no finished {args.reference} run: its runs have nothing to be divided by")
        sittings.append((runs, seed_range(seeds) if seeds else None))
    rng = np.random.default_rng(0)
    print(f"goal {goal}: each run's time ÷ the median {args.reference} of its sitting, pooled; "
          f"95 % bootstrap interval of the median (runs resampled within their sitting)")
    for runs, seeds in sittings:
        ref = runs[args.reference]
        kept = "" if seeds is None else f"; arms keep seeds {','.join(map(str, sorted(seeds)))}"
        print(f"  sitting of {len(ref)} {args.reference} runs, median {np.median(list(ref.values())):.1f} s{kept}")
    for arm in sorted({a for runs, _ in sittings for a in runs}):
        ratios = pooled_ratios(sittings, arm, args.reference)
        if ratios.size == 0:
            continue
        draws = [np.median(pooled_ratios(sittings, arm, args.reference, rng)) for _ in range(args.draws)]
        low, high = np.percentile(draws, [2.5, 97.5], method="nearest")
        print(f"  {arm:24s} {ratios.size:2d} runs  {np.median(ratios):5.2f}x [{low:.2f}, {high:.2f}]  "
              f"per run {' '.join(f'{r:.2f}' for r in ratios)}")


if __name__ == "__main__":
    main()
