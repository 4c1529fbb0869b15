"""--pool auto in the engine: both pools built and timed at start-up, the chosen one kept and restarted from the
run's seed, the other closed, and the learner left as it was (the rule, the probe's turns and where the probe
applies: tests/test_pool_choice.py). No Ray is running in this process before each test: the engine starts its own, as
a run on one machine does."""

from __future__ import annotations

import numpy as np
import pytest
import ray
import torch

from rlscale.config import build_config
from rlscale.engine import native as engine_module
from rlscale.engine.native import NativeEngine
from rlscale.rollout import choice
from rlscale.rollout.choice import MIN_TIMED, ProbeLimits
from rlscale.rollout.worker import SerialPool


@pytest.fixture
def no_ray():
    assert not ray.is_initialized()
    yield
    if ray.is_initialized():
        ray.shutdown()


def spy_on_close(monkeypatch) -> list[str]:
    """The kind of each pool closed from now on, in order."""
    from rlscale.distributed.ray_pool import RayPool

    closed: list[str] = []
    for kind, cls in (("serial", SerialPool), ("actors", RayPool)):
        def close(self, real=cls.close, kind=kind):
            closed.append(kind)
            real(self)

        monkeypatch.setattr(cls, "close", close)
    return closed


def cartpole():
    return build_config("cartpole", None, {"n_envs": 8, "learner_threads": 1, "measure_noise": False})


@pytest.mark.parametrize("chosen", ["serial", "actors"])
def test_pool_auto_keeps_the_chosen_pool_closes_the_other_and_leaves_the_learner_as_it_was(chosen, no_ray,
                                                                                           monkeypatch):
    # The timing would take serial on CartPole every time (2.9x here): the choice is forced both ways.
    monkeypatch.setattr(choice, "choose", lambda serial, actors: chosen)
    seen, real_probe = {}, engine_module.probe

    def probe_watched(serial, actors, weights, learn, limits=None):
        seen["before"], seen["rng"] = weights().copy(), torch.get_rng_state()
        seen["dropped_warmup"] = (actors if chosen == "serial" else serial).warmup_steps
        seen["kept_warmup"] = (serial if chosen == "serial" else actors).warmup_steps
        result = real_probe(serial, actors, weights, learn, limits)
        seen["trained"] = weights().copy()
        torch.rand(1)  # the random state moves on here: the engine has to put it back
        return result

    monkeypatch.setattr(engine_module, "probe", probe_watched)
    closed = spy_on_close(monkeypatch)
    restarted: list[int] = []  # the random warm-up steps of the kept pool's restart
    real_restart = SerialPool.restart  # Pool.restart, which both pools inherit

    def restart(self, n_envs, seed):
        restarted.append(real_restart(self, n_envs, seed))
        return restarted[-1]

    monkeypatch.setattr(SerialPool, "restart", restart)
    from rlscale.distributed.ray_pool import RayPool

    monkeypatch.setattr(RayPool, "restart", restart)
    cfg = cartpole()
    # The choice is forced, so the probe times its fewest updates and no more (its full budget: 8 s of both
    # cores); what it timed still goes through the engine's bookkeeping below.
    engine = NativeEngine(cfg, 8, probe_limits=ProbeLimits(budget_seconds=0.0, block_seconds=0.0))
    try:
        assert closed == ["actors" if chosen == "serial" else "serial"]  # the other pool, at start-up
        probe = engine.pool_choice
        assert probe is not None and probe.chosen == chosen and probe.timed >= MIN_TIMED
        assert isinstance(engine.pool, SerialPool) == (chosen == "serial")
        assert engine.cfg.pool.in_this_process == (chosen == "serial")
        assert ray.is_initialized() == (chosen == "actors")  # a dropped Ray pool took its Ray with it
        assert "chosen at start-up" in engine.describe()
        # The probe's batches were collected with the start's policy and not trained on by the run: warm-up steps.
        assert probe.probe_steps >= 2 * (MIN_TIMED + 1) * 8 * cfg.agent.n_steps
        # All of them count with the warm-up steps: the kept pool's own, the probe's, the dropped pool's warm-up and
        # the restart's.
        assert engine.start_warmup_steps == (seen["kept_warmup"] + probe.probe_steps + seen["dropped_warmup"]
                                             + restarted[0])
        # The learner trained on the probe's batches (a pool's update is timed whole), and all of it was put
        # back: the weights, optimizer state, counters and random state the probe started from.
        assert not np.array_equal(seen["trained"], seen["before"])
        assert np.array_equal(engine.learner.flat_weights(), seen["before"])
        assert engine.learner.updates == 0 and engine.learner.optimizer.state_dict()["state"] == {}
        assert torch.equal(torch.get_rng_state(), seen["rng"])
        # The noise meter settles on the restarted environments as on a new run's; no skipped update carried over.
        assert engine.learner.batch_envs == 0 and engine.learner.skipped_in_a_row == 0
        if chosen == "serial":
            # The kept pool's environments restarted from the run's seed, however many updates the probe timed:
            # its first batch is what a fresh serial pool restarted from that seed collects.
            fresh = SerialPool(engine.cfg, engine.pool.worker.spec)
            try:
                fresh.restart(8, cfg.run.seed)
                weights = engine.learner.flat_weights()
                ours, theirs = engine.pool.collect(weights), fresh.collect(weights)
            finally:
                fresh.close()
            assert np.array_equal(ours.obs, theirs.obs) and np.array_equal(ours.actions, theirs.actions)
        result = engine.update(cfg.agent.lr)
        assert result.agent_steps == 8 * cfg.agent.n_steps and engine.learner.updates == 1
    finally:
        engine.close()
    assert not ray.is_initialized()


def test_a_probe_that_fails_closes_both_pools_and_their_ray(no_ray, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(engine_module, "probe", interrupted)
    closed = spy_on_close(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        NativeEngine(cartpole(), 8)
    assert sorted(closed) == ["actors", "serial"] and not ray.is_initialized()
