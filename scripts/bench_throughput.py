"""Pong throughput, side by side in one run: the emulator alone vs rlscale end to end.

    python scripts/bench_throughput.py [--seconds 60] [--n-envs 16]

Prints agent steps/s of (1) ale-py's native vector env stepping random actions
and (2) rlscale's A2C training loop through the Ray actor pool with the noise
scale on (the default `python -m rlscale.train pong` settings), and their ratio.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def emulator_alone(n_envs: int, seconds: float) -> float:
    from ale_py.vector_env import AtariVectorEnv

    env = AtariVectorEnv("pong", n_envs, reward_clipping=False, autoreset_mode="SameStep")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        env.step(rng.integers(0, 6, size=n_envs))
        steps += n_envs
    rate = steps / (time.perf_counter() - start)
    env.close()
    return rate


def rlscale_training(n_envs: int, seconds: float, extra: dict) -> float:
    from rlscale.config import build_config
    from rlscale.train import build, train_loop

    cfg = build_config("pong", None, {"n_envs": n_envs, "log_interval": 1e9,
                                      "checkpoint_every": 10**9, **extra})
    with tempfile.TemporaryDirectory() as tmp:
        run = build(cfg, Path(tmp))
        try:
            cfg.env.total_frames = 4 * 20 * n_envs * cfg.agent.n_steps  # 20 updates to warm up
            train_loop(run)
            done, start = run.counters.agent_steps, time.perf_counter()
            # Budget a generous number of steps, then time what finishes in `seconds`.
            while time.perf_counter() - start < seconds:
                cfg.env.total_frames = 4 * (run.counters.agent_steps + 10 * n_envs * cfg.agent.n_steps)
                train_loop(run)
            return (run.counters.agent_steps - done) / (time.perf_counter() - start)
        finally:
            run.pool.close()
            run.logger.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--n-envs", type=int, default=16)
    args = p.parse_args()
    emu = emulator_alone(args.n_envs, args.seconds)
    train = rlscale_training(args.n_envs, args.seconds, {})
    print(f"Pong, {args.n_envs} envs, {args.seconds:.0f} s each, measured in one run")
    print(f"{'what':44s} {'agent steps/s':>14s} {'ratio':>7s}")
    print(f"{'emulator alone (native vector env, random)':44s} {emu:14,.0f} {1.0:7.2f}")
    print(f"{'rlscale A2C, 2 Ray actors, noise scale on':44s} {train:14,.0f} {train / emu:7.2f}")


if __name__ == "__main__":
    main()
