"""Each ``auto`` run's shrinks after an agent step, beside its time to a goal: from a data folder's
envs-paths.txt (``run_tables.py paths``) and runs.txt (``run_tables.py runs``), sorted by that time (a run that
missed the goal last, marked so). Runs are matched by name, so a folder's files must hold one arm's runs.

    python research/experiments/shrinks_after.py DATA_FOLDER --goal 14 [--after-k 150]
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", type=Path)
    p.add_argument("--goal", required=True, help="the goal whose time sorts the runs, as runs.txt writes it")
    p.add_argument("--after-k", type=float, default=150.0, help="thousands of agent steps")
    args = p.parse_args()
    seconds = {}
    for line in (args.folder / "runs.txt").read_text().splitlines():
        if line.startswith("two-core") and "/auto-" in line.split()[0]:
            name, _, _, _, goals = line.split(maxsplit=4)
            reached = ast.literal_eval(goals).get(args.goal)
            seconds[name.split("/")[1]] = reached[1] if reached else float("inf")
    rows = []
    for line in (args.folder / "envs-paths.txt").read_text().splitlines():
        if line.startswith("#"):
            continue
        name, *points = line.split()
        path = [(float(pt.split("k:")[0]), int(pt.split(":")[1].split("@")[0])) for pt in points]
        # the count in force at --after-k, and every later one
        later = [envs for k, envs in path if k >= args.after_k] + [envs for k, envs in path if k < args.after_k][-1:]
        shrinks = sum(1 for (_, e0), (k1, e1) in zip(path[:-1], path[1:], strict=True) if k1 >= args.after_k and e1 < e0)
        fewest = min(later)
        rows.append((seconds.get(name, float("nan")), name, shrinks, fewest))
    print(f"# seconds to goal {args.goal}; shrinks after {args.after_k:g}k agent steps; fewest envs from there on")
    for secs, name, shrinks, fewest in sorted(rows):
        time = "missed" if secs == float("inf") else f"{secs:6.1f} s"
        print(f"{time:>8}  {name:26s}  shrinks {shrinks}  fewest envs {fewest}")


if __name__ == "__main__":
    main()
