"""What a run does when no Ray is running in its process: it starts (and stops) its own."""

from __future__ import annotations

import os

import pytest

from rlscale.config import build_config

# slow: Ray started, joined and stopped as a user's process would (CI runs it: .ci/run).
pytestmark = pytest.mark.slow


def test_actors_of_an_embedded_ray_run_at_the_drivers_priority():
    """Ray nices its workers to 15; rlscale's embedded Ray keeps rollout actors level with the learner."""
    from rlscale.distributed.ray_pool import RayPool
    from rlscale.envs.vector import probe_spec

    cfg = build_config("cartpole", None, {"n_envs": 4, "n_actors": 2})
    pool = RayPool(cfg, probe_spec(cfg.env))  # starts (and on close stops) its own embedded Ray
    try:
        assert pool.owns_ray
        mine = os.getpriority(os.PRIO_PROCESS, 0)
        assert [os.getpriority(os.PRIO_PROCESS, pid) for pid in pool.worker_pids()] == [mine, mine]
    finally:
        pool.close()


def test_a_run_starts_its_own_ray_beside_a_cluster_on_the_machine(tmp_path):
    """Without --address a run is embedded: ray.init() alone would join the cluster started here
    (as `ray start --head` would) and refuse rlscale's settings for an embedded Ray."""
    from ray.cluster_utils import Cluster

    from tests.conftest import run_command

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        result = run_command(["rlscale.train", "cartpole", "--pool", "actors", "--n-envs", "4", "--total-frames", "400",
                              "--run-dir", str(tmp_path / "run")], timeout=120)
    finally:
        cluster.shutdown()
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "2 Ray actors on 1 node (1 CPU each)" in result.stdout  # its own 2 CPUs, not the cluster's 1
