"""Does a change alter PPO's update, or only its rounding? Pong's PPO learner at two commits, side by side.

``--save`` runs Pong's PPO learner (fp32, the preset's settings plus any ``key=value`` overrides) from one
seeded network through three updates on fixed random batches (8 envs x 128 steps, 4 epochs x 4 minibatches
each) and saves the parameters after each. ``--compare`` prints each saved run's distance from the first,
relative to how far the first one moved. Rounding alone already separates runs: the same code with 2 torch
threads instead of 1 gives the scale to read a change against (Adam's steps amplify float differences).

    git worktree add /tmp/old 7ed57cc
    (cd /tmp/old && python $REPO/benchmarks/ppo_update_drift.py --save /tmp/old.npy)
    (cd /tmp/old && python $REPO/benchmarks/ppo_update_drift.py --save /tmp/old-2t.npy --threads 2)
    python benchmarks/ppo_update_drift.py --save /tmp/new.npy
    python benchmarks/ppo_update_drift.py --compare /tmp/old.npy /tmp/old-2t.npy /tmp/new.npy

The checkout measured is the working directory's (its ``rlscale`` and ``tests`` come first on the path),
and the script imports only what every commit since 2026-11-22 has, so it runs against old checkouts as above.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import numpy as np

UPDATES = 3


def save(path: Path, threads: int, overrides: list[str]) -> None:
    sys.path.insert(0, str(Path.cwd()))  # the checkout to measure, ahead of the installed one
    import torch

    torch.set_num_threads(threads)
    from rlscale.agents.ppo import PPOLearner
    from rlscale.config import build_config
    from rlscale.models.nets import build_network
    from rlscale.rollout.worker import flat_weights
    from tests.test_learner import SPECS, random_batch

    spec = SPECS["nature_cnn"]
    settings = {k: ast.literal_eval(v) for k, v in (item.split("=", 1) for item in overrides)}
    cfg = build_config("pong", "ppo", {"learner_precision": "fp32", **settings})
    torch.manual_seed(0)
    learner = PPOLearner.from_config(build_network(spec, "auto", 64), cfg)
    params = [flat_weights(learner.model).copy()]
    for seed in range(UPDATES):
        batch = random_batch(spec, 128, 8, seed=seed)
        batch.logprobs[:] = np.log(1 / spec.n_actions)  # a fresh network's policy is near uniform
        learner.update(batch)
        params.append(flat_weights(learner.model).copy())
    np.save(path, np.stack(params))
    print(f"{path}: {learner.updates} optimizer steps, {threads} thread(s), rows per pass "
          f"{learner.route.chunk_rows}, noise measured on {cfg.noise.noise_minibatches or 'all'} minibatch(es)")


def compare(paths: list[Path]) -> None:
    reference = np.load(paths[0])
    print(f"|params - {paths[0].name}| / |{paths[0].name}'s own change since the start|, after each update:")
    for path in paths[1:]:
        other = np.load(path)
        ratios = [np.linalg.norm(other[k] - reference[k]) / np.linalg.norm(reference[k] - reference[0])
                  for k in range(1, len(reference))]
        print(f"  {path.name:24s} " + "  ".join(f"{r:.1e}" for r in ratios))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", type=Path, metavar="OUT.npy", help="run the learner and save its parameters")
    group.add_argument("--compare", type=Path, nargs="+", metavar="RUN.npy", help="saved runs, the reference first")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (--save)")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="config settings (--save), e.g. "
                        "learner_chunk_rows=128 noise_minibatches=0")
    args = parser.parse_args(argv)
    if args.save:
        save(args.save, args.threads, args.overrides)
    elif len(args.compare) < 2:
        parser.error("--compare needs a reference and at least one other run")
    else:
        compare(args.compare)
    return 0


if __name__ == "__main__":
    sys.exit(main())
