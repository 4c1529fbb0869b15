"""Each ``auto`` run's shrinks after an agent step, beside its time to the top goal: from a data folder's
envs-paths.txt (``run_tables.py paths``) and runs.txt (``run_tables.py runs``), sorted by that time.

    python research/experiments/shrinks_after.py DATA_FOLDER [--after-k 150]
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", type=Path)
    p.add_argument("--after-k", type=float, default=150.0, help="thousands of agent steps")
    args = p.parse_args()
    seconds = {}
    for line in (args.folder / "runs.txt").read_text().splitlines():
        if line.startswith("two-core/auto"):
            name, _, _, wall, goals = line.split(maxsplit=4)
            top = ast.literal_eval(goals)
            seconds[name.split("/")[1]] = top[max(top, key=float)][1] if top else float(wall)
    rows = []
    for line in (args.folder / "envs-paths.txt").read_text().splitlines():
        if line.startswith("#"):
            continue
        name, *points = line.split()
        path = [(float(pt.split("k:")[0]), int(pt.split(":")[1].split("@")[0])) for pt in points]
        later = [(k, envs) for k, envs in path if k >= args.after_k]
        shrinks = sum(1 for (_, e0), (k1, e1) in zip(path[:-1], path[1:], strict=True) if k1 >= args.after_k and e1 < e0)
        fewest = min((envs for _, envs in later), default=path[-1][1])
        rows.append((seconds.get(name, float("nan")), name, shrinks, fewest))
    print(f"# shrinks after {args.after_k:g}k agent steps; fewest envs there (or the last count before)")
    for secs, name, shrinks, fewest in sorted(rows):
        print(f"{secs:6.1f} s  {name:26s}  shrinks {shrinks}  fewest envs {fewest}")


if __name__ == "__main__":
    main()
