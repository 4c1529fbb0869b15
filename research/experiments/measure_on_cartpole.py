"""Issue 61's positive control: --batch measured's in-run reading against a fork sweep run on the very
trunk it branches, on CartPole where such a sweep takes minutes (research/notebook/results.md,
"The in-run measurement on CartPole, a positive control").

    python research/experiments/measure_on_cartpole.py --out DIR [--seeds 0 1 2 3 4] [--window 32]
        [--progress total|policy|return|reach] [--episodes 16] [--multipliers 0.5 1 2 4 8 16]
        [--trunk-frames 12000] [--goals 100 150] [--branch-runs 1]

With --progress reach each branch races to the last of --goals (the sweep's goal) and --window is its cap
in updates at the trunk's batch (2000 if not given).

Resumable: each finished run is skipped, an interrupted one resumed. Steps: the trunk (tests/test_branch.py's:
12,000 agent steps at 8 envs, lr 1e-3); the fork sweep (4-128 envs, the power rule's rate from the
trunk's, 3 seeds, to return 150) and ``rlscale pareto`` over it; then one measurement per seed from
the same checkpoint (branches 0.5-16x the trunk's 40, window 32 updates). Prints the sweep's B_crit
at each goal and each reading, and writes DIR/readings-<setting>.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import subprocess
import sys
from pathlib import Path

from rlscale import tags
from rlscale.rundir.events import read_scalars

SERIAL = ["--serial", "--learner-threads", "1", "--learner-precision", "fp32", "--actor-precision", "fp32",
          "--log-interval", "600"]
TRUNK_ENVS, TRUNK_LR = 8, 1e-3
SWEEP_ENVS = (4, 8, 16, 32, 64, 128)  # 4 at least: --noise-groups 4
GOALS = ("100", "150")
MULTIPLIERS = ["0.5", "1", "2", "4", "8", "16"]


def train(run_dir: Path, *args: str) -> None:
    summary = run_dir / "summary.json"
    if summary.is_file() and json.loads(summary.read_text()).get("finished"):
        return
    cmd = [sys.executable, "-m", "rlscale.train", "cartpole", *SERIAL, *args, "--run-dir", str(run_dir)]
    if (run_dir / "checkpoints").is_dir():  # interrupted: on from its last checkpoint
        cmd = [sys.executable, "-m", "rlscale.train", "--resume", str(run_dir)]
    print(" ".join(cmd[2:]), flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    for line in done.stdout.splitlines():
        if line.startswith(("measured at", "done:")):
            print("  " + line, flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2, 3, 4])
    p.add_argument("--window", type=float, default=None, help="--branch-window (32; 2000 with --progress reach)")
    p.add_argument("--progress", default="total", choices=("total", "policy", "return", "reach"))
    p.add_argument("--episodes", type=int, default=16, help="--progress-episodes, with --progress return")
    p.add_argument("--multipliers", nargs="*", default=MULTIPLIERS, help="--branches")
    p.add_argument("--branch-runs", default="1", help="--branch-runs, with --progress reach")
    p.add_argument("--trunk-frames", default="12000", help="the trunk's agent steps (a later fork point: more)")
    p.add_argument("--goals", nargs=2, default=list(GOALS), help="the sweep's two goals after the fork")
    args = p.parse_args()
    by_return, by_reach = args.progress == "return", args.progress == "reach"
    if args.window is None:
        args.window = 2000.0 if by_reach else 32.0
    name = f"w{args.window:g}" + (f"-return{args.episodes}" if by_return else "")
    if by_reach:
        name = f"reach{args.goals[-1]}-x{args.multipliers[0]}-{args.multipliers[-1]}"
        name += f"-runs{args.branch_runs}" if args.branch_runs != "1" else ""
    if args.multipliers != MULTIPLIERS and not by_reach:
        name += f"-x{args.multipliers[0]}-{args.multipliers[-1]}"
    trunk = args.out / "trunk"
    train(trunk, "--total-frames", args.trunk_frames, "--lr", f"{TRUNK_LR:g}", "--n-envs", str(TRUNK_ENVS))
    for n in SWEEP_ENVS:
        lr = TRUNK_LR * math.sqrt(n / TRUNK_ENVS)  # the power rule, as the branches of a measurement take it
        for seed in (0, 1, 2):
            train(args.out / "sweep" / f"b{n * 5}-s{seed}", "--init-from", str(trunk), "--n-envs", str(n),
                  "--lr", f"{lr:.3g}", "--seed", str(seed), "--total-frames", "300000", "--stop-return", args.goals[-1],
                  "--goals", *args.goals)
    fit = subprocess.run([sys.executable, "-m", "rlscale.pareto", str(args.out / "sweep"), "--goals", *args.goals],
                         capture_output=True, text=True)
    print(fit.stdout[-3000:], fit.stderr[-1000:], flush=True)
    sweep = {row["goal"]: float(row["B_crit"]) for row in csv.DictReader((args.out / "sweep" / "pareto.csv").open())}
    for seed in args.seeds:
        train(args.out / "measured" / f"{name}-s{seed}", "--init-from", str(trunk), "--batch", "measured",
              "--remeasure", "1e9", "--branches", *args.multipliers, "--branch-window", f"{args.window:g}",
              "--n-envs", str(TRUNK_ENVS), "--min-envs", "4", "--max-envs", "128", "--lr", f"{TRUNK_LR:g}",
              "--total-frames", "1", "--seed", str(seed), "--progress", args.progress,
              "--progress-episodes", str(args.episodes), *(["--goals", args.goals[-1], "--branch-runs", args.branch_runs] if by_reach else []))
    readings = []
    for run in sorted((args.out / "measured").glob(f"{name}-s*")):
        scalars = read_scalars(run)
        last = {name: float(scalars[tag][1][-1]) if tag in scalars else math.nan
                for name, tag in (("total", tags.MEASURED_BATCH_BY.format(progress="total")),
                                  ("policy", tags.MEASURED_BATCH_BY.format(progress="policy")),
                                  ("return", tags.MEASURED_BATCH_BY.format(progress="return")),
                                  ("reach", tags.MEASURED_BATCH_BY.format(progress="reach")),
                                  ("merrill", tags.MEASURED_EFFICIENT), ("seconds", tags.MEASURE_SECONDS))}
        summary = json.loads((run / "summary.json").read_text())
        readings.append({"run": run.name, **last, "agent_steps": summary["agent_steps"],
                         "measure_examples": summary["measure_examples"]})
    (args.out / f"readings-{name}.json").write_text(json.dumps({"sweep": sweep, "readings": readings}, indent=1))
    print(f"the fork sweep's B_crit: {', '.join(f'goal {g}: {b:,.0f}' for g, b in sweep.items())}")
    low, high = min(sweep.values()), max(sweep.values())
    for measure in ("total", "policy", "return", "reach", "merrill"):
        values = [r[measure] for r in readings]
        within = sum(1 for v in values if math.isfinite(v) and low / 2 <= v <= high * 2)
        shown = " ".join(f"{v:,.0f}" if math.isfinite(v) else "-" for v in values)
        print(f"by {measure:<8} {shown:<50} within 2x of the sweep: {within} of {len(values)}")
    steps = " ".join(f"{r['agent_steps']:,}" for r in readings)
    print(f"agent steps a measurement (every branch, the held-out rows and episodes played): {steps}")


if __name__ == "__main__":
    main()
