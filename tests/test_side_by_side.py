"""The learner's passes side by side (``--learner-passes``): the team's update, the caller's threads left as
they were, compiled learners kept on the team, and ``auto``'s choice of the faster schedule."""

from __future__ import annotations

import copy
import threading
import time

import numpy as np
import pytest
import torch

from rlscale.agents.ppo import PPOLearner
from rlscale.agents.side_by_side import SideBySide, choose_pass_schedule
from rlscale.config import build_config
from rlscale.errors import UserError
from rlscale.models.nets import build_network
from rlscale.rollout.worker import flat_weights
from tests.floats import largest, sum_tolerance
from tests.test_gpu import CONV_POSITIONS
from tests.test_learner import SPECS, random_batch

SPEC = SPECS["nature_cnn"]
N_ENVS, N_STEPS = 8, 16  # 128 rows: 4 minibatches of 32
# No noise measurement: every pass is one that may go side by side. TF-style RMSprop (tests/floats.py), and no
# clipping: a clipped step would hide a gradient off by a factor.
SETTINGS = {"n_envs": N_ENVS, "n_steps": N_STEPS, "noise_settle": 0, "measure_noise": False,
            "optimizer": "rmsprop_tf", "learner_precision": "fp32", "learner_compile": "off", "max_grad_norm": 0.0}


def team_and_side_by_side(**settings: object) -> tuple[PPOLearner, PPOLearner, object]:
    cfg = build_config("pong", "ppo", {**SETTINGS, **settings})
    torch.manual_seed(0)
    model = build_network(SPEC, "auto", 64)
    batch = random_batch(SPEC, cfg.agent.n_steps, cfg.env.n_envs)
    batch.logprobs[:] = np.log(1.0 / SPEC.n_actions)
    team, side = PPOLearner(copy.deepcopy(model), cfg), PPOLearner(copy.deepcopy(model), cfg)
    side.route.side_by_side = SideBySide(2)
    return team, side, batch


def assert_same_update(team: PPOLearner, side: PPOLearner, batch: object) -> None:
    start = torch.from_numpy(flat_weights(team.model))
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # the side-by-side parts follow the torch thread count: 2 parts
    try:
        calls = []
        part_gradient = side.route.side_by_side.gradients

        def counted(*args: object, **kwargs: object) -> object:
            calls.append(threading.current_thread().name)
            return part_gradient(*args, **kwargs)

        side.route.side_by_side.gradients = counted
        for learner in (team, side):
            learner.update(batch)
        assert torch.get_num_threads() == 2  # the workers' one thread each is theirs alone
    finally:
        torch.set_num_threads(threads)
        side.close()
    a = team.cfg.agent
    assert len(calls) == a.n_epochs * a.n_minibatches  # every pass went side by side
    reference, result = (torch.from_numpy(flat_weights(x.model)) for x in (team, side))
    rows = N_ENVS * N_STEPS * CONV_POSITIONS  # the most terms one weight's gradient sums in an update
    torch.testing.assert_close(result, reference, **sum_tolerance(a.n_epochs * rows, largest(reference - start)))
    assert not torch.equal(result, start)


def test_side_by_side_passes_give_the_teams_update():
    assert_same_update(*team_and_side_by_side())


def test_a_compiled_learner_keeps_the_team_and_says_why():
    # Two threads in compiled code deadlocked where one compiled again (torch.compile is not thread-safe).
    team, _, batch = team_and_side_by_side(learner_compile="on")
    obs = torch.from_numpy(batch.obs.reshape(-1, *SPEC.obs_shape)[:32])
    assert team.compile_network(obs).startswith("compiled"), "the test needs a compiler"
    assert team.share_passes("side-by-side", obs, 2) == "team passes (compiled passes run on one thread's team)"
    assert team.route.side_by_side is None


def test_side_by_side_and_compiled_passes_are_one_line_and_exit_2():
    with pytest.raises(UserError, match="torch.compile is not thread-safe"):
        build_config("pong", "ppo", {"learner_passes": "side-by-side", "learner_compile": "on"})


def test_side_by_side_passes_are_the_sum_of_their_parts_not_a_copy_of_one():
    # The parts' gradients weighted by their rows: a part left out or counted twice is far off.
    team, side, batch = team_and_side_by_side()
    workers = side.route.side_by_side
    try:
        rows = np.arange(64)
        grads = lambda part: ([torch.full((1,), float(part.sum()) / part.size)], {"x": float(part.size)})  # noqa: E731
        total, stats = workers.gradients(grads, rows, parts=2)
        assert float(total[0]) == pytest.approx(rows.mean())
        assert stats["x"] == pytest.approx(32.0)
    finally:
        side.close()


def slowed_on(thread: str, forward):
    """``forward`` made 20 ms slower on the calling thread (``main``) or on the pass workers (``workers``)."""

    def slowed(obs: torch.Tensor):
        on_worker = threading.current_thread().name.startswith("learner-pass")
        if on_worker == (thread == "workers"):
            time.sleep(0.02)
        return forward(obs)

    return slowed


@pytest.mark.parametrize(("slow", "expected"), [("main", "side-by-side"), ("workers", "team")])
def test_auto_takes_the_schedule_that_timed_faster(slow, expected):
    # A real timing of both schedules, one of them made slower: the rule picks the other, and says so.
    team, _, batch = team_and_side_by_side()
    obs = torch.from_numpy(batch.obs.reshape(-1, *SPEC.obs_shape)[:16])
    schedule = choose_pass_schedule(team.params, slowed_on(slow, team.forward), obs, threads=2, rounds=3)
    assert schedule.kind == expected, schedule.why
    assert schedule.why.startswith("measured: 2 passes side by side ")
