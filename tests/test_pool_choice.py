"""--pool auto's start-up choice between the serial pool and Ray actors (rlscale/rollout/choice.py): the rule,
and the probe's turns on real pools (two serial pools here: the probe is pure of Ray; the engine's probe of
Ray actors is in tests/test_pool_probe.py)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
import torch

from rlscale.config import build_config
from rlscale.envs.vector import probe_spec
from rlscale.models.nets import build_network
from rlscale.rollout.choice import MARGIN, PoolChoice, choose, time_pools
from rlscale.rollout.worker import SerialPool, flat_weights


def test_the_serial_pool_is_chosen_only_where_it_collects_more_than_the_margin_faster():
    actors = [1.0, 1.0, 1.0]
    assert choose([1.0 / (1 + 2 * MARGIN)] * 3, actors) == "serial"
    assert choose([1.0 / (1 + MARGIN / 2)] * 3, actors) == "actors"  # faster, but within the margin
    assert choose([1.2] * 3, actors) == "actors"
    # Medians: one slow rollout (a page fault, another process) does not decide.
    assert choose([0.5, 0.5, 9.0], [1.0, 1.0, 1.0]) == "serial"
    assert choose([1.0, 1.0, 1.0], [0.5, 0.5, 9.0]) == "actors"
    with pytest.raises(ValueError):
        choose([], actors)


def test_the_header_says_what_was_chosen_and_by_how_much():
    serial = PoolChoice("serial", 1.0, 1.25, 6, 3.2, 960)
    assert serial.serial_speedup == pytest.approx(1.25)
    assert "updates ran 1.25x as fast as with Ray actors" in serial.describe() and "3.2 s" in serial.describe()
    actors = PoolChoice("actors", 1.0, 1.02, 6, 3.2, 960)
    assert "serial pool ran 1.02x as fast, under the 1.05x it needs" in actors.describe()


class Recorded(SerialPool):
    """A serial pool that notes in ``log`` when it collects."""

    def __init__(self, cfg, spec, name: str, log: list[str]) -> None:
        super().__init__(cfg, spec)
        self.name, self.log = name, log

    def _finish(self, rollout):
        self.log.append(self.name)
        return super()._finish(rollout)


def test_the_pools_take_turns_each_batch_is_learned_from_and_the_first_turn_is_not_timed():
    cfg = build_config("cartpole", None, {"n_envs": 4, "pool": "serial"})
    spec = probe_spec(cfg.env)
    torch.manual_seed(0)
    weights = flat_weights(build_network(spec, cfg.agent.network, cfg.agent.mlp_hidden))
    log: list[str] = []
    pools = {"a": Recorded(cfg, spec, "a", log), "b": Recorded(cfg, spec, "b", log)}
    learned: list[str] = []
    try:
        seconds, steps = time_pools(pools, lambda: weights, lambda batch: learned.append(log[-1]),
                                    min_timed=3, max_timed=5, budget_seconds=0.0, block_seconds=0.0)
    finally:
        for pool in pools.values():
            pool.close()
    # min_timed reached and the budget spent: turn 0 (untimed), then three timed turns, the first of each
    # turn by the Thue-Morse sequence (every 4th update goes to each pool in turn, not always to one).
    assert log == ["a", "b", "b", "a", "b", "a", "a", "b"]
    assert log[::4] == ["a", "b"]  # every 4th update (A2C's periodic measurement) not always to one pool
    assert learned == log  # every batch went to the learner right after it was collected
    assert [len(seconds["a"]), len(seconds["b"])] == [3, 3]
    assert all(s > 0 for s in seconds["a"] + seconds["b"])
    assert steps == len(log) * 4 * cfg.agent.n_steps
    log.clear()
    pools = {"a": Recorded(cfg, spec, "a", log), "b": Recorded(cfg, spec, "b", log)}
    try:
        seconds, _ = time_pools(pools, lambda: weights, lambda batch: None, min_timed=1, max_timed=4,
                                budget_seconds=1e9, block_seconds=0.0)
        assert len(seconds["a"]) == len(seconds["b"]) == 4  # the budget not spent: stopped at max_timed
    finally:
        for pool in pools.values():
            pool.close()
    # Turns of a pool's updates back to back for block_seconds: the untimed turn and one timed turn,
    # a b | b a, each a block of many updates (1 ms each here), all but the untimed turn's timed.
    log.clear()
    seconds, _ = time_pools({"a": Sleeper("a", 0.001, log), "b": Sleeper("b", 0.001, log)}, lambda: weights,
                            lambda batch: None, min_timed=1, max_timed=1000, budget_seconds=0.0, block_seconds=0.1)
    runs = runs_of(log)  # a's untimed turn, b's untimed and timed turns back to back, a's timed turn
    assert [run[0] for run in runs] == ["a", "b", "a"] and all(len(run) > 5 for run in runs)
    assert len(seconds["a"]) == len(runs[2]) and 0 < len(seconds["b"]) < len(runs[1])


class Sleeper:
    """A stand-in pool whose every rollout takes ``seconds`` (asleep, so the machine's load barely moves it) and
    notes in ``log`` when it is collected: for the probe's turns, which depend on time alone."""

    def __init__(self, name: str, seconds: float, log: list[str]) -> None:
        self.name, self.seconds, self.log = name, seconds, log

    def start(self, weights) -> None:
        pass

    def collect(self):
        time.sleep(self.seconds)
        self.log.append(self.name)
        return SimpleNamespace(size=20)


def runs_of(log: list[str]) -> list[list[str]]:
    """The log cut where the pool changes."""
    runs: list[list[str]] = []
    for name in log:
        if runs and runs[-1][0] == name:
            runs[-1].append(name)
        else:
            runs.append([name])
    return runs


def test_a_pool_with_enough_timed_updates_keeps_taking_whole_turns_until_the_other_has_too():
    # Pool a's updates take 1 ms, b's 20 ms: a has its 6 timed updates after one turn, b needs three turns.
    # A lone update of a between b's turns is what the probe avoids (its docstring: the scheduler favours a pool
    # that slept through the other's turn).
    log: list[str] = []
    seconds, _ = time_pools({"a": Sleeper("a", 0.001, log), "b": Sleeper("b", 0.02, log)}, lambda: None,
                            lambda batch: None, min_timed=6, max_timed=6, budget_seconds=0.0, block_seconds=0.05)
    assert len(seconds["b"]) >= 6 and len(seconds["a"]) > len(seconds["b"])
    a_runs = [run for run in runs_of(log) if run[0] == "a"]
    assert len(a_runs) >= 3 and all(len(run) > 5 for run in a_runs)


@pytest.mark.parametrize("settings, timed", [
    ({}, True),
    ({"pool": "actors"}, False),
    ({"pool": "serial"}, False),
    ({"overlap": True}, False),
    ({"learners": 2}, False),
    ({"envs_per_actor": 4, "n_envs": 8}, False),
    ({"address": "127.0.0.1:6379"}, False),
])
def test_only_a_run_of_its_own_on_this_machine_times_the_pools(settings, timed, monkeypatch):
    from rlscale.engine.native import pool_is_timed

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    cfg = build_config("cartpole", None, settings)
    assert pool_is_timed(cfg) is timed
    if timed:  # a Ray job's entrypoint joins its cluster ($RAY_ADDRESS): the actors stay
        monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
        assert not pool_is_timed(cfg)
        monkeypatch.delenv("RAY_ADDRESS")
        # A Ray this process already runs (a Ray Tune trial, the Python API in a Ray job's driver): the actors stay.
        import ray

        monkeypatch.setattr(ray, "is_initialized", lambda: True)
        assert not pool_is_timed(cfg)


def test_a_retired_serial_flag_says_how_to_say_it_and_a_bad_pool_is_one_line():
    from tests.conftest import run_in_process

    result = run_in_process(["rlscale.train", "cartpole", "--serial"])
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "--pool serial" in result.stderr
    result = run_in_process(["rlscale.train", "cartpole", "--pool", "threads"])
    assert result.returncode == 2 and "Traceback" not in result.stderr and "auto" in result.stderr
