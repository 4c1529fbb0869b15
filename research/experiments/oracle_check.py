"""Check the oracle's one approximation with real runs that follow its schedule, stage by stage.

``rlscale oracle`` costs a schedule as the sum of each stage's median over the sweep's runs of that cell,
taking a stage's cost at a cell not to depend on the cells before it. Here each seed runs the schedule:
stage 1 at its cell until its goal (``--stop-return``), then each next stage branches from the last
one's checkpoint (``--init-from``: network and optimizer carried) at its own cell until its goal. Every
stage runs as a sweep trial does (serial pool, one learner thread, fp32, one vector env), two seeds at a
time as the sweep ran them. A branch starts its 20-episode goal window afresh, so each later stage pays up
to 20 episodes the sweep's runs did not: a small bias against the schedule, said with the result.

    python research/experiments/oracle_check.py cartpole --stages 80:7e-4:400 160:7e-4:475 \
        --seeds 10 11 12 13 14 --total-frames 500000 --out runs/oracle-check
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rlscale.config import build_config


def stage_command(game: str, batch: int, lr: float, goal: float, seed: int, run_dir: Path,
                  trunk: Path | None, per_env: float, noise_groups: int, total_frames: int) -> list[str]:
    n_envs = round(batch / per_env)
    command = [sys.executable, "-m", "rlscale.train", game, "--n-envs", str(n_envs), "--lr", str(lr),
               "--seed", str(seed), "--stop-return", str(goal), "--run-dir", str(run_dir), "--pool", "serial",
               "--learner-threads", "1", "--learner-precision", "fp32", "--actor-precision", "fp32",
               "--min-envs", str(n_envs), "--max-envs", str(n_envs), "--set", f"vector_size={n_envs}",
               "--set", f"noise_groups={min(noise_groups, n_envs)}", "--log-interval", "60",
               "--goals", str(goal), "--total-frames", str(total_frames)]
    return command + (["--init-from", str(trunk)] if trunk is not None else [])


def run_seed(args: argparse.Namespace, seed: int) -> dict:
    base = build_config(args.game, None, {})
    out = args.out / f"s{seed}"
    trunk: Path | None = None
    stages = []
    for k, (batch, lr, goal) in enumerate(args.stages):
        run_dir = out / f"stage{k + 1}-b{batch}-to{goal:g}"
        if not (run_dir / "summary.json").is_file() or not json.loads((run_dir / "summary.json").read_text())["finished"]:
            command = stage_command(args.game, batch, lr, goal, seed, run_dir, trunk, base.observations_per_env,
                                    base.noise.noise_groups, args.total_frames)
            with open(out.with_suffix(".log"), "a") as log:
                subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=True)
        summary = json.loads((run_dir / "summary.json").read_text())
        stages.append({"batch": batch, "goal": goal, "wall_seconds": summary["wall_seconds"],
                       "updates": summary["updates"], "agent_steps": summary["agent_steps"],
                       "reached": f"{goal:g}" in summary["goals"]})  # the goal rule's crossing, as the sweep's
        trunk = run_dir
    return {"seed": seed, "stages": stages, "wall_seconds": sum(s["wall_seconds"] for s in stages)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("game")
    p.add_argument("--stages", nargs="+", required=True, help="BATCH:LR:GOAL for each stage, in order")
    p.add_argument("--seeds", type=int, nargs="+", required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--total-frames", type=int, required=True, help="each stage's budget (the sweep's)")
    args = p.parse_args()
    args.stages = [(int(b), float(lr), float(g)) for b, lr, g in (s.split(":") for s in args.stages)]
    args.out.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        (args.out / f"s{seed}").mkdir(exist_ok=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda s: run_seed(args, s), args.seeds))
    for r in results:
        parts = ", ".join(f"b{s['batch']} to {s['goal']:g}: {s['wall_seconds']:.1f} s, {s['updates']} updates"
                          + ("" if s["reached"] else " (not reached)") for s in r["stages"])
        print(f"seed {r['seed']}: {r['wall_seconds'] / 60:.3f} min ({parts})")
    walls = [r["wall_seconds"] for r in results]
    print(f"median over {len(walls)} seeds: {statistics.median(walls) / 60:.3f} min")
    (args.out / "oracle-check.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
