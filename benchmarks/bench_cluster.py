"""Throughput of the rollout pool on a simulated Ray cluster, against the number of actors.

    python benchmarks/bench_cluster.py [--seconds 20] [--actors 1 2 4 8]

Starts a ray.cluster_utils.Cluster on this machine (a head without CPUs for
actors, and one worker node of 1 CPU per actor), then for each actor count
collects Pong rollouts of 16 environments per actor with a fixed policy (no
learner) and prints agent steps per second, and the time of one update's
rollout split into the slowest actor's stepping and the rest (transfer and
scheduling). Every simulated node shares this machine's cores, so past the
core count more actors cannot add throughput: the table measures the
framework's overhead as the pool widens, not a real cluster's speed-up.
"""

from __future__ import annotations

import argparse
import time

import ray
from ray.cluster_utils import Cluster

from rlscale.config import build_config
from rlscale.distributed.ray_pool import RayPool
from rlscale.envs.vector import probe_spec
from rlscale.models.nets import build_network
from rlscale.rollout.worker import flat_weights


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--envs-per-actor", type=int, default=16)
    args = p.parse_args()
    print(f"{'actors':>6s} {'nodes':>6s} {'envs':>5s} {'agent steps/s':>14s} {'s/update':>9s}")
    for n_actors in args.actors:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
        for _ in range(n_actors):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        n_envs = n_actors * args.envs_per_actor
        cfg = build_config("pong", "a2c", {"n_envs": n_envs, "n_actors": n_actors, "address": cluster.address,
                                          "max_envs": max(256, n_envs)})
        spec = probe_spec(cfg.env)
        weights = flat_weights(build_network(spec, "auto", 64))
        pool = RayPool(cfg, spec)
        try:
            nodes = len(set(pool.placement()))
            pool.collect(weights)
            steps, updates, start = 0, 0, time.perf_counter()
            while time.perf_counter() - start < args.seconds:
                steps += pool.collect(weights).size
                updates += 1
            elapsed = time.perf_counter() - start
        finally:
            pool.close()
            if ray.is_initialized():
                ray.shutdown()
            cluster.shutdown()
        print(f"{n_actors:>6d} {nodes:>6d} {n_envs:>5d} {steps / elapsed:>14,.0f} {elapsed / updates:>9.3f}",
              flush=True)


if __name__ == "__main__":
    main()
