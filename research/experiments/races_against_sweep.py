"""Issue 61: a measurement's races against the fork sweep's runs, batch by batch (2026-11-29).

    python research/experiments/races_against_sweep.py [research/data/reach-at-forks-2026-11-29.txt]

Parses the data file written from reach_at_forks.py's output (the sweep's runs to the first goal, and the
one-race-a-batch measurements' examples to it, printed in batch order 40-1,280) and prints, per fork and
batch, the geometric mean of the examples to the goal of the sweep's seeds and of the races, the ratio and
Welch's t on the logs: whether the races drift from the sweep at some batches (a bias that moves B_crit)
or only scatter.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
from scipy import stats


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "research/data/reach-at-forks-2026-11-29.txt")
    text = path.read_text()
    forks = re.findall(r"## (\w+-s\d) sweep \(pareto.csv\)\n.*?\n(.*?)\n(?=## )", text, re.S)
    races_section = text.split("## measurements (one race a batch)")[1].split("## refitted")[0]
    races = re.findall(r"to (\d+) in ([\d,/]+) examples", races_section)
    matched: set[str] = set()  # a goal's races belong to the first fork measured to it (bo-s1 was not measured)
    for fork, block in forks:
        first_goal = re.search(r"^(\d+),", block, re.M).group(1)
        sweep: dict[int, list[float]] = {}
        for batch, goals in re.findall(r"^b(\d+)-s\d+ (\{.*\})$", block, re.M):
            hit = eval(goals).get(first_goal)  # noqa: S307 - our own data file's dict literals
            if hit:
                sweep.setdefault(int(batch), []).append(float(hit))
        mine = [[float(x.replace(",", "")) for x in lists.split("/")] for goal, lists in races if goal == first_goal]
        if not mine or first_goal in matched:
            continue
        matched.add(first_goal)
        sds = {"sweep": [], "races": []}
        print(f"{fork}, goal {first_goal}: {len(mine)} measurements of one race a batch; {len(next(iter(sweep.values())))} sweep seeds")
        print(f"  {'batch':>6} {'sweep':>9} {'races':>9} {'races/sweep':>11} {'t':>6} {'p':>6}")
        for i, batch in enumerate(sorted(sweep)):
            a, b = np.log(sweep[batch]), np.log([m[i] for m in mine])
            t, p = stats.ttest_ind(b, a, equal_var=False)
            print(f"  {batch:6d} {np.exp(a.mean()):9,.0f} {np.exp(b.mean()):9,.0f} {np.exp(b.mean() - a.mean()):11.2f} "
                  f"{t:6.2f} {p:6.3f}")
            sds["sweep"].append(a.std(ddof=1))
            sds["races"].append(b.std(ddof=1))
        print(f"  the spread between seeds (sd of log examples, mean over batches): sweep {np.mean(sds['sweep']):.2f}, "
              f"races {np.mean(sds['races']):.2f}")


if __name__ == "__main__":
    main()
