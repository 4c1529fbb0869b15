"""Does the pool probe read the serial pool low? Each update of the real probe (rlscale.rollout.choice.time_pools)
recorded with its place in its block: the first update after a switch of pools against the rest, for each pool.

Side by side in 3-s windows (research/experiments/kept_actors.py, each window's first update untimed) serial ran
1.10-1.11x the actors on Pong A2C at 16 envs, where the probe's quiet readings (0.5-s blocks, every update but
the first turn's timed) had a median of 1.047 (2026-11-30, research/notebook/performance.md).

    python research/experiments/probe_blocks.py a2c 16 --probes 4
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import numpy as np

from rlscale.config import build_config
from rlscale.distributed.ray_pool import RayPool
from rlscale.engine.native import NativeEngine
from rlscale.envs.vector import probe_spec
from rlscale.rollout.choice import time_pools
from rlscale.rollout.worker import Batch, Pool, SerialPool


class Recorded:
    """A pool whose updates are logged: (pool name, seconds from its start() to the end of the learner's update)."""

    def __init__(self, name: str, pool: Pool, log: list[tuple[str, float, int]]) -> None:
        self.name, self.pool, self.log = name, pool, log
        self.began = 0.0

    def start(self, weights: np.ndarray) -> None:
        self.began = time.perf_counter()
        self.pool.start(weights)

    def collect(self) -> Batch:
        batch = self.pool.collect()
        self.log.append((self.name, self.began, batch.size))
        return batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("algo", nargs="?", default="a2c")
    parser.add_argument("n_envs", type=int, nargs="?", default=16)
    parser.add_argument("--probes", type=int, default=4)
    parser.add_argument("--env", default="pong")
    parser.add_argument("--learner-threads", type=int, default=2)
    args = parser.parse_args()
    cfg = build_config(args.env, args.algo, {"n_envs": args.n_envs, "warmup_max_steps": 0,
                                             "learner_threads": args.learner_threads, "pool": "serial"})
    engine = NativeEngine(cfg, args.n_envs)  # the learner (and a serial pool, unused)
    sized = replace(engine.cfg, env=replace(engine.cfg.env, n_envs=args.n_envs))
    spec = probe_spec(cfg.env)
    serial, actors = SerialPool(sized, spec), RayPool(replace(sized, pool=replace(sized.pool, pool="actors")), spec)
    print(f"{args.env} {args.algo} {args.n_envs} envs, {args.learner_threads} learner threads; "
          "ms an agent step (median): the first update of each block after a switch, the rest", flush=True)
    try:
        for p in range(args.probes):
            log: list[tuple[str, float, int]] = []
            per_step: list[tuple[str, bool, float]] = []  # (pool, first in its block, seconds an agent step)

            def learn(batch: Batch, log=log, per_step=per_step) -> None:
                engine.learner.update(batch, cfg.agent.lr)
                name, began, size = log[-1]
                first = len(log) == 1 or log[-2][0] != name
                per_step.append((name, first, (time.perf_counter() - began) / size))

            pools = {"serial": Recorded("serial", serial, log), "actors": Recorded("actors", actors, log)}
            seconds, _ = time_pools(pools, engine.learner.flat_weights, learn)
            # time_pools leaves out its first turn (one block each): so does this.
            first_turn = len(per_step) - sum(len(v) for v in seconds.values())
            timed = per_step[first_turn:]
            cells = []
            for name in ("serial", "actors"):
                firsts = [s for n, f, s in timed if n == name and f]
                rest = [s for n, f, s in timed if n == name and not f]
                cells.append(f"{name} {statistics.median(firsts) * 1e3:.3f} ({len(firsts)}), "
                             f"{statistics.median(rest) * 1e3:.3f} ({len(rest)})")
            ratio_all = statistics.median(seconds["actors"]) / statistics.median(seconds["serial"])
            rest = {name: [s for n, f, s in timed if n == name and not f] for name in ("serial", "actors")}
            ratio_rest = statistics.median(rest["actors"]) / statistics.median(rest["serial"])
            print(f"probe {p}: " + "; ".join(cells) + f" | serial/actors speed: the probe's {ratio_all:.3f}x, "
                  f"without each block's first update {ratio_rest:.3f}x", flush=True)
    finally:
        for closing in (actors, serial, engine):
            closing.close()


if __name__ == "__main__":
    main()
