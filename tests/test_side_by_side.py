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
from rlscale.api import settings_argv
from rlscale.config import build_config
from rlscale.engine.native import NativeEngine
from rlscale.errors import UserError
from rlscale.models.nets import build_network
from rlscale.rollout.worker import flat_weights
from tests.conftest import run_in_process
from tests.floats import largest, sum_tolerance
from tests.test_gpu import CONV_POSITIONS
from tests.test_learner import SPECS, random_batch

SPEC = SPECS["nature_cnn"]
# 60 rows: 4 minibatches of 15 rows, each split in parts of 8 and 7 rows, in passes of ~3 rows
# (--learner-chunk-rows: 3 + 3 + 2 and 4 + 3): parts and passes of unequal sizes, so a wrong weight at either
# level shows.
N_ENVS, N_STEPS = 4, 15
# No noise measurement: every pass is one that may go side by side. TF-style RMSprop (tests/floats.py), and no
# clipping: a clipped step would hide a gradient off by a factor.
SETTINGS = {"n_envs": N_ENVS, "n_steps": N_STEPS, "noise_settle": 0, "measure_noise": False, "learner_chunk_rows": 3,
            "optimizer": "rmsprop_tf", "learner_precision": "fp32", "learner_compile": "off", "max_grad_norm": 0.0}


def learner_and_batch(**settings: object) -> tuple[PPOLearner, object]:
    cfg = build_config("pong", "ppo", {**SETTINGS, **settings})
    torch.manual_seed(0)
    batch = random_batch(SPEC, cfg.agent.n_steps, cfg.env.n_envs)
    batch.logprobs[:] = np.log(1.0 / SPEC.n_actions)
    return PPOLearner.from_config(build_network(SPEC, "auto", 64), cfg), batch


def test_side_by_side_passes_give_the_teams_update():
    team, batch = learner_and_batch()
    side = PPOLearner(copy.deepcopy(team.model), team.agent, team.noise_settings, team.settings, team.lagged)
    side.route.side_by_side = workers = SideBySide(2)
    start = torch.from_numpy(flat_weights(team.model))
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # the side-by-side parts follow the torch thread count: 2 parts
    try:
        calls = []
        split = workers.gradients
        workers.gradients = lambda *args, **kwargs: calls.append(1) or split(*args, **kwargs)
        for learner in (team, side):
            learner.update(batch)
        assert torch.get_num_threads() == 2  # the workers' one thread each is theirs alone
    finally:
        torch.set_num_threads(threads)
        side.close()
    a = team.agent
    assert len(calls) == a.n_epochs * a.n_minibatches  # every pass went side by side
    reference, result = (torch.from_numpy(flat_weights(x.model)) for x in (team, side))
    rows = N_ENVS * N_STEPS * CONV_POSITIONS  # the most terms one weight's gradient sums in an update
    torch.testing.assert_close(result, reference, **sum_tolerance(a.n_epochs * rows, largest(reference - start)))
    assert not torch.equal(result, start)


def test_a_compiled_learner_keeps_the_team_and_says_why():
    # Two threads in compiled code deadlocked where one compiled again (torch.compile is not thread-safe).
    learner, batch = learner_and_batch(learner_compile="on")
    obs = torch.from_numpy(batch.obs.reshape(-1, *SPEC.obs_shape)[:16])
    assert learner.compile_network(obs).startswith("compiled"), "the test needs a compiler"
    note = learner.share_passes("side-by-side", lambda: obs, 2)
    assert note == "team passes (compiled passes run on one thread's team)"
    assert learner.route.side_by_side is None


@pytest.mark.parametrize(("settings", "message"), [
    ({"learner_passes": "side-by-side", "learner_compile": "on"}, "torch.compile is not thread-safe"),
    ({"learner_passes": "auto", "backend": "rllib"}, "learner_passes shares the native engine's one learner"),
])
def test_side_by_side_where_it_cannot_run_is_one_line_and_exit_2(settings, message):
    with pytest.raises(UserError, match=message):
        build_config("pong", "ppo", settings)
    out = run_in_process(["rlscale.train", "pong", *settings_argv(None, settings)])
    assert out.returncode == 2 and message.split(":")[0] in out.stderr and "Traceback" not in out.stderr


def test_side_by_side_passes_are_the_sum_of_their_parts_not_a_copy_of_one():
    # The parts' gradients weighted by their rows (63 rows: parts of 32 and 31): a part left out,
    # counted twice or weighted 1/parts is off.
    workers = SideBySide(2)
    try:
        rows = np.arange(63)
        grads = lambda part: ([torch.full((1,), float(part.mean()))], {"x": float(part.size)})  # noqa: E731
        total, stats = workers.gradients(grads, rows, parts=2)
        assert float(total[0]) == pytest.approx(rows.mean())
        assert stats["x"] == pytest.approx((32 * 32 + 31 * 31) / 63)
    finally:
        workers.close()


def test_the_engine_runs_side_by_side_eager_says_so_and_stops_its_workers(tmp_path):
    # A bf16 PPO learner would compile (--learner-compile auto); asked for side by side, it runs eager.
    cfg = build_config("pong", "ppo", {"n_envs": 4, "n_steps": 8, "pool": "serial", "learner_threads": 2,
                                       "learner_precision": "bf16", "learner_passes": "side-by-side",
                                       "warmup_max_steps": 0})
    before = {t.name for t in threading.enumerate()}
    engine = NativeEngine(cfg, 4)
    try:
        assert "side-by-side passes (set)" in engine.describe() and "compiled" not in engine.describe()
        assert engine.learner.compiled is None and engine.learner.route.side_by_side is not None
        assert sum(t.name.startswith("learner-pass") for t in threading.enumerate()) == 2
        engine.update(cfg.agent.lr)
    finally:
        engine.close()
    assert {t.name for t in threading.enumerate()} <= before


def slowed_on(thread: str, forward):
    """``forward`` made 100 ms slower on the calling thread (``main``) or on the pass workers (``workers``)."""

    def slowed(obs: torch.Tensor):
        on_worker = threading.current_thread().name.startswith("learner-pass")
        if on_worker == (thread == "workers"):
            time.sleep(0.1)  # far above a loaded machine's scheduling delays (20 ms flipped once in the suite)
        return forward(obs)

    return slowed


@pytest.mark.parametrize(("slow", "expected"), [("main", "side-by-side"), ("workers", "team")])
def test_auto_takes_the_schedule_that_timed_faster(slow, expected):
    # A real timing of both schedules, one of them made slower: the rule picks the other, and says so.
    learner, batch = learner_and_batch()
    obs = torch.from_numpy(batch.obs.reshape(-1, *SPEC.obs_shape)[:16])
    workers = SideBySide(2)
    try:
        schedule = choose_pass_schedule(learner.params, slowed_on(slow, learner.forward), obs, workers, rounds=3)
    finally:
        workers.close()
    assert schedule.kind == expected, schedule.why
    assert schedule.why.startswith("measured: 2 passes side by side ")
