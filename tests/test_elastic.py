"""Elastic rollout actors (--envs-per-actor K): actors follow the batch, the autoscaler is asked for CPUs.

On an embedded Ray with two CPUs: the pool adds an actor when the batch
outgrows K environments per actor, retires it when the batch shrinks, keeps
training when an actor cannot get a CPU (its environments wait), and writes
its CPU request where Ray's autoscaler reads it (the v1 autoscaler's
resource-request key in the GCS; ``ray.autoscaler.sdk.request_resources``
writes it, the autoscaler's monitor polls it).
"""

from __future__ import annotations

import json
import time

import pytest

from rlscale.config import build_config
from rlscale.distributed.ray_pool import RayPool
from rlscale.envs.vector import probe_spec
from rlscale.rollout.worker import Batch


def requested_cpus(ray) -> list[float]:  # noqa: ANN001 - the ray module of the fixture
    from ray._private.ray_constants import AUTOSCALER_RESOURCE_REQUEST_CHANNEL
    from ray.experimental.internal_kv import _internal_kv_get

    raw = _internal_kv_get(AUTOSCALER_RESOURCE_REQUEST_CHANNEL)
    assert ray.is_initialized()
    return [bundle["CPU"] for bundle in json.loads(raw)] if raw else []


def collect_until(pool: RayPool, weights, n_envs: int, timeout: float = 60.0) -> Batch:
    """Collect rollouts until ``n_envs`` environments are in the batch (new ones build in the background)."""
    deadline = time.monotonic() + timeout
    while True:
        batch = pool.collect(weights)
        if batch.n_envs == n_envs or time.monotonic() > deadline:
            return batch


def elastic_cartpole() -> tuple[RayPool, object]:
    """A CartPole pool of 2 environments at 2 an actor (one actor), and a policy's flat weights."""
    from rlscale.models.nets import build_network
    from rlscale.rollout.worker import flat_weights

    cfg = build_config("cartpole", None, {"n_envs": 2, "vector_size": 2, "envs_per_actor": 2, "n_steps": 5,
                                           "measure_noise": False})
    spec = probe_spec(cfg.env)
    return RayPool(cfg, spec), flat_weights(build_network(spec, cfg.agent.network, cfg.agent.mlp_hidden))


@pytest.mark.timeout(240)
def test_elastic_pool_follows_the_batch_and_asks_the_autoscaler_for_cpus(ray_instance):
    from ray.autoscaler.v2.utils import is_autoscaler_v2

    assert not is_autoscaler_v2()  # the request is then the v1 key read below
    pool, weights = elastic_cartpole()
    try:
        assert len(pool.actors) == 1 and requested_cpus(ray_instance) == [1.0]
        assert "elastic: up to 2 envs each" in pool.describe()

        pool.resize(4, background=True)  # 4 envs at 2 per actor: a second actor
        assert len(pool.actors) == 2 and requested_cpus(ray_instance) == [1.0, 1.0]
        batch = collect_until(pool, weights, 4)
        assert batch.n_envs == 4 and batch.obs.shape[:2] == (5, 4)
        assert len(set(pool.placement())) == 1  # one node here; on a cluster SPREAD places them apart

        pool.resize(6, background=True)  # a third actor: this Ray has no third CPU
        assert requested_cpus(ray_instance) == [1.0, 1.0, 1.0]
        batch = pool.collect(weights)  # training goes on without it: its environments wait
        assert batch.n_envs == 4 and batch.starting_envs == 2

        pool.resize(2, background=True)  # shrink: the emptied actors retire at the next rollout
        batch = collect_until(pool, weights, 2)
        assert batch.n_envs == 2 and batch.starting_envs == 0
        assert len(pool.actors) == 1 and requested_cpus(ray_instance) == [1.0]
    finally:
        pool.close()
    assert requested_cpus(ray_instance) == []  # released


def test_envs_per_actor_must_fit_the_engine_and_the_vectors():
    from tests.conftest import run_in_process

    cases = {("--envs-per-actor", "3", "--set", "vector_size=2"): "must be a multiple of vector_size",
             ("--envs-per-actor", "4", "--pool", "serial"): "drop --pool serial",
             ("--envs-per-actor", "-4"): "--envs-per-actor must be zero or positive"}
    for flags, message in cases.items():
        result = run_in_process(["rlscale.train", "cartpole", *flags])  # the command's own main(argv)
        assert result.returncode == 2, result.stderr
        assert message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.timeout(120)
def test_an_elastic_pool_starts_without_the_actors_that_get_no_cpu(ray_instance):
    """As a resumed run with a large batch does: three actors of 2 envs, a Ray of two CPUs."""
    cfg = build_config("cartpole", None, {"n_envs": 6, "vector_size": 2, "envs_per_actor": 2, "n_steps": 5,
                                          "measure_noise": False})
    spec = probe_spec(cfg.env)
    start = time.monotonic()
    pool = RayPool(cfg, spec)
    try:
        from rlscale.models.nets import build_network
        from rlscale.rollout.worker import flat_weights

        assert time.monotonic() - start < 60  # it waited a bounded time for the third, then went on
        assert len(pool.actors) == 3 and requested_cpus(ray_instance) == [1.0, 1.0, 1.0]
        batch = pool.collect(flat_weights(build_network(spec, cfg.agent.network, cfg.agent.mlp_hidden)))
        assert batch.n_envs == 4 and batch.starting_envs == 2
    finally:
        pool.close()


@pytest.mark.timeout(240)
def test_an_elastic_pool_restarted_at_another_size_adds_or_retires_actors_for_it(ray_instance):
    """Pool.restart (a race of rlscale measure): all new environments at the asked size, placed at most K an
    actor, a second actor started for them and retired when a restart asks for fewer."""
    pool, weights = elastic_cartpole()
    try:
        pool.restart(4, seed=11)
        assert len(pool.actors) == 2 and pool.vector_envs_per_worker == [1, 1]
        assert collect_until(pool, weights, 4).n_envs == 4
        pool.restart(2, seed=12)
        assert pool.vector_envs_per_worker == [1, 0]
        assert collect_until(pool, weights, 2).n_envs == 2 and len(pool.actors) == 1  # the empty one retired
    finally:
        pool.close()
