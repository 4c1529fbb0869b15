"""A grown pool's acting time: N MinAtar environments as one vector env, as vector envs of 2 taken into one
(what a worker does since 71fd7fd), and as vector envs of 2 stepped apart (what it did before).

One rollout worker in this process, the preset's network in fp32, the three layouts in turn for several
rounds (so the host's drift falls on each alike); prints each layout's median seconds per rollout.

    python research/experiments/grown_pool_layout.py --envs 16 64 128 256 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from rlscale.config import build_config
from rlscale.envs.vector import probe_spec
from rlscale.models.nets import build_network
from rlscale.rollout.worker import RolloutWorker, flat_weights

LAYOUTS = ("one vector env", "vector envs of 2, joined", "vector envs of 2, apart")


def seconds_per_rollout(layout: str, n_envs: int, args: argparse.Namespace) -> float:
    cfg = build_config("minatar-spaceinvaders", "a2c", {"env_id": args.env_id, "n_envs": n_envs, "vector_size": 2,
                                                       "warmup_max_steps": 0, "actor_precision": "fp32"})
    spec = probe_spec(cfg.env)
    torch.manual_seed(0)
    weights = flat_weights(build_network(spec, cfg.agent.network, cfg.agent.mlp_hidden))
    worker = RolloutWorker.of_run(cfg, spec, seed=0, inference_rows=n_envs)
    if layout == LAYOUTS[2]:  # the worker before 71fd7fd: each vector env kept apart
        worker._keep = worker.vector_envs.extend
    try:
        if layout == LAYOUTS[0]:
            worker.add_vector_env(list(range(n_envs)), seed=1)
        else:
            for i in range(0, n_envs, 2):
                worker.add_vector_env([i, i + 1], seed=1 + i)
        for _ in range(10):  # warm the caches
            worker.rollout(weights, args.n_steps)
        times = []
        for _ in range(args.rollouts):
            start = time.perf_counter()
            worker.rollout(weights, args.n_steps)
            times.append(time.perf_counter() - start)
        return statistics.median(times)
    finally:
        worker.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env-id", default="MinAtar/Asterix-v1")
    p.add_argument("--envs", type=int, nargs="+", default=[16, 64, 128, 256])
    p.add_argument("--n-steps", type=int, default=5, help="steps per rollout (the A2C presets')")
    p.add_argument("--rollouts", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(1)
    results: dict[tuple[int, str], list[float]] = {}
    for r in range(args.rounds):
        for n_envs in args.envs:
            for layout in LAYOUTS:
                results.setdefault((n_envs, layout), []).append(seconds_per_rollout(layout, n_envs, args))
        print(f"round {r + 1} of {args.rounds} done", flush=True)
    print(f"{args.env_id}, {args.n_steps} steps a rollout, median over {args.rollouts} rollouts, each round's median:")
    for n_envs in args.envs:
        apart = statistics.median(results[(n_envs, LAYOUTS[2])])
        for layout in LAYOUTS:
            ms = [1e3 * t for t in results[(n_envs, layout)]]
            print(f"  {n_envs:4d} envs  {layout:26s} {statistics.median(ms):6.2f} ms  "
                  f"(rounds: {', '.join(f'{m:.2f}' for m in ms)})  {statistics.median(ms) / 1e3 / apart:.2f}x apart")


if __name__ == "__main__":
    main()
