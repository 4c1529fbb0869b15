"""Issue 61, study goal 3: the compute to CartPole's 475 of `--batch measured` (from 200, races one after
the other) against Ray Tune PBT over batch and rate (4 members, `rlscale pbt`) and the best fixed batch
(200 at 3e-3), on the controller study's held-out seeds 35-39 (research/notebook/results.md).

    python research/experiments/pbt_against_controller.py --out DIR [--seeds 35 36 37 38 39]

Resumable (a finished arm is skipped), one arm at a time, the arms interleaved seed by seed. Compute is
counted as agent steps (every member's, every race's) and CPU seconds: the train runs' from
getrusage(RUSAGE_CHILDREN) around the command, PBT's the segments' own process time (Ray Tune's overhead
left out, in PBT's favour). Prints a table and writes DIR/pbt-against-controller.json.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from measured_study import ARMS, COMMON

PBT = ["--members", "4", "--interval", "20000", "--batch-sizes", "50", "100", "200", "400", "800",
       "--lr-range", "7.5e-4", "1.2e-2", "--stop-return", "475", "--total-frames", "3000000"]


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_arm(out: Path, arm: str, seed: int) -> dict:
    folder = out / arm / f"s{seed}"
    record = folder / "arm.json"
    if record.is_file():
        return json.loads(record.read_text())
    if arm == "pbt":
        cmd = [sys.executable, "-m", "rlscale.pbt", "cartpole", *PBT, "--seed", str(seed), "--pbt-dir", str(folder)]
    else:
        cmd = [sys.executable, "-m", "rlscale.train", "cartpole", *COMMON, *ARMS[arm], "--seed", str(seed),
               "--run-dir", str(folder)]
    cpu, wall = child_cpu(), time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    cpu, wall = child_cpu() - cpu, time.perf_counter() - wall
    if done.returncode:
        raise SystemExit(f"{arm} seed {seed} failed ({done.returncode}): {done.stderr[-2000:]}")
    if arm == "pbt":
        report = json.loads((folder / "pbt.json").read_text())
        steps, reached = report["cost"]["agent_steps"], report["reached"]
        cpu_counted = report["cost"]["cpu_seconds"]
        lines = [done.stdout.strip().splitlines()[-1]]
    else:
        summary = json.loads((folder / "summary.json").read_text())
        reached = "475" in summary["goals"]
        steps = summary["goals"]["475"]["agent_steps"] if reached else summary["agent_steps"]
        cpu_counted = cpu
        lines = [line for line in done.stdout.splitlines() if line.startswith(("goal 475", "done:"))]
    result = {"arm": arm, "seed": seed, "reached": reached, "agent_steps": steps, "cpu_seconds": round(cpu_counted, 1),
              "child_cpu_seconds": round(cpu, 1), "wall_seconds": round(wall, 1), "lines": lines}
    record.write_text(json.dumps(result, indent=1))
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seeds", type=int, nargs="*", default=[35, 36, 37, 38, 39])
    p.add_argument("--arms", nargs="*", default=["fixed-200", "measured-from-200", "pbt"])
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for seed in args.seeds:
        for arm in args.arms:
            r = run_arm(args.out.resolve(), arm, seed)
            results.append(r)
            print(f"{arm} seed {seed}: {'reached' if r['reached'] else 'NOT reached'} 475 after {r['agent_steps']:,} "
                  f"agent steps, {r['cpu_seconds']:.0f} CPU s ({r['child_cpu_seconds']:.0f} s in child processes), "
                  f"{r['wall_seconds']:.0f} s wall", flush=True)
            for line in r["lines"]:
                print("   ", line, flush=True)
    (args.out / "pbt-against-controller.json").write_text(json.dumps(results, indent=1))
    print("\narm                  median agent steps   median CPU s   median wall s   reached")
    for arm in args.arms:
        mine = [r for r in results if r["arm"] == arm]
        print(f"{arm:<20} {statistics.median(r['agent_steps'] for r in mine):>18,.0f} "
              f"{statistics.median(r['cpu_seconds'] for r in mine):>14.0f} "
              f"{statistics.median(r['wall_seconds'] for r in mine):>15.0f}   "
              f"{sum(r['reached'] for r in mine)} of {len(mine)}")
    for arm in args.arms:
        if arm == "pbt":
            continue
        pairs = [(r, q) for r in results if r["arm"] == arm for q in results if q["arm"] == "pbt" and q["seed"] == r["seed"]]
        print(f"{arm} / pbt, seed by seed: agent steps "
              + " ".join(f"{r['agent_steps'] / q['agent_steps']:.2f}" for r, q in pairs)
              + "; CPU s " + " ".join(f"{r['cpu_seconds'] / q['cpu_seconds']:.2f}" for r, q in pairs))


if __name__ == "__main__":
    main()
