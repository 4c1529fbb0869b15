"""Issue 80's study: `auto` against staying at a wrong start, on two cores and on the cluster clock.

For one game, seed by seed (so that the fixed and adaptive runs of a seed share the machine's load):
a fixed-batch sweep over ``--fixed`` batches and ``auto`` from each of ``--starts`` (two-core arm), then
``auto`` from the same starts with ``--cluster-nodes`` (the cluster arm, scored on the clock only).
Every run is a Ray Tune trial of ``rlscale sweep``, which skips finished trials: the same command
resumes. When every seed is done it writes the reports beside the runs:

    OUT/GAME/study.txt    rlscale study of the two-core arm, then of both arms on the cluster clock
    OUT/GAME/oracle.txt   rlscale oracle of the fixed runs (two-core, cluster time, node-hours)

    python research/experiments/auto_study.py cartpole --out runs/auto-study --best 80 \
        --fixed 10 20 40 80 160 320 640 --seeds 10 11 12 13 14 --set min_envs=2 --set max_envs=256 \
        --set noise_groups=2
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

PYTHON = sys.executable


def sweep(game: str, out: Path, seed: int, args: argparse.Namespace) -> None:
    common = ["--seeds", str(seed), "--lrs", *map(str, args.lrs), "--max-concurrent", str(args.jobs),
              "--total-frames", str(args.total_frames), *[a for s in args.set for a in ("--set", s)]]
    if args.goals:
        common += ["--goals", *map(str, args.goals)]
    starts = [str(round(f * args.best)) for f in args.starts]
    runs = [
        ["--batch-sizes", *map(str, args.fixed), "--auto-from", *starts, "--sweep-dir", str(out / "two-core")],
        ["--auto-from", *starts, "--cluster-nodes", str(args.nodes), "--sweep-dir", str(out / "cluster")],
    ]
    for extra in runs:
        command = [PYTHON, "-m", "rlscale.sweep", game, *extra, *common]
        print(f"[{time.strftime('%H:%M:%S')}] seed {seed}: {' '.join(command[1:])}", flush=True)
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def report(out: Path, args: argparse.Namespace) -> None:
    goals = ["--goals", *map(str, args.goals)] if args.goals else []
    for name, command in (
        ("study.txt", [["rlscale.reports.study", str(out / "two-core"), *goals],
                       ["rlscale.reports.study", str(out / "two-core"), str(out / "cluster"), *goals,
                        "--cluster-nodes", str(args.nodes), "--out", str(out / "study-cluster.png")]]),
        ("oracle.txt", [["rlscale.reports.oracle", str(out / "two-core"), *goals, "--round-trip", "0.03",
                         "--nodes", str(args.nodes), "--node-batch", str(args.node_batch)]]),
    ):
        with open(out / name, "w") as f:
            for part in command:
                f.write(f"$ python -m {' '.join(part)}\n")
                f.flush()
                subprocess.run([PYTHON, "-m", *part], stdout=f, stderr=subprocess.STDOUT, check=False)
        print(f"wrote {out / name}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("game")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--best", type=float, required=True, help="the game's best fixed optimizer batch (1x)")
    p.add_argument("--starts", type=float, nargs="+", default=[0.125, 1.0, 8.0])
    p.add_argument("--fixed", type=int, nargs="+", required=True)
    p.add_argument("--seeds", type=int, nargs="+", required=True)
    p.add_argument("--lrs", type=float, nargs="+", required=True)
    p.add_argument("--goals", type=float, nargs="*")
    p.add_argument("--total-frames", type=int, required=True)
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--node-batch", type=float, required=True, help="observations one node carries (oracle)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--set", action="append", default=[])
    args = p.parse_args()
    out = args.out / args.game
    out.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        sweep(args.game, out, seed, args)
    report(out, args)


if __name__ == "__main__":
    main()
