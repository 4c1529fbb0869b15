"""What the RLlib backend's noise-scale learner measures, minibatch by minibatch.

Trains RLlib PPO on CartPole (1 env runner, 4 envs) for a few iterations and
prints, for each measured first-epoch minibatch, the env groups' sizes, each
group gradient's squared norm, the minibatch gradient's, and the estimator's
|G|^2 and tr(Sigma). Groups should be about equal (a random quarter of the
batch per env); groups of very different sizes mean the minibatch is not a
random sample of rows (see docs/results.md, "The RLlib backend's noise scale
on CartPole").

    python scripts/probe_rllib_noise.py --iterations 6
"""

from __future__ import annotations

import argparse

import ray
import torch
from ray.tune.registry import register_env

from rlscale.config import build_config
from rlscale.integrations import rllib as integration


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=6, help="RLlib train() calls (512 agent steps each)")
    p.add_argument("--no-clip-value-loss", action="store_true", help="as the train flag of that name")
    args = p.parse_args()
    integration.check_rllib_version()
    torch.set_num_threads(1)
    cfg = build_config("cartpole", "ppo", {"backend": "rllib", "n_actors": 1, "n_envs": 4,
                                           "clip_value_loss": not args.no_clip_value_loss})
    seen: list[tuple] = []
    estimate = integration.estimate

    def recording_estimate(sq_norms, sizes, big_sq_norm):
        sample = estimate(sq_norms, sizes, big_sq_norm)
        seen.append((sizes, sq_norms, big_sq_norm, sample))
        return sample

    # The learner runs in this process (num_learners=0), so the module-level name is the one it calls.
    integration.estimate = recording_estimate
    ray.init(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        register_env("rlscale-env", integration.make_env)
        algo = integration.ppo_config(cfg).build_algo()
        negative = total = 0
        for iteration in range(args.iterations):
            algo.train()
            for sizes, sq_norms, big, sample in seen:
                print(f"iteration {iteration}  group sizes {[int(s) for s in sizes]}  "
                      f"group |g|^2 {[f'{n:.3g}' for n in sq_norms]}  minibatch |G|^2 {big:.3g}  "
                      f"-> |G|^2 {sample.grad_sq:.3g}  tr(Sigma) {sample.trace_sigma:.3g}")
                negative += sample.trace_sigma < 0
                total += 1
            seen.clear()
        print(f"tr(Sigma) estimate negative in {negative} of {total} minibatches")
        algo.stop()
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
