"""Elastic rollout actors on a Ray cluster with a real autoscaler (the fake multi-node provider).

``ray.cluster_utils.AutoscalingCluster`` runs Ray's own autoscaler with the
fake multi-node provider: it launches and removes real raylets on this machine
as "nodes" in answer to demand. A module of its own: starting it runs
``ray stop --force``, which stops every Ray on the machine, so it is skipped
where another Ray already runs (a developer's cluster is never touched).
"""

from __future__ import annotations

import os
import sys
import time

import pytest
import ray
from ray.cluster_utils import AutoscalingCluster

from rlscale.config import build_config
from rlscale.distributed.ray_pool import RayPool
from rlscale.envs.vector import probe_spec
from rlscale.models.nets import build_network
from rlscale.rollout.worker import flat_weights

# slow: Ray's autoscaler on a fake cluster (CI runs it: .ci/run).
pytestmark = pytest.mark.slow


class FakeMultiNodeCluster(AutoscalingCluster):
    """The fake provider's cluster config, written out: pip wheels of Ray lack its example.yaml."""

    def _generate_config(self, head_resources, worker_node_types, autoscaler_v2=False, **config_kwargs):
        assert not autoscaler_v2
        return {
            "cluster_name": "fake_multinode", "max_workers": 8,
            "provider": {"type": "fake_multinode", "use_node_id_as_ip": True, "disable_node_updaters": True,
                         "disable_launch_config_check": True},
            "available_node_types": {**worker_node_types, "ray.head.default": {
                "resources": head_resources, "node_config": {}, "max_workers": 0}},
            "head_node_type": "ray.head.default", "auth": {}, "upscaling_speed": 1.0,
            "idle_timeout_minutes": 0.03, "docker": {}, "initialization_commands": [], "setup_commands": [],
            "head_setup_commands": [], "worker_setup_commands": [], "head_start_ray_commands": [],
            "worker_start_ray_commands": [], "file_mounts": {}, "cluster_synced_files": [],
            "file_mounts_sync_continuously": False, "rsync_exclude": [], "rsync_filter": [], **config_kwargs,
        }


def _ray_running_here() -> bool:
    from ray._private.services import find_gcs_addresses

    return bool(find_gcs_addresses())


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


@pytest.fixture
def autoscaling_cluster(monkeypatch):
    if ray.is_initialized() or _ray_running_here():
        pytest.skip("a Ray instance runs on this machine; the autoscaling cluster would stop it")
    # AutoscalingCluster starts the `ray` command of this environment.
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    # Its monitor looks at demand every second instead of every 5 s: nodes come and go sooner.
    monkeypatch.setenv("AUTOSCALER_UPDATE_INTERVAL_S", "1")
    cluster = FakeMultiNodeCluster(
        head_resources={"CPU": 1},
        worker_node_types={"cpu_node": {"resources": {"CPU": 1}, "node_config": {}, "min_workers": 0,
                                        "max_workers": 2}})
    cluster.start()
    try:
        ray.init("auto", logging_level="ERROR", log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def cluster_cpus() -> float:
    return ray.cluster_resources().get("CPU", 0.0)


@pytest.mark.timeout(240)
def test_the_autoscaler_adds_nodes_for_a_growing_batch_and_removes_them_when_released(autoscaling_cluster):
    cfg = build_config("cartpole", None, {"n_envs": 2, "vector_size": 2, "envs_per_actor": 2, "n_steps": 5,
                                          "measure_noise": False, "address": "auto"})
    spec = probe_spec(cfg.env)
    weights = flat_weights(build_network(spec, cfg.agent.network, cfg.agent.mlp_hidden))
    pool = RayPool(cfg, spec)
    try:
        assert cluster_cpus() == 1.0 and len(pool.actors) == 1  # the head alone: one actor, one CPU
        pool.resize(6, background=True)  # three actors of 2 envs: two need nodes the cluster lacks
        deadline = time.monotonic() + 120
        batch = pool.collect(weights)
        while batch.n_envs < 6:  # training goes on meanwhile, with the environments that have a CPU
            assert time.monotonic() < deadline, "the autoscaler added no nodes"
            assert batch.n_envs + batch.starting_envs == 6
            batch = pool.collect(weights)
        assert cluster_cpus() == 3.0
        assert len(set(pool.placement())) == 3  # one actor on each node
        pool.resize(2, background=True)
        batch = pool.collect(weights)
        assert batch.n_envs == 2 and len(pool.actors) == 1
    finally:
        pool.close()  # the request falls to nothing: idle nodes go after the idle timeout
    wait_for(lambda: cluster_cpus() == 1.0, timeout=90, what="the autoscaler to remove the idle nodes")
