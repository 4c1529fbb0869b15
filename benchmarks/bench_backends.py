"""PPO on Pong through both backends, side by side: agent steps per second of training.

    python benchmarks/bench_backends.py [--frames 60000] [--env pong]

Runs ``python -m rlscale.train ENV --agent ppo`` with the native engine and
with ``--backend rllib`` (needs rlscale[rllib]), same settings (the PPO preset:
8 envs x 128 steps, 4 epochs x 4 minibatches, noise scale on, 2 Ray actors /
env runners), one after the other, and prints agent steps per second over the
training time each run reports (start-up excluded) and the ratio. Each run is
a real training run into a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def train(env: str, frames: int, backend: str, run_dir: Path) -> dict:
    cmd = [sys.executable, "-m", "rlscale.train", env, "--agent", "ppo", "--backend", backend,
           "--total-frames", str(frames), "--run-dir", str(run_dir), "--log-interval", "30"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{backend} run failed:\n{result.stderr[-2000:]}")
    return json.loads((run_dir / "summary.json").read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frames", type=int, default=60_000, help="budget of each run in frames")
    p.add_argument("--env", default="pong")
    args = p.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("native", "rllib"):
            summary = train(args.env, args.frames, backend, Path(tmp) / backend)
            rows[backend] = summary["agent_steps"] / summary["wall_seconds"]
            print(f"{backend:>7s}: {summary['agent_steps']:,} agent steps in {summary['wall_seconds']:.1f} s "
                  f"= {rows[backend]:,.0f} agent steps/s", flush=True)
    print(f"native / rllib: {rows['native'] / rows['rllib']:.2f}x")


if __name__ == "__main__":
    main()
