"""How should actors deliver PPO's 128-step horizon: one call, or 5-step fragments?

    python scripts/bench_fragments.py [--repeats 5]

Pong, 8 envs on 2 Ray actors, the same weights: time per 128 agent steps per
environment when each actor is asked once for 128 steps, and when it is asked
26 times for 5 steps (130 steps; the time is scaled to 128).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

from rlscale.config import build_config
from rlscale.env import probe_spec
from rlscale.nets import build_network
from rlscale.rollout import RayPool, flat_weights


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    cfg = build_config("pong", "ppo", {"warmup_max_steps": 0})
    spec = probe_spec(cfg.env)
    weights = flat_weights(build_network(spec, "auto", 64))
    pool = RayPool(cfg, spec)
    one_call, fragments = [], []
    try:
        pool.collect(weights)
        for _ in range(args.repeats):
            pool.cfg = replace(cfg, agent=replace(cfg.agent, n_steps=128))
            start = time.perf_counter()
            pool.collect(weights)
            one_call.append(time.perf_counter() - start)
            pool.cfg = replace(cfg, agent=replace(cfg.agent, n_steps=5))
            start = time.perf_counter()
            for _ in range(26):
                pool.collect(weights)
            fragments.append((time.perf_counter() - start) * 128 / 130)
    finally:
        pool.close()
    a, b = statistics.median(one_call), statistics.median(fragments)
    print(f"Pong, 8 envs, 2 Ray actors, median of {args.repeats}: seconds per 128-step horizon")
    print(f"one call of 128 steps   {a:6.2f} s  ({8 * 128 / a:,.0f} agent steps/s)")
    print(f"26 calls of 5 steps     {b:6.2f} s  ({8 * 128 / b:,.0f} agent steps/s)  x{b / a:.2f}")


if __name__ == "__main__":
    main()
