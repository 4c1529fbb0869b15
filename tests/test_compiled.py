"""The learner's compiled passes (``--learner-compile``): the eager update's parameters, measured passes eager,
and eager with the reason where compiling fails."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from rlscale.agents.ppo import PPOLearner
from rlscale.config import build_config
from rlscale.errors import UserError
from rlscale.models.nets import build_network
from rlscale.rollout.worker import flat_weights
from tests.floats import largest, sum_tolerance
from tests.test_gpu import CONV_POSITIONS
from tests.test_learner import SPECS, random_batch

SPEC = SPECS["nature_cnn"]
N_ENVS, N_STEPS = 8, 16  # 128 rows: 4 minibatches of 32
# The noise scale on the first epoch's minibatches (PPO's default), every estimator on every batch (B_noise
# takes gradients of gradients), at once; TF-style RMSprop: Adam's first steps amplify rounding (tests/floats.py).
SETTINGS = {"n_envs": N_ENVS, "n_steps": N_STEPS, "noise_settle": 0, "curvature_every": 1,
            "noise_parts_every": 1, "optimizer": "rmsprop_tf", "learner_compile": "on"}


class CountingCalls(torch.nn.Module):
    """The compiled network, counting the passes that go through it."""

    def __init__(self, compiled: torch.nn.Module) -> None:
        super().__init__()
        self.compiled = compiled
        self.calls = 0

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.calls += 1
        return self.compiled(obs)


def learners(precision: str) -> tuple[PPOLearner, PPOLearner, object]:
    """An eager and a compiled PPO learner on the same network, and a batch."""
    cfg = build_config("pong", "ppo", {**SETTINGS, "learner_precision": precision})
    torch.manual_seed(0)
    model = build_network(SPEC, "auto", 64)
    batch = random_batch(SPEC, N_STEPS, N_ENVS)
    batch.logprobs[:] = np.log(1.0 / SPEC.n_actions)
    eager, compiled = PPOLearner.from_config(copy.deepcopy(model), cfg), PPOLearner.from_config(copy.deepcopy(model), cfg)
    minibatch = N_ENVS * N_STEPS // cfg.agent.n_minibatches
    note = compiled.compile_network(torch.from_numpy(batch.obs.reshape(-1, *SPEC.obs_shape)[:minibatch]))
    assert note.startswith("compiled (torch.compile"), note
    assert all(p.grad is None for p in compiled.model.parameters())  # the compiling pass leaves no gradient
    return eager, compiled, batch


def test_the_compiled_passes_give_the_eager_updates_parameters_and_the_measured_passes_run_eager():
    eager, compiled, batch = learners("fp32")
    counter = compiled.compiled = CountingCalls(compiled.compiled)
    start = torch.from_numpy(flat_weights(eager.model))
    for learner in (eager, compiled):
        learner.update(batch)
    a, measured = compiled.agent, compiled.noise_settings.noise_minibatches
    # The first epoch's first minibatch measures the noise scale and every estimator (eager); the rest run
    # compiled.
    assert measured == 1 and counter.calls == a.n_epochs * a.n_minibatches - measured
    reference, result = (torch.from_numpy(flat_weights(x.model)) for x in (eager, compiled))
    rows = N_ENVS * N_STEPS * CONV_POSITIONS  # the most terms one weight's gradient sums in an update
    torch.testing.assert_close(result, reference, **sum_tolerance(a.n_epochs * rows, largest(reference - start)))
    assert not torch.equal(result, start)
    readings = compiled.noise.metrics()
    assert readings.keys() == eager.noise.metrics().keys() and "noise/ghg" in readings  # B_noise measured too
    for tag, value in eager.noise.metrics().items():
        assert readings[tag] == pytest.approx(value, rel=1e-3, abs=1e-6), tag


def test_compiled_bf16_passes_differ_from_eager_bf16_ones_by_no_more_than_bf16_rounding():
    eager, compiled, batch = learners("bf16")
    fp32 = PPOLearner.from_config(copy.deepcopy(eager.model), build_config("pong", "ppo", {**SETTINGS,
                                                                               "learner_precision": "fp32"}))
    for learner in (eager, compiled, fp32):
        learner.update(batch)
    reference, bf16_eager, bf16_compiled = (torch.from_numpy(flat_weights(x.model)) for x in (fp32, eager, compiled))
    # Each rounds to bf16 in its own kernels: the compiled update may differ from the eager one by up to
    # bf16's rounding (what eager bf16 differs from fp32 by), not more (here it differed by 2% of that).
    rounding = float((bf16_eager - reference).norm())
    assert rounding > 0
    assert float((bf16_compiled - bf16_eager).norm()) <= rounding
    assert float((bf16_compiled - reference).norm()) <= 2 * rounding


def test_a_network_that_fails_to_compile_leaves_the_learner_eager_and_says_why():
    cfg = build_config("pong", "ppo", {**SETTINGS, "learner_precision": "fp32"})
    torch.manual_seed(0)
    learner = PPOLearner.from_config(build_network(SPEC, "auto", 64), cfg)
    batch = random_batch(SPEC, N_STEPS, N_ENVS)
    obs = torch.from_numpy(batch.obs.reshape(-1, *SPEC.obs_shape)[:32])
    torch._dynamo.reset()  # nothing compiled before may be reused: this one must build
    # A real failure of inductor's build: a C++ compiler that is not there (as on a machine without one).
    with torch._inductor.config.patch({"cpp.cxx": (None, "/nonexistent/g++"), "fx_graph_cache": False}):
        note = learner.compile_network(obs)
    torch._dynamo.reset()
    assert note.startswith("eager (torch.compile failed: ") and "C++ compiler" in note, note
    assert learner.compiled is None
    assert all(p.grad is None for p in learner.model.parameters())
    before = flat_weights(learner.model)
    learner.update(batch)  # trains eager
    assert not np.array_equal(flat_weights(learner.model), before)


def test_compiling_is_on_for_a_single_native_learner_only():
    assert build_config("pong", "ppo", {}).learner.learner_compile == "auto"
    for overrides in ({"learners": 2, "n_envs": 8}, {"backend": "rllib"}):
        with pytest.raises(UserError, match="learner_compile on compiles the native engine's one learner"):
            build_config("pong", "ppo", {"learner_compile": "on", **overrides}).validate()
