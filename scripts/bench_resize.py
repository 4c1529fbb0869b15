"""Resize latency of the Ray actor pool on Pong: grow and shrink, each timed.

    python scripts/bench_resize.py [--repeats 3]

Each grow includes the new environments' random warm-up (0-500 random agent
steps each, paper A.4.2), which is most of its cost; a shrink closes vector
envs. Prints seconds per resize and the warm-up steps taken.
"""

from __future__ import annotations

import argparse
import statistics

from rlscale.config import build_config
from rlscale.env import probe_spec
from rlscale.nets import build_network
from rlscale.rollout import RayPool, flat_weights


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    cfg = build_config("pong", None, {"n_envs": 16})
    spec = probe_spec(cfg.env)
    weights = flat_weights(build_network(spec, "auto", 64))
    pool = RayPool(cfg, spec)
    plan = [(16, 32), (32, 16), (16, 64), (64, 16)]
    seconds: dict[tuple[int, int], list[float]] = {step: [] for step in plan}
    warmups: dict[tuple[int, int], list[int]] = {step: [] for step in plan}
    try:
        pool.collect(weights)
        for _ in range(args.repeats):
            for before, after in plan:
                assert pool.n_envs == before
                report = pool.resize(after)
                pool.collect(weights)  # the next update works at the new size
                seconds[(before, after)].append(report.seconds)
                warmups[(before, after)].append(report.warmup_steps)
    finally:
        pool.close()
    print(f"Pong, 2 Ray actors, median of {args.repeats}")
    print(f"{'resize':>10s} {'seconds':>8s} {'max':>6s} {'warm-up steps':>14s}")
    for step in plan:
        print(f"{step[0]:>4d} -> {step[1]:<3d} {statistics.median(seconds[step]):8.2f} "
              f"{max(seconds[step]):6.2f} {statistics.median(warmups[step]):14,.0f}")


if __name__ == "__main__":
    main()
