"""Resize latency of the RLlib backend on Pong: rebuild every env runner's envs with a new count.

    python scripts/bench_rllib_resize.py

Builds RLlib PPO with the PPO preset (8 envs over 2 env runners), trains once,
then resizes 8 -> 16 -> 32 -> 8 environments, printing each resize's seconds
and the next train() call's time and sampled steps (the train batch follows).
Needs rlscale[rllib].
"""

from __future__ import annotations

import time

import ray
import torch
from ray.tune.registry import register_env

from rlscale.config import build_config
from rlscale.integrations import rllib as integration


def main() -> None:
    torch.set_num_threads(1)
    cfg = build_config("pong", "ppo", {"backend": "rllib"})
    ray.init(include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    register_env("rlscale-env", integration.make_env)
    algo = integration.ppo_config(cfg).build_algo()
    try:
        algo.train()
        for n_envs in (16, 32, 8):
            seconds = integration.resize_envs(algo, n_envs)
            start = time.perf_counter()
            result = algo.train()
            took = time.perf_counter() - start
            steps = result["env_runners"]["num_env_steps_sampled"]
            print(f"resize -> {n_envs}: {seconds:.2f} s; next train() {took:.1f} s, {steps} steps", flush=True)
    finally:
        algo.stop()
        ray.shutdown()


if __name__ == "__main__":
    main()
