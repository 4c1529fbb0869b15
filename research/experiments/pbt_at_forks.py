"""Issue 61: Population Based Training (``rlscale pbt``, 4 members over batch and rate) from the MinAtar fork
points to the fork sweep's top goal, against the sweep's fixed batches and the in-run measurement's cost
(research/notebook/results.md).

    python research/experiments/pbt_at_forks.py --forks DIR [--which si-s0 bo-s0] [--seeds 0 1 2]

DIR holds reach_at_forks.py's forks (trunk, sweep, measured). Resumable: a population with a pbt.json is
skipped (one that was interrupted is started again in a new directory: PBT does not resume). Prints, per
fork, each population's agent steps to the goal beside the sweep's median run at each batch and the
four-race measurements' agent steps, and writes DIR/pbt-at-forks.json.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

# fork -> (preset, the trunk's rate at 160, the sweep's top goal)
FORKS = {"si-s0": ("minatar-spaceinvaders", 1.12e-2, 40), "si-s1": ("minatar-spaceinvaders", 1.12e-2, 40),
         "bo-s0": ("minatar-breakout", 2.24e-2, 11), "bo-s1": ("minatar-breakout", 2.24e-2, 11)}
BATCHES = ["40", "80", "160", "320", "640", "1280"]  # the sweep's
# Frames (= agent steps on MinAtar) a segment: about the best fixed run from the fork. Every segment starts
# its environments afresh and a goal counts over 20 whole episodes: at 25,000 (tried first, 2026-11-29)
# a SpaceInvaders segment ended ~55 episodes, the first ~14,000 steps in, so its window held the short
# ones and no member met 40 in 928,000 agent steps of population.
INTERVAL = 100_000


def population(forks: Path, fork: str, seed: int) -> dict:
    preset, lr, goal = FORKS[fork]
    folder = forks / fork / "pbt" / f"s{seed}"
    if (folder / "pbt.json").is_file():
        return json.loads((folder / "pbt.json").read_text())
    if folder.exists():  # interrupted: a population does not resume
        shutil.rmtree(folder)
    cmd = [sys.executable, "-m", "rlscale.pbt", preset, "--init-from", str(forks / fork / "trunk"), "--members", "4",
           "--interval", str(INTERVAL), "--batch-sizes", *BATCHES, "--lr-range", f"{lr / 4:g}", f"{lr * 4:g}",
           "--stop-return", str(goal), "--total-frames", "3000000", "--seed", str(seed), "--pbt-dir", str(folder)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    print(" ".join(cmd[2:]), "\n ", done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-1500:],
          flush=True)
    if done.returncode:
        raise SystemExit(f"{fork} seed {seed}: exit {done.returncode}: {done.stderr[-1500:]}")
    return json.loads((folder / "pbt.json").read_text())


def sweep_medians(forks: Path, fork: str, goal: int) -> dict[int, float]:
    steps: dict[int, list[int]] = {}
    for path in (forks / fork / "sweep").glob("b*-s*/summary.json"):
        reached = json.loads(path.read_text())["goals"].get(str(goal))
        if reached:
            steps.setdefault(int(re.match(r"b(\d+)-s", path.parent.name).group(1)), []).append(reached["agent_steps"])
    return {b: statistics.median(v) for b, v in sorted(steps.items())}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--forks", type=Path, required=True)
    p.add_argument("--which", nargs="*", default=["si-s0", "bo-s0"], choices=list(FORKS))
    p.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    args = p.parse_args()
    report = {}
    for fork in args.which:
        goal = FORKS[fork][2]
        runs = [population(args.forks, fork, seed) for seed in args.seeds]
        measured = [json.loads(path.read_text())["agent_steps"]
                    for path in sorted((args.forks / fork / "measured").glob("reach-runs4-s*/summary.json"))]
        medians = sweep_medians(args.forks, fork, goal)
        report[fork] = {"goal": goal, "pbt": [r["cost"] | {"reached": r["reached"], "wall_seconds": r["wall_seconds"],
                                                           "winner": r["winner"]} for r in runs],
                        "sweep_median_steps": medians, "four_race_measurements": measured}
        best = min(medians.values())
        print(f"{fork} to {goal}: the sweep's median run a batch "
              + ", ".join(f"{b}: {s:,.0f}" for b, s in medians.items()) + f" (best {best:,.0f})")
        for seed, r in zip(args.seeds, runs, strict=True):
            w = r["winner"]
            print(f"  PBT seed {seed}: {'reached' if r['reached'] else 'NOT reached'}; the population ran "
                  f"{r['cost']['agent_steps']:,} agent steps (at most {r['cost']['agent_steps_at_most']:,}), "
                  f"{r['cost']['agent_steps'] / best:.1f}x the best batch's median run, {r['cost']['cpu_seconds']:.0f} "
                  f"CPU s, {r['wall_seconds']:.0f} s"
                  + (f"; winner batch {w['batch_size']}, lr {w['lr']:.3g}, {w['lineage_steps']:,} steps of its lineage"
                     if w else ""))
        if measured:
            print(f"  four-race measurements (to the first goal only): {', '.join(f'{m:,}' for m in measured)} agent steps")
    (args.forks / "pbt-at-forks.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
