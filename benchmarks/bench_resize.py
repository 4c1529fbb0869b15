"""Resize latency of the Ray actor pool on Pong: grow and shrink, each timed.

    python benchmarks/bench_resize.py [--repeats 3]

Two ways of growing, side by side in one run:

* blocking:   the pool builds the new environments and runs their random
  warm-up (0-500 random agent steps each, paper A.4.2) before returning;
* background: what training uses. The workers build and warm up the new
  environments on a thread while they keep stepping the old ones; the call
  returns once every worker has taken the order, and the environments join
  the batch a few updates later.

For each resize it prints the seconds the training loop is blocked, and for
background grows also the seconds and updates until the batch has its new
size. A shrink closes vector envs (or drops ones still starting).
"""

from __future__ import annotations

import argparse
import statistics
import time

from rlscale.config import build_config
from rlscale.distributed.ray_pool import RayPool
from rlscale.envs.vector import probe_spec
from rlscale.models.nets import build_network
from rlscale.rollout.worker import flat_weights


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    cfg = build_config("pong", "a2c", {"n_envs": 16})
    spec = probe_spec(cfg.env)
    weights = flat_weights(build_network(spec, "auto", 64))
    pool = RayPool(cfg, spec)
    plan = [(16, 32), (32, 16), (16, 64), (64, 16)]
    rows: dict[tuple[str, int, int], list[tuple[float, float, int]]] = {}
    try:
        pool.collect(weights)
        for _ in range(args.repeats):
            for mode in ("blocking", "background"):
                for before, after in plan:
                    assert pool.n_envs == before
                    start = time.perf_counter()
                    report = pool.resize(after, background=mode == "background")
                    updates = 0
                    while True:  # until the batch has its new size
                        batch = pool.collect(weights)
                        updates += 1
                        if batch.n_envs == after:
                            break
                    full = time.perf_counter() - start
                    rows.setdefault((mode, before, after), []).append((report.seconds, full, updates))
    finally:
        pool.close()
    print(f"Pong, 2 Ray actors, vector envs of {cfg.env.vector_size}, median of {args.repeats}")
    print(f"{'mode':>10s} {'resize':>10s} {'blocked s':>10s} {'max':>6s} {'to full size s':>15s} {'updates':>8s}")
    for (mode, before, after), values in rows.items():
        blocked = [v[0] for v in values]
        print(f"{mode:>10s} {before:>4d} -> {after:<3d} {statistics.median(blocked):10.2f} {max(blocked):6.2f} "
              f"{statistics.median(v[1] for v in values):15.2f} {statistics.median(v[2] for v in values):8.0f}")


if __name__ == "__main__":
    main()
