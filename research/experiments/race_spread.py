"""Issue 61: does a measurement's race scatter more than a run from the same fork? Eight of each at one batch
(2026-11-29).

    python research/experiments/race_spread.py --out DIR [--fork si-s0] [--envs 32] [--seeds 10 ... 17] [--jobs 2]

At a fork of reach_at_forks.py (its trunk in DIR/<fork>/trunk, e.g. /work/forks), at one batch (``--envs``
x 5 steps, the power rule's rate): (a) runs from the trunk in a process each (``--init-from``, as the fork
sweep's), to the fork's first goal; (b) measurements of two branches (1x and 2x) racing to that goal, whose
1x race is read. Prints the examples to the goal of each and the sd of their logs, and Levene's test of
equal spread. Resumable: finished runs are skipped.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from reach_at_forks import CAP_UPDATES, FORKS, TRUNK_ENVS, train
from scipy import stats


def run_and_keep(job: tuple) -> str:
    """reach_at_forks.train, its kept console lines (the measurement's) written beside the run."""
    text = train(*job)
    if text and not text.startswith("FAILED"):
        (job[0] / "console.txt").write_text(text)
    return text


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--fork", default="si-s0", choices=sorted(FORKS))
    p.add_argument("--envs", type=int, default=TRUNK_ENVS)
    p.add_argument("--seeds", type=int, nargs="+", default=list(range(10, 18)))
    p.add_argument("--jobs", type=int, default=2)
    args = p.parse_args()
    preset, _, lr, _, goals = FORKS[args.fork]
    goal = goals[0]
    trunk = args.out / args.fork / "trunk"
    rate = f"{lr * math.sqrt(args.envs / TRUNK_ENVS):.3g}"
    here = args.out / args.fork / f"spread-b{args.envs * 5}"
    runs = [(here / f"run-s{s}", preset, "--init-from", str(trunk), "--n-envs", str(args.envs), "--lr", rate,
             "--seed", str(s), "--total-frames", "20000000", "--stop-return", str(goal), "--goals", str(goal))
            for s in args.seeds]
    races = [(here / f"race-s{s}", preset, "--init-from", str(trunk), "--batch", "measured", "--remeasure", "1e9",
              "--progress", "reach", "--goals", str(goal), "--branches", "1", "2", "--branch-window",
              str(CAP_UPDATES), "--n-envs", str(args.envs), "--lr", rate, "--total-frames", "1", "--seed", str(s))
             for s in args.seeds]
    jobs = [job for pair in zip(runs, races, strict=True) for job in pair]  # alternated: load falls on both alike
    with ThreadPoolExecutor(args.jobs) as pool:
        for text in pool.map(run_and_keep, jobs):
            if text:
                print(text, flush=True)
    by_run = []
    for job in runs:
        hit = json.loads((job[0] / "summary.json").read_text())["goals"].get(str(goal))
        if hit:
            by_run.append(hit["examples"])
    by_race = []
    for job in races:
        console = job[0] / "console.txt"  # the measured line: the 1x race's examples come first
        text = console.read_text() if console.is_file() else ""
        found = re.search(rf"to {goal} in ([\d,]+)/", text)
        if found:
            by_race.append(float(found.group(1).replace(",", "")))
    for name, xs in (("runs from the trunk", by_run), ("races (1x branch)", by_race)):
        print(f"{name:20s} n={len(xs)}  examples to {goal}: {', '.join(f'{x:,.0f}' for x in xs)}")
        if len(xs) > 1:
            print(f"{'':20s} geometric mean {math.exp(np.mean(np.log(xs))):,.0f}, sd of logs {np.std(np.log(xs), ddof=1):.2f}")
    if len(by_run) > 2 and len(by_race) > 2:
        test = stats.levene(np.log(by_run), np.log(by_race), center="median")
        ratio = np.std(np.log(by_race), ddof=1) / np.std(np.log(by_run), ddof=1)
        print(f"sd ratio races/runs {ratio:.2f}; Brown-Forsythe p {test.pvalue:.3f}")


if __name__ == "__main__":
    main()
