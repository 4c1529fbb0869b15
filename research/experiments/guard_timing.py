"""When `auto`'s learning guard let each run grow, beside a landmark of learning, for a study's `auto` runs.

    python research/experiments/guard_timing.py STUDY/GAME/two-core

Per run: the agent step of its first growth (`auto` grows only once the run counts as learning), the step at
which the policy's entropy first fell below 0.9 (from Breakout's 1.10 at uniform play), and the run's learning
line ("mean return X over the first window's Y"), read from Ray's worker logs under /tmp/ray while they last.
"""

from __future__ import annotations

import argparse
import glob
import re
from pathlib import Path

from rlscale.rundir.events import read_scalars

LEARNING = re.compile(r"learning: mean return ([0-9.]+) stands [0-9.]+ standard errors above the first window's ([0-9.]+)")


def worker_logs() -> dict[str, str]:
    """Each run's worker log text from where it names the run, by that run directory name."""
    out: dict[str, str] = {}
    for f in glob.glob("/tmp/ray/session_*/logs/worker-*.out"):
        text = Path(f).read_text(errors="replace")
        for name in set(re.findall(r"(auto-b\d+-lr[0-9.]+-s\d+)", text)):
            out.setdefault(name, text[text.index(name):])  # a worker that ran two runs: this one's lines on
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", type=Path, help="a study's folder of runs (auto-* are read)")
    p.add_argument("--entropy", type=float, default=0.9, help="the entropy landmark (default: %(default)s)")
    args = p.parse_args()
    logs = worker_logs()
    for run in sorted(args.root.glob("auto-*")):
        scalars = read_scalars(run)
        env_steps, envs = scalars["batch/n_envs"]
        ent_steps, entropy = scalars["train/entropy"]
        grew = next((int(env_steps[i]) for i in range(1, len(envs)) if envs[i] > envs[i - 1]), None)
        fell = next((int(ent_steps[i]) for i in range(len(entropy)) if entropy[i] < args.entropy), None)
        line = LEARNING.search(logs.get(run.name, ""))
        said = f"{line.group(1)} over {line.group(2)}" if line else "-"
        print(f"{run.name:26s} start {int(envs[0]):3d} envs  first growth at {grew!s:>8}  "
              f"entropy < {args.entropy:g} at {fell!s:>8}  learning line: {said}")


if __name__ == "__main__":
    main()
