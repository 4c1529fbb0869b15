"""Issue 61: `--batch measured --progress reach` at MinAtar fork points, against a fork sweep run on the
very trunk it branches (research/notebook/results.md, "Branches that race to the next goal").

    python research/experiments/reach_at_forks.py --out DIR [--forks bo-s0 bo-s1 si-s0 si-s1]
        [--seeds 0 1 2 3 4] [--sweep-seeds 0 1 2] [--jobs 2] [--branch-runs 1]

Resumable (a finished run is skipped, an interrupted one resumed), two runs at a time by default (each is serial, one
thread). For each fork: the trunk (made here, at this commit: 32 envs, the game's trunk rate, until
the fork's score), the fork sweep (batches 40-1,280, the power rule's rate from the trunk's at 160,
--sweep-seeds, 3 by default, to the two goals after the fork) and ``rlscale pareto`` over it, then one in-run measurement
per seed from the same checkpoint (branches 0.25-8x of 160, each racing to the first goal). Prints
each reading against the sweep's B_crit and writes DIR/reach-at-forks.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rlscale import tags
from rlscale.rundir.events import read_scalars

SERIAL = ["--serial", "--learner-threads", "1", "--learner-precision", "fp32", "--actor-precision", "fp32",
          "--log-interval", "600", "--vector-size", "8", "--min-envs", "8", "--max-envs", "256"]
# fork -> (preset, trunk seed, trunk lr at 160, the trunk's stop score, the two goals after the fork)
FORKS = {
    "bo-s0": ("minatar-breakout", 0, 2.24e-2, 8, (10, 11)),
    "bo-s1": ("minatar-breakout", 1, 2.24e-2, 8, (10, 11)),
    "si-s0": ("minatar-spaceinvaders", 0, 1.12e-2, 30, (35, 40)),
    "si-s1": ("minatar-spaceinvaders", 1, 1.12e-2, 30, (35, 40)),
}
TRUNK_ENVS = 32  # x 5 steps: 160 observations an update
SWEEP_ENVS = (8, 16, 32, 64, 128, 256)  # batches 40-1,280
MULTIPLIERS = ["0.25", "0.5", "1", "2", "4", "8"]
CAP_UPDATES = 6000  # --branch-window: a branch that has not met the goal after 960,000 examples missed it


def train(run_dir: Path, preset: str, *args: str) -> str:
    summary = run_dir / "summary.json"
    if summary.is_file() and json.loads(summary.read_text()).get("finished"):
        return ""
    cmd = [sys.executable, "-m", "rlscale.train", preset, *SERIAL, *args, "--run-dir", str(run_dir)]
    if (run_dir / "checkpoints").is_dir():  # interrupted: on from its last checkpoint
        cmd = [sys.executable, "-m", "rlscale.train", "--resume", str(run_dir)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        return f"FAILED {run_dir}: {done.stderr[-1500:]}"
    kept = [line for line in done.stdout.splitlines() if line.startswith(("measured at", "done:"))]
    return "\n".join([" ".join(cmd[2:]), *("  " + line for line in kept)])


def run_all(jobs: list[tuple], workers: int) -> None:
    with ThreadPoolExecutor(workers) as pool:
        for text in pool.map(lambda job: train(*job), jobs):
            if text:
                print(text, flush=True)


def sweep_bcrit(sweep: Path, goals: tuple[int, int]) -> dict[str, float]:
    fit = subprocess.run([sys.executable, "-m", "rlscale.pareto", str(sweep), "--goals", *map(str, goals)],
                         capture_output=True, text=True)
    print(fit.stdout[-2500:], fit.stderr[-800:], flush=True)
    table = sweep / "pareto.csv"
    if not table.is_file():
        return {}
    return {row["goal"]: float(row["B_crit"]) for row in csv.DictReader(table.open()) if row.get("B_crit")}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--forks", nargs="*", default=list(FORKS), choices=list(FORKS))
    p.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2, 3, 4])
    p.add_argument("--sweep-seeds", type=int, nargs="*", default=[0, 1, 2], help="the fork sweep's seeds a batch")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--branch-runs", type=int, default=1, help="races of each batch a measurement (--branch-runs)")
    p.add_argument("--branches-at-once", type=int, default=0,
                   help="races at once (--branches-at-once; the same readings, less wall time)")
    args = p.parse_args()
    run_all([(args.out / f / "trunk", FORKS[f][0], "--lr", f"{FORKS[f][2]:g}", "--seed", str(FORKS[f][1]),
              "--n-envs", str(TRUNK_ENVS), "--stop-return", str(FORKS[f][3]), "--total-frames", "20000000",
              "--checkpoint-every", "100000") for f in args.forks], args.jobs)
    missing = [f for f in args.forks if not (args.out / f / "trunk" / "summary.json").is_file()]
    if missing:
        raise SystemExit(f"no trunk for {', '.join(missing)}: see above")
    truth = {}
    for f in args.forks:  # fork by fork, so the first readings come before the last sweep
        preset, _, lr, _, goals = FORKS[f]
        sweep = []
        for n in SWEEP_ENVS:
            rate = lr * math.sqrt(n / TRUNK_ENVS)  # the power rule, as a measurement's branches take it
            for seed in args.sweep_seeds:
                sweep.append((args.out / f / "sweep" / f"b{n * 5}-s{seed}", preset, "--init-from",
                              str(args.out / f / "trunk"), "--n-envs", str(n), "--lr", f"{rate:.3g}", "--seed",
                              str(seed), "--total-frames", "20000000", "--stop-return", str(goals[-1]),
                              "--goals", *map(str, goals)))
        run_all(sweep, args.jobs)
        truth[f] = sweep_bcrit(args.out / f / "sweep", goals)
        runs = f"-runs{args.branch_runs}" if args.branch_runs > 1 else ""
        run_all([(args.out / f / "measured" / f"reach{runs}-s{seed}", preset, "--init-from", str(args.out / f / "trunk"),
                  "--batch", "measured", "--remeasure", "1e9", "--progress", "reach", "--goals", str(goals[0]),
                  "--branches", *MULTIPLIERS, "--branch-window", str(CAP_UPDATES), "--n-envs", str(TRUNK_ENVS),
                  "--lr", f"{lr:g}", "--total-frames", "1", "--seed", str(seed), "--branch-runs", str(args.branch_runs),
                  "--branches-at-once", str(args.branches_at_once))
                 for seed in args.seeds], args.jobs)
    rows = []
    for f in args.forks:
        for run in sorted((args.out / f / "measured").glob("reach*-s*")):
            if not (run / "summary.json").is_file():
                continue
            scalars, summary = read_scalars(run), json.loads((run / "summary.json").read_text())
            value = float(scalars[tags.MEASURED_BATCH][1][-1]) if tags.MEASURED_BATCH in scalars else math.nan
            rows.append({"fork": f, "run": run.name, "reading": value, "agent_steps": summary["agent_steps"],
                         "overhead_examples": summary["measure_examples"],
                         "overhead_seconds": summary["measure_seconds"], "wall_seconds": summary["wall_seconds"]})
    (args.out / "reach-at-forks.json").write_text(json.dumps({"sweep": truth, "readings": rows}, indent=1))
    for f, kind in sorted({(r["fork"], r["run"].rsplit("-s", 1)[0]) for r in rows}):  # races a batch apart
        mine = [r for r in rows if r["fork"] == f and r["run"].rsplit("-s", 1)[0] == kind]
        if not truth.get(f):
            continue
        low, high = min(truth[f].values()), max(truth[f].values())
        within = sum(1 for r in mine if math.isfinite(r["reading"]) and low / 2 <= r["reading"] <= high * 2)
        shown = " ".join(f"{r['reading']:,.0f}" if math.isfinite(r["reading"]) else "-" for r in mine)
        steps = " ".join(f"{r['agent_steps']:,}" for r in mine)
        print(f"{f} {kind}: sweep B_crit {', '.join(f'goal {g}: {b:,.0f}' for g, b in truth[f].items())}; "
              f"readings {shown}; within 2x: {within} of {len(mine)}; agent steps a measurement {steps}")


if __name__ == "__main__":
    main()
