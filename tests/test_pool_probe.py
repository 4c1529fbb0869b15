"""--pool auto in the engine: both pools built and timed at start-up, the faster kept, the other closed, and the
learner left as it was (the rule and the probe's turns: tests/test_pool_choice.py). No Ray is running in this
process before each test: the engine starts its own, as a run on one machine does."""

from __future__ import annotations

import numpy as np
import pytest
import ray
import torch

from rlscale.config import build_config
from rlscale.rollout.choice import MARGIN, MIN_TIMED
from rlscale.rollout.worker import SerialPool
from rlscale.training.engine import NativeEngine


@pytest.fixture
def no_ray():
    assert not ray.is_initialized()
    yield
    if ray.is_initialized():
        ray.shutdown()


def test_pool_auto_keeps_the_faster_pool_closes_the_other_and_leaves_the_learner_as_it_was(no_ray, monkeypatch):
    from rlscale.training import engine as engine_module

    seen, real_probe = {}, engine_module.probe

    def probe_watched(serial, actors, weights, learn, limits=None):
        seen["before"] = weights().copy()
        choice = real_probe(serial, actors, weights, learn, limits)
        seen["trained"] = weights().copy()
        return choice

    monkeypatch.setattr(engine_module, "probe", probe_watched)
    cfg = build_config("cartpole", None, {"n_envs": 8, "learner_threads": 1, "measure_noise": False})
    engine = NativeEngine(cfg, 8)
    try:
        choice = engine.pool_choice
        assert choice is not None and choice.timed >= MIN_TIMED
        assert (choice.chosen == "serial") == (choice.serial_speedup > 1 + MARGIN)
        assert isinstance(engine.pool, SerialPool) == (choice.chosen == "serial")
        assert engine.cfg.run.in_this_process == (choice.chosen == "serial")
        assert ray.is_initialized() == (choice.chosen == "actors")  # a dropped Ray pool took its Ray with it
        assert "chosen at start-up" in engine.describe()
        # The probe's batches were collected with the start's policy and not trained on by the run: warm-up steps.
        assert choice.probe_steps >= 2 * (MIN_TIMED + 1) * 8 * cfg.agent.n_steps
        assert engine.start_warmup_steps >= choice.probe_steps
        # The learner trained on every probe batch (its rollouts are timed after an update, as in the run),
        # and all of it was put back: the weights, optimizer state and counters the probe started from.
        assert not np.array_equal(seen["trained"], seen["before"])
        assert np.array_equal(engine.learner.flat_weights(), seen["before"])
        assert engine.learner.updates == 0 and engine.learner.optimizer.state_dict()["state"] == {}
        result = engine.update(cfg.agent.lr)
        assert result.agent_steps == 8 * cfg.agent.n_steps and engine.learner.updates == 1
    finally:
        engine.close()
    assert not ray.is_initialized()


def test_pool_auto_in_a_ray_already_running_keeps_the_actors(no_ray):
    ray.init(address="local", include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    cfg = build_config("cartpole", None, {"n_envs": 8, "learner_threads": 1})
    torch.manual_seed(0)
    engine = NativeEngine(cfg, 8)
    try:
        assert engine.pool_choice is None and not isinstance(engine.pool, SerialPool)
        assert "chosen at start-up" not in engine.describe()
    finally:
        engine.close()
